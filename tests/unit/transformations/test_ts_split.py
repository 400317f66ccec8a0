"""TSSplitForward / TSSplitBackward (Split and VariadicSplit)."""
from __future__ import annotations

from tr_helpers import assert_same_graph, count, model_of, param, run, run_checked

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import TSSplitBackward, TSSplitForward
from netpass.passes import PassConfig
from netpass.testing import TransformationTest


class TestForward(TransformationTest):
    def test_split_outputs_get_transposes(self):
        x = param([1, 6, 4, 5])
        order = [0, 2, 3, 1]
        s = opset.split(opset.transpose(x, order), 3, 2)
        self.model = model_of([s.output(0), s.output(1)], x)
        x2 = param([1, 6, 4, 5])
        s2 = opset.split(x2, 1, 2)
        self.model_ref = model_of([opset.transpose(s2.output(0), order), opset.transpose(s2.output(1), order)], x2)
        self.manager.register_pass(TSSplitForward())
        self.enable_accuracy_check(1e-5, 1e-6)


def test_backward_variadic_split_3d():
    x = param([2, 7, 4])
    s = opset.variadic_split(x, 1, [3, 4])
    m = model_of([opset.transpose(s.output(0), [0, 2, 1]), opset.transpose(s.output(1), [0, 2, 1])], x)
    run_checked(m, TSSplitBackward())
    x2 = param([2, 7, 4])
    s2 = opset.variadic_split(opset.transpose(x2, [0, 2, 1]), 2, [3, 4])
    assert_same_graph(m, model_of([s2.output(0), s2.output(1)], x2))


def test_backward_needs_every_output_transposed():
    x = param([2, 6, 4])
    s = opset.split(x, 1, 2)
    m = model_of([opset.transpose(s.output(0), [0, 2, 1]), opset.relu(s.output(1))], x)
    run(m, TSSplitBackward())
    assert count(m, "Transpose") == 1 and m.results[0].input_value(0).node.type_name == "Transpose"


def test_forward_refused_by_callback():
    x = param([1, 6, 4, 5])
    s = opset.split(opset.transpose(x, [0, 2, 3, 1]), 3, 2)
    m = model_of([s.output(0), s.output(1)], x)
    config = PassConfig()
    config.set_callback(lambda n: True, TSSplitForward)
    run(m, TSSplitForward(), config=config)
    assert count(m, "Transpose") == 1


def test_forward_multi_output_names():
    x = param([1, 6, 4, 5])
    s = opset.split(opset.transpose(x, [0, 2, 3, 1]), -1, 3, name="sp")
    m = model_of([s.output(i) for i in range(3)], x)
    run_checked(m, TSSplitForward())
    assert [r.input_value(0).node.friendly_name for r in m.results] == ["sp.0", "sp.1", "sp.2"]
