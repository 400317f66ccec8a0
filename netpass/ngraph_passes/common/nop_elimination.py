"""NopElimination: remove ops that return their input unchanged.

The rules are data: op type -> "is this node a no-op?". A no-op is bypassed with
``replace_output_update_name`` so a Result it fed keeps its name (and a no-op between a
Parameter and a Result, which cannot be bypassed without renaming the Parameter, stays).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...core.graph_util import replace_output_update_name
from ...core.node import Node
from ...ops.elementwise import Convert
from ...ops.indexing import Gather
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


def _tile_by_ones(node: Node) -> bool:
    """Repeats all 1 and no more of them than the data's rank (more would add leading axes):
    the data comes out unchanged whatever its (dynamic) shape (OpenVINO's NopTile)."""
    v = const_value(node.input_value(1))
    ps = node.get_input_partial_shape(0)
    return v is not None and bool((v == 1).all()) and ps.rank_is_static and v.size <= len(ps)


def _whole_gather(node: Node) -> bool:
    """Indices ``0..n-1`` (a 1-D constant) along an axis of static length n, no batch dims:
    every slice in order (OpenVINO's gather elimination; netpass gives zeros for an
    out-of-range index, so only these indices are a no-op)."""
    if node.batch_dims != 0:
        return False
    idx, axis = const_value(node.input_value(1)), const_value(node.input_value(2))
    ps = node.get_input_partial_shape(0)
    if idx is None or axis is None or idx.ndim != 1 or axis.size != 1 or not ps.rank_is_static:
        return False
    a = int(axis.reshape(-1)[0])
    a = a + len(ps) if a < 0 else a
    if not 0 <= a < len(ps) or not ps[a].is_static:
        return False
    n = ps[a].get_length()
    return idx.size == n and (np.where(idx < 0, idx + n, idx) == np.arange(n)).all()


def _zero_pads(node: Node) -> bool:
    for i in (1, 2):
        v = const_value(node.input_value(i))
        if v is None or v.any():
            return False
    return True


# A stop at least this large covers any dim (OpenVINO's EliminateStridedSlice / EliminateSlice
# take INT32_MAX as "to the end").
_TO_THE_END = 2**31 - 1


def _full_slice(node: Node) -> bool:
    """Positive steps and the same static shape, or steps 1 with every start 0 and every
    stop "to the end" (any shape): the slice covers every element in order."""
    steps = const_value(node.input_value(3))
    if steps is None or not (steps > 0).all():
        return False
    if _same_static_shape(node):
        return True
    start, stop = const_value(node.input_value(1)), const_value(node.input_value(2))
    return start is not None and stop is not None and bool(
        (steps == 1).all() and (start == 0).all() and (stop >= _TO_THE_END).all())


def _full_strided_slice(node: Node) -> bool:
    """As ``_full_slice``, a masked begin or end counting as 0 or "to the end", with no new,
    shrunk or ellipsis axes."""
    if any(node.new_axis_mask) or any(node.shrink_axis_mask) or any(node.ellipsis_mask):
        return False
    steps = const_value(node.input_value(3)) if node.get_input_size() > 3 else None
    if steps is None or not (steps > 0).all():
        return False
    if _same_static_shape(node):
        return True
    begin, end = const_value(node.input_value(1)), const_value(node.input_value(2))
    if begin is None or end is None or not (steps == 1).all():
        return False
    bm, em = node.begin_mask, node.end_mask
    return all((i < len(bm) and bm[i]) or b == 0 for i, b in enumerate(begin.reshape(-1))) \
        and all((i < len(em) and em[i]) or e >= _TO_THE_END for i, e in enumerate(end.reshape(-1)))


NOP_RULES: dict[type[Node], Callable[[Node], bool]] = {
    Reshape: _same_shape,
    Squeeze: _same_shape,
    Unsqueeze: _same_shape,
    Broadcast: _same_static_shape,
    Tile: _tile_by_ones,
    Gather: _whole_gather,
    Transpose: _identity_order,
    Convert: lambda n: n.get_input_element_type(0) == n.get_output_element_type(0),
    Concat: lambda n: n.get_input_size() == 1,
    Pad: _zero_pads,
    Slice: _full_slice,
    StridedSlice: _full_strided_slice,
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
