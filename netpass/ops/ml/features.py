"""ArrayFeatureExtractor and Binarizer (``ai.onnx.ml`` version 1)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node
from ...core.shape import PartialShape
from ...core.types import i64
from ..base import NETPASS_OPSET, set_name, to_output
from ..registry import onnx_export, onnx_rule

__all__ = ["array_feature_extractor", "binarizer"]

ML = "ai.onnx.ml"


class ArrayFeatureExtractor(Node):
    """The elements of ``data``'s last axis at ``indices`` (i64, any shape, read flat): output
    ``[*data.shape[:-1], indices.size]``; 1-D data gives ``[1, indices.size]`` (as
    onnxruntime and onnx's reference do)."""

    type_name = "ArrayFeatureExtractor"
    version = NETPASS_OPSET

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (X, Y)")
        it = self.get_input_element_type(1)
        self.check(it.is_dynamic or it is i64, "indices must be i64, got {}", it)
        data, idx = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        self.check(not data.rank_is_static or len(data) >= 1, "data must not be a scalar")
        count = Dimension()
        if idx.rank_is_static:
            count = Dimension(1)
            for d in idx:
                count = count * d
        if not data.rank_is_static:
            out = PartialShape(None)
        elif len(data) == 1:
            out = PartialShape([1, count])
        else:
            out = PartialShape([*list(data)[:-1], count])
        self.set_output_type(0, self.get_input_element_type(0), out)

    def evaluate(self, inputs):
        x, idx = inputs
        flat = idx.reshape(-1).astype(np.int64)
        n = x.shape[-1]
        self.check(bool(np.all((flat >= 0) & (flat < n))),
                   "indices {} out of range for a last axis of {}", flat.tolist()[:8], n)
        y = x[..., flat]
        return [y.reshape(1, -1) if x.ndim == 1 else y]


class Binarizer(Node):
    """1 where ``x > threshold``, else 0, in ``x``'s type."""

    type_name = "Binarizer"
    version = NETPASS_OPSET
    ATTRS = {"threshold": 0.0}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real or et.is_integral, "X must be numeric, got {}",
                   et)
        self.set_output_type(0, et, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        return [(x > self.threshold).astype(x.dtype)]


def array_feature_extractor(data: Any, indices: Any, name: str | None = None) -> Node:
    """ArrayFeatureExtractor: ``data[..., indices]`` (indices read flat)."""
    return set_name(ArrayFeatureExtractor([to_output(data), to_output(indices)]), name)


def binarizer(x: Any, threshold: float = 0.0, name: str | None = None) -> Node:
    """Binarizer (ai.onnx.ml): 1 where ``x > threshold``, else 0, in the type of ``x``."""
    return set_name(Binarizer([to_output(x)], threshold=float(threshold)), name)


onnx_rule("ArrayFeatureExtractor", since=1, domain=ML)(
    lambda ctx: ArrayFeatureExtractor(ctx.inputs[:2]))
onnx_rule("Binarizer", since=1, domain=ML)(
    lambda ctx: Binarizer(ctx.inputs[:1], threshold=float(ctx.attr("threshold", 0.0))))


@onnx_export(ArrayFeatureExtractor)
def _export_array_feature_extractor(node, ectx):
    ectx.add_node("ArrayFeatureExtractor", ectx.inputs(node), ectx.outputs(node), domain=ML)


@onnx_export(Binarizer)
def _export_binarizer(node, ectx):
    ectx.add_node("Binarizer", ectx.inputs(node), ectx.outputs(node), domain=ML,
                  threshold=float(node.threshold))
