"""Kernels for decoding, where a step feeds a few new tokens (``DECODE_ROWS`` at most) and
reads everything else from the key/value cache and the weights.

:func:`gemv`: a GEMM of a few rows of A as memory-bound GEMVs over the weights as they are.

:func:`attention_decode`: fused attention over the cache in one launch per layer, the new
keys and values appended to the cache by the same kernel. A work-group of DLS items owns one
query row of one (batch, head): it scores the keys in chunks of CHUNK (the score ops applied
with their side inputs, as the row kernel of :func:`netpass.runtime.kernels.attention`), keeps
a running maximum and sum (online softmax across chunks), and accumulates the value rows into
the output columns, each column split over ``slices`` groups of items that each take every
``slices``-th key (coalesced value reads, many loads in flight), summed at the end.

Key splits (``split``): a decode step's attention is a work-group per (batch, head) row, a
dozen on a device of a hundred compute units, each walking all the keys in a chain of load
latencies. With splits the launch's first dimension cuts every row's keys into runs of
equal length (their count is the launch's, fixed over a decode loop: the run length moves
with the keys). Each run keeps its own running maximum and sum and stores them with its
unnormalized output row; the last run of a row to arrive (a per-request counter) merges them
in run order, as the flash kernel's key splits (:mod:`netpass.runtime.kernels.flash`).

Appending (``append``): the cache operands K and V are the variables' buffers seen up to the
grown length N (their last S rows not written yet); the new rows come from XK and XV (the
projection's pieces, read through their strides). Every work-group reads the new rows from XK
and XV, and the work-groups of query row 0 of each cache head write them into the cache (one
writer per row: a head shared by several query heads, grouped-query attention, is written by
the first of them), so no work-group reads what another writes.
"""
from __future__ import annotations

import numpy as np

from .common import Source, Stage, ctype, header, memoized, nan_max, offsets, stage_code
from .gemm import gemm_args, norm_scale
from .mma import arrival_defs, last_to_arrive

DLS = 256          # work-items of a decode attention work-group
CHUNK = 2 * DLS    # keys scored per pass (their probabilities sit in local memory)
DECODE_ROWS = 8    # query rows (new tokens) up to which the decode kernel runs
UNROLL = 4         # keys per item in flight in the value loop
MAX_SPLITS = 8     # runs a row's keys may be split into (key splits)


@memoized
def attention_decode(score_ops: list[Stage], side_dtypes: list, erank: int, d: int, dv: int,
                     nan_to_zero: bool, append: bool, split: bool = False,
                     ptx: bool = False) -> Source:
    """The decode attention kernel (module docstring) for head size ``d`` and value width
    ``dv`` (compile-time: the loops over them unroll): out[b, m, :] = softmax_n(ops(q[b, m, :]
    . k[b, n, :])) @ v[b, n, :] for a work-group (query row m, batch b = b0 * B1 + b1), the
    rows n >= N - S read from XK / XV and written into K / V when ``append``.

    Latency decides a decode step's attention (a few work-groups, each a chain of dependent
    loads), so every load of a key row is issued before its first use: a key's row as float4
    runs where K's rows are contiguous and 16-byte aligned (checked per launch), value rows
    as float4 columns (``dv`` % 4 == 0) with UNROLL keys per item in flight.

    ``split`` (``dv`` % 4 == 0 only): the launch's first dimension splits each row's keys
    into get_num_groups(0) <= MAX_SPLITS runs of equal length ("Key splits" in the module
    docstring); ``ptx``: the merge reads the partials with NVIDIA's L1-bypassing loads."""
    n_side = len(side_dtypes)
    kq = "" if append else "const "
    args = ["__global const float* Q", "int qoff", f"__global {kq}float* Kt", "int koff",
            f"__global {kq}float* V", "int voff", "__global float* O", "int ooff"]
    if append:
        args += ["__global const float* XK", "int xkoff", "__global const float* XV", "int xvoff"]
    args += ["int M", "int N", "int D", "int DV", "int B1", "int G",
             "int sq0", "int sq1", "int sqm", "int sqd", "int sk0", "int sk1", "int skn", "int skd",
             "int sv0", "int sv1", "int svn", "int svj", "int so0", "int so1", "int som",
             "int soj"]
    if append:
        args += ["int S", "int sxk0", "int sxk1", "int sxkn", "int sxkd", "int sxv0", "int sxv1",
                 "int sxvn", "int sxvj"]
    for j, dt in enumerate(side_dtypes):
        args += [f"__global const {ctype(dt)}* in{j}", f"int off_in{j}"]
    if n_side:
        args += [f"int d{k}" for k in range(erank)]
        for j in range(n_side):
            args += [f"int s_in{j}_{k}" for k in range(erank)]
    split = split and dv % 4 == 0 and dv // 4 <= DLS
    if split:
        args += ["__global float* DP", "__global int* da_count"]
    code = stage_code([Stage("dot", [], "float")] + list(score_ops),
                       {j: f"in{j}[o_in{j}]" for j in range(n_side)})
    offs = offsets(erank, [f"in{j}" for j in range(n_side)], "flat") if n_side else ""
    vec4 = dv % 4 == 0 and dv // 4 <= DLS
    w4 = dv // 4 if vec4 else 0
    slices = DLS // w4 if vec4 else 1
    jt = -(-dv // DLS)
    # a key's dot product: float4 runs of a contiguous, aligned row, else scalar
    if d % 4 == 0:
        kdot = f"""if (kvec) {{
          const __global float4* r4 = (const __global float4*)(Kt + n * skn);
          float4 s4 = (float4)(0.0f);
          #pragma unroll
          for (int c = 0; c < {d // 4}; ++c) s4 = mad(q4[c], r4[c], s4);
          dot = s4.x + s4.y + s4.z + s4.w;
        }} else"""
    else:
        kdot = ""
    kdot += f""" {{
          __global const float* kr = Kt + n * skn;
          #pragma unroll 8
          for (int c = 0; c < {d}; ++c) dot = mad(qs[c], kr[c * skd], dot);
        }}"""
    newdot = f"""{{
          __global const float* xr = XK + (n - past) * sxkn;
          __global float* kw = Kt + n * skn;
          #pragma unroll 8
          for (int c = 0; c < {d}; ++c) {{
            const float kv = xr[c * sxkd];
            dot = mad(qs[c], kv, dot);
            if (wk) kw[c * skd] = kv;
          }}
        }}""" if append else ""
    score = f"""const int flat = (b * M + m) * N + n;
        {offs}
        {code}
        const float sc = x{len(score_ops)};
        ps[i] = sc;
        tmax = {nan_max("tmax", "sc")};"""
    if append:
        scores = f"""for (int i = lid; i < cn; i += DLS) {{
      const int n = c0 + i;
      float dot = 0.0f;
      if (n >= past) {newdot} else {kdot}
      {{
        {score}
      }}
    }}"""
    else:
        scores = f"""for (int i = lid; i < cn; i += DLS) {{
      const int n = c0 + i;
      float dot = 0.0f;
      {kdot}
      {{
        {score}
      }}
    }}"""
    if vec4:
        old_end = "min(cn, past - c0)" if append else "cn"
        vrow = "(vvec ? vload4(0, V + n * svn + j4 * 4) : " \
               "(float4)(V[n * svn + (j4 * 4) * svj], V[n * svn + (j4 * 4 + 1) * svj], " \
               "V[n * svn + (j4 * 4 + 2) * svj], V[n * svn + (j4 * 4 + 3) * svj]))"
        vnew = """{
            const int n = c0 + i;
            __global const float* xr = XV + (n - past) * sxvn + (j4 * 4) * sxvj;
            const float4 vv = (float4)(xr[0], xr[sxvj], xr[2 * sxvj], xr[3 * sxvj]);
            if (wv) {
              __global float* vw = V + n * svn + (j4 * 4) * svj;
              vw[0] = vv.x; vw[svj] = vv.y; vw[2 * svj] = vv.z; vw[3 * svj] = vv.w;
            }
            a0 = mad((float4)(ps[i]), vv, a0);
          }"""
        new_loop = f"""for (; i < cn; i += {slices}) {vnew}""" if append else ""
        accumulate = f"""{{
      const int j4 = lid % {w4}, r = lid / {w4};
      if (r < {slices}) {{
        float4 a0 = (float4)(0.0f), a1 = a0, a2 = a0, a3 = a0;
        const int old = {old_end};
        int i = r;
        for (; i + {3 * slices} < old; i += {4 * slices}) {{
          int n = c0 + i;
          const float4 v0 = {vrow};
          n += {slices};
          const float4 v1 = {vrow};
          n += {slices};
          const float4 v2 = {vrow};
          n += {slices};
          const float4 v3 = {vrow};
          a0 = mad((float4)(ps[i]), v0, a0);
          a1 = mad((float4)(ps[i + {slices}]), v1, a1);
          a2 = mad((float4)(ps[i + {2 * slices}]), v2, a2);
          a3 = mad((float4)(ps[i + {3 * slices}]), v3, a3);
        }}
        for (; i < old; i += {slices}) {{
          const int n = c0 + i;
          a0 = mad((float4)(ps[i]), {vrow}, a0);
        }}
        {new_loop}
        acc4 = mad(acc4, (float4)(scale), (a0 + a1) + (a2 + a3));
      }}
    }}"""
        store = f"""{"o = select(o, (float4)(0.0f), isnan(o));" if nan_to_zero else ""}
    __global float* op = O + (lid * 4) * soj;
    op[0] = o.x; op[soj] = o.y; op[2 * soj] = o.z; op[3 * soj] = o.w;"""
        whole = f"""if (lid < {w4}) {{
    float4 a = (float4)(0.0f);
    for (int r = 0; r < {slices}; ++r) a += part[r * {w4} + lid];
    float4 o = a / sum;
    {store}
  }}"""
        finish = f"""__local float4 part[DLS];
  part[lid] = acc4;
  barrier(CLK_LOCAL_MEM_FENCE);
  {_merge_splits(w4, slices, store) if split else whole}"""
        acc_decl = "float4 acc4 = (float4)(0.0f);"
    else:
        if append:
            vload = """float vv;
          if (n >= past) {
            vv = XV[(n - past) * sxvn + j * sxvj];
            if (wv) V[n * svn + j * svj] = vv;
          } else {
            vv = V[n * svn + j * svj];
          }"""
        else:
            vload = "const float vv = V[n * svn + j * svj];"
        accumulate = """for (int t = 0; t < JT; ++t) {
      const int j = lid + t * DLS;
      if (j < DV) {
        float a = acc[t] * scale;
        #pragma unroll 4
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
        acc_decl = """float acc[JT];
  for (int t = 0; t < JT; ++t) acc[t] = 0.0f;"""
    if append:
        setup = """const int past = N - S;
  XK += xkoff + b0 * sxk0 + kb1 * sxk1;
  XV += xvoff + b0 * sxv0 + kb1 * sxv1;
  /* one writer per cache row: query row 0 of the first batch item and query head sharing
     the key head */
  const int wk = m == 0 && (sk0 != 0 || b0 == 0) && (sk1 != 0 ? b1 % G == 0 : b1 == 0);
  const int wv = m == 0 && (sv0 != 0 || b0 == 0) && (sv1 != 0 ? b1 % G == 0 : b1 == 0);"""
    else:
        setup = ""
    q4 = f"""__local float4 q4[{max(d // 4, 1)}];
  const int kvec = skd == 1 && (skn & 3) == 0 && (koff & 3) == 0 &&
      ((b0 * sk0 + kb1 * sk1) & 3) == 0;
  const int vvec = svj == 1 && (svn & 3) == 0 && (voff & 3) == 0 &&
      ((b0 * sv0 + kb1 * sv1) & 3) == 0;
  for (int c = lid; c < {d // 4}; c += DLS)
    q4[c] = (float4)(Q[(4 * c) * sqd], Q[(4 * c + 1) * sqd], Q[(4 * c + 2) * sqd],
                     Q[(4 * c + 3) * sqd]);""" \
        if d % 4 == 0 else "const int kvec = 0, vvec = 0;"
    tree = """for (int s = DLS / 2; s > 0; s >>= 1) {{
      if (lid < s) red[lid] = {op};
      barrier(CLK_LOCAL_MEM_FENCE);
    }}"""
    text = header([np.float32] + list(side_dtypes)) + (arrival_defs(ptx) if split else "") + \
        f"""#define DLS {DLS}
#define CHUNK {CHUNK}
#define JT {jt}
__kernel __attribute__((reqd_work_group_size(DLS, 1, 1)))
void attention_decode({', '.join(args)})
{{
  const int lid = get_local_id(0), m = get_group_id(1), b = get_group_id(2);
  const int b0 = b / B1, b1 = b - b0 * B1, kb1 = b1 / G;
  Q += qoff + b0 * sq0 + b1 * sq1 + m * sqm;
  Kt += koff + b0 * sk0 + kb1 * sk1;
  V += voff + b0 * sv0 + kb1 * sv1;
  O += ooff + b0 * so0 + b1 * so1 + m * som;
  {setup}
  __local float qs[{d}];
  __local float ps[CHUNK];
  __local float red[DLS];
  for (int c = lid; c < {d}; c += DLS) qs[c] = Q[c * sqd];
  {q4}
  {acc_decl}
  float mx = -INFINITY, sum = 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  {"const int ns_ = get_num_groups(0), kc_ = (N + ns_ - 1) / ns_;" if split else ""}
  const int lo_ = {"get_group_id(0) * kc_" if split else "0"};
  const int hi_ = {"min(N, lo_ + kc_)" if split else "N"};
  for (int c0 = lo_; c0 < hi_; c0 += CHUNK) {{
    const int cn = min(CHUNK, hi_ - c0);
    float tmax = -INFINITY;
    {scores}
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


def _merge_splits(w4: int, slices: int, store: str) -> str:
    """C statements ending a key split: it stores its unnormalized output row, running
    maximum and sum in its slot of ``DP`` (``w4`` float4 columns, summed over ``slices``
    groups of items); the last of the row's splits to arrive (counted on the row's word of
    ``da_count``, set back to 0 for the next launch) loads every split's (all in flight, up
    to MAX_SPLITS) and merges them in split order: o = sum_c exp(m_c - m) o_c / sum_c
    exp(m_c - m) l_c; ``store`` writes ``o``. The arrival and the loads past the L1 are the
    split-K GEMM's (:func:`netpass.runtime.kernels.mma.last_to_arrive`, ``arrival_defs``)."""
    ps = 4 * w4 + 4
    loads, weights, sums = [], [], []
    for u in range(MAX_SPLITS):
        cells = ", ".join(f"a{u}{c}_ = 0.0f" for c in "xyzw")
        got = " ".join(f"a{u}{c}_ = sk_load(pc_ + {u * ps} + 4 * lid + {i});"
                       for i, c in enumerate("xyzw"))
        loads.append(f"float m{u}_ = -INFINITY, l{u}_ = 0.0f, {cells};\n    if ({u} < ns_) "
                     f"{{ m{u}_ = sk_load(pc_ + {u * ps + 4 * w4}); l{u}_ = sk_load(pc_ + "
                     f"{u * ps + 4 * w4 + 1}); {got} }}")
        weights.append(f"gm_ = {nan_max('gm_', f'm{u}_')};")
        sums.append(f"{{ const float w_ = m{u}_ == -INFINITY ? 0.0f : exp(m{u}_ - gm_); "
                    f"l_ += w_ * l{u}_; o = mad((float4)(w_), (float4)(a{u}x_, a{u}y_, a{u}z_, "
                    f"a{u}w_), o); }}")
    nl = "\n    "
    return f"""const int row_ = b * M + m;
  __global float* pc_ = DP + row_ * ns_ * {ps};
  if (lid < {w4}) {{
    float4 a = (float4)(0.0f);
    for (int r = 0; r < {slices}; ++r) a += part[r * {w4} + lid];
    vstore4(a, lid, pc_ + get_group_id(0) * {ps});
  }}
  if (lid == 0) {{
    pc_[get_group_id(0) * {ps} + {4 * w4}] = mx;
    pc_[get_group_id(0) * {ps} + {4 * w4 + 1}] = sum;
  }}
  const int tid = lid;
  {last_to_arrive("da_last", "da_count[row_]", "ns_")}
  if (lid < {w4}) {{
    {nl.join(loads)}
    float gm_ = -INFINITY, l_ = 0.0f;
    float4 o = (float4)(0.0f);
    {nl.join(weights)}
    {nl.join(sums)}
    o = o / l_;
    {store}
  }}"""


GEMV_WG = 256       # work-items of a GEMV work-group
GEMV_ROWS = 8       # rows of A up to which a GEMM runs as GEMVs
GEMV_RUN = 12       # float4 loads of the weights an item has in flight at once on a GPU
GEMV_RUN_CPU = 4    # the same elsewhere (more predicated-off loads cost a CPU's loops)


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
    takes its rows' statistics first, and 64 items a column make four times the work-groups
    (the LM head's statistics then cost more than its weights). Elsewhere (a CPU's
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


@memoized
def gemv(epilogue: list[Stage], n_extra: int, extra_dtypes: list, erank: int, tpr: int,
         norm: tuple | None = None, run: int = GEMV_RUN, rows: int = GEMV_ROWS) -> Source:
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

    ``norm`` (norm_gemm: A's rows normalized, times gamma, plus beta): no statistics ahead.
    Each column's items read all of its row of A anyway, so they take the row's shifted sums
    and squares (``d = a - a[0]``, 0 for RMSNorm) as they go, with ``sum d g w``, ``sum g w``
    and ``sum b w``; the store applies ``rstd * (sum d g w - mean_d * sum g w) + sum b w``.
    (A prologue taking the statistics before the loop cost each work-group a chain of load
    latencies and two barriers: twice the weights' time on the H200.)"""
    args = gemm_args("float", n_extra, extra_dtypes, erank, norm)
    code = stage_code([Stage("v", [], "float")] + list(epilogue),
                       {j: f"in{j}[o_in{j}]" for j in range(n_extra)})
    offs = offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
    p = _gemv_norm_parts(norm)
    text = header([np.float32] + list(extra_dtypes)) + f"""#define WG {GEMV_WG}
#define TPR {tpr}
#define COLS (WG / TPR)
#define MR {rows}
#define RUN {run}
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
  }}
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
  }}{p["gather"]}
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = TPR / 2; s > 0; s >>= 1) {{
    if (lane < s) {{
      for (int m = 0; m < M; ++m) red[m * WG + lid] += red[m * WG + lid + s];{p["tree"]}
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  if (lane < M && n < N) {{
    const int m = lane;
    float v = red[m * WG + c * TPR];{p["store"]}
    const int flat = (b * M + m) * N + n;
    {offs}
    {code}
    C[coff + flat] = x{len(epilogue)};
  }}
}}
"""
    return Source(text, "gemv")


def _gemv_norm_parts(norm: tuple | None) -> dict[str, str]:
    """The C fragments :func:`gemv` splices in for a normalized A (empty for ``norm`` None):
    per item the row's shifted sums and squares (``ns``/``nq``: kept in local memory per row
    by column 0's items, which read all of it), ``sum g w`` and ``sum b w`` (``gw``/``bw``,
    per column: taken once, with row 0), the trees reducing them over a column's items and
    the store's ``rstd * (sum d g w - mean_d * sum g w) + sum b w``."""
    keys = ("decl", "zero", "row4", "dot4", "keep4", "decl1", "col1", "dot1", "keep1", "gather",
            "tree", "store")
    if norm is None:
        out = dict.fromkeys(keys, "")
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
