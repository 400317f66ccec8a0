"""Normalizations: Softmax, LogSoftmax, MVN, BatchNormInference, GroupNormalization,
NormalizeL2, GRN; ONNX LayerNormalization, InstanceNormalization, MeanVarianceNormalization,
LpNormalization and RMSNormalization are imported as compositions of these (as OpenVINO's ONNX
frontend does). One module per op or pair of close ops, each with its class, factory and ONNX
import and export rules."""
from __future__ import annotations

# Classes and factories; ``__all__`` lists the factories (``netpass.opset`` takes them).
from .batch_norm import (  # noqa: F401
    BatchNormInference,
    BatchNormInference1,
    GroupNormalization,
    batch_norm_inference,
    group_normalization,
)
from .grn import GRN, grn  # noqa: F401
from .mvn import MVN, MVN2, mvn  # noqa: F401
from .normalize_l2 import NormalizeL2, normalize_l2  # noqa: F401
from .softmax import LogSoftmax, Softmax, log_softmax, softmax  # noqa: F401

__all__ = ["softmax", "log_softmax", "mvn", "batch_norm_inference", "normalize_l2",
           "group_normalization", "grn"]
