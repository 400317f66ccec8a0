"""TSDataMovementForward/Backward (Pad; netpass has no ReverseSequence op yet) and
TSSliceForward/Backward: the per-axis parameters are permuted with the order (pads gathered by
``reverse(order)`` forward, by ``order`` backward; axis attributes and Slice axes renumbered)."""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_node
from ...core.node import Node
from ...errors import NetpassError
from ...ops.movement import Slice
from ...ops.pad import Pad
from ..utils import const, const_value, normalize_axes, reverse_order, static_rank
from .base import TSBackwardBase, TSForwardBase
from .utils import insert_output_transposes, sink_backward, sink_forward

MOVEMENT_TYPES = (Pad,)


def _pads_constant(main: Node) -> bool:
    return not isinstance(main, Pad) or all(const_value(main.input_value(i)) is not None
                                          for i in (1, 2))


def _permute_params(main: Node, perm: list[int]) -> None:
    """Pads take ``pads[perm]``; ReverseSequence axes map through ``perm``'s inverse."""
    if isinstance(main, Pad):
        for i in (1, 2):
            v = const_value(main.input_value(i))
            if v is None:  # (ruled out by _pads_constant)
                raise NetpassError(f"Pad '{main.friendly_name}': input {i} is not a constant")
            main.input(i).replace_source_output(const(v[perm], main.input_value(i).element_type))
    else:
        inv = reverse_order(perm)
        rank = len(perm)
        main.batch_axis = inv[normalize_axes([main.batch_axis], rank)[0]]
        main.seq_axis = inv[normalize_axes([main.seq_axis], rank)[0]]


class TSDataMovementForward(TSForwardBase):
    """Moves a Transpose below Pad or ReverseSequence, permuting their axes."""

    TYPES, INDICES = MOVEMENT_TYPES, (0,)

    def applicable(self, main, info):
        return _pads_constant(main)

    def sink(self, main, info):
        _permute_params(main, reverse_order(info.order))
        return sink_forward(main, info, indices=[0], permutes=True)


class TSDataMovementBackward(TSBackwardBase):
    """Moves a Transpose above Pad or ReverseSequence, permuting their axes."""

    TYPES = MOVEMENT_TYPES

    def applicable(self, main, order):
        return _pads_constant(main) and static_rank(main.input_value(0)) == len(order)

    def sink(self, main, order, order_type):
        _permute_params(main, order)
        return sink_backward(main, order, order_type, [0])


def _slice_axes(main: Node) -> list[int] | None:
    rank = static_rank(main.input_value(0))
    if rank is None:
        return None
    if main.get_input_size() == 5:
        v = const_value(main.input_value(4))
        return None if v is None else normalize_axes(v.reshape(-1), rank)
    n = main.input_value(1).partial_shape
    return list(range(n[0].get_length())) if n.is_static and len(n) == 1 else None


def _reslice(main: Node, axes: list[int]) -> Node:
    """A Slice like ``main`` with explicit ``axes`` (i32, as OpenVINO gathers them from an i32
    order), put in its place with ``main``'s output state: the callers give it its new input
    (forward) or its input Transposes (backward) and its shapes right after."""
    ins = main.input_values()[:4] + [const(np.array(axes, np.int32))]
    new = Slice.like(main, ins)
    new.friendly_name = main.friendly_name
    copy_runtime_info(main, new)
    replace_node(main, new)
    return new


class TSSliceForward(TSForwardBase):
    """Moves a Transpose below a Slice, renumbering its axes."""

    TYPES, INDICES = (Slice,), (0,)

    def applicable(self, main, info):
        return _slice_axes(main) is not None

    def sink(self, main, info):
        axes = [info.order[a] for a in _slice_axes(main)]
        new = _reslice(main, axes)
        new.input(0).replace_source_output(info.transpose.input_value(0))
        new.validate_and_infer_types()
        return insert_output_transposes(new, info.order, info.order_type)


class TSSliceBackward(TSBackwardBase):
    """Moves a Transpose above a Slice, renumbering its axes."""

    TYPES = (Slice,)

    def applicable(self, main, order):
        return _slice_axes(main) is not None and static_rank(main.input_value(0)) == len(order)

    def sink(self, main, order, order_type):
        rev = reverse_order(order)
        new = _reslice(main, [rev[a] for a in _slice_axes(main)])
        return sink_backward(new, order, order_type, [0])
