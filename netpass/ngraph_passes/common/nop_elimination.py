"""NopElimination: remove ops that return their input unchanged.

The rules are data: op type -> "is this node a no-op?". A no-op is bypassed with
``replace_output_update_name`` so a Result it fed keeps its name (and a no-op between a
Parameter and a Result, which cannot be bypassed without renaming the Parameter, stays).
"""
from __future__ import annotations

from collections.abc import Callable

from ...core.graph_util import replace_output_update_name
from ...core.node import Node
from ...ops.elementwise import Convert
from ...ops.movement import (
    Broadcast,
    Concat,
    Reshape,
    Slice,
    Squeeze,
    StridedSlice,
    Tile,
    Transpose,
    Unsqueeze,
)
from ...ops.pad import Pad
from ...passes import GraphRewrite, MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const_value


# The rules run on every node of their types; they use ndarray methods, not numpy's
# module-level reductions (several microseconds of argument handling each on tiny arrays).
def _same_static_shape(node: Node) -> bool:
    a, b = node.get_input_partial_shape(0), node.get_output_partial_shape(0)
    return a.is_static and b.is_static and a.to_shape() == b.to_shape()


def _same_shape(node: Node) -> bool:
    """Same shape for an op that keeps the element count (Reshape, Squeeze, Unsqueeze): the
    same static shape, or the same rank and dims with one dynamic dim at the same place (the
    element count fixes it), or 1-D to 1-D."""
    a, b = node.get_input_partial_shape(0), node.get_output_partial_shape(0)
    if not (a.rank_is_static and b.rank_is_static) or len(a) != len(b):
        return False
    if len(a) == 1:
        return True
    dynamic = 0
    for x, y in zip(a, b):
        if x.is_static != y.is_static or (x.is_static and x.get_length() != y.get_length()):
            return False
        dynamic += x.is_dynamic
    return dynamic <= 1


def _identity_order(node: Node) -> bool:
    order = const_value(node.input_value(1))
    if order is None:
        return False
    if order.size == 0:  # an empty order reverses the axes: a no-op only up to rank 1
        ps = node.get_input_partial_shape(0)
        return ps.rank_is_static and len(ps) <= 1
    return order.reshape(-1).tolist() == list(range(order.size))


def _all_ones(index: int) -> Callable[[Node], bool]:
    def check(node: Node) -> bool:
        v = const_value(node.input_value(index))
        return v is not None and bool((v == 1).all()) and _same_static_shape(node)
    return check


def _zero_pads(node: Node) -> bool:
    for i in (1, 2):
        v = const_value(node.input_value(i))
        if v is None or v.any():
            return False
    return True


def _full_slice(step_input: int) -> Callable[[Node], bool]:
    """Same static shape and positive steps: the slice covers every element in order."""
    def check(node: Node) -> bool:
        steps = const_value(node.input_value(step_input))
        return steps is not None and bool((steps > 0).all()) and _same_static_shape(node)
    return check


NOP_RULES: dict[type[Node], Callable[[Node], bool]] = {
    Reshape: _same_shape,
    Squeeze: _same_shape,
    Unsqueeze: _same_shape,
    Broadcast: _same_static_shape,
    Tile: _all_ones(1),
    Transpose: _identity_order,
    Convert: lambda n: n.get_input_element_type(0) == n.get_output_element_type(0),
    Concat: lambda n: n.get_input_size() == 1,
    Pad: _zero_pads,
    Slice: _full_slice(3),
    StridedSlice: _full_slice(3),
}


class EliminateNop(MatcherPass):
    """Bypasses one op type when its rule says it is a no-op."""

    def __init__(self, op_type: type[Node], rule: Callable[[Node], bool]) -> None:
        super().__init__()
        pattern = wrap_type(op_type, predicate=lambda out: rule(out.node))

        def callback(m: Matcher) -> bool:
            node = m.match_root
            return replace_output_update_name(node.output(0), node.input_value(0))

        self.register_matcher(Matcher(pattern, f"Eliminate{op_type.type_name}"), callback)


class NopElimination(GraphRewrite):
    """Bypasses Reshapes, Transposes, Pads etc. that change nothing.

    All the rules of ``NOP_RULES`` in one traversal.
    """

    def __init__(self) -> None:
        super().__init__()
        for op_type, rule in NOP_RULES.items():
            self.add_matcher(EliminateNop(op_type, rule))
