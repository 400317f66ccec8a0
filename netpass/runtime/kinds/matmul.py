"""MatMul (``netpass/ops/matmul``): the GEMM kernels (``kernels/gemm``) and which of them a
shape takes (:func:`gemm_launch`, also FullyConnected's), and MatMul's shape rule.

GEMM selection: the tiled kernels give ceil(M/tsm) x ceil(N/tsn) x batch work-groups of 256
items; ``gemm_skinny`` takes few output tiles (small M: decoders, :func:`skinny_width`);
``gemm_aligned`` and, where ``Engine.cp_async`` holds, ``gemm_pipelined`` take M, N multiples
of 128 and K of 16 on a GPU; ``kernels.mma``'s tensor-core GEMM takes float32 products before
them all where the device has tensor cores, in K slices where its tiles leave compute units idle
(docs/runtime.md, "Kernels").

A mixture-of-experts' MatMul of an expert's weights gathered by the router's indices
(:class:`ExpertMatMul`, made by ``netpass.runtime.expert_gemm``) reads each batch's weight
matrix where it lies in the stacked weights (``kernels/expert``): no gathered copy.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ...errors import RuntimeInvariantError, ShapeInferenceError
from ...ops.matmul import MatMul
from .. import tensor_maps
from ..impls import (
    Impl,
    Launch,
    Params,
    Scratch,
    cdiv,
    collapse,
    contiguous_strides,
    epilogue,
    epilogue_args,
    gemm_strides,
    size,
    work_1d,
)
from ..kernels import decode_gemv, expert, mma, mma_parts, mma_plan, tma_gemm
from ..kernels.common import LS
from ..kernels.gemm import (
    GEMM_LARGE,
    GEMM_MEDIUM,
    GEMM_SMALL,
    SKINNY_RM,
    SKINNY_WG,
    GemmConfig,
    gemm,
    gemm_aligned,
    gemm_pipelined,
    gemm_skinny,
)
from ..shape_infer import infer_host
from .base import OpKind, broadcast, table


def gemm_config(engine, M: int, N: int, K_: int, batch: int) -> GemmConfig:
    if engine is not None and engine.is_gpu and M >= 512 and N >= 512:
        return GEMM_LARGE
    if M >= 64 and N >= 64:
        return GEMM_MEDIUM
    return GEMM_SMALL


SKINNY_MAX_M = 64          # M up to which the skinny GEMM wins over up to 4 tiled groups per CU
SKINNY_TALL_M = 256        # M up to which it wins while the tiled groups do not fill the CUs
SKINNY_GROUPS_PER_CU = 4


def skinny_width(engine, M: int, N: int, batch: int, tiled_groups: int) -> int | None:
    """Columns per work-group (TN) of the skinny GEMM (gemm_skinny), or None when the
    tiled kernels fit the problem better (or there is no engine).

    The tiled kernels give ``tiled_groups`` = ceil(M/tsm) x ceil(N/tsn) x batch work-groups,
    each walking K serially with two barriers per 16-wide K block, so a decoder's M <= 128
    rows leave most compute units of a GPU idle. The skinny kernel reads B once per 8 rows
    (from L2 for weights that fit there), so on a GPU it is taken for M <= 8 (B read once),
    for M <= SKINNY_MAX_M while the tiled kernels give fewer than SKINNY_GROUPS_PER_CU
    work-groups per compute unit, and for M <= SKINNY_TALL_M while they give fewer than one.
    On PoCL it measured 2-8x faster than the tiled kernels for every M <= 256 (decoder
    shapes, docs/runtime.md). TN starts at 64 and halves, down to 8 (a warp then still reads
    whole 32-byte sectors of B), while N fits in half the width and, on a GPU, while there
    are fewer than SKINNY_GROUPS_PER_CU skinny work-groups per compute unit; PoCL keeps the
    width fixed per N because it compiles a kernel per local size."""
    if engine is None or M > SKINNY_TALL_M or not M or not N:
        return None
    gpu = engine.is_gpu
    cus = int(engine.device.max_compute_units)
    if gpu and M > SKINNY_RM:
        enough = SKINNY_GROUPS_PER_CU * cus if M <= SKINNY_MAX_M else cus
        if tiled_groups >= enough:
            return None
    rows = cdiv(M, SKINNY_RM) * batch
    tn = 64
    while tn > 8 and (tn // 2 >= N or (gpu and rows * cdiv(N, tn) < SKINNY_GROUPS_PER_CU * cus)):
        tn //= 2
    return tn


def gemm_launch(p: Params, a_shape, b_shape, ta: bool, tb: bool, b_idx: tuple, out_shape,
                a_strides=None, b_strides=None, extra_refs: list | None = None,
                norm: tuple | None = None, norm_first: int = 2,
                folded: tuple | None = None, gate: list | None = None,
                a_written: Launch | None = None, b_frag: int = 0) -> tuple[list, list] | None:
    """(launches, impl buffers) for out = op(A) @ op(B) with numpy-style batch broadcasting:
    one GEMM launch, or a split-K GEMM into a scratch buffer and its reduction
    (``kernels.mma_plan.k_splits``); ``norm``: A's rows are normalized as they are loaded
    (norm_gemm; gamma and beta are the inputs from ``norm_first`` on, in order). ``folded``
    (with ``norm``: :func:`norm_out_plan`'s plan for these shapes): B is the weights with the
    normalization folded in (``norm_gemm.fold_weights``), and the tensor-core kernel
    normalizes the product (no gamma or beta inputs read). ``gate`` (the GEMV only: None
    where another kernel would run): A's rows are a gated MLP's ``act(g) * u``, ``g`` as
    ``a_shape`` and ``a_strides`` give it, ``u`` the K columns after it, ``gate`` the stages
    of its activation (kernels.eltwise.gated_code). ``a_written``: a launch writing A,
    contiguous, into impl buffer 0 ahead of the GEMM, which reads it there. ``b_frag``
    (``mma_plan.bfrag_width`` of these shapes, with no normalization, gate or batch): B is
    the weights in that fragment order, read by the tensor-core kernel's bfrag loop."""
    a, b = list(a_shape), list(b_shape)
    sa = list(a_strides) if a_strides is not None else contiguous_strides(a)
    sb = list(b_strides) if b_strides is not None else contiguous_strides(b)
    if len(a) == 1:
        a, sa, ta = [1] + a, [0] + sa, False
    if len(b) == 1:
        b, sb, tb = b + [1], sb + [0], False
    if ta:
        a[-1], a[-2], sa[-1], sa[-2] = a[-2], a[-1], sa[-2], sa[-1]
    if tb:
        b[-1], b[-2], sb[-1], sb[-2] = b[-2], b[-1], sb[-2], sb[-1]
    M, Ka, Kb, N = a[-2], a[-1], b[-2], b[-1]
    if Ka != Kb:
        return None
    ab, bb = a[:-2], b[:-2]
    rank = max(len(ab), len(bb))
    ab, bb = [1] * (rank - len(ab)) + ab, [1] * (rank - len(bb)) + bb
    sab = [0] * (rank - len(sa[:-2])) + sa[:-2]
    sbb = [0] * (rank - len(sb[:-2])) + sb[:-2]
    batch = [max(x, y) for x, y in zip(ab, bb)]
    sab = [0 if x == 1 else s for x, s in zip(ab, sab)]
    sbb = [0 if x == 1 else s for x, s in zip(bb, sbb)]
    dims, (sab, sbb) = collapse(batch, [sab, sbb])
    if len(dims) > 2:
        return None
    while len(dims) < 2:
        dims, sab, sbb = [1] + dims, [0] + sab, [0] + sbb
    nb = dims[0] * dims[1]
    if nb > 1 and dims[0] == 1 and not any(sbb) and sab[1] == M * sa[-2] \
            and getattr(p.engine, "mma", "") and M * nb >= mma_plan.MIN_M:
        # B shared by the batches and A's rows running on through them: one tensor-core GEMM
        # of nb * M rows (ViT's [8, 197, K] activations: 13 row tiles of 128, not 8 x 2)
        M, nb, dims, sab = M * nb, 1, [1, 1], [0, 0]
    stages, n_extra, edt, edims, est = epilogue(p, out_shape)
    aligned = M % 128 == 0 and N % 128 == 0 and Ka % 16 == 0 and sa[-1] == 1 and sb[-1] == 1 \
        and sa[-2] % 4 == 0 and sb[-2] % 4 == 0 and np.dtype(p.out_dtypes[0]) == np.float32
    gpu = p.engine is not None and p.engine.is_gpu
    cfg = gemm_config(p.engine, M, N, Ka, nb)
    tiled_groups = cdiv(M, 128) * cdiv(N, 128) * nb if aligned and gpu else \
        cdiv(M, cfg.tsm) * cdiv(N, cfg.tsn) * nb
    tn = skinny_width(p.engine, M, N, nb, tiled_groups)
    f32 = np.dtype(p.out_dtypes[0]) == np.float32
    gemv = decode_gemv.gemv_width(M, Ka, sb[-2], N, gpu, norm is not None) \
        if f32 and not b_frag else None
    if gate is not None and (gemv is None or norm is not None):
        return None
    pre: list[Launch] = []  # (A, or its statistics, made ahead of the GEMM)
    buffers: list = []
    a_ref: list = [("i", b_idx[0])]
    if a_written is not None:
        pre, buffers, a_ref = [a_written], [Scratch(4 * M * Ka)], [("b", 0), 0]
    tc_plan = None
    tma = None  # (Hopper's TMA GEMM plan, once made)
    norm_out = None
    ahead: list = []  # (the rows' statistics of a folded norm, taken by a row kernel)
    if folded is not None:
        tc_plan, norm_out, norm = folded, norm, None
        if norm_out is not None and mma_plan.norm_ahead(folded[0]):
            pre, buffers, ahead = [_row_moments(p, norm_out, b_idx[0], M, Ka)], \
                [Scratch(8 * M)], [("b", 0)]
    elif gemv is None and norm is not None and f32 and nb == 1 and sa[-1] == 1 \
            and sa[-2] == Ka:
        tma = tma_gemm.plan(p.engine, p.precision, M, N, Ka, nb, sa, sb, None) \
            if not b_frag else None
        tc_plan = mma_plan.plan(p.engine, p.precision, M, N, Ka, nb, sa, sb, sab, sbb, None) \
            if tma is None else None
        if tc_plan is not None or tma is not None:  # normalized rows into a scratch copy
            pre, buffers, a_ref = [_normalize_rows(p, norm, norm_first, b_idx[0], M, Ka)], \
                [Scratch(4 * M * Ka)], [("b", 0), 0]
            norm = None
    if gemv is None and tc_plan is None and f32 and not b_frag and folded is None:
        if tma is None:
            tma = tma_gemm.plan(p.engine, p.precision, M, N, Ka, nb, sa, sb, norm)
        if tma is not None:  # Hopper's tensor memory accelerator and wgmma (TF32)
            sizes = [M, N, Ka, dims[1], sab[0], sab[1], sa[-2], sa[-1], sbb[0], sbb[1], sb[-2],
                     sb[-1]]
            launches, more = _tma_launches(p, tma, a_ref + [("i", b_idx[1])], sizes,
                                           extra_refs, out_shape,
                                           (stages, n_extra, edt, edims, est), len(buffers))
            return pre + launches, buffers + more
    if gemv is None and tc_plan is None and f32:
        tc_plan = mma_plan.plan(p.engine, p.precision, M, N, Ka, nb, sa, sb, sab, sbb, norm,
                                bool(b_frag))
    if b_frag and (tc_plan is None or tc_plan[0].loop != "bfrag" or tc_plan[0].wn != b_frag):
        raise RuntimeInvariantError(f"weights in fragment order of width {b_frag} for a GEMM "
                                    f"[{M}, {Ka}] x [{Ka}, {N}] that does not read them so")
    # (a tensor-core plan implies an engine: mma_plan.plan)
    splits, slice_k = (mma_plan.k_splits(tc_plan[0], M, N, Ka, nb,
                                         int(p.engine.device.max_compute_units), True,
                                         tc_plan[1] == 3)
                       if tc_plan is not None and p.engine is not None else (1, Ka))
    if splits > 1 and tc_plan is not None:
        launches, more = _split_k_gemm(p, tc_plan, norm, norm_first, a_ref + [("i", b_idx[1])],
                                       (M, N, Ka, nb), (splits, slice_k),
                                       [dims[1], sab[0], sab[1], sa[-2], sa[-1], sbb[0], sbb[1],
                                        sb[-2], sb[-1]],
                                       extra_refs, (stages, n_extra, edt, edims, est), out_shape,
                                       len(buffers), norm_out, ahead)
        return pre + launches, buffers + more
    if gemv is not None:  # few rows: memory-bound GEMVs over B's contiguous columns
        run = decode_gemv.gemv_run(Ka, gemv, gpu)
        staged = decode_gemv.gemv_staged(M, Ka) if norm is not None else 0
        gated = gate is not None
        ptx = getattr(p.engine, "mma", "") == "ptx"
        src = p.cached(("gemv", gemv, len(edims), norm, run, M, staged, gated, ptx),
                       lambda: decode_gemv.gemv(stages, n_extra, edt, len(edims), gemv, norm,
                                                run, M, staged, gate, ptx))
        lx, ly = decode_gemv.GEMV_WG, 1
        gws = (cdiv(N, decode_gemv.GEMV_WG // gemv) * decode_gemv.GEMV_WG, 1, max(nb, 1))
    elif tc_plan is not None:  # tensor cores (TF32, or 3xTF32 for float32)
        bmn = gemm_strides(p, out_shape, nb, M, N) if n_extra else None
        if bmn is not None:
            edims, est = [nb, M, N], bmn
        src = p.cached(("gemm_mma", tc_plan, len(edims), norm, bmn is not None, norm_out,
                        bool(ahead)),
                       lambda: mma_plan.source(tc_plan, stages, n_extra, edt, len(edims), norm,
                                               bmn=bmn is not None, norm_out=norm_out,
                                               norm_ahead=bool(ahead)))
        gws, (lx, ly, _) = mma_plan.work_sizes(tc_plan[0], M, N, nb)
    elif tn is not None:
        src = p.cached(("gemm_skinny", len(edims), norm),
                       lambda: gemm_skinny(p.out_dtypes[0], stages, n_extra, edt, len(edims), norm))
        lx, ly = tn, SKINNY_WG // tn
        gws = (cdiv(N, tn) * lx, cdiv(M, SKINNY_RM) * ly, max(nb, 1))
    elif aligned and gpu and norm is None and getattr(p.engine, "cp_async", False):
        src = p.cached(("gemm_pipelined", len(edims)),
                       lambda: gemm_pipelined(stages, n_extra, edt, len(edims), True))
        lx, ly = 16, 16
        gws = (N // 8, M // 8, max(nb, 1))
    elif aligned and gpu:
        src = p.cached(("gemm_aligned", len(edims), norm),
                       lambda: gemm_aligned(stages, n_extra, edt, len(edims), norm))
        lx, ly = 16, 16
        gws = (N // 8, M // 8, max(nb, 1))
    else:
        src = p.cached(("gemm", cfg, len(edims), norm),
                       lambda: gemm(p.out_dtypes[0], cfg, stages, n_extra, edt, len(edims), norm))
        lx, ly = cfg.local
        gws = (cdiv(N, cfg.tsn) * lx, cdiv(M, cfg.tsm) * ly, max(nb, 1))
    spec = a_ref + [("i", b_idx[1]), ("o", 0)]
    if norm is not None:
        spec += [("i", norm_first + j) for j in range(int(norm[3]) + int(norm[4]))]
    spec += [M, N, Ka, dims[1], sab[0], sab[1], sa[-2], sa[-1], sbb[0], sbb[1], sb[-2], sb[-1]]
    spec += epilogue_args(n_extra, edims, est, extra_refs) + ahead
    return pre + [Launch(src, gws, (lx, ly, 1), spec)], buffers


def _tma_launches(p: Params, tma: tma_gemm.TmaPlan, ab: list, sizes: list, extra_refs,
                  out_shape, ep: tuple, slot: int) -> tuple[list, list]:
    """(launches, impl buffers from ``slot``) of ``kernels.tma_gemm`` reading A and B through
    ``ab``, ``sizes`` its ints from M on: one launch through the epilogue ``ep``, or, in K
    slices, the partial products into a Scratch and ``split_k``'s reduction through it; the
    last two buffers the template maps and the work-groups' map slots."""
    cfg, slices = tma.cfg, tma.slices
    M, N = sizes[0], sizes[1]
    stages, n_extra, edt, edims, est = ep
    kind = getattr(p.engine, "tma", "")
    ptx = kind == "ptx"
    # the two template tensor maps of the tile's boxes, and the work-groups' map slots
    maps = [tensor_maps.templates(kind, cfg.bm, cfg.bn),
            Scratch(tma_gemm.map_slots(cfg, M, N, slices))]
    gws, lws = tma_gemm.work_sizes(cfg, M, N, ptx, slices)
    if slices > 1:
        src = p.cached(("gemm_tma_split", cfg, ptx),
                       lambda: tma_gemm.gemm_tma(cfg, [], 0, [], 0, False, ptx, True))
        launches, scratch = split_k(p, src, gws, lws, ab + [("b", slot), 0] + sizes, [],
                                    (slices, tma.slice_k), M * N, extra_refs, ep, "apart",
                                    slot, last=[("b", slot + 1), ("b", slot + 2)])
        return launches, scratch + maps
    bmn = gemm_strides(p, out_shape, 1, M, N) if n_extra else None
    if bmn is not None:
        edims, est = [1, M, N], bmn
    src = p.cached(("gemm_tma", cfg, len(edims), bmn is not None, ptx),
                   lambda: tma_gemm.gemm_tma(cfg, stages, n_extra, edt, len(edims),
                                             bmn is not None, ptx))
    spec = ab + [("o", 0)] + sizes + epilogue_args(n_extra, edims, est, extra_refs) + \
        [("b", slot), ("b", slot + 1)]
    return [Launch(src, gws, lws, spec)], maps


def norm_out_plan(p: Params, M: int, N: int, K_: int) -> tuple | None:
    """The tensor-core plan of a FullyConnected's normalized GEMM (norm_gemm) of ``M`` rows
    over the weights with the normalization folded in (``gemm_launch``'s ``folded``: A
    contiguous [M, K], B [K, N]), or None where no kernel takes them
    (``mma_plan.norm_out_plan``)."""
    if p.engine is None:
        return None
    return mma_plan.norm_out_plan(p.engine, p.precision, M, N, K_, [K_, 1], [N, 1])


def _row_moments(p: Params, norm: tuple, a_idx: int, rows: int, k: int) -> Launch:
    """Each of input ``a_idx``'s ``rows`` contiguous rows' mean and scale into impl buffer 0
    (``mma_parts.row_moments``), read by the GEMM whose weights fold the normalization."""
    return Launch(p.cached(("row_moments", norm), lambda: mma_parts.row_moments(norm)),
                  (max(rows, 1) * LS,), (LS,), [("i", a_idx), k, ("b", 0)])


def _normalize_rows(p: Params, norm: tuple, norm_first: int, a_idx: int, rows: int,
                    k: int) -> Launch:
    """MVN (or RMSNorm) of the ``rows`` contiguous rows of input ``a_idx`` (times gamma, plus
    beta, the inputs from ``norm_first`` on) into impl buffer 0: a folded LayerNorm ahead of a
    tensor-core GEMM, whose inner loop would otherwise normalize every fragment it reads
    (2.3 ms more over GPT-2's 24 folded GEMMs on the H100 than this pass)."""
    vecs = int(norm[3]) + int(norm[4])
    src = p.cached(("normalize_rows", norm), lambda: mma_parts.normalize_rows(norm))
    spec: list = [("i", a_idx), k, ("b", 0)] + [("i", norm_first + j) for j in range(vecs)]
    return Launch(src, (max(rows, 1) * LS,), (LS,), spec)


def _split_k_gemm(p: Params, tc_plan: tuple, norm: tuple | None, norm_first: int, ab_refs: list,
                  mnkb: tuple, split: tuple, strides: list, extra_refs: list | None,
                  epilogue: tuple, out_shape, slot: int = 0,
                  norm_out: tuple | None = None, ahead: list | None = None) -> tuple[list, list]:
    """The tensor-core GEMM in ``split = (slices, K per slice)`` K slices (A and B read
    through ``ab_refs``) and their reduction through the epilogue (:func:`split_k`);
    ``norm_out``: B holds folded weights (gemm_launch's ``folded``), the slices' row sums go
    after their partial products, or (``ahead``: the reference to their impl buffer) a row
    kernel took them."""
    M, N, Ka, nb = mnkb
    stages, n_extra, edt, edims, est = epilogue
    mode = mma_plan.split_k_mode(tc_plan[0], split[0])
    bmn = gemm_strides(p, out_shape, nb, M, N) if n_extra and mode == "tail" else None
    if bmn is not None:
        edims, est = [nb, M, N], bmn
    tail = mode == "tail"
    src = p.cached(("gemm_mma_splitk", tc_plan, norm, len(edims), bmn is not None, mode,
                    norm_out, bool(ahead)),
                   lambda: mma_plan.source(tc_plan, stages if tail else [], n_extra if tail else 0,
                                           edt if tail else [], len(edims) if tail else 0, norm,
                                           mode, bmn is not None, norm_out, bool(ahead)))
    gws, lws = mma_plan.work_sizes(tc_plan[0], M, N, nb, split[0])
    head: list = ab_refs + [("o", 0) if tail else ("b", slot)] + ([] if tail else [0])
    if norm is not None:
        head += [("i", norm_first + j) for j in range(int(norm[3]) + int(norm[4]))]
    head += [M, N, Ka] + strides
    return split_k(p, src, gws, lws, head, [], split, max(nb, 1) * M * N, extra_refs,
                   (stages, n_extra, edt, edims, est), mode, slot,
                   2 * M if norm_out is not None and not ahead else 0, ahead or [])


def split_k(p: Params, src, gws: tuple, lws: tuple, head: list, geometry: list, split: tuple,
            total: int, extra_refs: list | None, epilogue: tuple, mode: str,
            slot: int = 0, stats: int = 0, last: list | None = None) -> tuple[list, list]:
    """(launches, impl buffers) of a split-K tensor-core GEMM (``kernels.mma.gemm_mma``'s
    ``splitk``) whose arguments begin with ``head`` (with "tail": C is the output; with
    "apart": impl buffer ``slot``, a Scratch for the partial products) and go on with the
    epilogue's (with "tail"), ``geometry`` (a convolution's) and the slices. "tail": one
    launch; the partial products in impl buffer ``slot`` (a Scratch) and the per-tile arrival
    counts in ``slot + 1`` (zeros, which every launch leaves as it found them; each request
    uploads its own). "apart": the GEMM, then ``kernels.mma.splitk_reduce`` summing the
    partial products into the output through the epilogue. ``stats``: floats per slice after
    the partial products (a normalized product's row sums); ``last``: the GEMM's arguments
    after all of these."""
    stages, n_extra, edt, edims, est = epilogue
    splits, slice_k = split
    ext = epilogue_args(n_extra, edims, est, extra_refs)
    scratch = Scratch(4 * splits * (total + stats))
    if mode == "tail":
        tiles = (gws[0] // lws[0]) * gws[1] * (gws[2] // splits)
        spec = head + ext + geometry + [slice_k, splits, ("b", slot), ("b", slot + 1)] + \
            (last or [])
        return [Launch(src, gws, lws, spec)], [scratch, np.zeros(tiles, np.int32)]
    red = p.cached(("splitk_reduce", len(edims)),
                   lambda: mma.splitk_reduce(stages, n_extra, edt, len(edims)))
    gemm = Launch(src, gws, lws, head + geometry + [slice_k, splits] + (last or []))
    return [gemm, Launch(red, *work_1d(total), [("b", slot), ("o", 0), total, splits] + ext)], \
        [scratch]


def matmul_impl(p: Params, key) -> Impl | None:
    """float32 MatMul in one GEMM launch (or a split-K GEMM and its reduction); permuted and
    strided inputs are read through their strides, a folded LayerNorm (``norm_gemm.NormDesc``)
    normalizes A as it is loaded."""
    if np.dtype(p.out_dtypes[0]) != np.float32 \
            or any(np.dtype(d) != np.float32 for d in p.in_dtypes):
        return None
    if size(p.out_shapes[0]) == 0:
        return Impl(key, [])
    st = p.in_strides or (None, None)  # permuted views (Program._fold_input_permutes)
    desc = getattr(p.node, "subgraph", None)  # a normalized A (norm_gemm.NormDesc)
    g = gemm_launch(p, p.in_shapes[0], p.in_shapes[1], bool(p.attrs.get("transpose_a")),
                    bool(p.attrs.get("transpose_b")), (0, 1), p.out_shapes[0],
                    a_strides=st[0], b_strides=st[1],
                    norm=desc.kernel_params() if desc is not None else None)
    return Impl(key, *g) if g is not None else None


def matmul_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    """op(A) @ op(B) with numpy batch broadcasting (1-D operands: the op's own inference)."""
    a, b = list(shapes[0]), list(shapes[1])
    if len(a) < 2 or len(b) < 2:
        return None
    if attrs.get("transpose_a"):
        a[-1], a[-2] = a[-2], a[-1]
    if attrs.get("transpose_b"):
        b[-1], b[-2] = b[-2], b[-1]
    if a[-1] != b[-2]:
        return None
    batch = broadcast([tuple(a[:-2]), tuple(b[:-2])])
    if batch is None:
        return None
    return [batch[0] + (a[-2], b[-1])]


class ExpertMatMul:
    """The kind of a MatMul whose operand ``side`` is an expert's weight matrix gathered from
    constant stacked weights ``W [E, R, C]`` along axis 0 by computed indices (a Gather of
    indices [B], or a GatherND of [B, 1]), made by ``netpass.runtime.expert_gemm``, never an
    op of a model; its inputs are ``W, indices, X`` (X: the MatMul's other operand), its
    node's ``subgraph`` an :class:`ExpertMatMulDesc`."""

    type_name: ClassVar[str] = "ExpertMatMul"


class ExpertMatMulDesc:
    """What an ExpertMatMul computes: the absorbed ``gather`` (a Gather or GatherND node) and
    ``matmul`` (their nodes: the shape rule and the host reference), the gathered weights
    being the MatMul's input ``side``."""

    def __init__(self, gather: Any, matmul: Any, side: int, nd: bool) -> None:
        self.gather, self.matmul, self.side, self.nd = gather, matmul, side, nd

    def key(self) -> tuple:
        return ("expert_matmul", self.side, self.nd)

    def _operands(self, w: Any, x: Any) -> list:
        return [w, x] if self.side == 0 else [x, w]

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        w, idx, x = (tuple(s) for s in shapes)
        rows = idx[:-1] if self.nd and idx and idx[-1] == 1 else None if self.nd else idx
        out = None
        if rows is not None and len(w) == 3 and len(rows) == 1 and len(x) in (2, 3):
            out = matmul_shape(self.matmul.attrs, self._operands(rows + w[1:], x), {})
        if out is None:
            raise ShapeInferenceError(f"ExpertMatMul '{self.matmul.id}': weights {list(w)} "
                                      f"gathered by indices {list(idx)} do not multiply "
                                      f"{list(x)}")
        return out

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The Gather's own reference, then the MatMul's."""
        w, idx, x = arrays
        g_ins = [w, idx] if self.nd else [w, idx, self.gather.inputs[2][0].value]
        g = infer_host(self.gather, g_ins)[0]
        return infer_host(self.matmul, self._operands(g, x))


def expert_matmul_impl(p: Params, key: Any) -> Impl | None:
    """One launch: ``kernels.expert.expert_gemv`` where each batch is one row against the
    expert's rows (contiguous along their K), else ``expert_gemm``. float32 only."""
    if any(np.dtype(d) != np.float32 for d in (p.in_dtypes[0], p.in_dtypes[2], p.out_dtypes[0])):
        return None
    desc: ExpertMatMulDesc = p.node.subgraph
    (e, r, c), idx, x, out = p.in_shapes[0], p.in_shapes[1], p.in_shapes[2], p.out_shapes[0]
    if size(out) == 0:
        return Impl(key, [])
    nb, m, n = size(out[:-2]), out[-2], out[-1]
    sib = 0 if size(idx) == 1 else 1
    sxb = 0 if size(x[:-2]) == 1 else x[-2] * x[-1]
    ta, tb = bool(desc.matmul.attrs.get("transpose_a")), bool(desc.matmul.attrs.get("transpose_b"))
    head = [("i", 0), ("i", 1), ("i", 2), ("o", 0)]
    if (desc.side == 0 and not ta and n == 1) or (desc.side == 1 and tb and m == 1):
        gpu = p.engine is not None and p.engine.is_gpu
        tpr = decode_gemv.gemv_width(1, c, 1, r, gpu) or 16
        run = decode_gemv.gemv_run(c, tpr, gpu)
        src = expert.expert_gemv(p.in_dtypes[1], tpr, run)
        wg = expert.EXPERT_WG
        gws = (cdiv(r, wg // tpr) * wg, 1, nb)
        return Impl(key, [Launch(src, gws, (wg, 1, 1), head + [r, c, e, sib, sxb])])
    k = (r if ta else c) if desc.side == 0 else (c if tb else r)
    if desc.side == 0:
        a_st = (1, c) if ta else (c, 1)
        b_st = (1, x[-1]) if tb else (x[-1], 1)
    else:
        a_st = (1, x[-1]) if ta else (x[-1], 1)
        b_st = (1, c) if tb else (c, 1)
    t = expert.TILE
    src = expert.expert_gemm(p.in_dtypes[1], desc.side)
    gws = (cdiv(n, t) * t, cdiv(m, t) * t, nb)
    return Impl(key, [Launch(src, gws, (t, t, 1),
                             head + [m, n, k, e, r * c, sib, sxb, *a_st, *b_st])])


ROWS = table(
    OpKind(MatMul, shape=matmul_shape, impl=matmul_impl, epilogue=True),
    OpKind(ExpertMatMul, impl=expert_matmul_impl),
)
