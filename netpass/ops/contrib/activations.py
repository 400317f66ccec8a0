"""onnxruntime's fused activations: Gelu, BiasGelu (erf), FastGelu (tanh approximation, optional
bias), QuickGelu (``x * sigmoid(alpha * x)``) and BiasAdd (``x + bias + skip``)."""
from __future__ import annotations

from ..elementwise import Add, Gelu, Swish, const_like
from ..registry import onnx_rule
from .common import MS


def _biased(ctx):
    """The first input plus the optional second (a bias broadcast over the last dim)."""
    x, bias = ctx.inputs[0], ctx.input(1)
    return x if bias is None else Add([x, bias]).output(0)


@onnx_rule("Gelu", domain=MS)
def _import_gelu(ctx):
    return Gelu([ctx.inputs[0]], approximation_mode="ERF")


@onnx_rule("BiasGelu", domain=MS)
def _import_bias_gelu(ctx):
    return Gelu([_biased(ctx)], approximation_mode="ERF")


@onnx_rule("FastGelu", domain=MS)
def _import_fast_gelu(ctx):
    return Gelu([_biased(ctx)], approximation_mode="TANH")


@onnx_rule("QuickGelu", domain=MS)
def _import_quick_gelu(ctx):
    x = ctx.inputs[0]
    return Swish([x, const_like(float(ctx.attr("alpha", 1.702)), x)])


@onnx_rule("BiasAdd", domain=MS)
def _import_bias_add(ctx):
    x, bias, skip = ctx.inputs[:3]
    return Add([Add([x, bias]), skip])
