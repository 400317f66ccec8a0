"""TSFuse and TSFuseShared."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run, run_checked, types

from netpass import opset
from netpass.ngraph_passes.gna.pipeline import RescueStuckTransposes
from netpass.ngraph_passes.transpose_sinking import TSFuse, TSFuseShared
from netpass.passes import PassConfig
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


def _shared_first(second_order):
    """x -> T1 -> {Relu, T2 -> Tanh}: T1 has a consumer that is not a Transpose."""
    x = param([2, 3, 4])
    t1 = opset.transpose(x, [0, 2, 1])
    return model_of([opset.relu(t1), opset.tanh(opset.transpose(t1, second_order))], x)


def _transposes(m):
    return {tuple(n.input_value(1).node.get_vector()): n.input_value(0).node.type_name
            for n in m.get_ordered_ops() if n.type_name == "Transpose"}


def test_shared_first_is_left_by_tsfuse():
    m = _shared_first([0, 2, 1])
    run(m, TSFuse())
    assert count(m, "Transpose") == 2


def test_shared_first_cancelling_pair_loses_the_second():
    m = _shared_first([0, 2, 1])
    run_checked(m, TSFuseShared())
    assert _transposes(m) == {(0, 2, 1): "Parameter"}
    tanh = m.results[1].input_value(0).node
    assert tanh.input_value(0).node.type_name == "Parameter"


def test_shared_first_pair_becomes_one_transpose_of_the_input():
    m = _shared_first([1, 0, 2])
    run_checked(m, TSFuseShared())
    assert _transposes(m) == {(0, 2, 1): "Parameter", (2, 0, 1): "Parameter"}


def test_shared_first_fusion_obeys_the_callback():
    m = _shared_first([0, 2, 1])
    config = PassConfig()
    config.set_callback(lambda node: True, TSFuseShared)
    run(m, TSFuseShared(), config=config)
    assert count(m, "Transpose") == 2


def test_rescue_forward_leaves_no_transpose_pair_in_a_layer_norm():
    """A Transpose stuck after a MatMul sinks forward through a layer norm to the Result. At
    ``d * d`` the second input gets the inverse Transpose of ``d``'s Transpose, which still
    feeds ``d * rsqrt(var)``; OpenVINO's TSFuse leaves that pair, the rescue fuses it."""
    x = param([2, 13, 32])
    h = opset.transpose(opset.matmul(x, opset.constant(rand(32, 32)), False, False), [0, 2, 1])
    axes = opset.constant(np.array([1], np.int64))
    d = opset.subtract(h, opset.reduce_mean(h, axes, True))
    var = opset.reduce_mean(opset.multiply(d, d), axes, True)
    rsqrt = opset.power(opset.sqrt(opset.add(var, opset.constant(np.float32(1e-5)))),
                        opset.constant(np.float32(-1)))
    m = model_of(opset.multiply(d, rsqrt), x)
    run_checked(m, RescueStuckTransposes(), rtol=1e-4, atol=1e-5)
    left = [n for n in m.get_ordered_ops() if n.type_name == "Transpose"]
    assert len(left) == 1 and left[0].output(0).consumers()[0].node.type_name == "Result"


def _stuck_between_pads(shape):
    x = param(shape)
    t1 = opset.transpose(opset.relu(x), [0, 2, 3, 1])
    pad = opset.pad(t1, np.array([0, 1, 1, 0], np.int64), np.array([0, 1, 1, 0], np.int64),
                    "constant")
    return model_of(opset.relu(opset.transpose(pad, [0, 2, 3, 1])), x)


def test_rescue_backward_carries_fused_transposes_on_to_the_input():
    """Two stuck Transposes with a Pad between: the second moves above the Pad and fuses with
    the first. The fused Transpose feeds the Pad (an op forward sinking cannot pass), so
    OpenVINO's TSFuse would mark it; the rescue's backward stage leaves it unmarked and it moves
    on above the Relu to the Parameter, in that one stage, where pre-processing can take it."""
    m = _stuck_between_pads([1, 8, 8, 8])
    run_checked(m, RescueStuckTransposes())
    assert [n.type_name for n in m.get_ordered_ops()] == [
        "Parameter", "Constant", "Transpose", "Relu", "Constant", "Constant", "Pad", "Relu",
        "Result"]
    transpose = m.get_ordered_ops()[2]
    assert transpose.input_value(1).node.get_vector() == [0, 3, 1, 2]


def test_rescue_leaves_transposes_of_a_dynamic_shape():
    """GNA compiles static models only: a Transpose of a dynamic shape has no GNA verdict, and
    the rescue leaves the graph as it is; the same graph with a static batch is rescued."""
    m = _stuck_between_pads([-1, 8, 8, 8])
    before = types(m)
    run_checked(m, RescueStuckTransposes())
    assert types(m) == before
    m = _stuck_between_pads([1, 8, 8, 8])
    run_checked(m, RescueStuckTransposes())
    assert types(m)[:3] == ["Parameter", "Constant", "Transpose"] and count(m, "Transpose") == 1
