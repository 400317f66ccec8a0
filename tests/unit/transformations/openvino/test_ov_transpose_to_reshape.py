"""Ported from OpenVINO ``src/common/transformations/tests/common_optimizations/
transpose_to_reshape_test.cpp`` (TransposeToReshape), checked structurally (node types and
precisions, as OpenVINO's test compares) and by value.

Found and fixed: netpass turned only Transposes of a static shape into Reshapes, and a
Transpose that moves only 1s (or nothing) into a Reshape to the same shape; OpenVINO bypasses
the latter and also rewrites dynamic shapes (a constant pattern with ``special_zero`` when at
most one dynamic dim moves, else ``Gather(ShapeOf(x), order)``).
"""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import model_of
from ov_values import feeds, port, run, same_values

from netpass import opset
from netpass.ngraph_passes.common import TransposeToReshape

D = -1
SAME, EMPTY, GATHER = "same", "empty", "gather"
CASES = [
    # KeepTranspose
    ([1, 3, 64, 64], [0, 1, 3, 2], SAME), ([1, 3, 1, 64], [2, 0, 3, 1], SAME),
    ([1, 3, 1, 3], [3, 0, 2, 1], SAME), ([D, 2, 64, 1], [1, 0, 3, 2], SAME),
    ([D, 3], [1, 0], SAME), ([D, D, 1], [2, 1, 0], SAME), ([D, D], [1, 0], SAME),
    # EliminateTranspose
    ([1, 3, 64, 64], [0, 1, 2, 3], EMPTY), ([1, 1, 1], [2, 0, 1], EMPTY), ([D, D], [0, 1], EMPTY),
    # ReshapeWithConstant (static: the output shape, special_zero off; dynamic: OpenVINO's)
    ([1, 3, 64, 1], [0, 1, 3, 2], [1, 3, 1, 64]), ([1, 3, 1, 64], [1, 0, 3, 2], [3, 1, 64, 1]),
    ([D, D, 1], [0, 2, 1], [0, 1, -1]), ([1, 1, D], [2, 1, 0], [-1, 0, 1]),
    ([D, 1, 64, 1], [1, 0, 3, 2], [1, -1, 1, 64]),
    # ReshapeWithGather
    ([D, 1, D, 1], [1, 0, 3, 2], GATHER), ([1, D, D, D], [1, 2, 3, 0], GATHER),
]


def _model(shape, order, ref=None):
    x = opset.parameter(shape, np.float32)
    if ref == EMPTY:
        y = x
    elif ref == GATHER:
        pattern = opset.gather(opset.shape_of(x), opset.constant(np.array(order, np.int64)),
                               opset.constant(np.array([0], np.int64)))
        y = opset.reshape(x, pattern, True)
    elif isinstance(ref, list):
        dynamic = any(d == D for d in shape)
        y = opset.reshape(x, opset.constant(np.array(ref, np.int64)), dynamic)
    else:
        y = opset.transpose(x, opset.constant(np.array(order, np.int64)))
    return model_of([opset.relu(y)], [x])


@pytest.mark.parametrize("shape, order, ref", CASES)
def test_transpose_to_reshape(shape, order, ref):
    model = _model(shape, order)
    concrete = [3 if d == D else d for d in shape]
    port(model, None if ref == SAME else _model(shape, order, ref), TransposeToReshape(),
         inputs=feeds(model, {0: concrete}))


@pytest.mark.parametrize("shape, order, transposes", [
    ([1, 3], [1, 0], 0), ([2, 3, 1], [2, 0, 1], 0), ([10, 20, 1, 1], [0, 2, 3, 1], 0),
    ([10, 1, 1, 20], [0, 3, 1, 2], 0), ([10, 20, 1, 2], [0, 2, 1, 3], 0),
    ([10, 1, 1, 1, 20], [0, 4, 1, 2, 3], 0), ([10, 20, 1, 1, 1], [0, 2, 3, 4, 1], 0),
    ([10, 1, 1, 1, 1], [1, 4, 2, 3, 0], 0), ([10, 1, 1, 1, 1], [4, 2, 0, 1, 3], 0),
    ([10, 20, 1, 2], [0, 2, 3, 1], 1), ([10, 20, 1, 2], [0, 3, 1, 2], 1), ([10, 20], [1, 0], 1),
    ([D, 20, 1, 1], [0, 2, 3, 1], 0), ([D, D, 20, 1, 1], [0, 1, 3, 2, 4], 0),
    ([D, D, 20, 1, 1], [0, 2, 1, 4, 3], 1),
])
@pytest.mark.parametrize("et", [np.int32, np.int64])
@pytest.mark.parametrize("multiout", [False, True])
def test_replace_transpose_with_reshape(shape, order, transposes, et, multiout):
    """OpenVINO's ``replace_transpose_with_reshape``: counts of Transposes and Reshapes after
    the pass, producer Abs or TopK (multi-output, k = the last dim)."""
    x = opset.parameter(shape, np.float32)
    if multiout:
        last = len(shape) - 1
        k = (opset.gather(opset.shape_of(x), opset.constant(np.int64(last)),
                          opset.constant(np.int64(0))) if shape[last] == D
             else opset.constant(np.int64(shape[last])))
        src = opset.topk(x, k, last, "max", "none").output(0)
    else:
        src = opset.abs(x)
    model = model_of([opset.abs(opset.transpose(src, opset.constant(np.array(order, et))))],
                     [x])
    rank = len(model.results[0].input_value(0).partial_shape)
    original = model.clone()
    run(model, TransposeToReshape())
    types = [n.type_name for n in model.get_ordered_ops()]
    assert types.count("Transpose") == transposes
    assert types.count("Reshape") == (0 if transposes else 1)
    assert len(model.results[0].input_value(0).partial_shape) == rank
    concrete = [3 if d == D else d for d in shape]
    same_values(model, original, feeds(original, {0: concrete}))
