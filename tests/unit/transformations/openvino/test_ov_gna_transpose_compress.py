"""Ported from OpenVINO's GNA plugin (2023) ``transpose_compress.cpp``: a Transpose whose order
keeps runs of axes together becomes ``Reshape (i32) -> 2-D Transpose (i8) -> Reshape (i32)``;
the negative case stays as it is (attributes compared). That test file registers the pass but
never runs the manager; here the pass runs. Its first "negative" case ([1, 2, 3], order
(1, 2, 0)) is one TransposeCompress's own code compresses (to the [1, 6] -> (1, 0) its test data
lists), so it is checked as a positive case."""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import check, model_of, transpose

from netpass import opset
from netpass.ngraph_passes.gna import TransposeCompress


def _model(shape, order):
    x = opset.parameter(shape, np.float32)
    return model_of([transpose(x, order, np.int32)], [x])


@pytest.mark.parametrize("shape, order, shape_ref, order_ref", [
    ([2, 2, 4], [1, 2, 0], [2, 8], [1, 0]),
    ([2, 2, 4, 4], [2, 3, 0, 1], [4, 16], [1, 0]),
    ([1, 2, 3], [1, 2, 0], [1, 6], [1, 0]),
])
def test_transpose_compress(shape, order, shape_ref, order_ref):
    model = _model(shape, order)
    out_shape = model.results[0].input_value(0).partial_shape.to_shape()
    x = opset.parameter(shape, np.float32)
    r = opset.reshape(x, opset.constant(np.array(shape_ref, np.int32)), False)
    t = transpose(r, order_ref, np.int8)
    ref = model_of([opset.reshape(t, opset.constant(np.array(out_shape, np.int32)), False)], [x])
    check(model, ref, TransposeCompress(), result_names=False)


def test_transpose_compress_negative():
    check(_model([1, 2, 3, 4], [1, 0, 2, 3]), None, TransposeCompress())
