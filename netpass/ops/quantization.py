"""Quantization: OpenVINO's FakeQuantize, and the linear quantization of ONNX: QuantizeLinear
and DequantizeLinear (opsets 10-28: per-tensor, per-axis and blocked scales, integer, float8
and 4/2-bit targets, ``saturate``, ``precision``, ``output_dtype``) and DynamicQuantizeLinear,
kept whole as ONNX defines them (OpenVINO's ONNX frontend turns them into FakeQuantize, which
does not cover the float8 and blocked forms).
MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv are compositions: integer MatMul or
Convolution of zero-point-shifted values, then (QLinear*) a requantization by QuantizeLinear.
FakeQuantize (OpenVINO opset1) is what quantized IR holds (NNCF's INT8 models): read and
written in IR v11 and run as an elementwise kernel; ONNX has no such op, so export refuses it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..core.types import FLOAT8, Type, convert_values, f32, i32, is_float_dtype, u8
from .base import NETPASS_OPSET, merged_input_type, set_name, to_output
from .convolution import Convolution, GroupConvolution
from .convolution.common import _group_filters, reshape_to
from .convolution.window import onnx_spatial_rank, onnx_window_attrs
from .elementwise import Add, Convert, Divide, Multiply, Subtract
from .matmul import MatMul
from .onnx_types import onnx_element_type, onnx_type_code, type_opset
from .registry import export_error, onnx_export, onnx_rule

__all__ = ["fake_quantize", "quantize_linear", "dequantize_linear", "dynamic_quantize_linear"]

# Integer targets and the range results saturate to
INTEGER_RANGES = {"u8": (0, 255), "i8": (-128, 127), "u16": (0, 65535), "i16": (-32768, 32767),
                  "u4": (0, 15), "i4": (-8, 7), "u2": (0, 3), "i2": (-2, 1), "i32": None}


def _broadcast_param(value: np.ndarray, shape: tuple[int, ...], axis: int,
                     block_size: int) -> np.ndarray:
    """A scale or zero point made broadcastable to ``shape``: a scalar as is, a 1-D tensor
    along ``axis`` (per-axis), or blocks of ``block_size`` along ``axis`` (blocked)."""
    if value.ndim == 0 or value.size == 1 and not block_size:
        return value.reshape(())
    if not block_size:
        dims = [1] * len(shape)
        dims[axis] = value.size
        return value.reshape(dims)
    return np.repeat(value, block_size, axis=axis)[
        tuple(slice(0, n) if i == axis else slice(None) for i, n in enumerate(shape))]


def _one_value(ps: PartialShape) -> bool:
    """A scalar, or a 1-D tensor of one element (both mean per-tensor)."""
    return len(ps) == 0 or (len(ps) == 1 and ps[0].is_static and ps[0].min == 1)


class FakeQuantize(Node):
    """OpenVINO FakeQuantize-1: inputs ``(x, input_low, input_high, output_low, output_high)``,
    broadcast together (``auto_broadcast`` "numpy", or "none": equal shapes). ``x`` at or below
    ``min(input_low, input_high)`` gives ``output_low``, above ``max(...)`` ``output_high``;
    between, ``round((x - input_low) / (input_high - input_low) * (levels - 1)) /
    (levels - 1) * (output_high - output_low) + output_low`` (round half to even)."""

    type_name = "FakeQuantize"
    version = "opset1"
    ATTRS = {"levels": 256, "auto_broadcast": "numpy"}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 5, "expects inputs (x, input_low, input_high, "
                   "output_low, output_high), got {}", self.get_input_size())
        self.check(int(self.levels) >= 2, "levels must be at least 2, got {}", self.levels)
        mode = str(self.auto_broadcast).lower()
        self.check(mode in ("numpy", "none"), "auto_broadcast must be numpy or none, got {}",
                   self.auto_broadcast)
        et = merged_input_type(self)
        self.check(et.is_dynamic or et.is_real, "FakeQuantize needs float inputs, got {}", et)
        shape: PartialShape | None = self.get_input_partial_shape(0)
        for i in range(1, 5):
            other = self.get_input_partial_shape(i)
            if mode == "none":
                self.check(shape is not None and shape.compatible(other), "input {} shape {} "
                           "differs from x's {} (auto_broadcast none)", i, other, shape)
            elif shape is not None:
                shape = shape.broadcast_merge(other)
            self.check(shape is not None, "input {} shape {} does not broadcast with x's {}",
                       i, other, self.get_input_partial_shape(0))
        assert shape is not None
        self.set_output_type(0, et, shape)

    def evaluate(self, inputs):
        x, il, ih, ol, oh = (np.asarray(a) for a in inputs)
        steps = x.dtype.type(int(self.levels) - 1)
        with np.errstate(all="ignore"):
            q = np.rint((x - il) / (ih - il) * steps) / steps * (oh - ol) + ol
            out = np.where(x <= np.minimum(il, ih), ol,
                           np.where(x > np.maximum(il, ih), oh, q))
        return [np.broadcast_to(out, np.broadcast_shapes(*(a.shape for a in inputs)))
                .astype(x.dtype)]


def fake_quantize(x: Any, input_low: Any, input_high: Any, output_low: Any, output_high: Any,
                  levels: int, auto_broadcast: str = "numpy", name: str | None = None) -> Node:
    """OpenVINO FakeQuantize-1 (see :class:`FakeQuantize`)."""
    data = to_output(x)
    dtype = data.element_type.dtype or np.float32
    bounds = [to_output(b if not isinstance(b, (int, float)) else np.array(b, dtype))
              for b in (input_low, input_high, output_low, output_high)]
    return set_name(FakeQuantize([data, *bounds], levels=int(levels),
                                 auto_broadcast=auto_broadcast), name)


@onnx_export(FakeQuantize)
def _export_fake_quantize(node, ectx):
    export_error(node, "ONNX has no FakeQuantize (QuantizeLinear/DequantizeLinear pairs cover "
                 "only its 256-level integer forms)")


class _Linear(Node):
    """Inputs ``(x, scale[, zero_point])``; attributes ``axis`` (per-axis and blocked
    granularity) and ``block_size`` (0: not blocked)."""

    version = NETPASS_OPSET

    def _check_params(self) -> None:
        self.check(self.get_input_size() in (2, 3), "expects inputs (x, scale[, zero_point])")
        x = self.get_input_partial_shape(0)
        scale = self.get_input_partial_shape(1)
        self.check(self.block_size >= 0, "block_size must be >= 0, got {}", self.block_size)
        if self.get_input_size() == 3:
            zp = self.get_input_partial_shape(2)
            self.check(zp.compatible(scale) or (_one_value(zp) and _one_value(scale)),
                       "zero_point shape {} differs from scale shape {}", zp, scale)
        per_tensor = scale.rank_is_static and _one_value(scale) and not self.block_size
        if x.rank_is_static and scale.rank_is_static and not per_tensor:
            self.check(-len(x) <= self.axis < len(x), "axis {} out of range for rank {}",
                       self.axis, len(x))
            if self.block_size:
                self.check(len(scale) == len(x), "blocked scale {} must have x's rank {}",
                           scale, len(x))
            else:
                self.check(len(scale) <= 1, "scale must be a scalar or 1-D without block_size, "
                           "got {}", scale)

    def _params(self, inputs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
        x = inputs[0]
        axis = self.axis % max(x.ndim, 1)
        scale = _broadcast_param(np.asarray(inputs[1]), x.shape, axis, self.block_size)
        zp = None
        if len(inputs) > 2:
            zp = _broadcast_param(np.asarray(inputs[2]), x.shape, axis, self.block_size)
        return scale, zp


class QuantizeLinear(_Linear):
    """``y = saturate(round_half_even(x / scale) + zero_point)`` in ``output_type`` (the zero
    point's type; u8 without one). ``precision``: the type the division runs in (the scale's
    by default). Float8 targets saturate unless ``saturate`` is False."""

    type_name = "QuantizeLinear"
    ATTRS = {"axis": 1, "block_size": 0, "saturate": True, "output_type": None,
             "precision": None}

    def infer_types(self) -> None:
        self._check_params()
        out = Type.of(self.output_type) if self.output_type is not None else None
        if self.get_input_size() == 3:
            zt = self.get_input_element_type(2)
            self.check(out is None or zt.is_dynamic or zt is out,
                       "output type {} differs from the zero point's {}", out, zt)
            out = zt if out is None else out
        out = out or u8
        self.check(out.is_dynamic or out.name in INTEGER_RANGES or out in FLOAT8 or
                   out.name == "f4e2m1", "{} is not a quantized type", out)
        self.set_output_type(0, out, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        scale, zp = self._params(inputs)
        out = self.get_output_element_type(0)
        with np.errstate(all="ignore"):
            if self.precision is not None:
                dt = Type.of(self.precision).dtype
                q = x.astype(dt) / scale.astype(dt)
            else:
                q = x / scale
            if out.name in INTEGER_RANGES:
                qi = np.rint(q).astype(np.int64)
                if zp is not None:
                    qi = qi + zp.astype(np.int64)
                lo, hi = INTEGER_RANGES[out.name]
                return [np.clip(qi, lo, hi).astype(out.dtype)]
            if zp is not None:
                q = q + zp.astype(np.float32)
            return [convert_values(q.astype(np.float32), out, saturate=self.saturate)]


class DequantizeLinear(_Linear):
    """``y = (x - zero_point) * scale`` in ``output_type`` (the scale's type by default)."""

    type_name = "DequantizeLinear"
    ATTRS = {"axis": 1, "block_size": 0, "output_type": None}

    def infer_types(self) -> None:
        self._check_params()
        st = self.get_input_element_type(1)
        self.check(st.is_dynamic or st.is_real, "scale must be a float tensor, got {}", st)
        out = Type.of(self.output_type) if self.output_type is not None else st
        self.set_output_type(0, out, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        scale, zp = self._params(inputs)
        wide = x.astype(np.float32)
        if zp is not None and not (is_float_dtype(x.dtype)):
            wide = wide - zp.astype(np.float32)
        y = wide * scale
        return [convert_values(np.asarray(y), self.get_output_element_type(0))]


class DynamicQuantizeLinear(Node):
    """u8 quantization with the scale and zero point taken from the data's range (which always
    includes 0): outputs ``(y, scale, zero_point)``."""

    type_name = "DynamicQuantizeLinear"
    version = NETPASS_OPSET

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et is f32, "x must be f32, got {}", et)
        self.set_output_type(0, u8, self.get_input_partial_shape(0))
        self.set_output_type(1, f32, PartialShape([]))
        self.set_output_type(2, u8, PartialShape([]))

    def evaluate(self, inputs):
        x = inputs[0]
        hi = np.float32(max(0.0, float(np.max(x)) if x.size else 0.0))
        lo = np.float32(min(0.0, float(np.min(x)) if x.size else 0.0))
        scale = np.float32((hi - lo) if hi != lo else 1.0) / np.float32(255)
        zp = np.rint(np.clip(np.float32(0) - lo / scale, 0, 255))
        y = np.clip(np.rint(x / scale) + zp, 0, 255)
        return [y.astype(np.uint8), np.asarray(scale, np.float32), np.asarray(zp, np.uint8)]


# -- factories ---------------------------------------------------------------------------------

def quantize_linear(x: Any, scale: Any, zero_point: Any = None, axis: int = 1,
                    block_size: int = 0, saturate: bool = True, output_type: Any = None,
                    precision: Any = None, name: str | None = None) -> Node:
    """QuantizeLinear (ONNX): ``saturate(round(x / scale) + zero_point)`` to ``output_type``
    (default: the type of ``zero_point``, else u8); ``scale`` and ``zero_point`` are per tensor, per
    ``axis`` or in blocks of ``block_size`` along it; ``saturate`` applies to float8 targets;
    ``precision`` is the type the division is done in."""
    ins = [to_output(x), to_output(scale)] + ([to_output(zero_point)] if zero_point is not None
                                              else [])
    return set_name(QuantizeLinear(ins, axis=axis, block_size=block_size, saturate=saturate,
                                   output_type=output_type, precision=precision), name)


def dequantize_linear(x: Any, scale: Any, zero_point: Any = None, axis: int = 1,
                      block_size: int = 0, output_type: Any = None,
                      name: str | None = None) -> Node:
    """DequantizeLinear (ONNX): ``(x - zero_point) * scale``. ``scale`` (and ``zero_point``,
    default 0) is a scalar (per tensor), a vector along ``axis`` (per axis), or blocks of
    ``block_size`` along ``axis``; ``output_type`` (default: the type of ``scale``)."""
    ins = [to_output(x), to_output(scale)] + ([to_output(zero_point)] if zero_point is not None
                                              else [])
    return set_name(DequantizeLinear(ins, axis=axis, block_size=block_size,
                                     output_type=output_type), name)


def dynamic_quantize_linear(x: Any, name: str | None = None) -> Node:
    """DynamicQuantizeLinear (ONNX): quantizes float ``x`` to u8 with the scale and zero point
    computed from its min and max (0 included); outputs (y, scale, zero_point)."""
    return set_name(DynamicQuantizeLinear([to_output(x)]), name)


# -- ONNX import -------------------------------------------------------------------------------

def _dtype_attr(ctx: Any, name: str) -> Type | None:
    code = ctx.attr(name, 0)
    return onnx_element_type(code, ctx.name) if code else None


def _import_quantize(ctx: Any):
    x, scale, zp = ctx.inputs[0], ctx.inputs[1], ctx.input(2)
    return QuantizeLinear([v for v in (x, scale, zp) if v is not None],
                          axis=ctx.attr("axis", 1), block_size=ctx.attr("block_size", 0),
                          saturate=bool(ctx.attr("saturate", 1)),
                          output_type=_dtype_attr(ctx, "output_dtype"),
                          precision=_dtype_attr(ctx, "precision"))


def _import_dequantize(ctx: Any):
    x, scale, zp = ctx.inputs[0], ctx.inputs[1], ctx.input(2)
    return DequantizeLinear([v for v in (x, scale, zp) if v is not None],
                            axis=ctx.attr("axis", 1), block_size=ctx.attr("block_size", 0),
                            output_type=_dtype_attr(ctx, "output_dtype"))


# One rule each: later versions add types and attributes with defaults that keep the earlier
# meaning (opset 10 has no axis attribute; its per-tensor scale makes axis irrelevant).
onnx_rule("QuantizeLinear", since=10)(_import_quantize)
onnx_rule("DequantizeLinear", since=10)(_import_dequantize)
onnx_rule("DynamicQuantizeLinear", since=11)(lambda ctx: DynamicQuantizeLinear(
    ctx.inputs[:1]).outputs())


def _shifted(ctx: Any, v: Output, zp: Output | None, lead: int = 0, per_row: bool = False
             ) -> Output:
    """``v - zero_point`` in i32; a 1-D zero point applies along axis ``lead`` (a per-row
    zero point of a matrix: ``[M] -> [M, 1]``)."""
    wide = Convert([v], destination_type=i32).output(0)
    if zp is None:
        return wide
    z = Convert([zp], destination_type=i32).output(0)
    ps = zp.partial_shape
    if ps.rank_is_static and len(ps) == 1 and not (ps[0].is_static and ps[0].min == 1):
        rank = v.partial_shape.rank.get_length() if v.partial_shape.rank_is_static else 2
        if per_row:
            z = reshape_to(ctx, z, [-1, 1])
        elif lead >= 0:
            z = reshape_to(ctx, z, [-1] + [1] * (rank - 1 - lead))
    return Subtract([wide, z]).output(0)


@onnx_rule("MatMulInteger", since=10)
def _import_matmul_integer(ctx):
    a, b, azp, bzp = ctx.inputs[0], ctx.inputs[1], ctx.input(2), ctx.input(3)
    return MatMul([_shifted(ctx, a, azp, per_row=True), _shifted(ctx, b, bzp, lead=-1)])


def _integer_conv(ctx: Any, x: Output, xzp: Output | None, w: Output,
                  wzp: Output | None) -> Output:
    n = onnx_spatial_rank(ctx, w.partial_shape, x.partial_shape)
    attrs = onnx_window_attrs(ctx, n)
    xi = _shifted(ctx, x, xzp)
    wi = _shifted(ctx, w, wzp, lead=0)  # a 1-D weight zero point: per output channel
    groups = ctx.attr("group", 1)
    if groups == 1:
        return Convolution([xi, wi], **attrs).output(0)
    return GroupConvolution([xi, _group_filters(ctx, wi, groups)], **attrs).output(0)


@onnx_rule("ConvInteger", since=10)
def _import_conv_integer(ctx):
    return _integer_conv(ctx, ctx.inputs[0], ctx.input(2), ctx.inputs[1], ctx.input(3))


def _requantize(acc: Output, scale: Output, y_scale: Output, y_zp: Output | None,
                out_type: Type) -> Output:
    """``saturate(round(acc * scale / y_scale) + y_zp)``: QuantizeLinear of the f32 product."""
    real = Multiply([Convert([acc], destination_type=f32).output(0),
                     Divide([Convert([scale], destination_type=f32).output(0),
                             Convert([y_scale], destination_type=f32).output(0)]).output(0)])
    one = to_output(np.float32(1.0))
    ins = [real.output(0), one] + ([y_zp] if y_zp is not None else [])
    return QuantizeLinear(ins, output_type=None if y_zp is not None else out_type).output(0)


@onnx_rule("QLinearMatMul", since=10)
def _import_qlinear_matmul(ctx):
    a, a_s, azp, b, b_s, bzp, y_s, yzp = (ctx.input(i) for i in range(8))
    if not (a.element_type.is_integral and b.element_type.is_integral):
        ctx.error("float8 QLinearMatMul is not supported")
    acc = MatMul([_shifted(ctx, a, azp, per_row=True), _shifted(ctx, b, bzp, lead=-1)]).output(0)
    scale = Multiply([a_s, reshape_to(ctx, b_s, [1, -1]) if _is_vector(b_s) else b_s]).output(0)
    return _requantize(acc, scale, y_s, yzp, a.element_type)


@onnx_rule("QLinearConv", since=10)
def _import_qlinear_conv(ctx):
    x, x_s, xzp, w, w_s, wzp, y_s, yzp, bias = (ctx.input(i) for i in range(9))
    acc = _integer_conv(ctx, x, xzp, w, wzp)
    n = onnx_spatial_rank(ctx, w.partial_shape, x.partial_shape)
    if bias is not None:
        acc = Add([acc, reshape_to(ctx, Convert([bias], destination_type=i32).output(0),
                                   [1, -1] + [1] * n)]).output(0)
    w_scale = reshape_to(ctx, w_s, [1, -1] + [1] * n) if _is_vector(w_s) else w_s
    scale = Multiply([x_s, w_scale]).output(0)
    return _requantize(acc, scale, y_s, yzp, x.element_type)


def _is_vector(v: Output) -> bool:
    ps = v.partial_shape
    return ps.rank_is_static and len(ps) == 1 and not (ps[0].is_static and ps[0].min == 1)


# -- ONNX export -------------------------------------------------------------------------------

def _linear_opset(node: Node) -> int:
    need = 13 if node.axis != 1 else 10
    if node.block_size:
        need = max(need, 21)
    types = [node.get_output_element_type(0), node.get_input_element_type(0)]
    need = max([need] + [type_opset(t) for t in types])
    if any(t in FLOAT8 for t in types):
        need = max(need, 19)
    if getattr(node, "precision", None) is not None:
        need = max(need, 23)
    if getattr(node, "output_type", None) is not None:
        need = max(need, 21 if isinstance(node, QuantizeLinear) else 23)
    return need


@onnx_export(QuantizeLinear, opset=_linear_opset)
def _export_quantize(node, ectx):
    attrs: dict[str, Any] = {"axis": int(node.axis)}
    if node.block_size:
        attrs["block_size"] = int(node.block_size)
    if not node.saturate:
        attrs["saturate"] = 0
    if node.output_type is not None:
        attrs["output_dtype"] = onnx_type_code(Type.of(node.output_type), node.friendly_name)
    if node.precision is not None:
        attrs["precision"] = onnx_type_code(Type.of(node.precision), node.friendly_name)
    ectx.add_node("QuantizeLinear", ectx.inputs(node), ectx.outputs(node), **attrs)


@onnx_export(DequantizeLinear, opset=_linear_opset)
def _export_dequantize(node, ectx):
    attrs: dict[str, Any] = {"axis": int(node.axis)}
    if node.block_size:
        attrs["block_size"] = int(node.block_size)
    if node.output_type is not None:
        attrs["output_dtype"] = onnx_type_code(Type.of(node.output_type), node.friendly_name)
    ectx.add_node("DequantizeLinear", ectx.inputs(node), ectx.outputs(node), **attrs)


@onnx_export(DynamicQuantizeLinear)
def _export_dynamic_quantize(node, ectx):
    ectx.add_node("DynamicQuantizeLinear", ectx.inputs(node), ectx.outputs(node))
