"""Which tensor-core GEMM runs a float32 GEMM (``kernels.mma``): the tile shape per shape
class, K slices (split-K) where the tiles leave compute units idle, and the kernel's source and
work sizes for a chosen plan. Measured choices (H100 and H200 sweeps) are in BENCHMARKS.md."""
from __future__ import annotations

from dataclasses import replace

from .common import Source, Stage
from .mma import MmaConfig, gemm_mma
from .mma_parts import HI_ROUND, norm_out_fits

# split-K: a GEMM whose tiles leave compute units idle walks K in slices on more work-groups
# (H100, ``bench_kernels.py --sections splitk``: K = 3072 into N = 768 gained 1.2-3x for M =
# 128..4096 with 2-8 slices; K = 768 only where the tiles were fewer than a quarter of the units;
# H200 sweep of ResNet-50's convolutions: slices of 256-384 pay from K = 1024)
SPLITK_WAVES = 2.0      # work-groups per compute unit the slices aim at
SPLITK_MIN_K = 256      # K per slice, at least
SPLITK_LONG_K = 1024    # K from which slices pay whenever the tiles leave units idle
SPLITK_FEW_TILES = 0.25  # tiles per compute unit below which a shorter K is split too
SPLITK_MAX = 8
# tiles that reduce their slices in their own launch (TAIL_MAX_TILE: no launch added) split a
# shorter K from fewer than this many tiles per compute unit, in slices from SPLITK_TAIL_MIN_K
# (H200 sweep of a 128-row prompt's GEMMs, 3xTF32: [128, 768] x [768, 768] 0.027 ms in 2
# slices, 0.020 in 4; x [768, 2304] 0.035 unsplit, 0.032 in 4; x [768, 3072] 0.036, 0.031)
SPLITK_TAIL_FEW_TILES = 1.0
SPLITK_TAIL_MIN_K = 128
# tiles up to this many elements reduce their K slices in the GEMM's own launch (the last slice
# of a tile sums them: kernels.mma "tail"); larger ones in a reduction launch of their own
# ("apart"): one work-group summing 8 slices of a 128 x 128 tile made ResNet-50's late
# convolutions 0.35 ms slower on the H200, while a GPT-2 prompt's 64 x 64 tiles gain a launch
TAIL_MAX_TILE = 64 * 64
# large tiles in K slices need this many work-groups per compute unit, else the small tiles
# take the K slices (H200, a 128-row prompt's [128, 3072] x [3072, 768], 3xTF32: 6 large tiles
# in 8 slices and their reduction launch 0.049 ms, 24 small tiles in 8 slices 0.036)
SPLITK_LARGE_MIN_WAVES = 0.5
# a MatMul's tiles are split in two K slices (the last to arrive adds the other's partial:
# "tail") where that cuts the busiest unit's work to this share or less: a part-filled round
# (H200, GPT-2's 1024-token prompt, [1024, 768] x [768, 768] with bias and residual on 192
# tiles of 64x64: 0.063 -> 0.050 ms 3xTF32, 0.040 -> 0.034 TF32; 3 and 4 slices no better;
# its QKV on 192 tiles of 128x96: 0.127 -> 0.116 ms 3xTF32, but 0.081 -> 0.102 TF32, whose
# lighter loop does not pay for the partials' round trip: large tiles split for 3xTF32 only)
SPLITK_BALANCE = 0.8


def split_k_mode(cfg: MmaConfig, slices: int = 0) -> str:
    """How a split-K GEMM of tile ``cfg`` reduces its ``slices`` (0: not known yet): "tail"
    (small tiles, or two slices: the last adds one other's partial) or "apart"."""
    return "tail" if cfg.bm * cfg.bn <= TAIL_MAX_TILE or slices == 2 else "apart"


def k_splits(cfg: MmaConfig, M: int, N: int, K_: int, nb: int, cus: int,
             balance: bool = False, heavy: bool = False) -> tuple[int, int]:
    """(slices, K per slice) of a split-K run of this GEMM: the fewest slices (a power of
    two) that give the compute units SPLITK_WAVES work-groups each, each slice at least
    SPLITK_MIN_K long; (1, K) when the tiles already fill the units, or K is shorter than
    SPLITK_LONG_K and the tiles not fewer than SPLITK_FEW_TILES per unit (tiles reduced in
    their own launch: SPLITK_TAIL_MIN_K and SPLITK_TAIL_FEW_TILES) unless, with ``balance``
    (the MatMul kernels; convolutions were not measured with it), tiles reduced in their own
    launch, or any with ``heavy`` (3xTF32's main loop), leave a part-filled round that two
    slices even out (SPLITK_BALANCE)."""
    tiles = _cdiv(M, cfg.bm) * _cdiv(N, cfg.bn) * max(nb, 1)
    want = SPLITK_WAVES * cus
    tail = split_k_mode(cfg) == "tail"
    few, min_k = (SPLITK_TAIL_FEW_TILES, SPLITK_TAIL_MIN_K) if tail else \
        (SPLITK_FEW_TILES, SPLITK_MIN_K)
    uneven = balance and (tail or heavy) \
        and _cdiv(2 * tiles, cus) <= 2 * SPLITK_BALANCE * _cdiv(tiles, cus)
    if tiles >= want or (K_ < SPLITK_LONG_K and tiles >= few * cus and not uneven):
        return 1, K_
    n = 1
    while 2 * n <= SPLITK_MAX and tiles * n < want and K_ // (2 * n) >= min_k:
        n *= 2
    if n == 1:
        return 1, K_
    length = _cdiv(_cdiv(K_, n), cfg.bk) * cfg.bk
    n = _cdiv(K_, length)
    return (n, length) if n > 1 else (1, K_)


# precision "f32" on tensor cores: 3xTF32 (float32 accuracy); None keeps the fp32 SIMT kernels
F32_SPLIT: int | None = 3
MIN_M = 64  # below this the skinny / tiled fp32 kernels are used (memory-bound, few tiles)
MIN_CONV_M, MIN_CONV_N = 16, 16  # output channels and pixels from which convolutions take it
# tile shapes by preference: the first that gives the compute units WAVES work-groups each
# is taken (on the H100, ``bench_kernels.py --sections tiles``: 128x128 tiles win from about
# 1.4 work-groups per unit, 64x64 below, both within 10% of the best of five shapes on GPT-2's
# GEMMs for M = 128..4096)
CONFIGS = (MmaConfig(128, 128, 64, 64, 16, 3), MmaConfig(64, 64, 32, 32, 16, 4))
WAVES = 1.4
# narrower large tiles, for a GEMM the 128x128 ones leave in a part-filled last round (a unit
# runs as long as its busiest: _rounds_cost). H200, the slab loop, 3xTF32 / TF32: [1024, 768]
# x [768, 3072] 0.133 / 0.074 ms on 128x128 tiles, 0.105 / 0.064 on 128x96; x [768, 2304] on
# 64x64 tiles 0.116 / 0.071, on 128x96 0.105 / 0.061; a full last round as fast either way
# ([4096, 768] x [768, 3072] 0.371 / 0.377); BENCHMARKS.md issue 18, fifteenth round. None:
# no narrow tiles
NARROW: MmaConfig | None = MmaConfig(128, 96, 64, 48, 16, 3)
SHORT_K = 384     # K up to which the small tiles are taken wherever they fill the units
FILL_RATIO = 0.75  # large tiles in K slices need to fill the output this share as well
ALIGN = "rings"
# TF32 on these warp tiles, filled by 16-byte copies and not split along K, takes the pipelined
# main loop (kernels.mma_pipe; H200, BENCHMARKS.md issue 18 round 6: 4096^3 1.06 ms against
# 1.28 for the slab loop, [4096, 768] x [768, 3072] 0.187 against 0.208); the slab loop keeps
# 3xTF32 (pipelined, its split operands spill: 3.4 ms against 2.4), smaller warp tiles (64x64
# tiles of 32x32 warps: 10% slower pipelined), K slices (0.263 against 0.241 ms for [4096,
# 3072] x [3072, 768] in 2 slices) and element-wise fills (N = 50257: 5.04 against 4.80 ms)
PIPE_WARP = (64, 64)
# the bfrag main loop (kernels.mma_bfrag: B in mma.sync fragment order from global memory into
# registers, A alone through local memory) for the GEMMs the pipelined loop takes whose B is
# constant weights the caller stores in that order (a FullyConnected's: ``bfrag_width``): the
# loop's parameters (K per stage, stages, B's prefetch distance), taken on the pipelined loop's
# tile shape, or None (off). H200, one call against "pipe" (BENCHMARKS.md issue 18, eighteenth
# round): K 16 x 6 stages, B 3 steps ahead, no spills: 4096^3 0.980 against 1.066 ms,
# [4096, 768] x [768, 3072] 0.172 against 0.187; K 32 x 3 ran as fast but spilled
BFRAG: MmaConfig | None = MmaConfig(128, 128, 64, 64, 16, 6, "bfrag", 3)
_choices: dict = {}  # shape class -> MmaConfig


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def _shape_class(M: int, N: int, K_: int, nb: int, cus: int) -> tuple:
    """Shapes that take the same tile choice: M, N rounded up to 64, K up to 16, the batch."""
    return (_cdiv(M, 64), _cdiv(N, 64), _cdiv(K_, 16), nb, cus)


def _fill(c: MmaConfig, M: int, N: int) -> float:
    """The share of ``c``'s tiles over an M x N output that holds output."""
    return M * N / (_cdiv(M, c.bm) * c.bm * _cdiv(N, c.bn) * c.bn)


def _rounds_cost(c: MmaConfig, M: int, N: int, nb: int, cus: int) -> int:
    """Rounds of ``c``'s tiles over the compute units times a tile's area: what the busiest
    unit computes (large tiles of either width run two to a unit)."""
    return _cdiv(_cdiv(M, c.bm) * _cdiv(N, c.bn) * nb, cus) * c.bm * c.bn


def _pick(M: int, N: int, K_: int, nb: int, cus: int, narrow: bool = False) -> MmaConfig:
    """The tile shape (``choose_config``'s rules, H200 sweep of ResNet-50's, ViT's and GPT-2's
    GEMMs in BENCHMARKS.md): the first of ``CONFIGS`` that gives WAVES work-groups per unit,
    fills at least half its rows and, for the large tiles, has K above SHORT_K (a tile's fixed
    costs outweigh a short K: 64x64 tiles took 0.055 ms where 128x128 took 0.067 at K = 64);
    where the largest tiles leave units idle, they are taken in K slices (``k_splits``) when K
    is long (SPLITK_LONG_K) and they fill the output about as well as the smallest (3x3
    convolutions at 28x28 and 14x14, MLP down-projections: 0.10-0.13 ms against 0.13-0.19 on
    unsliced 64x64 tiles) and their slices give the units SPLITK_LARGE_MIN_WAVES work-groups
    each; else the smallest (in K slices of their own where they leave units idle). With
    ``narrow``, NARROW tiles come after the largest: taken where they are the first to give
    WAVES work-groups per unit, or in the largest's place where their rounds cost less
    (``_rounds_cost``)."""
    big, small, mid = CONFIGS[0], CONFIGS[-1], NARROW if narrow else None
    for c in CONFIGS if mid is None else (big, mid, *CONFIGS[1:]):
        if c is not small and (c.bm >= 2 * M or K_ <= SHORT_K):
            continue
        if _cdiv(M, c.bm) * _cdiv(N, c.bn) * nb >= WAVES * cus:
            if mid is not None and c is big and \
                    _rounds_cost(mid, M, N, nb, cus) < _rounds_cost(big, M, N, nb, cus):
                return mid
            return c
        if c is big and K_ >= SPLITK_LONG_K \
                and _fill(big, M, N) >= FILL_RATIO * _fill(small, M, N):
            slices = k_splits(big, M, N, K_, nb, cus)[0]
            tiles = _cdiv(M, big.bm) * _cdiv(N, big.bn) * nb
            if slices > 1 and tiles * slices >= SPLITK_LARGE_MIN_WAVES * cus:
                return big
    return small


def choose_config(M: int, N: int, K_: int, nb: int, cus: int, local_limit: int,
                  norm: bool, narrow: bool = False) -> MmaConfig:
    """The tile shape for this GEMM (``_pick``, cached per shape class), with stages cut to
    fit ``local_limit`` bytes; ``narrow``: NARROW tiles may be taken (the MatMul kernels; the
    convolutions' tiles were not measured with them)."""
    key = _shape_class(M, N, K_, nb, cus) + (local_limit, norm, narrow)
    cfg = _choices.get(key)
    if cfg is None:
        cfg = _pick(M, N, K_, nb, cus, narrow)
        extra = 8 * (cfg.bm + cfg.threads) if norm else 0
        while cfg.stages > 2 and cfg.local_bytes() + extra > local_limit:
            cfg = MmaConfig(cfg.bm, cfg.bn, cfg.wm, cfg.wn, cfg.bk, cfg.stages - 1)
        _choices[key] = cfg
    return cfg


def on_tensor_cores(engine, precision: str | None, M: int) -> bool:
    """Whether :func:`plan` takes a float32 GEMM of ``M`` rows (and any N, K) to the tensor
    cores: the device has them (``engine.mma``), M >= MIN_M, and the precision is one they
    serve (TF32, or 3xTF32 for "f32" unless F32_SPLIT is None)."""
    kind = getattr(engine, "mma", "") if engine is not None else ""
    return bool(kind) and M >= MIN_M and (precision == "tf32" or F32_SPLIT is not None)


def plan(engine, precision: str | None, M: int, N: int, K_: int, nb: int, sa: list, sb: list,
         sab: list, sbb: list, norm: tuple | None, b_const: bool = False):
    """``(cfg, split, b_kmajor, ptx, copy)`` when the tensor-core kernel takes this float32
    GEMM (A [M, K] with strides ``sa``, B [K, N] with ``sb``, batch strides ``sab``/``sbb``),
    else None. Taken on devices with ``engine.mma`` ("ptx", or "emulated" in tests) for
    M >= MIN_M: TF32 with precision "tf32" (the pipelined loop where PIPE_WARP says, or with
    ``b_const``, B constant weights the caller may store in fragment order, the bfrag loop
    where BFRAG says: ``cfg.loop`` then tells the caller to), 3xTF32 (F32_SPLIT) with
    "f32"."""
    if not on_tensor_cores(engine, precision, M) or not N or not K_:
        return None
    split = 1 if precision == "tf32" else F32_SPLIT
    b_kmajor = sb[-1] == 1 or sb[-2] != 1
    ptx = engine.mma == "ptx"
    inner_a, inner_b = sa[-1], (sb[-1] if b_kmajor else sb[-2])
    outer_b = sb[-2] if b_kmajor else sb[-1]
    vec = inner_a == 1 and inner_b == 1 and sa[-2] % 4 == 0 and outer_b % 4 == 0 \
        and all(s % 4 == 0 for s in list(sab) + list(sbb))
    local_limit = int(getattr(engine.device, "local_mem_size", 48 << 10))
    cus = int(engine.device.max_compute_units)
    cfg = choose_config(M, N, K_, nb, cus, local_limit, norm is not None, True)
    if norm is not None and (K_ % cfg.bk or cfg.bm > cfg.threads):
        return None
    if split == 1 and norm is None and vec and (cfg.wm, cfg.wn) == PIPE_WARP \
            and k_splits(cfg, M, N, K_, nb, cus)[0] == 1:
        cfg = replace(cfg, loop="pipe")
        if b_const and BFRAG is not None and not any(sbb) \
                and k_splits(cfg, M, N, K_, nb, cus, True)[0] == 1:
            bf = replace(BFRAG, bm=cfg.bm, bn=cfg.bn, wm=cfg.wm, wn=cfg.wn, loop="bfrag")
            if bf.local_bytes() <= local_limit:
                cfg = bf
    return cfg, split, b_kmajor, ptx, "cp_async" if vec else "plain"


def bfrag_width(engine, precision: str | None, M: int, N: int, K_: int) -> int:
    """The panel width of the fragment order (``mma_bfrag.swizzle``) a FullyConnected's
    weights are read in by :func:`plan` of its GEMM (A contiguous [M, K], B the weights), or
    0 where its kernel reads them [K, N]."""
    if engine is None or BFRAG is None:
        return 0
    choice = plan(engine, precision, M, N, K_, 1, [K_, 1], [N, 1], [0, 0], [0, 0], None, True)
    return choice[0].wn if choice is not None and choice[0].loop == "bfrag" else 0


def norm_out_plan(engine, precision: str | None, M: int, N: int, K_: int, sa: list,
                  sb: list):
    """:func:`plan` of a normalized GEMM whose weights fold the normalization
    (``kernels.mma_parts.norm_out_parts``: one batch, A contiguous rows, B k-major), or None
    where that kernel does not take it: TF32 (its rounding of rows with a large mean would
    not cancel), K not in whole stages (nor its slices), a pipelined loop, slices reduced
    apart, no room."""
    choice = plan(engine, precision, M, N, K_, 1, sa, sb, [0, 0], [0, 0], None)
    if choice is None:
        return None
    cfg, split, b_kmajor, _, _ = choice
    slices, slice_k = k_splits(cfg, M, N, K_, 1, int(engine.device.max_compute_units), True,
                               split == 3)
    if split == 1 or not b_kmajor or K_ % cfg.bk or slice_k % cfg.bk or not norm_out_fits(cfg) \
            or slices > 1 and split_k_mode(cfg, slices) != "tail":
        return None
    return choice


def norm_ahead(cfg: MmaConfig) -> bool:
    """Whether a GEMM with a LayerNorm folded into its weights (:func:`norm_out_plan`) takes
    its rows' statistics from a row kernel launched ahead of it (``mma_parts.row_moments``)
    rather than from its A stages: on tiles of as many rows as items, where each item would
    sum a whole row of every stage (H200, GPT-2's 1024-token prompt on 128x96 tiles, 3xTF32:
    MLP up 0.133 -> 0.125 ms, QKV 0.116 / 0.113 -> 0.113 / 0.107, the prompt 6.50 -> 6.29 ms;
    64-row tiles at 128-512 rows: the same or up to 5 us slower with the launch)."""
    return cfg.bm >= cfg.threads


def source(choice, epilogue: list[Stage], n_extra: int, extra_dtypes: list, erank: int,
           norm: tuple | None, splitk: str = "", bmn: bool = False,
           norm_out: tuple | None = None, norm_ahead: bool = False) -> Source:
    cfg, split, b_kmajor, ptx, copy = choice
    return gemm_mma(cfg, b_kmajor, split, ptx, copy, ALIGN, epilogue, n_extra, extra_dtypes, erank,
                    norm, HI_ROUND, False, splitk, bmn, norm_out, norm_ahead)


def work_sizes(cfg: MmaConfig, M: int, N: int, nb: int, splits: int = 1) -> tuple[tuple, tuple]:
    """(global, local) sizes: a work-group per BM x BN tile, batch and K slice."""
    return ((_cdiv(N, cfg.bn) * cfg.threads, _cdiv(M, cfg.bm), max(nb, 1) * splits),
            (cfg.threads, 1, 1))
