"""OpenVINO's own pattern and pass-framework unit tests, ported case by case to netpass's API.

Sources: openvinotoolkit/openvino ``src/core/tests/pattern.cpp``, ``matcher_pass.cpp`` and
``graph_rewrite.cpp``. A case that uses an API netpass does not have is listed in
``NOT_PORTED`` with the reason. Where OpenVINO uses a graph node inside a pattern (a Parameter
that matches only itself, in its TestMatcher), the port uses ``wrap_type`` of that op; the
expectations are the installed OpenVINO's (``Optional`` falls back to its input 0 only).
"""
from __future__ import annotations

import numpy as np
import pytest

from netpass import Model, ops, opset, replace_node
from netpass.passes import BackwardGraphRewrite, GraphRewrite, Manager, MatcherPass, PassConfig
from netpass.pattern import Matcher, any_input, consumers_count, optional, wrap_type

NOT_PORTED = {
    "pattern.matcher / pattern.mean / pattern.variance / pattern.label_on_skip":
        "graph nodes, Label(wrapped nodes), Any and Skip as pattern nodes: netpass patterns "
        "are wrap_type / any_input / Or / optional only",
    "pattern.previous_matches": "Matcher.match(value, previous_matches) is not in netpass",
    "pattern.is_contained_match / get_matched_nodes": "not in netpass",
    "GraphRewriteTest.nodes_use_count": "C++ shared_ptr use counts",
}


def _param(shape=(), dtype=np.int32, name=None):
    return opset.parameter(list(shape), dtype, name=name)


# -- pattern.cpp: wrap_type_single_op / wrap_type_multi_op ---------------------------------
def test_wrap_type_single_op():
    a = _param((1, 3, 64, 64), np.float32)
    b, c = opset.abs(a), opset.relu(a)
    one = np.array(1, np.float32)
    mul1, mul2 = opset.multiply(a, opset.constant(one)), opset.multiply(opset.constant(one), a)
    m = wrap_type(ops.Abs)
    matcher = Matcher(m, "AbsMatcher")
    assert matcher.match(b) and matcher.pattern_map == {m: b}
    assert not matcher.match(c)
    m1 = wrap_type(ops.Parameter)
    m2 = wrap_type(ops.Abs, [m1])
    matcher = Matcher(m2, "ParamAbsMatcher")
    assert matcher.match(b) and matcher.pattern_map == {m1: a, m2: b}
    assert not matcher.match(c)
    for inputs in ([any_input(), wrap_type(ops.Constant)], [wrap_type(ops.Constant), any_input()]):
        matcher = Matcher(wrap_type(ops.Multiply, inputs), "MultiplyMatcher")
        assert matcher.match(mul1) and matcher.match(mul2)


@pytest.mark.parametrize("types", [(ops.Multiply, ops.Add), ops.BinaryElementwiseArithmetic])
def test_wrap_type_multi_op(types):
    a = _param((1, 3, 64, 64), np.float32)
    one = opset.constant(np.array(1, np.float32))
    mul, add = opset.multiply(a, one), opset.add(one, a)
    m = wrap_type(types)
    matcher = Matcher(m, "MulAddMatcher")
    for node in (mul, add):
        assert matcher.match(node.output(0)) and matcher.pattern_map == {m: node}
    for node in (a, opset.abs(a), opset.relu(a)):
        assert not matcher.match(node)


# -- pattern.cpp: optional_* ----------------------------------------------------------------
def test_optional_single_in():
    a, b = _param(), _param()
    c = opset.add(a, b)
    d = wrap_type(ops.Add, [wrap_type(ops.Parameter), wrap_type(ops.Parameter)])
    assert Matcher(optional((ops.Abs, ops.Relu), [d])).match(c)
    assert Matcher(optional((ops.Abs, ops.Relu), [d])).match(opset.relu(c))
    assert Matcher(optional((ops.Abs, ops.Relu), [d])).match(opset.abs(c))
    assert not Matcher(optional((ops.Abs, ops.Relu), [d])).match(opset.exp(c))
    assert not Matcher(optional((ops.Exp, ops.Cos), [d])).match(opset.abs(c))
    never = optional((ops.Abs, ops.Relu), [d], lambda out: False)
    assert not Matcher(never).match(opset.abs(c))


def test_optional_multi_in_commutative_op():
    a, b = _param(name="a"), _param(name="b")
    c = opset.add(a, b)
    pa = wrap_type(ops.Parameter, predicate=lambda o: o.node is a)
    pb = wrap_type(ops.Parameter, predicate=lambda o: o.node is b)
    assert Matcher(optional(ops.Add, [pa, pb])).match(c)
    assert Matcher(optional(ops.Add, [pb, pa])).match(c)
    assert not Matcher(optional(ops.Add, [pa])).match(c)
    assert not Matcher(optional(ops.Add, [pb])).match(c)
    assert Matcher(optional(ops.Add, [pa, pb])).match(a)
    assert not Matcher(optional(ops.Add, [pa, pb])).match(b)  # absent: input 0 only


def test_optional_multi_in_order_important():
    a = _param((2, 3, 4), np.float32)
    b = opset.constant(np.array([2, 0, 1], np.int32))
    c = opset.transpose(a, b)
    pa, pb = wrap_type(ops.Parameter), wrap_type(ops.Constant)
    assert Matcher(optional(ops.Transpose, [pa, pb])).match(c)
    assert not Matcher(optional(ops.Transpose, [pb, pa])).match(c)
    assert not Matcher(optional(ops.Transpose, [pa])).match(c)
    assert not Matcher(optional(ops.Transpose, [pb])).match(c)
    assert Matcher(optional(ops.Transpose, [pa, pb])).match(a)
    assert Matcher(optional(ops.Transpose, [pb, pa])).match(b)


def test_optional_multi_in_pattern_matching():
    x0, x1 = _param(), _param()
    p0, p1 = any_input(), any_input()
    relu = wrap_type(ops.Relu, [optional(ops.Add, [p0, p1])])
    for graph in (opset.relu(opset.add(x0, x1)), opset.relu(opset.add(x1, x0)),
                  opset.relu(x0), opset.relu(x1)):
        assert Matcher(relu).match(graph)


def test_optional_single_in_pattern_matching():
    x = _param()
    pattern = wrap_type(ops.Abs, [optional(ops.Relu, [any_input()])])
    assert Matcher(pattern).match(opset.abs(opset.relu(x)))
    assert Matcher(pattern).match(opset.abs(x))


def test_sort_same_map_on_repeated_match():
    a, b = _param(), _param()
    add = opset.add(opset.abs(a), opset.abs(b))
    pabs1 = wrap_type(ops.Abs, [wrap_type(ops.Parameter)])
    pattern = wrap_type(ops.Add, [pabs1, wrap_type(ops.Abs, [wrap_type(ops.Parameter)])])
    m = Matcher(pattern)
    assert m.match(add)
    first = m.pattern_map[pabs1]
    assert m.match(add) and m.pattern_map[pabs1] is first


# -- pattern.cpp: graph_rewrite (a + 0 -> a, a * 1 -> a) ------------------------------------
def _eliminate(op: type, value: int) -> MatcherPass:
    label = any_input()
    const = wrap_type(ops.Constant, predicate=lambda o: bool(np.all(o.node.value == value)))

    def callback(m: Matcher) -> bool:
        replace_node(m.match_root, [m.pattern_value_map[label]])
        return True
    return MatcherPass(Matcher(wrap_type(op, [label, const]), f"{op.type_name}{value}"),
                       callback)


def _identity_rewrite() -> GraphRewrite:
    return GraphRewrite(_eliminate(ops.Multiply, 1), _eliminate(ops.Add, 0))


def _c(v: int):
    return opset.constant(np.array(v, np.int32))


@pytest.mark.parametrize("build", [
    lambda a, b: opset.add(b, opset.add(a, _c(0))),
    lambda a, b: opset.add(b, opset.multiply(a, _c(1))),
    lambda a, b: opset.add(opset.multiply(opset.multiply(opset.multiply(
        opset.multiply(a, _c(1)), _c(1)), _c(1)), _c(1)), b),
    lambda a, b: opset.add(b, opset.add(_c(0), opset.multiply(opset.add(a, _c(0)), _c(1)))),
    lambda a, b: opset.add(b, opset.multiply(_c(1), opset.multiply(_c(1), opset.multiply(
        _c(1), opset.multiply(_c(1), a))))),
], ids=["add0", "mul1", "mul1x4", "mixed", "mul1_left"])
def test_graph_rewrite_identities(build):
    a, b = _param(name="a"), _param(name="b")
    graph = build(a, b)
    model = Model([graph], [a, b])
    manager = Manager()
    manager.register_pass(_identity_rewrite())
    manager.run_passes(model)
    assert {v.node for v in graph.input_values()} == {a, b}
    assert not [n for n in model.get_ordered_ops() if n.type_name == "Multiply"]


# -- matcher_pass.cpp: ReluReluFusion --------------------------------------------------------
class ReluReluFusion(MatcherPass):
    def __init__(self) -> None:
        super().__init__()
        relu1 = wrap_type(ops.Relu, predicate=consumers_count(1))
        relu2 = wrap_type(ops.Relu, [relu1])

        def callback(m: Matcher) -> bool:
            new = self.register_new_node(
                opset.relu(m.pattern_value_map[relu1].node.input_value(0)))
            new.friendly_name = m.match_root.friendly_name
            replace_node(m.match_root, new)
            return True
        self.register_matcher(Matcher(relu2, "ReluReluFusion"), callback)


def test_matcher_pass_apply_and_new_nodes():
    a = _param((1,), np.float32)
    c = opset.relu(opset.relu(a))
    model = Model([c], [a])
    mp = ReluReluFusion()
    assert mp.matcher.match(c.output(0))
    mp.matcher.clear_state()
    mp.apply(c)
    assert len(mp.get_new_nodes()) == 1
    mp.apply(mp.get_new_nodes()[0])
    assert mp.get_new_nodes() == []
    assert [n.type_name for n in model.get_ordered_ops()] == ["Parameter", "Relu", "Result"]


def test_matcher_pass_consumers_count_blocks_fusion():
    a = _param((1,), np.float32)
    b = opset.relu(a)
    c = opset.relu(b)
    model = Model([b, c], [a])  # b feeds c and a Result
    assert not ReluReluFusion().matcher.match(c.output(0))
    assert model.get_result_index(b.output(0)) == 0


def test_matcher_pass_fuses_chain_in_graph_rewrite():
    a = _param((1,), np.float32)
    model = Model([opset.relu(opset.relu(opset.relu(a)))], [a])
    gr = GraphRewrite()
    gr.add_matcher(ReluReluFusion)
    gr.run_on_model(model)
    assert [n.type_name for n in model.get_ordered_ops()] == ["Parameter", "Relu", "Result"]


# -- graph_rewrite.cpp ---------------------------------------------------------------------
class PrivateDivide(ops.Divide):
    """A derived op (OpenVINO's PrivateDivide): type-based matchers of Divide see it."""


def _divide_model(derived: bool = False) -> Model:
    data = _param((3, 1, 2), np.float32)
    const = opset.constant(np.array([1.5], np.float32))
    div = PrivateDivide([data, const]) if derived else opset.divide(data, const)
    return Model([div], [data])


def _refuse_divide(node) -> bool:
    return isinstance(node, ops.Divide)


class TestPass(MatcherPass):
    """Replaces a Divide by Relu where the transformation callback says True (as OpenVINO's
    test does: its callback returns True for Divide)."""

    __test__ = False  # (a pass, not a test class)

    replacement = staticmethod(opset.relu)
    root: type = ops.Divide

    def __init__(self) -> None:
        super().__init__()

        def callback(m: Matcher) -> bool:
            if self.transformation_callback(m.match_root):
                replace_node(m.match_root, self.replacement(m.match_root.input_value(0)))
                return True
            return False
        self.register_matcher(
            Matcher(wrap_type(self.root, [any_input(), any_input()]), type(self).__name__),
            callback)


class TestPassDerived(TestPass):
    __test__ = False
    replacement = staticmethod(opset.tanh)
    root = PrivateDivide


def _count(model: Model, name: str) -> int:
    return sum(n.type_name == name for n in model.get_ordered_ops())


@pytest.mark.parametrize("rewrite", [GraphRewrite, BackwardGraphRewrite])
def test_graph_rewrite_order_is_ordered_ops(rewrite):
    model = _divide_model()
    order = []

    def gather(m: Matcher) -> bool:
        order.append(m.match_root)
        return False
    manager = Manager()
    gr = manager.register_pass(rewrite)
    gr.add_matcher(MatcherPass(Matcher(any_input(), "GatherNodesPass"), gather))
    manager.run_passes(model)
    expected = model.get_ordered_ops()
    assert order == (expected[::-1] if rewrite is BackwardGraphRewrite else expected)


@pytest.mark.parametrize("where", ["matcher", "graph_rewrite", "manager", "manager_direct",
                                   "own_config", "per_type"])
def test_callbacks_reach_the_matcher(where):
    model = _divide_model()
    manager = Manager(PassConfig() if where == "own_config" else None)
    if where == "manager_direct":
        manager.register_pass(TestPass)
    else:
        anchor = manager.register_pass(GraphRewrite)
        anchor.add_matcher(TestPass)
    config = anchor.get_pass_config() if where == "graph_rewrite" else manager.get_pass_config()
    if where in ("per_type", "own_config"):
        config.set_callback(_refuse_divide, TestPass)
    else:
        config.set_callback(_refuse_divide)
    manager.run_passes(model)
    assert _count(model, "Relu") == 1


@pytest.mark.parametrize("derived", [False, True])
def test_type_based_matcher_sees_derived_op(derived):
    model = _divide_model(derived)
    anchor = GraphRewrite()
    anchor.add_matcher(TestPass).pass_config.set_callback(_refuse_divide)
    anchor.run_on_model(model)
    assert _count(model, "Relu") == 1


@pytest.mark.parametrize("first,expected", [(TestPass, "Relu"), (TestPassDerived, "Tanh")])
def test_type_based_matcher_order(first, expected):
    model = _divide_model(derived=True)
    anchor = GraphRewrite()
    for p in (first, TestPassDerived if first is TestPass else TestPass):
        anchor.add_matcher(p)
    anchor.pass_config.set_callback(_refuse_divide)
    anchor.run_on_model(model)
    assert _count(model, expected) == 1


@pytest.mark.parametrize("in_graph_rewrite", [False, True])
def test_pass_config_disable_then_enable(in_graph_rewrite):
    model = _divide_model()
    manager = Manager()
    if in_graph_rewrite:
        manager.register_pass(GraphRewrite).add_matcher(TestPass)
    else:
        manager.register_pass(TestPass)
    config = manager.get_pass_config()
    config.set_callback(_refuse_divide, TestPass)
    config.disable(TestPass)
    manager.run_passes(model)
    assert _count(model, "Relu") == 0
    config.enable(TestPass)
    manager.run_passes(model)
    assert _count(model, "Relu") == 1
