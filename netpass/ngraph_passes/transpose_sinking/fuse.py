"""TSFuse: ``Transpose(Transpose(x, o1), o2)`` -> ``Transpose(x, o1[o2])``, or nothing at all
when the composed order is the identity.

As OpenVINO's: the first Transpose's consumers must all be Transposes with one order (they are
all replaced), the new Transpose takes the second's friendly name, and it is marked
``no_transpose_sinking`` when a consumer is an op forward sinking cannot pass (so a Transpose
fused right before a Result stays there through the backward stage).

TSFuseShared (netpass's, not OpenVINO's) fuses the second Transpose alone when the first has
other consumers too; the GNA pipeline's RescueStuckTransposes runs it (see there).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.boundary import Constant
from ...core.graph_util import copy_runtime_info, replace_node, replace_output_update_name
from ...core.node import Node
from ...core.types import Type
from ...ops.movement import Transpose
from ...passes import MatcherPass
from ...pattern import Matcher, any_input, wrap_type
from ..utils import const, graph_consumers
from .utils import (
    remove_transpose_consumers,
    same_order_transpose_consumers,
    transpose_order,
    update_forward_sinking_ability,
)


def fused_order(t1: Node, t2: Node) -> list[int] | None:
    """The order of ``Transpose(Transpose(x, o1), o2)`` as one Transpose of ``x``: ``o1[o2]``
    (None when the orders do not compose)."""
    o1, o2 = transpose_order(t1), transpose_order(t2)
    if o1 is None or o2 is None or len(o1) != len(o2) or any(i >= len(o1) for i in o2):
        return None
    return [o1[i] for i in o2]


def is_identity(order: list[int]) -> bool:
    return order == list(range(len(order)))


def matched_pair(
    rewrite: MatcherPass, m: Matcher, first: Any
) -> tuple[Node, Node, list[int]] | None:
    """The matched ``(first, second, fused order)`` of a Transpose pair, or None when the user's
    callback keeps the second or the orders do not compose."""
    t2 = m.match_root
    t1 = m.pattern_value_map[first].node
    if rewrite.transformation_callback(t2):
        return None
    fused = fused_order(t1, t2)
    return None if fused is None else (t1, t2, fused)


class TSFuse(MatcherPass):
    """Fuses consecutive Transposes into one, or none when they cancel.

    The fused Transpose is marked ``no_transpose_sinking`` when a consumer is an op forward
    sinking cannot pass (as OpenVINO's TSFuse does: the backward stage after forward sinking
    must leave it); ``mark_fused=False`` leaves it unmarked, for a backward stage that no
    forward stage preceded (the GNA pipeline's RescueStuckTransposes), where the mark would
    only stop the fused Transpose from moving on."""

    def __init__(self, mark_fused: bool = True) -> None:
        super().__init__()
        first = wrap_type(Transpose, [any_input(), wrap_type(Constant)],
                          predicate=lambda o: same_order_transpose_consumers(o.node) is not None)
        second = wrap_type(Transpose, [first, wrap_type(Constant)])

        def callback(m: Matcher) -> bool:
            pair = matched_pair(self, m, first)
            if pair is None:
                return False
            t1, t2, fused = pair
            x = t1.input_value(0)
            if is_identity(fused):
                # (replace_output_update_name refuses some pairs, e.g. a Parameter to a Result)
                replaced = [replace_output_update_name(c.node.output(0), x)
                            for c in graph_consumers(t1.output(0))]
                return any(replaced)
            et = t1.input_value(1).element_type
            if et != t2.input_value(1).element_type:
                et = Type.of("i64")
            # (a composition of two valid orders of x's rank: no inference needed)
            new = Transpose.of(x, const(np.array(fused), et), fused)
            new.friendly_name = t2.friendly_name
            remove_transpose_consumers(t1)
            copy_runtime_info(t1, new)
            replace_node(t1, new)
            if mark_fused:
                update_forward_sinking_ability(new)
            self.register_new_node(new)
            return True

        self.register_matcher(Matcher(second, "TSFuse"), callback)


class TSFuseShared(MatcherPass):
    """Fuses Transpose(Transpose) also when the first has other consumers.

    ``Transpose(Transpose(x, o1), o2)`` -> ``Transpose(x, o1[o2])`` for the second Transpose
    alone (named, rt_info and no-sinking mark as in TSFuse), or ``x`` when ``o1[o2]`` is the
    identity; the first keeps its other consumers, so no op is added. OpenVINO's TSFuse needs
    every consumer of the first to be a same-order Transpose, and forward sinking leaves pairs
    whose first Transpose feeds other ops too: ``d * d`` of a layer norm gets the inverse of
    ``d``'s Transpose on its second input while ``d * rsqrt(var)`` still reads that Transpose;
    a Transpose feeds a Result and a Transpose. netpass's RescueStuckTransposes runs this pass
    in its forward stage.
    """

    def __init__(self) -> None:
        super().__init__()
        first = wrap_type(Transpose, [any_input(), wrap_type(Constant)])
        second = wrap_type(Transpose, [first, wrap_type(Constant)])

        def callback(m: Matcher) -> bool:
            pair = matched_pair(self, m, first)
            if pair is None:
                return False
            t1, t2, fused = pair
            x = t1.input_value(0)
            if is_identity(fused):
                return replace_output_update_name(t2.output(0), x)
            new = Transpose.of(x, const(np.array(fused), t2.input_value(1).element_type), fused)
            new.friendly_name = t2.friendly_name
            copy_runtime_info(t2, new)
            replace_node(t2, new)
            update_forward_sinking_ability(new)
            self.register_new_node(new)
            return True

        self.register_matcher(Matcher(second, "TSFuseShared"), callback)
