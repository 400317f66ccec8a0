"""Convert and ConvertLike (ONNX Cast and CastLike)."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ...core.node import Node, Output
from ...core.types import Type, f32
from ..base import set_name, to_output
from ..registry import onnx_export, onnx_rule

__all__ = ["convert", "convert_like"]


class Convert(Node):
    """Change the element type. Float to integer truncates toward zero; to boolean is ``!= 0``.
    Integer shape tensors keep their partial values (``Convert(ShapeOf(x), i32)``)."""

    type_name = "Convert"
    ATTRS = {"destination_type": f32}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.destination_type = Type.of(self.destination_type)
        self.check(not self.destination_type.is_dynamic and self.destination_type.dtype is not None,
                   "unsupported destination_type {}", self.destination_type)
        self.set_output_type(0, self.destination_type, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        dt = self.destination_type.dtype
        if dt == np.bool_:
            return [x != 0]
        with np.errstate(all="ignore"):
            if x.dtype.kind == "f" and dt.kind in "iu":
                x = np.trunc(x)
            return [x.astype(dt)]

    def infer_values(self) -> None:
        pv = self.input_partial_value(0)
        if pv is not None and self.destination_type.is_integral and \
                self.get_input_element_type(0).is_integral:
            self.set_output_partial_value(0, pv)


class ConvertLike(Node):
    """Convert data (input 0) to the element type of ``like`` (input 1)."""

    type_name = "ConvertLike"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, like)")
        self.set_output_type(0, self.get_input_element_type(1), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x, like = inputs
        if like.dtype == np.bool_:
            return [x != 0]
        with np.errstate(all="ignore"):
            if x.dtype.kind == "f" and like.dtype.kind in "iu":
                x = np.trunc(x)
            return [x.astype(like.dtype)]


def convert(data: Any, destination_type: Any, name: str | None = None) -> Node:
    return set_name(Convert([to_output(data)], destination_type=Type.of(destination_type)), name)


def convert_like(data: Any, like: Any, name: str | None = None) -> Node:
    return set_name(ConvertLike([to_output(data), to_output(like)]), name)


def onnx_element_type(to: int, ctx: Any) -> Type:
    """netpass element type of an ONNX TensorProto data type, or ctx.error."""
    try:
        dt = onnx.helper.tensor_dtype_to_np_dtype(to)
        et = Type.of(dt)
    except (KeyError, TypeError, ValueError):
        et = None
    if et is None or to == onnx.TensorProto.BFLOAT16:
        name = onnx.TensorProto.DataType.Name(to) if to in onnx.TensorProto.DataType.values() \
            else str(to)
        ctx.error(f"element type {name} is not supported")
    return et


def _check_numpy_type(ctx: Any, x: Output) -> None:
    if x.element_type.dtype is None:
        ctx.error(f"input element type {x.element_type} is not supported")


@onnx_rule("Cast")
def _import_cast(ctx):
    x = ctx.inputs[0]
    _check_numpy_type(ctx, x)
    et = onnx_element_type(ctx.attr("to", 0), ctx)
    if ctx.attr("round_mode", "up") != "up":
        ctx.error("round_mode other than 'up' is not supported")
    if et is x.element_type:
        return x
    return Convert([x], destination_type=et)


@onnx_rule("CastLike")
def _import_castlike(ctx):
    x, like = ctx.inputs[0], ctx.inputs[1]
    _check_numpy_type(ctx, x)
    _check_numpy_type(ctx, like)
    et = like.element_type
    if et is x.element_type:
        return x
    return Convert([x], destination_type=et)


def _onnx_dtype(et: Type) -> int:
    return int(onnx.helper.np_dtype_to_tensor_dtype(et.dtype))


@onnx_export(ConvertLike)
def _export_convert_like(node, ectx):
    ectx.add_node("CastLike", ectx.inputs(node), ectx.outputs(node))


@onnx_export(Convert)
def _export_convert(node, ectx):
    ectx.add_node("Cast", ectx.inputs(node), ectx.outputs(node),
                  to=_onnx_dtype(node.destination_type))
