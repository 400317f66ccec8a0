"""ReshapeSequenceFusion (Reshape -> Reshape becomes one Reshape), ReshapeElementwiseReorder
(Reshape -> unary elementwise op -> Reshape: the op moves first, so the Reshapes fuse) and
TransposeToReshape (a Transpose that keeps the order of every dimension larger than 1 only
moves 1s: a Reshape)."""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...ops.base import UnaryElementwiseArithmetic
from ...ops.elementwise import Clamp, Elu, HardSigmoid, Selu, SoftPlus, Swish
from ...ops.indexing import Gather
from ...ops.movement import Reshape, Transpose
from ...ops.shape_ops import ShapeOf
from ...passes import MatcherPass
from ...pattern import Matcher, any_input, wrap_type
from ..utils import UNARY_TYPES, const, const_value, make


def _pattern_alone_decides(out) -> bool:
    """Whether the Reshape's target shape follows from its pattern alone, whatever its input's
    shape: an output shape known in full, or a pattern without special zeros (``special_zero``
    off, or a constant pattern with no 0: a 0 would copy a dim of the input, which fusion
    changes). OpenVINO's ReshapeSequenceFusion then reconnects the last Reshape to the first
    one's input."""
    node = out.node
    if out.partial_shape.is_static or not node.special_zero:
        return True
    pattern = const_value(node.input_value(1))
    return pattern is not None and bool((pattern != 0).all())


class ReshapeSequenceFusion(MatcherPass):
    """Reshape -> Reshape becomes one Reshape.

    A static result becomes ``Reshape(x, its shape)`` (or nothing when it is x's shape); a
    dynamic one keeps the last Reshape, reconnected to the first one's input, when its pattern
    alone decides the shape (see ``_pattern_alone_decides``)."""

    def __init__(self) -> None:
        super().__init__()
        first = wrap_type(Reshape, [any_input(), any_input()])
        last = wrap_type(Reshape, [first, any_input()], predicate=_pattern_alone_decides)

        def callback(m: Matcher) -> bool:
            root = m.match_root
            if self.transformation_callback(root):
                return False
            inner = m.pattern_value_map[first].node
            src = inner.input_value(0)
            if not root.output(0).partial_shape.is_static:
                root.input(0).replace_source_output(src)
                root.validate_and_infer_types()
                copy_runtime_info([inner, root], root)
                return True
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


def _order(node) -> list[int] | None:
    """The Transpose's order over a static-rank input (an empty order reverses the axes)."""
    order = const_value(node.input_value(1))
    ps = node.get_input_partial_shape(0)
    if order is None or not ps.rank_is_static:
        return None
    if order.size == 0:
        return list(range(len(ps)))[::-1]
    return [int(a) for a in order.reshape(-1)]


def _moves_only_ones(out) -> bool:
    """The Transpose keeps the order of every dim that is not a static 1 (OpenVINO's test: a
    dynamic dim counts as one that may be larger than 1)."""
    order = _order(out.node)
    if order is None:
        return False
    ps = out.node.get_input_partial_shape(0)
    kept = [a for a in order if not (ps[a].is_static and ps[a].get_length() == 1)]
    return kept == sorted(kept)


class TransposeToReshape(MatcherPass):
    """A Transpose moving only size-1 axes -> a Reshape (or nothing).

    As OpenVINO's: a Transpose that moves only static 1s (or nothing) is bypassed; else it
    becomes a Reshape to its output shape when that is static, to a constant pattern with
    ``special_zero`` (0 for the dims that stay, -1 for the one dynamic dim that moves) when at
    most one dynamic dim moves, else to ``Gather(ShapeOf(x), order)``."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(Transpose, predicate=_moves_only_ones)

        def callback(m: Matcher) -> bool:
            t = m.match_root
            if self.transformation_callback(t):
                return False
            order = _order(t)  # (known: the pattern's predicate)
            if order is None:
                return False
            data = t.input_value(0)
            ps = data.partial_shape
            moved = [(i, ps[a]) for i, a in enumerate(order) if a != i]
            if all(d.is_static and d.get_length() == 1 for _, d in moved):
                return replace_output_update_name(t.output(0), data)
            new = []
            if t.output(0).partial_shape.is_static:
                shape = const(np.array(t.output(0).shape, np.int64))
                special_zero = False
            elif sum(d.is_dynamic for _, d in moved) < 2:
                pattern_value = np.zeros(len(order), np.int64)
                for i, d in moved:
                    pattern_value[i] = -1 if d.is_dynamic else d.get_length()
                shape, special_zero = const(pattern_value), True
            else:
                new.append(make(ShapeOf, [data]))
                shape = make(Gather, [new[0], const(np.array(order, np.int64)),
                                      const(np.array([0], np.int64))]).output(0)
                new.append(shape.node)
                special_zero = True
            r = make(Reshape, [data, shape], special_zero=special_zero)
            copy_runtime_info(t, new + [r])
            return replace_output_update_name(t.output(0), r.output(0))

        self.register_matcher(Matcher(pattern, "TransposeToReshape"), callback)
