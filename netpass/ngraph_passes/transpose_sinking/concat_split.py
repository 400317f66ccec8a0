"""TSConcatForward/Backward and TSSplitForward/Backward: the Transpose moves across and the
concat/split axis is renumbered (forward ``order[axis]``, backward ``reverse(order)[axis]``)."""
from __future__ import annotations

import numpy as np

from ...core.node import Node
from ...ops.movement import Concat, Split, VariadicSplit
from ..utils import const, const_value, reverse_order, static_rank
from .base import TSBackwardBase, TSForwardBase
from .utils import (
    TransposeInput,
    insert_transposes_before,
    remove_transpose_consumers,
    sink_forward,
)


def _norm(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _split_axis(node: Node) -> int | None:
    v = const_value(node.input_value(1))
    r = static_rank(node.input_value(0))
    return None if v is None or r is None else _norm(int(v.reshape(-1)[0]), r)


def _set_split_axis(node: Node, axis: int) -> None:
    old = node.input_value(1)
    node.input(1).replace_source_output(const(np.array(axis).reshape(old.shape), old.element_type))


class TSConcatForward(TSForwardBase):
    """Moves Transposes below a Concat, renumbering the concat axis."""

    TYPES = (Concat,)

    def applicable(self, main, info: TransposeInput):
        return all(static_rank(v) == len(info.order) for v in main.input_values())

    def sink(self, main, info):
        main.axis = info.order[_norm(main.axis, len(info.order))]
        return sink_forward(main, info, permutes=True)


class TSConcatBackward(TSBackwardBase):
    """Moves a Transpose above a Concat onto its inputs, renumbering the axis."""

    TYPES = (Concat,)

    def applicable(self, main, order):
        return all(static_rank(v) == len(order) for v in main.input_values())

    def sink(self, main, order, order_type):
        main.axis = reverse_order(order)[_norm(main.axis, len(order))]
        new = insert_transposes_before(main, order, order_type)
        main.validate_and_infer_types()
        remove_transpose_consumers(main)
        return new


class TSSplitForward(TSForwardBase):
    """Moves a Transpose below a Split onto its outputs, renumbering the axis."""

    TYPES, INDICES = (Split, VariadicSplit), (0,)

    def applicable(self, main, info):
        return _split_axis(main) is not None

    def sink(self, main, info):
        _set_split_axis(main, info.order[_split_axis(main)])
        return sink_forward(main, info, indices=[0], permutes=True)


class TSSplitBackward(TSBackwardBase):
    """Moves the Transposes after a Split above it, renumbering the axis."""

    TYPES = (Split, VariadicSplit)

    def applicable(self, main, order):
        return _split_axis(main) is not None and static_rank(main.input_value(0)) == len(order)

    def sink(self, main, order, order_type):
        _set_split_axis(main, reverse_order(order)[_split_axis(main)])
        new = insert_transposes_before(main, order, order_type, [0])
        main.validate_and_infer_types()
        remove_transpose_consumers(main)
        return new
