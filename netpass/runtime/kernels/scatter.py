"""Scatter kernels (reduction none): ``copy`` of the data into the output, then ``scatter_nd``
or ``scatter_elements`` writing the updates over it, one work-item per update element.
Repeated indices leave one of their updates (the ONNX ops leave that undefined)."""
from __future__ import annotations

from .common import Source, ctype, header, memoized
from .movement import ELEMENT_INDEX, index_tuple_code


@memoized
def copy(dtype) -> Source:
    """y[i] = x[i]: the data a scatter starts from."""
    t = ctype(dtype)
    text = header([dtype]) + f"""__kernel void copy(__global const {t}* X, int xoff,
                   __global {t}* Y, int yoff, int n)
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  Y[yoff + gid] = X[xoff + gid];
}}
"""
    return Source(text, "copy")


@memoized
def scatter_nd(dtype, idx_dtype, m: int) -> Source:
    """ScatterND with ``m`` index components: y[idx[p, 0..m-1], s] = u[p, s]. The updates are
    seen as [P, S] (P index tuples, S elements a slice); component c indexes a dim of ``d<c>``
    elements (a negative one counts from the end) with stride ``st<c>``; a tuple outside the
    data writes nothing."""
    t, it = ctype(dtype), ctype(idx_dtype)
    dims, comps = index_tuple_code(m)
    text = header([dtype]) + f"""__kernel void scatter_nd(__global const {it}* I, int ioff,
                         __global const {t}* U, int uoff, __global {t}* Y, int yoff,
                         int n, int S{dims})
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  const int p = gid / S, s = gid - p * S;
  long at = s;
  int ok = 1;
  {comps}
  if (ok) Y[yoff + at] = U[uoff + gid];
}}
"""
    return Source(text, "scatter_nd")


@memoized
def scatter_elements(dtype, idx_dtype) -> Source:
    """ScatterElements: y[o, idx[o, a, i], i] = u[o, a, i]. The indices and updates (one
    shape) are seen as [outer, A, inner] around the axis, the output as [outer, D, inner]; a
    negative index counts from the end, one outside [-D, D) writes nothing."""
    t, it = ctype(dtype), ctype(idx_dtype)
    text = header([dtype]) + f"""__kernel void scatter_elements(__global const {it}* I,
                               int ioff, __global const {t}* U, int uoff,
                               __global {t}* Y, int yoff, int n, int A, int D, int inner)
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  {ELEMENT_INDEX}
  if (k >= 0 && k < D) Y[yoff + ((long)o * D + k) * inner + i] = U[uoff + gid];
}}
"""
    return Source(text, "scatter_elements")
