"""TSBinaryForward / TSBinaryBackward."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import TSBinaryBackward, TSBinaryForward
from netpass.testing import TransformationTest


class TestForward(TransformationTest):
    def test_constant_input_gets_inverse_order(self):
        x = param([1, 3, 4, 5])
        c = rand(1, 4, 5, 3)
        self.model = model_of(opset.add(opset.transpose(x, [0, 2, 3, 1]), opset.constant(c)), x)
        x2 = param([1, 3, 4, 5])
        ref_c = opset.constant(np.transpose(c, [0, 3, 1, 2]))
        self.model_ref = model_of(opset.transpose(opset.add(x2, ref_c), [0, 2, 3, 1]), x2)
        self.manager.register_pass(TSBinaryForward())
        self.enable_accuracy_check(1e-5, 1e-6)


class TestBackward(TransformationTest):
    def test_both_inputs_get_the_transpose(self):
        x, y = param([2, 3, 4], "x"), param([2, 3, 4], "y")
        self.model = model_of(opset.transpose(opset.multiply(x, y), [0, 2, 1]), [x, y])
        x2, y2 = param([2, 3, 4], "x"), param([2, 3, 4], "y")
        self.model_ref = model_of(opset.multiply(opset.transpose(x2, [0, 2, 1]), opset.transpose(y2, [0, 2, 1])), [x2, y2])
        self.manager.register_pass(TSBinaryBackward())
        self.enable_accuracy_check(1e-5, 1e-6)


def test_lower_rank_input_is_unsqueezed():
    x, b = param([1, 3, 4, 5], "x"), param([4], "b")
    m = model_of(opset.add(opset.transpose(x, [0, 3, 1, 2]), b), [x, b])
    run_checked(m, TSBinaryForward())
    assert m.results[0].input_value(0).node.type_name == "Transpose"
    assert count(m, "Unsqueeze") == 1


def test_scalar_constant_4d():
    x = param([1, 3, 4, 5])
    m = model_of(opset.subtract(opset.transpose(x, [0, 2, 3, 1]), opset.constant(np.float32(0.5))), x)
    run_checked(m, TSBinaryForward())
    assert m.results[0].input_value(0).node.type_name == "Transpose"


def test_two_transposed_inputs_and_multiple_consumers():
    x, y = param([1, 3, 4, 5], "x"), param([1, 3, 4, 5], "y")
    tx, ty = opset.transpose(x, [0, 2, 3, 1]), opset.transpose(y, [0, 2, 3, 1])
    add = opset.add(tx, ty)
    m = model_of([add, opset.relu(add), tx], [x, y])
    run_checked(m, TSBinaryForward())
    assert m.results[0].input_value(0).node.type_name == "Transpose"


def test_dynamic_rank_other_input_leaves_graph():
    x, y = param([1, 3, 4, 5], "x"), opset.parameter(None, np.float32, "y")
    m = model_of(opset.add(opset.transpose(x, [0, 2, 3, 1]), y), [x, y])
    run(m, TSBinaryForward())
    assert m.results[0].input_value(0).node.type_name == "Add"


def test_comparison_and_prelu_scalar_slope():
    x = param([2, 3, 4])
    t = opset.transpose(x, [0, 2, 1])
    m = model_of([opset.prelu(t, opset.constant(np.array([0.1], np.float32))),
                  opset.convert(opset.greater(t, opset.constant(np.float32(0.0))), np.float32)], x)
    run_checked(m, TSBinaryForward())
    assert all(r.input_value(0).node.type_name in ("Transpose", "Convert") for r in m.results)


@pytest.mark.parametrize("b_shape,b_order", [([1, 4, 3, 1], [0, 1, 2, 3]),
                                             ([1, 1, 12, 3], [0, 1, 3, 2])])
def test_the_transpose_of_real_axes_goes_below(b_shape, b_order):
    """``T'(b) + T(x)`` with ``b`` a broadcast operand (a reduction's result, unsqueezed): the
    step sinks ``T`` (its inverse on ``b``'s side only moves 1s), not ``T'`` first, which put
    the inverse of ``T'`` on ``T(x)`` and left a Transpose of real axes above the Add."""
    x, b = param([1, 12, 4, 3], "x"), param(b_shape, "b")
    add = opset.add(opset.transpose(b, b_order), opset.transpose(x, [0, 2, 3, 1]))
    m = model_of(add, [x, b])
    run_checked(m, TSBinaryForward())
    below = m.results[0].input_value(0).node
    assert below.type_name == "Transpose"
    assert below.input_value(0).node.input_value(1).node.friendly_name == "x"
