"""Softmax and LogSoftmax (OpenVINO opset8 / opset5); ONNX's before opset 13 flatten to 2-D
at ``axis`` first."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Node, Output
from ..base import normalize_axis, set_name, to_output
from ..elementwise import Divide, Exp, Log, Subtract
from ..movement import reshape
from ..reduction import ReduceMax, ReduceSum
from ..registry import onnx_export, onnx_rule
from ..shape_ops import shape_of
from .common import i64, static_rank


class _AxisOp(Node):
    """One data input, an ``axis`` attribute, same type and shape out."""

    ATTRS = {"axis": 1}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        ps = self.get_input_partial_shape(0)
        if ps.rank_is_static:
            normalize_axis(self, self.axis, len(ps))
        self.set_output_type(0, self.get_input_element_type(0), ps)


def _shifted(x: np.ndarray, axis: int) -> np.ndarray:
    # Computed in the data's own type, as OpenVINO's reference does (f16 results then match).
    return x - np.max(x, axis=axis, keepdims=True, initial=-np.inf)


class Softmax(_AxisOp):
    """exp(x) / sum(exp(x)) along ``axis`` (negative counts from the end)."""

    type_name = "Softmax"
    version = "opset8"
    IR_VERSIONS = ("opset1", "opset8")  # v1: axis >= 0, a subset of v8's

    def evaluate(self, inputs):
        x = inputs[0]
        axis = self.axis % max(x.ndim, 1)
        e = np.exp(_shifted(x, axis))
        return [(e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype)]


class LogSoftmax(_AxisOp):
    """x - log(sum(exp(x))) along ``axis``."""

    type_name = "LogSoftmax"
    version = "opset5"

    def evaluate(self, inputs):
        x = inputs[0]
        axis = self.axis % max(x.ndim, 1)
        shifted = _shifted(x, axis)
        with np.errstate(divide="ignore"):
            out = shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
        return [out.astype(x.dtype)]

def softmax(data: Any, axis: int, name: str | None = None) -> Node:
    """Softmax-8: ``exp(x) / sum(exp(x))`` along ``axis`` (negative from the end), computed
    stably."""
    return set_name(Softmax([to_output(data)], axis=int(axis)), name)


def log_softmax(data: Any, axis: int, name: str | None = None) -> Node:
    """LogSoftmax-5: ``x - log(sum(exp(x)))`` along ``axis``, computed stably."""
    return set_name(LogSoftmax([to_output(data)], axis=int(axis)), name)

def _coerced(ctx: Any, cls: type) -> Output:
    """ONNX Softmax/LogSoftmax before opset 13: flatten to 2-D at ``axis``, normalize each row."""
    x = ctx.inputs[0]
    rank = static_rank(ctx, x, ctx.op_type)
    axis = ctx.attr("axis", 1)
    axis = axis + rank if axis < 0 else axis
    if axis >= rank - 1:
        return cls([x], axis=max(rank - 1, 0)).output(0)
    tail = x.partial_shape[axis:]
    n = int(np.prod(tail.to_shape())) if tail.is_static else 0
    if n > 0:
        rows = reshape(x, [-1, n], special_zero=False)
        return reshape(cls([rows], axis=1), shape_of(x), special_zero=False).output(0)
    # Same values without reshaping: normalize over all axes from ``axis`` on at once.
    axes = i64(np.arange(axis, rank))
    shifted = Subtract([x, ReduceMax([x, axes], keep_dims=True)]).output(0)
    total = ReduceSum([Exp([shifted]), axes], keep_dims=True).output(0)
    if cls is Softmax:
        return Divide([Exp([shifted]), total]).output(0)
    return Subtract([shifted, Log([total])]).output(0)


@onnx_rule("Softmax")
def _import_softmax_2d(ctx):
    return _coerced(ctx, Softmax)


@onnx_rule("Softmax", since=13)
def _import_softmax(ctx):
    return Softmax([ctx.inputs[0]], axis=ctx.attr("axis", -1))


@onnx_rule("LogSoftmax")
def _import_log_softmax_2d(ctx):
    return _coerced(ctx, LogSoftmax)


@onnx_rule("LogSoftmax", since=13)
def _import_log_softmax(ctx):
    return LogSoftmax([ctx.inputs[0]], axis=ctx.attr("axis", -1))

def _export_axis(onnx_op: str):
    def rule(node, ectx):
        ectx.add_node(onnx_op, ectx.inputs(node), ectx.outputs(node), axis=int(node.axis))
    return rule


onnx_export(Softmax)(_export_axis("Softmax"))
onnx_export(LogSoftmax)(_export_axis("LogSoftmax"))
