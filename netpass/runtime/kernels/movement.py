"""Data-movement kernels: copies through an index map (``imap``), every output of a Split in
one launch (``split``), every input of a small Concat in one launch (``concat``), ``gather``,
``gather_elements`` and ``gather_sum``."""
from __future__ import annotations

from .common import Source, ctype, flit, header, is_float, memoized, offsets


@memoized
def imap(dtype, pad_value: float | None) -> Source:
    """y[i] = idx[i] < 0 ? pad : x[idx[i]]: any op whose outputs copy input elements."""
    t = ctype(dtype)
    pad = flit(pad_value) if (pad_value is not None and is_float(dtype)) else \
        str(int(pad_value or 0))
    text = header([dtype]) + f"""__kernel void imap(__global const {t}* X, int xoff,
                   __global {t}* Y, int yoff, __global const int* idx, int n)
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int k = idx[gid];
  Y[yoff + gid] = k < 0 ? ({t})({pad}) : X[xoff + k];
}}
"""
    return Source(text, "imap")


def _pieces(n: int, access) -> tuple[str, str]:
    """The axis cut into ``n`` pieces at c_1 .. c_{n-1} (of A), for element (o, a, i) of the
    [outer, A, inner] view: the bound arguments and the if / else chain running
    ``access(j, row)`` for the piece j holding a, ``row`` its row (o, a - c_j) in piece j."""
    bounds = "".join(f", int c{j}" for j in range(1, n))
    lo = ["0"] + [f"c{j}" for j in range(1, n)]
    hi = lo[1:] + ["A"]
    steps = []
    for j in range(n):
        row = f"o * {hi[j]} + a" if j == 0 else f"o * ({hi[j]} - {lo[j]}) + a - {lo[j]}"
        step = access(j, row)
        steps.append(step if j == n - 1 else f"if (a < {hi[j]}) {step}")
    return bounds, "\n  else ".join(steps)


@memoized
def split(dtype, n_out: int) -> Source:
    """Split along one axis in one launch: the input seen as [outer, A, inner]; element
    (o, a, i) goes to output j with c_j <= a < c_{j+1} (c_0 = 0, c_{n_out} = A) at
    (o, a - c_j, i). One work-item per input element, reads contiguous."""
    t = ctype(dtype)
    outs = "".join(f", __global {t}* Y{j}, int y{j}off" for j in range(n_out))
    bounds, chain = _pieces(n_out, lambda j, row: f"Y{j}[y{j}off + ({row}) * inner + i] = v;")
    text = header([dtype]) + f"""__kernel void split(__global const {t}* X, int xoff{outs},
                    int n, int A, int inner{bounds})
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int i = gid % inner; int q = gid / inner;
  int a = q % A; int o = q / A;
  {t} v = X[xoff + gid];
  {chain}
}}
"""
    return Source(text, "split")


@memoized
def concat(dtype, n_in: int) -> Source:
    """Concat along one axis in one launch (``split`` the other way): the output seen as
    [outer, A, inner]; element (o, a, i) comes from input j with c_j <= a < c_{j+1} (c_0 = 0,
    c_{n_in} = A) at (o, a - c_j, i). One work-item per output element, writes contiguous."""
    t = ctype(dtype)
    ins = "".join(f"__global const {t}* X{j}, int x{j}off, " for j in range(n_in))
    bounds, chain = _pieces(n_in, lambda j, row: f"v = X{j}[x{j}off + ({row}) * inner + i];")
    text = header([dtype]) + f"""__kernel void concat({ins}__global {t}* Y, int yoff,
                     int n, int A, int inner{bounds})
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int i = gid % inner; int q = gid / inner;
  int a = q % A; int o = q / A;
  {t} v;
  {chain}
  Y[yoff + gid] = v;
}}
"""
    return Source(text, "concat")


@memoized
def gather(dtype, idx_dtype) -> Source:
    t, it = ctype(dtype), ctype(idx_dtype)
    text = header([dtype]) + f"""__kernel void gather(__global const {t}* X, int xoff,
                     __global const {it}* I, int ioff,
                     __global {t}* Y, int yoff, int n, int nidx, int D, int inner)
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int in_i = gid % inner;
  int q = gid / inner;
  int j = q % nidx;
  int o = q / nidx;
  long k = (long)I[ioff + j];
  if (k < 0) k += D;
  Y[yoff + gid] = (k >= 0 && k < D) ? X[xoff + ((long)o * D + k) * inner + in_i] : ({t})0;
}}
"""
    return Source(text, "gather")


# C statements of GatherElements' and ScatterElements' work-item ``gid`` over [outer, A,
# inner]: its ``i`` and ``o``, and ``k``, its index along the axis of D (a negative one counts
# from the end)
ELEMENT_INDEX = """int i = gid % inner;
  int o = gid / inner / A;
  long k = (long)I[ioff + gid];
  if (k < 0) k += D;"""


def index_tuple_code(m: int) -> tuple[str, str]:
    """(int parameters, C statements) of an index tuple of ``m`` components read from
    ``I[ioff + p * m + c]``: component c indexes a dim of ``d<c>`` elements (a negative one
    counts from the end) with stride ``st<c>``, adding to ``at`` and clearing ``ok`` when out
    of range (GatherND's and ScatterND's tuples)."""
    dims = "".join(f", int d{c}, int st{c}" for c in range(m))
    comps = "\n  ".join(
        f"{{ long k = (long)I[ioff + p * {m} + {c}]; if (k < 0) k += d{c}; "
        f"ok = ok && k >= 0 && k < d{c}; at += k * st{c}; }}" for c in range(m))
    return dims, comps


@memoized
def gather_nd(dtype, idx_dtype, m: int) -> Source:
    """GatherND with ``m`` index components: y[p, s] = x[batch(p), idx[p, 0..m-1], s], one
    work-item per output element. The output is seen as [P, S] (P index tuples, S elements a
    slice), the data as [batches, dims, S]: tuple p belongs to batch p / per_batch (its
    ``batch_dims`` leading dims), component t indexes a dim of ``d<t>`` elements (a negative
    one counts from the end) with stride ``st<t>``; a tuple outside the data reads 0 (as
    ``gather``)."""
    t, it = ctype(dtype), ctype(idx_dtype)
    dims, comps = index_tuple_code(m)
    text = header([dtype]) + f"""__kernel void gather_nd(__global const {t}* X, int xoff,
                        __global const {it}* I, int ioff, __global {t}* Y, int yoff,
                        int n, int S, int per_batch, int batch_stride{dims})
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  const int p = gid / S, s = gid - p * S;
  long at = (long)(p / per_batch) * batch_stride + s;
  int ok = 1;
  {comps}
  Y[yoff + gid] = ok ? X[xoff + at] : ({t})0;
}}
"""
    return Source(text, "gather_nd")


@memoized
def gather_elements(dtype, idx_dtype) -> Source:
    """GatherElements: y[o, a, i] = x[o, idx[o, a, i], i], one work-item per output element.
    The output and the indices (one shape) are seen as [outer, A, inner] around the axis, the
    data as [outer, D, inner]; a negative index counts from the end, one outside [-D, D) reads
    0 (as ``gather``)."""
    t, it = ctype(dtype), ctype(idx_dtype)
    text = header([dtype]) + f"""__kernel void gather_elements(__global const {t}* X, int xoff,
                              __global const {it}* I, int ioff, __global {t}* Y, int yoff,
                              int n, int A, int D, int inner)
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  {ELEMENT_INDEX}
  Y[yoff + gid] = (k >= 0 && k < D) ? X[xoff + ((long)o * D + k) * inner + i] : ({t})0;
}}
"""
    return Source(text, "gather_elements")


@memoized
def gather_sum(idx_dtypes: tuple, rank: int) -> Source:
    """Rows of several float tables, gathered along axis 0 and summed (token and position
    embeddings): y[r, c] = sum_j X_j[I_j[r], c], the index tensors read through broadcast
    strides over the rows' dims ``d*``; one work-item per output element. A negative index
    counts from the end, one outside [-D_j, D_j) adds 0 (as ``gather``)."""
    m = len(idx_dtypes)
    tabs = [f"__global const float* X{j}, int xoff{j}, __global const {ctype(it)}* I{j}, "
            f"int off_i{j}" for j, it in enumerate(idx_dtypes)]
    ints = ["int n", "int inner"] + [f"int D{j}" for j in range(m)] + \
        [f"int d{k}" for k in range(rank)] + \
        [f"int s_i{j}_{k}" for j in range(m) for k in range(rank)]
    adds = "\n  ".join(f"k = (long)I{j}[o_i{j}]; if (k < 0) k += D{j};\n"
                       f"  if (k >= 0 && k < D{j}) acc += X{j}[xoff{j} + k * inner + c];"
                       for j in range(m))
    text = header([]) + f"""__kernel void gather_sum({', '.join(tabs)},
                         __global float* Y, int yoff, {', '.join(ints)})
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int c = gid % inner;
  int row = gid / inner;
  {offsets(rank, [f"i{j}" for j in range(m)], flat="row")}
  float acc = 0.0f;
  long k;
  {adds}
  Y[yoff + gid] = acc;
}}
"""
    return Source(text, "gather_sum")
