"""explain_pass: why a pass (matcher, GraphRewrite or composite) did or did not fire on a node."""
from __future__ import annotations

import numpy as np
import pytest

from netpass import Model, ops, opset
from netpass.errors import NetpassError
from netpass.ngraph_passes.common import CommonOptimizations, ConvertDivide
from netpass.passes import MatcherPass, PassConfig
from netpass.passes.explain import explain_pass
from netpass.pattern import Matcher, any_input, wrap_type


class FuseSwish(MatcherPass):
    def __init__(self):
        super().__init__()
        value = any_input(name="value")
        product = wrap_type(ops.Multiply, [value, wrap_type(ops.Sigmoid, [value])])

        def callback(m):
            mul = m.match_root
            if self.transformation_callback(mul):
                return False
            swish = opset.swish(m.pattern_value_map[value])
            swish.friendly_name = mul.friendly_name
            mul.output(0).replace(swish.output(0))
            return True
        self.register_matcher(Matcher(product, "FuseSwish"), callback)


def two_products():
    a = opset.parameter([2, 3], np.float32, name="a")
    b = opset.parameter([2, 3], np.float32, name="b")
    good = opset.multiply(a, opset.sigmoid(a))
    good.friendly_name = "good"
    bad = opset.multiply(a, opset.sigmoid(b))
    bad.friendly_name = "bad"
    return Model([opset.add(good, bad)], [a, b])


def test_no_match_is_explained_with_the_report():
    model = two_products()
    why = explain_pass(FuseSwish(), model, "bad")
    assert not why.fired
    (attempt,) = why.attempts
    assert attempt.outcome == "no match"
    assert "already bound to Parameter 'a'" in attempt.report and "met Parameter 'b'" in attempt.report
    text = str(why)
    assert text.startswith("pass 'FuseSwish' on Multiply 'bad':")
    assert text.endswith("=> the pass does not fire on this node")
    assert [n.type_name for n in model.get_ordered_ops()].count("Multiply") == 2  # untouched


def test_a_node_the_pass_rewrites_is_reported_as_fired():
    why = explain_pass(FuseSwish(), two_products(), "good")
    assert why.fired and why.attempts[0].outcome == "rewrote"
    assert "=> the pass fires on this node" in str(why)


def test_a_refusal_of_the_transformation_callback_is_a_decline():
    p = FuseSwish()
    config = PassConfig()
    config.set_callback(lambda node: True, FuseSwish)
    p.set_pass_config(config)
    why = explain_pass(p, two_products(), "good")
    assert [a.outcome for a in why.attempts] == ["declined"] and not why.fired


def test_predicate_failure_inside_a_registered_pass():
    x = opset.parameter([4], np.int32, name="x")
    div = opset.divide(x, opset.constant(np.array([2, 2, 2, 2], np.int32)))
    div.friendly_name = "intdiv"
    why = explain_pass(ConvertDivide(), Model([div], [x]), "intdiv")
    assert "predicate <lambda> false" in why.attempts[0].report


def test_composite_pass_and_a_node_no_matcher_starts_at():
    x = opset.parameter([2, 3], np.float32, name="x")
    t = opset.tanh(x)
    t.friendly_name = "t"
    why = explain_pass(CommonOptimizations(), Model([opset.divide(t, opset.constant(
        np.float32(2)))], [x]), "t")
    assert not why.attempts and why.traversals
    text = str(why)
    assert "no matcher of the pass can start at this node; they start at:" in text
    assert "ConvertDivide: Divide" in text


def test_unknown_node_lists_the_nodes():
    with pytest.raises(NetpassError, match="no node named 'nope'.*nodes: .*bad.*good"):
        explain_pass(FuseSwish(), two_products(), "nope")
