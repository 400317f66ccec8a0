"""A decode step's MLP in one launch: ``y = epilogue(W2 act(W1 norm(x) + b1))`` for one row
x, where a GEMV per projection takes two launches, each with its own ramp of loads.

Each work-group owns a chunk of ``hc`` hidden units: it issues the loads of its rows of W1 and
of its columns of W2 at once (the whole launch's weights in flight from the start), stages x
normalized in local memory, takes its hidden units (W1's rows against x, the bias, the
activation), then its share of every output, ``W2[:, chunk] @ h[chunk]``, which it stores as
its partial row. The partials are summed in a fixed order whatever order the work-groups end
in (bit-for-bit the same results run after run, as split-K's tail): the last of each block of
MLP_BLOCK work-groups to arrive sums the block's rows, and the last block to arrive sums the
blocks' rows and runs the epilogue (two counts of arrivals, each set back to zero by the last).

H200, weights from HBM (BENCHMARKS.md, stateful decoding, thirtieth round): a LLaMA-style
gated MLP (768 -> 2 x 1152 -> 768) 13.7-14.1 us against 16.4-17.2 for the two GEMVs; GPT-2's
(768 -> 3072 -> 768) 16.7-17.3 against 17.3-17.6, and in the model's step no faster
(fused_mlp folds gated MLPs by default).
"""
from __future__ import annotations

from .common import Source, Stage, memoized, offsets, side_params, stage_code
from .decode_gemv import staged_rows
from .eltwise import gated_code
from .mma import arrival_defs, last_to_arrive

MLP_WG = 256        # work-items of a work-group
MLP_REGS = 48       # float4 weights an item may hold in flight (W1's and W2's)
MLP_BLOCK = 8       # work-groups whose partial rows one of them sums
MLP_GROUPS = 256    # work-groups at most (the last one sums a row per block: 32 at most)


def mlp_partials(h: int, n: int, hc: int) -> tuple[int, int]:
    """(floats of the partial rows, int32 arrival counts) :func:`decode_mlp` needs for widths
    ``h`` -> ``n`` in chunks of ``hc``: a row per work-group and per block, a count per block
    and one for the blocks."""
    groups = h // hc
    blocks = -(-groups // MLP_BLOCK)
    return (groups + blocks) * n, blocks + 1


def _loads(k: int, n: int, hc: int, gated: bool) -> int:
    """Float4 weights an item of :func:`decode_mlp` holds for chunks of ``hc`` units."""
    rows1 = 2 * hc if gated else hc
    return -(-(k // 4) // (MLP_WG // rows1)) + -(-n // MLP_WG) * (hc // 4)


def mlp_chunk(k: int, h: int, n: int, gated: bool, units: int) -> int:
    """Hidden units per work-group of the fused MLP for widths ``k`` -> ``h`` -> ``n`` on a
    device of ``units`` compute units, or 0 where it does not apply (``k`` or ``h`` not a
    multiple of 4, weights an item would hold past MLP_REGS, more than MLP_GROUPS
    work-groups). The largest chunk (of 32, 16, 8, 4) dividing ``h`` that leaves at least
    ``units / 2`` work-groups and fits: on the H200 (132 units; a first version of the kernel,
    its partials added by atomics), GPT-2's 3072 units ran best in 96 work-groups of 32 (14.1
    us; 17.9 in 192 of 16, 15.7 in 384 of 8), LLaMA's 1152 gated ones in 72 of 16 (11.8 us;
    14.9 in 144 of 8, 15.7 in 36 of 32; BENCHMARKS.md, stateful decoding, thirtieth round)."""
    if k % 4 or h % 4 or not k or not h or not n:
        return 0
    fits = [hc for hc in (32, 16, 8, 4) if h % hc == 0 and h // hc <= MLP_GROUPS
            and _loads(k, n, hc, gated) <= MLP_REGS]
    wide = [hc for hc in fits if 2 * (h // hc) >= units]
    return wide[0] if wide else fits[-1] if fits else 0


@memoized
def decode_mlp(k: int, h: int, n: int, hc: int, norm: tuple | None, act: list[Stage],
               epilogue: list[Stage], extra_dtypes: list, erank: int, gated: bool,
               ptx: bool) -> Source:
    """The fused MLP (module docstring) for one row x [k] and compile-time widths: W1 [h, k]
    (gated: [2h, k], the gate's rows then the up projection's), b1, W2 [n, h], y [n].
    ``norm``: kernels.gemm.norm_prologue's tuple (gamma ``G`` and beta ``Bt`` as it says; x
    staged by decode_gemv.staged_rows), or None. ``act``: the stages after a hidden unit's
    value (the up projection's fused ops, literals their only side inputs; ``gated``: a gated
    MLP's ``act(g) * u`` over loads 0 and 1 instead, as ``eltwise.gated_code`` takes them);
    ``epilogue``: the down projection's (its bias, its fused ops), over side inputs of
    ``extra_dtypes`` indexed over ``erank`` dims (kernels.gemm.gemm_args' tail)."""
    k4, hc4 = k // 4, hc // 4
    rows1 = 2 * hc if gated else hc             # W1 rows a work-group reads
    tpr = MLP_WG // rows1                       # items per W1 row
    l1 = -(-k4 // tpr)                          # float4 loads of W1 an item
    l2 = -(-n // MLP_WG)                        # W2 rows an item (hc / 4 float4 each)
    args = ["__global const float* X", "int xoff", "__global const float* W1", "int w1off",
            "__global const float* B1", "int b1off", "__global const float* W2", "int w2off"]
    if norm is not None:
        args += ["__global const float* G", "int goff"] if norm[3] else []
        args += ["__global const float* Bt", "int btoff"] if norm[4] else []
    args += ["__global float* Y", "int yoff", "__global float* P", "__global int* count"]
    args += side_params(extra_dtypes, erank)
    w1row = f"(row < {hc} ? c0 + row : {h} + c0 + row - {hc})" if gated else "c0 + row"
    if gated:
        code, y = gated_code(act, "hs[j]", f"hs[{hc} + j]")
        unit = f"""{code}
    const float v = {y};"""
    else:
        unit = f"""const float v = hs[j];
    {stage_code([Stage("v", [], "float")] + act, {})}"""
    names = [f"in{j}" for j in range(len(extra_dtypes))]
    groups = h // hc
    blocks = -(-groups // MLP_BLOCK)
    in_block = f"min({MLP_BLOCK}, {groups} - blk * {MLP_BLOCK})"
    loads = {j: f"{t}[o_{t}]" for j, t in enumerate(names)}
    store = f"""const int flat = o;
      {offsets(erank, names, "flat") if names else ""}
      {stage_code([Stage("v", [], "float")] + epilogue, loads)}
      Y[yoff + o] = x{len(epilogue)};"""
    tail = "\n  ".join([
        last_to_arrive("block_last", "count[blk]", in_block),
        _sum_rows(f"blk * {MLP_BLOCK}", in_block, MLP_BLOCK, n, l2,
                  f"P[({groups} + blk) * {n} + o] = v;"),
        last_to_arrive("all_last", f"count[{blocks}]", str(blocks)),
        _sum_rows(str(groups), str(blocks), blocks, n, l2, store)])
    text = arrival_defs(ptx) + f"""#define WG {MLP_WG}
#define K4 {k4}
#define TPR {tpr}
#define MR 1
#define KL {4 * k4}
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void decode_mlp({', '.join(args)})
{{
  const int lid = get_local_id(0), tid = lid;
  const int c0 = get_group_id(0) * {hc};    // the work-group's first hidden unit
  const int row = lid / TPR, lane = lid - row * TPR;
  const int w1row = {w1row};
  __global const float4* w1 = (__global const float4*)(W1 + w1off + (size_t)w1row * {k});
  float4 a[{l1}];
  #pragma unroll
  for (int i = 0; i < {l1}; ++i) a[i] = lane + i * TPR < K4 ? w1[lane + i * TPR] : (float4)(0.0f);
  float4 b[{l2}][{hc4}];
  #pragma unroll
  for (int r = 0; r < {l2}; ++r) {{
    __global const float4* w2 =
        (__global const float4*)(W2 + w2off + (size_t)min(lid + r * WG, {n - 1}) * {h} + c0);
    #pragma unroll
    for (int q = 0; q < {hc4}; ++q) b[r][q] = w2[q];
  }}
  const float bias1 = lane == 0 ? B1[b1off + w1row] : 0.0f;
  __global const float* A = X + xoff;
  const int sam = 0, sak = 1, M = 1, K = {k};
  __local float hs[{rows1}];
  {staged_rows(norm) if norm is not None else _as_given()}
  barrier(CLK_LOCAL_MEM_FENCE);
  float s = 0.0f;
  #pragma unroll
  for (int i = 0; i < {l1}; ++i)
    if (lane + i * TPR < K4) s += dot(a[i], xn4[lane + i * TPR]);
  rs[lid] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lane == 0) {{
    float t = bias1;
    for (int e = 0; e < TPR; ++e) t += rs[lid + e];
    hs[row] = t;
  }}
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < {hc}) {{
    const int j = lid;
    {unit}
    rq[lid] = {"v" if gated else "x" + str(len(act))};
  }}
  barrier(CLK_LOCAL_MEM_FENCE);
  const int grp = get_group_id(0), blk = grp / {MLP_BLOCK};
  #pragma unroll
  for (int r = 0; r < {l2}; ++r) {{
    const int o = lid + r * WG;
    if (o < {n}) {{
      float t = 0.0f;
      #pragma unroll
      for (int q = 0; q < {hc4}; ++q) t += dot(b[r][q], vload4(q, rq));
      P[grp * {n} + o] = t;
    }}
  }}
  {tail}
}}
"""
    return Source(text, "decode_mlp")


def _sum_rows(first: str, count: str, most: int, n: int, l2: int, then: str) -> str:
    """Each item's outputs summed over partial rows ``first`` .. ``first + count - 1`` of
    ``P`` (at most ``most``), in row order, every load issued before the adds (L1 bypassed:
    other work-groups stored them), then ``then`` with the sum in ``v``."""
    loads = "\n      ".join(f"const float p{i} = {i} < {count} ? "
                            f"sk_load(P + ({first} + {i}) * {n} + o) : 0.0f;"
                            for i in range(most))
    adds = " ".join(f"if ({i} < {count}) v += p{i};" for i in range(1, most))
    return f"""#pragma unroll
  for (int r = 0; r < {l2}; ++r) {{
    const int o = lid + r * WG;
    if (o < {n}) {{
      {loads}
      float v = p0;
      {adds}
      {then}
    }}
  }}"""


def _as_given() -> str:
    """x into ``xn4`` as it is (no norm), and the work-group's ``rs`` and ``rq`` that
    decode_gemv.staged_rows would declare."""
    load = "A[4 * i + {e}]"
    x4 = "(float4)(" + ", ".join(load.format(e=e) for e in range(4)) + ")"
    return f"""__local float4 xn4[K4];
  __local float rs[WG], rq[WG];
  for (int i = lid; i < K4; i += WG) xn4[i] = {x4};"""
