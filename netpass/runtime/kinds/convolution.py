"""Convolutions (``netpass/ops/convolution``): direct 1-D and 2-D convolution on the ``conv``
template, any filter layout read through strides (so no weight reordering), fused elementwise
epilogues; pointwise NCHW convolutions as batched GEMMs, dense ones as the tensor-core implicit
GEMM where the device has tensor cores, depthwise ones (one input channel per group) on the
``depthwise_conv`` template; 3-D and the backprop-data convolutions run on the host.
:func:`window_pads` and :func:`as2d` also serve pooling and GNA."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ops.convolution import Convolution, GroupConvolution
from ..impls import (
    Impl,
    Launch,
    Params,
    contiguous_strides,
    epilogue,
    epilogue_args,
    gemm_strides,
    size,
    work_1d,
)
from ..kernels import mma, mma_plan
from ..kernels.window import (
    DW_LOCAL,
    DW_TAPS,
    conv,
    depthwise_conv,
    depthwise_shape,
    depthwise_tile,
)
from .base import OpKind, table
from .matmul import gemm_launch, split_k


def window_pads(p: Params, in_sp: Sequence[int], out_sp: Sequence[int], kernel: Sequence[int],
                strides: Sequence[int], dil: Sequence[int]) -> tuple[list[int], list[int]]:
    """(pads at the start, pads at the end) per spatial dim, from ``auto_pad`` or the explicit
    pads."""
    ap = str(p.attrs.get("auto_pad", "explicit")).lower()
    nd = len(in_sp)
    if ap in ("same_upper", "same_lower"):
        pb, pe = [], []
        for i in range(nd):
            total = max((out_sp[i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in_sp[i], 0)
            lo = total // 2 if ap == "same_upper" else (total + 1) // 2
            pb.append(lo)
            pe.append(total - lo)
        return pb, pe
    if ap == "valid":
        return [0] * nd, [0] * nd
    pb = list(p.attrs.get("pads_begin") or [0] * nd)
    pe = list(p.attrs.get("pads_end") or [0] * nd)
    return pb, pe


def as2d(vals: Sequence[int], nd: int, fill: int) -> list[int]:
    """Per-dim values of a 1-D or 2-D window as two (a 1-D window is 1 x W)."""
    v = list(vals) if vals else [fill] * nd
    return [fill] + v if nd == 1 else v


def conv_impl(p: Params, key: Any, grouped: bool = False, nhwc: bool = False,
              bias_refs: list | None = None) -> Impl | None:
    """Direct 1-D / 2-D convolution (``kernels.conv``), NCHW with OIHW filters (grouped: GOIHW)
    or, ``nhwc``, NHWC with OHWI filters; ``bias_refs``: the epilogue's side inputs when ``p``
    carries a bias (GNAConvolution)."""
    if any(np.dtype(d) != np.float32 for d in p.in_dtypes):
        return None
    x, w, y = p.in_shapes[0], p.in_shapes[1], p.out_shapes[0]
    nd = len(x) - 2
    if nd not in (1, 2):
        return None
    if grouped:
        G, Og, Cg = w[0], w[1], w[2]
        ksp = w[3:]
    elif nhwc:  # OHWI filters
        G, Og, Cg = 1, w[0], w[-1]
        ksp = w[1:-1]
    else:
        G, Og, Cg = 1, w[0], w[1]
        ksp = w[2:]
    if nhwc:
        sp_in, sp_out = x[1:-1], y[1:-1]
        C, OC = x[-1], y[-1]
    else:
        sp_in, sp_out = x[2:], y[2:]
        C, OC = x[1], y[1]
    strides = list(p.attrs.get("strides") or [1] * nd)
    dil = list(p.attrs.get("dilations") or [1] * nd)
    pb, _ = window_pads(p, sp_in, sp_out, ksp, strides, dil)
    H, W_ = as2d(sp_in, nd, 1)
    OH, OW = as2d(sp_out, nd, 1)
    KH, KW = as2d(ksp, nd, 1)
    sh, sw = as2d(strides, nd, 1)
    dh, dw = as2d(dil, nd, 1)
    ph, pw = as2d(pb, nd, 0)
    xs = contiguous_strides(x)
    ys = contiguous_strides(y)
    if nhwc:
        xsn, xsc = xs[0], xs[-1]
        ysn, ysc = ys[0], ys[-1]
        xsp, ysp = xs[1:-1], ys[1:-1]
    else:
        xsn, xsc, xsp = xs[0], xs[1], xs[2:]
        ysn, ysc, ysp = ys[0], ys[1], ys[2:]
    xsh, xsw = as2d(xsp, nd, 0)
    ysh, ysw = as2d(ysp, nd, 0)
    if G * Cg != C or G * Og != OC:
        return None
    n = size(y)
    ws = contiguous_strides(w)
    if nhwc:
        wso, wsc, wsk = ws[0], ws[-1], ws[1:-1]
    else:
        wso, wsc, wsk = size(w[-(nd + 1):]), ws[-(nd + 1)], ws[-nd:]
    wsh, wsw = as2d(wsk, nd, 0)
    if not nhwc and G == 1 and (KH, KW, sh, sw, ph, pw) == (1, 1, 1, 1, 0, 0) \
            and (OH, OW) == (H, W_):
        # a pointwise convolution is a batched GEMM: W [OC, C] @ X[n] [C, H W] (any GEMM kernel)
        g = gemm_launch(p, (OC, C), (x[0], C, H * W_), False, False, (1, 0), y)
        if g is not None:
            return Impl(key, *g)
    if not nhwc and G == 1 and not p.in_strides:
        g = _implicit_gemm_conv(p, x, y, (KH, KW, sh, sw, ph, pw, dh, dw, H, W_, OH, OW))
        if g is not None:
            return Impl(key, *g)
    stages, n_extra, edt, edims, est = epilogue(p, y)
    if grouped and Cg == 1 and not nhwc and bias_refs is None:
        shape = depthwise_shape(OH, OW)
        rows, cols = depthwise_tile(shape, KH, KW, sh, sw, dh, dw)
        planes = x[0] * OC
        if rows * cols <= DW_LOCAL and KH * KW <= DW_TAPS and 0 < planes < 1 << 16:
            src = depthwise_conv(shape, stages, n_extra, edt, len(edims))
            spec = [("i", 0), ("i", 1), ("o", 0), H, W_, OC, Og, OH, OW, KH, KW, sh, sw, dh, dw,
                    ph, pw, xsn, xsc, xsh, xsw, ysn, ysc, ysh, ysw, wso, wsh, wsw, rows, cols]
            spec += epilogue_args(n_extra, edims, est)
            tw, th, oy = shape
            gws = (-(-OW // tw) * tw, -(-OH // (th * oy)) * th, planes)
            return Impl(key, [Launch(src, gws, (tw, th, 1), spec)] if n else [])
    src = conv(p.out_dtypes[0], stages, n_extra, edt, len(edims))
    spec = [("i", 0), ("i", 1), ("o", 0), n, Cg, H, W_, Og, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw,
            xsn, xsc, xsh, xsw, ysn, ysc, ysh, ysw, OC, wso, wsc, wsh, wsw]
    spec += epilogue_args(n_extra, edims, est, bias_refs)
    return Impl(key, [Launch(src, *work_1d(n), spec)])


def _implicit_gemm_conv(p: Params, x, y, geo: tuple) -> tuple[list, list] | None:
    """(launches, impl buffers) of a dense NCHW convolution as the tensor-core GEMM W [OC, C KH
    KW] @ im2col(X[n]) [C KH KW, OH OW] (``kernels.mma``'s ``conv``: B gathered from the image
    as the stages fill), in K slices where its tiles leave compute units idle (the late layers
    of a ResNet: few channels' tiles over 7x7 images), where the device has tensor cores; None
    elsewhere (the direct kernel runs)."""
    KH, KW, sh, sw, ph, pw, dh, dw, H, W_, OH, OW = geo
    OC, C, batch = y[1], x[1], x[0]
    M, N, K_ = OC, OH * OW, C * KH * KW
    engine = p.engine
    kind = getattr(engine, "mma", "") if engine is not None else ""
    split = 1 if p.precision == "tf32" else mma_plan.F32_SPLIT
    if engine is None or not kind or split is None or M < mma_plan.MIN_CONV_M \
            or N < mma_plan.MIN_CONV_N or not K_:
        return None
    cus = int(engine.device.max_compute_units)
    local_limit = int(getattr(engine.device, "local_mem_size", 48 << 10))
    cfg = mma_plan.choose_config(M, N, K_, batch, cus, local_limit, False)
    copy = "cp_async" if K_ % 4 == 0 else "plain"
    stages, n_extra, edt, edims, est = epilogue(p, y)
    splits, slice_k = mma_plan.k_splits(cfg, M, N, K_, batch, cus)
    mode = mma_plan.split_k_mode(cfg) if splits > 1 else ""
    bmn = gemm_strides(p, y, batch, M, N) if n_extra and mode != "apart" else None
    if bmn is not None:
        edims, est = [batch, M, N], bmn
    fused = mode != "apart"  # (the epilogue in this kernel)
    src = p.cached(("conv_mma", cfg, split, kind, copy, len(edims), mode, bmn is not None),
                   lambda: mma.gemm_mma(cfg, True, split, kind == "ptx", copy, mma_plan.ALIGN,
                                        stages if fused else [], n_extra if fused else 0,
                                        edt if fused else [], len(edims) if fused else 0, None,
                                        mma_plan.HI_ROUND, True, mode, bmn is not None))
    gws, lws = mma_plan.work_sizes(cfg, M, N, batch, splits)
    geometry = [KH * KW, KW, OW, sh, sw, ph, pw, dh, dw, H, W_, H * W_, W_, 1]
    head = [("i", 1), ("i", 0)] + ([("o", 0)] if fused else [("b", 0), 0])
    head += [M, N, K_, 1, 0, 0, K_, 1, C * H * W_, 0, 0, 1]
    epi = (stages, n_extra, edt, edims, est)
    if mode:
        return split_k(p, src, gws, lws, head, geometry, (splits, slice_k), batch * M * N, None,
                       epi, mode)
    return [Launch(src, gws, lws, head + epilogue_args(n_extra, edims, est) + geometry)], []


ROWS = table(
    OpKind(Convolution, impl=conv_impl, epilogue=True),
    OpKind(GroupConvolution, impl=lambda p, key: conv_impl(p, key, grouped=True), epilogue=True),
)
