"""ReshapeSequenceFusion (Reshape -> Reshape becomes one Reshape), ReshapeElementwiseReorder
(Reshape -> unary elementwise op -> Reshape: the op moves first, so the Reshapes fuse) and
TransposeToReshape (a Transpose that keeps the order of every dimension larger than 1 only
moves 1s: a Reshape)."""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...ops.base import UnaryElementwiseArithmetic
from ...ops.elementwise import Clamp, Elu, HardSigmoid, Selu, SoftPlus, Swish
from ...ops.movement import Reshape, Transpose
from ...passes import MatcherPass
from ...pattern import Matcher, any_input, wrap_type
from ..utils import UNARY_TYPES, const, const_value, make, static_shape


class ReshapeSequenceFusion(MatcherPass):
    """Reshape -> Reshape becomes one Reshape."""

    def __init__(self) -> None:
        super().__init__()
        first = wrap_type(Reshape, [any_input(), any_input()])
        last = wrap_type(Reshape, [first, any_input()],
                         predicate=lambda o: o.partial_shape.is_static)

        def callback(m: Matcher) -> bool:
            root = m.match_root
            if self.transformation_callback(root):
                return False
            inner = m.pattern_value_map[first].node
            src = inner.input_value(0)
            if src.partial_shape.is_static and tuple(src.shape) == tuple(root.output(0).shape):
                return replace_output_update_name(root.output(0), src)   # the pair changes nothing
            fused = make(Reshape, [src, const(np.array(root.output(0).shape, np.int64))],
                         special_zero=False)
            copy_runtime_info([inner, root], fused)
            if not replace_output_update_name(root.output(0), fused.output(0)):
                return False
            self.register_new_node(fused)
            return True

        self.register_matcher(Matcher(last, "ReshapeSequenceFusion"), callback)


def _unary_between_reshapes(out) -> bool:
    """A single-consumer Reshape feeding an elementwise unary op whose consumers are all
    Reshapes (so that moving the op first makes Reshape -> Reshape pairs)."""
    reshape = out.node
    cons = out.consumers()
    if not isinstance(reshape, Reshape) or len(cons) != 1:
        return False
    op = cons[0].node
    if not isinstance(op, UNARY_TYPES) or hasattr(op, "axis") or op.get_output_size() != 1:
        return False
    after = op.output(0).consumers()
    return bool(after) and all(isinstance(c.node, Reshape) and c.index == 0 for c in after)


class ReshapeElementwiseReorder(MatcherPass):
    """Moves a unary elementwise op out of a Reshape pair.

    ``Reshape -> op -> Reshape`` with ``op`` unary elementwise becomes ``op -> Reshape ->
    Reshape`` (values are the same: an elementwise op does not see the shape), which
    ReshapeSequenceFusion makes one Reshape and NopElimination removes when it changes
    nothing. Layout sinking cannot cross a Reshape; a Reshape pair around an activation thus
    no longer stops it."""

    def __init__(self) -> None:
        super().__init__()
        reshape = wrap_type(Reshape, [any_input(), any_input()],
                            predicate=_unary_between_reshapes)
        pattern = wrap_type((UnaryElementwiseArithmetic, Clamp, Elu, SoftPlus, Swish, HardSigmoid,
                             Selu), [reshape])

        def callback(m: Matcher) -> bool:
            op = m.match_root
            r = m.pattern_value_map[reshape].node
            if self.transformation_callback(op):
                return False
            op.input(0).replace_source_output(r.input_value(0))
            op.validate_and_infer_types()
            out = op.output(0)
            moved = make(Reshape, [out, r.input_value(1)], special_zero=r.special_zero)
            out.replace(moved.output(0))
            moved.friendly_name, op.friendly_name = op.friendly_name, moved.name
            copy_runtime_info([r, op], moved)
            self.register_new_node(moved)
            return True

        self.register_matcher(Matcher(pattern, "ReshapeElementwiseReorder"), callback)


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
        pattern = wrap_type(Transpose, predicate=_moves_only_ones)

        def callback(m: Matcher) -> bool:
            t = m.match_root
            if self.transformation_callback(t):
                return False
            r = make(Reshape, [t.input_value(0), const(np.array(t.output(0).shape, np.int64))],
                     special_zero=False)
            copy_runtime_info(t, r)
            return replace_output_update_name(t.output(0), r.output(0))

        self.register_matcher(Matcher(pattern, "TransposeToReshape"), callback)
