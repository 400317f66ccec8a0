"""ConvertDivide."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.common import ConvertDivide
from netpass.testing import TransformationTest


class TestConvertDivide(TransformationTest):
    def test_divide_by_tensor(self):
        x, y = param([2, 3], "x"), param([2, 3], "y")
        self.model = model_of(opset.divide(x, y), [x, y])
        x2, y2 = param([2, 3], "x"), param([2, 3], "y")
        self.model_ref = model_of(opset.multiply(x2, opset.power(y2, opset.constant(np.float32(-1)))), [x2, y2])
        self.manager.register_pass(ConvertDivide())
        self.enable_accuracy_check(1e-5, 1e-6)


def test_constant_divisor_is_folded():
    x = param([2, 3])
    c = rand(3)
    m = model_of(opset.divide(x, opset.constant(c)), x)
    run_checked(m, ConvertDivide())
    assert count(m, "Divide", "Power") == 0 and count(m, "Multiply") == 1


def test_integer_divide_untouched():
    x = opset.parameter([4], np.int32, "x")
    m = model_of(opset.divide(x, opset.constant(np.array([2, 3, 2, 3], np.int32))), x)
    run(m, ConvertDivide())
    assert count(m, "Divide") == 1


def test_result_name_and_dynamic_shape():
    x = opset.parameter([-1, 3], np.float32, "x")
    d = opset.divide(x, opset.constant(np.float32(4.0)), name="div")
    m = model_of(d, x)
    run(m, ConvertDivide())
    assert m.results[0].input_value(0).node.friendly_name == "div"
    assert m.results[0].input_value(0).node.type_name == "Multiply"
