"""Ported from OpenVINO ``src/common/transformations/tests/common_optimizations/convert_divide.cpp``
(ConvertDivide): model before, the pass, model expected after, compared structurally with
constant values, then by value on random non-zero data.

``ConvertDivideInverse`` (``1 / x`` -> ``Power(x, -1)`` with no Multiply by one) found that
netpass kept the Multiply; fixed as OpenVINO's ``can_eliminate_eltwise_node`` does.
"""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import model_of
from ov_values import port

from netpass import opset
from netpass.ngraph_passes.common import ConvertDivide

NOT_PORTED = {
    "ConvertDivideWithConstantPositive / Negative":
        "ConvertDivideWithConstant is not in netpass (ConvertDivide folds a constant divisor)",
    "ConvertDivideFP16ShapeOfSubgraphNegative / Negative2 / FP32ShapeOfSubgraphNegative / _If":
        "MarkPrecisionSensitiveDivides is not in netpass",
}


def _c(values, dtype=np.float32, shape=None):
    arr = np.array(values, dtype)
    return opset.constant(arr.reshape(shape) if shape is not None else arr)


def test_convert_divide():
    x = opset.parameter([3, 1, 2], np.float32)
    model = model_of([opset.divide(x, _c([1.5]))], [x])
    x = opset.parameter([3, 1, 2], np.float32)
    ref = model_of([opset.multiply(x, _c([1 / 1.5]))], [x])
    port(model, ref, ConvertDivide())


@pytest.mark.parametrize("shape, one_shape", [([3, 1, 2], [1]), ([3, 1, 2], []),
                                              ([-1, 2], [1]), ([2, 3], [1, 3])])
def test_convert_divide_inverse(shape, one_shape):
    x = opset.parameter(shape, np.float32)
    model = model_of([opset.divide(_c(np.ones(one_shape)), x)], [x])
    x = opset.parameter(shape, np.float32)
    ref = model_of([opset.power(x, _c(-1.0))], [x])
    port(model, ref, ConvertDivide())


def test_convert_divide_inverse_that_broadcasts_keeps_the_multiply():
    """``ones([2, 3]) / x[3]``: the ones set the output shape, so the Multiply stays."""
    x = opset.parameter([3], np.float32)
    model = model_of([opset.divide(_c(np.ones([2, 3])), x)], [x])
    x = opset.parameter([3], np.float32)
    ref = model_of([opset.multiply(_c(np.ones([2, 3])), opset.power(x, _c(-1.0)))], [x])
    port(model, ref, ConvertDivide())


def test_convert_divide_negative():
    x = opset.parameter([3, 1, 2], np.int32)
    model = model_of([opset.divide(x, _c([2], np.int32))], [x])
    port(model, None, ConvertDivide())


def test_convert_divide_scalar():
    a, b = opset.parameter([], np.float32), opset.parameter([], np.float32)
    model = model_of([opset.divide(a, b)], [a, b])
    a, b = opset.parameter([], np.float32), opset.parameter([], np.float32)
    ref = model_of([opset.multiply(a, opset.power(b, _c(-1.0)))], [a, b])
    port(model, ref, ConvertDivide())
