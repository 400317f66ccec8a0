"""Operations, importable by their OpenVINO type names (``netpass.ops.Transpose``).

One module per family; each module holds its op classes (shape inference, evaluate), its
``netpass.opset`` factory functions (listed in ``__all__``) and its ONNX import/export rules.
"""
from __future__ import annotations

from . import (convolution, elementwise, gna, indexing, interpolate, io, legacy,  # noqa: F401
               matmul, movement, normalization, pad, pooling, recurrent, reduction, shape_ops,
               state)
# families added for ONNX coverage
from . import (argminmax, attention, bitwise, cumulative, hardmax, image, linalg,  # noqa: F401
               loss, lrn, quantization, random, sets, signal, strings)
from .base import (ArithmeticReductionKeepDims, BinaryElementwiseArithmetic,  # noqa: F401
                   BinaryElementwiseComparison, BinaryElementwiseLogical,
                   LogicalReductionKeepDims, UnaryElementwiseArithmetic)
from .registry import OP_TYPES

globals().update(OP_TYPES)
