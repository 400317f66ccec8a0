"""TSUnaryForward/Backward and TSBinaryForward/Backward: elementwise ops commute with a
Transpose (other inputs get the inverse order, unsqueezed to the order's rank)."""
from __future__ import annotations

from ...core.node import Node
from ..utils import const_value, static_rank
from .base import TSBackwardBase, TSForwardBase
from .utils import TransposeInput, sink_backward, sink_forward

UNARY_TYPES = ("UnaryElementwiseArithmetic", "Clamp", "Elu", "SoftPlus", "LogicalNot", "Convert",
               "IsInf", "IsNaN", "Selu", "Swish", "HardSigmoid", "Relu", "Sigmoid",
               "Tanh", "Exp", "Abs", "Negative", "Sqrt", "Log")
BINARY_TYPES = ("BinaryElementwiseArithmetic", "BinaryElementwiseComparison",
                "BinaryElementwiseLogical", "PRelu")


def _elementwise(node: Node) -> bool:
    # An op with an axis (Softmax, LogSoftmax...) is not elementwise whatever its family.
    return not hasattr(node, "axis")


def _ranks_fit(main: Node, rank: int) -> bool:
    """Every input has a static rank no larger than ``rank`` and the output has ``rank``."""
    if static_rank(main.output(0)) != rank:
        return False
    for v in main.input_values():
        r = static_rank(v)
        if r is None or r > rank:
            return False
    if main.type_name == "PRelu":  # a 1-D slope is per channel (axis 1), not numpy-broadcast
        slope = main.input_value(1)
        if static_rank(slope) == 1 and rank > 2 and (const_value(slope) is None or const_value(slope).size > 1):
            return False
    return True


class TSUnaryForward(TSForwardBase):
    """Moves a Transpose from a unary elementwise op's input to its output."""

    TYPES, INDICES = UNARY_TYPES, (0,)

    def applicable(self, main, info):
        return _elementwise(main)

    def sink(self, main, info):
        return sink_forward(main, info, indices=[0])


class TSUnaryBackward(TSBackwardBase):
    """Moves a Transpose from a unary elementwise op's output to its input."""

    TYPES = UNARY_TYPES

    def applicable(self, main, order):
        return _elementwise(main) and main.get_output_size() == 1

    def sink(self, main, order, order_type):
        return sink_backward(main, order, order_type, [0])


class TSBinaryForward(TSForwardBase):
    """Moves a Transpose below a binary op; other inputs get its inverse."""

    TYPES = BINARY_TYPES

    def applicable(self, main, info: TransposeInput):
        return _ranks_fit(main, len(info.order))

    def sink(self, main, info):
        return sink_forward(main, info)


class TSBinaryBackward(TSBackwardBase):
    """Moves a Transpose above a binary elementwise op, onto every input."""

    TYPES = BINARY_TYPES

    def applicable(self, main, order):
        return _ranks_fit(main, len(order))

    def sink(self, main, order, order_type):
        return sink_backward(main, order, order_type)
