"""ConvolutionBackpropData and GroupConvolutionBackpropData (ONNX ConvTranspose)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node, Output
from ...core.shape import PartialShape
from ...errors import UnsupportedOpError
from ..base import merged_input_type, set_name, to_output
from ..registry import onnx_export, onnx_rule
from .common import (
    _conv_attrs,
    _ConvBase,
    _export_filters,
    _group_filters,
    _ints,
    _static_filter_shape,
    add_channel_bias,
)
from .window import conv_transpose_nd, map_dim, onnx_spatial_rank, onnx_window_attrs, spatial_list

__all__ = ["convolution_backprop_data", "group_convolution_backprop_data"]


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
        self.check(self.get_input_size() in (2, 3),
                   "expects inputs (data, filters[, output_shape])")
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

    def _spatial_from_input(self, dims: list[Dimension],
                            kernel: list[Dimension]) -> list[Dimension]:
        out = []
        for i, d in enumerate(dims):
            s, dil, op = self.strides[i], self.dilations[i], self.output_padding[i]
            k = kernel[i]
            if not k.is_static:
                out.append(Dimension())
                continue
            # As in OpenVINO, auto_pad without output_shape means no padding.
            pb, pe = (self.pads_begin[i], self.pads_end[i]) if self.auto_pad == "explicit" else (0,
                                                                                                 0)
            extra = dil * (k.min - 1) + 1 + op - pb - pe
            fn = (lambda v, s=s, extra=extra: s * (v - 1) + extra if v > 0 else 0)  # noqa: E731
            if d.is_static:
                size = fn(d.min)
                self.check(size >= 1,
                           f"transposed convolution gives spatial size {size} on axis {i}")
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
    """ConvolutionBackpropData-1 (transposed convolution): ``data`` ``[N, C_in, *spatial]``,
    ``filters`` ``[C_in, C_out, *kernel]``; ``strides``, ``pads_begin`` / ``pads_end`` (cropped
    from the output), ``dilations``, ``output_padding`` per spatial dim; ``output_shape`` (the
    spatial output size, optional) or ``auto_pad`` fix the output size instead of the pads."""
    return _backprop(ConvolutionBackpropData, data, filters, strides, output_shape, pads_begin,
                     pads_end, dilations, auto_pad, output_padding, name)


def group_convolution_backprop_data(data: Any, filters: Any, strides: Any,
                                    output_shape: Any = None, pads_begin: Any = None,
                                    pads_end: Any = None, dilations: Any = None,
                                    auto_pad: str | None = None, output_padding: Any = None,
                                    name: str | None = None) -> Node:
    """GroupConvolutionBackpropData-1: the grouped transposed convolution, ``filters`` ``[G,
    C_in, C_out, *kernel]``; arguments as :func:`convolution_backprop_data`."""
    return _backprop(GroupConvolutionBackpropData, data, filters, strides, output_shape,
                     pads_begin, pads_end, dilations, auto_pad, output_padding, name)


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
