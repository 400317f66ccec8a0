"""The GEMMs of a decode step: a few rows of A (``GEMV_ROWS`` at most) against weights [N, K]
read as they are, as memory-bound GEMVs (:func:`gemv`), with the LayerNorm or RMSNorm in front
folded in (norm_gemm).
"""
from __future__ import annotations

import numpy as np

from .common import SHUFFLE_PTX, Source, Stage, header, memoized, nan_max, offsets, stage_code
from .eltwise import gated_code
from .gemm import gemm_args, norm_scale
from .phase import NO_PHASE

GEMV_WG = 256       # work-items of a GEMV work-group
GEMV_ROWS = 8       # rows of A up to which a GEMM runs as GEMVs
GEMV_RUN = 12       # float4 loads of the weights an item has in flight at once on a GPU
GEMV_RUN_CPU = 4    # the same elsewhere (more predicated-off loads cost a CPU's loops)
GEMV_STAGED_BYTES = 24 * 1024  # local memory for a GEMV's normalized rows of A, at most


def gemv_width(m: int, k: int, sbk: int, n: int, gpu: bool = False,
               normalized: bool = False) -> int | None:
    """Items per output column of the GEMV for A [m, k] and B read with stride ``sbk`` along
    k (1: B's columns are contiguous rows of a weights [n, k]), or None where the GEMV does not
    apply. A decode step reads weights the L2 does not hold, and a GEMV from HBM is bound by
    the loads in flight: on a GPU (``gpu``) 64 items a column from k = 512 (GPT-2's K = 768
    and 3072: 3 and 12 float4 loads an item, all issued at once), 32 from k = 128, else 16; on
    the H200, weights cycled through copies larger than the L2, 64 items read GPT-2's
    unnormalized projections 10-20% faster than 16 (BENCHMARKS.md, stateful decoding, 19th
    round). A ``normalized`` A (norm_gemm) keeps 16 up to k = 1024, then 64: each work-group
    normalizes its rows first, and more items a column make more work-groups (GPT-2's QKV with
    its rows staged, 20th round: 8.47 / 8.55 / 9.02 us at 16 / 32 / 64; the LM head 46.8 /
    55.8 / 70.0). Elsewhere (a CPU's
    work-items are loop iterations: fewer a column cost less) the same 16, then 64."""
    if m > GEMV_ROWS or sbk != 1 or not n or not k or not m:
        return None
    if gpu and not normalized:
        return 64 if k >= 512 else 32 if k >= 128 else 16
    return 16 if k <= 1024 else 64


def gemv_run(k: int, tpr: int, gpu: bool) -> int:
    """Float4 loads of the weights an item of :func:`gemv` issues at once for K = ``k`` and
    ``tpr`` items a column: GEMV_RUN on a GPU (GEMV_RUN_CPU elsewhere), fewer where the item's
    part of a column is shorter (registers it would not use: more work-groups resident)."""
    k4 = -(-k // 4)
    return max(1, min(GEMV_RUN if gpu else GEMV_RUN_CPU, -(-k4 // tpr)))


def gemv_staged(m: int, k: int) -> int:
    """The K a normalized GEMV of ``m`` rows stages in local memory (``k`` rounded up to 4),
    or 0 where the rows do not fit GEMV_STAGED_BYTES (the statistics then go in the loop)."""
    k4 = -(-k // 4) * 4
    return k4 if m * k4 * 4 <= GEMV_STAGED_BYTES else 0


@memoized
def gemv(epilogue: list[Stage], n_extra: int, extra_dtypes: list, erank: int, tpr: int,
         norm: tuple | None = None, run: int = GEMV_RUN, rows: int = GEMV_ROWS,
         staged: int = 0, gate: list[Stage] | None = None, ptx: bool = False) -> Source:
    """C[b] = A[b] @ B[b] (+ epilogue) for A of at most GEMV_ROWS rows, B(k, n) contiguous
    along k (a FullyConnected's weights [N, K] as they are: no reorder), float32; the arguments
    of every GEMM kernel (kernels.gemm.gemm_args). Each output column gets ``tpr`` items; an
    item issues the float4 loads of its part of the column ``run`` at a time, all before it
    uses the first, then takes the dot products with the rows of A (from the L1 cache after
    the first column of the work-group); the items' partials are summed in local memory and
    the fused epilogue runs on the sums. Memory-bound: each weight is read once per step. A or
    B not contiguous and 16-byte aligned along k (checked per launch) take scalar loads.
    ``rows``: the most rows of A the kernel takes (a decode step's single row: local memory
    for one row's partials, not GEMV_ROWS').

    ``norm`` (norm_gemm: A's rows normalized, times gamma, plus beta), two ways:

    - ``staged`` (K rounded up to 4, where ``rows`` of it fit GEMV_STAGED_BYTES of local
      memory: :func:`gemv_staged`): the work-group normalizes its rows into local memory once,
      while the first run of weights is in flight (each item a few elements; the shifted sums
      and squares, ``d = a - a[0]`` or 0 for RMSNorm, reduced over the work-group), and the
      loop reads them as the plain GEMV reads A;
    - else, no statistics ahead: each column's items read all of its row of A anyway, so they
      take the row's shifted sums and squares as they go, with ``sum d g w``, ``sum g w`` and
      ``sum b w``; the store applies ``rstd * (sum d g w - mean_d * sum g w) + sum b w``.

    (On the H200, weights from HBM: a plain GEMV reads GPT-2's QKV weights in 7.4 us; the
    first way takes 8.5, the second 10.6; the prologue before both, which summed each row's
    partial statistics on one item and normalized every element in the loop, 12.1.)

    ``ptx`` (NVIDIA): a column's partials are summed by warp shuffles, and a staged row's
    statistics too (a GEMV's reductions are links of a decode step's chain of latencies; a
    column's items share a warp up to 32 of them, so its sum needs no barrier); not with the
    in-loop statistics, whose tree also sums ``sum g w`` and the rows' sums.

    ``gate`` (no ``norm``): A's row m is a gated MLP's activation ``act(g) * u`` of the
    gate's columns ``g`` (from ``A + m * sam``) and the up projection's ``u`` (``K`` further
    on), taken as the loop reads them (``parallel_gemms.fold_gated_inputs``; ``gate``: its
    stages, as ``eltwise.gated_code`` takes them): the down projection reads its stacked
    input, no GatedActivation launch before it."""
    if gate is not None and norm is not None:
        raise ValueError("a gated A takes no normalization")
    args = gemm_args("float", n_extra, extra_dtypes, erank, norm)
    code = stage_code([Stage("v", [], "float")] + list(epilogue),
                       {j: f"in{j}[o_in{j}]" for j in range(n_extra)})
    offs = offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
    p = _gemv_staged_parts(norm, staged, ptx) if staged and norm is not None else \
        _gemv_gated_parts(gate) if gate is not None else _gemv_norm_parts(norm)
    shuffled = ptx and not p["tree"]
    column_sum = _shuffled_columns(tpr) if shuffled else f"""
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = TPR / 2; s > 0; s >>= 1) {{
    if (lane < s) {{
      for (int m = 0; m < M; ++m) red[m * WG + lid] += red[m * WG + lid + s];{p["tree"]}
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  if (lane < M && n < N) {{
    const int m = lane;
    float v = red[m * WG + c * TPR];"""
    text = header([np.float32] + list(extra_dtypes)) + (SHUFFLE_PTX if ptx else "") + \
        f"""#define WG {GEMV_WG}
#define TPR {tpr}
#define COLS (WG / TPR)
#define MR {rows}
#define RUN {run}
#define KL {staged}
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void gemv({', '.join(args)})
{{
  const int lid = get_local_id(0);
  const int c = lid / TPR, lane = lid - c * TPR;
  const int n = get_group_id(0) * COLS + c;
  const int b = get_group_id(2);
  const int b0 = b / B1, b1 = b - b0 * B1;
  A += aoff + b0 * sa0 + b1 * sa1;
  B += boff + b0 * sb0 + b1 * sb1;
  __local float red[MR * WG];{p["decl"]}
  const int vec = sak == 1 && (sam & 3) == 0 && (K & 3) == 0 &&
      ((aoff + b0 * sa0 + b1 * sa1) & 3) == 0 && ((boff + b0 * sb0 + b1 * sb1) & 3) == 0 &&
      (sbn & 3) == 0;
  const int K4 = K >> 2;
  __global const float4* br4 = (__global const float4*)(B + min(n, N - 1) * sbn);
  float4 w[RUN];
  #pragma unroll
  for (int j = 0; j < RUN; ++j) {{
    const int q = lane + j * TPR;
    w[j] = vec && q < K4 ? br4[q] : (float4)(0.0f);
  }}{p["prologue"]}
  #pragma unroll
  for (int m = 0; m < MR; ++m) red[m * WG + lid] = 0.0f;{p["zero"]}
  if (n < N) {{
    if (vec) {{
      for (int q0 = 0;;) {{
        #pragma unroll 1
        for (int m = 0; m < M; ++m) {{  // (a loop: the run's weights stay in registers)
          float part = 0.0f;{p["row4"]}
          #pragma unroll
          for (int j = 0; j < RUN; ++j) {{
            const int q = q0 + lane + j * TPR;
            if (q < K4) {p["dot4"]}
          }}
          red[m * WG + lid] += part;{p["keep4"]}
        }}
        q0 += RUN * TPR;
        if (q0 >= K4) break;
        #pragma unroll
        for (int j = 0; j < RUN; ++j) {{
          const int q = q0 + lane + j * TPR;
          w[j] = q < K4 ? br4[q] : (float4)(0.0f);
        }}
      }}
    }} else {{
      __global const float* br = B + n * sbn;
      float acc[MR];{p["decl1"]}
      #pragma unroll
      for (int m = 0; m < MR; ++m) acc[m] = 0.0f;
      for (int k = lane; k < K; k += TPR) {{
        const float wk = br[k];{p["col1"]}
        #pragma unroll
        for (int m = 0; m < MR; ++m)
          if (m < M) {p["dot1"]}
      }}
      #pragma unroll
      for (int m = 0; m < MR; ++m) red[m * WG + lid] = acc[m];{p["keep1"]}
    }}
  }}{p["gather"]}{column_sum}{p["store"]}
    const int flat = (b * M + m) * N + n;
    {offs}
    {code}
    C[coff + flat] = x{len(epilogue)};
  }}
}}
"""
    return Source(text, "gemv")


def _shuffled_columns(tpr: int) -> str:
    """:func:`gemv`'s column sums by warp shuffles (its ``ptx``), ending as the tree's do: in
    the store's ``if`` with ``m`` and ``v``, row m's sum of the column. Every item of a warp
    takes part in each shuffle (the loop over M is the same for all); a column of 64 items
    spans two warps, whose sums meet in ``red`` across one barrier."""
    width = min(tpr, 32)
    out = f"""
  float mine_ = 0.0f;
  for (int m = 0; m < M; ++m) {{
    float v_ = red[m * WG + lid];
    #pragma unroll
    for (int o_ = {width // 2}; o_ > 0; o_ >>= 1) v_ += shfl_xor(v_, o_);
    {"if ((lane & 31) == 0) red[m * WG + lid] = v_;" if tpr > 32 else "if (m == lane) mine_ = v_;"}
  }}"""
    if tpr > 32:
        halves = " + ".join(f"red[lane * WG + c * TPR + {h}]" for h in range(0, tpr, 32))
        out += f"""
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lane < M) mine_ = {halves};"""
    return out + """
  if (lane < M && n < N) {
    const int m = lane;
    float v = mine_;"""


# the places of gemv's text its normalization fragments go in
_PARTS = ("prologue", "decl", "zero", "row4", "dot4", "keep4", "decl1", "col1", "dot1", "keep1",
          "gather", "tree", "store")


def _gemv_norm_parts(norm: tuple | None) -> dict[str, str]:
    """The C fragments :func:`gemv` splices in for a normalized A (empty for ``norm`` None):
    per item the row's shifted sums and squares (``ns``/``nq``: kept in local memory per row
    by column 0's items, which read all of it), ``sum g w`` and ``sum b w`` (``gw``/``bw``,
    per column: taken once, with row 0), the trees reducing them over a column's items and
    the store's ``rstd * (sum d g w - mean_d * sum g w) + sum b w``."""
    if norm is None:
        out = dict.fromkeys(_PARTS, "")
        out["dot4"] = "part += dot(w[j], ((__global const float4*)(A + m * sam))[q]);"
        out["dot1"] = "acc[m] = mad(A[m * sam + k * sak], wk, acc[m]);"
        return out
    rms, gamma, beta = norm[5], norm[3], norm[4]
    g4 = "vload4(q, G + goff)" if gamma else "(float4)(1.0f)"
    g1 = "G[goff + k]" if gamma else "1.0f"
    shift = "0.0f" if rms else "A[m * sam]"
    var = nan_max("nq[m * TPR] / (float)K - mean * mean", "0.0f")
    mean = "0.0f" if rms else "ns[m * TPR] / (float)K"
    bw4 = "bw += dot(w[j], vload4(q, Bt + btoff)); " if beta else ""
    bw1 = "bw += Bt[btoff + k] * wk; " if beta else ""
    return {
        "prologue": "",
        "decl": """
  __local float ns[MR * TPR], nq[MR * TPR], gws[WG], bws[WG];
  float gw = 0.0f, bw = 0.0f;""",
        "zero": """
  if (c == 0)
    for (int m = 0; m < MR; ++m) ns[m * TPR + lane] = nq[m * TPR + lane] = 0.0f;""",
        "row4": f"""
          const float sh = {shift};
          float s = 0.0f, sq = 0.0f;""",
        "dot4": f"""{{
              const float4 g = {g4};
              const float4 d = ((__global const float4*)(A + m * sam))[q] - (float4)(sh);
              part += dot(w[j], d * g);
              s += (d.x + d.y) + (d.z + d.w); sq += dot(d, d);
              if (m == 0) {{ gw += dot(w[j], g); {bw4}}}
            }}""",
        "keep4": """
          if (c == 0) { ns[m * TPR + lane] += s; nq[m * TPR + lane] += sq; }""",
        "decl1": f"""
      float sh[MR], s1[MR], q1[MR];
      #pragma unroll
      for (int m = 0; m < MR; ++m) {{
        sh[m] = m < M ? {shift} : 0.0f; s1[m] = q1[m] = 0.0f;
      }}""",
        "col1": f"""
        const float gk = {g1};
        gw = mad(gk, wk, gw); {bw1}""",
        "dot1": """{
            const float d = A[m * sam + k * sak] - sh[m];
            acc[m] = mad(d * gk, wk, acc[m]); s1[m] += d; q1[m] = mad(d, d, q1[m]);
          }""",
        "keep1": """
      if (c == 0)
        for (int m = 0; m < MR; ++m) { ns[m * TPR + lane] = s1[m]; nq[m * TPR + lane] = q1[m]; }""",
        "gather": """
  gws[lid] = gw; bws[lid] = bw;""",
        "tree": """
      gws[lid] += gws[lid + s]; bws[lid] += bws[lid + s];
      if (c == 0)
        for (int m = 0; m < M; ++m) {
          ns[m * TPR + lane] += ns[m * TPR + lane + s];
          nq[m * TPR + lane] += nq[m * TPR + lane + s];
        }""",
        "store": f"""
    const float mean = {mean};
    const float var = {var};
    v = {norm_scale(norm, "var", "nq[m * TPR]")} * (v - mean * gws[c * TPR]) + bws[c * TPR];""",
    }


def _gemv_gated_parts(gate: list[Stage]) -> dict[str, str]:
    """:func:`gemv`'s fragments for a gated A: the loop's reads of A take the gate's value
    and the up projection's, ``K`` further on, and their activation (``gate``'s stages)."""
    out = dict.fromkeys(_PARTS, "")
    a4 = "((__global const float4*)(A + m * sam{}))[q]"
    code4, y4 = gated_code(gate, a4.format(""), a4.format(" + K"), vector=True)
    out["dot4"] = f"""{{
              {code4}
              part += dot(w[j], {y4});
            }}"""
    code1, y1 = gated_code(gate, "A[m * sam + k * sak]", "A[m * sam + (K + k) * sak]")
    out["dot1"] = f"""{{
            {code1}
            acc[m] = mad({y1}, wk, acc[m]);
          }}"""
    return out


def staged_rows(norm: tuple, ptx: bool = False) -> str:
    """C statements normalizing rows 0 .. M - 1 of ``A`` (row m at ``A + m * sam``, element k
    ``k * sak`` further, K of them) into local memory: per row the shifted values stored four
    at a time into ``xn4`` (``KL / 4`` float4 a row, MR rows) and summed with their squares,
    a tree over the work-group's ``WG`` items (``lid``) in ``rs`` and ``rq``, then each element
    normalized in place (gamma ``G + goff`` and beta ``Bt + btoff`` where ``norm`` has them:
    kernels.gemm.norm_prologue's tuple). Declares ``xn4``, ``rs`` and ``rq`` [WG]; ends with a
    barrier, ``rs`` and ``rq`` free for other use. With ``ptx`` each warp sums its items' by
    shuffles and one barrier joins the warps'. (decode_gemv's staged GEMV.)"""
    rms, gamma, beta = norm[5], norm[3], norm[4]
    shift = "0.0f" if rms else "A[m * sam]"
    mean = "0.0f" if rms else "rs0_ / (float)K"
    if ptx:
        sums = """#pragma unroll
    for (int o_ = 16; o_ > 0; o_ >>= 1) { s += shfl_xor(s, o_); sq += shfl_xor(sq, o_); }
    if ((lid & 31) == 0) { rs[lid >> 5] = s; rq[lid >> 5] = sq; }
    barrier(CLK_LOCAL_MEM_FENCE);
    float rs0_ = rs[0], rq0_ = rq[0];
    for (int w_ = 1; w_ < WG / 32; ++w_) { rs0_ += rs[w_]; rq0_ += rq[w_]; }"""
    else:
        sums = """rs[lid] = s; rq[lid] = sq;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = WG / 2; h > 0; h >>= 1) {
      if (lid < h) { rs[lid] += rs[lid + h]; rq[lid] += rq[lid + h]; }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float rs0_ = rs[0], rq0_ = rq[0];"""

    def four(ref: str) -> str:  # (elements k..k+3 of a vector, clamped to K)
        return "(float4)(" + ", ".join(f"{ref}[min(k + {e}, K - 1)]" for e in range(4)) + ")"
    scaled = "(xn4[i] - mean) * r" + (f" * {four('(G + goff)')}" if gamma else "") + \
        (f" + {four('(Bt + btoff)')}" if beta else "")
    loads = "\n      ".join(f"if (k + {e} < K) d.s{e} = A[m * sam + (k + {e}) * sak] - sh;"
                            for e in range(4))
    return f"""__local float4 xn4[MR * KL / 4];
  __local float rs[WG], rq[WG];
  for (int m = 0; m < M; ++m) {{
    const float sh = {shift};
    float s = 0.0f, sq = 0.0f;
    for (int k4 = lid; 4 * k4 < K; k4 += WG) {{
      const int k = 4 * k4;
      float4 d = (float4)(0.0f);
      {loads}
      xn4[m * (KL / 4) + k4] = d;
      s += (d.x + d.y) + (d.z + d.w); sq += dot(d, d);
    }}
    {sums}
    const float mean = {mean};
    const float var = {nan_max("rq0_ / (float)K - mean * mean", "0.0f")};
    const float r = {norm_scale(norm, "var", "rq0_")};
    for (int k4 = lid; 4 * k4 < K; k4 += WG) {{
      const int k = 4 * k4, i = m * (KL / 4) + k4;
      xn4[i] = {scaled};
    }}
    barrier(CLK_LOCAL_MEM_FENCE);  // (xn4 whole; rs and rq free for the next row)
  }}"""


def _gemv_staged_parts(norm: tuple, kl: int, ptx: bool = False) -> dict[str, str]:
    """:func:`gemv`'s fragments for a normalized A staged in local memory (``xn4``, ``kl`` / 4
    float4 a row): the prologue (:func:`staged_rows`; A's loads issued while the first run of
    weights is in flight) and the loop's reads of ``xn4``. Launched on its own in a persistent
    step (NO_PHASE): as a phase it stopped the H200's persistent GPT-2 step (its work-groups
    waiting at a grid barrier) while PoCL ran it."""
    out = dict.fromkeys(_PARTS, "")
    out["prologue"] = f"""
  {NO_PHASE}
  {staged_rows(norm, ptx)}"""
    out["dot4"] = "part += dot(w[j], xn4[m * (KL / 4) + q]);"
    out["dot1"] = """{
            const float4 t = xn4[m * (KL / 4) + (k >> 2)];
            const int e = k & 3;
            acc[m] = mad(e == 0 ? t.x : e == 1 ? t.y : e == 2 ? t.z : t.w, wk, acc[m]);
          }"""
    return out
