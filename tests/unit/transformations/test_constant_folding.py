"""ConstantFolding."""
from __future__ import annotations

import numpy as np

from netpass import opset
from netpass.ngraph_passes.common import ConstantFolding, disable_constant_folding
from netpass.testing import TransformationTest
from tr_helpers import count, model_of, param, rand, run, run_checked


class TestFolding(TransformationTest):
    def test_constant_subgraph_collapses(self):
        x = param([2, 3])
        a, b = rand(2, 3), rand(2, 3, seed=1)
        self.model = model_of(opset.add(x, opset.multiply(opset.constant(a), opset.exp(opset.constant(b)))), x)
        x2 = param([2, 3])
        self.model_ref = model_of(opset.add(x2, opset.constant(a * np.exp(b))), x2)
        self.manager.register_pass(ConstantFolding())
        self.enable_accuracy_check(1e-5, 1e-6)


def test_shape_of_static_shape_folds():
    x = param([2, 3, 4])
    shape = opset.shape_of(x)
    m = model_of(opset.reshape(x, opset.concat([opset.gather(shape, [0], 0), opset.constant(np.array([-1]))], 0), False), x)
    run_checked(m, ConstantFolding())
    assert count(m, "ShapeOf", "Gather", "Concat") == 0


def test_result_producer_keeps_names():
    x = param([2])
    c = opset.relu(opset.constant(rand(2, 3)), name="folded")
    c.output(0).names.add("folded_t")
    m = model_of([opset.add(x, opset.constant(rand(2))), c], x)
    run(m, ConstantFolding())
    src = m.results[1].input_value(0)
    assert src.node.type_name == "Constant"
    assert src.node.friendly_name == "folded" and "folded_t" in src.names


def test_disabled_mark_is_respected():
    x = param([2, 3])
    c = opset.exp(opset.constant(rand(2, 3)))
    disable_constant_folding(c)
    m = model_of(opset.add(x, c), x)
    run(m, ConstantFolding())
    assert count(m, "Exp") == 1


def test_large_constant_folds_and_multi_consumer():
    x = param([100, 100])
    c = opset.tanh(opset.constant(rand(100, 100)))
    m = model_of([opset.add(x, c), opset.multiply(x, c)], x)
    run_checked(m, ConstantFolding())
    assert count(m, "Tanh") == 0


def test_dynamic_parameter_branch_untouched():
    x = opset.parameter([-1, 3], np.float32, "x")
    m = model_of(opset.relu(x), x)
    run(m, ConstantFolding())
    assert count(m, "Relu") == 1
