"""TSReductionForward/Backward (ReduceX with keep_dims true or false) and
TSSqueezeForward/Backward, TSUnsqueezeForward/Backward: the reduced, squeezed or inserted axes
are renumbered; when the rank changes the Transpose's order is recomputed."""
from __future__ import annotations

import numpy as np

from ...core.node import Node
from ..utils import const, const_value, normalize_axes, reverse_order, static_rank, static_shape
from .base import TSBackwardBase, TSForwardBase
from .utils import axes_after_reduction, order_before_reduction, sink_backward, sink_forward

REDUCTION_TYPES = ("ArithmeticReductionKeepDims", "LogicalReductionKeepDims")


def _axes(main: Node) -> list[int] | None:
    """Constant reduction/squeeze axes, normalized; Squeeze without axes: the static 1-dims."""
    rank = static_rank(main.input_value(0))
    if rank is None:
        return None
    if main.get_input_size() < 2:
        shape = static_shape(main.input_value(0))
        return None if shape is None else [i for i, d in enumerate(shape) if d == 1]
    v = const_value(main.input_value(1))
    return None if v is None else sorted(set(normalize_axes(v.reshape(-1), rank)))


def _set_axes(main: Node, axes: list[int]) -> None:
    value = const(np.array(axes, np.int64))
    if main.get_input_size() < 2:
        main.set_arguments([main.input_value(0), value])
    else:
        main.input(1).replace_source_output(value)


class TSReductionForward(TSForwardBase):
    """Moves a Transpose below a reduction, renumbering the reduced axes."""

    TYPES, INDICES = REDUCTION_TYPES, (0,)

    def applicable(self, main, info):
        return _axes(main) is not None

    def sink(self, main, info):
        axes = _axes(main)
        _set_axes(main, [info.order[a] for a in axes])
        out = info.order if main.keep_dims else axes_after_reduction(axes, info.order)
        return sink_forward(main, info, out, [0])


class TSReductionBackward(TSBackwardBase):
    """Moves a Transpose above a reduction, renumbering the reduced axes."""

    TYPES = REDUCTION_TYPES

    def applicable(self, main, order):
        return _axes(main) is not None

    def sink(self, main, order, order_type):
        axes, rank = _axes(main), static_rank(main.input_value(0))
        if main.keep_dims:
            rev = reverse_order(order)
            _set_axes(main, sorted(rev[a] for a in axes))
            return sink_backward(main, order, order_type, [0])
        _set_axes(main, list(range(rank - len(axes), rank)))
        return sink_backward(main, order_before_reduction(axes, order, rank), order_type, [0])


class TSSqueezeForward(TSForwardBase):
    """Moves a Transpose below a Squeeze, recomputing its order."""

    TYPES, INDICES = ("Squeeze",), (0,)

    def applicable(self, main, info):
        return _axes(main) is not None

    def sink(self, main, info):
        axes = _axes(main)
        _set_axes(main, [info.order[a] for a in axes])
        return sink_forward(main, info, axes_after_reduction(axes, info.order), [0])


class TSSqueezeBackward(TSBackwardBase):
    """Moves a Transpose above a Squeeze, recomputing its order."""

    TYPES = ("Squeeze",)

    def applicable(self, main, order):
        return _axes(main) is not None

    def sink(self, main, order, order_type):
        axes, rank = _axes(main), static_rank(main.input_value(0))
        _set_axes(main, list(range(rank - len(axes), rank)))
        return sink_backward(main, order_before_reduction(axes, order, rank), order_type, [0])


def _unsqueeze_axes(main: Node) -> list[int] | None:
    rank, v = static_rank(main.output(0)), const_value(main.input_value(1))
    return None if rank is None or v is None else sorted(set(normalize_axes(v.reshape(-1), rank)))


class TSUnsqueezeForward(TSForwardBase):
    """Moves a Transpose below an Unsqueeze, recomputing its order.

    ``Unsqueeze(T(x), A)`` = ``T'(Unsqueeze(x, trailing axes))``.
    """

    TYPES, INDICES = ("Unsqueeze",), (0,)

    def applicable(self, main, info):
        return _unsqueeze_axes(main) is not None

    def sink(self, main, info):
        axes = _unsqueeze_axes(main)
        rank, out_rank = len(info.order), len(info.order) + len(axes)
        new_axes, kept = iter(range(rank, out_rank)), iter(info.order)
        out = [next(new_axes) if j in axes else next(kept) for j in range(out_rank)]
        _set_axes(main, list(range(rank, out_rank)))
        return sink_forward(main, info, out, [0])


class TSUnsqueezeBackward(TSBackwardBase):
    """Moves a Transpose above an Unsqueeze, recomputing its order.

    ``T(Unsqueeze(x, A))`` = ``Unsqueeze(T'(x), A')`` with ``A' = {m : order[m] in A}``.
    """

    TYPES = ("Unsqueeze",)

    def applicable(self, main, order):
        return _unsqueeze_axes(main) is not None

    def sink(self, main, order, order_type):
        axes = _unsqueeze_axes(main)
        new_axes = [m for m in range(len(order)) if order[m] in axes]
        inner = [o - sum(1 for a in axes if a < o) for m, o in enumerate(order) if m not in new_axes]
        _set_axes(main, new_axes)
        return sink_backward(main, inner, order_type, [0])
