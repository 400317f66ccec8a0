"""netpass.testing: compare_models names the first differing node pair and why; check_accuracy
catches a wrong rewrite; TransformationTest catches lost Result names and missing rt_info."""
from __future__ import annotations

import numpy as np
import pytest

from netpass import Model, copy_runtime_info, opset, replace_output_update_name
from netpass.core.rt_info import FusedNames
from netpass.errors import PassValidationError
from netpass.ops import Multiply
from netpass.passes import ModelPass
from netpass.testing import TransformationTest, check_accuracy, compare_models, random_inputs


def _model(act=opset.relu, scale=2.0, dtype=np.float32, shape=(2, 3), name="out") -> Model:
    x = opset.parameter(list(shape), dtype, name="x")
    m = opset.multiply(x, opset.constant(np.array(scale, dtype)), name="scale")
    r = act(m, name=name)
    r.output(0).names.add(name)
    return Model([r], [x], "m")


def _expect(res, *parts: str) -> None:
    assert not res.valid and not res
    for p in parts:
        assert p in res.message, res.message


# -- compare_models --------------------------------------------------------------------------
def test_equal_models_compare_valid():
    res = compare_models(_model(), _model(), names=True, tensor_names=True, rt_info=True)
    assert res.valid and res and res.message == ""


def test_type_difference_names_the_node_pair():
    _expect(compare_models(_model(opset.relu), _model(opset.sigmoid)),
            "Relu-opset1 'out'", "Sigmoid-opset1 'out'", "types differ")


def test_input_count_difference():
    x = opset.parameter([2], np.float32, name="x")
    a = Model([opset.concat([x, x], 0)], [x])
    y = opset.parameter([4], np.float32, name="x")
    b = Model([opset.concat([opset.relu(y)], 0)], [y])
    _expect(compare_models(a, b), "input counts differ: 2 vs 1")


def test_output_port_difference():
    def build(port: int) -> Model:
        x = opset.parameter([4, 2], np.float32, name="x")
        parts = opset.split(x, opset.constant(np.int64(0)), 2)
        return Model([opset.relu(parts.output(port))], [x])
    _expect(compare_models(build(0), build(1)), "Relu", "input 0 comes from output port 0 vs 1")


def test_shape_difference():
    _expect(compare_models(_model(shape=(2, 3)), _model(shape=(2, 4))), "shapes differ")


def test_element_type_difference_only_with_precisions():
    a, b = _model(dtype=np.float32), _model(dtype=np.float16)
    _expect(compare_models(a, b), "element types differ: f32 vs f16")
    assert compare_models(a, b, precisions=False, const_values=False, attributes=False).valid


def test_constant_value_difference_only_with_const_values():
    a, b = _model(scale=2.0), _model(scale=3.0)
    _expect(compare_models(a, b), "Multiply-opset1 'scale'", "constant values differ")
    assert compare_models(a, b, const_values=False).valid


def test_attribute_difference():
    a = _model(act=lambda m, name: opset.gelu(m, "erf", name=name))
    b = _model(act=lambda m, name: opset.gelu(m, "tanh", name=name))
    _expect(compare_models(a, b), "Gelu-opset7 'out'", "attribute approximation_mode differs")
    assert compare_models(a, b, attributes=False).valid


def test_result_producer_name_difference_only_with_names():
    a, b = _model(name="out"), _model(name="renamed")
    b.results[0].input_value(0).names.add("out")
    _expect(compare_models(a, b, names=True), "friendly names differ: 'out' vs 'renamed'")
    assert compare_models(a, b).valid


def test_rt_info_of_reference_must_be_present():
    a, b = _model(), _model()
    b.results[0].input_value(0).node.rt_info["fused_names_0"] = FusedNames(["out"])
    _expect(compare_models(a, b, rt_info=True), "Relu-opset1 'out'",
            "rt_info key 'fused_names_0' is missing")
    assert compare_models(a, b).valid
    assert compare_models(b, a, rt_info=True).valid  # extra keys on the compared side are fine


def test_rt_info_values_must_match():
    a, b = _model(), _model()
    a.results[0].input_value(0).node.rt_info["fused_names_0"] = FusedNames(["x"])
    b.results[0].input_value(0).node.rt_info["fused_names_0"] = FusedNames(["out"])
    _expect(compare_models(a, b, rt_info=True), "rt_info values of 'fused_names_0' differ")


def test_tensor_name_difference_only_with_tensor_names():
    a, b = _model(), _model()
    b.parameters[0].output(0).names.add("extra")
    _expect(compare_models(a, b, tensor_names=True), "Parameter-opset1 'x'", "tensor names differ")


def test_results_paired_by_tensor_names_not_order():
    def build(swap: bool) -> Model:
        x = opset.parameter([3], np.float32, name="x")
        r, s = opset.relu(x, name="r"), opset.sigmoid(x, name="s")
        r.output(0).names.add("r")
        s.output(0).names.add("s")
        return Model([s, r] if swap else [r, s], [x])
    assert compare_models(build(False), build(True)).valid


def test_nodes_unreachable_from_results_are_ignored():
    a, b = _model(), _model()
    dangling = opset.sigmoid(b.parameters[0])  # noqa: F841  (hangs off x, no Result reads it)
    assert compare_models(a, b, consumers_count=False).valid
    _expect(compare_models(a, b, consumers_count=True), "consumer counts differ: 1 vs 2")


# -- check_accuracy --------------------------------------------------------------------------
def test_check_accuracy_accepts_an_equivalent_rewrite():
    x = opset.parameter([-1, 4], np.float32, name="x")
    twice = Model([opset.add(x, x)], [x])
    res = check_accuracy(twice, _model(act=lambda m, name: m, shape=(-1, 4)))
    assert res.valid, res.message
    assert max(res.max_abs_error.values()) < 1e-6


def test_check_accuracy_catches_a_wrong_rewrite():
    res = check_accuracy(_model(scale=2.01), _model(scale=2.0))
    assert not res.valid
    assert "output 'out'" in res.message and "max abs error" in res.message
    assert res.max_abs_error["out"] > 1e-3


def test_check_accuracy_flags_nan_on_one_side():
    x = opset.parameter([4], np.float32, name="x")
    root = Model([opset.sqrt(x)], [x])
    ident = Model([opset.relu(x)], [x])
    feeds = {"x": np.array([-1.0, 0.25, 1.0, 4.0], np.float32)}
    res = check_accuracy(root, ident, inputs=feeds)
    assert not res.valid and "first at (0,)" in res.message
    assert check_accuracy(root, root, inputs=feeds).valid


def test_random_inputs_are_non_zero_and_concrete():
    x = opset.parameter([-1, 3], np.float32, name="x")
    i = opset.parameter([2, (1, 5)], np.int64, name="i")
    feeds = random_inputs(Model([opset.relu(x), opset.negative(i)], [x, i]), seed=1)
    assert feeds["x"].shape == (2, 3) and feeds["i"].shape == (2, 2)
    assert np.all(np.abs(feeds["x"]) >= 0.1) and np.all((feeds["i"] >= 1) & (feeds["i"] <= 3))


# -- TransformationTest ----------------------------------------------------------------------
class MultiplyByTwoToAdd(ModelPass):
    """x * 2 -> x + x, keeping the output name and rt_info (a correct rewrite)."""

    def run_on_model(self, model: Model) -> bool:
        changed = False
        for node in model.get_ordered_ops():
            if isinstance(node, Multiply) and np.all(node.input_constant(1) == 2):
                x = node.input_value(0)
                add = opset.add(x, x)
                replace_output_update_name(node.output(0), add.output(0))
                changed = True
        return changed


class LoseResultName(ModelPass):
    """Feeds the Result from a new node directly: the output's tensor name is lost."""

    def run_on_model(self, model: Model) -> bool:
        res = model.results[0]
        new = opset.relu(res.input_value(0).node.input_value(0))
        copy_runtime_info(res.input_value(0).node, new)
        res.input(0).replace_source_output(new.output(0))
        return True


class ForgetRtInfo(ModelPass):
    """Correct rewrite, but the new node gets no rt_info."""

    def run_on_model(self, model: Model) -> bool:
        relu = model.results[0].input_value(0).node
        new = opset.relu(relu.input_value(0))
        new.friendly_name = relu.friendly_name
        relu.output(0).replace(new.output(0))
        return True


class TestKitInPytest(TransformationTest):
    """TransformationTest as users write it: the check runs when the test method returns."""

    def test_rewrite_matches_reference(self):
        self.model = _model(act=opset.relu)
        x = opset.parameter([2, 3], np.float32, name="x")
        self.model_ref = Model([opset.relu(opset.add(x, x))], [x])
        self.manager.register_pass(MultiplyByTwoToAdd())
        self.enable_accuracy_check()

    def test_no_change_expected_by_default(self):
        self.model = _model(act=opset.sigmoid)


def _kit(model: Model, pass_: ModelPass, validate: bool = True) -> TransformationTest:
    t = TransformationTest()
    t.setup_method()
    t.model = model
    t.manager.set_per_pass_validation(validate)
    t.manager.register_pass(pass_)
    return t


def test_transformation_test_catches_lost_result_name():
    t = _kit(_model(), LoseResultName(), validate=False)
    with pytest.raises(AssertionError, match=r"Result .* lost tensor names \['out'\]"):
        t.run_and_compare()


def test_per_pass_validation_catches_lost_result_name_first():
    t = _kit(_model(), LoseResultName())
    with pytest.raises(PassValidationError, match=r"'LoseResultName'.*model outputs \['out'\]"):
        t.run_and_compare()


def test_transformation_test_catches_missing_rt_info():
    t = _kit(_model(), ForgetRtInfo())
    with pytest.raises(AssertionError, match="Relu-opset1 'out' has no rt_info attribute "
                                             "fused_names_0"):
        t.run_and_compare()


def test_disable_rt_info_check():
    t = _kit(_model(), ForgetRtInfo())
    t.disable_rt_info_check()
    t.run_and_compare()


def test_transformation_test_catches_unexpected_change():
    t = _kit(_model(), MultiplyByTwoToAdd())
    with pytest.raises(AssertionError, match="differs from model_ref.*types differ"):
        t.run_and_compare()


def test_accuracy_check_catches_wrong_rewrite():
    class WrongScale(ModelPass):
        def run_on_model(self, model: Model) -> bool:
            mul = model.results[0].input_value(0).node.input_value(0).node
            mul.input(1).replace_source_output(opset.constant(np.float32(2.5)).output(0))
            return True
    t = _kit(_model(), WrongScale())
    t.model_ref = _model(scale=2.5)
    t.enable_accuracy_check()
    with pytest.raises(AssertionError, match="accuracy check failed"):
        t.run_and_compare()


# -- when the check runs ---------------------------------------------------------------------
pytest_plugins = ["pytester"]

INNER = """
import numpy as np
from netpass import Model, opset
from netpass.passes import ModelPass
from netpass.testing import TransformationTest

class ReluToTanh(ModelPass):
    def run_on_model(self, model):
        r = model.results[0].input_value(0).node
        t = opset.tanh(r.input_value(0))
        t.friendly_name = r.friendly_name
        r.output(0).replace(t.output(0))
        return True

def relu_model():
    x = opset.parameter([2, 3], np.float32, name="x")
    return Model([opset.relu(x)], [x])

class TestInner(TransformationTest):
    def test_differs_from_reference(self):
        self.model = relu_model()          # model_ref defaults to the unchanged model
        self.manager.register_pass(ReluToTanh())
        self.disable_rt_info_check()

    def test_explicit_call_runs_once(self):
        self.model = relu_model()
        self.manager.register_pass(ReluToTanh())
        self.disable_rt_info_check()
        x = opset.parameter([2, 3], np.float32, name="x")
        self.model_ref = Model([opset.tanh(x)], [x])
        self.run_and_compare()
        self.model_ref = None              # a second comparison would fail

    def test_without_model_checks_nothing(self):
        pass

    def test_body_failure_is_reported_alone(self):
        self.model = relu_model()
        assert False, "the test's own assertion"
"""


def test_check_runs_as_part_of_the_test_not_its_teardown(pytester):
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=2, errors=0)
    out = result.stdout.str()
    assert "FAILED test_inner.py::TestInner::test_differs_from_reference" in out
    assert "model differs from model_ref" in out
    assert "FAILED test_inner.py::TestInner::test_body_failure_is_reported_alone" in out
    assert "the test's own assertion" in out and "ERROR" not in out


def test_check_accuracy_requires_infinities_to_match():
    """``rtol * |inf|`` is infinite: an infinite reference accepted any value (a Relu moved
    past a MaxPool gave 0 where the model gave -inf, and the check passed)."""
    import numpy as np

    from netpass import Model, opset
    from netpass.testing import check_accuracy
    x = opset.parameter([3], np.float32, "x")
    inf = Model([opset.result(opset.add(x, opset.constant(
        np.array([-np.inf, 1, np.inf], np.float32))).output(0))], [x])
    finite = Model([opset.result(opset.add(x, opset.constant(
        np.array([0, 1, np.inf], np.float32))).output(0))], [x])
    feeds = {"x": np.ones(3, np.float32)}
    assert not check_accuracy(finite, inf, feeds).valid
    assert check_accuracy(inf.clone(), inf, feeds).valid
