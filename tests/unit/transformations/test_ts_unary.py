"""TSUnaryForward / TSUnaryBackward."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, run, run_checked

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import (
    TSUnaryBackward,
    TSUnaryForward,
    is_sinking_disabled,
)
from netpass.passes import PassConfig
from netpass.testing import TransformationTest


class TestForward(TransformationTest):
    def test_transpose_moves_below_unary_4d(self):
        x = param([1, 3, 4, 5])
        self.model = model_of(opset.relu(opset.transpose(x, [0, 2, 3, 1])), x)
        x2 = param([1, 3, 4, 5])
        self.model_ref = model_of(opset.transpose(opset.relu(x2), [0, 2, 3, 1]), x2)
        self.manager.register_pass(TSUnaryForward())
        self.enable_accuracy_check(1e-5, 1e-6)

    def test_3d_chain_of_unaries(self):
        x = param([2, 3, 4])
        self.model = model_of(opset.sigmoid(opset.tanh(opset.transpose(x, [0, 2, 1]))), x)
        x2 = param([2, 3, 4])
        self.model_ref = model_of(opset.transpose(opset.sigmoid(opset.tanh(x2)), [0, 2, 1]), x2)
        self.manager.register_pass(TSUnaryForward())
        self.enable_accuracy_check(1e-5, 1e-6)


class TestBackward(TransformationTest):
    def test_transpose_moves_above_unary(self):
        x = param([1, 3, 4, 5])
        self.model = model_of(opset.transpose(opset.exp(x), [0, 2, 3, 1]), x)
        x2 = param([1, 3, 4, 5])
        self.model_ref = model_of(opset.exp(opset.transpose(x2, [0, 2, 3, 1])), x2)
        self.manager.register_pass(TSUnaryBackward())
        self.enable_accuracy_check(1e-5, 1e-6)

    def test_different_consumer_orders_stay(self):
        x = param([1, 3, 4, 5])
        r = opset.relu(x)
        self.model = model_of([opset.transpose(r, [0, 2, 3, 1]), opset.transpose(r, [0, 3, 1, 2])], x)
        self.manager.register_pass(TSUnaryBackward())


def test_result_name_and_tensor_names_follow_the_output():
    x = param([1, 3, 4, 5])
    relu = opset.relu(opset.transpose(x, [0, 2, 3, 1]), name="act")
    relu.output(0).names.add("act_t")
    m = model_of(relu, x)
    run_checked(m, TSUnaryForward())
    producer = m.results[0].input_value(0)
    assert producer.node.type_name == "Transpose"
    assert producer.node.friendly_name == "act" and "act_t" in producer.names


def test_multiple_consumers_of_the_transpose_each_sink():
    x = param([1, 3, 4, 5])
    t = opset.transpose(x, [0, 2, 3, 1])
    m = model_of([opset.relu(t), opset.sigmoid(t)], x)
    run_checked(m, TSUnaryForward())
    assert all(r.input_value(0).node.type_name == "Transpose" for r in m.results)


def test_callback_refuses_and_marks_transpose_before_result():
    x = param([1, 3, 4, 5])
    t = opset.transpose(x, [0, 2, 3, 1])
    m = model_of(opset.relu(t), x)
    config = PassConfig()
    config.set_callback(lambda node: True, TSUnaryForward)
    run(m, TSUnaryForward(), config=config)
    assert m.results[0].input_value(0).node.type_name == "Relu"


def test_forward_marks_transpose_that_reaches_result():
    x = param([1, 3, 4, 5])
    m = model_of(opset.relu(opset.transpose(x, [0, 2, 3, 1])), x)
    run(m, TSUnaryForward())
    assert is_sinking_disabled(m.results[0].input_value(0).node)


def test_dynamic_rank_input_is_left_alone_backward():
    x = opset.parameter(None, np.float32, "x")
    m = model_of(opset.relu(opset.transpose(x, [0, 2, 1])), x)
    run(m, TSUnaryForward())
    assert count(m, "Transpose") == 1
