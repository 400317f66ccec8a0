"""Kernels for decoding, where a step feeds a few new tokens (``DECODE_ROWS`` at most) and
reads everything else from the key/value cache.

:func:`attention_decode`: fused attention over the cache in one launch per layer, the new
keys and values appended to the cache by the same kernel. A work-group of DLS items owns one
query row of one (batch, head): it scores the keys in chunks of CHUNK (the score ops applied
with their side inputs, as the row kernel of :func:`netpass.runtime.kernels.attention`), keeps
a running maximum and sum (online softmax across chunks), and accumulates the value rows into
the output columns, each column split over ``slices`` groups of items that each take every
``slices``-th key (coalesced value reads, many loads in flight), summed at the end.

Appending (``append``): the cache operands K and V are the variables' buffers seen up to the
grown length N (their last S rows not written yet); the new rows come from XK and XV (the
projection's pieces, read through their strides). Every work-group reads the new rows from XK
and XV, and the work-groups of query row 0 of each cache head write them into the cache (one
writer per row: a head shared by several query heads, grouped-query attention, is written by
the first of them), so no work-group reads what another writes.
"""
from __future__ import annotations

import numpy as np

from .common import Source, Stage, header, memoized, nan_max, offsets, stage_code

DLS = 128          # work-items of a decode attention work-group
CHUNK = 4 * DLS    # keys scored per pass (their probabilities sit in local memory)
DECODE_ROWS = 8    # query rows (new tokens) up to which the decode kernel runs


def value_layout(dv: int) -> tuple[int, int]:
    """(slices, columns per item) of the value accumulation: DV columns of DLS items, each
    column split over ``slices`` items when DV fits in half the work-group."""
    width = 1 << max(dv - 1, 0).bit_length()
    if width <= DLS // 2:
        return DLS // width, 1
    return 1, -(-dv // DLS)


@memoized
def attention_decode(score_ops: list[Stage], side_dtypes: list, erank: int, dmax: int,
                     slices: int, jt: int, nan_to_zero: bool, append: bool) -> Source:
    """The decode attention kernel (module docstring): out[b, m, :] = softmax_n(ops(q[b, m, :]
    . k[b, n, :])) @ v[b, n, :] for a work-group (query row m, batch b = b0 * B1 + b1), the
    rows n >= N - S read from XK / XV and written into K / V when ``append``."""
    n_side = len(side_dtypes)
    kq = "" if append else "const "
    args = ["__global const float* Q", "int qoff", f"__global {kq}float* Kt", "int koff",
            f"__global {kq}float* V", "int voff", "__global float* O", "int ooff"]
    if append:
        args += ["__global const float* XK", "int xkoff", "__global const float* XV", "int xvoff"]
    args += ["int M", "int N", "int D", "int DV", "int B1",
             "int sq0", "int sq1", "int sqm", "int sqd", "int sk0", "int sk1", "int skn", "int skd",
             "int sv0", "int sv1", "int svn", "int svj", "int so0", "int so1", "int som",
             "int soj"]
    if append:
        args += ["int S", "int sxk0", "int sxk1", "int sxkn", "int sxkd", "int sxv0", "int sxv1",
                 "int sxvn", "int sxvj"]
    for j, dt in enumerate(side_dtypes):
        args += [f"__global const {_ctype(dt)}* in{j}", f"int off_in{j}"]
    if n_side:
        args += [f"int d{k}" for k in range(erank)]
        for j in range(n_side):
            args += [f"int s_in{j}_{k}" for k in range(erank)]
    code = stage_code([Stage("dot", [], "float")] + list(score_ops),
                       {j: f"in{j}[o_in{j}]" for j in range(n_side)})
    offs = offsets(erank, [f"in{j}" for j in range(n_side)], "flat") if n_side else ""
    width = DLS // slices
    if append:
        setup = """const int past = N - S;
  XK += xkoff + b0 * sxk0 + b1 * sxk1;
  XV += xvoff + b0 * sxv0 + b1 * sxv1;
  /* one writer per cache row: query row 0 of the first batch item sharing the head */
  const int wk = m == 0 && (sk0 != 0 || b0 == 0) && (sk1 != 0 || b1 == 0);
  const int wv = m == 0 && (sv0 != 0 || b0 == 0) && (sv1 != 0 || b1 == 0);"""
        dot = """if (n >= past) {
          __global const float* xr = XK + (n - past) * sxkn;
          __global float* kw = Kt + n * skn;
          for (int d = 0; d < D; ++d) {
            const float kv = xr[d * sxkd];
            dot = mad(qs[d], kv, dot);
            if (wk) kw[d * skd] = kv;
          }
        } else {
          __global const float* kr = Kt + n * skn;
          for (int d = 0; d < D; ++d) dot = mad(qs[d], kr[d * skd], dot);
        }"""
        vload = """float vv;
          if (n >= past) {
            vv = XV[(n - past) * sxvn + j * sxvj];
            if (wv) V[n * svn + j * svj] = vv;
          } else {
            vv = V[n * svn + j * svj];
          }"""
    else:
        setup = ""
        dot = """__global const float* kr = Kt + n * skn;
        for (int d = 0; d < D; ++d) dot = mad(qs[d], kr[d * skd], dot);"""
        vload = "const float vv = V[n * svn + j * svj];"
    if slices > 1:
        accumulate = f"""{{
      const int j = lid % {width}, r = lid / {width};
      if (j < DV) {{
        float a = acc[0] * scale;
        for (int i = r; i < cn; i += {slices}) {{
          const int n = c0 + i;
          {vload}
          a = mad(ps[i], vv, a);
        }}
        acc[0] = a;
      }}
    }}"""
        finish = f"""__local float part[DLS];
  part[lid] = acc[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < {width} && lid < DV) {{
    float a = 0.0f;
    for (int r = 0; r < {slices}; ++r) a += part[r * {width} + lid];
    const float o = a / sum;
    O[lid * soj] = {"isnan(o) ? 0.0f : o" if nan_to_zero else "o"};
  }}"""
    else:
        accumulate = """for (int t = 0; t < JT; ++t) {
      const int j = lid + t * DLS;
      if (j < DV) {
        float a = acc[t] * scale;
        for (int i = 0; i < cn; ++i) {
          const int n = c0 + i;
          """ + vload + """
          a = mad(ps[i], vv, a);
        }
        acc[t] = a;
      }
    }"""
        finish = f"""for (int t = 0; t < JT; ++t) {{
    const int j = lid + t * DLS;
    if (j < DV) {{
      const float o = acc[t] / sum;
      O[j * soj] = {"isnan(o) ? 0.0f : o" if nan_to_zero else "o"};
    }}
  }}"""
    tree = """for (int s = DLS / 2; s > 0; s >>= 1) {{
      if (lid < s) red[lid] = {op};
      barrier(CLK_LOCAL_MEM_FENCE);
    }}"""
    text = header([np.float32] + list(side_dtypes)) + f"""#define DLS {DLS}
#define CHUNK {CHUNK}
#define JT {jt}
__kernel __attribute__((reqd_work_group_size(DLS, 1, 1)))
void attention_decode({', '.join(args)})
{{
  const int lid = get_local_id(0), m = get_group_id(1), b = get_group_id(2);
  const int b0 = b / B1, b1 = b - b0 * B1;
  Q += qoff + b0 * sq0 + b1 * sq1 + m * sqm;
  Kt += koff + b0 * sk0 + b1 * sk1;
  V += voff + b0 * sv0 + b1 * sv1;
  O += ooff + b0 * so0 + b1 * so1 + m * som;
  {setup}
  __local float qs[{dmax}];
  __local float ps[CHUNK];
  __local float red[DLS];
  for (int d = lid; d < D; d += DLS) qs[d] = Q[d * sqd];
  float acc[JT];
  for (int t = 0; t < JT; ++t) acc[t] = 0.0f;
  float mx = -INFINITY, sum = 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int c0 = 0; c0 < N; c0 += CHUNK) {{
    const int cn = min(CHUNK, N - c0);
    float tmax = -INFINITY;
    for (int i = lid; i < cn; i += DLS) {{
      const int n = c0 + i;
      float dot = 0.0f;
      {{
        {dot}
      }}
      const int flat = (b * M + m) * N + n;
      {offs}
      {code}
      const float sc = x{len(score_ops)};
      ps[i] = sc;
      tmax = {nan_max("tmax", "sc")};
    }}
    red[lid] = tmax;
    barrier(CLK_LOCAL_MEM_FENCE);
    {tree.format(op=nan_max("red[lid]", "red[lid + s]"))}
    const float nm = {nan_max("mx", "red[0]")};
    barrier(CLK_LOCAL_MEM_FENCE);
    float scale = 1.0f, tsum = 0.0f;
    if (nm != -INFINITY) {{  /* (nothing but -inf yet: keep the sums empty) */
      scale = exp(mx - nm);
      for (int i = lid; i < cn; i += DLS) {{
        const float p = exp(ps[i] - nm);
        ps[i] = p;
        tsum += p;
      }}
    }} else {{
      for (int i = lid; i < cn; i += DLS) ps[i] = 0.0f;
    }}
    red[lid] = tsum;
    barrier(CLK_LOCAL_MEM_FENCE);
    {tree.format(op="red[lid] + red[lid + s]")}
    sum = sum * scale + red[0];
    mx = nm;
    {accumulate}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  {finish}
}}
"""
    return Source(text, "attention_decode")


def _ctype(dt) -> str:
    from .kernels import ctype
    return ctype(dt)
