"""Convolution and GroupConvolution (ONNX Conv)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node
from ...core.shape import PartialShape
from ..base import merged_input_type, set_name, to_output
from ..registry import onnx_export, onnx_rule
from .common import (
    _conv_attrs,
    _ConvBase,
    _export_filters,
    _group_filters,
    _static_filter_shape,
    add_channel_bias,
)
from .window import (
    conv_nd,
    onnx_spatial_rank,
    onnx_window_attrs,
    onnx_window_export_attrs,
    resolve_pads,
    window_output_dims,
)

__all__ = ["convolution", "group_convolution"]


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


def convolution(data: Any, filters: Any, strides: Any, pads_begin: Any, pads_end: Any,
                dilations: Any, auto_pad: str = "explicit", name: str | None = None) -> Node:
    """Convolution-1: ``data`` ``[N, C_in, *spatial]`` convolved with ``filters`` ``[C_out, C_in,
    *kernel]`` (cross-correlation, no bias). ``strides``, ``dilations``, ``pads_begin`` /
    ``pads_end`` are per spatial dim; ``auto_pad`` ("explicit", "valid", "same_upper",
    "same_lower") overrides the pads."""
    return set_name(Convolution([to_output(data), to_output(filters)],
                                **_conv_attrs(strides, pads_begin, pads_end, dilations, auto_pad)),
                    name)


def group_convolution(data: Any, filters: Any, strides: Any, pads_begin: Any, pads_end: Any,
                      dilations: Any, auto_pad: str = "explicit", name: str | None = None) -> Node:
    """GroupConvolution-1: ``data`` ``[N, G * C_in, *spatial]`` split into G groups, each
    convolved with its slice of ``filters`` ``[G, C_out, C_in, *kernel]``; attributes as
    :func:`convolution`."""
    return set_name(GroupConvolution([to_output(data), to_output(filters)],
                                     **_conv_attrs(strides, pads_begin, pads_end, dilations,
                                                   auto_pad)), name)


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
