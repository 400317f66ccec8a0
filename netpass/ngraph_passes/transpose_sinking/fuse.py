"""TSFuse: ``Transpose(Transpose(x, o1), o2)`` -> ``Transpose(x, o1[o2])``, or nothing at all
when the composed order is the identity."""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_node, replace_output_update_name
from ...passes import MatcherPass
from ...pattern import Matcher, any_input, wrap_type
from ..utils import const, make, op_types
from .attr import is_sinking_disabled, mark_as_no_sinking
from .utils import is_const_transpose, transpose_order


class TSFuse(MatcherPass):
    """Fuses consecutive Transposes into one, or none when they cancel."""

    def __init__(self) -> None:
        super().__init__()
        order = lambda o: is_const_transpose(o.node)  # noqa: E731
        first = wrap_type(op_types("Transpose"), [any_input(), any_input()], predicate=order)
        second = wrap_type(op_types("Transpose"), [first, any_input()], predicate=order)

        def callback(m: Matcher) -> bool:
            t2 = m.match_root
            t1 = m.pattern_value_map[first].node
            if self.transformation_callback(t2):
                return False
            o1, o2 = transpose_order(t1), transpose_order(t2)
            fused = [o1[i] for i in o2]
            if fused == sorted(fused):
                return replace_output_update_name(t2.output(0), t1.input_value(0))
            et = t1.input_value(1).element_type
            if et != t2.input_value(1).element_type:
                et = "i64"
            new = make("Transpose", [t1.input_value(0), const(np.array(fused), et)])
            new.friendly_name = t2.friendly_name
            copy_runtime_info([t1, t2], new)
            if is_sinking_disabled(t2):
                mark_as_no_sinking(new)
            replace_node(t2, new)
            self.register_new_node(new)
            return True

        self.register_matcher(Matcher(second, "TSFuse"), callback)
