"""Pooling: MaxPool (opset8, values and indices) and AvgPool (opset1), with the ONNX MaxPool,
AveragePool, GlobalMaxPool and GlobalAveragePool rules.

Data is ``[N, C, *spatial]`` with 1 to 3 spatial axes. The references gather every window
through one ``sliding_window_view``; ``ceil`` rounding pads the end so the last window fits.
Semantics are OpenVINO's (checked against its CPU plugin); where onnxruntime differs (AvgPool's
divisor over that ceil overhang, dilated average pooling, column-major indices) the ONNX rules
translate.
"""
from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np

from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import Type, i32, i64
from ..errors import UnsupportedOpError
from .base import normalize_axis, set_name, to_output
from .convolution import GroupConvolution
from .convolution.window import (
    ONNX_AUTO_PAD,
    accumulation_dtype,
    normalize_auto_pad,
    onnx_window_export_attrs,
    pad_spatial,
    resolve_pads,
    spatial_list,
    window_count,
    window_output_dims,
    windows,
)
from .elementwise import Add, Divide, FloorMod, Multiply, Subtract
from .pad import Pad
from .reduction import ReduceMax, ReduceMean
from .registry import onnx_export, onnx_rule

__all__ = ["max_pool", "avg_pool"]


def pool_geometry(sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                  dilations: Sequence[int], pads_begin: Sequence[int], pads_end: Sequence[int],
                  auto_pad: str, ceil: bool
                  ) -> tuple[list[int], list[int], list[int], list[int]]:
    """(pads_begin, pads_end, overhang past pads_end, output sizes) for concrete sizes."""
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    pb, pe = resolve_pads(auto_pad, sizes, extents, strides, pads_begin, pads_end)
    outs = [window_count(i, e, s, b, p, ceil and auto_pad in ("explicit", "valid"))
            for i, e, s, b, p in zip(sizes, extents, strides, pb, pe)]
    extra = [max((o - 1) * s + e - (i + b + p), 0)
             for o, s, e, i, b, p in zip(outs, strides, extents, sizes, pb, pe)]
    return pb, pe, extra, outs


def _crop_windows(win: np.ndarray, lead: int, outs: Sequence[int]) -> np.ndarray:
    return win[(slice(None),) * lead + tuple(slice(0, o) for o in outs)]


def max_pool_nd(x: np.ndarray, kernel: Sequence[int], strides: Sequence[int],
                dilations: Sequence[int], pads_begin: Sequence[int], pads_end: Sequence[int],
                auto_pad: str = "explicit", ceil: bool = False,
                index_axis: int | None = 0) -> tuple[np.ndarray, np.ndarray | None]:
    """Max over windows of the trailing ``len(kernel)`` axes; with ``index_axis``, also the
    flat index of each maximum within the input's axes ``index_axis..`` (first maximum wins)."""
    n = len(kernel)
    lead = x.ndim - n
    pb, pe, extra, outs = pool_geometry(x.shape[lead:], kernel, strides, dilations, pads_begin,
                                        pads_end, auto_pad, ceil)
    end = [p + e for p, e in zip(pe, extra)]
    fill = -np.inf if x.dtype.kind in "fV" else np.iinfo(x.dtype).min
    win = _crop_windows(windows(pad_spatial(x, pb, end, fill), kernel, strides, dilations),
                        lead, outs)
    flat = win.reshape(win.shape[:lead + n] + (prod(kernel),))
    arg = flat.argmax(axis=-1)[..., None]
    values = np.take_along_axis(flat, arg, axis=-1)[..., 0]
    if index_axis is None:
        return values, None
    base = np.arange(prod(x.shape[index_axis:]), dtype=np.int64).reshape(x.shape[index_axis:])
    idx = pad_spatial(np.broadcast_to(base, x.shape), pb, end, -1)
    iwin = _crop_windows(windows(idx, kernel, strides, dilations), lead, outs)
    iflat = iwin.reshape(flat.shape)
    return values, np.take_along_axis(iflat, arg, axis=-1)[..., 0]


def avg_pool_nd(x: np.ndarray, kernel: Sequence[int], strides: Sequence[int],
                pads_begin: Sequence[int], pads_end: Sequence[int], exclude_pad: bool,
                auto_pad: str = "explicit", ceil: bool = False) -> np.ndarray:
    """Mean over windows, as OpenVINO's AvgPool: without ``exclude_pad`` and with any padding
    the divisor is the whole kernel (padding and ceil overhang included); otherwise it counts
    the input elements in the window."""
    n = len(kernel)
    lead = x.ndim - n
    ones = [1] * n
    pb, pe, extra, outs = pool_geometry(x.shape[lead:], kernel, strides, ones, pads_begin,
                                        pads_end, auto_pad, ceil)
    end = [p + e for p, e in zip(pe, extra)]
    acc = accumulation_dtype(x.dtype)
    xp = pad_spatial(x.astype(acc, copy=False), pb, end)
    kaxes = tuple(range(lead + n, lead + 2 * n))
    total = _crop_windows(windows(xp, kernel, strides, ones), lead, outs).sum(axis=kaxes)
    if not exclude_pad and any(pb + pe):
        return total / prod(kernel)
    mask = pad_spatial(np.ones(x.shape[lead:], dtype=acc), pb, end)
    count = _crop_windows(windows(mask, kernel, strides, ones), 0, outs).sum(
        axis=tuple(range(n, 2 * n)))
    return total / np.maximum(count, 1)


class _PoolBase(Node):
    """Attributes and output shape common to the pooling ops."""

    auto_pad: Any  # normalised by _geometry
    kernel: Any

    def _spatial_rank(self) -> int:
        data = self.get_input_partial_shape(0)
        kernel = list(self.kernel or [])
        self.check(bool(kernel), "kernel must be given")
        n = len(kernel)
        self.check(1 <= n <= 3, "expected 1 to 3 spatial axes, got kernel {}", kernel)
        if data.rank_is_static:
            self.check(len(data) == n + 2, f"data rank {len(data)} does not match kernel {kernel}"
                                           f" ({n} spatial axes plus N and C)")
        return n

    def _geometry(self, n: int) -> None:
        self.auto_pad = normalize_auto_pad(self, self.auto_pad)
        self.check(self.rounding_type in ("floor", "ceil"),
                   "rounding_type must be 'floor' or 'ceil', got {!r}", self.rounding_type)
        self.kernel = [int(k) for k in self.kernel]
        self.check(all(k >= 1 for k in self.kernel), "kernel {} must be >= 1", self.kernel)
        self.strides = spatial_list(self, "strides", n, 1)
        self.pads_begin = spatial_list(self, "pads_begin", n, 0)
        self.pads_end = spatial_list(self, "pads_end", n, 0)
        self.check(all(s >= 1 for s in self.strides), "strides {} must be >= 1", self.strides)

    def _output_shape(self, n: int, dilations: Sequence[int]) -> PartialShape:
        data = self.get_input_partial_shape(0)
        if not data.rank_is_static:
            return PartialShape.dynamic(n + 2)
        extents = [(k - 1) * d + 1 for k, d in zip(self.kernel, dilations)]
        spatial = window_output_dims(self, list(data)[2:], extents, self.strides,
                                     self.pads_begin, self.pads_end, self.auto_pad,
                                     self.rounding_type == "ceil")
        return PartialShape([data[0], data[1]] + spatial)


class MaxPool(_PoolBase):
    """Max pooling with dilations; output 1 holds each maximum's flat index in the input
    (counted over the axes from ``axis`` on), of type ``index_element_type``."""

    type_name = "MaxPool"
    version = "opset8"
    # v1: no dilations (1) and no indices output (the values are output 0); v14 adds
    # rounding_type ceil_torch, which this class implements (Serialize writes it as v14)
    IR_VERSIONS = ("opset1", "opset8", "opset14")
    ATTRS = {"strides": [], "dilations": [], "pads_begin": [], "pads_end": [], "kernel": [],
             "rounding_type": "floor", "auto_pad": "explicit", "index_element_type": "i64",
             "axis": 0}
    axis: Any
    index_element_type: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        n = self._spatial_rank()
        self._geometry(n)
        self.dilations = spatial_list(self, "dilations", n, 1)
        self.check(all(d >= 1 for d in self.dilations), "dilations {} must be >= 1", self.dilations)
        index_type = Type.of(self.index_element_type)
        self.check(index_type in (i32, i64),
                   "index_element_type must be i32 or i64, got {}", self.index_element_type)
        self.index_element_type = index_type.name
        shape = self._output_shape(n, self.dilations)
        self.axis = normalize_axis(self, int(self.axis), n + 2)
        self.set_output_type(0, self.get_input_element_type(0), shape)
        self.set_output_type(1, index_type, shape)

    def evaluate(self, inputs):
        x = inputs[0]
        values, indices = max_pool_nd(x, self.kernel, self.strides, self.dilations,
                                      self.pads_begin, self.pads_end, self.auto_pad,
                                      self.rounding_type == "ceil", self.axis)
        return [values, indices.astype(self._outs[1].et.dtype)]


class AvgPool(_PoolBase):
    """Average pooling; ``exclude-pad`` (OpenVINO's attribute name) leaves padding out of
    the divisor."""

    type_name = "AvgPool"
    version = "opset1"
    # v14 adds rounding_type ceil_torch, which this class implements (Serialize writes it as
    # v14); v16's dilations are not read here
    IR_VERSIONS = ("opset1", "opset14")
    ATTRS = {"strides": [], "pads_begin": [], "pads_end": [], "kernel": [],
             "exclude-pad": False, "rounding_type": "floor", "auto_pad": "explicit"}

    @property
    def exclude_pad(self) -> bool:
        return bool(getattr(self, "exclude-pad"))

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        n = self._spatial_rank()
        self._geometry(n)
        self.set_output_type(0, self.get_input_element_type(0), self._output_shape(n, [1] * n))

    def evaluate(self, inputs):
        x = inputs[0]
        y = avg_pool_nd(x, self.kernel, self.strides, self.pads_begin, self.pads_end,
                        self.exclude_pad, self.auto_pad, self.rounding_type == "ceil")
        return [y.astype(x.dtype, copy=False)]


# -- factories -------------------------------------------------------------------------------
def _ints(v: Any) -> list[int]:
    return [] if v is None else [int(x) for x in np.asarray(v).reshape(-1)]


def max_pool(data: Any, strides: Any, dilations: Any, pads_begin: Any, pads_end: Any,
             kernel_shape: Any, rounding_type: str = "floor", auto_pad: str | None = None,
             index_element_type: Any = "i64", axis: int = 0, name: str | None = None) -> Node:
    """MaxPool-8 over the spatial dims of ``data`` (``[N, C, *spatial]``): windows of
    ``kernel_shape`` with ``dilations``, moved by ``strides``, padded by ``pads_begin`` /
    ``pads_end``; ``rounding_type`` and ``auto_pad`` as :func:`avg_pool`. Two outputs: the maxima,
    and each maximum's flat index (counted over the dims from ``axis`` on) as
    ``index_element_type``."""
    return set_name(MaxPool([to_output(data)], strides=_ints(strides), dilations=_ints(dilations),
                            pads_begin=_ints(pads_begin), pads_end=_ints(pads_end),
                            kernel=_ints(kernel_shape), rounding_type=rounding_type.lower(),
                            auto_pad=(auto_pad or "explicit").lower(),
                            index_element_type=Type.of(index_element_type).name, axis=axis), name)


def avg_pool(data: Any, strides: Any, pads_begin: Any, pads_end: Any, kernel_shape: Any,
             exclude_pad: bool, rounding_type: str = "floor", auto_pad: str | None = None,
             name: str | None = None) -> Node:
    """AvgPool-1 over the spatial dims of ``data`` (``[N, C, *spatial]``): windows of
    ``kernel_shape`` moved by ``strides``, ``pads_begin`` / ``pads_end`` padding per spatial dim;
    ``exclude_pad`` leaves the padding out of each window's divisor. ``rounding_type`` ("floor" or
    "ceil") rounds the output size; ``auto_pad`` ("explicit", "valid", "same_upper",
    "same_lower") overrides the pads."""
    attrs = {"strides": _ints(strides), "pads_begin": _ints(pads_begin),
             "pads_end": _ints(pads_end), "kernel": _ints(kernel_shape),
             "exclude-pad": bool(exclude_pad), "rounding_type": rounding_type.lower(),
             "auto_pad": (auto_pad or "explicit").lower()}
    return set_name(AvgPool([to_output(data)], **attrs), name)


# -- ONNX import -----------------------------------------------------------------------------
def _onnx_pool_attrs(ctx) -> dict[str, Any]:
    kernel = ctx.attr("kernel_shape", [])
    if not kernel:
        ctx.error("kernel_shape is required")
    n = len(kernel)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad not in ONNX_AUTO_PAD:
        ctx.error(f"unknown auto_pad {auto_pad!r}")
    pads = ctx.attr("pads", [0] * (2 * n))
    strides = ctx.attr("strides", [1] * n)
    if len(pads) != 2 * n or len(strides) != n:
        ctx.error(f"pads {pads} / strides {strides} do not match kernel_shape {kernel}")
    return {"kernel": kernel, "strides": strides, "pads_begin": pads[:n], "pads_end": pads[n:],
            "auto_pad": ONNX_AUTO_PAD[auto_pad],
            "rounding_type": "ceil" if ctx.attr("ceil_mode", 0) else "floor"}


@onnx_rule("MaxPool")
def _import_max_pool(ctx):
    attrs = _onnx_pool_attrs(ctx)
    dilations = ctx.attr("dilations", [1] * len(attrs["kernel"]))
    node = MaxPool([ctx.inputs[0]], dilations=dilations, **attrs)
    if ctx.num_outputs > 1 and ctx.attr("storage_order", 0) == 1:
        return [node.output(0), _column_major_indices(ctx, node.output(1))]
    return node.outputs()[:max(ctx.num_outputs, 1)]


def _column_major_indices(ctx, indices):
    """Row-major flat indices (OpenVINO's) renumbered with the spatial axes in column-major
    order, as ONNX's storage_order=1 asks: ``base + sum(coord_i * stride_i)`` where the first
    spatial axis varies fastest. Needs static spatial dims."""
    ps = ctx.inputs[0].partial_shape
    if not ps.rank_is_static or not all(d.is_static for d in list(ps)[2:]):
        ctx.error(f"storage_order=1 needs static spatial dims, got {ps}")
    sizes = [d.min for d in list(ps)[2:]]

    def op(cls: type, a, b):
        b = b if not isinstance(b, int) else to_output(np.asarray(b, dtype=np.int64))
        return cls([a, b]).output(0)

    total = prod(sizes)
    within = op(FloorMod, indices, total)
    out = op(Subtract, indices, within)           # (n * C + c) * prod(spatial)
    row_stride, col_stride = total, 1
    for size in sizes:
        row_stride //= size
        coord = op(FloorMod, op(Divide, within, row_stride), size)
        out = op(Add, out, op(Multiply, coord, col_stride))
        col_stride *= size
    return out


@onnx_rule("AveragePool")
def _import_avg_pool(ctx):
    attrs = _onnx_pool_attrs(ctx)
    include_pad = bool(ctx.attr("count_include_pad", 0))
    x = ctx.inputs[0]
    dilations = ctx.attr("dilations", [])
    if any(d != 1 for d in dilations):
        return _dilated_avg_pool(ctx, x, attrs, dilations, include_pad)
    attrs["exclude-pad"] = not include_pad
    pads = attrs["pads_begin"] + attrs["pads_end"]
    if include_pad and attrs["rounding_type"] == "ceil" and attrs["auto_pad"] == "explicit" \
            and any(pads):
        # onnxruntime counts padding but not the ceil overhang; OpenVINO's AvgPool would count
        # both. Padding with real zeros and excluding pads gives onnxruntime's divisor.
        return _avg_pool_over_padded_input(ctx, x, attrs)
    return AvgPool([x], **attrs).output(0)


def _avg_pool_over_padded_input(ctx, x, attrs: dict[str, Any]):
    """Zeros padded into the data, then pads excluded from the divisor: padding counts, the
    ceil overhang does not."""
    n = len(attrs["kernel"])
    pb, pe = attrs["pads_begin"], attrs["pads_end"]
    padded = _make_pad(x, pb, pe)
    attrs = dict(attrs, pads_begin=[0] * n, pads_end=[0] * n)
    attrs["exclude-pad"] = True
    ps = x.partial_shape
    if ps.rank_is_static and all(d.is_static for d in list(ps)[2:]):
        # Static sizes: the overhang becomes excluded end padding under floor rounding, which
        # also keeps onnxruntime's rule that the last window starts before the end padding.
        sizes = [d.min for d in list(ps)[2:]]
        _, _, extra, outs = pool_geometry(sizes, attrs["kernel"], attrs["strides"], [1] * n, pb,
                                          pe, "explicit", True)
        full = [i + b + e for i, b, e in zip(sizes, pb, pe)]
        got = [window_count(f, k, s, 0, x_) for f, k, s, x_ in
               zip(full, attrs["kernel"], attrs["strides"], extra)]
        if got != outs:
            ctx.error("count_include_pad with ceil_mode where a whole window lies in the end "
                      "padding")
        attrs.update(pads_end=extra, rounding_type="floor")
    return AvgPool([padded], **attrs).output(0)


def _dilated_avg_pool(ctx, x, attrs: dict[str, Any], dilations: list[int], include_pad: bool):
    """AvgPool has no dilations: sum with a depthwise all-ones GroupConvolution, then scale by
    the reciprocal of each window's element count, computed here from the static shape."""
    ps = x.partial_shape
    if not ps.is_static or x.element_type.dtype is None:
        ctx.error(f"dilations need a static input shape, got {ps}")
    shape = ps.to_shape()
    kernel, strides = attrs["kernel"], attrs["strides"]
    if len(dilations) != len(kernel):
        ctx.error(f"dilations {dilations} do not match kernel_shape {kernel}")
    sizes = shape[2:]
    pb, pe, extra, outs = pool_geometry(sizes, kernel, strides, dilations, attrs["pads_begin"],
                                        attrs["pads_end"], attrs["auto_pad"],
                                        attrs["rounding_type"] == "ceil")
    end = [e + x_ for e, x_ in zip(pe, extra)]
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if [window_count(i, e, s, b, p) for i, e, s, b, p in zip(sizes, extents, strides, pb, end)] \
            != outs:
        ctx.error("ceil_mode drops a window that lies in the end padding")
    dtype = x.element_type.dtype
    ones = np.ones((shape[1], 1, 1) + tuple(kernel), dtype=dtype)
    total = GroupConvolution([x, to_output(ones)], strides=strides, dilations=dilations,
                             pads_begin=pb, pads_end=end)
    mask = pad_spatial(np.ones(sizes, dtype=np.float64), pb, pe, 1.0 if include_pad else 0.0)
    mask = pad_spatial(mask, [0] * len(sizes), extra)
    count = _crop_windows(windows(mask, kernel, strides, dilations), 0, outs).sum(
        axis=tuple(range(len(sizes), 2 * len(sizes))))
    scale = (1.0 / np.maximum(count, 1)).astype(dtype).reshape((1, 1) + tuple(outs))
    return Multiply([total.output(0), to_output(scale)]).output(0)


def _make_pad(x, pads_begin: list[int], pads_end: list[int]):
    begin = to_output(np.asarray([0, 0] + list(pads_begin), dtype=np.int64))
    end = to_output(np.asarray([0, 0] + list(pads_end), dtype=np.int64))
    return Pad([x, begin, end], pad_mode="constant").output(0)


def _import_global(ctx, reduce_cls: type):
    x = ctx.inputs[0]
    ps = x.partial_shape
    if not ps.rank_is_static or len(ps) < 3:
        ctx.error(f"needs data of static rank >= 3, got {ps}")
    axes = list(range(2, len(ps)))
    return reduce_cls([x, to_output(np.asarray(axes, dtype=np.int64))], keep_dims=True).output(0)


@onnx_rule("GlobalAveragePool")
def _import_global_avg_pool(ctx):
    return _import_global(ctx, ReduceMean)


@onnx_rule("GlobalMaxPool")
def _import_global_max_pool(ctx):
    return _import_global(ctx, ReduceMax)


# -- ONNX export -----------------------------------------------------------------------------
def _onnx_pool_export_attrs(node: Node, dilations: Sequence[int]) -> dict[str, Any]:
    extents = [(k - 1) * d + 1 for k, d in zip(node.kernel, dilations)]
    attrs = onnx_window_export_attrs(node, extents)
    attrs.update(kernel_shape=list(node.kernel), ceil_mode=int(node.rounding_type == "ceil"))
    return attrs


@onnx_export(MaxPool)
def _export_max_pool(node, ectx):
    attrs = _onnx_pool_export_attrs(node, node.dilations)
    attrs["dilations"] = list(node.dilations)
    outs = ectx.outputs(node)
    if not node.output(1).consumers():
        ectx.add_node("MaxPool", ectx.inputs(node), outs[:1], **attrs)
        return
    if node.axis != 0:
        raise UnsupportedOpError(node.type_name, node_name=node.friendly_name,
                                 reason="ONNX indices count over the whole tensor; "
                                        f"axis={node.axis}")
    if node.index_element_type == "i64":
        ectx.add_node("MaxPool", ectx.inputs(node), outs, **attrs)
        return
    wide = ectx.fresh(f"{node.friendly_name}/indices_i64")
    ectx.add_node("MaxPool", ectx.inputs(node), [outs[0], wide], **attrs)
    import onnx
    ectx.add_node("Cast", [wide], [outs[1]], to=onnx.TensorProto.INT32)


@onnx_export(AvgPool)
def _export_avg_pool(node, ectx):
    attrs = _onnx_pool_export_attrs(node, [1] * len(node.kernel))
    attrs["count_include_pad"] = int(not node.exclude_pad)
    inputs = ectx.inputs(node)
    if not node.exclude_pad and node.rounding_type == "ceil" and any(attrs.get("pads", [])):
        inputs, attrs = _export_padded_avg_pool(node, ectx, inputs[0], attrs)
    ectx.add_node("AveragePool", inputs, ectx.outputs(node), **attrs)


def _export_padded_avg_pool(node, ectx, name: str, attrs: dict[str, Any]):
    """OpenVINO divides by the whole kernel even over the ceil overhang, onnxruntime does not:
    pad pads and overhang with real zeros and pool without padding."""
    data = node.get_input_partial_shape(0)
    if not data.is_static:
        raise UnsupportedOpError(node.type_name, node_name=node.friendly_name,
                                 reason="ONNX export of ceil rounding with counted padding needs "
                                        f"a static input shape, got {data}")
    n = len(node.kernel)
    sizes = data.to_shape()[2:]
    pb, pe, extra, outs = pool_geometry(sizes, node.kernel, node.strides, [1] * n,
                                        node.pads_begin, node.pads_end, node.auto_pad, True)
    full = [i + b + e + x for i, b, e, x in zip(sizes, pb, pe, extra)]
    if [window_count(f, k, s, 0, 0) for f, k, s in zip(full, node.kernel, node.strides)] != outs:
        raise UnsupportedOpError(node.type_name, node_name=node.friendly_name,
                                 reason="ceil rounding drops a window that lies in the padding")
    padded = ectx.fresh(f"{node.friendly_name}/padded")
    pads = [0, 0] + list(pb) + [0, 0] + [e + x for e, x in zip(pe, extra)]
    ectx.add_node("Pad", [name, ectx.constant(np.asarray(pads, dtype=np.int64))], [padded])
    attrs = dict(attrs, pads=[0] * (2 * n), ceil_mode=0, count_include_pad=0)
    return [padded], attrs
