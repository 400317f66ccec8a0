"""A TF32 GEMM on Hopper's tensor memory accelerator and ``wgmma`` (:mod:`.wgmma`).

C[M, N] = A[M, K] B[K, N] with both operands K-contiguous (A's rows; B as a FullyConnected's
weights [N, K] as given), through the epilogue the graph fused. One work-group a BM x BN tile
(tiles rastered in groups of GROUP_M tile rows, for L2 reuse): BM / 64 consumer warpgroups,
each owning 64 rows and issuing one ``wgmma`` m64nBNk8 a K step of 8, and a producer warp
that brings each stage (an 8-wide K slice of A's BM rows and of B's BN rows, 32-byte swizzled)
with two ``cp.async.bulk.tensor`` copies, completed on the stage's ``full`` mbarrier; the
consumers release a stage on its ``empty`` mbarrier. Out-of-range rows and K columns arrive as
zeros (the tensor maps' bounds), so any M, N, K run. An operand that does not start on a
16-byte boundary (a view's offset) takes the emulated schedule below instead.

The tensor maps: the engine encodes two templates once (``runtime.tensor_maps``: boxes, swizzle,
element type); each work-group's producer copies them to local memory, sets their addresses,
extents and row strides with ``tensormap.replace`` and publishes them to its slot of a scratch
buffer (``tensormap.cp_fenceproxy``), from where its copies read them.

A float32 GEMM runs as 3xTF32 (``TmaConfig.split`` 3): once a stage has arrived, the consumers
write its remainders (x less its TF32 head, the float32 with its low 13 bits dropped, which is
how the tensor cores read the stage itself) into one of two local buffers laid out as the
stage; each K step is then three products (remainders first: low A with B, A with low B, A
with B). A step's remainders are written while the step before it is on the tensor cores,
and one barrier a step orders them before the products that read them (two remainder
buffers: the one being written was last read two steps before, and every consumer has waited
for that step's products before this barrier).

The epilogue: each warp's 16 x 64 slices through local memory, stored four columns a lane
where N and C's offset allow (one index sum, bound check and 16-byte store for four
elements), else one; with TF32, ``tanh`` in it is the hardware's approximation
(``TANH_TF32``).

``ptx`` False is the same schedule emulated for tests on any OpenCL device: no producer warp,
the stage copied (and swizzled) by all items, each product summed from local memory."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .common import Source, Stage, ctype, header, memoized, offsets, stage_code
from .gemm import gemm_args
from .mma import side_at, side_inputs, slice_stores, store_macro
from .wgmma import PTX, SWIZZLE32, mma_call

GROUP_M = 8
TF32T = "#define TF32T(x) as_float(as_uint(x) & 0xffffe000u)\n"
# TF32's epilogue: tanh as the hardware's approximation (relative error ~2^-11, TF32's own
# mantissa), one instruction where OpenCL's tanh is a routine: GPT-2's tanh-GELU up
# projections, 0.05-0.1 ms of a 1024-token prefill (H200, issue 18, round 28)
TANH_TF32 = ("inline float tanh_tf32(float x) { float y; "
             'asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }\n')
_TANH_CALL = re.compile(r"(?<![\w.])tanh\(")
# a stage's remainders x - trunc(x) (0 for infinities, whose remainder would be NaN) by ``n``
# items from item ``t``: its heads are the stage as the copies wrote it, the tensor cores reading
# float32 bits as TF32 (the low 13 bits dropped; heads rounded to nearest and written back
# measured as accurate and 10-16% slower: H200, issue 18, round 22)
SPLIT_STAGE = r"""
inline void split_stage(__local const float4* st, __local float4* lo, int t, int count, int n) {
  for (int e = t; e < count; e += n) {
    const float4 v = st[e];
    lo[e] = select(v - as_float4(as_uint4(v) & (uint4)(0xffffe000u)), (float4)(0.0f), isinf(v));
  }
}
"""
EP_LD = 68  # row stride (floats) of a warp's 16 x 64 epilogue slice: rows g and g + 8 apart
MAP_SLOT = 256  # bytes of a work-group's two tensor maps in the scratch buffer
# epilogue stores unrolled where side inputs are not loaded ahead (strides not over
# (batch, m, n))
EP_UNROLL = 4


@dataclass(frozen=True)
class TmaConfig:
    """A tile: ``bm`` rows (64 a consumer warpgroup), ``bn`` columns (a multiple of 64, at
    most 256: one wgmma), ``stages`` K slices of 8 in flight; ``split`` the TF32 products of a
    product: 1 (TF32) or 3 (3xTF32, float32)."""

    bm: int
    bn: int
    stages: int
    split: int = 1

    @property
    def warpgroups(self) -> int:
        return self.bm // 64

    def threads(self, ptx: bool) -> int:
        return 128 * self.warpgroups + (32 if ptx else 0)

    @property
    def a_bytes(self) -> int:
        return self.bm * 32

    @property
    def stage_bytes(self) -> int:
        return (self.bm + self.bn) * 32

    @property
    def low_bytes(self) -> int:
        """The two buffers of a stage's remainders (3xTF32), after the stages."""
        return 2 * self.stage_bytes if self.split == 3 else 0

    @property
    def smem_bytes(self) -> int:
        """The stages and remainders, or each warp's epilogue slice where that is more."""
        return max(self.stages * self.stage_bytes + self.low_bytes,
                   4 * 16 * EP_LD * 4 * self.warpgroups)

    def local_bytes(self) -> int:
        return self.smem_bytes + 16 * self.stages + 256

    def check(self) -> None:
        if self.bm % 64 or not 64 <= self.bm <= 256 or self.bn % 64 or not 64 <= self.bn <= 256:
            raise ValueError(f"tile {self.bm}x{self.bn}: rows in 64s up to 256, columns in 64s "
                             "up to 256")
        if self.split not in (1, 3):
            raise ValueError(f"split {self.split}: TF32 (1) or 3xTF32 (3)")
        if self.split == 3 and self.stages < 2:
            raise ValueError("3xTF32 splits the next stage while a step's products read one: "
                             "2 stages at least")
        if self.stages < 1 or self.local_bytes() > 48 << 10:
            raise ValueError(f"tile {self.bm}x{self.bn} x {self.stages}: not in 48 KB of "
                             "local memory")


# tiles and the rate each keeps up on a long K (H200, benchmarks/bench_wgmma_gemm.py, 4096^3,
# TFLOP/s); a GEMM takes the tile and K slices whose rounds of work-groups over the compute
# units cost least (the same run's GPT-2 and 4096-row projections: the predicted order held on
# all seven shapes)
CONFIGS = ((TmaConfig(128, 256, 3), 192.0), (TmaConfig(128, 192, 4), 169.0),
           (TmaConfig(128, 128, 5), 147.0), (TmaConfig(64, 128, 7), 100.0))
# 3xTF32's tiles (the remainders' buffers take the room of two stages) and their rates: 128x128
# at 4096^3 (H200, the same script); 128x192's is the rate that ranks it as GPT-2's 1024-token
# prompt measured it (61 TFLOP/s alone at 4096^3 with warm operands; in the prompt, whose
# weights come from HBM, tiles of 128 rows read them half as often as 64x128 x5 tiles, which
# ran faster alone and cost the prompt 0.5 ms: benchmarks/probe_tma_tiles.py)
CONFIGS_3X = ((TmaConfig(128, 128, 3, 3), 105.0), (TmaConfig(128, 192, 2, 3), 95.0))
# float32 GEMMs run here as 3xTF32 (None: they are left to kernels.mma's)
F32_SPLIT: int | None = 3
MIN_M = 64
# 3xTF32 from this many rows: below it kernels.mma's split-K GEMMs were as fast or faster on
# GPT-2's projections (H200, weights [N, K], f32: 64 rows 0.019-0.029 ms against 0.027-0.035;
# 128 rows alike but the [768, 768] projection's 0.019 against 0.029; 256 rows 0.034-0.042
# against 0.048-0.057 but 0.029 against 0.025 for [768, 768])
MIN_M_3X = 256
# K slices: a tile grid that leaves compute units idle walks K in slices on more work-groups,
# their partial products summed by ``mma.splitk_reduce`` through the epilogue (a launch of
# about REDUCE_US plus the partials' and the output's bytes at REDUCE_BYTES_PER_US); a slice
# keeps at least SLICE_MIN_K of K, in whole K steps of 8
MAX_SLICES, SLICE_MIN_K, REDUCE_US, REDUCE_BYTES_PER_US = 8, 256, 2.0, 3e6


class TmaPlan(NamedTuple):
    """A tile and the K slices it walks (``slices`` 1: K whole)."""

    cfg: TmaConfig
    slices: int
    slice_k: int


def groups(cfg: TmaConfig, M: int, N: int, slices: int = 1) -> int:
    """Work-groups of a launch: a tile each, in each K slice."""
    return -(-M // cfg.bm) * -(-N // cfg.bn) * slices


def _cost_us(rate: float, M: int, N: int, option: TmaPlan, cus: int) -> float:
    """The predicted microseconds of a plan: its rounds of work-groups over the compute units,
    each at the tile's rate, and the reduction of its slices."""
    cfg = option.cfg
    work = 2.0 * cfg.bm * cfg.bn * option.slice_k * cus / (rate * 1e6)
    reduce = REDUCE_US + (option.slices + 2) * M * N * 4 / REDUCE_BYTES_PER_US \
        if option.slices > 1 else 0.0
    return -(-groups(cfg, M, N, option.slices) // cus) * work + reduce


def choose(M: int, N: int, K_: int, cus: int, split: int = 1) -> TmaPlan:
    """The plan of least predicted time over the tiles of ``split`` (CONFIGS, CONFIGS_3X) and
    1..MAX_SLICES K slices."""
    best: tuple[float, TmaPlan] | None = None
    for cfg, rate in CONFIGS if split == 1 else CONFIGS_3X:
        for want in range(1, MAX_SLICES + 1):
            per = -(-K_ // want)  # (K per slice, rounded up to whole steps of 8)
            slice_k = -(-per // 8) * 8 if want > 1 else K_
            slices = -(-K_ // slice_k)
            if slices != want or want > 1 and slice_k < SLICE_MIN_K:
                continue
            option = TmaPlan(cfg, slices, slice_k)
            cost = _cost_us(rate, M, N, option, cus)
            if best is None or cost < best[0]:
                best = (cost, option)
    assert best is not None
    return best[1]


def plan(engine, precision: str | None, M: int, N: int, K_: int, nb: int, sa: list, sb: list,
         norm: tuple | None) -> TmaPlan | None:
    """The tile and K slices of this float32 GEMM (A [M, K] with strides ``sa``, B [K, N]
    with ``sb``) on this kernel, or None where it does not run it: the engine's ``tma`` ("ptx"
    on Hopper, "emulated" in tests), precision "tf32" (or float32 as 3xTF32 where F32_SPLIT
    says), one batch, no normalized rows, K contiguous in A and B with row strides of whole 16
    bytes (the tensor maps' rule), M >= MIN_M (MIN_M_3X for 3xTF32)."""
    split = 1 if precision == "tf32" else F32_SPLIT
    if not getattr(engine, "tma", "") or split is None or nb != 1 or norm is not None:
        return None
    min_m = MIN_M if split == 1 else MIN_M_3X
    if min_m > M or not N or not K_ or sa[-1] != 1 or sb[-2] != 1 or sa[-2] % 4 \
            or sb[-1] % 4 or sa[-2] < K_ or sb[-1] < K_:
        return None
    return choose(M, N, K_, int(engine.device.max_compute_units), split)


def work_sizes(cfg: TmaConfig, M: int, N: int, ptx: bool, slices: int = 1
               ) -> tuple[tuple, tuple]:
    n = cfg.threads(ptx)
    return (groups(cfg, M, N, slices) * n, 1, 1), (n, 1, 1)


def map_slots(cfg: TmaConfig, M: int, N: int, slices: int = 1) -> int:
    """Bytes of the scratch buffer holding the work-groups' tensor maps."""
    return groups(cfg, M, N, slices) * MAP_SLOT


def _raster(cfg: TmaConfig, split: bool) -> str:
    """The tile ``(m0, n0)`` of this work-group and, ``split``, its K slice ``ks`` (slices one
    after the other over all tiles), its first K ``k0`` and its K steps ``KT``."""
    bm, bn = cfg.bm, cfg.bn
    if split:
        ks = """const int ks = get_group_id(0) / (tiles_m * tiles_n);
  const int pid = get_group_id(0) % (tiles_m * tiles_n), k0 = ks * slice_k;
  const int KT = (min(slice_k, K - k0) + 7) / 8;"""
    else:
        ks = "const int pid = get_group_id(0), k0 = 0, KT = (K + 7) / 8;"
    return f"""const int tiles_n = (N + {bn - 1}) / {bn}, tiles_m = (M + {bm - 1}) / {bm};
  {ks}
  const int per_group = {GROUP_M} * tiles_n;
  const int first_m = (pid / per_group) * {GROUP_M}, gm = min(tiles_m - first_m, {GROUP_M});
  const int m0 = (first_m + (pid % per_group) % gm) * {bm};
  const int n0 = ((pid % per_group) / gm) * {bn};"""


def _producer(cfg: TmaConfig) -> str:
    """The producer warp: the maps made and published, then every stage's two copies."""
    s, stage, a_bytes = cfg.stages, cfg.stage_bytes, cfg.a_bytes
    return f"""if (wg == {cfg.warpgroups}) {{
    const int lane = t & 31;
    if (lane < 16) tms[lane] = ((__global const float4*)TM)[lane];
    WARP_SYNC();
    if (lane == 0) {{
      TM_ADDRESS(tmb, (ulong)A); TM_DIM(tmb, 0, K); TM_DIM(tmb, 1, M);
      TM_STRIDE(tmb, (ulong)sam * 4);
      TM_ADDRESS(tmb + 128, (ulong)B); TM_DIM(tmb + 128, 0, K);
      TM_DIM(tmb + 128, 1, N); TM_STRIDE(tmb + 128, (ulong)sbn * 4);
    }}
    WARP_SYNC();
    __global uchar* slot = TS + (size_t)get_group_id(0) * {MAP_SLOT};
    TM_PUBLISH((ulong)slot, tmb);
    TM_PUBLISH((ulong)(slot + 128), tmb + 128);
    if (lane == 0) {{
      TM_ACQUIRE((ulong)slot); TM_ACQUIRE((ulong)(slot + 128));
      for (int kt = 0; kt < KT; ++kt) {{
        const int s = kt % {s};
        if (kt >= {s}) mb_wait(bars + 8 * ({s} + s), ((kt / {s}) + 1) & 1);
        MB_EXPECT(bars + 8 * s, {stage});
        TMA2D(sbase + s * {stage}, (ulong)slot, k0 + kt * 8, m0, bars + 8 * s);
        TMA2D(sbase + s * {stage} + {a_bytes}, (ulong)(slot + 128), k0 + kt * 8, n0,
              bars + 8 * s);
      }}
    }}
    return;
  }}"""


def _emulated_fill(cfg: TmaConfig, threads: int) -> str:
    """All ``threads`` items copy K slice ``kt`` of A's and B's tile rows into stage 0,
    swizzled as the copies would, zeros outside the tensors; 3xTF32 then splits it."""
    split = "" if cfg.split == 1 else f"""
    split_stage(smem, smem + {cfg.stages * cfg.stage_bytes // 16}, t, {cfg.stage_bytes // 16},
                {threads});
    barrier(CLK_LOCAL_MEM_FENCE);"""
    return f"""barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = t; e < {(cfg.bm + cfg.bn) * 8}; e += {threads}) {{
      const int row = e >> 3, k = e & 7, kk = k0 + kt * 8 + k;
      const bool in_a = row < {cfg.bm};
      const int r = in_a ? row : row - {cfg.bm}, gr = (in_a ? m0 : n0) + r;
      const bool ok = kk < K && gr < (in_a ? M : N);
      const float v = ok ? (in_a ? A[(size_t)gr * sam + kk] : B[(size_t)gr * sbn + kk]) : 0.0f;
      *(__local float*)((__local uchar*)smem + (in_a ? 0 : {cfg.a_bytes}) + {SWIZZLE32}) = v;
    }}
    barrier(CLK_LOCAL_MEM_FENCE);{split}"""


def _emulated_mma(cfg: TmaConfig) -> str:
    """Each item's accumulators (the m64nN fragment layout) summed from local memory, the
    operands read as TF32 (low 13 bits dropped); 3xTF32: the heads from the stage and the
    remainders from their buffer (``split_stage``), the remainders' products first."""
    pairs = (("h", "h"),) if cfg.split == 1 else (("l", "h"), ("h", "l"), ("h", "h"))
    lows = cfg.stages * cfg.stage_bytes

    def load(name: str, where: str) -> str:
        head = f"const float {name}h = TF32T(*(__local const float*)(sm + {where}));"
        if cfg.split == 1:
            return head
        return head + f" const float {name}l = TF32T(*(__local const float*)(sm + {lows} + " \
            f"{where}));"

    lines = [f"for (int k = 0; k < 8 && wg < {cfg.warpgroups}; ++k) {{",
             "      const int r = wg * 64 + w4 * 16 + g;",
             "      __local const uchar* sm = (__local const uchar*)smem;",
             "      " + load("a0", SWIZZLE32),
             "      " + load("a1", SWIZZLE32.replace("(r)", "(r + 8)"))]
    for j in range(cfg.bn // 8):
        for q in range(2):
            col = f"({8 * j + q} + 2 * tq)"
            sums = " ".join(f"c{4 * j + q + 2 * i} = fma(a{i}{pa}, bv{pb}, c{4 * j + q + 2 * i});"
                            for pa, pb in pairs for i in range(2))
            where = f"{cfg.a_bytes} + " + SWIZZLE32.replace("(r)", col)
            lines.append(f"      {{ {load('bv', where)} {sums} }}")
    lines.append("    }")
    return "\n".join(lines)


def _consumers(cfg: TmaConfig) -> str:
    """The consumer warpgroups' main loop with PTX: each K step's stage waited for, its
    products issued and waited for, then its slot released. 3xTF32 (module docstring): the
    next stage split while this step's products run. (Leaving a step's products in flight
    into the next step, its stage released a step later, lost at 4096^3 and gained at most
    10% on GPT-2's shapes: H200, issue 18, round 22.)"""
    s, stage, a_bytes = cfg.stages, cfg.stage_bytes, cfg.a_bytes
    operands = f"""const uint sa = sbase + s * {stage} + wg * 2048;
    const uint sb = sbase + s * {stage} + {a_bytes};"""
    release = f"""WG_WAIT0();
    if ((t & 127) == 0) MB_ARRIVE(bars + 8 * ({s} + s));"""
    if cfg.split == 1:
        return f"""for (int kt = 0; kt < KT; ++kt) {{
    const int s = kt % {s};
    mb_wait(bars + 8 * s, (kt / {s}) & 1);
    {operands}
    WG_FENCE();
    {mma_call(cfg.bn, "c", "WG_DESC(sa)", "WG_DESC(sb)")}
    WG_COMMIT();
    {release}
  }}"""
    lows, n4, items = s * stage, stage // 16, 128 * cfg.warpgroups
    return f"""mb_wait(bars, 0);
  split_stage(smem, smem + {lows // 16}, t, {n4}, {items});
  for (int kt = 0; kt < KT; ++kt) {{
    const int s = kt % {s};
    {operands}
    const uint la = sbase + {lows} + (kt & 1) * {stage} + wg * 2048;
    const uint lb = sbase + {lows} + (kt & 1) * {stage} + {a_bytes};
    FENCE_ASYNC();
    NAMED_BARRIER(1, {items});  /* the step's split done by every consumer */
    WG_FENCE();
    {mma_call(cfg.bn, "c", "WG_DESC(la)", "WG_DESC(sb)")}
    {mma_call(cfg.bn, "c", "WG_DESC(sa)", "WG_DESC(lb)")}
    {mma_call(cfg.bn, "c", "WG_DESC(sa)", "WG_DESC(sb)")}
    WG_COMMIT();
    if (kt + 1 < KT) {{
      const int s1 = (kt + 1) % {s};
      mb_wait(bars + 8 * s1, ((kt + 1) / {s}) & 1);
      split_stage(smem + s1 * {n4}, smem + {lows // 16} + ((kt + 1) & 1) * {n4}, t, {n4},
                  {items});
    }}
    {release}
  }}"""


VEC_AHEAD = 4  # vector rounds whose side inputs a lane loads before it stores the first


def store4_macro(epilogue: list[Stage], n_extra: int, erank: int, bmn: bool, dest: str,
                 ahead: list[int] | None) -> str:
    """``#define STORE4(mm, nn, v4, i)``: elements (mm, nn .. nn + 3) of batch ``b`` through the
    epilogue and into ``dest`` (a pointer expression of ``flat0``) as one 16-byte store, where
    all four are inside N; the columns of a tail through ``STORE1`` (:func:`.mma.store_macro`
    without side inputs ahead), one at a time. ``ahead``: side input j's value of column e
    is ``pv<j>_[i].s<e>`` (loaded by :func:`vector_stores`), else each is loaded here."""
    parts = []
    for e in range(4):
        if ahead is not None:
            loads = {j: f"pv{j}_[i].s{e}" for j in ahead}
            offs = ""
        else:
            loads = {j: f"in{j}[o_in{j}]" for j in range(n_extra)}
            offs = " ".join(f"const int o_in{j} = {side_at(j, '(mm)', f'((nn) + {e})')};"
                            for j in range(n_extra)) if bmn \
                else offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra \
                else ""
        code = stage_code([Stage("v", [], "float")] + epilogue, loads)
        parts.append(f"{{ const float v = (v4).s{e}; const int flat = flat0 + {e}; "
                     f"{offs} {code} r_.s{e} = x{len(epilogue)}; }}".replace("\n", " "))
    tail = " ".join(f"STORE1(mm, (nn) + {e}, (v4).s{e})" for e in range(4))
    body = " ".join(parts)
    return f"""#define STORE4(mm, nn, v4, i) if ((mm) < M) {{ \\
  if ((nn) + 3 < N) {{ const int flat0 = (b * M + (mm)) * N + (nn); float4 r_; \\
    {body} \\
    vstore4(r_, 0, {dest}); \\
  }} else {{ {tail} }} }}
"""


def vector_stores(row: str, col: str, ahead: list[int] | None, dtypes: list) -> list[str]:
    """A warp's 16 x 64 slice (in ``ep``, row stride EP_LD) stored four columns a lane, 16
    lanes a row, two rows a round, eight rounds (``STORE4``): a quarter of the scalar loop's
    stores, index sums and bound checks (the epilogue was ~0.47 ms of GPT-2's 2.9 ms TF32
    prefill: H200, issue 18, round 28). ``row`` and ``col`` are expressions of the slice's
    ``r_`` and ``c_``; with ``ahead``, each lane first loads its side inputs of VEC_AHEAD
    rounds, as :func:`.mma.slice_stores` does."""
    step = VEC_AHEAD if ahead is not None else 1
    lines = [f"  for (int h_ = 0; h_ < 8; h_ += {step}) {{"]
    where = ["      const int r_ = (h_ + i_) * 2 + (lane >> 4), c_ = (lane & 15) * 4;",
             f"      const int mm_ = {row}, nn_ = {col};"]
    if ahead is not None:
        lines += [f"    {ctype(dtypes[j])}4 pv{j}_[{step}];" for j in ahead]
        lines += ["    #pragma unroll", f"    for (int i_ = 0; i_ < {step}; ++i_) {{"] + where
        for j in ahead:
            for e in range(4):
                lines.append(f"      pv{j}_[i_].s{e} = mm_ < M && nn_ + {e} < N ? "
                             f"in{j}[{side_at(j, 'mm_', f'(nn_ + {e})')}] : 0;")
        lines.append("    }")
    lines += ["    #pragma unroll", f"    for (int i_ = 0; i_ < {step}; ++i_) {{"] + where
    lines += [f"      const float4 v4_ = vload4(0, ep + r_ * {EP_LD} + c_);",
              "      STORE4(mm_, nn_, v4_, i_)", "    }", "  }"]
    return lines


def _epilogue(cfg: TmaConfig, ptx: bool, ahead: list[int] | None, dtypes: list) -> str:
    """Each warp's 16 rows through local memory in slices of 64 columns, then stored through
    the epilogue (one copy of its code, coalesced stores): four columns a lane where N and
    C's offset are whole float4s (:func:`vector_stores`), else one (``ahead``: the side
    inputs loaded ahead of the stores, ``mma.slice_stores``)."""
    sync = "WARP_SYNC();" if ptx else "barrier(CLK_LOCAL_MEM_FENCE);"
    wait_all = f"NAMED_BARRIER(1, {128 * cfg.warpgroups});" if ptx \
        else "barrier(CLK_LOCAL_MEM_FENCE);"
    lines = [f"  {wait_all}  /* every stage read: the stages are free */",
             f"  __local float* ep = (__local float*)smem + (wg * 4 + w4) * {16 * EP_LD};",
             "  const int vec4_ = ((N | coff) & 3) == 0;"]
    for chunk in range(cfg.bn // 64):
        for jj in range(8):
            j = chunk * 8 + jj
            for q, (r, c) in enumerate((("g", 0), ("g", 1), ("g + 8", 0), ("g + 8", 1))):
                lines.append(f"  ep[({r}) * {EP_LD} + {jj * 8 + c} + 2 * tq] = c{4 * j + q};")
        lines.append(f"  {sync}")
        lines.append("  if (vec4_) {")
        lines += vector_stores("m0 + wg * 64 + w4 * 16 + r_", f"n0 + {chunk * 64} + c_", ahead,
                               dtypes)
        lines.append("  } else {")
        lines += slice_stores("STORE", 1024, "m0 + wg * 64 + w4 * 16 + (e_ >> 6)",
                              f"n0 + {chunk * 64} + (e_ & 63)",
                              f"ep[(e_ >> 6) * {EP_LD} + (e_ & 63)]", ahead, dtypes, EP_UNROLL)
        lines.append("  }")
        lines.append(f"  {sync}")
    return "\n".join(lines)


@memoized
def gemm_tma(cfg: TmaConfig, epilogue: list[Stage], n_extra: int, extra_dtypes: list,
             erank: int, bmn: bool, ptx: bool, split: bool = False) -> Source:
    """The kernel (module docstring): :func:`gemm_args`'s arguments (one batch: its batch
    strides unread), with ``split`` then ``slice_k`` and ``splits`` (the work-groups of slice
    s write their partial products of K from ``s * slice_k`` at ``C + s * M * N``, no
    epilogue), then ``TM`` (the two template maps, 256 bytes) and ``TS`` (the map slots,
    :func:`map_slots`)."""
    cfg.check()
    if split and (epilogue or n_extra):
        raise ValueError("a split GEMM's epilogue runs in its reduction")
    args = gemm_args("float", n_extra, extra_dtypes, erank) + \
        (["int slice_k", "int splits"] if split else []) + \
        ["__global const uchar* TM", "__global uchar* TS"]
    threads = cfg.threads(ptx)
    regs = cfg.bn // 2
    acc = "\n  ".join(f"float {', '.join(f'c{i} = 0.0f' for i in range(j, min(j + 8, regs)))};"
                      for j in range(0, regs, 8))
    # the copies' schedule emulated: every item fills stage 0, the consumers sum from it
    plain = f"""A += ash; B += bsh;
  for (int kt = 0; kt < KT; ++kt) {{
    {_emulated_fill(cfg, threads)}
    {_emulated_mma(cfg)}
  }}"""
    if ptx:
        # (an operand starting off a 16-byte boundary takes the plain schedule: boxes starting
        # off one faulted on the H200)
        body = f"""if (ash | bsh) {{
    {plain}
    if (wg == {cfg.warpgroups}) return;
  }} else {{
  const uint bars = (uint)(size_t)mbar, tmb = (uint)(size_t)tms;
  if (t == 0) {{
    for (int s = 0; s < {cfg.stages}; ++s) {{
      MB_INIT(bars + 8 * s, 1); MB_INIT(bars + 8 * ({cfg.stages} + s), {cfg.warpgroups});
    }}
    MB_INIT_FENCE();
  }}
  barrier(CLK_LOCAL_MEM_FENCE);
  {_producer(cfg)}
  {_consumers(cfg)}
  }}"""
        macros = PTX + TF32T
        locals_ = (f"__local ulong mbar[{2 * cfg.stages}];\n"
                   "  __local float4 tms[16] __attribute__((aligned(128)));")
    else:
        locals_ = ""
        body = plain
        macros = TF32T
    if cfg.split == 3:
        macros += SPLIT_STAGE
    body = acc + "\n  " + body
    # side inputs loaded ahead where their strides are over (batch, m, n) (one batch: b is 0)
    ahead = side_inputs(epilogue) if bmn and n_extra else None
    dest = "C[coff + ks * M * N + flat]" if split else "C[coff + flat]"
    store = store_macro("STORE", epilogue, n_extra, erank, bmn, dest, "", ahead) + "\n" + \
        store_macro("STORE1", epilogue, n_extra, erank, bmn, dest) + "\n" + \
        store4_macro(epilogue, n_extra, erank, bmn,
                     "C + coff + ks * M * N + flat0" if split else "C + coff + flat0", ahead)
    if ptx and cfg.split == 1 and _TANH_CALL.search(store):
        macros += TANH_TF32
        store = _TANH_CALL.sub("tanh_tf32(", store)
    text = header([np.float32] + list(extra_dtypes)) + macros + store + f"""
__kernel __attribute__((reqd_work_group_size({threads}, 1, 1)))
void gemm_tma({', '.join(args)})
{{
  __local float4 smem[{cfg.smem_bytes // 16}] __attribute__((aligned(1024)));
  {locals_}
  const int t = get_local_id(0), wg = t >> 7, w4 = (t >> 5) & 3, lane = t & 31;
  const int g = lane >> 2, tq = lane & 3, b = 0;
  {_raster(cfg, split)}
  const int ash = aoff & 3, bsh = boff & 3;  /* (starts off 16 bytes: the plain schedule) */
  A += aoff - ash; B += boff - bsh;
  const uint sbase = (uint)(size_t)smem;
  {body}
{_epilogue(cfg, ptx, ahead, list(extra_dtypes))}
}}
"""
    return Source(text, "gemm_tma")
