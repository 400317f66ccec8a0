"""ConvertGatherToCrop: a Gather of a contiguous ascending run of constant indices is a crop.

Exporters write ``y[:, -1]`` (the last step of a recurrent layer, a classifier's CLS row) and
``y[:, 2]`` as a Gather with a constant scalar index, and ``y[:, [3, 4, 5]]`` as one with a
constant index list. GNA has no Gather; a contiguous window is a CropIE, as the slices become
in the pipeline's last stage, where this pass runs too (after all sinking, so the Gathers the
layout passes create have had their chance to reach an edge or fold into weights first).
A scalar index drops the axis: a Reshape to the Gather's shape follows the crop, which is then
named ``<name>/Crop`` as in ConvertStridedSliceToCrop.
"""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...core.node import Node
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, const_value, make, op_types, static_shape


def crop_of_gather(node: Node) -> tuple[int, int, int] | None:
    """(axis, offset, length) when the Gather keeps one contiguous ascending window of a static
    data tensor of rank 2 to 5 (CropIE's limits); None otherwise."""
    if getattr(node, "batch_dims", 0) != 0:
        return None
    shape = static_shape(node.input_value(0))
    indices, axis = const_value(node.input_value(1)), const_value(node.input_value(2))
    if shape is None or indices is None or axis is None or axis.size != 1 or indices.ndim > 1 \
            or indices.size == 0 or not 2 <= len(shape) <= 5 or not node.output(0).partial_shape.is_static:
        return None
    axis = int(axis.reshape(-1)[0]) % len(shape)
    flat = indices.reshape(-1).astype(np.int64)
    if np.any(flat < -shape[axis]) or np.any(flat >= shape[axis]):
        return None   # out-of-range indices give zeros (Gather-8), which a crop does not
    flat = flat % shape[axis]
    if not np.array_equal(flat, np.arange(flat[0], flat[0] + flat.size)):
        return None
    return axis, int(flat[0]), int(flat.size)


class ConvertGatherToCrop(MatcherPass):
    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(op_types("Gather"), predicate=lambda o: crop_of_gather(o.node) is not None)

        def callback(m: Matcher) -> bool:
            gather = m.match_root
            if self.transformation_callback(gather):
                return False
            axis, offset, length = crop_of_gather(gather)
            shape = list(static_shape(gather.input_value(0)))
            dim, offsets = shape[:], [0] * len(shape)
            dim[axis], offsets[axis] = length, offset
            crop = make("CropIE", [gather.input_value(0)], axes=list(range(len(shape))), dim=dim,
                        offset=offsets)
            last = crop
            out_shape = tuple(gather.output(0).shape)
            if tuple(dim) != out_shape:
                last = make("Reshape", [crop, const(np.array(out_shape, np.int64))], special_zero=False)
                crop.friendly_name = f"{gather.friendly_name}/Crop"
            last.friendly_name = gather.friendly_name
            copy_runtime_info(gather, [crop, last])
            return replace_output_update_name(gather.output(0), last.output(0))

        self.register_matcher(Matcher(pattern, "ConvertGatherToCrop"), callback)
