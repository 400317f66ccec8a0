"""onnxruntime's quantized contrib ops, as its quantization tools write them in the QOperator
format (``quantize_static(quant_format=QuantFormat.QOperator)``) and as its graph optimizer
fuses dynamic quantization: QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat, QLinearSoftmax, QLinearWhere,
QGemm, DynamicQuantizeMatMul, MatMulIntegerToFloat and the contrib-domain QuantizeLinear /
DequantizeLinear.

Each QLinear op is DequantizeLinear of its inputs, the float op (its standard import rule where
there is one), and QuantizeLinear of the result (round half to even, saturating): the meaning
onnxruntime's CPU kernels compute, up to the float rounding of their fused scale ratios (at
most one quantum apart). The integer products (QGemm, MatMulIntegerToFloat,
DynamicQuantizeMatMul) accumulate zero-point-shifted i32 values exactly and scale once, as
onnxruntime does.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np

from ...core.node import Output
from ...core.types import f32, i32
from ..base import to_output
from ..elementwise import Add, Convert, Divide, Floor, Multiply, Select
from ..indexing import gather
from ..matmul import MatMul
from ..movement import Concat, Transpose
from ..quantization import (
    DequantizeLinear,
    DynamicQuantizeLinear,
    QuantizeLinear,
    _import_dequantize,
    _import_quantize,
    _requantize,
    _shifted,
)
from ..reduction import ReduceProd, ReduceSum
from ..registry import find_onnx_rule, onnx_rule
from ..shape_ops import shape_of
from .common import MS, static_rank_of

# The contrib-domain versions read as the standard ones: their only attribute is ``axis``
# (per-axis scales), which the standard rules read with the same default.
onnx_rule("QuantizeLinear", domain=MS)(_import_quantize)
onnx_rule("DequantizeLinear", domain=MS)(_import_dequantize)


def _per_tensor(ctx: Any, i: int) -> Output | None:
    """Input ``i`` (a scale or zero point), which these ops take per tensor only."""
    v = ctx.input(i)
    if v is None:
        return None
    ps = v.partial_shape
    if not ps.rank_is_static or len(ps) > 1 or (len(ps) == 1 and not (
            ps[0].is_static and ps[0].get_length() == 1)):
        ctx.error(f"input {i} ('{ctx.proto.input[i]}') must be a per-tensor scalar, got {ps}")
    return v


def _present(ctx: Any, i: int, what: str) -> Output:
    """Input ``i`` (``what``), which the op needs."""
    v = ctx.input(i)
    if v is None:
        ctx.error(f"input {i} ({what}) is missing")
    assert v is not None
    return v


def _scale(ctx: Any, i: int) -> Output:
    """Input ``i``, a per-tensor scale the op needs."""
    _present(ctx, i, "a scale")
    v = _per_tensor(ctx, i)
    assert v is not None
    return v


def _quantized(ctx: Any, i: int) -> Output:
    """Input ``i``, which must be 8-bit integer data (onnxruntime's kernels take u8 and i8)."""
    x = _present(ctx, i, "quantized data")
    et = x.element_type
    if not et.is_dynamic and et.name not in ("u8", "i8"):
        ctx.error(f"input {i} ('{ctx.proto.input[i]}') must be u8 or i8, got {et}")
    return x


def _dq(ctx: Any, i: int) -> Output:
    """Inputs ``i, i+1, i+2`` (data, scale, optional zero point) dequantized to float."""
    x = _quantized(ctx, i)
    return _dequantize(x, _scale(ctx, i + 1), _per_tensor(ctx, i + 2))


def _dequantize(x: Output, scale: Output, zp: Output | None, axis: int = 1) -> Output:
    return DequantizeLinear([x, scale, *([zp] if zp is not None else [])], axis=axis).output(0)


def _q(ctx: Any, y: Output, i: int, like: Output, scale: Output | None = None) -> Output:
    """``y`` quantized with the scale (or ``scale``) and optional zero point at inputs ``i,
    i+1``, in ``like``'s type when the zero point is omitted."""
    scale = scale if scale is not None else _scale(ctx, i)
    zp = _per_tensor(ctx, i + 1)
    ins = [y, scale] + ([zp] if zp is not None else [])
    return QuantizeLinear(ins, output_type=None if zp is not None else like.element_type
                          ).output(0)


def _with_inputs(ctx: Any, inputs: list[Output]) -> Any:
    """``ctx`` seen with ``inputs`` in place of its own: a standard float op's import rule reads
    the node's attributes through it."""
    view = copy.copy(ctx)
    view.inputs = inputs
    return view


def _binary(ctx: Any, cls: type) -> Output:
    y = cls([_dq(ctx, 0), _dq(ctx, 3)]).output(0)
    return _q(ctx, y, 6, ctx.inputs[0])


@onnx_rule("QLinearAdd", domain=MS)
def _import_qlinear_add(ctx):
    return _binary(ctx, Add)


@onnx_rule("QLinearMul", domain=MS)
def _import_qlinear_mul(ctx):
    return _binary(ctx, Multiply)


def _unary(ctx: Any, op_type: str) -> Output:
    """The float ``op_type`` (its standard rule, reading this node's attributes) between a
    dequantization of inputs 0-2 and a quantization by inputs 3-4."""
    rule = find_onnx_rule(op_type, ctx.opset)
    assert rule is not None
    y = to_output(rule(_with_inputs(ctx, [_dq(ctx, 0)])))
    return _q(ctx, y, 3, ctx.inputs[0])


@onnx_rule("QLinearSigmoid", domain=MS)
def _import_qlinear_sigmoid(ctx):
    return _unary(ctx, "Sigmoid")


@onnx_rule("QLinearLeakyRelu", domain=MS)
def _import_qlinear_leaky_relu(ctx):
    return _unary(ctx, "LeakyRelu")


def _channels_last(ctx: Any, x: Output, to_first: bool) -> Output:
    """``x`` ([N, *spatial, C] <-> [N, C, *spatial]) when the node is ``channels_last``."""
    if not ctx.attr("channels_last", 0):
        return x
    r = static_rank_of(ctx, x, "X", tuple(range(3, 9)))
    perm = [0, r - 1, *range(1, r - 1)] if to_first else [0, *range(2, r), 1]
    return Transpose([x, to_output(np.asarray(perm, np.int64))]).output(0)


@onnx_rule("QLinearGlobalAveragePool", domain=MS)
def _import_qlinear_global_avg_pool(ctx):
    """``saturate(round(sum(x - x_zp) * (x_scale / (y_scale * n))) + y_zp)`` over the ``n``
    spatial positions, the i32 sum scaled once as onnxruntime's kernel does: a float mean
    would land on the other side of the many exact rounding ties a small window makes."""
    x = _quantized(ctx, 0)
    r = static_rank_of(ctx, x, "X", tuple(range(3, 9)))
    axes = to_output(np.asarray(range(1, r - 1) if ctx.attr("channels_last", 0)
                                else range(2, r), np.int64))
    total = ReduceSum([_shifted(ctx, x, _per_tensor(ctx, 2)), axes], keep_dims=True).output(0)
    n = ReduceProd([gather(shape_of(x), axes, 0), to_output(np.int64(0))]).output(0)
    y_s = _scale(ctx, 3)
    ratio = Divide([_scale(ctx, 1), Multiply([y_s, Convert([n], destination_type=f32)])])
    real = Multiply([Convert([total], destination_type=f32).output(0), ratio.output(0)])
    return _q(ctx, real.output(0), 3, x, scale=to_output(np.float32(1.0)))


@onnx_rule("QLinearAveragePool", domain=MS)
def _import_qlinear_avg_pool(ctx):
    rule = find_onnx_rule("AveragePool", ctx.opset)
    assert rule is not None
    x = _channels_last(ctx, _dq(ctx, 0), to_first=True)
    y = _channels_last(ctx, to_output(rule(_with_inputs(ctx, [x]))), to_first=False)
    return _q(ctx, y, 3, ctx.inputs[0])


@onnx_rule("QLinearSoftmax", domain=MS)
def _import_qlinear_softmax(ctx):
    if not ctx.has_attr("opset"):
        ctx.error("attribute 'opset' (which Softmax's axis semantics apply) is missing")
    rule = find_onnx_rule("Softmax", int(ctx.attr("opset", 13)))
    if rule is None:
        ctx.error(f"opset {ctx.attr('opset', 13)} has no Softmax")
    y = to_output(rule(_with_inputs(ctx, [_dq(ctx, 0)])))
    # onnxruntime's kernel scales the probabilities by floor(1 / y_scale), not 1 / y_scale
    # (the same for the 1/256 its quantizer writes; one step or more off for others)
    y_s = _scale(ctx, 3)
    steps = Floor([Divide([to_output(np.float32(1.0)), y_s]).output(0)]).output(0)
    y = Multiply([y, steps]).output(0)
    return _q(ctx, y, 3, ctx.inputs[0], scale=to_output(np.float32(1.0)))


@onnx_rule("QLinearConcat", domain=MS)
def _import_qlinear_concat(ctx):
    n = len(ctx.inputs) - 2
    if n <= 0 or n % 3:
        ctx.error(f"expects (Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input), "
                  f"got {len(ctx.inputs)} inputs")
    parts = [_dq(ctx, i) for i in range(2, len(ctx.inputs), 3)]
    y = Concat(parts, axis=ctx.attr("axis", 1)).output(0)
    return _q(ctx, y, 0, ctx.inputs[2])


@onnx_rule("QLinearWhere", domain=MS)
def _import_qlinear_where(ctx):
    cond = _present(ctx, 0, "condition")
    y = Select([cond, _dq(ctx, 1), _dq(ctx, 4)]).output(0)
    return _q(ctx, y, 7, ctx.inputs[1])


# -- integer products ------------------------------------------------------------------------

def _column_scale(ctx: Any, i: int) -> Output:
    """Input ``i``, a B scale: per tensor, or 1-D per column of the product."""
    v = _present(ctx, i, "B's scale")
    ps = v.partial_shape
    if not ps.rank_is_static or len(ps) > 1:
        ctx.error(f"input {i} ('{ctx.proto.input[i]}') must be a scalar or 1-D, got {ps}")
    return v


def _integer_matmul(ctx: Any, a: Output, azp: Output | None, b: Output,
                    bzp: Output | None) -> Output:
    """``(a - azp) @ (b - bzp)`` in i32: ``azp`` per tensor, ``bzp`` per tensor or column."""
    for x, what in ((a, "A"), (b, "B")):
        et = x.element_type
        if not et.is_dynamic and et.name not in ("u8", "i8"):
            ctx.error(f"{what} must be u8 or i8, got {et}")
    if bzp is not None and bzp.partial_shape.rank_is_static and len(bzp.partial_shape) > 1:
        ctx.error(f"B's zero point must be a scalar or 1-D, got {bzp.partial_shape}")
    return MatMul([_shifted(ctx, a, azp), _shifted(ctx, b, bzp, lead=-1)]).output(0)


def _scaled(acc: Output, scale: Output, bias: Output | None) -> Output:
    """``float(acc) * scale [+ bias]``: the one rescaling onnxruntime applies."""
    y = Multiply([Convert([acc], destination_type=f32).output(0), scale]).output(0)
    return y if bias is None else Add([y, bias]).output(0)


@onnx_rule("MatMulIntegerToFloat", domain=MS)
def _import_matmul_integer_to_float(ctx):
    a, b, a_s = _present(ctx, 0, "A"), _present(ctx, 1, "B"), _scale(ctx, 2)
    acc = _integer_matmul(ctx, a, _per_tensor(ctx, 4), b, ctx.input(5))
    return _scaled(acc, Multiply([a_s, _column_scale(ctx, 3)]).output(0), ctx.input(6))


@onnx_rule("DynamicQuantizeMatMul", domain=MS)
def _import_dynamic_quantize_matmul(ctx):
    a, b = _present(ctx, 0, "A"), _present(ctx, 1, "B")
    et = a.element_type
    if not et.is_dynamic and et is not f32:
        ctx.error(f"A must be f32, got {et}")
    aq, a_s, azp = DynamicQuantizeLinear([a]).outputs()
    acc = _integer_matmul(ctx, aq, azp, b, ctx.input(3))
    return _scaled(acc, Multiply([a_s, _column_scale(ctx, 2)]).output(0), ctx.input(4))


def _transposed(ctx: Any, x: Output, what: str) -> Output:
    static_rank_of(ctx, x, what, (2,))
    return Transpose([x, to_output(np.asarray([1, 0], np.int64))]).output(0)


@onnx_rule("QGemm", domain=MS)
def _import_qgemm(ctx):
    """``alpha * a_scale * b_scale * ((A - a_zp) @ (B - b_zp) + C)`` (C: i32, in the
    accumulator's scale), requantized by ``y_scale, y_zero_point`` or, without ``y_scale``,
    float."""
    a, b = _present(ctx, 0, "A"), _present(ctx, 3, "B")
    a = _transposed(ctx, a, "A") if ctx.attr("transA", 0) else a
    b = _transposed(ctx, b, "B") if ctx.attr("transB", 0) else b
    static_rank_of(ctx, a, "A", (2,))
    static_rank_of(ctx, b, "B", (2,))
    acc = _integer_matmul(ctx, a, _per_tensor(ctx, 2), b, ctx.input(5))
    c = ctx.input(6)
    if c is not None:
        if not c.element_type.is_dynamic and c.element_type is not i32:
            ctx.error(f"C must be i32, got {c.element_type}")
        acc = Add([acc, c]).output(0)
    scale = Multiply([_scale(ctx, 1), _column_scale(ctx, 4)]).output(0)
    alpha = float(ctx.attr("alpha", 1.0))
    if alpha != 1.0:
        scale = Multiply([scale, to_output(np.float32(alpha))]).output(0)
    y_s = _per_tensor(ctx, 7)
    if y_s is None:
        if ctx.input(8) is not None:
            ctx.error("y_zero_point without y_scale")
        return _scaled(acc, scale, None)
    return _requantize(acc, scale, y_s, _per_tensor(ctx, 8), a.element_type)


@onnx_rule("QAttention", domain=MS)
def _import_qattention(ctx):
    """Attention over the dequantized input and weights (``weight_scale`` and its zero point
    per tensor or per column): inputs (input, weight, bias, input_scale, weight_scale,
    mask_index, input_zero_point, weight_zero_point, past) read as Attention's (input, weights,
    bias, mask_index, past)."""
    rule = find_onnx_rule("Attention", 1, MS)
    assert rule is not None
    x = _dequantize(_quantized(ctx, 0), _scale(ctx, 3), _per_tensor(ctx, 6))
    w = _dequantize(_quantized(ctx, 1), _column_scale(ctx, 4), ctx.input(7), axis=-1)
    bias = _present(ctx, 2, "bias")
    return rule(_with_inputs(ctx, [x, w, bias, ctx.input(5), ctx.input(8)]))
