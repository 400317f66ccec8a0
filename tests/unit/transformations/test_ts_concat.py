"""TSConcatForward / TSConcatBackward."""
from __future__ import annotations

from tr_helpers import model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import (
    TSConcatBackward,
    TSConcatForward,
    is_sinking_disabled,
)
from netpass.passes import PassConfig
from netpass.testing import TransformationTest


class TestForward(TransformationTest):
    def test_axis_is_renumbered(self):
        x, y = param([1, 3, 4, 5], "x"), param([1, 3, 4, 5], "y")
        order = [0, 2, 3, 1]
        self.model = model_of(opset.concat([opset.transpose(x, order), opset.transpose(y, order)], 3), [x, y])
        x2, y2 = param([1, 3, 4, 5], "x"), param([1, 3, 4, 5], "y")
        # OpenVINO's rule: the other input gets the inverse order (TSFuse cancels the pair later).
        y_back = opset.transpose(opset.transpose(y2, order), [0, 3, 1, 2])
        self.model_ref = model_of(opset.transpose(opset.concat([x2, y_back], 1), order), [x2, y2])
        self.manager.register_pass(TSConcatForward())
        self.enable_accuracy_check(1e-5, 1e-6)


class TestBackward(TransformationTest):
    def test_3d_backward(self):
        x, y = param([2, 3, 4], "x"), param([2, 5, 4], "y")
        self.model = model_of(opset.transpose(opset.concat([x, y], 1), [0, 2, 1]), [x, y])
        x2, y2 = param([2, 3, 4], "x"), param([2, 5, 4], "y")
        self.model_ref = model_of(opset.concat([opset.transpose(x2, [0, 2, 1]), opset.transpose(y2, [0, 2, 1])], 2), [x2, y2])
        self.manager.register_pass(TSConcatBackward())
        self.enable_accuracy_check(1e-5, 1e-6)


def test_untransposed_constant_input_forward():
    x = param([1, 3, 4, 5])
    m = model_of(opset.concat([opset.transpose(x, [0, 3, 1, 2]), opset.constant(rand(1, 2, 3, 4))], 1), x)
    run_checked(m, TSConcatForward())
    assert m.results[0].input_value(0).node.type_name == "Transpose"


def test_negative_axis_backward():
    x, y = param([1, 3, 4, 5], "x"), param([1, 3, 4, 2], "y")
    m = model_of(opset.transpose(opset.concat([x, y], -1), [0, 3, 1, 2]), [x, y])
    run_checked(m, TSConcatBackward())
    assert m.results[0].input_value(0).node.type_name == "Concat"


def test_refusing_callback_keeps_concat_and_can_mark():
    x, y = param([1, 3, 4, 5], "x"), param([1, 3, 4, 5], "y")
    tx, ty = opset.transpose(x, [0, 2, 3, 1]), opset.transpose(y, [0, 2, 3, 1])
    m = model_of(opset.concat([tx, ty], 3), [x, y])
    config = PassConfig()

    def refuse(node):
        for v in node.input_values():
            from netpass.ngraph_passes.transpose_sinking import mark_as_no_sinking
            mark_as_no_sinking(v.node)
        return True
    config.set_callback(refuse, TSConcatForward)
    run(m, TSConcatForward(), config=config)
    assert m.results[0].input_value(0).node.type_name == "Concat"
    assert is_sinking_disabled(tx) and is_sinking_disabled(ty)
