"""ConvertGlobalAvgPoolToReduceMean: an AvgPool whose window covers the whole (static) feature
map, without padding, is ``ReduceMean(spatial axes, keep_dims=True)``.

Exporters write global average pooling both ways (ONNX ``GlobalAveragePool`` imports as
ReduceMean, ``nn.AvgPool2d(kernel=map size)`` as AvgPool). Transpose sinking crosses
reductions but not pooling, so the rewrite lets the channels-last Transposes of the
convolutions before a global AvgPool leave the graph (zoo finding F3)."""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_node
from ...core.node import Node
from ...ops.pooling import AvgPool
from ...ops.reduction import ReduceMean
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, make, static_shape


def covers_whole_map(pool: Node) -> bool:
    """Static input, kernel == spatial dims, no padding (so every output is the mean of the
    whole map and the divisor is the map size whatever ``exclude-pad`` says)."""
    shape = static_shape(pool.input_value(0))
    if shape is None or len(shape) < 3:
        return False
    if pool.auto_pad not in ("explicit", "notset", "valid"):
        return False
    if any(pool.pads_begin) or any(pool.pads_end):
        return False
    return list(pool.kernel) == list(shape[2:])


class ConvertGlobalAvgPoolToReduceMean(MatcherPass):
    """AvgPool over the whole feature map -> ReduceMean."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(AvgPool)

        def callback(m: Matcher) -> bool:
            pool = m.match_root
            shape = static_shape(pool.input_value(0))  # (static: covers_whole_map)
            if self.transformation_callback(pool) or not covers_whole_map(pool) or shape is None:
                return False
            rank = len(shape)
            axes = const(np.arange(2, rank, dtype=np.int64))
            mean = make(ReduceMean, [pool.input_value(0), axes], keep_dims=True)
            mean.friendly_name = pool.friendly_name
            copy_runtime_info(pool, [axes.node, mean])
            replace_node(pool, mean)
            return True

        self.register_matcher(Matcher(pattern, "ConvertGlobalAvgPoolToReduceMean"), callback)
