"""Sliding-window geometry and reference loops shared by convolution, pooling and the GNA ops:
output sizes under ``auto_pad`` and ceil/floor rounding, resolved pads, the numpy window
extraction, and the ONNX spellings of those attributes."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from math import prod
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...core.dimension import INF, Dimension
from ...core.node import Node
from ...core.shape import PartialShape

AUTO_PADS = ("explicit", "same_upper", "same_lower", "valid", "notset")


def map_dim(d: Dimension, fn: Callable[[int], int], identity: bool = False) -> Dimension:
    """``fn`` (non-decreasing) applied to a dimension's bounds; ``identity`` keeps ``d`` itself,
    symbol included, when ``fn`` is known to be the identity."""
    if identity:
        return d
    if d.is_static:
        return Dimension(fn(d.min))
    lo = max(fn(d.min), 0)
    if d.max == INF:
        return Dimension(lo, -1)
    hi = max(fn(d.max), 0)
    return Dimension(min(lo, hi), hi)


def _ceil_div(v: int, s: int) -> int:
    return -(-v // s)


def window_count(size: int, extent: int, stride: int, pad_begin: int, pad_end: int,
                 ceil: bool = False) -> int:
    """Number of windows of ``extent`` at ``stride`` over a padded axis (may be < 1)."""
    span = size + pad_begin + pad_end - extent
    if not ceil:
        return span // stride + 1
    out = -(-span // stride) + 1
    # The last window must start inside the input or the leading padding.
    if out > 1 and (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def same_pads(size: int, extent: int, stride: int, upper: bool) -> tuple[int, int]:
    """Pads that give ``ceil(size / stride)`` windows; the odd one goes last for same_upper."""
    out = -(-size // stride)
    total = max((out - 1) * stride + extent - size, 0)
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def normalize_auto_pad(node: Node, value: str) -> str:
    v = str(value).lower()
    node.check(v in AUTO_PADS, "auto_pad must be one of {}, got {!r}", AUTO_PADS[:4], value)
    return "explicit" if v == "notset" else v


def spatial_list(node: Node, name: str, n: int, default: int) -> list[int]:
    """Attribute ``name`` as a list of ``n`` ints (``default`` each when empty)."""
    value = list(getattr(node, name) or [])
    if not value:
        return [default] * n
    node.check(len(value) == n, "{} {} must have {} values (one per spatial axis)", name, value, n)
    return [int(v) for v in value]


def resolve_pads(auto_pad: str, sizes: Sequence[int], extents: Sequence[int],
                 strides: Sequence[int], pads_begin: Sequence[int],
                 pads_end: Sequence[int]) -> tuple[list[int], list[int]]:
    """Concrete pads for concrete spatial sizes under ``auto_pad``."""
    if auto_pad == "valid":
        return [0] * len(sizes), [0] * len(sizes)
    if auto_pad in ("same_upper", "same_lower"):
        pairs = [same_pads(s, e, st, auto_pad == "same_upper")
                 for s, e, st in zip(sizes, extents, strides)]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    return list(pads_begin), list(pads_end)


def window_output_dims(node: Node, dims: Sequence[Dimension], extents: Sequence[Dimension | int],
                       strides: Sequence[int], pads_begin: Sequence[int],
                       pads_end: Sequence[int], auto_pad: str,
                       ceil: bool = False) -> list[Dimension]:
    """Output spatial dims of a sliding-window op on partial input dims."""
    out = []
    for i, d in enumerate(dims):
        s = strides[i]
        if auto_pad in ("same_upper", "same_lower"):
            out.append(map_dim(d, partial(_ceil_div, s=s), identity=s == 1))
            continue
        e = extents[i]
        if isinstance(e, Dimension):
            if not e.is_static:
                out.append(Dimension())
                continue
            e = e.min
        pb, pe = (0, 0) if auto_pad == "valid" else (pads_begin[i], pads_end[i])
        if d.is_static:
            n = window_count(d.min, e, s, pb, pe, ceil)
            node.check(n >= 1, f"window of extent {e} (kernel and dilation) does not fit spatial "
                               f"axis {i} of size {d.min} padded by ({pb}, {pe})")
            out.append(Dimension(n))
        else:
            out.append(map_dim(d, partial(window_count, extent=e, stride=s, pad_begin=pb,
                                          pad_end=pe, ceil=ceil),
                               identity=s == 1 and pb + pe == e - 1))
    return out


def pad_spatial(x: np.ndarray, pads_begin: Sequence[int], pads_end: Sequence[int],
                value: Any = 0) -> np.ndarray:
    """Pad (or, for negative pads, crop) the trailing ``len(pads_begin)`` axes of ``x``."""
    n = len(pads_begin)
    lead = x.ndim - n
    widths = [(0, 0)] * lead + [(max(b, 0), max(e, 0)) for b, e in zip(pads_begin, pads_end)]
    if any(w != (0, 0) for w in widths):
        x = np.pad(x, widths, mode="constant", constant_values=value)
    if any(b < 0 or e < 0 for b, e in zip(pads_begin, pads_end)):
        sl = [slice(None)] * lead + [slice(max(-b, 0), x.shape[lead + i] - max(-e, 0))
                                     for i, (b, e) in enumerate(zip(pads_begin, pads_end))]
        x = x[tuple(sl)]
    return x


def windows(x: np.ndarray, kernel: Sequence[int], strides: Sequence[int],
            dilations: Sequence[int]) -> np.ndarray:
    """View ``[*lead, *out, *kernel]`` of the windows over the trailing spatial axes of ``x``."""
    n = len(kernel)
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    axes = tuple(range(x.ndim - n, x.ndim))
    v = sliding_window_view(x, extents, axis=axes)
    sl = (slice(None),) * (x.ndim - n) + tuple(slice(None, None, s) for s in strides) + \
        tuple(slice(None, None, d) for d in dilations)
    return v[sl]


def accumulation_dtype(dt: np.dtype) -> np.dtype:
    """Type to accumulate products in: f32 for half floats (bfloat16 included), i64 for ints."""
    dt = np.dtype(dt)
    if dt.kind == "V":
        return np.dtype(np.float32)
    if dt.kind == "f":
        return np.dtype(np.float32) if dt.itemsize < 4 else dt
    if dt.kind in "iub":
        return np.dtype(np.int64)
    return dt


def conv_nd(x: np.ndarray, w: np.ndarray, strides: Sequence[int], dilations: Sequence[int],
            pads_begin: Sequence[int], pads_end: Sequence[int], groups: int = 1) -> np.ndarray:
    """Grouped N-d cross-correlation: x ``[N, C, *sp]``, w ``[O, C/groups, *k]`` ->
    ``[N, O, *out]``."""
    acc = accumulation_dtype(np.result_type(x, w))
    n = w.ndim - 2
    kernel = w.shape[2:]
    xp = pad_spatial(x.astype(acc, copy=False), pads_begin, pads_end)
    win = windows(xp, kernel, strides, dilations)          # [N, C, *out, *k]
    batch, channels = x.shape[:2]
    out_sp = win.shape[2:2 + n]
    cg = channels // groups
    og = w.shape[0] // groups
    win = win.reshape((batch, groups, cg) + win.shape[2:])
    # [N, G, Cg, *out, *k] -> [G, N*P, Cg*K]: the im2col matrices, one copy. Batch and pixels
    # share one matrix so each group is a single large GEMM (broadcast stacks are slow).
    order = (1, 0) + tuple(range(3, 3 + n)) + (2,) + tuple(range(3 + n, 3 + 2 * n))
    cols = win.transpose(order).reshape(groups, batch * prod(out_sp), cg * prod(kernel))
    wm = w.astype(acc, copy=False).reshape(groups, og, cg * prod(kernel))
    # Filters on the left: no copy of the (often large) weights, output already channel-major.
    y = np.matmul(wm, cols.transpose(0, 2, 1))             # [G, Og, N*P]
    y = y.reshape(groups, og, batch, prod(out_sp)).transpose(2, 0, 1, 3)
    return y.reshape((batch, groups * og) + tuple(out_sp))


def conv_transpose_nd(x: np.ndarray, w: np.ndarray, strides: Sequence[int],
                      dilations: Sequence[int], pads_begin: Sequence[int],
                      pads_end: Sequence[int], output_padding: Sequence[int]) -> np.ndarray:
    """Grouped N-d transposed convolution: x ``[N, G*Ig, *sp]``, w ``[G, Ig, Og, *k]``.

    One matmul gives every input pixel's contribution per kernel tap; the taps are then added
    into the output at stride (a loop over kernel taps only), and the pads are cropped off.
    """
    acc = accumulation_dtype(np.result_type(x, w))
    groups, ig, og = w.shape[:3]
    kernel = w.shape[3:]
    n = len(kernel)
    batch = x.shape[0]
    in_sp = x.shape[2:]
    # [G, N*P, Ig] @ [G, Ig, Og*K]: one GEMM per group.
    cols = x.astype(acc, copy=False).reshape(batch, groups, ig, prod(in_sp)) \
        .transpose(1, 0, 3, 2).reshape(groups, batch * prod(in_sp), ig)
    y = np.matmul(cols, w.astype(acc, copy=False).reshape(groups, ig, og * prod(kernel)))
    # [G, N, *in, Og, *k] -> [*k, N, G, Og, *in]
    y = y.reshape((groups, batch) + tuple(in_sp) + (og,) + tuple(kernel))
    order = tuple(range(3 + n, 3 + 2 * n)) + (1, 0, 2 + n) + tuple(range(2, 2 + n))
    y = y.transpose(order)
    full = [s * (i - 1) + d * (k - 1) + 1 + op
            for s, i, d, k, op in zip(strides, in_sp, dilations, kernel, output_padding)]
    canvas = np.zeros((batch, groups, og) + tuple(full), dtype=acc)
    for tap in np.ndindex(*kernel):
        sl = tuple(slice(t * d, t * d + s * (i - 1) + 1, s)
                   for t, d, s, i in zip(tap, dilations, strides, in_sp))
        canvas[(slice(None),) * 3 + sl] += y[tap]
    out = pad_spatial(canvas, [-p for p in pads_begin], [-p for p in pads_end])
    return out.reshape((batch, groups * og) + out.shape[3:])


ONNX_AUTO_PAD = {"NOTSET": "explicit", "SAME_UPPER": "same_upper", "SAME_LOWER": "same_lower",
                 "VALID": "valid"}


def onnx_window_attrs(ctx, n: int) -> dict[str, Any]:
    """strides, dilations, pads and auto_pad of an ONNX Conv/Pool node, OpenVINO-style."""
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad not in ONNX_AUTO_PAD:
        ctx.error(f"unknown auto_pad {auto_pad!r}")
    pads = ctx.attr("pads", [0] * (2 * n))
    if len(pads) != 2 * n:
        ctx.error(f"pads {pads} must have {2 * n} values")
    strides = ctx.attr("strides", [1] * n)
    dilations = ctx.attr("dilations", [1] * n)
    if len(strides) != n or len(dilations) != n:
        ctx.error(f"strides {strides} / dilations {dilations} must have {n} values")
    return {"strides": strides, "dilations": dilations, "pads_begin": pads[:n],
            "pads_end": pads[n:], "auto_pad": ONNX_AUTO_PAD[auto_pad]}


def onnx_spatial_rank(ctx, *shapes: PartialShape, lead: int = 2) -> int:
    ks = ctx.attr("kernel_shape", [])
    if ks:
        return len(ks)
    for ps in shapes:
        if ps.rank_is_static:
            return len(ps) - lead
    ctx.error("cannot tell the number of spatial axes (no kernel_shape, dynamic ranks)")
    return 0


def onnx_window_export_attrs(node: Node, extents: Sequence[int] | None = None) -> dict[str, Any]:
    """strides and pads (or auto_pad) of a sliding-window op for ONNX. With the window
    ``extents``, same padding over static spatial dims is written as explicit pads
    (onnxruntime refuses SAME with dilations)."""
    attrs: dict[str, Any] = {"strides": list(node.strides)}
    data = node.get_input_partial_shape(0)
    auto_pad = node.auto_pad
    if auto_pad.startswith("same") and extents is not None and data.is_static:
        pb, pe = resolve_pads(auto_pad, data.to_shape()[2:], extents, node.strides, [], [])
        attrs["pads"] = pb + pe
    elif auto_pad == "explicit":
        attrs["pads"] = list(node.pads_begin) + list(node.pads_end)
    else:
        attrs["auto_pad"] = auto_pad.upper()
    return attrs
