"""MatcherPass / GraphRewrite / BackwardGraphRewrite traversal semantics."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from netpass import Model, ops, opset
from netpass.ops.base import UnaryElementwiseArithmetic
from netpass.passes import BackwardGraphRewrite, GraphRewrite, MatcherPass
from netpass.pattern import Matcher, any_input, wrap_type
from netpass.reference import infer


def chain_model(*kinds, shape=(2, 3)):
    """x -> kinds[0] -> kinds[1] -> ... -> Result; node friendly names n0, n1, ..."""
    x = opset.parameter(list(shape), np.float32, name="x")
    y = x
    for i, k in enumerate(kinds):
        y = getattr(opset, k)(y)
        y.friendly_name = f"n{i}"
    return Model([y], [x], "chain")


class Recorder(MatcherPass):
    """Logs every node its callback sees; returns ``result``."""

    def __init__(self, root=UnaryElementwiseArithmetic, log=None, result=False, tag=None):
        super().__init__()
        self.log = log if log is not None else []
        tag = tag or type(self).__name__

        def callback(m):
            self.log.append((tag, m.match_root.friendly_name))
            return result
        self.register_matcher(Matcher(wrap_type(root), tag), callback)


class RecorderB(Recorder):
    pass


def test_callback_true_stops_other_matchers_on_that_node():
    log = []
    gr = GraphRewrite(Recorder(log=log, result=True, tag="A"), RecorderB(log=log, tag="B"))
    assert gr.run_on_model(chain_model("relu", "tanh"))
    assert log == [("A", "n0"), ("A", "n1")]


def test_callback_false_lets_next_matcher_try():
    log = []
    gr = GraphRewrite(Recorder(log=log, tag="A"), RecorderB(log=log, tag="B"))
    assert not gr.run_on_model(chain_model("relu"))
    assert log == [("A", "n0"), ("B", "n0")]


def test_forward_order_is_topological():
    log = []
    GraphRewrite(Recorder(log=log)).run_on_model(chain_model("relu", "tanh", "exp"))
    assert [n for _, n in log] == ["n0", "n1", "n2"]


def test_backward_graph_rewrite_walks_from_results():
    log = []
    BackwardGraphRewrite(Recorder(log=log)).run_on_model(chain_model("relu", "tanh", "exp"))
    assert [n for _, n in log] == ["n2", "n1", "n0"]


def test_dispatch_by_base_class_of_root_type():
    log = []
    GraphRewrite(Recorder(root=UnaryElementwiseArithmetic, log=log)).run_on_model(
        chain_model("relu", "sigmoid"))
    assert [n for _, n in log] == ["n0", "n1"]


def test_untyped_root_is_tried_on_every_node():
    log = []
    mp = MatcherPass(Matcher(any_input(), "Any"), lambda m: log.append(m.match_root.type_name) or False)
    GraphRewrite(mp).run_on_model(chain_model("relu"))
    assert log == ["Parameter", "Relu", "Result"]


class SplitInTwo(MatcherPass):
    """Relu 'n0' -> Tanh(new1) -> Exp(new2) registered as new nodes, in that order."""

    def __init__(self, log):
        super().__init__()

        def callback(m):
            relu = m.match_root
            log.append(("split", relu.friendly_name))
            if relu.friendly_name != "n0":
                return False
            t = self.register_new_node(opset.tanh(relu.input_value(0)))
            t.friendly_name = "new1"
            e = self.register_new_node(opset.exp(t))
            e.friendly_name = "new2"
            relu.output(0).replace(e.output(0))
            return True
        self.register_matcher(Matcher(wrap_type(ops.Relu), "SplitInTwo"), callback)


class LogUnary(Recorder):
    def __init__(self, log):
        super().__init__(log=log, tag="log")


def test_new_nodes_go_to_front_in_registration_order():
    log = []
    model = chain_model("relu", "sigmoid")
    gr = GraphRewrite(SplitInTwo(log), LogUnary(log))
    assert gr.run_on_model(model)
    assert log == [("split", "n0"), ("log", "new1"), ("log", "new2"), ("log", "n1")]


def test_same_matcher_is_retried_on_new_nodes():
    seen = []

    def callback(m):
        r = m.match_root
        seen.append(r.friendly_name)
        if r.friendly_name == "n0":
            new = mp.register_new_node(opset.relu(r.input_value(0)))
            new.friendly_name = "again"
            r.output(0).replace(new.output(0))
            return True
        return False
    mp = MatcherPass(Matcher(wrap_type(ops.Relu), "Requeue"), callback)
    GraphRewrite(mp).run_on_model(chain_model("relu"))
    assert seen == ["n0", "again"]


def test_unregistered_new_nodes_are_not_visited():
    seen = []

    def callback(m):
        r = m.match_root
        seen.append(r.friendly_name)
        if r.friendly_name == "n0":
            new = opset.relu(r.input_value(0))
            new.friendly_name = "unregistered"
            r.output(0).replace(new.output(0))
            return True
        return False
    GraphRewrite(MatcherPass(Matcher(wrap_type(ops.Relu), "R"), callback)).run_on_model(
        chain_model("relu", "relu"))
    assert seen == ["n0", "n1"]


def test_deleted_nodes_are_skipped():
    seen = []

    def callback(m):
        r = m.match_root
        seen.append(r.friendly_name)
        if r.friendly_name == "n0":  # drop n1 (a later node) from the graph
            n1 = r.output(0).consumers()[0].node
            n1.output(0).replace(r.output(0))
        return False
    GraphRewrite(MatcherPass(Matcher(wrap_type(ops.Relu), "Drop"), callback)).run_on_model(
        chain_model("relu", "relu", "relu"))
    assert seen == ["n0", "n2"]


def test_node_kept_alive_outside_graph_is_skipped():
    seen, held = [], []

    def callback(m):
        r = m.match_root
        seen.append(r.friendly_name)
        if r.friendly_name == "n0":
            n1 = r.output(0).consumers()[0].node
            held.append(n1)  # still alive, but no longer in the graph
            n1.output(0).replace(r.output(0))
        return False
    GraphRewrite(MatcherPass(Matcher(wrap_type(ops.Relu), "Hold"), callback)).run_on_model(
        chain_model("relu", "relu", "relu"))
    assert seen == ["n0", "n2"]


def test_replaced_nodes_are_freed_during_the_traversal():
    model = chain_model("relu", "tanh")
    tanh = model.results[0].input_value(0).node
    ref = weakref.ref(tanh)
    freed_when_relu_seen = []

    def callback(m):
        r = m.match_root
        if r.type_name == "Tanh":
            r.output(0).replace(r.input_value(0))
            return True
        return False

    def watch(m):
        freed_when_relu_seen.append(ref() is None)
        return False
    del tanh
    gr = BackwardGraphRewrite(MatcherPass(Matcher(wrap_type(ops.Tanh), "DropTanh"), callback),
                              MatcherPass(Matcher(wrap_type(ops.Relu), "Watch"), watch))
    assert gr.run_on_model(model)
    assert freed_when_relu_seen == [True]


def test_mutation_during_traversal_keeps_results_correct():
    class RemoveDoubleNegative(MatcherPass):
        def __init__(self):
            super().__init__()
            inner = wrap_type(ops.Negative)
            outer = wrap_type(ops.Negative, [inner])

            def callback(m):
                m.match_root.output(0).replace(m.pattern_value_map[inner].node.input_value(0))
                return True
            self.register_matcher(Matcher(outer, "RemoveDoubleNegative"), callback)

    model = chain_model("negative", "negative", "negative", "negative", "negative", "relu")
    x = np.random.default_rng(1).uniform(-2, 2, size=(2, 3)).astype(np.float32)
    before = infer(model, {"x": x})
    assert GraphRewrite(RemoveDoubleNegative()).run_on_model(model)
    gc.collect()
    assert [n.type_name for n in model.get_ordered_ops()] == ["Parameter", "Negative", "Relu", "Result"]
    after = infer(model, {"x": x})
    np.testing.assert_allclose(list(after.values())[0], list(before.values())[0], rtol=1e-6)


def test_matcher_pass_apply_runs_handler_on_one_node():
    model = chain_model("relu")
    relu = model.results[0].input_value(0).node
    mp = MatcherPass(Matcher(wrap_type(ops.Relu), "Apply"), lambda m: True)
    assert mp.apply(relu)
    assert not mp.apply(model.parameters[0])


def test_inline_matcher_pass_takes_matcher_name():
    mp = MatcherPass(Matcher(wrap_type(ops.Relu), "Inline"), lambda m: False)
    assert mp.name == "Inline"


def test_nested_graph_rewrite_is_flattened():
    log = []

    class Inner(GraphRewrite):
        def __init__(self):
            super().__init__()
            self.add_matcher(Recorder(log=log, tag="inner"))

    outer = GraphRewrite()
    outer.add_matcher(Inner)
    outer.add_matcher(RecorderB(log=log, tag="outer"))
    assert len(outer.matchers) == 2
    outer.run_on_model(chain_model("relu"))
    assert log == [("inner", "n0"), ("outer", "n0")]


def test_add_matcher_rejects_model_pass():
    from netpass.passes import ModelPass
    with pytest.raises(TypeError):
        GraphRewrite().add_matcher(ModelPass())


def test_explaining_matcher_reports_every_node_it_was_tried_on():
    m = Matcher(wrap_type(ops.Relu, [wrap_type(ops.Tanh)]), "ReluOfTanh", explain=True)
    GraphRewrite(MatcherPass(m, lambda mm: False)).run_on_model(chain_model("relu", "exp", "relu"))
    assert [f.root.node.friendly_name for f in m.failures] == ["n0", "n2"]
    assert "expected Tanh, got Exp" in str(m.failures[-1])


def test_or_of_typed_branches_dispatches_by_their_types():
    from netpass.pattern import Or
    mp = MatcherPass(Matcher(Or([wrap_type(ops.Relu), wrap_type(ops.Exp)]), "ReluOrExp"),
                     lambda m: False)
    assert set(mp._root_types) == {ops.Relu, ops.Exp}
    seen = []
    mp.callback = lambda m: seen.append(m.match_root.friendly_name) or False
    GraphRewrite(mp).run_on_model(chain_model("relu", "tanh", "exp"))
    assert seen == ["n0", "n2"]
