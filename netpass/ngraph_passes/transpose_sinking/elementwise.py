"""TSUnaryForward/Backward and TSBinaryForward/Backward: elementwise ops commute with a
Transpose (other inputs get the inverse order, unsqueezed to the order's rank)."""
from __future__ import annotations

from ...core.node import Node
from ...ops.elementwise import PRelu
from ..utils import BINARY_TYPES, UNARY_TYPES, static_rank
from .base import TSBackwardBase, TSForwardBase
from .utils import TransposeInput, sink_backward, sink_forward


def _elementwise(node: Node) -> bool:
    # An op with an axis (Softmax, LogSoftmax...) is not elementwise whatever its family.
    return not hasattr(node, "axis")


def per_channel_prelu(main: Node) -> bool:
    """A PRelu whose 1-D slope matches the data's channel axis (1): the slope applies per
    channel, not by numpy broadcasting (OpenVINO's IsSpecialPRelu)."""
    if not isinstance(main, PRelu):
        return False
    slope, data = main.input_value(1).partial_shape, main.input_value(0).partial_shape
    if slope.rank.is_dynamic or len(slope) != 1 or not slope[0].is_static or data.rank.is_dynamic:
        return False
    channel = data[1 if len(data) > 1 else 0]
    return channel.is_static and channel.get_length() == slope[0].get_length()


def _static_ranks(main: Node) -> bool:
    return all(static_rank(v) is not None for v in main.input_values())


class TSUnaryForward(TSForwardBase):
    """Moves a Transpose from a unary elementwise op's input to its output."""

    TYPES, INDICES = UNARY_TYPES, (0,)

    def applicable(self, main, info):
        return _elementwise(main)

    def sink(self, main, info):
        return sink_forward(main, info, indices=[0], permutes=True)


class TSUnaryBackward(TSBackwardBase):
    """Moves a Transpose from a unary elementwise op's output to its input."""

    TYPES = UNARY_TYPES

    def applicable(self, main, order):
        return _elementwise(main) and main.get_output_size() == 1

    def sink(self, main, order, order_type):
        return sink_backward(main, order, order_type, [0])


class TSBinaryForward(TSForwardBase):
    """Moves a Transpose below a binary op; other inputs get its inverse.

    (A per-channel PRelu slope is not moved: OpenVINO unsqueezes it as a numpy-broadcast
    operand, which changes the values.)"""

    TYPES = BINARY_TYPES

    def applicable(self, main, info: TransposeInput):
        return _static_ranks(main) and not per_channel_prelu(main)

    def sink(self, main, info):
        return sink_forward(main, info, permutes=True)


class TSBinaryBackward(TSBackwardBase):
    """Moves a Transpose above a binary elementwise op, onto every input."""

    TYPES = BINARY_TYPES

    def applicable(self, main, order):
        return _static_ranks(main) and static_rank(main.output(0)) == len(order)

    def sink(self, main, order, order_type):
        return sink_backward(main, order, order_type, per_channel=per_channel_prelu(main))
