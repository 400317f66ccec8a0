"""Value predicates: consumers, shapes, ranks, types, attributes, shape_matches symbols."""
from __future__ import annotations

import numpy as np
import pytest

from netpass import ops, opset
from netpass.core.types import f32, i32
from netpass.pattern import (
    Matcher,
    any_input,
    attrs_match,
    binds,
    consumers_count,
    consumers_more_than,
    has_static_dim,
    has_static_rank,
    has_static_shape,
    rank_equals,
    shape_matches,
    type_matches,
    type_matches_any,
    wrap_type,
)


def param(shape=(2, 3), name="x", dtype=np.float32):
    return opset.parameter(list(shape), dtype, name=name)


def test_consumers_count_and_more_than():
    x = param()
    r = opset.relu(x)
    keep = [opset.exp(r), opset.tanh(r)]
    assert consumers_count(2)(r.output(0)) and not consumers_count(1)(r.output(0))
    assert consumers_more_than(1)(r.output(0)) and not consumers_more_than(2)(r.output(0))
    del keep


def test_consumers_count_ignores_freed_consumers():
    r = opset.relu(param())
    e = opset.exp(r)
    assert consumers_count(1)(r.output(0))
    del e
    assert consumers_count(0)(r.output(0))


def test_static_shape_rank_and_dim():
    dyn = param((-1, 3)).output(0)
    assert not has_static_shape()(dyn) and has_static_rank()(dyn)
    assert has_static_dim(1)(dyn) and not has_static_dim(0)(dyn) and has_static_dim(-1)(dyn)
    assert not has_static_dim(5)(dyn)
    assert has_static_shape()(param((2, 3)).output(0))
    assert not has_static_rank()(opset.parameter(None, np.float32).output(0))


def test_rank_equals():
    assert rank_equals(2)(param((2, 3)).output(0)) and not rank_equals(3)(param((2, 3)).output(0))


def test_type_matches_and_any():
    out = param(dtype=np.int32).output(0)
    assert type_matches(i32)(out) and not type_matches(f32)(out)
    assert type_matches_any([f32, "i32"])(out) and not type_matches_any([f32])(out)


def test_attrs_match_compares_sequences_elementwise():
    c = opset.concat([param(), param(name="y")], 1)
    assert attrs_match({"axis": 1})(c.output(0))
    assert not attrs_match({"axis": 0})(c.output(0))
    assert not attrs_match({"no_such": 1})(c.output(0))


def test_predicates_combine_with_and_or_not():
    out = param((2, 3)).output(0)
    assert (rank_equals(2) & has_static_shape())(out)
    assert not (rank_equals(3) & has_static_shape())(out)
    assert (rank_equals(3) | has_static_shape())(out)
    assert (~rank_equals(3))(out)
    assert "rank_equals(2)" in (rank_equals(2) & has_static_shape()).name


def test_plain_callable_combines_with_predicate():
    out = param((2, 3)).output(0)
    p = rank_equals(2) & (lambda o: o.node.friendly_name == "x")
    assert p(out)


def test_predicate_on_wrap_type_rejects():
    r = opset.relu(param((2, 3)))
    assert Matcher(wrap_type(ops.Relu, predicate=rank_equals(2))).match(r)
    assert not Matcher(wrap_type(ops.Relu, predicate=rank_equals(4))).match(r)


def test_shape_matches_literals_wildcards_and_ellipsis():
    out = param((2, 3, 4)).output(0)
    assert shape_matches("[2,?,4]")(out)
    assert not shape_matches("[2,?,5]")(out)
    assert shape_matches("[...,4]")(out) and shape_matches("[2,...]")(out)
    assert not shape_matches("[?,?]")(out)


def test_shape_matches_symbol_binds_consistently_within_match():
    a, b = any_input(shape_matches("[N,C]")), any_input(shape_matches("[M,C]"))
    pattern = wrap_type(ops.Concat, [a, b])
    m = Matcher(pattern)
    assert m.match(opset.concat([param((2, 3)), param((5, 3), "y")], 0))
    assert m.symbols == {"N": 2, "C": 3, "M": 5}
    assert not m.match(opset.concat([param((2, 3)), param((2, 4), "y")], 1))


def test_binds_hands_its_value_to_the_callback_and_goes_with_the_match():
    """A predicate's value for the callback lives in the match's state: a failed match, or
    the end of a rewrite's callback, drops it (a closure cache kept the matched nodes
    alive after the match, among their producers' consumers)."""
    from netpass.passes import MatcherPass

    relu_in = binds(lambda o: o.node if isinstance(o.node, ops.Relu) else None, "relu_in")
    pattern = wrap_type(ops.Sigmoid, [any_input(relu_in)])
    m = Matcher(pattern)
    relu = opset.relu(param())
    assert relu_in(relu.output(0)) and not relu_in(param().output(0))
    assert m.match(opset.sigmoid(relu)) and m.symbols == {relu_in: relu}
    assert not m.match(opset.sigmoid(opset.tanh(relu))) and m.symbols == {}
    seen = []
    mp = MatcherPass(Matcher(pattern, "Seen"), lambda m: seen.append(m.symbols[relu_in]) or False)
    assert not mp.apply(opset.sigmoid(relu))
    assert seen == [relu] and mp.matcher.symbols == {}


def test_shape_matches_same_name_must_be_same_dim():
    a, b = any_input(shape_matches("[N,C]")), any_input(shape_matches("[N,C]"))
    m = Matcher(wrap_type(ops.Concat, [a, b]))
    assert not m.match(opset.concat([param((2, 3)), param((5, 3), "y")], 0))
    assert m.match(opset.concat([param((2, 3)), param((2, 3), "y")], 1))


def test_shape_matches_dynamic_dims_equal_only_when_same_symbol():
    x = opset.parameter("[batch,3]", np.float32, name="x")
    y = opset.parameter("[?,3]", np.float32, name="y")
    a, b = any_input(shape_matches("[N,C]")), any_input(shape_matches("[N,C]"))
    m = Matcher(wrap_type(ops.Add, [a, b]))
    assert m.match(opset.add(x, x))
    assert not m.match(opset.add(x, y))


def test_shape_matches_rejects_bad_syntax():
    for bad in ("[...,...]", "[A...,B...]", "[2,,3]", "[2,(3)]", "[N-1]", "[1a...]"):
        with pytest.raises(ValueError):
            shape_matches(bad)


def test_shape_matches_unknown_dim_without_symbol_binds_no_name():
    # OpenVINO: a name can bind a static length or a symbol, never an unknown dimension without
    # one (found by tests/property/test_pattern_vs_openvino.py: netpass bound the Dimension)
    y = opset.parameter("[?,3]", np.float32, name="y").output(0)
    assert not shape_matches("[N,?]")(y)
    assert not shape_matches("[N,C]")(y)
    assert shape_matches("[?,C]")(y) and shape_matches("[?,3]")(y)
    assert "without a symbol cannot bind N" in shape_matches("[N,C]").failure(y)
    m = Matcher(any_input(shape_matches("[N,C]")))
    assert not m.match(y) and m.symbols == {}


def test_shape_matches_openvino_notation():
    out = param((2, 3, 4)).output(0)
    assert shape_matches("2,3,4")(out) and shape_matches("(2, 3, 4)")(out)
    assert shape_matches(" [ 2 , ? , 4 ] ")(out)
    scalar = opset.parameter([], np.float32, name="s").output(0)
    assert shape_matches("[]")(scalar) and shape_matches("()")(scalar) and shape_matches("")(scalar)
    assert not shape_matches("[]")(out)
    dyn = opset.parameter(None, np.float32, name="d").output(0)
    for text in ("?", "..."):
        assert shape_matches(text)(dyn) and not shape_matches(text)(out)
    assert not shape_matches("[...]")(dyn) and shape_matches("[...]")(out)


def test_shape_matches_named_group_binds_the_dims_it_spans():
    a = any_input(shape_matches("[Batch...,C]"))
    b = any_input(shape_matches("[Batch...,?]"))
    m = Matcher(wrap_type(ops.MatMul, [a, b]))
    assert m.match(opset.matmul(param((5, 2, 3)), param((5, 2, 3), "y"), False, True))
    assert m.symbols == {"Batch": (5, 2), "C": 3}
    m = Matcher(wrap_type(ops.Add, [a, b]))
    assert not m.match(opset.add(param((5, 2, 3)), param((1, 2, 3), "y")))
    assert shape_matches("[B...]")(param(()).output(0))  # a group may span no dims
    c = any_input(shape_matches("[Batch...,C]"))
    m = Matcher(wrap_type(ops.Add, [c, any_input(shape_matches("[Batch,C]"))]), explain=True)
    assert not m.match(opset.add(param((2, 3)), param((2, 3), "y")))  # group vs single: no


# -- why a predicate is false -----------------------------------------------------------------
def test_shape_matches_failure_names_the_dimension():
    out = opset.parameter([2, 3, 5], np.float32, name="x").output(0)
    assert shape_matches("[2,?,4]").failure(out) == \
        "shape_matches('[2,?,4]') false: shape [2,3,5]: dimension 2 is 5, expected 4"
    assert "has rank 3, expected 2" in shape_matches("[?,?]").failure(out)
    assert "has rank 3, expected at least 4" in shape_matches("[?,?,...,?,?]").failure(out)


def test_shape_matches_failure_reports_the_symbol_bindings():
    a, b = any_input(shape_matches("[N,C]"), name="a"), any_input(shape_matches("[N,C]"), name="b")
    m = Matcher(wrap_type(ops.Add, [a, b]), "Add", explain=True)
    x = opset.parameter([2, 8], np.float32, name="x")
    y = opset.parameter([2, 1], np.float32, name="y")
    assert not m.match(opset.add(x, y))
    text = m.explain()
    assert ("predicate shape_matches('[N,C]') false: shape [2,1]: dimension 1 is 1, but C is "
            "bound to 8 (bound: N=2, C=8)") in text


def test_shape_matches_failure_with_dynamic_dims_shows_symbols():
    from netpass.core.dimension import Dimension, Symbol
    n1, n2 = Symbol("batch"), Symbol("other")
    x = opset.parameter([Dimension(0, -1, n1), 4], np.float32, name="x")
    y = opset.parameter([Dimension(0, -1, n2), 4], np.float32, name="y")
    a, b = any_input(shape_matches("[N,C]")), any_input(shape_matches("[N,C]"))
    m = Matcher(wrap_type(ops.Add, [a, b]), explain=True)
    assert not m.match(opset.add(x, y))
    assert "dimension 0 is other, but N is bound to batch" in m.explain()


def test_predicates_of_other_kinds_say_what_they_saw():
    x = opset.parameter([2, -1], np.float32, name="x")
    out = opset.relu(x).output(0)
    assert has_static_shape().failure(out) == "has_static_shape() false: shape [2,?]"
    assert rank_equals(3).failure(out) == "rank_equals(3) false: shape [2,?]"
    assert type_matches("i32").failure(out) == "type_matches(i32) false: element type f32"
    assert consumers_count(2).failure(x.output(0)) == "consumers_count(2) false: 1 consumers"
    assert (~has_static_rank()).failure(out) == "~has_static_rank() false: has_static_rank() is true"
