"""The fused attention kernel (netpass.runtime.attention): scores, score ops, online softmax
and the value product in one launch."""
from __future__ import annotations

import numpy as np

from .common import (
    LS,
    Source,
    Stage,
    header,
    memoized,
    nan_max,
    offsets,
    side_params,
    stage_code,
)

# the caches a prompt over an empty cache fills (``fill_caches``): buffer, offset, batch
# strides (b0, kv head), row and column strides of the key cache, then of the value cache
# (restrict: the caches are neither read nor the rows copied into them, so their loads may run
# ahead of the stores)
FILL_ARGS = ["__global float* restrict CK", "int ckoff", "int sck0", "int sck1", "int sckn",
             "int sckd", "__global float* restrict CV", "int cvoff", "int scv0", "int scv1",
             "int scvn", "int scvj"]
FILL_BATCH = 4  # elements an item loads before it stores them


def fill_caches(first: str, rows: str, threads: str, tid: str) -> str:
    """C statements copying new key and value rows ``first`` .. ``first + rows - 1`` (those
    below M) from ``Kt`` / ``V`` (already at this batch's head, read through their strides) into
    the caches of :data:`FILL_ARGS`, once per key/value head (query heads ``b1`` with
    ``b1 % G == 0``): a prompt's keys over an empty cache are its new rows, so the attention
    reads them where they are and each work-group writes its own query rows into the cache
    (``kv_append``: no copy launch per cache). An item loads FILL_BATCH elements before it
    stores them (a load, then its store, one at a time: 15 us more per GPT-2 flash launch on
    the H200)."""
    def copy(dst: str, src: str, width: str, drs: str, dcs: str, srs: str, scs: str) -> str:
        idx = [f"i{u}_" for u in range(FILL_BATCH)]
        lines = [f"for (int i_ = {tid}; i_ < ({rows}) * {width}; "
                 f"i_ += {FILL_BATCH} * {threads}) {{"]
        for u, i in enumerate(idx):
            lines.append(f"  const int {i} = i_ + {u} * {threads}, r{u}_ = {i} / {width} + "
                         f"({first}), c{u}_ = {i} % {width};")
            lines.append(f"  const int ok{u}_ = {i} < ({rows}) * {width} && r{u}_ < M;")
            lines.append(f"  const float v{u}_ = ok{u}_ ? {src}[r{u}_ * {srs} + c{u}_ * {scs}] "
                         ": 0.0f;")
        for u in range(FILL_BATCH):
            lines.append(f"  if (ok{u}_) {dst}[r{u}_ * {drs} + c{u}_ * {dcs}] = v{u}_;")
        lines.append("}")
        return "\n    ".join(lines)
    return f"""if (b1 % G == 0) {{
    __global float* ck_ = CK + ckoff + b0 * sck0 + kb1 * sck1;
    __global float* cv_ = CV + cvoff + b0 * scv0 + kb1 * scv1;
    {copy("ck_", "Kt", "D", "sckn", "sckd", "skn", "skd")}
    {copy("cv_", "V", "DV", "scvn", "scvj", "svn", "svj")}
  }}"""


@memoized
def attention(score_ops: list[Stage], side_dtypes: list, erank: int, jt: int, dmax: int,
              nan_to_zero: bool = False, fill: bool = False) -> Source:
    """Fused attention (netpass.runtime.attention): work-group (query row m, batch b) of LS
    items; out[b, m, :] = softmax_n(ops(q[b, m, :] . k[b, n, :])) @ v[b, n, :].

    Keys go in blocks of LS, one per item: its score, the ``score_ops`` (side input j read at
    the flat scores index through d<k>/s_in<j>_<k>), the block's max and sum in local memory,
    the running max/sum rescaled (online softmax), and the block's probabilities times the
    value rows accumulated per output column (item owns columns lid + t * LS, t < ``jt``). q's
    row sits in local memory (``dmax`` >= D floats). All operands are read through strides;
    batch b = b0 * B1 + b1 as in the GEMM kernels; query head b1 reads the keys and values of
    head b1 / G (grouped-query attention, G = 1 otherwise). ``nan_to_zero``: a row whose
    probabilities are NaN (every key masked by -inf) gives zeros, as ``Where(IsNaN(p), 0, p)``
    does. ``fill``: the keys and values are a prompt's new rows, which the work-groups of
    query row m write into the caches as row m (:func:`fill_caches`; arguments last)."""
    n_side = len(side_dtypes)
    args = ["__global const float* Q", "int qoff", "__global const float* Kt", "int koff",
            "__global const float* V", "int voff", "__global float* O", "int ooff",
            "int M", "int N", "int D", "int DV", "int B1", "int G",
            "int sq0", "int sq1", "int sqm", "int sqd", "int sk0", "int sk1", "int skn", "int skd",
            "int sv0", "int sv1", "int svn", "int svj", "int so0", "int so1", "int som", "int soj"]
    args += side_params(side_dtypes, erank)
    if fill:
        args += FILL_ARGS
    code = stage_code([Stage("dot", [], "float")] + list(score_ops),
                       {j: f"in{j}[o_in{j}]" for j in range(n_side)})
    offs = offsets(erank, [f"in{j}" for j in range(n_side)], "flat") if n_side else ""
    text = header([np.float32] + list(side_dtypes)) + f"""#define LS {LS}
#define JT {jt}
__kernel __attribute__((reqd_work_group_size(LS, 1, 1)))
void attention({', '.join(args)})
{{
  const int lid = get_local_id(0), m = get_group_id(1), b = get_group_id(2);
  const int b0 = b / B1, b1 = b - b0 * B1, kb1 = b1 / G;
  Q += qoff + b0 * sq0 + b1 * sq1 + m * sqm;
  Kt += koff + b0 * sk0 + kb1 * sk1;
  V += voff + b0 * sv0 + kb1 * sv1;
  {fill_caches("m", "1", "LS", "lid") if fill else ""}
  __local float qs[{dmax}];
  __local float red[LS];
  __local float ps[LS];
  for (int d = lid; d < D; d += LS) qs[d] = Q[d * sqd];
  float acc[JT];
  for (int t = 0; t < JT; ++t) acc[t] = 0.0f;
  float mx = -INFINITY, sum = 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int n0 = 0; n0 < N; n0 += LS) {{
    const int n = n0 + lid;
    float sc = -INFINITY;
    if (n < N) {{
      __global const float* kr = Kt + n * skn;
      float dot = 0.0f;
      for (int d = 0; d < D; ++d) dot = mad(qs[d], kr[d * skd], dot);
      int flat = (b * M + m) * N + n;
      {offs}
      {code}
      sc = x{len(score_ops)};
    }}
    red[lid] = sc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = LS / 2; s > 0; s >>= 1) {{
      if (lid < s) red[lid] = {nan_max("red[lid]", "red[lid + s]")};
      barrier(CLK_LOCAL_MEM_FENCE);
    }}
    const float nm = {nan_max("mx", "red[0]")};
    barrier(CLK_LOCAL_MEM_FENCE);
    float pr = 0.0f, scale = 1.0f;
    if (nm != -INFINITY) {{  /* (nothing but -inf yet: keep the sums empty) */
      pr = (n < N) ? exp(sc - nm) : 0.0f;
      scale = exp(mx - nm);
    }}
    ps[lid] = pr;
    red[lid] = pr;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = LS / 2; s > 0; s >>= 1) {{
      if (lid < s) red[lid] += red[lid + s];
      barrier(CLK_LOCAL_MEM_FENCE);
    }}
    sum = sum * scale + red[0];
    mx = nm;
    const int cnt = min(LS, N - n0);
    __global const float* vr = V + n0 * svn;
    for (int t = 0; t < JT; ++t) {{
      const int j = lid + t * LS;
      float a = acc[t] * scale;
      if (j < DV)
        for (int i = 0; i < cnt; ++i) a = mad(ps[i], vr[i * svn + j * svj], a);
      acc[t] = a;
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  O += ooff + b0 * so0 + b1 * so1 + m * som;
  for (int t = 0; t < JT; ++t) {{
    const int j = lid + t * LS;
    if (j < DV) {{
      const float o = acc[t] / sum; O[j * soj] = {"isnan(o) ? 0.0f : o" if nan_to_zero else "o"};
    }}
  }}
}}
"""
    return Source(text, "attention")
