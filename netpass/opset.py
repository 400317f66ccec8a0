"""Graph-building functions with OpenVINO's Python opset names and argument order.

``opset.transpose(data, input_order)``, ``opset.concat(nodes, axis)``... Values may be Nodes,
Outputs, python lists or numpy arrays (which become Constants).
"""
from __future__ import annotations

from .ops.adaptive_pool import *  # noqa: F403
from .ops.attention import *  # noqa: F403
from .ops.bitwise import *  # noqa: F403
from .ops.col2im import *  # noqa: F403
from .ops.control import *  # noqa: F403
from .ops.convolution import *  # noqa: F403
from .ops.cumulative import *  # noqa: F403
from .ops.decoding import *  # noqa: F403
from .ops.detection import *  # noqa: F403
from .ops.elementwise import *  # noqa: F403
from .ops.embedding import *  # noqa: F403
from .ops.extract_patches import *  # noqa: F403
from .ops.eye import *  # noqa: F403
from .ops.gna import *  # noqa: F403
from .ops.hardmax import *  # noqa: F403
from .ops.image import *  # noqa: F403
from .ops.image_decoder import *  # noqa: F403
from .ops.indexing import *  # noqa: F403
from .ops.interpolate import *  # noqa: F403
from .ops.io import *  # noqa: F403
from .ops.legacy import *  # noqa: F403
from .ops.linalg import *  # noqa: F403
from .ops.loss import *  # noqa: F403
from .ops.lp_pool import *  # noqa: F403
from .ops.lrn import *  # noqa: F403
from .ops.matmul import *  # noqa: F403
from .ops.max_unpool import *  # noqa: F403
from .ops.ml import *  # noqa: F403
from .ops.movement import *  # noqa: F403
from .ops.nms import *  # noqa: F403
from .ops.normalization import *  # noqa: F403
from .ops.optional import *  # noqa: F403
from .ops.pad import *  # noqa: F403
from .ops.pooling import *  # noqa: F403
from .ops.prior_box import *  # noqa: F403
from .ops.quantization import *  # noqa: F403
from .ops.random import *  # noqa: F403
from .ops.recurrent import *  # noqa: F403
from .ops.reduction import *  # noqa: F403
from .ops.roi_align import *  # noqa: F403
from .ops.search_sorted import *  # noqa: F403
from .ops.segment_max import *  # noqa: F403
from .ops.sequence import *  # noqa: F403
from .ops.sets import *  # noqa: F403
from .ops.shape_ops import *  # noqa: F403
from .ops.signal import *  # noqa: F403
from .ops.state import *  # noqa: F403
from .ops.strings import *  # noqa: F403
from .ops.tfidf import *  # noqa: F403
from .ops.training import *  # noqa: F403
