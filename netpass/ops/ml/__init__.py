"""ONNX's ``ai.onnx.ml`` ops that netpass imports: ArrayFeatureExtractor and Binarizer
(:mod:`.features`), LabelEncoder (:mod:`.label_encoder`) and TreeEnsemble (:mod:`.tree_ensemble`).
OpenVINO has no counterparts: netpass keeps them whole (IR version ``netpass``) and the runtime
runs them on the host. Their import rules are registered for the ``ai.onnx.ml`` domain and
chosen by the version the model imports of it; their export rules write that domain.
"""
from __future__ import annotations

# Classes and factories; ``__all__`` lists the factories (``netpass.opset`` takes them).
from .features import ArrayFeatureExtractor, Binarizer, array_feature_extractor, binarizer  # noqa: F401
from .label_encoder import LabelEncoder, label_encoder  # noqa: F401
from .tree_ensemble import TreeEnsemble, tree_ensemble  # noqa: F401

__all__ = ["array_feature_extractor", "binarizer", "label_encoder", "tree_ensemble"]
