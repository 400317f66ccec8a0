"""GNA ops (``netpass/ops/gna.py``): GNAConvolution (NHWC, OHWI filters, bias and activation
folded into the epilogue) and GNAMaxPool (NHWC) on the convolution and pooling templates."""
from __future__ import annotations

from typing import Any

from ...ops.elementwise import Abs, Exp, Log, Relu, Sigmoid, Sign, Tanh
from ...ops.gna import GNAConvolution, GNAMaxPool
from ..impls import Impl, Params
from .base import OpKind, table
from .convolution import conv_impl
from .elementwise import with_bias
from .pooling import pool_impl

# GNA activation names -> the elementwise op the epilogue applies (None: no activation)
ACTIVATIONS: dict[str, type | None] = {"NO_ACTIVATION": None, "RELU": Relu, "SIGMOID": Sigmoid,
                                       "TANH": Tanh, "ABS": Abs, "LOG": Log, "EXP": Exp,
                                       "SIGN": Sign}


def gna_conv_impl(p: Params, key: Any) -> Impl | None:
    """The NHWC convolution with the bias (input 2) and activation ahead of any fused ops; an
    activation without a kernel expression runs on the host."""
    name = str(p.attrs.get("activation", "NO_ACTIVATION")).upper()
    if len(p.in_shapes) > 2:
        if name not in ACTIVATIONS:
            return None
        q = with_bias(p, p.in_shapes[2], p.in_dtypes[2], ACTIVATIONS[name])
        refs = [("i", 2)] + [("e", j) for j in range(len(q.extra_shapes) - 1)]
        return conv_impl(q, key, nhwc=True, bias_refs=refs)
    if name != "NO_ACTIVATION":
        return None
    return conv_impl(p, key, nhwc=True)


ROWS = table(
    OpKind(GNAConvolution, impl=gna_conv_impl, epilogue=True),
    OpKind(GNAMaxPool, impl=lambda p, key: pool_impl(p, key, "max", nhwc=True)),
)
