"""Parameter, Constant and Result: a model's inputs, fixed data and outputs."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node, Output
from ..core.shape import PartialShape, ShapeLike
from ..core.types import Type, f32
from .base import set_name, to_output

__all__ = ["parameter", "constant", "result"]


class Parameter(Node):
    """A model input of a given element type and partial shape."""

    type_name = "Parameter"
    ATTRS = {"shape": None, "element_type": f32}
    FOLDABLE = False

    def infer_types(self) -> None:
        self.shape = PartialShape(self.shape) if not isinstance(self.shape, PartialShape) else self.shape
        self.element_type = Type.of(self.element_type)
        self.set_output_type(0, self.element_type, self.shape)

    @property
    def partial_shape(self) -> PartialShape:
        return self.shape

    def set_partial_shape(self, shape: ShapeLike) -> None:
        self.shape = PartialShape(shape)
        self.validate_and_infer_types()

    def get_partial_shape(self) -> PartialShape:
        return self.shape

    def evaluate(self, inputs):
        raise NotImplementedError("a Parameter's value comes from the caller")


class Constant(Node):
    """Fixed data. ``value`` is the numpy array (immutable by convention)."""

    type_name = "Constant"
    ATTRS = {"value": None, "element_type": None}
    FOLDABLE = False

    def infer_types(self) -> None:
        et = self.element_type
        if et is not None and type(et) is not Type:
            et = Type.of(et)
        arr = np.asarray(self.value)
        if et is None:
            # Passes create Constants by the thousand: the dtype table first, Type.of for the rest.
            et = Type._by_dtype.get(arr.dtype) or Type.of(arr.dtype)
        elif et.dtype is not None and arr.dtype != et.dtype:
            arr = arr.astype(et.dtype)
        self.value = arr
        self.element_type = et
        self.set_output_type(0, et, PartialShape(arr.shape))

    def infer_values(self) -> None:
        self._outs[0].val = self.value

    def evaluate(self, inputs):
        return [self.value]

    def get_data(self) -> np.ndarray:
        return self.value

    def get_vector(self) -> list:
        return self.value.reshape(-1).tolist()

    cast_vector = get_vector

    def get_value_strings(self) -> list[str]:
        return [str(v) for v in self.get_vector()]


class Result(Node):
    """A model output; passes its input through."""

    type_name = "Result"
    FOLDABLE = False

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        return [inputs[0]]


def parameter(shape: ShapeLike, dtype: Any = f32, name: str | None = None) -> Parameter:
    p = Parameter([], shape=PartialShape(shape), element_type=Type.of(dtype))
    if name:
        p.friendly_name = name
        p.output(0).names.add(name)
    return p


def constant(value: Any, dtype: Any = None, name: str | None = None) -> Constant:
    arr = np.asarray(value)
    if dtype is None and arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    return set_name(Constant([], value=arr, element_type=dtype), name)


def result(data: Any, name: str | None = None) -> Result:
    return set_name(Result([to_output(data)]), name)


# -- ONNX rules ------------------------------------------------------------------------------
from .registry import onnx_export, onnx_rule  # noqa: E402


@onnx_rule("Constant")
def _import_constant(ctx):
    for key, conv in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                      ("value_int", np.int64), ("value_ints", np.int64)):
        if ctx.has_attr(key):
            v = ctx.attr(key)
            arr = np.asarray(v) if conv is None else np.asarray(v, dtype=conv)
            return Constant([], value=arr).output(0)
    ctx.error("only tensor, float(s) and int(s) Constant values are supported")


@onnx_rule("Identity")
def _import_identity(ctx):
    return ctx.inputs[0]


@onnx_export(Constant)
def _export_constant(node, ectx):
    ectx.add_node("Constant", [], ectx.outputs(node), value=node.value)
