"""TSDataMovementForward / TSDataMovementBackward (Pad) and TSSliceForward / TSSliceBackward."""
from __future__ import annotations

import numpy as np
from tr_helpers import model_of, param, run, run_checked

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import (
    TSDataMovementBackward,
    TSDataMovementForward,
    TSSliceBackward,
    TSSliceForward,
)
from netpass.testing import TransformationTest


class TestPadForward(TransformationTest):
    def test_pads_are_permuted(self):
        x = param([1, 3, 4, 5])
        order = [0, 2, 3, 1]
        self.model = model_of(opset.pad(opset.transpose(x, order), [0, 1, 2, 0], [0, 0, 1, 1], "constant"), x)
        x2 = param([1, 3, 4, 5])
        self.model_ref = model_of(opset.transpose(opset.pad(x2, np.array([0, 0, 1, 2]), np.array([0, 1, 0, 1]), "constant"), order), x2)
        self.manager.register_pass(TSDataMovementForward())
        self.enable_accuracy_check(1e-5, 1e-6)


def test_pad_backward_3d():
    x = param([2, 3, 4])
    m = model_of(opset.transpose(opset.pad(x, [0, 1, 2], [1, 0, 0], "constant"), [0, 2, 1]), x)
    run_checked(m, TSDataMovementBackward())
    assert m.results[0].input_value(0).node.type_name == "Pad"


def test_pad_with_non_constant_pads_stays():
    x, p = param([2, 3, 4]), opset.parameter([3], np.int64, "p")
    m = model_of(opset.pad(opset.transpose(x, [0, 2, 1]), p, [0, 0, 0], "constant"), [x, p])
    run(m, TSDataMovementForward())
    assert m.results[0].input_value(0).node.type_name == "Pad"


def test_slice_forward_renumbers_axes():
    x = param([1, 3, 8, 5])
    m = model_of(opset.slice(opset.transpose(x, [0, 2, 3, 1]), [1, 0], [6, 2], [2, 1], [1, 3]), x)
    run_checked(m, TSSliceForward())
    assert m.results[0].input_value(0).node.type_name == "Transpose"


def test_slice_backward_without_axes_input():
    x = param([2, 6, 5])
    m = model_of(opset.transpose(opset.slice(x, [0, 1], [2, 5], [1, 2]), [0, 2, 1]), x)
    run_checked(m, TSSliceBackward())
    assert m.results[0].input_value(0).node.type_name == "Slice"
