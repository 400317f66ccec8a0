"""SliceToStridedSlice: Slice-8 with constant start/stop/step/axes -> StridedSlice-1.

With ``use_shapes`` (the default, as the GNA pipeline runs it) the data rank must be static so
that negative axes resolve; the StridedSlice covers axes 0..max(axes), untouched ones masked.
"""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_node
from ...core.node import Node
from ...ops.movement import Slice, StridedSlice
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, const_value, make, normalize_axes

# (begin, end, strides, masked) of the StridedSlice a Slice becomes
StridedParams = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _slice_params(node: Node, use_shapes: bool):
    maybe = [const_value(node.input_value(i)) for i in range(1, node.get_input_size())]
    vals = [v for v in maybe if v is not None]
    if len(vals) != len(maybe):
        return None
    start, stop, step = (v.reshape(-1).astype(np.int64) for v in vals[:3])
    axes = vals[3].reshape(-1) if len(vals) == 4 else np.arange(start.size)
    ps = node.get_input_partial_shape(0)
    if np.any(axes < 0):
        if not (use_shapes and ps.rank_is_static):
            return None
        axes = np.array(normalize_axes(axes, len(ps)))
    return start, stop, step, axes


def strided_slice_params(node: Node, use_shapes: bool = True) -> StridedParams | None:
    """The StridedSlice ``node`` (a Slice) becomes: ``(begin, end, strides, masked)`` over axes
    0..max(axes), ``masked`` 1 on the axes the Slice leaves whole (its begin and end masks);
    None when a parameter is not a constant (or a negative axis meets a dynamic rank)."""
    params = _slice_params(node, use_shapes)
    if params is None:
        return None
    start, stop, step, axes = params
    n = int(axes.max()) + 1 if axes.size else 0
    begin, end, strides = np.zeros(n, np.int64), np.zeros(n, np.int64), np.ones(n, np.int64)
    masked = np.ones(n, np.int64)
    begin[axes], end[axes], strides[axes], masked[axes] = start, stop, step, 0
    return begin, end, strides, masked


class SliceToStridedSlice(MatcherPass):
    """Slice-8 with constant parameters -> StridedSlice-1."""

    def __init__(self, use_shapes: bool = True) -> None:
        super().__init__()
        pattern = wrap_type(Slice,
                            predicate=lambda o: _slice_params(o.node, use_shapes) is not None)

        def callback(m: Matcher) -> bool:
            sl = m.match_root
            if self.transformation_callback(sl):
                return False
            params = strided_slice_params(sl, use_shapes)
            if params is None:  # (ruled out by the pattern's predicate)
                return False
            begin, end, strides, masked = params
            ss = make(StridedSlice, [sl.input_value(0), const(begin), const(end), const(strides)],
                      begin_mask=masked.tolist(), end_mask=masked.tolist(), new_axis_mask=[],
                      shrink_axis_mask=[], ellipsis_mask=[])
            ss.friendly_name = sl.friendly_name
            copy_runtime_info(sl, ss)
            replace_node(sl, ss)
            self.register_new_node(ss)
            return True

        self.register_matcher(Matcher(pattern, "SliceToStridedSlice"), callback)
