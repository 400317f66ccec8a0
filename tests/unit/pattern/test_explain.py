"""Why-no-match reports: deepest partial match, failing pattern node and reason."""
from __future__ import annotations

import logging

import numpy as np

from netpass import ops, opset
from netpass.pattern import Matcher, any_input, consumers_count, wrap_type


def param(shape=(2, 3), name="x"):
    return opset.parameter(list(shape), np.float32, name=name)


def transpose_pair():
    first = wrap_type(ops.Transpose, [any_input(), wrap_type(ops.Constant)], name="first")
    second = wrap_type(ops.Transpose, [first, wrap_type(ops.Constant)], name="second")
    return first, second


def test_wrong_type_reports_expected_and_got():
    _, second = transpose_pair()
    m = Matcher(second, "Pair", explain=True)
    t = opset.transpose(opset.relu(param((1, 2, 3))), [0, 2, 1])
    t.friendly_name = "T"
    assert not m.match(t)
    text = m.explain()
    assert "Matcher 'Pair' did not match Transpose 'T'" in text
    assert "first" in text and "expected Transpose, got Relu" in text
    assert m.last_failure.failed.name == "first"


def test_deepest_partial_match_is_listed():
    first, second = transpose_pair()
    m = Matcher(second, "Pair", explain=True)
    x = param((1, 2, 3))
    inner = opset.transpose(x, [0, 2, 1])
    order = opset.parameter([3], np.int64, name="order")  # not a Constant
    outer = opset.transpose(inner, order)
    assert not m.match(outer)
    report = m.last_failure
    bound = [p.label() for p, _ in report.partial]
    assert bound[:2] == ["second", "first"] and report.depth == 4
    assert "expected Constant, got Parameter" in str(report)
    assert "4 of 5 pattern nodes bound" in str(report)


def test_predicate_failure_names_the_predicate():
    r = opset.relu(param())
    keep = [opset.exp(r), opset.tanh(r)]
    m = Matcher(wrap_type(ops.Exp, [wrap_type(ops.Relu, predicate=consumers_count(1))]), explain=True)
    assert not m.match(keep[0])
    assert "predicate consumers_count(1) false" in m.explain()


def test_input_count_reason():
    m = Matcher(wrap_type(ops.Add, [any_input()]), explain=True)
    assert not m.match(opset.add(param(), param(name="y")))
    assert "input count 2 != 1" in m.explain()


def test_label_bound_to_another_value_reason():
    x = any_input(name="x")
    m = Matcher(wrap_type(ops.Add, [x, x]), explain=True)
    assert not m.match(opset.add(param(name="a"), param(name="b")))
    text = m.explain()
    assert "x" in text and "already bound to Parameter 'a'" in text and "met Parameter 'b'" in text


def test_every_attempt_is_recorded():
    m = Matcher(wrap_type(ops.Relu), explain=True)
    for _ in range(3):
        assert not m.match(opset.tanh(param()))
    assert len(m.failures) == 3


def test_success_leaves_no_failure_report():
    m = Matcher(wrap_type(ops.Relu), explain=True)
    assert not m.match(opset.tanh(param()))
    assert m.match(opset.relu(param()))
    assert m.last_failure is None and m.explain() == ""


def test_off_records_nothing():
    m = Matcher(wrap_type(ops.Relu))
    assert not m.match(opset.tanh(param()))
    assert m.last_failure is None and len(m.failures) == 0 and not m.explaining


def test_env_var_turns_on_debug_logging(monkeypatch, caplog):
    monkeypatch.setenv("NETPASS_MATCHER_LOGGING", "1")
    m = Matcher(wrap_type(ops.Relu), "EnvMatcher")
    assert m.explaining
    with caplog.at_level(logging.DEBUG, logger="netpass.pattern"):
        assert not m.match(opset.tanh(param()))
    messages = [r.getMessage() for r in caplog.records if r.name == "netpass.pattern"]
    assert any("EnvMatcher" in msg and "expected Relu, got Tanh" in msg for msg in messages)


# -- explain() when asked, on any matcher ----------------------------------------------------
def test_explain_works_on_a_matcher_that_was_not_explaining():
    _, second = transpose_pair()
    m = Matcher(second, "Pair")  # no explain=True, no environment variable
    t = opset.transpose(opset.relu(param((1, 2, 3))), [0, 2, 1])
    t.friendly_name = "T"
    assert not m.match(t)
    text = m.explain()
    assert "Matcher 'Pair' did not match Transpose 'T'" in text
    assert "expected Transpose, got Relu" in text
    assert m.match(opset.transpose(opset.transpose(param((1, 2, 3)), [0, 2, 1]), [0, 2, 1]))
    assert m.explain() == ""  # the last match succeeded


def test_explain_a_given_value_leaves_the_matcher_state_alone():
    first, second = transpose_pair()
    m = Matcher(second, "Pair")
    good = opset.transpose(opset.transpose(param((1, 2, 3)), [0, 2, 1]), [0, 2, 1])
    assert m.match(good)
    bad = opset.transpose(opset.exp(param((1, 2, 3))), [0, 2, 1])
    assert "expected Transpose, got Exp" in m.explain(bad)
    assert m.match_root is good and first in m.pattern_value_map


def test_explain_does_not_keep_the_missed_node_alive():
    import gc
    import weakref
    m = Matcher(wrap_type(ops.Exp), "E")
    r = opset.relu(param())
    alive = weakref.ref(r)
    assert not m.match(r)
    del r
    gc.collect()
    assert alive() is None and m.explain() == ""


def test_combined_predicate_names_the_part_that_failed():
    from netpass.pattern import has_static_rank, type_matches
    pred = has_static_rank() & type_matches("i64")
    m = Matcher(wrap_type(ops.Relu, predicate=pred), "R", explain=True)
    assert not m.match(opset.relu(param()))
    assert ("predicate (has_static_rank() & type_matches(i64)) false: type_matches(i64) false: "
            "element type f32") in m.explain()
