"""Ported from OpenVINO's GNA plugin (2023) ``gather_sinking_transpose_reshape.cpp``: a Transpose
GNA cannot run before a flattening Reshape becomes that Reshape and a Gather over the flat
tensor (forward); a Reshape then such a Transpose likewise (backward)."""
from __future__ import annotations

import numpy as np
from ov_port import check, model_of, transpose

from netpass import opset
from netpass.ngraph_passes.gna import (
    GatherSinkingTransposeReshapeBackward,
    GatherSinkingTransposeReshapeForward,
)


def reshape(x, shape):
    return opset.reshape(x, opset.constant(np.array(shape, np.int64)), False)


def gather(x, indices):
    return opset.gather(x, opset.constant(np.array(indices, np.int64)), opset.constant(np.int64(1)))


def _forward(shape, order, target, indices):
    x = opset.parameter(shape, np.float32)
    model = model_of([opset.tanh(reshape(transpose(opset.tanh(x), order, np.uint64), target))], [x])
    x2 = opset.parameter(shape, np.float32)
    ref = model_of([opset.tanh(gather(reshape(opset.tanh(x2), target), indices))], [x2])
    check(model, ref, GatherSinkingTransposeReshapeForward(), result_names=False)


def test_forward_sinking():
    _forward([1, 3, 4], [0, 2, 1], [1, -1], [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11])


def test_forward_sinking_3d():
    _forward([1, 1, 14, 4], [0, 3, 1, 2], [1, 56], [j + 4 * i for j in range(4) for i in range(14)])


def test_backward_sinking():
    """OpenVINO's expected graph drops the Transpose ([1,2,1,2] -> (0,2,3,1) -> [1,1,2,2]) for a
    Reshape, because the shapes without leading/trailing 1s match; but that Transpose swaps the
    two axes of size 2, so the values change. netpass keeps them: Reshape [1, 4] -> Gather (the 2x2
    transpose over the flat tensor) -> Reshape, checked numerically against the original."""
    x = opset.parameter([1, 1, 2, 2], np.float32, "x")
    t = transpose(reshape(opset.tanh(x), [1, 2, 1, 2]), [0, 2, 3, 1], np.uint64)
    model = model_of([opset.tanh(t)], [x])
    x2 = opset.parameter([1, 1, 2, 2], np.float32, "x")
    flat = gather(reshape(opset.tanh(x2), [1, 4]), [0, 2, 1, 3])
    ref = model_of([opset.tanh(reshape(flat, [1, 1, 2, 2]))], [x2])
    from netpass.testing import check_accuracy, random_inputs
    original = model.clone()
    check(model, ref, GatherSinkingTransposeReshapeBackward(), result_names=False)
    assert check_accuracy(model, original, random_inputs(original, seed=1), rtol=1e-6, atol=1e-7).valid
