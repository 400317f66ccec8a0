"""Pattern language: types, labels, Or, optional, commutative matching, multi-output, results."""
from __future__ import annotations

import numpy as np
import pytest

from netpass import ops, opset
from netpass.ops.base import BinaryElementwiseArithmetic, UnaryElementwiseArithmetic
from netpass.pattern import Matcher, Or, PatternError, any_input, optional, wrap_type


def param(shape=(2, 3), name="x"):
    return opset.parameter(list(shape), np.float32, name=name)


def const(shape=(2, 3)):
    rng = np.random.default_rng(0)
    return opset.constant(rng.uniform(0.5, 1.5, size=shape).astype(np.float32))


# -- wrap_type ---------------------------------------------------------------------------------
def test_wrap_type_matches_class_and_rejects_other():
    r = opset.relu(param())
    assert Matcher(wrap_type(ops.Relu)).match(r.output(0))
    assert not Matcher(wrap_type(ops.Sigmoid)).match(r.output(0))


def test_wrap_type_tuple_of_classes():
    pattern = wrap_type((ops.Sigmoid, ops.Relu))
    assert Matcher(pattern).match(opset.relu(param()))
    assert Matcher(pattern).match(opset.sigmoid(param()))
    assert not Matcher(pattern).match(opset.tanh(param()))


def test_wrap_type_base_family_uses_isinstance():
    m = Matcher(wrap_type(UnaryElementwiseArithmetic))
    assert m.match(opset.relu(param())) and m.match(opset.tanh(param()))
    assert not m.match(opset.add(param(), const()))
    assert Matcher(wrap_type(BinaryElementwiseArithmetic)).match(opset.add(param(), const()))


def test_wrap_type_accepts_openvino_type_names():
    assert Matcher(wrap_type("opset1.Relu")).match(opset.relu(param()))
    with pytest.raises(PatternError, match="NoSuchOp"):
        wrap_type("NoSuchOp")


def test_wrap_type_without_inputs_ignores_inputs():
    add = opset.add(opset.relu(param()), const())
    assert Matcher(wrap_type(ops.Add)).match(add)


def test_wrap_type_with_inputs_checks_them():
    x = param()
    add = opset.add(opset.relu(x), const())
    assert Matcher(wrap_type(ops.Add, [wrap_type(ops.Relu), wrap_type(ops.Constant)])).match(add)
    assert not Matcher(wrap_type(ops.Add, [wrap_type(ops.Tanh), wrap_type(ops.Constant)])).match(add)


def test_wrap_type_with_empty_inputs_checks_no_inputs():
    # OpenVINO's wrap_type<T>({}) is wrap_type<T>(): an empty input list checks nothing (found
    # by tests/property/test_pattern_vs_openvino.py: netpass wanted a node without inputs)
    r = opset.relu(opset.parameter([2], np.float32, name="x"))
    assert Matcher(wrap_type(ops.Relu, [])).match(r)
    assert wrap_type(ops.Relu, []).inputs is None
    assert Matcher(wrap_type(ops.Add, [wrap_type(ops.Relu, []), any_input()])).match(
        opset.add(r, r))


def test_input_count_must_equal():
    add = opset.add(param(), const())
    assert not Matcher(wrap_type(ops.Add, [any_input()])).match(add)


def test_op_class_inside_inputs_is_shorthand_for_wrap_type():
    add = opset.add(opset.relu(param()), const())
    assert Matcher(wrap_type(ops.Add, [ops.Relu, ops.Constant])).match(add)


# -- labels --------------------------------------------------------------------------------------
def test_label_bound_twice_must_be_same_output():
    x = any_input()
    pattern = wrap_type(ops.Add, [x, x])
    a, b = param(name="a"), param(name="b")
    assert Matcher(pattern).match(opset.add(a, a))
    assert not Matcher(pattern).match(opset.add(a, b))


def test_label_predicate():
    x = any_input(lambda o: o.node.type_name == "Parameter")
    assert Matcher(wrap_type(ops.Relu, [x])).match(opset.relu(param()))
    assert not Matcher(wrap_type(ops.Relu, [x])).match(opset.relu(opset.relu(param())))


def test_wrap_type_met_twice_must_be_same_node():
    r = wrap_type(ops.Relu)
    pattern = wrap_type(ops.Add, [r, r])
    x = param()
    r1 = opset.relu(x)
    assert Matcher(pattern).match(opset.add(r1, r1))
    assert not Matcher(pattern).match(opset.add(r1, opset.relu(x)))


# -- Or and optional -------------------------------------------------------------------------------
def test_or_binds_winning_branch_and_itself():
    relu, tanh = wrap_type(ops.Relu), wrap_type(ops.Tanh)
    either = Or([relu, tanh])
    m = Matcher(wrap_type(ops.Exp, [either]))
    t = opset.tanh(param())
    assert m.match(opset.exp(t))
    pvm = m.pattern_value_map
    assert pvm[either].node is t and pvm[tanh].node is t and relu not in pvm


def test_or_rolls_back_failed_branch_bindings():
    inner = any_input()
    branch1 = wrap_type(ops.Relu, [wrap_type(ops.Tanh, [inner])])  # binds itself, then fails
    branch2 = wrap_type(ops.Relu, [inner])
    either = Or([branch1, branch2])
    m = Matcher(either)
    x = param()
    r = opset.relu(x)
    assert m.match(r)
    assert branch1 not in m.pattern_value_map
    assert m.pattern_value_map[inner].node is x


def test_optional_present_binds_it():
    x = any_input()
    opt = optional(ops.Relu, [x])
    m = Matcher(wrap_type(ops.Exp, [opt]))
    p = param()
    r = opset.relu(p)
    assert m.match(opset.exp(r))
    assert m.pattern_value_map[opt].node is r and m.pattern_value_map[x].node is p


def test_optional_absent_matches_input_and_leaves_it_unbound():
    x = any_input()
    opt = optional(ops.Relu, [x])
    m = Matcher(wrap_type(ops.Exp, [opt]))
    p = param()
    assert m.match(opset.exp(p))
    assert opt not in m.pattern_value_map and m.pattern_value_map[x].node is p


def test_optional_needs_inputs():
    with pytest.raises(PatternError):
        optional(ops.Relu)


# -- commutative ----------------------------------------------------------------------------------
def test_commutative_op_matches_swapped_arguments():
    pattern = wrap_type(ops.Add, [wrap_type(ops.Relu), wrap_type(ops.Constant)])
    assert Matcher(pattern).match(opset.add(const(), opset.relu(param())))


def test_non_commutative_op_keeps_argument_order():
    pattern = wrap_type(ops.Subtract, [wrap_type(ops.Relu), wrap_type(ops.Constant)])
    assert not Matcher(pattern).match(opset.subtract(const(), opset.relu(param())))
    assert Matcher(pattern).match(opset.subtract(opset.relu(param()), const()))


def test_commutative_retry_restores_state():
    a = any_input()
    pattern = wrap_type(ops.Multiply, [a, wrap_type(ops.Constant)])
    c = const()
    r = opset.relu(param())
    m = Matcher(pattern)
    assert m.match(opset.multiply(c, r))  # first order binds a=c, then fails on the Relu
    assert m.pattern_value_map[a].node is r
    assert len(m.pattern_value_map) == 3


# -- multi-output ------------------------------------------------------------------------------
def test_pattern_output_pins_output_index():
    split = wrap_type(ops.Split)
    pattern = wrap_type(ops.Relu, [split.output(1)])
    s = opset.split(param((4, 6)), 1, 2)
    m = Matcher(pattern)
    assert m.match(opset.relu(s.output(1)))
    assert m.pattern_value_map[split.output(1)] == s.output(1)
    assert m.pattern_value_map[split].node is s
    assert not m.match(opset.relu(s.output(0)))


def test_two_outputs_of_one_pattern_node_meet_one_node():
    split = wrap_type(ops.Split)
    pattern = wrap_type(ops.Add, [split.output(0), split.output(1)])
    s = opset.split(param((4, 6)), 1, 2)
    assert Matcher(pattern).match(opset.add(s.output(0), s.output(1)))
    s2 = opset.split(param((4, 6), "y"), 1, 2)
    assert not Matcher(pattern).match(opset.add(s.output(0), s2.output(1)))


def test_pattern_output_root_matches_node_at_that_output():
    split = wrap_type(ops.Split)
    s = opset.split(param((4, 6)), 1, 2)
    m = Matcher(split.output(1))
    assert m.match(s) and m.match_value == s.output(1)
    assert m.pattern.root_index() == 1


# -- results ----------------------------------------------------------------------------------
def test_match_results_and_openvino_aliases():
    x = any_input()
    root = wrap_type(ops.Relu, [x])
    p = param()
    r = opset.relu(p)
    m = Matcher(root, "R")
    assert m.match(r.output(0))
    assert m.match_root is r and m.get_match_root() is r
    assert m.get_match_value() == r.output(0) == m.match_value
    assert m.get_pattern_value_map()[x] == p.output(0)
    assert m.pattern_map == {root: r, x: p} == m.get_pattern_map()
    assert m.name == m.get_name() == "R"


def test_map_of_a_match_survives_the_next_match():
    m = Matcher(wrap_type(ops.Relu))
    r1, r2 = opset.relu(param()), opset.relu(param())
    assert m.match(r1)
    first = m.pattern_value_map
    assert m.match(r2)
    assert next(iter(first.values())).node is r1


def test_failed_match_leaves_no_state():
    m = Matcher(wrap_type(ops.Relu, [wrap_type(ops.Tanh)]))
    assert not m.match(opset.relu(param()))
    assert m.pattern_value_map == {} and m.match_root is None
