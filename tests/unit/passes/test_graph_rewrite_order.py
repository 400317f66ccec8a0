"""GraphRewrite and the model's cached topological order: kept when nothing changed, released
at the first change; cached orders do not keep unused models alive."""
from __future__ import annotations

import gc
import weakref

import numpy as np

from netpass import Model, ops, opset
from netpass.passes import GraphRewrite, MatcherPass
from netpass.pattern import Matcher, any_input, wrap_type


def chain_model() -> Model:
    x = opset.parameter([1, 2, 3, 4], np.float32, name="x")
    t = opset.transpose(opset.relu(x), np.array([0, 2, 3, 1]))
    return Model([opset.sigmoid(t)], [x])


def bypass_relu() -> MatcherPass:
    def callback(m: Matcher) -> bool:
        relu = m.match_root
        relu.output(0).replace(relu.input_value(0))
        return True
    return MatcherPass(Matcher(wrap_type(ops.Relu, [any_input()]), "BypassRelu"), callback)


def test_unchanged_graph_keeps_cached_order():
    model = chain_model()
    never = MatcherPass(Matcher(wrap_type(ops.Relu), "Never"), lambda m: False)
    GraphRewrite(never).run_on_model(model)
    assert model._ordered is not None
    assert [n.type_name for n in model._ordered] == [n.type_name for n in model.get_ordered_ops()]


def test_changed_graph_drops_cached_order_and_frees_replaced_node():
    model = chain_model()
    relu = [n for n in model.get_ordered_ops() if n.type_name == "Relu"][0]
    gone = weakref.ref(relu)
    del relu
    assert GraphRewrite(bypass_relu()).run_on_model(model)
    assert model._ordered is None
    assert gone() is None
    assert [n.type_name for n in model.get_ordered_ops()] == \
        ["Parameter", "Constant", "Transpose", "Sigmoid", "Result"]


def test_cached_order_does_not_keep_an_unused_model_alive():
    model = chain_model()
    model.get_ordered_ops()
    gone = weakref.ref(model)
    del model
    gc.collect()
    assert gone() is None
