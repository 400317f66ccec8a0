"""The graph boundary: Parameter (a model input), Constant (fixed data), Result (a model
output) and Sink (the base of ops a model keeps without outputs, such as Assign).

They live in core because the Model and the mutation helpers are defined by them (a Model's
inputs are Parameters, its outputs Results; constants carry runtime info); their factories and
ONNX rules are in :mod:`netpass.ops.io`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .node import Node, _Port
from .shape import PartialShape, ShapeLike
from .types import Type, f32

__all__ = ["Parameter", "Constant", "Result", "Sink"]


class Parameter(Node):
    """A model input of a given element type and partial shape."""

    type_name = "Parameter"
    ATTRS = {"shape": None, "element_type": f32}
    # Given as anything PartialShape / Type.of take; infer_types normalises them.
    element_type: Type
    shape: PartialShape
    FOLDABLE = False

    def infer_types(self) -> None:
        if not isinstance(self.shape, PartialShape):
            self.shape = PartialShape(self.shape)
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

    def evaluate(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError("a Parameter's value comes from the caller")


def _element_type(arr: np.ndarray, element_type: Any) -> Type:
    """A Constant's element type: ``element_type`` as a Type, else ``arr``'s."""
    if element_type is None:
        # Passes create Constants by the thousand: the dtype table first, Type.of for the rest.
        return Type._by_dtype.get(arr.dtype) or Type.of(arr.dtype)
    return element_type if type(element_type) is Type else Type.of(element_type)


class Constant(Node):
    """Fixed data. ``value`` is the numpy array (immutable by convention)."""

    type_name = "Constant"
    ATTRS = {"value": None, "element_type": None}
    element_type: Type | None
    value: np.ndarray
    FOLDABLE = False

    @staticmethod
    def of(value: Any, element_type: Any = None) -> Constant:
        """``Constant([], value=value, element_type=element_type)``, the same node built
        directly, without the generic attribute checks and inference (passes and the ONNX
        reader build Constants by the hundred thousand; this takes a third of the time). A
        value that must be converted to ``element_type`` takes the generic way, which reports
        a failed conversion as the node's inference error."""
        arr = np.asarray(value)
        et = _element_type(arr, element_type)
        if et.dtype is not None and arr.dtype != et.dtype:
            return Constant([], value=value, element_type=element_type)
        node = Constant.__new__(Constant)
        node._init_state()
        attrs = node.__dict__
        attrs["value"] = arr
        attrs["element_type"] = et
        port = _Port()
        port.et = et
        port.ps = PartialShape.static(arr.shape)
        port.val = arr
        node._outs = (port,)
        return node

    def infer_types(self) -> None:
        arr = np.asarray(self.value)
        et = _element_type(arr, self.element_type)
        if et.dtype is not None and arr.dtype != et.dtype:
            arr = arr.astype(et.dtype)
        self.value = arr
        self.element_type = et
        self.set_output_type(0, et, PartialShape.static(arr.shape))

    def infer_values(self) -> None:
        self._outs[0].val = self.value

    def evaluate(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [self.value]

    def get_data(self) -> np.ndarray:
        return self.value

    def get_vector(self) -> list[Any]:
        values: list[Any] = self.value.reshape(-1).tolist()
        return values

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

    def evaluate(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [inputs[0]]


class Sink(Node):
    """Base of ops whose effect is not an output a model returns (OpenVINO's ``op::Sink``:
    ``Assign`` writing a variable); a ``Model`` keeps them in ``model.sinks``."""
