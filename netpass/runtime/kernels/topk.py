"""TopK: one work-group per row (``LS`` items; up to WIDE_LS for a few long rows), in the row
layout of ``rowop``: row r = (o, i) covers x[o*N*inner + j*inner + i], its k outputs
y[o*K*inner + r*inner + i].

Selection in k rounds, each picking the best element strictly after the previous pick in the
op's total order (value best first, then the lower index; NaN the worst, its NaNs by index:
what the reference's stable argsort of the keys gives). Nothing is marked, so ties stay exact:
each work-item keeps the best of its own elements after the last pick, and only the item whose
candidate was picked scans its elements again (the others' candidates are still their best);
a local-memory reduction over the items' (value, index) pairs picks the round's element.
``sort`` "value" and "none" write the picks in that order; "index" writes the elements no worse
than the k-th pick in index order instead, placed by a prefix count of them over the row.
"""
from __future__ import annotations

import numpy as np

from .common import LS, Source, ctype, header, memoized

TOPK_DTYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))
# A TopK of at most WIDE_ROWS rows of WIDE_N or more elements runs WIDE_LS items a row (the
# device's limit if lower): a decoder's next token is one row of its vocabulary, and one
# work-group of LS items scanning 50,257 logits took ~0.35 ms of an H200 decode step
WIDE_ROWS, WIDE_N, WIDE_LS = 32, 4096, 1024
# loads an item has in flight in its scan: a wide work-group's row is long (a vocabulary's 49
# elements an item at 1024 items: 4 rounds of latency at 16, against 13 at 4)
FLIGHT, WIDE_FLIGHT = 4, 16


def _better(dtype, mode: str) -> str:
    """Body of ``better(a, ia, b, ib)``: whether element (a, ia) comes before (b, ib)."""
    cmp = ">" if mode == "max" else "<"
    order = f"a {cmp} b || (a == b && ia < ib)"
    if np.dtype(dtype).kind != "f":
        return f"return {order};"
    return f"return isnan(b) ? (!isnan(a) || ia < ib) : ({order});"


@memoized
def topk(dtype, index_dtype, mode: str, sort: str, ls: int = LS) -> Source:
    """The TopK kernel of ``dtype`` data (float32, int32, int64) and ``index_dtype`` indices;
    ``mode`` "max" / "min", ``sort`` "value" / "none" (value order) or "index"; work-groups of
    ``ls`` items (a power of two: wide ones for a few long rows, a decoder's next token over
    its vocabulary). Arguments: X, values, indices (buffer, offset each), N (the axis), inner,
    K."""
    if np.dtype(dtype) not in TOPK_DTYPES:
        raise KeyError(np.dtype(dtype))
    t, it = ctype(dtype), ctype(index_dtype)
    by_value = sort != "index"
    # value order: each round's pick as it comes; index order: after the rounds, the K
    # elements no worse than the K-th pick (pv, pj), each placed by the count before it
    store_pick = f"    if (lid == 0) {{ v[r * inner] = pv; ix[r * inner] = ({it})pj; }}\n" \
        if by_value else ""
    by_index = "" if by_value else f"""  if (K > 0) {{
    int base = 0;
    for (int c = 0; c < N && base < K; c += LS) {{
      const int j = c + lid;
      int mem = 0;
      {t} xv = 0;
      if (j < N) {{ xv = x[j * inner]; mem = j == pj || better(xv, j, pv, pj); }}
      sj[lid] = mem;
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int s = 1; s < LS; s <<= 1) {{  /* inclusive prefix count */
        const int add = lid >= s ? sj[lid - s] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        sj[lid] += add;
        barrier(CLK_LOCAL_MEM_FENCE);
      }}
      if (mem) {{ const int q = base + sj[lid] - 1; v[q * inner] = xv; ix[q * inner] = ({it})j; }}
      base += sj[LS - 1];
      barrier(CLK_LOCAL_MEM_FENCE);
    }}
  }}
"""
    text = header([dtype, index_dtype]) + f"""#define LS {ls}
#define FLIGHT {WIDE_FLIGHT if ls > LS else FLIGHT}
inline int better({t} a, int ia, {t} b, int ib) {{ {_better(dtype, mode)} }}

__kernel __attribute__((reqd_work_group_size(LS, 1, 1)))
void topk(__global const {t}* X, int xoff, __global {t}* V, int voff, __global {it}* IX,
          int ioff, int N, int inner, int K)
{{
  const int row = get_group_id(0), lid = get_local_id(0);
  const int o = row / inner, i = row - (row / inner) * inner;
  __global const {t}* x = X + xoff + o * N * inner + i;
  __global {t}* v = V + voff + o * K * inner + i;
  __global {it}* ix = IX + ioff + o * K * inner + i;
  __local {t} sv[LS];
  __local int sj[LS];
  {t} pv = 0, bv = 0;
  int pj = -1;  /* the last pick (-1: none yet) */
  int bj = -1;  /* this item's best element strictly after it (-1: none left) */
  for (int r = 0; r < K; r++) {{
    if (bj == pj) {{  /* the first round, or this item's candidate was picked: scan again */
      bj = -1;
      for (int j0 = lid; j0 < N; j0 += FLIGHT * LS) {{  /* FLIGHT loads in flight */
        {t} c4[FLIGHT];
        #pragma unroll
        for (int u = 0; u < FLIGHT; u++) {{
          const int j = j0 + u * LS;
          c4[u] = j < N ? x[j * inner] : 0;
        }}
        #pragma unroll
        for (int u = 0; u < FLIGHT; u++) {{  /* (a total order: any visiting order picks alike) */
          const int j = j0 + u * LS;
          const {t} c = c4[u];
          if (j < N && (pj < 0 || better(pv, pj, c, j)) && (bj < 0 || better(c, j, bv, bj))) {{
            bv = c;
            bj = j;
          }}
        }}
      }}
    }}
    sv[lid] = bv;
    sj[lid] = bj;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = LS / 2; s > 0; s >>= 1) {{
      if (lid < s) {{
        const int oj = sj[lid + s];
        if (oj >= 0 && (sj[lid] < 0 || better(sv[lid + s], oj, sv[lid], sj[lid]))) {{
          sv[lid] = sv[lid + s];
          sj[lid] = oj;
        }}
      }}
      barrier(CLK_LOCAL_MEM_FENCE);
    }}
    pv = sv[0];
    pj = sj[0];
    barrier(CLK_LOCAL_MEM_FENCE);
{store_pick}  }}
{by_index}}}
"""
    return Source(text, "topk")
