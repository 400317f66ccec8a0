"""ConvertStridedSliceToCrop: a StridedSlice with constant begin/end, unit strides and a static
input becomes ``CropIE`` (+ a Reshape for new/shrunk axes; the crop is then named
``<name>/Crop`` and the Reshape takes the StridedSlice's name).

The crop window is read off the op itself: slicing a probe whose values are the coordinates
along one axis yields exactly the coordinates kept, whatever the masks say.
"""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...core.node import Node
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, const_value, make, op_types, static_shape


def crop_window(ss: Node) -> tuple[list[int], list[int]] | None:
    """(offset, dim) per input axis, or None when the slice is not a contiguous window."""
    shape = static_shape(ss.input_value(0))
    params = [const_value(ss.input_value(i)) for i in range(1, ss.get_input_size())]
    if shape is None or not 2 <= len(shape) <= 5 or any(p is None for p in params) \
            or (len(params) == 3 and np.any(params[2] != 1)) or any(ss.ellipsis_mask or []):
        return None
    offset, dim = [], []
    for axis, n in enumerate(shape):
        probe = np.broadcast_to(np.arange(n).reshape([-1 if a == axis else 1 for a in range(len(shape))]), shape)
        kept = np.unique(ss.evaluate([probe, *params])[0])
        if kept.size == 0 or kept[-1] - kept[0] + 1 != kept.size:
            return None
        offset.append(int(kept[0]))
        dim.append(int(kept.size))
    return offset, dim


class ConvertStridedSliceToCrop(MatcherPass):
    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(op_types("StridedSlice"), predicate=lambda o: o.partial_shape.is_static
                            and crop_window(o.node) is not None)

        def callback(m: Matcher) -> bool:
            ss = m.match_root
            if self.transformation_callback(ss):
                return False
            offset, dim = crop_window(ss)
            crop = make("CropIE", [ss.input_value(0)], axes=list(range(len(dim))), dim=dim, offset=offset)
            last = crop
            if tuple(dim) != ss.output(0).shape:
                last = make("Reshape", [crop, const(np.array(ss.output(0).shape, np.int64))], special_zero=False)
                crop.friendly_name = f"{ss.friendly_name}/Crop"
            last.friendly_name = ss.friendly_name
            copy_runtime_info(ss, [crop, last])
            return replace_output_update_name(ss.output(0), last.output(0))

        self.register_matcher(Matcher(pattern, "ConvertStridedSliceToCrop"), callback)
