"""TSReductionForward/Backward and TSSqueezeForward/Backward, TSUnsqueezeForward/Backward: the
reduced, squeezed or inserted axes are renumbered through the order, in the order they are
given, and the axes Constant keeps its element type; when the rank changes the order is
recomputed (``order_after_reduction``: removed positions dropped; ``order_before_reduction``:
inserted positions stay in place). A Reshape that only removes (inserts) 1s is a Squeeze
(Unsqueeze) here, its target shape recomputed (OpenVINO's ts_reduction / ts_squeeze /
ts_unsqueeze)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.boundary import Constant
from ...core.node import Node
from ...core.types import Type
from ...ops.base import ArithmeticReductionKeepDims, LogicalReductionKeepDims
from ...ops.movement import Reshape, Squeeze, Transpose, Unsqueeze
from ...passes import MatcherPass
from ...pattern import Matcher, any_input, wrap_type
from ..utils import (
    const,
    const_value,
    graph_consumers,
    normalize_axes,
    reverse_order,
    static_rank,
    static_shape,
)
from .base import TSBackwardBase, TSForwardBase
from .utils import order_after_reduction, order_before_reduction, sink_backward, sink_forward

REDUCTION_TYPES = (ArithmeticReductionKeepDims, LogicalReductionKeepDims)


def _const_axes(main: Node, rank: int | None) -> list[int] | None:
    """The axes input as non-negative ints in their given order (None: not a Constant)."""
    v = const_value(main.input_value(1))
    if v is None or rank is None:
        return None
    return normalize_axes(v.reshape(-1).tolist(), rank)


def _set_values(main: Node, values: Sequence[int]) -> None:
    """Input 1 := a 1-D Constant of ``values`` with the old Constant's element type."""
    et = main.input_value(1).element_type
    main.input(1).replace_source_output(const(np.array(list(values), et.dtype).reshape(-1), et))


def _squeezed_positions(in_shape: Sequence[int], new_shape: Sequence[int]) -> list[int] | None:
    """Positions of ``in_shape`` a Reshape to ``new_shape`` drops when it only drops 1s."""
    if len(new_shape) >= len(in_shape):
        return None
    axes, j = [], 0
    for i, d in enumerate(in_shape):
        if j < len(new_shape) and new_shape[j] == d:
            j += 1
        elif d != 1:
            return None
        else:
            axes.append(i)
    return axes if j == len(new_shape) else None


def _unsqueezed_positions(in_shape: Sequence[int], new_shape: Sequence[int]) -> list[int] | None:
    """Positions of ``new_shape`` a Reshape from ``in_shape`` inserts when it only inserts 1s."""
    if len(new_shape) <= len(in_shape):
        return None
    axes, j = [], 0
    for i, d in enumerate(new_shape):
        if j < len(in_shape) and in_shape[j] == d:
            j += 1
        elif d != 1:
            return None
        else:
            axes.append(i)
    return axes if j == len(in_shape) else None


def _without(shape: Sequence[int], axes: Sequence[int]) -> list[int]:
    return [d for i, d in enumerate(shape) if i not in set(axes)]


def _with_ones(shape: Sequence[int], axes: Sequence[int]) -> list[int]:
    it = iter(shape)
    return [1 if i in set(axes) else next(it) for i in range(len(shape) + len(axes))]


def _reshape_target(main: Node) -> list[int] | None:
    """The shape a Reshape makes: its static output shape (an ONNX export's target holds 0s
    and -1s, ``[0, -1, T]``), else its constant target."""
    shape = static_shape(main.output(0))
    if shape is not None:
        return [int(d) for d in shape]
    v = const_value(main.input_value(1))
    return None if v is None else [int(d) for d in v.reshape(-1)]


class TSReductionAlign(MatcherPass):
    """Moves axis-dropping reductions onto a sibling Transpose of their data.

    netpass's: a reduction with ``keep_dims`` False reads its data in any order that keeps
    the other axes in theirs. Where data ``x`` feeds a Transpose and also
    such reductions (directly, or through another Transpose read only by them) whose kept
    axes that Transpose's order keeps alike, the reductions read that Transpose instead,
    their axes renumbered: ``x`` has one reader fewer, and backward sinking can take the
    Transpose on towards the inputs. A residual ``x + Unsqueeze(ReduceMean(x, keepdims=0))``
    left a Transpose before the Add: backward sinking through the reduction keeps the reduced
    axes in place (``order_before_reduction``), another order than the Add's other input's.
    RescueStuckTransposes runs it in its backward stage."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(Transpose, [any_input(), wrap_type(Constant)])

        def callback(m: Matcher) -> bool:
            x = m.get_match_root().input_value(0)
            rank = static_rank(x)
            if rank is None:
                return False
            orders = {}  # the Transposes of x: node -> order
            for c in graph_consumers(x):
                o = const_value(c.node.input_value(1)) if isinstance(c.node, Transpose) else None
                if o is not None and o.size == rank:
                    orders[c.node] = [int(v) for v in o.reshape(-1)]
            changed = False
            for c in graph_consumers(x):
                if isinstance(c.node, REDUCTION_TYPES) and c.index == 0:
                    changed |= _read_from_any([c.node], list(range(rank)), orders, None)
            for u, q in list(orders.items()):
                readers = graph_consumers(u.output(0))
                if readers and all(isinstance(r.node, REDUCTION_TYPES) and r.index == 0
                                   for r in readers):
                    changed |= _read_from_any([r.node for r in readers], q, orders, u)
            return changed

        self.register_matcher(Matcher(pattern, "TSReductionAlign"), callback)


def _read_from_any(readers: list, q: list[int], orders: dict, source: Node | None) -> bool:
    """Move every reduction of ``readers`` (reading their data through order ``q``, from
    ``source`` or, when None, directly) onto the first other Transpose of ``orders`` that
    takes them all (:func:`_aligned_axes`); whether they moved."""
    for v, p in orders.items():
        if v is source:
            continue
        axes = [_aligned_axes(r, q, p) for r in readers]
        if all(a is not None for a in axes):
            for r, a in zip(readers, axes):
                r.input(0).replace_source_output(v.output(0))
                _set_values(r, a)
            return True
    return False


def _aligned_axes(r: Node, q: list[int], p: list[int]) -> list[int] | None:
    """The axes of reduction ``r`` (reading its data through order ``q``) when it reads it
    through order ``p`` instead: where it drops its axes and both orders keep the others
    alike; else None."""
    axes = _const_axes(r, len(q))
    if axes is None or r.keep_dims:
        return None
    reduced = {q[a] for a in axes}
    if [a for i, a in enumerate(q) if i not in set(axes)] != [a for a in p if a not in reduced]:
        return None
    return [j for j, a in enumerate(p) if a in reduced]


class TSReductionForward(TSForwardBase):
    """Moves a Transpose below a reduction, renumbering the reduced axes."""

    TYPES, INDICES, MARK_ON_FAILURE = REDUCTION_TYPES, (0,), False

    def applicable(self, main, info):
        return _const_axes(main, static_rank(main.input_value(0))) is not None

    def sink(self, main, info):
        axes = _const_axes(main, static_rank(main.input_value(0)))
        _set_values(main, [info.order[a] for a in axes])
        out = info.order if main.keep_dims else order_after_reduction(axes, info.order)
        return sink_forward(main, info, out, [0])


class TSReductionBackward(TSBackwardBase):
    """Moves a Transpose above a reduction, renumbering the reduced axes."""

    TYPES = REDUCTION_TYPES

    def applicable(self, main, order):
        return _const_axes(main, static_rank(main.input_value(0))) is not None

    def sink(self, main, order, order_type):
        axes = _const_axes(main, static_rank(main.input_value(0)))
        if not main.keep_dims:
            order = order_before_reduction(axes, order)
        rev = reverse_order(order)
        _set_values(main, [rev[a] for a in axes])
        return sink_backward(main, order, order_type, [0])


def _squeeze_axes(main: Node, data_shape) -> list[int] | None:
    """Squeezed positions of the data: the axes input, a Reshape that drops 1s, or (no axes)
    every 1 of ``data_shape``."""
    if isinstance(main, Reshape):
        target, shape = _reshape_target(main), static_shape(main.input_value(0))
        return None if target is None or shape is None else _squeezed_positions(shape, target)
    axes = _const_axes(main, static_rank(main.input_value(0))) if main.get_input_size() > 1 else []
    if axes == [] and data_shape is not None:
        return [i for i, d in enumerate(data_shape) if d == 1]
    return axes or None


class TSSqueezeForward(TSForwardBase):
    """Moves a Transpose below a Squeeze or a 1s-dropping Reshape.

    The squeezed axes are renumbered (a Reshape's target shape recomputed)."""

    TYPES, INDICES, MARK_ON_FAILURE = (Squeeze, Reshape), (0,), False

    def applicable(self, main, info):
        return _squeeze_axes(main, static_shape(main.input_value(0))) is not None \
            and (not isinstance(main, Reshape)
                 or static_shape(info.transpose.input_value(0)) is not None)

    def sink(self, main, info):
        axes = _squeeze_axes(main, static_shape(main.input_value(0)))
        new = [info.order[a] for a in axes]
        if isinstance(main, Reshape):
            new = _without(static_shape(info.transpose.input_value(0)), sorted(new))
        if main.get_input_size() > 1:
            _set_values(main, new)
        return sink_forward(main, info, order_after_reduction(axes, info.order), [0])


class TSSqueezeBackward(TSBackwardBase):
    """Moves a Transpose above a Squeeze or a 1s-dropping Reshape.

    The squeezed axes are renumbered (a Reshape's target shape recomputed)."""

    TYPES = (Squeeze, Reshape)

    def applicable(self, main, order):
        return _squeeze_axes(main, static_shape(main.input_value(0))) is not None

    def sink(self, main, order, order_type):
        explicit = isinstance(main, Reshape) or (
            main.get_input_size() > 1 and _const_axes(main, static_rank(main.input_value(0))))
        axes = _squeeze_axes(main, static_shape(main.input_value(0)))
        order = order_before_reduction(axes, order)
        rev = reverse_order(order)
        new = [rev[a] for a in axes]
        if isinstance(main, Reshape):
            new = _without(_transposed_shape(main, order), sorted(new))
        if explicit:
            _set_values(main, new)
        return sink_backward(main, order, order_type, [0])


def _transposed_shape(main: Node, order: Sequence[int]) -> list[int]:
    shape = static_shape(main.input_value(0))
    return [shape[o] for o in order]


def _unsqueeze_axes(main: Node) -> list[int] | None:
    """Inserted positions: the axes input (normalized against the output rank) or those of a
    Reshape that only inserts 1s."""
    if isinstance(main, Reshape):
        target, shape = _reshape_target(main), static_shape(main.input_value(0))
        return None if target is None or shape is None else _unsqueezed_positions(shape, target)
    return _const_axes(main, static_rank(main.output(0)))


class TSUnsqueezeForward(TSForwardBase):
    """Moves a Transpose below an Unsqueeze or a 1s-adding Reshape.

    ``Unsqueeze(T(x), A)`` = ``T'(Unsqueeze(x, A))``: the new 1s stay where they are.
    """

    TYPES, INDICES = (Unsqueeze, Reshape), (0,)

    def applicable(self, main, info):
        return _unsqueeze_axes(main) is not None and (
            not isinstance(main, Reshape)
            or static_shape(info.transpose.input_value(0)) is not None)

    def sink(self, main, info):
        axes = _unsqueeze_axes(main)
        if isinstance(main, Reshape):
            _set_values(main, _with_ones(static_shape(info.transpose.input_value(0)), sorted(axes)))
        return sink_forward(main, info, order_before_reduction(axes, info.order), [0])


class TSUnsqueezeBackward(TSBackwardBase):
    """Moves a Transpose above an Unsqueeze or a 1s-adding Reshape.

    ``T(Unsqueeze(x, A))`` = ``Unsqueeze(T'(x), A')`` with ``A'`` where ``order`` puts ``A``.
    """

    TYPES = (Unsqueeze, Reshape)

    def applicable(self, main, order):
        return _unsqueeze_axes(main) is not None

    def sink(self, main, order, order_type: Type):
        axes = _unsqueeze_axes(main)
        if len(axes) == len(order):   # a scalar made a tensor of 1s: the Transpose does nothing
            for c in graph_consumers(main.output(0)):
                c.node.output(0).replace(main.output(0))
            return []
        rev = reverse_order(order)
        new = [rev[a] for a in axes]
        inner = order_after_reduction(new, order)
        if isinstance(main, Reshape):
            _set_values(main, _with_ones(_transposed_shape(main, inner), sorted(new)))
        else:
            _set_values(main, new)
        return sink_backward(main, inner, order_type, [0])
