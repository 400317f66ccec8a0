"""ConvertSliceToCrop: a Slice that SliceToStridedSlice and then ConvertStridedSliceToCrop would
turn into one CropIE, turned into it at once (the GNA pipeline's last stage runs the three in
one traversal): no StridedSlice and three Constants built to be dropped at once."""
from __future__ import annotations

from ...core.node import Node
from ...ops.movement import Slice, StridedSlice
from ...ops.movement.slice import strided_length
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..common.slice_to_strided_slice import SliceToStridedSlice, strided_slice_params
from ..utils import static_shape
from .strided_slice_to_crop import ConvertStridedSliceToCrop, crop_in_place_of


def slice_crop_window(sl: Node) -> tuple[list[int], list[int]] | None:
    """(offset, dim) per input axis of the CropIE that SliceToStridedSlice then
    ConvertStridedSliceToCrop make of the Slice ``sl`` (no Reshape after it), or None when they
    would make something else (a step, an empty window, a shape that is not static, a rank
    outside 2-5). The StridedSlice slices axes 0..max(axes) with unit strides and masks the
    others: its window is ``crop_window``'s unit-stride one, per axis."""
    shape = static_shape(sl.input_value(0))
    params = strided_slice_params(sl) if shape is not None and 2 <= len(shape) <= 5 else None
    if shape is None or params is None:
        return None
    begin, end, strides, masked = (p.tolist() for p in params)
    if len(begin) > len(shape) or any(st != 1 for st in strides):
        return None
    offset, dim = [], []
    for d, b, e, m in zip(shape, begin, end, masked):
        length = strided_length(d, b, e, 1, bool(m), bool(m))
        if length == 0:
            return None
        offset.append(StridedSlice.first_index(d, b, 1, bool(m)))
        dim.append(length)
    offset += [0] * (len(shape) - len(dim))
    dim += shape[len(dim):]
    return (offset, dim) if static_shape(sl.output(0)) == tuple(dim) else None


class ConvertSliceToCrop(MatcherPass):
    """Slice -> the StridedSlice path's CropIE, in one rewrite.

    What SliceToStridedSlice and then ConvertStridedSliceToCrop make of a Slice (the same crop,
    friendly name, rt_info and tensor names), without building the StridedSlice and its three
    Constants that the second drops at once (over half of the GNA pipeline's last stage). A
    Slice they would not make one CropIE of is left to them, and so is every Slice while either
    of them is disabled or given a callback."""

    def __init__(self) -> None:
        super().__init__()

        def callback(m: Matcher) -> bool:
            sl = m.match_root
            config = self.pass_config
            if any(config.is_disabled(p) or config.has_callback(p)
                   for p in (SliceToStridedSlice, ConvertStridedSliceToCrop)) or \
                    self.transformation_callback(sl):
                return False
            window = slice_crop_window(sl)  # (its dim is the Slice's shape: no Reshape)
            return window is not None and crop_in_place_of(sl, *window)

        # (a Slice of a dynamic shape stays a StridedSlice: not offered to the callback)
        pattern = wrap_type(Slice, predicate=lambda o: o.node.get_input_partial_shape(0).is_static)
        self.register_matcher(Matcher(pattern, "ConvertSliceToCrop"), callback)
