"""Op families shared by many ops (and matched as families by ``wrap_type``), plus the helpers
factories use to turn python values into graph values."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np

from ..core.boundary import Constant
from ..core.dimension import Dimension
from ..core.node import Node, Output, as_output
from ..core.shape import PartialShape
from ..core.types import Type, boolean

# The IR ``version`` of ops that OpenVINO has no counterpart for (ONNX-only ops kept whole).
NETPASS_OPSET = "netpass"


def to_output(value: Any, element_type: Any = None) -> Output:
    """A graph value from a Node/Output, or a new Constant from a python or numpy value."""
    if isinstance(value, (Node, Output)):
        return as_output(value)
    arr = np.asarray(value)
    if element_type is None:
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        elif arr.dtype == np.int64 and not isinstance(value, np.ndarray):
            pass
    return Constant.of(arr, element_type).output(0)


NodeT = TypeVar("NodeT", bound=Node)


def set_name(node: NodeT, name: str | None) -> NodeT:
    if name:
        node.friendly_name = name
    return node


def normalize_axis(node: Node, axis: int, rank: int) -> int:
    node.check(-rank <= axis < max(rank, 1), "axis {} out of range for rank {}", axis, rank)
    return axis + rank if axis < 0 else axis


def merged_input_type(node: Node, indices: Sequence[int] | None = None) -> Type:
    et = node.get_input_element_type(0)
    for i in indices if indices is not None else range(1, node.get_input_size()):
        other = node.get_input_element_type(i)
        merged = et.merge(other)
        if merged is None:
            node.fail("element types differ: {} and {} (input {})", et, other, i)
        et = merged
    return et


class UnaryElementwiseArithmetic(Node):
    """One input, same shape and type out; ``fn`` is the numpy reference."""

    fn: ClassVar[Callable[..., Any]]  # a numpy ufunc or a function of arrays

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        return [np.asarray(type(self).fn(x)).astype(x.dtype, copy=False)]


class _BinaryElementwise(Node):
    ATTRS: ClassVar[dict[str, Any]] = {"auto_broadcast": "numpy"}
    fn: ClassVar[Callable[..., Any]]  # a numpy ufunc or a function of two arrays

    def _broadcast_shape(self) -> PartialShape:
        a, b = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        if self.auto_broadcast == "none":
            out = a.merge(b)
        else:
            out = a.broadcast_merge(b)
        if out is None:
            self.fail("input shapes {} and {} do not broadcast", a, b)
        return out

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects 2 inputs")
        self.set_output_type(0, self._out_type(), self._broadcast_shape())

    def _out_type(self) -> Type:
        return merged_input_type(self)

    def evaluate(self, inputs):
        a, b = inputs
        out = type(self).fn(a, b)
        et = self._outs[0].et
        return [np.asarray(out).astype(et.dtype if et.dtype is not None else a.dtype, copy=False)]


class BinaryElementwiseArithmetic(_BinaryElementwise):
    """Add, Multiply...: numpy broadcasting, inputs of one element type."""


class BinaryElementwiseComparison(_BinaryElementwise):
    """Equal, Less...: boolean output."""

    def _out_type(self) -> Type:
        merged_input_type(self)
        return boolean


class BinaryElementwiseLogical(_BinaryElementwise):
    """LogicalAnd, LogicalOr...: boolean inputs and output."""

    def _out_type(self) -> Type:
        merged_input_type(self)
        return boolean


class _ReductionKeepDims(Node):
    """Inputs (data, axes); attribute keep_dims. ``fn(x, axis=tuple, keepdims=bool)``."""

    ATTRS: ClassVar[dict[str, Any]] = {"keep_dims": False}
    fn: ClassVar[Callable[..., Any]]  # a numpy reduction

    def reduction_axes(self) -> list[int] | None:
        axes = self.input_constant(1)
        if axes is None:
            return None
        rank = len(self.get_input_partial_shape(0))
        return sorted({normalize_axis(self, int(a), rank) for a in np.asarray(axes).reshape(-1)})

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, axes)")
        data = self.get_input_partial_shape(0)
        et = self.get_input_element_type(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        axes = self.reduction_axes()
        if axes is None:
            rank = len(data) if self.keep_dims else None
            self.set_output_type(0, et, PartialShape.dynamic(rank))
            return
        dims: list[Dimension | int] = []
        for i, d in enumerate(data):
            if i in axes:
                if self.keep_dims:
                    dims.append(1)
            else:
                dims.append(d)
        self.set_output_type(0, et, PartialShape(dims))

    def evaluate(self, inputs):
        x, axes = inputs
        rank = x.ndim
        ax = tuple(sorted({int(a) % max(rank, 1) for a in np.asarray(axes).reshape(-1)}))
        out = type(self).fn(x, axis=ax, keepdims=self.keep_dims)
        return [np.asarray(out).astype(x.dtype, copy=False)]


class ArithmeticReductionKeepDims(_ReductionKeepDims):
    """ReduceSum, ReduceMean, ReduceMax..."""


class LogicalReductionKeepDims(_ReductionKeepDims):
    """ReduceLogicalAnd, ReduceLogicalOr."""
