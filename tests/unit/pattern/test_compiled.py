"""Compiled matchers: same result and same map as the generic matcher, generic fallbacks."""
from __future__ import annotations

import numpy as np

from netpass import ops, opset
from netpass.pattern import Matcher, Or, Predicate, any_input, consumers_count, optional, wrap_type
from netpass.pattern.compiled import compile_pattern


def param(shape=(1, 2, 3, 4), name="x"):
    return opset.parameter(list(shape), np.float32, name=name)


def pair_pattern():
    first = wrap_type(ops.Transpose, [any_input(), wrap_type(ops.Constant)])
    return first, wrap_type(ops.Transpose, [first, wrap_type(ops.Constant)])


def generic(pattern) -> Matcher:
    m = Matcher(pattern)
    m._compiled = False  # force the node-by-node matcher
    return m


def test_tree_pattern_is_compiled():
    assert compile_pattern(pair_pattern()[1]) is not None


def test_shared_label_is_not_compiled():
    x = any_input()
    assert compile_pattern(wrap_type(ops.Add, [x, x])) is None


def test_or_and_optional_are_not_compiled():
    assert compile_pattern(Or([wrap_type(ops.Relu), wrap_type(ops.Tanh)])) is None
    assert compile_pattern(optional(ops.Relu, [any_input()])) is None


def test_compiled_map_equals_generic_map_in_order():
    t1 = opset.transpose(param(), np.array([0, 2, 3, 1]))
    t2 = opset.transpose(t1, np.array([0, 3, 1, 2]))
    pattern = pair_pattern()[1]
    fast, slow = Matcher(pattern), generic(pattern)
    assert fast.match(t2.output(0)) and slow.match(t2.output(0))
    assert list(fast.pattern_value_map.items()) == list(slow.pattern_value_map.items())
    assert fast.match_root is t2


def test_compiled_rejects_what_generic_rejects():
    r = opset.relu(opset.transpose(param(), np.array([0, 2, 3, 1])))
    t = opset.transpose(r, np.array([0, 3, 1, 2]))
    pattern = pair_pattern()[1]
    assert not Matcher(pattern).match(t.output(0))
    assert not generic(pattern).match(t.output(0))


def test_compiled_predicate_sees_the_same_partial_map():
    seen = []

    def pred(out, m):
        seen.append(len(m.pattern_value_map))
        return True

    inner = wrap_type(ops.Relu, [any_input()], predicate=Predicate(pred, "count"))
    pattern = wrap_type(ops.Sigmoid, [inner])
    s = opset.sigmoid(opset.relu(param()))
    assert Matcher(pattern).match(s.output(0))
    fast_seen, seen[:] = list(seen), []
    assert generic(pattern).match(s.output(0))
    assert fast_seen == seen == [1]


def test_compiled_predicate_failure_leaves_empty_state():
    pattern = wrap_type(ops.Relu, [any_input()], predicate=consumers_count(2))
    m = Matcher(pattern)
    assert not m.match(opset.relu(param()).output(0))
    assert m.pattern_value_map == {} and m.match_root is None


def test_commutative_node_falls_back_to_argument_order_retries():
    x = param()
    c = opset.constant(np.full((1, 2, 3, 4), 2.0, np.float32))
    add = opset.add(c, x)  # constant first: the pattern below lists it second
    pattern = wrap_type(ops.Add, [wrap_type(ops.Parameter), wrap_type(ops.Constant)])
    m = Matcher(pattern)
    assert m.match(add.output(0))
    assert m.pattern_value_map[pattern.inputs[0]].node is x
