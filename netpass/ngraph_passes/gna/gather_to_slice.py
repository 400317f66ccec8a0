"""ConvertGatherToSlice: a Gather of a contiguous ascending run of constant indices is a Slice
(followed by a Squeeze for a scalar index, which drops the axis).

Exporters write ``y[:, -1]`` (the last step of a recurrent layer, a classifier's CLS row) and
``y[:, 2]`` as a Gather with a constant scalar index, and ``y[:, [3, 4, 5]]`` as one with a
constant index list. GNA has no Gather, and transpose sinking crosses no Gather; it crosses
Slice and Squeeze, and the pipeline's last stage turns every Slice into a CropIE. So the
rewrite runs in the pipeline's preparation, before the layout block (a batch-first recurrent
stack's time/batch Transpose then sinks through ``y[:, -1]``).
"""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...core.node import Node
from ...ops.indexing import Gather
from ...ops.movement import Slice, Squeeze
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, const_value, make, static_shape


def slice_of_gather(node: Node) -> tuple[int, int, int] | None:
    """(axis, start, length) when the Gather keeps one contiguous ascending window of a static
    data tensor of rank 2 to 5 (a CropIE's, which the Slice becomes); None otherwise (also for
    out-of-range indices, which give zeros)."""
    if getattr(node, "batch_dims", 0) != 0:
        return None
    shape = static_shape(node.input_value(0))
    indices, axis_value = const_value(node.input_value(1)), const_value(node.input_value(2))
    if shape is None or not 2 <= len(shape) <= 5 or indices is None or axis_value is None \
            or axis_value.size != 1 or indices.ndim > 1 or indices.size == 0:
        return None
    axis = int(axis_value.reshape(-1)[0]) % len(shape)
    # (Python ints: numpy's reductions on a few indices cost more; this runs on every Gather)
    dim = shape[axis]
    flat = [int(v) for v in indices.reshape(-1).tolist()]
    if any(v < -dim or v >= dim for v in flat):
        return None
    first = flat[0] % dim
    if any(v % dim != first + k for k, v in enumerate(flat)):
        return None
    return axis, first, len(flat)


def _i64(*values: int):
    return const(np.array(values, np.int64))


class ConvertGatherToSlice(MatcherPass):
    """Gather of a contiguous run of constant indices -> Slice."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(Gather,
                            predicate=lambda o: slice_of_gather(o.node) is not None)

        def callback(m: Matcher) -> bool:
            gather = m.match_root
            if self.transformation_callback(gather):
                return False
            found = slice_of_gather(gather)  # (not None: the pattern's predicate)
            if found is None:
                return False
            axis, start, length = found
            new = [make(Slice, [gather.input_value(0), _i64(start), _i64(start + length), _i64(1),
                                  _i64(axis)])]
            indices = const_value(gather.input_value(1))
            if indices is not None and indices.ndim == 0:
                new.append(make(Squeeze, [new[0], _i64(axis)]))
            new[-1].friendly_name = gather.friendly_name
            copy_runtime_info(gather, new)
            return replace_output_update_name(gather.output(0), new[-1].output(0))

        self.register_matcher(Matcher(pattern, "ConvertGatherToSlice"), callback)
