"""Control flow: If, Loop and TensorIterator (ops with sub-graph bodies, see
:mod:`netpass.core.subgraph`), the ONNX If, Loop and Scan mapped onto them, and ONNX's
SequenceMap (a body applied to every position of sequences).

The family sits above every other: a body may hold any op, and the ONNX rules build
Squeeze/Unsqueeze inside bodies.
"""
from __future__ import annotations

from . import onnx_rules  # noqa: F401  (registers the ONNX import and export rules)
from .if_op import If, if_op  # noqa: F401
from .loop import Loop, SubGraphOp, TensorIterator, loop, tensor_iterator  # noqa: F401
from .sequence_map import SequenceMap  # noqa: F401

__all__ = ["if_op", "loop", "tensor_iterator"]
