"""Operations, importable by their OpenVINO type names (``netpass.ops.Transpose``).

One module per family; each module holds its op classes (shape inference, evaluate), its
``netpass.opset`` factory functions (listed in ``__all__``) and its ONNX import/export rules.
"""
from __future__ import annotations

# families added for ONNX coverage
from . import (  # noqa: F401
               adaptive_pool,
               argminmax,
               attention,
               bitwise,
               col2im,
               contrib,
               control,
               convolution,
               cumulative,
               decoding,
               detection,
               elementwise,
               embedding,
               extract_patches,
               eye,
               gna,
               hardmax,
               image,
               image_decoder,
               indexing,
               interpolate,
               io,
               legacy,
               linalg,
               loss,
               lp_pool,
               lrn,
               matmul,
               max_unpool,
               ml,
               movement,
               nms,
               normalization,
               optional,
               pad,
               pooling,
               prior_box,
               quantization,
               random,
               recurrent,
               reduction,
               roi_align,
               search_sorted,
               segment_max,
               sequence,
               sets,
               shape_ops,
               signal,
               state,
               strings,
               tfidf,
               training,
)
from .base import (  # noqa: F401
               ArithmeticReductionKeepDims,
               BinaryElementwiseArithmetic,
               BinaryElementwiseComparison,
               BinaryElementwiseLogical,
               LogicalReductionKeepDims,
               UnaryElementwiseArithmetic,
)
from .registry import OP_TYPES

globals().update(OP_TYPES)
