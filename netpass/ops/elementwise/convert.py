"""Convert and ConvertLike (ONNX Cast and CastLike)."""
from __future__ import annotations

from typing import Any

from ...core.node import Node
from ...core.types import ContainerType, Type, convert_values, f32
from ..base import set_name, to_output
from ..onnx_types import attribute_element_type, onnx_type_code, type_opset
from ..registry import onnx_export, onnx_rule

__all__ = ["convert", "convert_like"]


class Convert(Node):
    """Change the element type by ONNX Cast's rules (:func:`netpass.core.types.convert_values`):
    floats to integers truncate toward zero, anything to boolean is ``!= 0``, float8 targets
    saturate unless ``saturate`` is False, ``round_mode`` applies to f8e8m0. Integer shape
    tensors keep their partial values (``Convert(ShapeOf(x), i32)``)."""

    type_name = "Convert"
    ATTRS = {"destination_type": f32, "saturate": True, "round_mode": "up"}
    destination_type: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.destination_type = Type.of(self.destination_type)
        self.check(not self.destination_type.is_dynamic,
                   "unsupported destination_type {}", self.destination_type)
        self.check(self.round_mode in ("up", "down", "nearest"),
                   "round_mode must be up, down or nearest, got '{}'", self.round_mode)
        src = self.get_input_element_type(0)
        if isinstance(src, ContainerType) or isinstance(self.destination_type, ContainerType):
            # a sequence or optional is only copied (the runtime's identity of an input that
            # is also an output)
            self.check(src is self.destination_type or src.is_dynamic,
                       "cannot convert {} to {}", src, self.destination_type)
        self.set_output_type(0, self.destination_type, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        if isinstance(self.destination_type, ContainerType):
            return [inputs[0]]
        return [convert_values(inputs[0], self.destination_type, self.saturate,
                               self.round_mode)]

    def infer_values(self) -> None:
        pv = self.input_partial_value(0)
        if pv is not None and self.destination_type.is_integral and \
                self.get_input_element_type(0).is_integral:
            self.set_output_partial_value(0, pv)


class ConvertLike(Node):
    """Convert data (input 0) to the element type of ``like`` (input 1), as Convert does."""

    type_name = "ConvertLike"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, like)")
        self.set_output_type(0, self.get_input_element_type(1), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x, like = inputs
        return [convert_values(x, Type.of(like.dtype))]


def convert(data: Any, destination_type: Any, name: str | None = None) -> Node:
    """Convert-1: ``data`` as ``destination_type`` (float to integer truncates towards zero,
    anything to boolean is ``!= 0``); shape math stays known through it."""
    return set_name(Convert([to_output(data)], destination_type=Type.of(destination_type)), name)


def convert_like(data: Any, like: Any, name: str | None = None) -> Node:
    """ConvertLike-1: ``data`` converted to the element type of ``like`` (only the type of ``like``
    is read)."""
    return set_name(ConvertLike([to_output(data), to_output(like)]), name)


def _cast_attrs(ctx: Any) -> dict[str, Any]:
    """saturate (opset 19 on) and round_mode (opset 24 on; f8e8m0 only)."""
    attrs: dict[str, Any] = {}
    if ctx.opset >= 19:
        attrs["saturate"] = bool(ctx.attr("saturate", 1))
    if ctx.opset >= 24:
        attrs["round_mode"] = ctx.attr("round_mode", "up")
    return attrs


@onnx_rule("Cast")
def _import_cast(ctx):
    x = ctx.inputs[0]
    et = attribute_element_type(ctx.attr("to", 0), ctx)
    if et is x.element_type:
        return x
    return Convert([x], destination_type=et, **_cast_attrs(ctx))


@onnx_rule("CastLike", since=15)
def _import_castlike(ctx):
    x, like = ctx.inputs[0], ctx.inputs[1]
    et = like.element_type
    if et.is_dynamic:
        return ConvertLike([x, like])
    if et is x.element_type:
        return x
    return Convert([x], destination_type=et, **_cast_attrs(ctx))


def cast_opset(node: Node) -> int:
    """The ONNX opset a Cast of ``node``'s types and attributes needs."""
    need = max(type_opset(node.get_input_element_type(0)),
               type_opset(node.get_output_element_type(0)))
    if not getattr(node, "saturate", True):
        need = max(need, 19)
    if getattr(node, "round_mode", "up") != "up":
        need = max(need, 24)
    return need


@onnx_export(ConvertLike, opset=cast_opset)
def _export_convert_like(node, ectx):
    ectx.add_node("CastLike", ectx.inputs(node), ectx.outputs(node))


@onnx_export(Convert, opset=cast_opset)
def _export_convert(node, ectx):
    attrs: dict[str, Any] = {"to": onnx_type_code(node.destination_type, node.friendly_name)}
    if not node.saturate:
        attrs["saturate"] = 0
    if node.round_mode != "up":
        attrs["round_mode"] = node.round_mode
    ectx.add_node("Cast", ectx.inputs(node), ectx.outputs(node), **attrs)
