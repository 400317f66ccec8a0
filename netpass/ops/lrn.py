"""LRN (OpenVINO opset1, ONNX 1/13): local response normalization over a window of ``size``
along the ``axes`` input (ONNX: the channel axis): ``y = x / (bias + alpha / size**len(axes) *
sum(x**2 over the window)) ** beta``. The window of element ``c`` runs from
``c - floor((size - 1) / 2)`` to ``c + ceil((size - 1) / 2)``, clipped to the axis."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node
from .base import normalize_axis, set_name, to_output
from .registry import export_error, onnx_export, onnx_rule
from .shape_inputs import i64_operand

__all__ = ["lrn"]


class LRN(Node):
    type_name = "LRN"
    version = "opset1"
    ATTRS = {"alpha": 1e-4, "beta": 0.75, "bias": 1.0, "size": 1}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, axes)")
        self.check(self.size >= 1, "size must be >= 1, got {}", self.size)
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "data must be a float tensor, got {}", et)
        ps = self.get_input_partial_shape(0)
        axes = self.input_constant(1)
        if axes is not None and ps.rank_is_static:
            for a in np.asarray(axes).reshape(-1):
                normalize_axis(self, int(a), len(ps))
        self.set_output_type(0, et, ps)

    def evaluate(self, inputs):
        x, axes = inputs
        axes = sorted({int(a) % x.ndim for a in np.asarray(axes).reshape(-1)})
        wide = x.astype(np.float64)
        sq = wide * wide
        lo, hi = (self.size - 1) // 2, -(-(self.size - 1) // 2)
        for a in axes:  # a window sum per axis: prefix sums along it
            n = sq.shape[a]
            pad = [(0, 0)] * sq.ndim
            pad[a] = (1, 0)
            csum = np.cumsum(np.pad(sq, pad), axis=a)
            idx = np.arange(n)
            upper = np.take(csum, np.minimum(idx + hi, n - 1) + 1, axis=a)
            lower = np.take(csum, np.maximum(idx - lo, 0), axis=a)
            sq = upper - lower
        scale = self.alpha / self.size ** len(axes)
        return [(wide / (self.bias + scale * sq) ** self.beta).astype(x.dtype)]


def lrn(data: Any, axes: Any, alpha: float = 1.0, beta: float = 0.5, bias: float = 1.0,
        size: int = 5, name: str | None = None) -> Node:
    """LRN-1: local response normalization, ``x / (bias + alpha / size**len(axes) * sum(x**2 over a
    window of size around each position in axes)) ** beta``."""
    return set_name(LRN([to_output(data), i64_operand(axes)], alpha=alpha, beta=beta, bias=bias,
                        size=size), name)


@onnx_rule("LRN")
def _import_lrn(ctx):
    if not ctx.has_attr("size"):
        ctx.error("the size attribute is required")
    return LRN([ctx.inputs[0], i64_operand([1])], alpha=ctx.attr("alpha", 1e-4),
               beta=ctx.attr("beta", 0.75), bias=ctx.attr("bias", 1.0), size=ctx.attr("size", 1))


@onnx_export(LRN)
def _export_lrn(node, ectx):
    axes = node.input_constant(1)
    if axes is None or [int(a) for a in np.asarray(axes).reshape(-1)] != [1]:
        export_error(node, "ONNX LRN normalizes over the channel axis (axes=[1]) only")
    ectx.add_node("LRN", ectx.inputs(node)[:1], ectx.outputs(node), alpha=float(node.alpha),
                  beta=float(node.beta), bias=float(node.bias), size=int(node.size))
