"""TSFuse."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, run, run_checked

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import TSFuse
from netpass.testing import TransformationTest


class TestFuse(TransformationTest):
    def test_two_become_one(self):
        x = param([1, 3, 4, 5])
        self.model = model_of(opset.transpose(opset.transpose(x, [0, 2, 3, 1]), [0, 2, 1, 3]), x)
        x2 = param([1, 3, 4, 5])
        self.model_ref = model_of(opset.transpose(x2, [0, 3, 2, 1]), x2)
        self.manager.register_pass(TSFuse())
        self.enable_accuracy_check(1e-5, 1e-6)

    def test_cancelling_pair_disappears(self):
        x = param([1, 3, 4, 5])
        self.model = model_of(opset.relu(opset.transpose(opset.transpose(x, [0, 2, 3, 1]), [0, 3, 1, 2])), x)
        x2 = param([1, 3, 4, 5])
        self.model_ref = model_of(opset.relu(x2), x2)
        self.manager.register_pass(TSFuse())


def test_cancelling_pair_between_parameter_and_result_stays():
    x = param([2, 3])
    m = model_of(opset.transpose(opset.transpose(x, [1, 0]), [1, 0]), x)
    run(m, TSFuse())
    assert count(m, "Transpose") >= 1


def test_chain_of_three_with_shared_first():
    x = param([2, 3, 4])
    t1 = opset.transpose(x, [1, 2, 0])
    m = model_of([opset.transpose(opset.transpose(t1, [2, 0, 1]), [0, 2, 1]), opset.relu(t1)], x)
    run_checked(m, TSFuse())
    assert count(m, "Transpose") == 2


def test_mixed_order_types_give_i64():
    x = param([2, 3, 4])
    t1 = opset.transpose(x, opset.constant(np.array([1, 2, 0], np.int32)))
    m = model_of(opset.relu(opset.transpose(t1, opset.constant(np.array([0, 2, 1], np.int64)))), x)
    run_checked(m, TSFuse())
    t = m.results[0].input_value(0).node.input_value(0).node
    assert t.type_name == "Transpose" and t.input_value(1).element_type.name == "i64"
