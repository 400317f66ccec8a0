"""ONNX optionals (opset 15+): Optional, OptionalHasElement, OptionalGetElement. An optional
holds a tensor or a sequence, or nothing (:mod:`netpass.core.containers`). Where the import
already knows the answer (OptionalHasElement of a plain tensor or of no input at all, opset 18+;
OptionalGetElement of a plain tensor or sequence) the rule gives it without an op.
"""
from __future__ import annotations

from typing import Any, cast

import numpy as np
import onnx

from ..core.boundary import Constant
from ..core.containers import box, unbox
from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import OptionalType, Type, boolean, optional_of
from ..errors import ModelFormatError, NetpassError
from .base import NETPASS_OPSET, set_name, to_output
from .onnx_types import onnx_value_type
from .registry import onnx_rule

__all__ = ["optional", "optional_has_element", "optional_get_element"]


class _OptionalOp(Node):
    """Base: the runtime runs these on the host, where optional values live, and takes the
    shapes of what they give from the values themselves."""

    version = NETPASS_OPSET
    DATA_DEPENDENT_SHAPE = True


class Optional(_OptionalOp):
    """An optional holding its input, or an empty one of ``element_type`` (and
    ``element_shape``) without input."""

    type_name = "Optional"
    ATTRS = {"element_type": None, "element_shape": None}
    FOLDABLE = False  # a Constant holds a tensor, not an optional

    def infer_types(self) -> None:
        if self.get_input_size():
            et = self.get_input_element_type(0)
            self.check(not isinstance(et, OptionalType), "input is already optional ({})", et)
            self.set_output_type(0, optional_of(et), self.get_input_partial_shape(0))
            return
        self.check(self.element_type is not None, "an empty Optional needs element_type")
        shape = self.element_shape if self.element_shape is not None else PartialShape(None)
        self.set_output_type(0, optional_of(Type.of(self.element_type)), shape)

    def evaluate(self, inputs):
        return [box(inputs[0] if inputs else None)]


class OptionalHasElement(_OptionalOp):
    type_name = "OptionalHasElement"

    def infer_types(self) -> None:
        et = self.get_input_element_type(0)
        self.check(isinstance(et, OptionalType), "input must be an optional, got {}", et)
        self.set_output_type(0, boolean, PartialShape([]))

    def evaluate(self, inputs):
        return [np.array(unbox(inputs[0]) is not None)]


class OptionalGetElement(_OptionalOp):
    type_name = "OptionalGetElement"

    def infer_types(self) -> None:
        et = self.get_input_element_type(0)
        self.check(isinstance(et, OptionalType), "input must be an optional, got {}", et)
        self.set_output_type(0, cast(OptionalType, et).element,
                             self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        value = unbox(inputs[0])
        if value is None:
            raise NetpassError(f"OptionalGetElement '{self.friendly_name}': the optional is "
                               "empty")
        return [value]


def optional(value: Any = None, element_type: Any = None, name: str | None = None) -> Node:
    """An optional holding ``value``, or (None) an empty one of ``element_type``."""
    if value is None:
        return set_name(Optional([], element_type=Type.of(element_type)), name)
    return set_name(Optional([to_output(value)]), name)


def optional_has_element(value: Any, name: str | None = None) -> Node:
    """Whether the optional ``value`` holds something (a boolean scalar)."""
    return set_name(OptionalHasElement([to_output(value)]), name)


def optional_get_element(value: Any, name: str | None = None) -> Node:
    """What the optional ``value`` holds (an error when it is empty)."""
    return set_name(OptionalGetElement([to_output(value)]), name)


def _known(value: bool):
    return Constant([], value=np.array(value))


@onnx_rule("Optional", since=15)
def _import_optional(ctx):
    if ctx.input(0) is not None:
        return Optional([ctx.input(0)])
    attr = next((a for a in ctx.proto.attribute if a.name == "type"), None)
    if attr is None or attr.type != onnx.AttributeProto.TYPE_PROTO:
        raise ModelFormatError("an Optional without input needs its 'type' attribute")
    et, shape = onnx_value_type(attr.tp, f"node '{ctx.name}' type")
    return Optional([], element_type=et, element_shape=shape)


@onnx_rule("OptionalHasElement", since=15)
def _import_optional_has_element(ctx):
    value = ctx.input(0)
    if value is None or not isinstance(value.element_type, OptionalType):
        if ctx.opset < 18:
            ctx.error("takes an optional before opset 18")
        # opset 18: no input is an empty optional, a tensor or sequence one that is there
        return _known(value is not None)
    return OptionalHasElement([value])


@onnx_rule("OptionalGetElement", since=15)
def _import_optional_get_element(ctx):
    value = ctx.input(0)
    if not isinstance(value.element_type, OptionalType):
        if ctx.opset < 18:
            ctx.error("takes an optional before opset 18")
        return value  # opset 18: a tensor or sequence is its own element
    return OptionalGetElement([value])
