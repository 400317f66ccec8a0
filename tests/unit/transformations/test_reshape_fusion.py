"""ReshapeSequenceFusion and TransposeToReshape."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, run, run_checked

from netpass import opset
from netpass.ngraph_passes.common import ReshapeSequenceFusion, TransposeToReshape
from netpass.testing import TransformationTest


class TestReshapeSequence(TransformationTest):
    def test_chain_becomes_one(self):
        x = param([2, 3, 4])
        self.model = model_of(opset.relu(opset.reshape(opset.reshape(x, [6, 4], False), [4, 6], False)), x)
        x2 = param([2, 3, 4])
        self.model_ref = model_of(opset.relu(opset.reshape(x2, [4, 6], False)), x2)
        self.manager.register_pass(ReshapeSequenceFusion())
        self.enable_accuracy_check(1e-5, 1e-6)


def test_shared_inner_reshape_stays_for_other_consumer():
    x = param([2, 3, 4])
    r1 = opset.reshape(x, [6, 4], False)
    m = model_of([opset.reshape(r1, [24], False), opset.relu(r1)], x)
    run_checked(m, ReshapeSequenceFusion())
    assert count(m, "Reshape") == 2


def test_transpose_of_ones_becomes_reshape():
    x = param([1, 8, 5, 1])
    m = model_of(opset.relu(opset.transpose(x, [3, 1, 2, 0])), x)
    run_checked(m, TransposeToReshape())
    assert count(m, "Transpose") == 0 and count(m, "Reshape") == 0  # swaps two 1s: nothing
    x = param([1, 8, 5, 1])
    m = model_of(opset.relu(opset.transpose(x, [1, 0, 2, 3])), x)
    run_checked(m, TransposeToReshape())
    assert count(m, "Transpose") == 0 and count(m, "Reshape") == 1


def test_real_transpose_stays_and_dynamic_becomes_reshape():
    x = opset.parameter([-1, 8, 1], "f32", "x")
    y = param([2, 3], "y")
    m = model_of([opset.transpose(x, [0, 2, 1]), opset.transpose(y, [1, 0])], [x, y])
    run(m, TransposeToReshape())
    assert count(m, "Transpose") == 1 and count(m, "Reshape") == 1


def test_empty_order_reverses_and_stays_a_transpose():
    # An empty order input means "reverse the dimensions" (ONNX Transpose without perm).
    x = param([2, 3, 4])
    m = model_of(opset.transpose(x, np.zeros((0,), np.int64)), x)
    run_checked(m, TransposeToReshape())
    assert count(m, "Transpose") == 1
