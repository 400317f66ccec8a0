"""TSFuse: ``Transpose(Transpose(x, o1), o2)`` -> ``Transpose(x, o1[o2])``, or nothing at all
when the composed order is the identity.

As OpenVINO's: the first Transpose's consumers must all be Transposes with one order (they are
all replaced), the new Transpose takes the second's friendly name, and it is marked
``no_transpose_sinking`` when a consumer is an op forward sinking cannot pass (so a Transpose
fused right before a Result stays there through the backward stage).
"""
from __future__ import annotations

import numpy as np

from ...core.boundary import Constant
from ...core.graph_util import copy_runtime_info, replace_node, replace_output_update_name
from ...ops.movement import Transpose
from ...passes import MatcherPass
from ...pattern import Matcher, any_input, wrap_type
from ..utils import const, graph_consumers, make
from .utils import (
    remove_transpose_consumers,
    same_order_transpose_consumers,
    transpose_order,
    update_forward_sinking_ability,
)


class TSFuse(MatcherPass):
    """Fuses consecutive Transposes into one, or none when they cancel."""

    def __init__(self) -> None:
        super().__init__()
        first = wrap_type(Transpose, [any_input(), wrap_type(Constant)],
                          predicate=lambda o: same_order_transpose_consumers(o.node) is not None)
        second = wrap_type(Transpose, [first, wrap_type(Constant)])

        def callback(m: Matcher) -> bool:
            t2 = m.match_root
            t1 = m.pattern_value_map[first].node
            if self.transformation_callback(t2):
                return False
            o1, o2 = transpose_order(t1), transpose_order(t2)
            if len(o1) != len(o2) or any(i >= len(o1) for i in o2):
                return False
            fused = [o1[i] for i in o2]
            x = t1.input_value(0)
            if fused == list(range(len(fused))):
                # (replace_output_update_name refuses some pairs, e.g. a Parameter to a Result)
                replaced = [replace_output_update_name(c.node.output(0), x)
                            for c in graph_consumers(t1.output(0))]
                return any(replaced)
            et = t1.input_value(1).element_type
            if et != t2.input_value(1).element_type:
                et = "i64"
            new = make(Transpose, [x, const(np.array(fused), et)])
            new.friendly_name = t2.friendly_name
            remove_transpose_consumers(t1)
            copy_runtime_info(t1, new)
            replace_node(t1, new)
            update_forward_sinking_ability(new)
            self.register_new_node(new)
            return True

        self.register_matcher(Matcher(second, "TSFuse"), callback)
