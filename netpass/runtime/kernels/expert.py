"""A mixture-of-experts' routed GEMMs (``netpass.runtime.expert_gemm``): batch b multiplies
expert ``idx[b]``'s weight matrix, read where it lies in the stacked weights ``W [E, R, C]``
(at ``W + idx[b] * R * C``), never copied out first. An index counts from the end when
negative (as Gather's); one outside ``[-E, E)`` reads zeros (as the runtime's ``gather``),
never outside W.

- :func:`expert_gemv`: each batch's one row (a decode token's activation against each of its
  experts, or a prompt's tokens one batch each: transformers' ``batched_mm``) against the
  expert's rows, contiguous along C: a memory-bound GEMV per (batch, block of rows) in the
  style of ``decode_gemv.gemv`` (``tpr`` items a row, ``run`` float4 loads each in flight at
  once, the partials summed in local memory);
- :func:`expert_gemm`: anything else (a transposed expert, several rows a batch): one
  work-item per output element, 16 x 16 output tiles whose K loop stages both operands in
  local memory.
"""
from __future__ import annotations

import numpy as np

from .common import Source, ctype, header, memoized

EXPERT_WG = 256  # work-items of an expert GEMV's work-group
TILE = 16        # expert_gemm's output tile (TILE x TILE items) and K step


@memoized
def expert_gemv(idx_dtype, tpr: int, run: int) -> Source:
    """Y[b, r] = sum_c W[e_b, r, c] * X[xoff + b * sxb + c] for r < R, e_b = I[b * sib]
    (negative: + E; outside [-E, E): Y[b, :] = 0). Work-groups of EXPERT_WG items, ``tpr`` a
    row: global (ceil(R / (EXPERT_WG / tpr)) * EXPERT_WG, 1, B). Float4 loads where W's rows
    and X are 16-byte aligned (checked per launch), scalar ones otherwise."""
    text = header([np.float32]) + f"""#define WG {EXPERT_WG}
#define TPR {tpr}
#define ROWS (WG / TPR)
#define RUN {run}
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void expert_gemv(__global const float* W, int woff, __global const {ctype(idx_dtype)}* I, int ioff,
                 __global const float* X, int xoff, __global float* Y, int yoff,
                 int R, int C, int E, int sib, int sxb)
{{
  const int lid = get_local_id(0);
  const int c = lid / TPR, lane = lid - c * TPR;
  const int r = get_group_id(0) * ROWS + c;
  const int b = get_group_id(2);
  long e = (long)I[ioff + b * sib];
  if (e < 0) e += E;
  const int ok = e >= 0 && e < E;  // (uniform over the work-group: one batch)
  __global const float* w = W + woff + (ok ? e : 0L) * ((long)R * C) + (long)min(r, R - 1) * C;
  __global const float* x = X + xoff + (long)b * sxb;
  __local float red[WG];
  float part = 0.0f;
  if (ok && r < R) {{
    const int vec = (C & 3) == 0 && (woff & 3) == 0 && ((xoff + b * sxb) & 3) == 0;
    if (vec) {{
      const int C4 = C >> 2;
      __global const float4* w4 = (__global const float4*)w;
      __global const float4* x4 = (__global const float4*)x;
      for (int q0 = 0; q0 < C4; q0 += RUN * TPR) {{
        float4 wv[RUN];
        #pragma unroll
        for (int j = 0; j < RUN; ++j) {{
          const int q = q0 + lane + j * TPR;
          wv[j] = q < C4 ? w4[q] : (float4)(0.0f);
        }}
        #pragma unroll
        for (int j = 0; j < RUN; ++j) {{
          const int q = q0 + lane + j * TPR;
          if (q < C4) part += dot(wv[j], x4[q]);
        }}
      }}
    }} else {{
      for (int k = lane; k < C; k += TPR) part = mad(w[k], x[k], part);
    }}
  }}
  red[lid] = part;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = TPR / 2; s > 0; s >>= 1) {{
    if (lane < s) red[lid] += red[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  if (lane == 0 && r < R) Y[yoff + (long)b * R + r] = red[lid];
}}
"""
    return Source(text, "expert_gemv")


@memoized
def expert_gemm(idx_dtype, weight_side: int) -> Source:
    """Y[b, m, n] = sum_k A_b[m, k] B_b[k, n] with operand ``weight_side`` (0: A, 1: B) the
    expert's matrix at ``W + e_b * RC`` (e_b = I[b * sib], negative: + E; outside [-E, E):
    zeros), walked with its strides (row, k or k, column), and the other operand X's at
    ``X + b * sxb``. TILE x TILE work-groups over (n, m), one per batch along dim 2; the K
    loop stages TILE x TILE pieces of both in local memory."""
    a_at = "W + wbase" if weight_side == 0 else "X + xbase"
    b_at = "X + xbase" if weight_side == 0 else "W + wbase"
    text = header([np.float32]) + f"""#define T {TILE}
__kernel __attribute__((reqd_work_group_size(T, T, 1)))
void expert_gemm(__global const float* W, int woff, __global const {ctype(idx_dtype)}* I,
                 int ioff, __global const float* X, int xoff, __global float* Y, int yoff,
                 int M, int N, int K, int E, int RC, int sib, int sxb,
                 int sam, int sak, int sbk, int sbn)
{{
  const int tn = get_local_id(0), tm = get_local_id(1);
  const int n = get_group_id(0) * T + tn, m = get_group_id(1) * T + tm;
  const int b = get_group_id(2);
  long e = (long)I[ioff + b * sib];
  if (e < 0) e += E;
  const int ok = e >= 0 && e < E;
  const long wbase = woff + (ok ? e : 0L) * RC;
  const long xbase = xoff + (long)b * sxb;
  __global const float* A = {a_at};
  __global const float* B = {b_at};
  __local float as[T][T + 1], bs[T][T + 1];
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {{
    as[tm][tn] = ok && m < M && k0 + tn < K ? A[(long)m * sam + (long)(k0 + tn) * sak] : 0.0f;
    bs[tm][tn] = ok && n < N && k0 + tm < K ? B[(long)(k0 + tm) * sbk + (long)n * sbn] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    #pragma unroll
    for (int k = 0; k < T; ++k) acc = mad(as[tm][k], bs[k][tn], acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  if (m < M && n < N) Y[yoff + ((long)b * M + m) * N + n] = acc;
}}
"""
    return Source(text, "expert_gemm")
