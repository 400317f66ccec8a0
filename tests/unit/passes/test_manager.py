"""Manager and PassConfig: registration, disabling at every level, callbacks, validation."""
from __future__ import annotations

import numpy as np
import pytest

from netpass import Model, ops, opset
from netpass.errors import NetpassError, PassValidationError
from netpass.passes import GraphRewrite, Manager, MatcherPass, ModelPass, PassConfig, Validate
from netpass.pattern import Matcher, wrap_type


def chain_model(*kinds):
    x = opset.parameter([2, 3], np.float32, name="x")
    y = x
    for i, k in enumerate(kinds):
        y = getattr(opset, k)(y)
        y.friendly_name = f"n{i}"
    return Model([y], [x], "chain")


class ReluToTanh(MatcherPass):
    """Replaces Relu by Tanh unless the transformation callback refuses the node."""

    def __init__(self, log=None):
        super().__init__()
        self.log = log if log is not None else []

        def callback(m):
            relu = m.match_root
            if self.transformation_callback(relu):
                self.log.append(("refused", relu.friendly_name))
                return False
            t = opset.tanh(relu.input_value(0))
            relu.output(0).replace(t.output(0))
            self.log.append(("done", relu.friendly_name))
            return True
        self.register_matcher(Matcher(wrap_type(ops.Relu), "ReluToTanh"), callback)


class ExpToSigmoid(MatcherPass):
    def __init__(self):
        super().__init__()

        def callback(m):
            e = m.match_root
            if self.transformation_callback(e):
                return False
            e.output(0).replace(opset.sigmoid(e.input_value(0)).output(0))
            return True
        self.register_matcher(Matcher(wrap_type(ops.Exp), "ExpToSigmoid"), callback)


class Both(GraphRewrite):
    def __init__(self):
        super().__init__()
        self.add_matcher(ReluToTanh)
        self.add_matcher(ExpToSigmoid)


class Composite(ModelPass):
    """A ModelPass running a nested Manager that shares this pass's config."""

    def run_on_model(self, model):
        manager = Manager(self.get_pass_config())
        manager.register_pass(Both)
        return manager.run_passes(model)


def types(model):
    return [n.type_name for n in model.get_ordered_ops()][1:-1]


def test_register_pass_returns_instance_and_builds_classes_with_args():
    manager = Manager()
    log = []
    p = manager.register_pass(ReluToTanh, log)
    assert isinstance(p, ReluToTanh) and p.log is log
    assert p.get_pass_config() is manager.get_pass_config()
    inst = ExpToSigmoid()
    assert manager.register_pass(inst) is inst


def test_run_passes_returns_whether_anything_changed():
    manager = Manager()
    manager.register_pass(ReluToTanh)
    model = chain_model("relu")
    assert manager.run_passes(model) and types(model) == ["Tanh"]
    assert not manager.run_passes(model)


def test_matcher_pass_registered_directly_runs_as_graph_rewrite():
    def to_tanh(m):
        m.match_root.output(0).replace(opset.tanh(m.match_root.input_value(0)).output(0))
        return True
    manager = Manager()
    manager.register_pass(MatcherPass(Matcher(wrap_type(ops.Relu), "Inline"), to_tanh))
    model = chain_model("relu")
    assert manager.run_passes(model) and types(model) == ["Tanh"]


def test_disabled_pass_is_skipped_by_manager():
    manager = Manager()
    manager.register_pass(ReluToTanh)
    manager.get_pass_config().disable(ReluToTanh)
    model = chain_model("relu")
    assert not manager.run_passes(model) and types(model) == ["Relu"]


def test_disabled_matcher_inside_graph_rewrite_is_skipped():
    manager = Manager()
    manager.register_pass(Both)
    manager.get_pass_config().disable(ReluToTanh)
    model = chain_model("relu", "exp")
    manager.run_passes(model)
    assert types(model) == ["Relu", "Sigmoid"]


def test_disabled_matcher_inside_nested_manager_is_skipped():
    manager = Manager()
    manager.register_pass(Composite)
    manager.get_pass_config().disable(ExpToSigmoid)
    model = chain_model("relu", "exp")
    manager.run_passes(model)
    assert types(model) == ["Tanh", "Exp"]


def test_disabling_flattened_graph_rewrite_class_disables_its_matchers():
    outer = GraphRewrite()
    outer.add_matcher(Both)
    manager = Manager()
    manager.register_pass(outer)
    manager.get_pass_config().disable(Both)
    model = chain_model("relu", "exp")
    assert not manager.run_passes(model) and types(model) == ["Relu", "Exp"]


def test_disabled_graph_rewrite_inside_composite_is_skipped():
    manager = Manager()
    manager.register_pass(Composite)
    manager.get_pass_config().disable(Both)
    model = chain_model("relu", "exp")
    assert not manager.run_passes(model) and types(model) == ["Relu", "Exp"]


def test_register_disabled_by_default_and_force_enable():
    model = chain_model("relu")
    manager = Manager()
    manager.register_pass(ReluToTanh, enabled=False)
    assert not manager.run_passes(model)
    config = PassConfig()
    config.enable(ReluToTanh)
    manager = Manager(config)
    manager.register_pass(ReluToTanh, enabled=False)
    assert manager.run_passes(model) and types(model) == ["Tanh"]


def test_disabled_in_graph_rewrite_constructor_survives_shared_config():
    class WithDefaultOff(GraphRewrite):
        def __init__(self):
            super().__init__()
            self.add_matcher(ReluToTanh, enabled=False)
            self.add_matcher(ExpToSigmoid)

    manager = Manager()
    manager.register_pass(WithDefaultOff)
    assert manager.get_pass_config().is_disabled(ReluToTanh)
    model = chain_model("relu", "exp")
    manager.run_passes(model)
    assert types(model) == ["Relu", "Sigmoid"]


def test_global_callback_honoured_in_nested_containers():
    manager = Manager()
    p = manager.register_pass(Composite)
    manager.get_pass_config().set_callback(lambda node: node.friendly_name == "n0")
    model = chain_model("relu", "relu")
    manager.run_passes(model)
    assert types(model) == ["Relu", "Tanh"]
    del p


def test_per_type_callback_applies_only_to_that_pass():
    manager = Manager()
    manager.register_pass(Composite)
    config = manager.get_pass_config()
    config.set_callback(lambda node: True, ReluToTanh)
    model = chain_model("relu", "exp")
    manager.run_passes(model)
    assert types(model) == ["Relu", "Sigmoid"]


def test_per_type_callback_overrides_global():
    config = PassConfig()
    config.set_callback(lambda n: True)
    config.set_callback(lambda n: False, ReluToTanh)
    manager = Manager(config)
    manager.register_pass(Both)
    model = chain_model("relu", "exp")
    manager.run_passes(model)
    assert types(model) == ["Tanh", "Exp"]


def test_add_disabled_passes_keeps_force_enabled():
    a, b = PassConfig(), PassConfig()
    a.disable(ReluToTanh, ExpToSigmoid)
    b.enable(ReluToTanh)
    b.add_disabled_passes(a)
    assert b.is_disabled(ExpToSigmoid) and not b.is_disabled(ReluToTanh)


class Breaker(ModelPass):
    """Rewires a Relu to a rank-1 tensor and plugs it into a Concat that needs rank 2."""

    def __init__(self, report=True):
        super().__init__()
        self.report = report

    def run_on_model(self, model):
        for n in model.get_ordered_ops():
            if n.type_name == "Relu":
                n.input(0).replace_source_output(opset.constant(np.ones([5], np.float32)).output(0))
        return self.report


def concat_model():
    x = opset.parameter([2, 3], np.float32, name="x")
    r = opset.relu(x)
    c = opset.concat([r, x], 0)
    return Model([c], [x], "m")


class Touch(ModelPass):
    """Reports a change that leaves the model valid."""

    def run_on_model(self, model):
        return True


def test_validation_names_the_pass_that_broke_the_model():
    manager = Manager()
    manager.register_pass(Touch)
    manager.register_pass(Breaker)
    with pytest.raises(PassValidationError, match="'Breaker'") as info:
        manager.run_passes(concat_model())
    assert info.value.pass_name == "Breaker"


def test_validation_checks_a_pass_that_changed_the_model_but_reported_no_change():
    # The change log, not the pass's return value, says whether there is something to check.
    manager = Manager()
    manager.register_pass(Breaker, False)
    with pytest.raises(PassValidationError, match="'Breaker'"):
        manager.run_passes(concat_model())


def test_per_pass_validation_off_applies_to_later_registrations():
    manager = Manager()
    manager.set_per_pass_validation(False)
    manager.register_pass(Breaker)
    assert manager.run_passes(concat_model())


def test_validation_includes_lint():
    class Orphan(ModelPass):
        def run_on_model(self, model):
            model.add_results([])
            model._parameters.append(opset.parameter([1], np.float32, name="x"))
            return True
    manager = Manager()
    manager.register_pass(Orphan)
    with pytest.raises(PassValidationError, match="(?s)'Orphan'.*not unique"):
        manager.run_passes(chain_model("relu"))


def test_validate_pass_reports_no_change():
    assert not Validate().run_on_model(chain_model("relu"))


def test_reentering_run_on_model_is_refused():
    class Recursive(ModelPass):
        def run_on_model(self, model):
            return self.run_on_model(model)
    with pytest.raises(NetpassError, match="cycle detected.*Recursive"):
        Recursive().run_on_model(chain_model("relu"))


def test_subclass_calling_super_run_on_model_is_not_reentry():
    class Counting(GraphRewrite):
        def __init__(self):
            super().__init__(ReluToTanh())

        def run_on_model(self, model):
            return super().run_on_model(model)
    assert Counting().run_on_model(chain_model("relu"))


def test_requires_static_shape_skips_dynamic_models():
    class StaticOnly(ReluToTanh):
        requires_static_shape = True
    x = opset.parameter([-1, 3], np.float32, name="x")
    model = Model([opset.relu(x)], [x])
    manager = Manager()
    manager.register_pass(StaticOnly)
    assert not manager.run_passes(model)
