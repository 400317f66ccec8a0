"""ConvertStridedSliceToCrop: a StridedSlice with constant begin/end, unit strides and a static
input becomes ``CropIE`` (+ a Reshape for new/shrunk axes; the crop is then named
``<name>/Crop`` and the Reshape takes the StridedSlice's name).

The crop window is read off the op itself: slicing a probe holding each element's flat index
yields exactly the elements kept, whatever the masks say.
"""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...core.node import Node
from ...ops.legacy import CropIE
from ...ops.movement import Reshape, StridedSlice
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, const_value, make, static_shape


def _crop_candidate(ss: Node) -> bool:
    shape = static_shape(ss.input_value(0))
    params = [const_value(ss.input_value(i)) for i in range(1, ss.get_input_size())]
    return shape is not None and 2 <= len(shape) <= 5 and all(p is not None for p in params) \
        and (len(params) < 3 or bool(np.all(params[2] == 1))) and not any(ss.ellipsis_mask or []) \
        and ss.output(0).partial_shape.is_static


def crop_window(ss: Node) -> tuple[list[int], list[int]] | None:
    """(offset, dim) per input axis, or None when the slice is not one contiguous window."""
    shape = static_shape(ss.input_value(0))
    maybe = [const_value(ss.input_value(i)) for i in range(1, ss.get_input_size())]
    params = [p for p in maybe if p is not None]
    if shape is None or len(params) != len(maybe):  # (ruled out by the pattern's predicate)
        return None
    begin, end = (p.reshape(-1).tolist() for p in params[:2])
    strides = params[2].reshape(-1).tolist() if len(params) > 2 else [1] * len(begin)
    if all(st == 1 for st in strides):
        return _unit_stride_window(ss, shape, begin, end, strides)
    probe = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    kept = ss.evaluate([probe, *params])[0].reshape(-1)
    if kept.size == 0:
        return None
    coords = np.unravel_index(kept, shape)
    offset = [int(c.min()) for c in coords]
    dim = [int(c.max()) - o + 1 for c, o in zip(coords, offset)]
    # A window holds exactly prod(dim) elements, in increasing order.
    if int(np.prod(dim)) != kept.size or np.any(np.diff(kept) <= 0):
        return None
    return offset, dim


def _unit_stride_window(ss: Node, shape: tuple[int, ...], begin: list[int], end: list[int],
                        strides: list[int]) -> tuple[list[int], list[int]] | None:
    """``crop_window`` of a slice whose strides are all 1, read off its numpy index (a box kept
    in order; what slicing a probe finds, without building and slicing one: ~60% of the
    conversion's time)."""
    offset, dim = [], []
    axes = iter(shape)
    for item in ss._index(shape, begin, end, strides):
        if item is None:      # a new axis: no input axis
            continue
        d = next(axes)
        if isinstance(item, int):   # a shrunk axis: one index
            offset.append(item)
            dim.append(1)
            continue
        start, stop, _ = item.indices(d)
        if stop <= start:
            return None
        offset.append(start)
        dim.append(stop - start)
    return offset, dim


def crop_in_place_of(sl: Node, offset: list[int], dim: list[int]) -> bool:
    """Replace slice ``sl`` (a StridedSlice or Slice of a static input) by the CropIE of the
    window ``offset``, ``dim``, and a Reshape to ``sl``'s shape where that differs (the crop
    is then named ``<name>/Crop``, the Reshape takes ``sl``'s name)."""
    crop = make(CropIE, [sl.input_value(0)], axes=list(range(len(dim))), dim=dim, offset=offset)
    last = crop
    if tuple(dim) != sl.output(0).shape:
        last = make(Reshape, [crop, const(np.array(sl.output(0).shape, np.int64))],
                    special_zero=False)
        crop.friendly_name = f"{sl.friendly_name}/Crop"
    last.friendly_name = sl.friendly_name
    copy_runtime_info(sl, [crop, last])
    return replace_output_update_name(sl.output(0), last.output(0))


class ConvertStridedSliceToCrop(MatcherPass):
    """Unit-stride StridedSlice of a static input -> CropIE."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(StridedSlice, predicate=lambda o: _crop_candidate(o.node))

        def callback(m: Matcher) -> bool:
            ss = m.match_root
            if self.transformation_callback(ss):
                return False
            window = crop_window(ss)
            return window is not None and crop_in_place_of(ss, *window)

        self.register_matcher(Matcher(pattern, "ConvertStridedSliceToCrop"), callback)

