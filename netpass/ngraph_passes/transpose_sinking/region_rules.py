"""What each backward sinking member does to the op it moves a Transpose above, for
TSBackwardRegions: the inputs that get the Transpose, its order there, the rank constants on
them are unsqueezed to, and the op's own change (its axes). Each rule mirrors the member's
``applicable`` and ``sink``; None: the member does not apply (the next one may), UNSUPPORTED: it
may apply in a way the sweep does not model (the sweep then leaves the model to the
step-by-step traversal)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...core.node import Node
from ..utils import reverse_order, static_rank
from .concat_split import TSConcatBackward, TSSplitBackward, _norm, _set_split_axis, _split_axis
from .data_movement import (
    TSDataMovementBackward,
    TSSliceBackward,
    _pads_constant,
    _permute_params,
    _reslice,
    _slice_axes,
)
from .elementwise import (
    TSBinaryBackward,
    TSUnaryBackward,
    _elementwise,
    _static_ranks,
    per_channel_prelu,
)
from .reduction import TSReductionBackward, _const_axes, _set_values
from .utils import max_input_rank, order_before_reduction


@dataclass(slots=True)
class Plan:
    """A backward step on an op: ``order`` goes onto inputs ``indices`` (constants among them
    are transposed at once, unsqueezed to ``rank``); ``rewrite`` changes the op's axes and
    returns it (a Slice is rebuilt); ``matched``: ``order`` is the matched Transposes' own
    order (their order Constant is reused, as a step does)."""

    indices: list[int]
    order: list[int]
    rank: int | None
    rewrite: Callable[[Node], Node]
    matched: bool = True


class _Unsupported:
    pass


UNSUPPORTED = _Unsupported()
Rule = Callable[[Node, list], Plan | None | _Unsupported]


def _same(node: Node) -> Node:
    return node


def _unary(main: Node, order: list) -> Plan | None:
    if not (_elementwise(main) and main.get_output_size() == 1):
        return None
    return Plan([0], order, max_input_rank(main, [0]), _same)


def _binary(main: Node, order: list) -> Plan | None | _Unsupported:
    if not (_static_ranks(main) and static_rank(main.output(0)) == len(order)):
        return None
    if per_channel_prelu(main):
        return UNSUPPORTED
    indices = list(range(main.get_input_size()))
    return Plan(indices, order, max_input_rank(main, indices), _same)


def _concat(main: Node, order: list) -> Plan | None:
    if not all(static_rank(v) == len(order) for v in main.input_values()):
        return None
    axis = reverse_order(order)[_norm(main.axis, len(order))]

    def rewrite(node: Node) -> Node:
        node.axis = axis
        return node
    indices = list(range(main.get_input_size()))
    return Plan(indices, order, max_input_rank(main, indices), rewrite)


def _split(main: Node, order: list) -> Plan | None:
    old = _split_axis(main)
    if old is None or static_rank(main.input_value(0)) != len(order):
        return None
    axis = reverse_order(order)[old]

    def rewrite(node: Node) -> Node:
        _set_split_axis(node, axis)
        return node
    return Plan([0], order, max_input_rank(main, [0]), rewrite)


def _pad(main: Node, order: list) -> Plan | None:
    if not (_pads_constant(main) and static_rank(main.input_value(0)) == len(order)):
        return None

    def rewrite(node: Node) -> Node:
        _permute_params(node, order)
        return node
    return Plan([0], order, max_input_rank(main, [0]), rewrite)


def _reduction(main: Node, order: list) -> Plan | None:
    axes = _const_axes(main, static_rank(main.input_value(0)))
    if axes is None:
        return None
    matched = bool(main.keep_dims)
    in_order = order if matched else order_before_reduction(axes, order)
    rev = reverse_order(in_order)
    values = [rev[a] for a in axes]

    def rewrite(node: Node) -> Node:
        _set_values(node, values)
        return node
    return Plan([0], in_order, max_input_rank(main, [0]), rewrite, matched)


def _slice(main: Node, order: list) -> Plan | None:
    axes = _slice_axes(main)
    if axes is None or static_rank(main.input_value(0)) != len(order):
        return None
    rev = reverse_order(order)
    new_axes = [rev[a] for a in axes]
    return Plan([0], order, max_input_rank(main, [0]), lambda node: _reslice(node, new_axes))


def _unsupported(main: Node, order: list) -> _Unsupported:
    return UNSUPPORTED


# The backward members' rules (Squeeze and Unsqueeze have none: UNSUPPORTED).
RULES: dict[type, Rule] = {
    TSUnaryBackward: _unary, TSBinaryBackward: _binary, TSConcatBackward: _concat,
    TSSplitBackward: _split, TSDataMovementBackward: _pad, TSReductionBackward: _reduction,
    TSSliceBackward: _slice,
}


def rules_for(cls: type, members: tuple[type, ...]) -> list[Rule]:
    """The rules of the backward ``members`` (in order) whose op types include ``cls``."""
    found = []
    for m in members:
        types = getattr(m, "TYPES", ())
        if types and issubclass(cls, types):
            found.append(RULES.get(m, _unsupported))
    return found
