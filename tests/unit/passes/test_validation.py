"""Per-pass validation: the model's interface, incremental re-inference and lint, reported
changes that were not made, and errors that name the pass and node at fault."""
from __future__ import annotations

import numpy as np
import pytest

from netpass import Model, ops, opset
from netpass.core.changes import ChangeLog
from netpass.errors import PassError, PassValidationError, ShapeInferenceError
from netpass.passes import GraphRewrite, Manager, MatcherPass, ModelPass
from netpass.passes.validation import Interface, check_interface, validate_changes
from netpass.pattern import Matcher, any_input, wrap_type


def transpose_pair_model():
    """x[2,3,4,5] -> Transpose(0,2,1,3) -> Transpose(2,0,3,1) -> out [3,2,5,4]."""
    x = opset.parameter([2, 3, 4, 5], np.float32, name="x")
    t1 = opset.transpose(x, np.array([0, 2, 1, 3]))
    t2 = opset.transpose(t1, np.array([2, 0, 3, 1]))
    r = opset.result(t2)
    r.friendly_name = "out"
    return Model([r], [x], "pair")


class WrongTransposeFold(MatcherPass):
    """Folds Transpose(Transpose(x, a), b) into one Transpose but composes the orders the
    wrong way round (b[a] instead of a[b])."""

    def __init__(self):
        super().__init__()
        first = wrap_type(ops.Transpose, [any_input(), wrap_type(ops.Constant)])
        second = wrap_type(ops.Transpose, [first, wrap_type(ops.Constant)])

        def callback(m):
            root, inner = m.match_root, m.pattern_value_map[first].node
            a, b = inner.input_value(1).node.value, root.input_value(1).node.value
            folded = opset.transpose(inner.input_value(0), b[a])
            root.output(0).replace(folded.output(0))
            return True
        self.register_matcher(Matcher(second, "WrongTransposeFold"), callback)


class StrayConvert(MatcherPass):
    """Puts a Convert to i64 after the Relu that feeds the model output."""

    def __init__(self):
        super().__init__()

        def callback(m):
            relu = m.match_root
            if any(c.node.type_name == "Convert" for c in relu.output(0).consumers()):
                return False
            conv = opset.convert(relu.output(0), np.int64)
            relu.output(0).replace(conv.output(0))
            return True
        self.register_matcher(Matcher(wrap_type(ops.Relu), "StrayConvert"), callback)


def relu_model():
    x = opset.parameter([2, 3], np.float32, name="x")
    r = opset.result(opset.relu(x))
    r.friendly_name = "y"
    return Model([r], [x], "relu")


def run(model, *passes, validate=True):
    manager = Manager()
    manager.set_per_pass_validation(validate)
    for p in passes:
        manager.register_pass(p)
    return manager.run_passes(model)


# -- the interface --------------------------------------------------------------------------
def test_output_shape_change_is_caught_and_names_the_pass():
    model = transpose_pair_model()
    assert model.output(0).partial_shape == [3, 2, 5, 4]
    with pytest.raises(PassValidationError) as info:
        run(model, WrongTransposeFold())
    assert info.value.pass_name == "WrongTransposeFold"
    assert "output 'out' shape [3,2,5,4] became [4,5,2,3]" in str(info.value)


def test_correct_fold_passes_validation():
    class RightFold(WrongTransposeFold):
        def __init__(self):
            MatcherPass.__init__(self)
            first = wrap_type(ops.Transpose, [any_input(), wrap_type(ops.Constant)])
            second = wrap_type(ops.Transpose, [first, wrap_type(ops.Constant)])

            def callback(m):
                root, inner = m.match_root, m.pattern_value_map[first].node
                a, b = inner.input_value(1).node.value, root.input_value(1).node.value
                root.output(0).replace(opset.transpose(inner.input_value(0), a[b]).output(0))
                return True
            self.register_matcher(Matcher(second, "RightFold"), callback)
    model = transpose_pair_model()
    assert run(model, RightFold())
    assert model.output(0).partial_shape == [3, 2, 5, 4]
    assert [n.type_name for n in model.get_ordered_ops()].count("Transpose") == 1


def test_output_element_type_change_is_caught_and_names_the_pass():
    with pytest.raises(PassValidationError, match="pass 'StrayConvert'.*output 'y' element "
                                                  "type f32 became i64") as info:
        run(relu_model(), StrayConvert())
    assert info.value.pass_name == "StrayConvert"


def test_validation_off_checks_nothing():
    model = relu_model()
    assert run(model, StrayConvert(), validate=False)
    assert model.output(0).element_type.name == "i64"


def test_declared_interface_change_is_allowed():
    class DeclaredConvert(StrayConvert):
        changes_model_io = True
    model = relu_model()
    assert run(model, DeclaredConvert())
    assert model.output(0).element_type.name == "i64"


def test_declared_change_of_a_nested_pass_covers_the_composite():
    class DeclaredConvert(StrayConvert):
        changes_model_io = True

    class Composite(ModelPass):
        def run_on_model(self, model):
            inner = Manager(self.get_pass_config())
            inner.set_per_pass_validation(False)
            inner.register_pass(GraphRewrite(DeclaredConvert()))
            inner.run_passes(model)
            return False
    model = relu_model()
    run(model, Composite())
    assert model.output(0).element_type.name == "i64"


def test_input_removed_is_caught():
    class DropInput(ModelPass):
        def run_on_model(self, model):
            model.remove_parameter(model.parameters[1])
            model.results[0].input(0).replace_source_output(model.parameters[0].output(0))
            return True
    x = opset.parameter([2], np.float32, name="x")
    z = opset.parameter([2], np.float32, name="z")
    model = Model([opset.add(x, z)], [x, z])
    with pytest.raises(PassValidationError, match=r"model inputs \['x', 'z'\] became \['x'\]"):
        run(model, DropInput())


def test_refined_shape_is_compatible():
    class Refine(ModelPass):
        def run_on_model(self, model):
            p = model.parameters[0]
            p.set_attribute("shape", [2, 3])
            p.validate_and_infer_types()
            return True
    x = opset.parameter([-1, 3], np.float32, name="x")
    model = Model([opset.relu(x)], [x])
    assert run(model, Refine())  # [?,3] -> [2,3] describes the same tensors, refined
    assert model.output(0).partial_shape == [2, 3]


# -- incremental re-inference and lint ------------------------------------------------------
def chain(n):
    x = opset.parameter([4, 8], np.float32, name="x")
    y = x
    nodes = []
    for _ in range(n):
        y = opset.relu(y)
        nodes.append(y)
    return Model([y], [x]), nodes


def test_a_rewire_that_keeps_the_shape_leaves_nothing_to_reinfer():
    model, nodes = chain(200)
    with model.track_changes() as log:
        nodes[100].input(0).replace_source_output(nodes[98].output(0))
    assert log.edits > 0 and not list(log.stale_nodes())
    assert validate_changes("P", model, log) == 0


def test_a_rewire_to_another_shape_reinfers_down_to_where_shapes_settle():
    x = opset.parameter([4, 8], np.float32, name="x")
    a = opset.relu(x)
    b = opset.relu(a)
    s = opset.reduce_sum(b, np.array([0, 1]), False)  # shape [] whatever b's shape is
    model = Model([opset.relu(opset.relu(s))], [x])
    with model.track_changes() as log:
        b.input(0).replace_source_output(opset.reshape(a, np.array([2, 16]), False).output(0))
    assert list(log.stale_nodes()) == [b]
    assert validate_changes("P", model, log) == 2  # b, then ReduceSum: its shape is still []


def test_a_node_reading_several_reinferred_values_is_reinferred_once(monkeypatch):
    x = opset.parameter([4, 8], np.float32, name="x")
    parts = [opset.reshape(x, np.array([8, 4], np.int64), False) for _ in range(3)]
    cat = opset.concat(parts, 0)
    model = Model([opset.reduce_sum(cat, np.array([0, 1]), False)], [x])
    with model.track_changes() as log:
        for p in parts:  # edited in place, each now [4, 8]
            p.input(1).replace_source_output(opset.constant(np.array([4, 8], np.int64)).output(0))
            p.validate_and_infer_types()
    calls = []
    infer = type(cat).infer_types
    monkeypatch.setattr(type(cat), "infer_types", lambda self: (calls.append(self), infer(self)))
    # The Reshapes were re-inferred by the pass itself: Concat (once) and ReduceSum remain.
    assert validate_changes("P", model, log) == 2
    assert calls == [cat] and cat.output(0).partial_shape == [12, 8]


def test_a_sinking_step_leaves_nothing_to_reinfer():
    """A forward sinking step (the op's input bypassed, the op re-inferred in place, a new
    node inserted after it that restores the old shape for the consumers) is consistent as
    it stands: nothing is re-inferred, and the nodes the pass touched are still linted."""
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    t = opset.transpose(x, np.array([0, 2, 1]))
    relu = opset.relu(t)
    out = opset.abs(relu)
    model = Model([out], [x])
    with model.track_changes() as log:
        relu.input(0).replace_source_output(x.output(0))
        relu.validate_and_infer_types()
        after = opset.transpose(relu, np.array([0, 2, 1]))
        relu.output(0).replace(after.output(0))
    assert list(log.stale_nodes()) == [] and list(log.stale_readers()) == []
    assert list(log.refreshed_nodes()) == [relu]
    assert validate_changes("P", model, log) == 0
    assert out.input_value(0).node is after and out.output(0).partial_shape == [2, 4, 3]


def test_a_reader_of_the_earlier_state_is_stale_until_rewired_to_an_equal_value():
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    t = opset.transpose(x, np.array([0, 2, 1]))
    relu = opset.relu(t)
    kept, moved = opset.abs(relu), opset.negative(relu)
    model = Model([kept, moved], [x])
    with model.track_changes() as log:
        relu.input(0).replace_source_output(x.output(0))
        relu.validate_and_infer_types()
        later = opset.exp(relu)  # built from the new state: up to date
        moved.input(0).replace_source_output(t.output(0))  # the shape it read before
    assert list(log.stale_readers()) == [kept]
    assert later not in list(log.stale_readers())
    before = Interface.of(model)
    assert validate_changes("P", model, log) == 2  # ``kept`` and its Result
    assert kept.output(0).partial_shape == [2, 3, 4] and moved.output(0).partial_shape == [2, 4, 3]
    with pytest.raises(PassValidationError, match="output 0 shape"):
        check_interface("P", before, model)


def test_a_reader_is_one_while_it_reads_the_node_at_some_input():
    """Moved away from a node re-inferred in place, a consumer no longer reads its earlier
    state; one still reading it at another input does (and is stale)."""
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    t = opset.transpose(x, np.array([0, 2, 1]))
    relu = opset.relu(t)
    both, moved = opset.add(relu, relu), opset.abs(relu)
    model = Model([both, moved], [x])
    with model.track_changes() as log:
        relu.input(0).replace_source_output(x.output(0))
        relu.validate_and_infer_types()
        moved.input(0).replace_source_output(t.output(0))
        both.input(0).replace_source_output(t.output(0))
    readers = log._stale_consumers[id(relu)].readers
    assert readers == {id(both)} and list(log.stale_readers()) == [both]


def test_refreshed_is_reinferred_with_states_that_did_not_change():
    from netpass.core import PartialShape
    from netpass.core.ports import port_states
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    t = opset.transpose(x, np.array([0, 2, 1]))
    relu = opset.relu(t)
    model = Model([opset.abs(relu)], [x])
    logs = []
    for told in ("reinferred", "refreshed"):
        with model.track_changes() as log:
            t._outs[0].ps = PartialShape([2, 3, 4])  # a state re-inferring t changes
            t.validate_and_infer_types()  # relu read t's earlier state
            log.touched(relu)
            if told == "reinferred":
                log.reinferred(relu, port_states(relu))
            else:
                log.refreshed(relu)
        logs.append(log)
    for log in logs:
        assert list(log.stale_nodes()) == [] and list(log.refreshed_nodes()) == [t, relu]
        assert list(log.reinferred_nodes()) == [t] and list(log.stale_readers()) == []
        assert log.edits == 3
        assert validate_changes("P", model, log) == 0


def test_a_refreshed_node_is_linted_while_in_the_model_only():
    x = opset.parameter([2, 3], np.float32, name="x")
    kept, dropped = opset.relu(x), opset.abs(x)
    model = Model([opset.negative(kept)], [x])
    stray = opset.exp(x).output(0)
    with model.track_changes() as log:
        for node in (kept, dropped):
            node.validate_and_infer_types()
            node._inputs[0] = stray  # rewired behind the consumer tables' back
        dropped.output(0).consumers()  # (no consumer: outside the model, kept alive here)
    with pytest.raises(PassValidationError) as info:
        validate_changes("P", model, log)
    message = str(info.value)
    assert f"'{kept.friendly_name}' input 0 is not listed" in message
    assert dropped.friendly_name not in message


def test_the_lint_drops_the_entries_of_freed_consumers_it_passes_over():
    import gc
    x = opset.parameter([2, 3], np.float32, name="x")
    a = opset.relu(x)
    kept, gone = opset.negative(a), opset.abs(a)
    model = Model([opset.exp(kept)], [x])
    with model.track_changes() as log:
        a.validate_and_infer_types()
    del gone
    gc.collect()
    table = a._outs[0].cons  # (read directly: ``consumers()`` drops dead entries itself)
    assert [ref() for ref in table.values()] == [kept, None]
    assert validate_changes("P", model, log) == 0
    assert [ref() for ref in table.values()] == [kept]


def reshape_model():
    x = opset.parameter([4, 8], np.float32, name="x")
    reshaped = opset.reshape(x, np.array([8, 4], np.int64), False)
    return Model([opset.relu(opset.relu(reshaped))], [x])


class Retarget(ModelPass):
    """Gives the Reshape another target and re-infers nothing (as OpenVINO passes that leave
    shapes to the Manager's validation do)."""

    def run_on_model(self, model):
        for n in model.get_ordered_ops():
            if n.type_name == "Reshape":
                n.input(1).replace_source_output(
                    opset.constant(np.array([2, 16], np.int64)).output(0))
        return True


def test_stale_shapes_are_pushed_down_to_the_outputs():
    model = reshape_model()
    with model.track_changes() as log:
        Retarget().run_on_model(model)
    assert model.output(0).partial_shape == [8, 4]  # stale until validated
    assert validate_changes("Retarget", model, log) == 4  # Reshape, two Relus, the Result
    assert model.output(0).partial_shape == [2, 16]


def test_stale_output_shape_change_is_caught():
    with pytest.raises(PassValidationError, match=r"'Retarget'.*output 0 shape \[8,4\] became "
                                                  r"\[2,16\]"):
        run(reshape_model(), Retarget())


def test_a_node_that_no_longer_fits_its_inputs_is_named():
    class Breaker(ModelPass):
        def run_on_model(self, model):
            for n in model.get_ordered_ops():
                if n.type_name == "Relu":
                    n.input(0).replace_source_output(
                        opset.constant(np.ones([5], np.float32)).output(0))
            return True
    x = opset.parameter([2, 3], np.float32, name="x")
    c = opset.concat([opset.relu(x), x], 0)
    c.friendly_name = "cat"
    with pytest.raises(PassValidationError, match="'Breaker'.*Concat 'cat'") as info:
        run(Model([c], [x]), Breaker())
    assert info.value.node is c
    assert isinstance(info.value.cause, ShapeInferenceError)


def test_a_node_outside_the_model_that_no_longer_fits_is_not_the_models_problem():
    """A node the model does not reach, kept alive with a consumer of its own (a user's
    variable, a test's list of values), is re-inferred from the rewired value and fails; the
    model itself is fine, so validation passes."""
    x = opset.parameter([4, 8], np.float32, name="x")
    first = opset.reshape(x, np.array([8, 4], np.int64), False)
    flat = opset.reshape(opset.relu(first), np.array([32], np.int64), False)
    model = Model([flat], [x])
    dangling = opset.relu(opset.add(first, opset.constant(np.ones([8, 4], np.float32))))

    class RetargetFirst(ModelPass):
        def run_on_model(self, model):
            first.input(1).replace_source_output(opset.constant(np.array([2, 16], np.int64)).output(0))
            return True
    run(model, RetargetFirst())
    assert model.output(0).partial_shape == [32] and first.output(0).partial_shape == [2, 16]
    assert dangling.input_value(0).node.type_name == "Add"


def test_reading_a_foreign_parameter_is_caught():
    class Foreign(ModelPass):
        def run_on_model(self, model):
            stray = opset.parameter([2, 3], np.float32, name="stray")
            model.output(0).node.input(0).replace_source_output(stray.output(0))
            return True
    with pytest.raises(PassValidationError, match="Parameter 'stray' is not a model parameter "
                                                  "but feeds Relu"):
        run(relu_model(), Foreign())


def test_a_pass_that_reports_no_change_but_changed_is_still_checked():
    class Silent(StrayConvert):
        def __init__(self):
            super().__init__()
            inner = self.callback
            self.callback = lambda m: inner(m) and False
    with pytest.raises(PassValidationError, match="'Silent'.*element type f32 became i64"):
        run(relu_model(), Silent())


def test_nested_validated_manager_settles_its_changes():
    model, nodes = chain(3)
    outer = ChangeLog().start()
    try:
        assert run(model, StrayToTanh())
    finally:
        outer.stop()
    assert outer.edits > 0 and not outer  # validated inside: nothing left for the outer check


class StrayToTanh(MatcherPass):
    def __init__(self):
        super().__init__()

        def callback(m):
            r = m.match_root
            r.output(0).replace(opset.tanh(r.input_value(0)).output(0))
            return True
        self.register_matcher(Matcher(wrap_type(ops.Relu), "StrayToTanh"), callback)


# -- a change reported is a change made -----------------------------------------------------
def test_callback_returning_true_without_a_change_is_caught():
    def nothing(m):
        return True
    x = opset.parameter([2, 3], np.float32, name="x")
    relu = opset.relu(x)
    relu.friendly_name = "r"
    with pytest.raises(PassValidationError, match="pass 'Liar'.*returned True on Relu 'r' but "
                                                  "changed nothing") as info:
        run(Model([relu], [x]), MatcherPass(Matcher(wrap_type(ops.Relu), "Liar"), nothing))
    assert info.value.pass_name == "Liar" and info.value.node is relu


def test_refused_replace_node_update_name_is_a_no_op_that_validation_reports():
    """OpenVINO's rule: the replacement reads a Parameter and the target feeds a Result, so
    replace_node_update_name refuses; a callback ignoring its result is caught."""
    from netpass import replace_node_update_name

    def callback(m):
        t = m.match_root
        replace_node_update_name(t, opset.relu(t.input_value(0)))
        return True
    x = opset.parameter([2, 3], np.float32, name="x")
    model = Model([opset.tanh(x)], [x])
    with pytest.raises(PassValidationError, match="changed nothing"):
        run(model, MatcherPass(Matcher(wrap_type(ops.Tanh), "Careless"), callback))


def test_no_op_check_is_off_without_validation():
    assert run(relu_model(), MatcherPass(Matcher(wrap_type(ops.Relu), "Liar"), lambda m: True),
               validate=False)


# -- errors name the culprit ----------------------------------------------------------------
class Explodes(MatcherPass):
    def __init__(self):
        super().__init__()

        def callback(m):
            # A bad rank for a Transpose order: shape inference of the new node fails.
            opset.transpose(m.match_root.output(0), np.array([0, 1, 2]))
            return True
        self.register_matcher(Matcher(wrap_type(ops.Relu), "Explodes"), callback)


def test_callback_exception_names_pass_and_matched_node():
    x = opset.parameter([2, 3], np.float32, name="x")
    relu = opset.relu(x)
    relu.friendly_name = "act"
    with pytest.raises(PassError) as info:
        run(Model([relu], [x]), Explodes())
    err = info.value
    assert err.pass_name == "Explodes" and err.node is relu
    assert isinstance(err.cause, ShapeInferenceError) and err.__cause__ is err.cause
    assert "pass 'Explodes' failed on Relu 'act': ShapeInferenceError" in str(err)


def test_callback_exception_inside_graph_rewrite_names_the_matcher_pass():
    x = opset.parameter([2, 3], np.float32, name="x")
    model = Model([opset.relu(opset.tanh(x))], [x])
    with pytest.raises(PassError) as info:
        run(model, GraphRewrite(StrayToTanhOnTanh(), Explodes()))
    assert info.value.pass_name == "Explodes"


class StrayToTanhOnTanh(MatcherPass):
    def __init__(self):
        super().__init__()
        self.register_matcher(Matcher(wrap_type(ops.Tanh), "Nothing"), lambda m: False)


def test_predicate_exception_names_the_pass_and_node():
    def bad(out):
        raise ValueError("predicate bug")
    mp = MatcherPass(Matcher(wrap_type(ops.Relu, predicate=bad), "BadPredicate"),
                     lambda m: False)
    with pytest.raises(PassError, match="'BadPredicate' failed on Relu.*predicate bug") as info:
        run(relu_model(), mp)
    assert isinstance(info.value.cause, ValueError)


def test_model_pass_exception_names_the_pass():
    class Broken(ModelPass):
        def run_on_model(self, model):
            raise KeyError("missing")
    with pytest.raises(PassError, match="pass 'Broken' failed: KeyError") as info:
        run(relu_model(), Broken())
    assert info.value.pass_name == "Broken" and info.value.node is None


def test_nested_pass_error_keeps_the_innermost_name():
    class Composite(ModelPass):
        def run_on_model(self, model):
            inner = Manager(self.get_pass_config())
            inner.register_pass(Explodes())
            return inner.run_passes(model)
    with pytest.raises(PassError) as info:
        run(relu_model(), Composite())
    assert info.value.pass_name == "Explodes"


def test_apply_raises_pass_error_too():
    x = opset.parameter([2, 3], np.float32, name="x")
    relu = opset.relu(x)
    with pytest.raises(PassError) as info:
        Explodes().apply(relu)
    assert info.value.node is relu
