"""Flash attention on tensor cores (``flash_attention``): out = softmax(ops(q k^T)) v for a
block of queries per work-group, the scores never leaving the registers.

A work-group of ``W`` warps owns ``BQ = 16 W`` query rows of one batch (a head); each warp 16
of them. The keys go in blocks of ``BKV``: per block, the warp's scores S = Q K^T (m16n8k8
``mma.sync``, TF32 or 3xTF32 as :mod:`netpass.runtime.kernels.mma`), the score ops (a scale, an
additive or boolean mask read from side inputs through strides), the padding (keys past N)
and causal masks, the running row maximum and sum (online softmax; lanes of a row meet
through two butterfly shuffles), and O += P V with P taken straight from the S accumulators:
an accumulator holds columns 2t, 2t+1 of its row, and pairing the k slots (t, t + 4) of the
second product with keys (2t, 2t + 1) makes the same registers its A operand (FlashAttention
2's register reuse; the V fragment reads follow the same pairing).

Q fragments are read once from global memory into registers (each lane four floats of its
two rows per slab); the online softmax's exponentials are ``native_exp`` (arguments <= 0; rel.
L2 1e-7 from ``exp`` on the H200's outputs, ~15 % of the f32 kernel's time). K and V blocks go
through two local-memory stages, the next block's copies (``cp.async`` where K
and V rows are contiguous and 16-byte aligned) in flight during this block's math. Layouts:
K as ``[d / 16][BKV][16]`` (the B operand read along k as in the GEMM), V as
``[BKV][DV + pad]`` with the row stride 4 mod 16 floats, so that the lanes reading keys 2t
and 2t + 1 of eight columns hit distinct banks.

Batch b = b0 * B1 + b1 as in the other attention kernel; the keys and values of query head
b1 are those of head b1 / G (grouped-query attention; G = 1 otherwise). With ``causal``, key
n is visible to query m when n <= m + cofs, and key blocks past the last visible one are not
visited (so NaN or Inf in q or k reach only the keys a query attends). Without PTX the same
source runs with the emulated ``MMA`` and shuffles (tests on PoCL).

Dead key blocks (``skip``): exports hand the causal pattern (often ANDed with a padding mask)
over as a mask tensor, not as a flag, so the kernel cannot know the causal half statically.
Before its loop, a work-group scans the mask rows of its queries (16-byte loads where they are
contiguous) for the last key that is live for any of them, a dead key being one whose mask
says so (an additive value <= -DEAD_SCORE, a boolean false, read through the side input's
strides), and visits the key blocks up to that one only. A dead key adds exp(score - max) =
exp(< -1e29) = 0 to a row whose running maximum is above -DEAD_SCORE / 2 (the row has a live
key), exactly what the reference computes, so the output is the same; if a row of the
work-group has no live key by then (every key masked: its reference softmax spreads over all
of them), the loop goes on over every block. Work-groups are then unequal, so with ``skip``
or ``causal`` they run the last query blocks (the longest rows) first. (A per-block vote in
the loop cost more than it saved on the H100: the mask loads sat before each iteration's
barrier.)

Key splits (``kv_split``): with few query blocks (a 1024-token prompt of 12 heads is 192
work-groups, all resident at once) the launch is short of work: the last query blocks walk
every key block while the compute units that ran the first ones sit idle, and without the
dead-block scan (which does not pay there) the causal half is walked too. The launch's
third dimension then splits each
row's key blocks into runs of ``chunk``; each split keeps its own running maximum m_c, sum
l_c and unnormalized output o_c, stores them in its slot of ``FP``, and the last split of
the query block to arrive (a per-request counter, as the split-K GEMM's tail in
:mod:`~netpass.runtime.kernels.mma`) merges them in split order: o = sum_c exp(m_c - m) o_c
over l = sum_c exp(m_c - m) l_c with m the largest m_c. A split with no keys of its rows
(past the causal end) returns at once. With ``skip``, a split scans its own keys for the
last one live for a row of the work-group and stops there (a split whose keys are all dead
stores an empty partial); the walk that would extend past it when a row turns out to have no
live key cannot run in one split (the row's keys are in others), so the work-group first
checks that every row has a key that anchors it (:func:`anchor_predicate`, walking key blocks
from the first until each row has found one: one block for a causal mask) and skips nothing
otherwise. (Exact as long as the scores before the mask stay below DEAD_SCORE / 4 in
magnitude.)

Causal bounds (``bounded``): where the build proves the dead mask dead for every key past
``m + cofs`` (``runtime.mask_bounds``: a decoder's causal mask ANDed with a padding mask), the
key blocks past the work-group's diagonal are not visited and no block is scanned; the
anchors are checked as above (a row with no anchor, padding on every key it could attend,
walks every key as its reference softmax spreads over all of them). A GPT-2 prompt of 1024
(H200, 2 layers): attention 0.259 -> 0.198 ms f32, 0.164 -> 0.132 ms TF32 (the scan's cost).

Shared mask rows (``shared_row``): where the build also proves that inside that bound the
mask is the same for every query row (``mask_bounds.row_free``: the causal comparison is true
there, the padding mask has one row) and knows its value past it, the blocks inside the keys
read the mask's last row for both rows of an item, and the key past ``m + cofs`` takes that
value: the same number the mask holds there, with half the loads (every row of the last one
is inside the bound for any key a row attends). The tail block and the anchors read the
mask's own rows. (Leaving the comparison out of the blocks before the work-group's first
diagonal bought nothing on the H200.)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import mma
from .attention import FILL_ARGS, fill_caches
from .common import SHUFFLE_PTX, Source, Stage, ctype, header, memoized, nan_max, stage_code
from .mma_parts import mma_group, mma_slots

MAX_HEAD = 128
DEAD_SCORE = 1e30  # a final score at most -DEAD_SCORE adds exp(<= -DEAD_SCORE / 2) = 0 to its row


def dead_predicate(dtype) -> str:
    """The C predicate over a mask value ``{v}`` saying that its key is dead: a boolean
    mask's false, an additive mask at most -DEAD_SCORE (-inf, or the dtype minimum that
    exporters write)."""
    return "!({v})" if np.dtype(dtype) == np.bool_ else f"(({{v}}) <= -{DEAD_SCORE:g}f)"


def anchor_predicate(dtype) -> str:
    """The C predicate over a mask value ``{v}`` saying that its key anchors its row: the
    row's final maximum is then above -DEAD_SCORE / 2, so the keys the mask kills add 0 to
    it (a boolean mask's true; an additive value above -DEAD_SCORE / 2)."""
    return "({v})" if np.dtype(dtype) == np.bool_ else "(({v}) > -HALF_DEAD)"


@dataclass(frozen=True)
class FlashConfig:
    """Warps per work-group (16 query rows each) and keys per block."""

    warps: int
    bkv: int

    @property
    def bq(self) -> int:
        return 16 * self.warps

    @property
    def threads(self) -> int:
        return 32 * self.warps


def config_for(d: int, split: int = 1) -> FlashConfig:
    """64 queries and 32 keys per block up to head size 64, 32 and 16 up to 128 (two stages
    of K and V in 48 KB of local memory); 3xTF32 (``split`` 3) up to 64 takes 16 keys a block
    (GPT-2 small's 1024-token prefill on the H200: attention 1.27 ms against 1.35 with 32;
    fewer or more queries a block were slower, and TF32 ran alike with 16 or 32 keys)."""
    if d > 64:
        return FlashConfig(2, 16)
    return FlashConfig(4, 16 if split == 3 else 32)


_Q_FRAG = r"""
inline float4 q_frag(__global const float* Qm, int r, int c, int rows, int D, int sqm, int sqd) {
  __global const float* q = Qm + r * sqm + c * sqd;
  const int n = r < rows ? clamp(D - c, 0, 4) : 0;
  return (float4)(n > 0 ? q[0] : 0.0f, n > 1 ? q[sqd] : 0.0f, n > 2 ? q[2 * sqd] : 0.0f,
                  n > 3 ? q[3 * sqd] : 0.0f); }
"""
_SHUFFLE_EMULATED = r"""
#define SHFL_XOR(dst, v, m) { xch[tid] = (v); barrier(CLK_LOCAL_MEM_FENCE); \
  dst = xch[(tid & ~31) | (lane ^ (m))]; barrier(CLK_LOCAL_MEM_FENCE); }
""" + f"inline float fmaxn(float a, float b) {{ return {nan_max('a', 'b')}; }}\n"


def _ceil(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def _merge_splits(bq: int, dvp: int, no: int) -> str:
    """C statements after a key split's loop (module docstring, "Key splits"): the split
    stores its unnormalized output rows and their running maximum and sum in its slot of
    ``FP``; the last of the query block's splits to arrive (counted on the block's word of
    ``fa_count``, set back to 0 for the next launch) merges every split's, in split order,
    into its registers: o = sum_c exp(m_c - m) o_c, l = sum_c exp(m_c - m) l_c. At the
    kernel's top level (its ``__local`` flag must be)."""
    psize, ml = bq * (dvp + 2), bq * dvp
    cells = [(o, q, "r0_" if q < 2 else "r1_", f"{o * 8} + 2 * t + {q & 1}")
             for o in range(no) for q in range(4)]
    own = "\n  ".join(f"part_[{r} * {dvp} + {c}] = o{o}_{q};" for o, q, r, c in cells)
    zero = " ".join(f"o{o}_{q} = 0.0f;" for o, q, _, _ in cells)
    add = "\n    ".join(f"o{o}_{q} += w{q // 2}_ * sk_load(pc_ + {r} * {dvp} + {c});"
                         for o, q, r, c in cells)
    return f"""const int r0_ = warp * 16 + g, r1_ = r0_ + 8;
  const int tile_ = b * get_num_groups(0) + m0 / BQ;
  __global float* parts_ = FP + tile_ * get_num_groups(2) * {psize};
  __global float* part_ = parts_ + z_ * {psize};
  {own}
  if (t == 0) {{
    part_[{ml} + 2 * r0_] = mx0; part_[{ml} + 2 * r0_ + 1] = l0;
    part_[{ml} + 2 * r1_] = mx1; part_[{ml} + 2 * r1_ + 1] = l1;
  }}
  {mma.last_to_arrive("fa_last", "fa_count[tile_]", "active_")}
  float gm0 = -INFINITY, gm1 = -INFINITY;
  for (int c_ = 0; c_ < active_; ++c_) {{
    const float a0_ = sk_load(parts_ + c_ * {psize} + {ml} + 2 * r0_);
    const float a1_ = sk_load(parts_ + c_ * {psize} + {ml} + 2 * r1_);
    gm0 = {nan_max("gm0", "a0_")}; gm1 = {nan_max("gm1", "a1_")};
  }}
  l0 = 0.0f; l1 = 0.0f; {zero}
  for (int c_ = 0; c_ < active_; ++c_) {{
    __global const float* pc_ = parts_ + c_ * {psize};
    const float m0_ = sk_load(pc_ + {ml} + 2 * r0_), m1_ = sk_load(pc_ + {ml} + 2 * r1_);
    const float w0_ = m0_ == -INFINITY ? 0.0f : native_exp(m0_ - gm0);
    const float w1_ = m1_ == -INFINITY ? 0.0f : native_exp(m1_ - gm1);
    l0 += w0_ * sk_load(pc_ + {ml} + 2 * r0_ + 1); l1 += w1_ * sk_load(pc_ + {ml} + 2 * r1_ + 1);
    {add}
  }}"""


@memoized
def flash_attention(cfg: FlashConfig, d: int, dv: int, split: int, ptx: bool, vec: bool,
                    score_ops: list[Stage], side_dtypes: list, causal: bool,
                    empty_rows: str = "nan", hi_round: str = "rn",
                    skip: tuple[int, str] | None = None, fill: bool = False,
                    kv_split: bool = False, bounded: bool = False,
                    unit_keys: bool = False, shared_row: tuple[int, str] | None = None) -> Source:
    """The kernel for head size ``d`` and value width ``dv`` (<= MAX_HEAD). ``vec``: K and V
    rows contiguous with row and batch strides multiples of 4 floats and ``d``, ``dv`` too:
    their blocks are copied 16 bytes at a time (``cp.async`` with PTX; a work-group whose K or
    V start is not 16-byte aligned copies plainly). ``score_ops`` read side input j at
    ``in<j>[off + b0 s0 + b1 s1 + m s2 + n s3]``. ``empty_rows``: what a row whose keys are
    all masked gives: "nan" (0 / 0, as a plain softmax), "zero_nan" (any NaN output reads 0:
    torch's ``Where(IsNaN(p), 0, p)`` guard) or "zero" (0 where the row's sum is 0, as ONNX
    Attention; NaN inputs still give NaN). ``skip``: (side input j, C predicate over its
    value ``v``) saying that a key is dead for a query: its score went through a final
    stage that leaves it at most ``-DEAD_SCORE`` (an additive mask ``<= -DEAD_SCORE``, a
    boolean mask's false); a key block dead for every query of the work-group is skipped
    (module docstring, "Dead key blocks"). ``bounded`` (with ``skip``): the build proved
    every key past ``m + cofs`` dead in that side input (module docstring, "Causal bounds").
    ``fill``: the keys and values are a prompt's new
    rows, which each work-group writes into the caches for its own query rows
    (``kernels.attention.fill_caches``; arguments after the side inputs). ``kv_split``: the
    keys split over the launch's third dimension (module docstring, "Key splits"; arguments
    last). ``unit_keys``: every side input's key stride is 1. ``shared_row`` (with
    ``bounded``): (side input j, C literal of its value past ``m + cofs``) read one row for all
    queries (module docstring, "Shared mask rows")."""
    W, BKV, BQ, NT = cfg.warps, cfg.bkv, cfg.bq, cfg.threads
    DK, DVP = _ceil(d, 16), _ceil(dv, 8)
    if DK > MAX_HEAD or DVP > MAX_HEAD or (vec and (d % 4 or dv % 4)):
        raise ValueError(f"flash attention: head {d}, value width {dv} do not fit {cfg}")
    VST = DVP + (4 - DVP) % 16  # V row stride: 4 mod 16 floats
    NJ, NO, SL = BKV // 8, DVP // 8, DK // 16
    n_side = len(side_dtypes)
    args = ["__global const float* Q", "int qoff", "__global const float* Kt", "int koff",
            "__global const float* V", "int voff", "__global float* O", "int ooff",
            "int M", "int N", "int D", "int DV", "int B1", "int G", "int cofs",
            "int sq0", "int sq1", "int sqm", "int sqd", "int sk0", "int sk1", "int skn", "int skd",
            "int sv0", "int sv1", "int svn", "int svj", "int so0", "int so1", "int som", "int soj"]
    for j, dt in enumerate(side_dtypes):
        args += [f"__global const {ctype(dt)}* in{j}", f"int off_in{j}"]
        args += [f"int s_in{j}_{k}" for k in range(4)]
    if fill:
        args += FILL_ARGS
    if kv_split:
        args += ["int chunk", "__global float* FP", "__global int* fa_count"]

    def copy_block(dst: str, src: str, rows: int, width: int, limit_rows: str, limit_cols: str,
                   rs: str, cs: str, layout: str) -> str:
        """Rows ``rows`` x ``width`` (padded) of a tensor at ``src`` (row stride ``rs``, column
        stride ``cs``) into local ``dst``; ``layout`` maps (r, c) to its local index."""
        if vec and rows * width // 4 % NT == 0 and NT % (width // 4) == 0:
            # each item copies the same 4 columns of rows r_, r_ + NT / (width / 4), ...: the
            # column's bytes and the copy's kind are set once, the rows' addresses step
            rpp = NT // (width // 4)
            copy = ("if (al16) CP_ASYNC(&{d}[{l}], s_, bytes); "
                    "else FILL_PLAIN(&{d}[{l}], s_, bytes);")
            return f"""{{ const int c = (tid % {width // 4}) * 4, r0_ = tid / {width // 4};
      const int cb_ = clamp({limit_cols} - c, 0, 4) * 4;
      __global const float* s0_ = {src} + r0_ * {rs} + (c < {limit_cols} ? c : 0);
      #pragma unroll
      for (int k_ = 0; k_ < {rows * width // 4 // NT}; ++k_) {{
        const int r = r0_ + k_ * {rpp};
        const int bytes = r < {limit_rows} ? cb_ : 0;
        __global const float* s_ = r < {limit_rows} ? s0_ + k_ * {rpp} * {rs} : {src};
        {copy.format(d=dst, l=layout)}
      }} }}"""
        if vec:
            quads = rows * width // 4
            return f"""for (int i = tid; i < {quads}; i += NT) {{
      const int r = i / {width // 4}, c = (i % {width // 4}) * 4;
      const int bytes = r < {limit_rows} ? clamp({limit_cols} - c, 0, 4) * 4 : 0;
      __global const float* s_ = {src} + (r < {limit_rows} ? r : 0) * {rs}
                                 + (c < {limit_cols} ? c : 0);
      if (al16) CP_ASYNC(&{dst}[{layout}], s_, bytes); else FILL_PLAIN(&{dst}[{layout}], s_, bytes);
    }}"""
        return f"""for (int i = tid; i < {rows * width}; i += NT) {{
      const int r = i / {width}, c = i % {width};
      {dst}[{layout}] = (r < {limit_rows} && c < {limit_cols}) ? {src}[r * {rs} + c * {cs}] : 0.0f;
    }}"""

    kq_layout = "((c >> 4) * {rows} + r) * 16 + (c & 15)"

    def load_kv(stage: str, n0: str) -> str:
        kl = f"{stage} * {SL * BKV * 16} + " + kq_layout.format(rows=BKV)
        vl = f"{stage} * {BKV * VST} + r * {VST} + c"
        return (f"{{ __global const float* Kn = Kt + ({n0}) * skn; "
                f"__global const float* Vn = V + ({n0}) * svn;\n    "
                + copy_block("KS", "Kn", BKV, DK, f"N - ({n0})", "D", "skn", "skd", kl) + "\n    "
                + copy_block("VS", "Vn", BKV, DVP, f"N - ({n0})", "DV", "svn", "svj", vl) + " }")

    # Q fragments, read once from global memory: rows g and g + 8 of the warp, k = 4t..4t+3
    # of each 16-slab
    qfrag = []
    for s in range(SL):
        for h, off in (("l", 0), ("h", 8)):
            qfrag.append(f"const float4 q{s}{h} = q_frag(Qm, warp * 16 + {off} + g, "
                         f"{s * 16} + 4 * t, M - m0, D, sqm, sqd);")
        for step, (c0, c1) in enumerate((("x", "y"), ("z", "w"))):
            for r, (h, c) in enumerate((("l", c0), ("h", c0), ("l", c1), ("h", c1))):
                qfrag += mma.split_operand(f"qa{s}_{step}_{r}", f"q{s}{h}.{c}", split, hi_round)

    def groups(n: int) -> list[list[int]]:
        """Products taken together (``mma_parts.mma_group``): emulated, all of a step's (two
        barriers a step); with PTX one at a time, each right after its operands."""
        return [list(range(n))] if not ptx else [[i] for i in range(n)]

    def acc(name: str) -> str:
        return ", ".join(f"{name}_{q}" for q in range(4))

    # S = Q K^T for this block
    s_code = [f"float {', '.join(f's{j}_{q} = 0.0f' for q in range(4))};" for j in range(NJ)]
    for s in range(SL):
        s_code.append("{")
        for j in range(NJ):
            at = f"cs * {SL * BKV * 16} + ({s} * BKV + {j * 8} + g) * 16 + 4 * t"
            s_code.append(f"const float4 k{j} = vload4(0, &KS[{at}]);")
        for step, (c0, c1) in enumerate((("x", "y"), ("z", "w"))):
            for js in groups(NJ):
                for j in js:
                    s_code += mma.split_operand(f"kb{j}_{step}_0_", f"k{j}.{c0}", split, hi_round)
                    s_code += mma.split_operand(f"kb{j}_{step}_1_", f"k{j}.{c1}", split, hi_round)
                s_code += mma_group([", ".join(f"qa{s}_{step}_{r}{{p}}" for r in range(4))],
                                    [f"kb{j}_{step}_0_{{p}}, kb{j}_{step}_1_{{p}}" for j in js],
                                    [(acc(f"s{j}"), 0, n) for n, j in enumerate(js)], split)
        s_code.append("}")

    # score ops and masks, element (row m, key n). A block inside the keys (all but the
    # tail) reads its side inputs through pointers set once a block, at offsets known at
    # build time for unit key strides, and masks keys only where causal
    stages = [Stage("sv", [], "float")] + list(score_ops)
    ops = [stage_code(stages, {j: f"srow{j}_{h}[nc * s_in{j}_3]" for j in range(n_side)})
           for h in (0, 1)]
    last = f"x{len(score_ops)}"
    mask = "n >= N" + (" || n > m + cofs" if causal else "")
    tail: list[str] = []
    shared, lit = shared_row if shared_row is not None and bounded else (None, "")
    inner = [f"__global const {ctype(dt)}* sp{j}_{h} = srow{j}_{h} + (n0 + 2 * t) * s_in{j}_3;"
             for j, dt in enumerate(side_dtypes) for h in (("s",) if j == shared else (0, 1))]
    for j in range(NJ):
        for q in range(4):
            m, k = ("mr0" if q < 2 else "mr1"), j * 8 + (q & 1)
            loads = {js: f"sp{js}_{'s' if js == shared else q // 2}"
                         f"[{k if unit_keys else f'{k} * s_in{js}_3'}]" for js in range(n_side)}
            if shared is not None:
                loads[shared] = f"((n0 + {k} + 2 * t > {m} + cofs) ? ({lit}) : {loads[shared]})"
            tail.append(f"{{ const int m = {m}, n = n0 + {k} + 2 * t;"
                        + (" const int nc = min(n, N - 1);" if n_side else "")
                        + f" const float sv = s{j}_{q}; {ops[q // 2]}"
                        + f" s{j}_{q} = ({mask}) ? -INFINITY : {last}; }}")
            keep = f"(n0 + {k} + 2 * t > {m} + cofs) ? -INFINITY : " if causal else ""
            inner.append(f"{{ const float sv = s{j}_{q}; "
                         f"{stage_code(stages, loads)}"
                         f" s{j}_{q} = {keep}{last}; }}")
    score = ["if (n0 + BKV <= N) {", *inner, "} else {", *tail, "}"]

    def rowmax(name: str, qs: tuple) -> list[str]:
        vals = [f"s{j}_{q}" for j in range(NJ) for q in qs]
        return [f"float {name} = {vals[0]};"] + [f"{name} = fmaxn({name}, {v});" for v in vals[1:]]

    softmax = rowmax("tm0", (0, 1)) + rowmax("tm1", (2, 3)) + [
               "float o_;",
               "SHFL_XOR(o_, tm0, 1) tm0 = fmaxn(tm0, o_);",
               "SHFL_XOR(o_, tm0, 2) tm0 = fmaxn(tm0, o_);",
               "SHFL_XOR(o_, tm1, 1) tm1 = fmaxn(tm1, o_);",
               "SHFL_XOR(o_, tm1, 2) tm1 = fmaxn(tm1, o_);",
               "const float nm0 = fmaxn(mx0, tm0), nm1 = fmaxn(mx1, tm1);",
               "const float sc0 = nm0 == -INFINITY ? 1.0f : native_exp(mx0 - nm0);",
               "const float sc1 = nm1 == -INFINITY ? 1.0f : native_exp(mx1 - nm1);",
               # a row with no live key yet (max -inf) has only -inf scores: exp(-inf - 0) = 0
               "const float ms0 = nm0 == -INFINITY ? 0.0f : nm0;",
               "const float ms1 = nm1 == -INFINITY ? 0.0f : nm1;",
               "mx0 = nm0; mx1 = nm1;"]
    for j in range(NJ):
        for q in range(4):
            softmax.append(f"s{j}_{q} = native_exp(s{j}_{q} - ms{q // 2});")
    softmax.append("l0 = l0 * sc0 + " + " + ".join(f"s{j}_0 + s{j}_1" for j in range(NJ)) + ";")
    softmax.append("l1 = l1 * sc1 + " + " + ".join(f"s{j}_2 + s{j}_3" for j in range(NJ)) + ";")
    for o in range(NO):
        softmax.append(f"o{o}_0 *= sc0; o{o}_1 *= sc0; o{o}_2 *= sc1; o{o}_3 *= sc1;")

    # O += P V: the S accumulators of key block j are the A operand (keys 2t, 2t+1 in slots t, t+4)
    pv = [f"__local const float* vt_ = VS + cs * {BKV * VST} + 2 * t * {VST} + g;"]
    for j in range(NJ):
        pv.append("{")
        for r, q in enumerate((0, 2, 1, 3)):
            pv += mma.split_operand(f"pa{j}_{r}", f"s{j}_{q}", split, hi_round)
        for os_ in groups(NO):
            for o in os_:
                for r in range(2):
                    pv.append(f"const float v{o}_{r} = vt_[{(j * 8 + r) * VST + o * 8}];")
                    pv += mma.split_operand(f"vb{o}_{r}_", f"v{o}_{r}", split, hi_round)
            pv += mma_group([", ".join(f"pa{j}_{r}{{p}}" for r in range(4))],
                            [f"vb{o}_0_{{p}}, vb{o}_1_{{p}}" for o in os_],
                            [(acc(f"o{o}"), 0, n) for n, o in enumerate(os_)], split)
        pv.append("}")

    def scan(lo: str, hi: str) -> str:
        """The last key in [lo, hi) live for any query of the work-group, into ``live_end``
        (module docstring, "Dead key blocks")."""
        if skip is None:
            return ""
        js, pred = skip
        t_ = ctype(side_dtypes[js])
        live4 = " ".join(f"if (!{pred.format(v='v_.' + c)}) last_ = max(last_, lo_ + c_ + {k});"
                         for k, c in enumerate("xyzw"))
        return f"""{{ int last_ = -1;
    const int rows_ = min(BQ, M - m0), rs_ = s_in{js}_2, cs_ = s_in{js}_3;
    const int lo_ = {lo}, keys_ = max(0, ({hi}) - lo_);
    __global const {t_}* mk_ = in{js} + ob{js} + m0 * rs_ + lo_ * cs_;
    const int q4_ = cs_ == 1 && ((ob{js} + m0 * rs_ + lo_) & 3) == 0 && (rs_ & 3) == 0
                    ? keys_ >> 2 : 0;
    for (int i = tid; i < rows_ * q4_; i += NT) {{
      const int r_ = i / q4_, c_ = (i - r_ * q4_) * 4;
      const {t_}4 v_ = vload4(0, mk_ + r_ * rs_ + c_);
      {live4}
    }}
    const int w_ = keys_ - 4 * q4_;
    for (int i = tid; i < rows_ * w_; i += NT) {{
      const int r_ = i / w_, n_ = 4 * q4_ + i - r_ * w_;
      if (!{pred.format(v="mk_[r_ * rs_ + n_ * cs_]")}) last_ = max(last_, lo_ + n_);
    }}
    if (last_ >= 0) atomic_max(&live_end, last_);
  }}"""

    def anchors(js: int) -> str:
        """Whether some row of the work-group has no key that anchors it in mask side input
        ``js`` (``unanchored_``), the key blocks walked from the first until every row has
        one (module docstring, "Key splits")."""
        anchor = anchor_predicate(side_dtypes[js]).format(
            v=f"in{js}[ob{js} + min(m0 + r_, M - 1) * s_in{js}_2 + min(n_, N - 1) * s_in{js}_3]")
        # every item's mask loads in flight at once (a load behind each row's flag made a chain
        # of L2 round trips)
        return f"""__local int rowlive_[BQ];
  for (int i = tid; i < BQ; i += NT) rowlive_[i] = m0 + i >= M;
  int unanchored_ = 0;
  for (int kb_ = 0; kb_ < nfull; ++kb_) {{
    barrier(CLK_LOCAL_MEM_FENCE);
    #pragma unroll
    for (int k_ = 0; k_ < {BQ * BKV // NT}; ++k_) {{
      const int i = tid + k_ * NT, r_ = i / BKV, n_ = kb_ * BKV + i % BKV;
      if (n_ < nend && {anchor}) rowlive_[r_] = 1;
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
    unanchored_ = 0;
    for (int r_ = 0; r_ < BQ; r_ += 4) {{
      const int4 l_ = vload4(0, rowlive_ + r_);
      unanchored_ |= !l_.x | !l_.y | !l_.z | !l_.w;
    }}
    if (!unanchored_) break;
  }}"""

    extend = "" if skip is None or kv_split else f"""if (it + 1 == nblocks && nblocks < nfull) {{
      if ((mr0 < M && !(mx0 > -HALF_DEAD)) || (mr1 < M && !(mx1 > -HALF_DEAD))) unanchored = 1;
      barrier(CLK_LOCAL_MEM_FENCE);
      if (unanchored) {{ nblocks = nfull; {load_kv("(cs ^ 1)", "n0 + BKV")} }}
      CP_COMMIT();
    }}"""

    finish = {"nan": "v_", "zero_nan": "isnan(v_) ? 0.0f : v_", "zero": "{lv} == 0.0f ? 0.0f : v_"}
    store = []
    for o in range(NO):
        for q in range(4):
            m, lv = ("mr0", "l0") if q < 2 else ("mr1", "l1")
            store.append(f"{{ const int j = {o * 8} + 2 * t + {q & 1}; if ({m} < M && j < DV) {{ "
                         f"const float v_ = o{o}_{q} / {lv}; O[{m} * som + j * soj] = "
                         f"{finish[empty_rows].format(lv=lv)}; }} }}")

    merge = _merge_splits(BQ, DVP, NO) if kv_split else ""
    side_base = "\n  ".join(f"const int ob{j} = off_in{j} + b0 * s_in{j}_0 + b1 * s_in{j}_1;"
                            for j in range(n_side))
    side_rows = "\n  ".join(
        f"__global const {ctype(dt)}* srow{j}_{h} = in{j} + ob{j} + min(mr{h}, M - 1) * s_in{j}_2;"
        for j, dt in enumerate(side_dtypes) for h in (0, 1))
    if shared is not None:  # the inner blocks' one row (the tail block reads the rows' own)
        side_rows += (f"\n  __global const {ctype(side_dtypes[shared])}* srow{shared}_s = "
                      f"in{shared} + ob{shared} + (M - 1) * s_in{shared}_2;")
    shuffle = SHUFFLE_PTX if ptx else _SHUFFLE_EMULATED
    scratch = mma.emulation_scratch(ptx, W, *mma_slots(1, max(NJ, NO), split)) + \
        ("" if ptx else " __local float xch[NT];")
    longest_first = skip is not None or causal
    skip_locals = "" if skip is None else \
        "__local int live_end, unanchored; if (tid == 0) { live_end = -1; unanchored = 0; }"
    if kv_split:  # this split's blocks, up to the last live one where every row is anchored
        first_blocks = "min(nfull, it0 + chunk)" if skip is None else \
            "unanchored_ ? min(nfull, it0 + chunk) : min(nlive, it0 + chunk)" if bounded else \
            ("unanchored_ ? min(nfull, it0 + chunk) : live_end >= 0 ? "
             "min(min(nfull, it0 + chunk), live_end / BKV + 1) : it0")
        scan_range = ("it0 * BKV", "min(nend, (it0 + chunk) * BKV)")
    else:
        first_blocks = "nfull" if skip is None else "nlive > 0 ? nlive : nfull" if bounded else \
            "live_end >= 0 ? min(nfull, live_end / BKV + 1) : nfull"
        scan_range = ("0", "nend")
    m_block = "(get_num_groups(0) - 1 - get_group_id(0))" if longest_first else "get_group_id(0)"
    nend = "min(N, m0 + BQ + cofs)" if causal else "N"
    # a key split past the row's last block has nothing to do; the first one always runs
    chunk_range = """const int z_ = get_group_id(2), it0 = z_ * chunk;
  const int active_ = max(1, (nfull + chunk - 1) / chunk);
  if (z_ >= active_) return;""" if kv_split else "const int it0 = 0;"
    fill_code = fill_caches("m0", "BQ", "NT", "tid") if fill else ""
    if fill and kv_split:
        fill_code = f"if (z_ == 0) {{ {fill_code} }}"
    al16 = ("const int al16 = ((((size_t)Kt) | ((size_t)V)) & 15) == 0;" if vec
            else "")
    o_init = " ".join(f"float o{o}_0 = 0.0f, o{o}_1 = 0.0f, o{o}_2 = 0.0f, o{o}_3 = 0.0f;"
                      for o in range(NO))
    text = header([np.float32] + list(side_dtypes)) + f"""#define NT {NT}
#define BQ {BQ}
#define BKV {BKV}
#define STAGES 2
#define HALF_DEAD {DEAD_SCORE / 2:g}f
{mma.macros(ptx, 0)}{shuffle}{_Q_FRAG}{mma.arrival_defs(ptx) if kv_split else ""}
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void flash_attention({', '.join(args)})
{{
  const int tid = get_local_id(0), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int m0 = {m_block} * BQ;
  const int b = get_group_id(1);
  const int b0 = b / B1, b1 = b - b0 * B1, kb1 = b1 / G;
  __global const float* Qm = Q + qoff + b0 * sq0 + b1 * sq1 + m0 * sqm;
  Kt += koff + b0 * sk0 + kb1 * sk1;
  V += voff + b0 * sv0 + kb1 * sv1;
  O += ooff + b0 * so0 + b1 * so1;
  const int nend = {nend};
  const int nfull = nend > 0 ? (nend + BKV - 1) / BKV : 0;
  {"const int nlive = (clamp(m0 + BQ + cofs, 0, N) + BKV - 1) / BKV;" if bounded else ""}
  {chunk_range}
  {fill_code}
  {side_base}
  __local float KS[2 * {SL * BKV * 16}] __attribute__((aligned(16)));
  __local float VS[2 * {BKV * VST}] __attribute__((aligned(16)));
  {scratch}
  {skip_locals}
  {al16}
  const int mr0 = m0 + warp * 16 + g, mr1 = mr0 + 8;
  {side_rows}
  {chr(10).join("  " + x for x in qfrag)}
  {anchors(skip[0]) if kv_split and skip is not None else ""}
  {"" if bounded else scan(*scan_range)}
  barrier(CLK_LOCAL_MEM_FENCE);
  float mx0 = -INFINITY, mx1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  {o_init}
  int nblocks = {first_blocks};
  if (nblocks > it0) {load_kv("0", "it0 * BKV")}
  CP_COMMIT();
  for (int it = it0; it < nblocks; ++it) {{
    CP_WAIT();
    barrier(CLK_LOCAL_MEM_FENCE);  /* block it is in; block it - 1 is no longer read */
    const int cs = (it - it0) & 1, n0 = it * BKV;
    if (it + 1 < nblocks) {load_kv("(cs ^ 1)", "n0 + BKV")}
    CP_COMMIT();
    {chr(10).join("    " + x for x in s_code)}
    {chr(10).join("    " + x for x in score)}
    {chr(10).join("    " + x for x in softmax)}
    {chr(10).join("    " + x for x in pv)}
    {extend}
  }}
  float o_;
  SHFL_XOR(o_, l0, 1) l0 += o_;
  SHFL_XOR(o_, l0, 2) l0 += o_;
  SHFL_XOR(o_, l1, 1) l1 += o_;
  SHFL_XOR(o_, l1, 2) l1 += o_;
  {merge}
  {chr(10).join("  " + x for x in store)}
}}
"""
    return Source(text, "flash_attention")
