"""Convolutions: Convolution, GroupConvolution, ConvolutionBackpropData and
GroupConvolutionBackpropData (OpenVINO opset1), with their ONNX Conv / ConvTranspose rules.

Layouts are OpenVINO's: data ``[N, C, *spatial]`` (1-D, 2-D or 3-D spatial); filters ``[O, I, *k]``
(grouped: ``[G, O/G, I/G, *k]``); transposed filters ``[I, O, *k]`` (grouped: ``[G, I/G, O/G, *k]``).
The numpy references use im2col views (``sliding_window_view``) and one batched matmul, so whole
CNNs evaluate at image sizes in seconds. The spatial-geometry helpers here are shared with the
pooling and GNA ops.
"""
from __future__ import annotations

from math import prod
from typing import Any, Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..core.boundary import Constant
from ..core.dimension import INF, Dimension
from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..errors import UnsupportedOpError
from .base import merged_input_type, set_name, to_output
from .registry import OP_TYPES, onnx_export, onnx_rule

__all__ = ["convolution", "group_convolution", "convolution_backprop_data",
           "group_convolution_backprop_data"]

AUTO_PADS = ("explicit", "same_upper", "same_lower", "valid", "notset")


# -- spatial geometry (shared with pooling and GNA ops) --------------------------------------
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
            out.append(map_dim(d, lambda v, s=s: -(-v // s), identity=s == 1))
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
            out.append(map_dim(d, lambda v, e=e, s=s, pb=pb, pe=pe:
                               window_count(v, e, s, pb, pe, ceil),
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
    """Grouped N-d cross-correlation: x ``[N, C, *sp]``, w ``[O, C/groups, *k]`` -> ``[N, O, *out]``."""
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


# -- ops -------------------------------------------------------------------------------------
class _ConvBase(Node):
    """Attributes and spatial geometry common to the four convolution ops."""

    ATTRS = {"strides": [], "pads_begin": [], "pads_end": [], "dilations": [],
             "auto_pad": "explicit"}
    # Leading filter dims before the kernel: 2 ([O, I]) or 3 ([G, O/G, I/G]).
    FILTER_LEAD = 2

    def _spatial_rank(self) -> int | None:
        data = self.get_input_partial_shape(0)
        filt = self.get_input_partial_shape(1)
        ranks = []
        if data.rank_is_static:
            ranks.append(("data", len(data) - 2))
        if filt.rank_is_static:
            ranks.append(("filters", len(filt) - self.FILTER_LEAD))
        for name in ("strides", "dilations", "pads_begin", "pads_end"):
            if getattr(self, name):
                ranks.append((name, len(getattr(self, name))))
        if not ranks:
            return None
        n = ranks[0][1]
        for what, r in ranks:
            self.check(r == n, f"{what} implies {r} spatial axes but {ranks[0][0]} implies {n}")
        self.check(1 <= n <= 3, "expected 1 to 3 spatial axes, got {} (data rank {})", n, data)
        return n

    def _geometry(self, n: int) -> None:
        """Normalize the attributes to ``n`` spatial axes (OpenVINO writes them all to IR)."""
        self.auto_pad = normalize_auto_pad(self, self.auto_pad)
        self.strides = spatial_list(self, "strides", n, 1)
        self.dilations = spatial_list(self, "dilations", n, 1)
        self.pads_begin = spatial_list(self, "pads_begin", n, 0)
        self.pads_end = spatial_list(self, "pads_end", n, 0)
        self.check(all(s >= 1 for s in self.strides), "strides {} must be >= 1", self.strides)
        self.check(all(d >= 1 for d in self.dilations), "dilations {} must be >= 1", self.dilations)

    def _kernel_dims(self, n: int) -> list[Dimension]:
        filt = self.get_input_partial_shape(1)
        if not filt.rank_is_static:
            return [Dimension() for _ in range(n)]
        return list(filt)[self.FILTER_LEAD:]

    def _extents(self, n: int) -> list[Dimension]:
        kernel = self._kernel_dims(n)
        self.check(all(k.max >= 1 for k in kernel), "kernel {} has an empty axis", kernel)
        return [Dimension((k.min - 1) * d + 1) if k.is_static else Dimension()
                for k, d in zip(kernel, self.dilations)]


class _ForwardConv(_ConvBase):
    """Shape inference and padding shared by Convolution and GroupConvolution. They are
    siblings, not parent and child, as in OpenVINO: a pattern on Convolution must not match a
    GroupConvolution, whose filters have one more dimension."""

    def _channels(self, filt: PartialShape) -> tuple[Dimension, Dimension]:
        """(output channels, input channels the filters expect)."""
        if not filt.rank_is_static:
            return Dimension(), Dimension()
        return filt[0], filt[1]

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, filters)")
        et = merged_input_type(self)
        n = self._spatial_rank()
        if n is None:
            self.set_output_type(0, et, PartialShape(None))
            return
        self._geometry(n)
        data = self.get_input_partial_shape(0)
        filt = self.get_input_partial_shape(1)
        out_c, in_c = self._channels(filt)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape([Dimension(), out_c] + [Dimension()] * n))
            return
        self.check(data[1].compatible(in_c),
                   "data has {} channels but the filters expect {}", data[1], in_c)
        spatial = window_output_dims(self, list(data)[2:], self._extents(n), self.strides,
                                     self.pads_begin, self.pads_end, self.auto_pad)
        self.set_output_type(0, et, PartialShape([data[0], out_c] + spatial))

    def _pads(self, x: np.ndarray, kernel: Sequence[int]) -> tuple[list[int], list[int]]:
        extents = [(k - 1) * d + 1 for k, d in zip(kernel, self.dilations)]
        return resolve_pads(self.auto_pad, x.shape[2:], extents, self.strides,
                            self.pads_begin, self.pads_end)

    def evaluate(self, inputs):
        x, w = inputs
        self.check(x.shape[1] == w.shape[1],
                   "data has {} channels, filters expect {}", x.shape[1], w.shape[1])
        pb, pe = self._pads(x, w.shape[2:])
        y = conv_nd(x, w, self.strides, self.dilations, pb, pe)
        return [y.astype(self._outs[0].et.dtype or x.dtype, copy=False)]


class Convolution(_ForwardConv):
    """N-d convolution (cross-correlation) of ``[N, C, *sp]`` data with ``[O, C, *k]`` filters."""

    type_name = "Convolution"
    version = "opset1"


class GroupConvolution(_ForwardConv):
    """Grouped convolution; filters ``[G, O/G, I/G, *k]`` (depthwise: ``I/G == 1``)."""

    type_name = "GroupConvolution"
    version = "opset1"
    FILTER_LEAD = 3

    def _channels(self, filt: PartialShape) -> tuple[Dimension, Dimension]:
        if not filt.rank_is_static:
            return Dimension(), Dimension()
        g, og, ig = filt[0], filt[1], filt[2]
        return g * og, g * ig

    def evaluate(self, inputs):
        x, w = inputs
        groups = w.shape[0]
        pb, pe = self._pads(x, w.shape[3:])
        flat = w.reshape((groups * w.shape[1],) + w.shape[2:])
        self.check(x.shape[1] == groups * w.shape[2],
                   "data has {} channels, filters expect {} x {}", x.shape[1], groups, w.shape[2])
        y = conv_nd(x, flat, self.strides, self.dilations, pb, pe, groups)
        return [y.astype(self._outs[0].et.dtype or x.dtype, copy=False)]


class _BackpropConv(_ConvBase):
    """Transposed convolution: data ``[N, I, *sp]``, filters ``[I, O, *k]``, optional
    ``output_shape`` (the spatial dims of the output; see ``_pads`` for where padding goes).
    Shared by the plain and grouped ops, which are siblings as in OpenVINO."""

    ATTRS = dict(_ConvBase.ATTRS, output_padding=[])
    # With output_shape and explicit pads, OpenVINO keeps pads_begin here but not for the
    # grouped op (measured on its CPU plugin).
    OUTPUT_SHAPE_KEEPS_PADS_BEGIN = True

    def _filters_grouped(self, w: np.ndarray) -> np.ndarray:
        return w[None]

    def _channels(self, filt: PartialShape) -> tuple[Dimension, Dimension]:
        """(output channels, input channels the filters expect)."""
        if not filt.rank_is_static:
            return Dimension(), Dimension()
        return filt[1], filt[0]

    def infer_types(self) -> None:
        self.check(self.get_input_size() in (2, 3), "expects inputs (data, filters[, output_shape])")
        et = merged_input_type(self, [1])
        n = self._spatial_rank()
        if n is None:
            self.set_output_type(0, et, PartialShape(None))
            return
        self._geometry(n)
        self.output_padding = spatial_list(self, "output_padding", n, 0)
        data = self.get_input_partial_shape(0)
        filt = self.get_input_partial_shape(1)
        out_c, in_c = self._channels(filt)
        batch = data[0] if data.rank_is_static else Dimension()
        if data.rank_is_static:
            self.check(data[1].compatible(in_c),
                       "data has {} channels but the filters expect {}", data[1], in_c)
        if self.get_input_size() == 3:
            oshape = self.get_input_partial_shape(2)
            self.check(not oshape.rank_is_static or len(oshape) == 1,
                       "output_shape must be 1-D, got shape {}", oshape)
            self.check(not oshape.rank_is_static or not oshape[0].is_static or oshape[0].min == n,
                       "output_shape must hold {} spatial dims, got shape {}", n, oshape)
            pv = self.input_partial_value(2)
            spatial = [Dimension.of(v) if not isinstance(v, Dimension) else v for v in pv] \
                if pv is not None else [Dimension() for _ in range(n)]
        elif not data.rank_is_static:
            spatial = [Dimension() for _ in range(n)]
        else:
            spatial = self._spatial_from_input(list(data)[2:], self._kernel_dims(n))
        self.set_output_type(0, et, PartialShape([batch, out_c] + spatial))

    def _spatial_from_input(self, dims: list[Dimension], kernel: list[Dimension]) -> list[Dimension]:
        out = []
        for i, d in enumerate(dims):
            s, dil, op = self.strides[i], self.dilations[i], self.output_padding[i]
            k = kernel[i]
            if not k.is_static:
                out.append(Dimension())
                continue
            # As in OpenVINO, auto_pad without output_shape means no padding.
            pb, pe = (self.pads_begin[i], self.pads_end[i]) if self.auto_pad == "explicit" else (0, 0)
            extra = dil * (k.min - 1) + 1 + op - pb - pe
            fn = (lambda v, s=s, extra=extra: s * (v - 1) + extra if v > 0 else 0)
            if d.is_static:
                size = fn(d.min)
                self.check(size >= 1, f"transposed convolution gives spatial size {size} on axis {i}")
                out.append(Dimension(size))
            else:
                out.append(map_dim(d, fn, identity=s == 1 and extra == 1))
        return out

    def _pads(self, in_sp: Sequence[int], kernel: Sequence[int],
              out_sp: Sequence[int] | None) -> tuple[list[int], list[int]]:
        """Pads as OpenVINO applies them. Without output_shape: the attributes (explicit) or none.
        With it, the leading pad is pads_begin (explicit), 0 (valid) or half the total, the odd
        one first for same_upper; the trailing pad makes the size (negative: zeros added)."""
        n = len(kernel)
        if out_sp is None and self.auto_pad == "explicit":
            return list(self.pads_begin), list(self.pads_end)
        if out_sp is None:
            return [0] * n, [0] * n
        pb, pe = [], []
        for i in range(n):
            total = self.strides[i] * (in_sp[i] - 1) + self.dilations[i] * (kernel[i] - 1) + 1 + \
                self.output_padding[i] - out_sp[i]
            if self.auto_pad == "explicit":
                pb.append(self.pads_begin[i] if self.OUTPUT_SHAPE_KEEPS_PADS_BEGIN else 0)
            elif self.auto_pad == "valid":
                pb.append(0)
            else:
                t = max(total, 0)
                pb.append(t - t // 2 if self.auto_pad == "same_upper" else t // 2)
            pe.append(total - pb[-1])
        return pb, pe

    def evaluate(self, inputs):
        x, w = inputs[0], self._filters_grouped(inputs[1])
        out_sp = [int(v) for v in np.asarray(inputs[2]).reshape(-1)] if len(inputs) == 3 else None
        pb, pe = self._pads(x.shape[2:], w.shape[3:], out_sp)
        self.check(x.shape[1] == w.shape[0] * w.shape[1],
                   "data has {} channels, filters expect {}", x.shape[1], w.shape[0] * w.shape[1])
        y = conv_transpose_nd(x, w, self.strides, self.dilations, pb, pe, self.output_padding)
        return [y.astype(self._outs[0].et.dtype or x.dtype, copy=False)]


class ConvolutionBackpropData(_BackpropConv):
    """Transposed convolution with filters ``[I, O, *k]``."""

    type_name = "ConvolutionBackpropData"
    version = "opset1"


class GroupConvolutionBackpropData(_BackpropConv):
    """Grouped transposed convolution; filters ``[G, I/G, O/G, *k]``."""

    type_name = "GroupConvolutionBackpropData"
    version = "opset1"
    FILTER_LEAD = 3
    OUTPUT_SHAPE_KEEPS_PADS_BEGIN = False

    def _filters_grouped(self, w: np.ndarray) -> np.ndarray:
        return w

    def _channels(self, filt: PartialShape) -> tuple[Dimension, Dimension]:
        if not filt.rank_is_static:
            return Dimension(), Dimension()
        return filt[0] * filt[2], filt[0] * filt[1]


# -- factories -------------------------------------------------------------------------------
def _ints(v: Any) -> list[int]:
    return [] if v is None else [int(x) for x in np.asarray(v).reshape(-1)]


def _conv_attrs(strides, pads_begin, pads_end, dilations, auto_pad) -> dict[str, Any]:
    return {"strides": _ints(strides), "pads_begin": _ints(pads_begin),
            "pads_end": _ints(pads_end), "dilations": _ints(dilations),
            "auto_pad": (auto_pad or "explicit").lower()}


def convolution(data: Any, filters: Any, strides: Any, pads_begin: Any, pads_end: Any,
                dilations: Any, auto_pad: str = "explicit", name: str | None = None) -> Node:
    return set_name(Convolution([to_output(data), to_output(filters)],
                                **_conv_attrs(strides, pads_begin, pads_end, dilations, auto_pad)),
                    name)


def group_convolution(data: Any, filters: Any, strides: Any, pads_begin: Any, pads_end: Any,
                      dilations: Any, auto_pad: str = "explicit", name: str | None = None) -> Node:
    return set_name(GroupConvolution([to_output(data), to_output(filters)],
                                     **_conv_attrs(strides, pads_begin, pads_end, dilations,
                                                   auto_pad)), name)


def _backprop(cls: type, data, filters, strides, output_shape, pads_begin, pads_end, dilations,
              auto_pad, output_padding, name) -> Node:
    inputs = [to_output(data), to_output(filters)]
    if output_shape is not None:
        inputs.append(to_output(output_shape) if isinstance(output_shape, (Node, Output))
                      else to_output(np.asarray(output_shape, dtype=np.int64)))
    attrs = _conv_attrs(strides, pads_begin, pads_end, dilations, auto_pad)
    attrs["output_padding"] = _ints(output_padding)
    return set_name(cls(inputs, **attrs), name)


def convolution_backprop_data(data: Any, filters: Any, strides: Any, output_shape: Any = None,
                              pads_begin: Any = None, pads_end: Any = None, dilations: Any = None,
                              auto_pad: str | None = None, output_padding: Any = None,
                              name: str | None = None) -> Node:
    return _backprop(ConvolutionBackpropData, data, filters, strides, output_shape, pads_begin,
                     pads_end, dilations, auto_pad, output_padding, name)


def group_convolution_backprop_data(data: Any, filters: Any, strides: Any,
                                    output_shape: Any = None, pads_begin: Any = None,
                                    pads_end: Any = None, dilations: Any = None,
                                    auto_pad: str | None = None, output_padding: Any = None,
                                    name: str | None = None) -> Node:
    return _backprop(GroupConvolutionBackpropData, data, filters, strides, output_shape,
                     pads_begin, pads_end, dilations, auto_pad, output_padding, name)


# -- ONNX import -----------------------------------------------------------------------------
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


def _make(type_name: str, inputs: list, **attrs: Any) -> Output:
    """An op of another family (Reshape, Add, Multiply...), looked up when the rule runs."""
    cls = OP_TYPES.get(type_name)
    if cls is None:
        raise UnsupportedOpError(type_name, reason="op not available in this build")
    return cls(inputs, **attrs).output(0)


def reshape_to(ctx, value: Output, shape: Sequence[int]) -> Output:
    """``value`` reshaped to ``shape`` (``-1`` allowed): folded for Constants, a Reshape otherwise."""
    const = value.value
    if const is not None:
        return Constant([], value=np.asarray(const).reshape(shape),
                        element_type=value.element_type).output(0)
    return _make("Reshape", [value, to_output(np.asarray(shape, dtype=np.int64))],
                 special_zero=False)


def add_channel_bias(ctx, y: Output, bias: Output, n: int) -> Output:
    """``y + bias`` with a 1-D bias over axis 1 of ``[N, C, *spatial]``."""
    return _make("Add", [y, reshape_to(ctx, bias, [1, -1] + [1] * n)])


def _group_filters(ctx, w: Output, groups: int) -> Output:
    """ONNX grouped weights to OpenVINO's ``[G, ...]`` form.

    Conv weights ``[O, I/G, *k]`` become ``[G, O/G, I/G, *k]``; ConvTranspose weights
    ``[I, O/G, *k]`` become ``[G, I/G, O/G, *k]``: both split the leading axis by G.
    """
    ps = w.partial_shape
    if not ps.rank_is_static or not all(d.is_static for d in list(ps)[1:]):
        ctx.error(f"grouped weights need a static shape beyond the first axis, got {ps}")
    rest = [d.min for d in list(ps)[1:]]
    if ps[0].is_static and ps[0].min % groups:
        ctx.error(f"weights' first axis {ps[0].min} is not divisible by group={groups}")
    return reshape_to(ctx, w, [groups, -1] + rest)


@onnx_rule("Conv")
def _import_conv(ctx):
    x, w = ctx.inputs[0], ctx.inputs[1]
    b = ctx.input(2)
    n = onnx_spatial_rank(ctx, w.partial_shape, x.partial_shape)
    attrs = onnx_window_attrs(ctx, n)
    groups = ctx.attr("group", 1)
    if groups == 1:
        y = Convolution([x, w], **attrs).output(0)
    else:
        y = GroupConvolution([x, _group_filters(ctx, w, groups)], **attrs).output(0)
    if b is not None:
        y = add_channel_bias(ctx, y, b, n)
    return y


def _kernel_from(ctx, w: Output, n: int) -> list[int]:
    ks = ctx.attr("kernel_shape", [])
    if ks:
        return ks
    ps = w.partial_shape
    if not ps.rank_is_static or not all(d.is_static for d in list(ps)[2:]):
        ctx.error(f"auto_pad needs a known kernel size; weights have shape {ps}")
    return [d.min for d in list(ps)[2:]]


@onnx_rule("ConvTranspose")
def _import_conv_transpose(ctx):
    x, w = ctx.inputs[0], ctx.inputs[1]
    b = ctx.input(2)
    n = onnx_spatial_rank(ctx, w.partial_shape, x.partial_shape)
    attrs = onnx_window_attrs(ctx, n)
    attrs["output_padding"] = ctx.attr("output_padding", [0] * n)
    if len(attrs["output_padding"]) != n:
        ctx.error(f"output_padding {attrs['output_padding']} must have {n} values")
    inputs = [x, w]
    groups = ctx.attr("group", 1)
    if groups != 1:
        inputs[1] = _group_filters(ctx, w, groups)
    out_shape = ctx.attr("output_shape", [])
    if out_shape:
        # Pads follow from the output shape. onnxruntime puts an odd pad first except for
        # SAME_UPPER; OpenVINO puts it first only for same_upper.
        inputs.append(to_output(np.asarray(out_shape[-n:], dtype=np.int64)))
        attrs["auto_pad"] = "same_lower" if attrs["auto_pad"] == "same_upper" else "same_upper"
    elif attrs["auto_pad"] in ("same_upper", "same_lower"):
        # Output size input * stride: the total pad does not depend on the input size.
        pb, pe = [], []
        for k, d, s, op in zip(_kernel_from(ctx, w, n), attrs["dilations"], attrs["strides"],
                               attrs["output_padding"]):
            total = max((k - 1) * d + 1 + op - s, 0)
            pb.append(total // 2 if attrs["auto_pad"] == "same_upper" else total - total // 2)
            pe.append(total - pb[-1])
        attrs.update(auto_pad="explicit", pads_begin=pb, pads_end=pe)
    elif attrs["auto_pad"] == "valid":
        attrs.update(auto_pad="explicit", pads_begin=[0] * n, pads_end=[0] * n)
    cls = ConvolutionBackpropData if groups == 1 else GroupConvolutionBackpropData
    y = cls(inputs, **attrs).output(0)
    if b is not None:
        y = add_channel_bias(ctx, y, b, n)
    return y


# -- ONNX export -----------------------------------------------------------------------------
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


def _export_filters(node: Node, ectx, name: str, shape: list[int]) -> str:
    """The filters input reshaped to ONNX's ungrouped layout."""
    w = node.input_value(1)
    if w.value is not None:
        return ectx.constant(np.asarray(w.value).reshape(shape))
    out = ectx.fresh(f"{node.friendly_name}/weights")
    ectx.add_node("Reshape", [name, ectx.constant(np.asarray(shape, dtype=np.int64))], [out])
    return out


def _static_filter_shape(node: Node) -> list[int]:
    ps = node.get_input_partial_shape(1)
    if not ps.is_static:
        raise UnsupportedOpError(node.type_name, node_name=node.friendly_name,
                                 reason=f"ONNX export needs static filters, got {ps}")
    return list(ps.to_shape())


@onnx_export(Convolution, GroupConvolution)
def _export_conv(node, ectx):
    names = ectx.inputs(node)
    filt = node.get_input_partial_shape(1)
    extents = [(k - 1) * d + 1 for k, d in zip(filt.to_shape()[node.FILTER_LEAD:],
                                               node.dilations)] if filt.is_static else None
    attrs = onnx_window_export_attrs(node, extents)
    attrs["dilations"] = list(node.dilations)
    if isinstance(node, GroupConvolution):
        shape = _static_filter_shape(node)
        attrs["group"] = shape[0]
        names[1] = _export_filters(node, ectx, names[1], [shape[0] * shape[1]] + shape[2:])
    ectx.add_node("Conv", names[:2], ectx.outputs(node), **attrs)


@onnx_export(ConvolutionBackpropData, GroupConvolutionBackpropData)
def _export_conv_transpose(node, ectx):
    names = ectx.inputs(node)
    attrs: dict[str, Any] = {"strides": list(node.strides), "dilations": list(node.dilations),
                             "output_padding": list(node.output_padding)}
    if isinstance(node, GroupConvolutionBackpropData):
        shape = _static_filter_shape(node)
        attrs["group"] = shape[0]
        names[1] = _export_filters(node, ectx, names[1], [shape[0] * shape[1]] + shape[2:])
    if node.get_input_size() == 3:
        attrs.update(_export_output_shape(node))
    elif node.auto_pad == "explicit":
        attrs["pads"] = list(node.pads_begin) + list(node.pads_end)
    # Without output_shape, OpenVINO's same_*/valid mean no padding: ONNX's default.
    ectx.add_node("ConvTranspose", names[:2], ectx.outputs(node), **attrs)


def _export_output_shape(node: Node) -> dict[str, Any]:
    """ConvTranspose attributes giving a backprop node's output_shape and pad placement:
    explicit pads where the shapes are static, else output_shape with the matching auto_pad."""
    value = node.input_value(2).value
    if value is None:
        raise UnsupportedOpError(node.type_name, node_name=node.friendly_name,
                                 reason="ONNX ConvTranspose needs a constant output_shape")
    out_sp = [int(v) for v in np.asarray(value).reshape(-1)]
    data, filt = node.get_input_partial_shape(0), node.get_input_partial_shape(1)
    if data.is_static and filt.is_static:
        pb, pe = node._pads(data.to_shape()[2:], filt.to_shape()[node.FILTER_LEAD:], out_sp)
        # A negative end pad grows the output: ONNX says that with output_padding, which
        # onnxruntime takes while it stays below the stride or the dilation.
        grow = [op + max(-e, 0) for op, e in zip(node.output_padding, pe)]
        if min(pb) >= 0 and all(g < max(s, d) for g, s, d in zip(grow, node.strides,
                                                                 node.dilations)):
            return {"pads": pb + [max(e, 0) for e in pe], "output_padding": grow}
    # onnxruntime: NOTSET puts an odd total pad first (OpenVINO's same_upper), SAME_UPPER last.
    onnx_pad = {"same_upper": "NOTSET", "same_lower": "SAME_UPPER"}.get(node.auto_pad)
    if onnx_pad is None:
        raise UnsupportedOpError(node.type_name, node_name=node.friendly_name,
                                 reason=f"auto_pad={node.auto_pad} with output_shape needs static "
                                        "shapes and non-negative pads for ONNX")
    return {"output_shape": out_sp, "auto_pad": onnx_pad}
