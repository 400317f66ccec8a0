"""ReshapeSequenceFusion (Reshape -> Reshape becomes one Reshape) and TransposeToReshape (a
Transpose that keeps the order of every dimension larger than 1 only moves 1s: a Reshape)."""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...passes import MatcherPass
from ...pattern import Matcher, any_input, wrap_type
from ..utils import const, const_value, make, op_types, static_shape


class ReshapeSequenceFusion(MatcherPass):
    """Reshape -> Reshape becomes one Reshape."""

    def __init__(self) -> None:
        super().__init__()
        first = wrap_type(op_types("Reshape"), [any_input(), any_input()])
        last = wrap_type(op_types("Reshape"), [first, any_input()],
                         predicate=lambda o: o.partial_shape.is_static)

        def callback(m: Matcher) -> bool:
            root = m.match_root
            if self.transformation_callback(root):
                return False
            inner = m.pattern_value_map[first].node
            fused = make("Reshape", [inner.input_value(0), const(np.array(root.output(0).shape, np.int64))],
                         special_zero=False)
            copy_runtime_info([inner, root], fused)
            return replace_output_update_name(root.output(0), fused.output(0))

        self.register_matcher(Matcher(last, "ReshapeSequenceFusion"), callback)


def _moves_only_ones(out) -> bool:
    node = out.node
    order = const_value(node.input_value(1))
    shape = static_shape(node.input_value(0))
    if order is None or shape is None:
        return False
    if order.size == 0:  # an empty order reverses the dimensions
        order = np.arange(len(shape))[::-1]
    kept = [int(a) for a in order.reshape(-1) if shape[int(a)] != 1]
    return kept == sorted(kept)


class TransposeToReshape(MatcherPass):
    """A Transpose that only moves size-1 axes -> a Reshape."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(op_types("Transpose"), predicate=_moves_only_ones)

        def callback(m: Matcher) -> bool:
            t = m.match_root
            if self.transformation_callback(t):
                return False
            r = make("Reshape", [t.input_value(0), const(np.array(t.output(0).shape, np.int64))],
                     special_zero=False)
            copy_runtime_info(t, r)
            return replace_output_update_name(t.output(0), r.output(0))

        self.register_matcher(Matcher(pattern, "TransposeToReshape"), callback)
