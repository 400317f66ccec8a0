"""Core IR behaviour: dimensions, shapes, consumers, order, cloning, naming rules."""
from __future__ import annotations

import gc

import numpy as np
import pytest

from netpass.core import (
    Dimension,
    FusedNames,
    Model,
    NonCopyable,
    PartialShape,
    Symbol,
    copy_runtime_info,
    lint,
    lint_problems,
    replace_node,
    replace_output_update_name,
)
from netpass.core.boundary import Constant
from netpass.core.node import Node
from netpass.core.types import f32
from netpass.errors import LintError
from netpass.ops.base import UnaryElementwiseArithmetic
from netpass.ops.io import Parameter, Result, constant, parameter


class _Neg(UnaryElementwiseArithmetic):
    type_name = "TestNeg"
    fn = staticmethod(np.negative)


def neg(x):
    return _Neg([x])


def test_dimension_interval_merge_and_broadcast():
    assert Dimension(2, 8).merge(Dimension(4, -1)) == Dimension(4, 8)
    assert Dimension(3).merge(Dimension(4)) is None
    assert Dimension(1).broadcast_merge(Dimension(7)) == Dimension(7)
    assert Dimension(5).broadcast_merge(Dimension(3)) is None
    # (a side that may be 1 and shares no value with the other is 1)
    assert Dimension(6).broadcast_merge(Dimension(0, 1)) == Dimension(6)
    assert Dimension(0, 1).broadcast_merge(Dimension(2, 8)) == Dimension(2, 8)
    assert Dimension(6).broadcast_merge(Dimension(0, 3)) == Dimension(6)
    assert str(Dimension()) == "?" and str(Dimension(1, 10)) == "1..10"


def test_symbol_survives_merge():
    s = Symbol("batch")
    d = Dimension(symbol=s).merge(Dimension(1, 64))
    assert d.symbol is s and d == Dimension(1, 64)


def test_partial_shape_broadcast_merge_numpy_rules():
    a = PartialShape([1, "?", 3])
    b = PartialShape([4, 1, 1, 3])
    assert str(a.broadcast_merge(b)) == "[4,1..,?,3]" or a.broadcast_merge(b).rank == 4
    assert PartialShape([2, 3]).broadcast_merge([4, 3]) is None
    assert PartialShape.parse("[N,?,3..5]").rank == 3
    assert not PartialShape(None).rank_is_static


def test_partial_shape_broadcast_merge_is_the_dimwise_one():
    """PartialShape.broadcast_merge (the shorter side padded with 1s, a dim met on both sides
    taken as it is) gives, dim by dim, what Dimension.broadcast_merge gives, symbols and
    intervals included, on random pairs of shapes that share some dims."""
    import random
    rng = random.Random(0)
    n, m = Symbol("n"), Symbol("m")
    pool = [Dimension(v) for v in (0, 1, 1, 2, 3, 8)] + [
        Dimension(), Dimension(1, 4), Dimension(2, 8), Dimension(0, 1), Dimension(symbol=n),
        Dimension(1, 64, n), Dimension(symbol=m), Dimension(2, -1, m)]
    for _ in range(3000):
        a = tuple(rng.choice(pool) for _ in range(rng.randint(0, 4)))
        b = list(a[-rng.randint(0, len(a)):] if a and rng.random() < 0.5 else ())
        b = tuple(rng.choice(pool) if rng.random() < 0.4 else d for d in b) + \
            tuple(rng.choice(pool) for _ in range(rng.randint(0, 2)))
        b = b[-4:]
        k = max(len(a), len(b))
        pa = (Dimension(1),) * (k - len(a)) + a
        pb = (Dimension(1),) * (k - len(b)) + b
        dims = [x.broadcast_merge(y) for x, y in zip(pa, pb)]
        got = PartialShape.of_dims(a).broadcast_merge(PartialShape.of_dims(b))
        if any(d is None for d in dims):
            assert got is None, (a, b)
            continue
        assert got is not None and len(got) == k, (a, b)
        for g, d in zip(got, dims):
            assert (g.min, g.max, g.symbol) == (d.min, d.max, d.symbol), (a, b)


def test_partial_shape_compatible_and_static():
    assert PartialShape([1, "?"]).compatible([1, 5])
    assert not PartialShape([1, 2]).compatible([1, 5])
    assert PartialShape([2, 3]).is_static and PartialShape([2, 3]).to_shape() == (2, 3)


def test_consumers_drop_freed_nodes():
    x = parameter([2, 3], name="x")
    a = neg(x)
    assert len(x.output(0).consumers()) == 1
    del a
    gc.collect()
    assert x.output(0).consumers() == []


def test_consumers_keep_connection_order_when_a_freed_consumer_id_is_reused():
    """A new node may get a freed consumer's id while the freed one's entry is still in the
    producer's table: it is listed after the consumers connected before it (rewrites read the
    first consumer), whether connected when built or by replace_source_output."""
    x, y = parameter([2, 3], name="x"), parameter([2, 3], name="y")
    reused = False
    for _ in range(20):
        a, b = neg(x), neg(x)
        freed = id(a)
        del a
        c = neg(x)  # (CPython usually allocates it where ``a`` was)
        reused |= id(c) == freed
        assert [i.node for i in x.output(0).consumers()] == [b, c]
        a = neg(x)
        freed = id(a)
        del a
        d = neg(y)
        reused |= id(d) == freed
        d.input(0).replace_source_output(x)
        assert [i.node for i in x.output(0).consumers()] == [b, c, d]
        del b, c, d
    if not reused:
        pytest.skip("no freed node's id was reused: nothing to check")




def test_replace_node_rewires_and_frees_old():
    x = parameter([2], name="x")
    a = neg(x)
    r = Result([a])
    b = neg(x)
    replace_node(a, b)
    assert r.input_value(0).node is b
    del a
    assert [c.node for c in x.output(0).consumers()] == [b]


def test_topological_order_input0_subtree_first():
    x = parameter([2], name="x")
    y = parameter([2], name="y")
    a, b = neg(x), neg(y)
    from netpass.ops.base import BinaryElementwiseArithmetic

    class _Add(BinaryElementwiseArithmetic):
        type_name = "TestAdd"
        fn = staticmethod(np.add)

    s = _Add([a, b])
    m = Model([s], [x, y])
    order = m.get_ordered_ops()
    assert order.index(a) < order.index(b) < order.index(s)
    assert order[-1].type_name == "Result"


def test_order_cache_invalidated_on_mutation():
    x = parameter([2], name="x")
    a = neg(x)
    m = Model([a], [x])
    first = m.get_ordered_ops()
    b = neg(a)
    m.results[0].input(0).replace_source_output(b.output(0))
    assert b in m.get_ordered_ops() and b not in first


def test_cached_order_is_the_order_itself_until_a_change():
    x = parameter([2], name="x")
    a = neg(x)
    m = Model([a], [x])
    shared = m.cached_order()
    assert shared == m.get_ordered_ops() and m.cached_order() is shared
    assert m.get_ordered_ops() is not shared  # callers of get_ordered_ops get a copy
    b = neg(a)
    m.results[0].input(0).replace_source_output(b.output(0))
    # the change drops the cache, not the list a walk may still be reading
    assert b not in shared and m.cached_order() is not shared and b in m.cached_order()


def test_sort_visits_every_node_as_it_joins_the_order():
    from netpass.core.model import topological_sort
    x = parameter([2], name="x")
    a = neg(x)
    b, c = neg(a), neg(a)
    m = Model([b, c], [x])
    seen: list[Node] = []
    order = topological_sort(m.results, seen.append)
    assert seen == order and len(order) == 6  # x, a, b, c and two Results
    # a model's order: visited by the sort when it is not cached, by a walk when it is
    first: list[Node] = []
    shared = m.cached_order(first.append)
    again: list[Node] = []
    assert m.cached_order(again.append) is shared and first == again == shared == order


def test_a_rewired_input_goes_last_even_over_a_dead_entry_of_its_key():
    import weakref
    x = parameter([2], name="x")
    a, b = neg(x), neg(x)
    c = neg(a)
    gone = neg(x)
    dead = weakref.ref(gone)
    del gone
    assert dead() is None
    # a freed consumer that had c's id: its entry, first in x's table, must not give c its place
    table = x._outs[0].cons
    entries = list(table.items())
    table.clear()
    table[(id(c), 0)] = dead
    table.update(entries)
    c.input(0).replace_source_output(x.output(0))
    assert [i.node for i in x.output(0).consumers()] == [a, b, c]


def test_topological_sort_detects_cycle_after_earlier_sorts():
    from netpass.core.model import topological_sort
    from netpass.errors import NetpassError
    x = parameter([2], name="x")
    a = neg(x)
    b = neg(a)
    m = Model([b], [x])
    assert topological_sort(m.results) == [x, a, b, m.results[0]]
    a.input(0).replace_source_output(b.output(0))  # a <- b <- a
    with pytest.raises(NetpassError, match="cycle"):
        topological_sort(m.results)


def test_topological_sort_shared_producer_listed_once():
    from netpass.core.model import topological_sort
    x = parameter([2], name="x")
    a = neg(x)
    b, c = neg(a), neg(a)
    order = topological_sort([Result([b]), Result([c])])
    assert [order.count(n) for n in (x, a, b, c)] == [1, 1, 1, 1]


def test_output_names_set_persists_and_moves_on_replace():
    x = parameter([2], name="x")
    a, b = neg(x), neg(x)
    r = Result([a])
    a.output(0).names.add("t")
    assert a.output(0).names == {"t"}
    a.output(0).replace(b.output(0))
    assert r.input_value(0).names == {"t"}


def test_node_rt_info_is_a_persistent_assignable_dict():
    x = parameter([2], name="x")
    a = neg(x)
    a.rt_info["k"] = 1
    assert a.get_rt_info() == {"k": 1}
    a.rt_info = {"j": 2}
    assert a.rt_info == {"j": 2}


def test_check_formats_lazy_message_on_failure():
    from netpass.errors import ShapeInferenceError
    x = parameter([2], name="x")
    a = neg(x)
    a.check(True, "never {}", object())
    with pytest.raises(ShapeInferenceError, match="axis 3 out of range for rank 2"):
        a.check(False, "axis {} out of range for rank {}", 3, 2)


def test_clone_keeps_names_and_is_independent():
    x = parameter([2], name="x")
    a = neg(x)
    a.friendly_name = "neg"
    a.output(0).names.add("t")
    m = Model([a], [x])
    c = m.clone()
    na = c.results[0].input_value(0).node
    assert na is not a and na.friendly_name == "neg" and "t" in na.output(0).names


def test_replace_output_update_name_moves_friendly_name_to_result_producer():
    x = parameter([2], name="x")
    a = neg(x)
    a.friendly_name = "out"
    r = Result([a])  # noqa: F841  (held: consumers are weak)
    b = neg(x)
    assert replace_output_update_name(a.output(0), b.output(0))
    assert b.friendly_name == "out"


def test_replace_output_update_name_refuses_parameter():
    x = parameter([2], name="x")
    a = neg(x)
    r = Result([a])  # noqa: F841  (held: consumers are weak)
    assert not replace_output_update_name(a.output(0), x.output(0))


def test_copy_runtime_info_merges_fused_names_and_skips_noncopyable():
    x = parameter([2], name="x")
    a, b = neg(x), neg(x)
    a.rt_info[FusedNames.key] = FusedNames({"a"})
    b.rt_info[FusedNames.key] = FusedNames({"b"})
    a.rt_info["mark"] = NonCopyable("mark")
    t = neg(x)
    copy_runtime_info([a, b], t)
    assert t.rt_info[FusedNames.key].names == {"a", "b"} and "mark" not in t.rt_info


def test_lint_accepts_valid_and_reports_unregistered_parameter():
    x = parameter([2], name="x")
    y = parameter([2], name="y")
    m = Model([neg(x)], [x])
    lint(m)
    m2 = Model([neg(y)], [x])
    assert any("not a model parameter" in p for p in lint_problems(m2))
    with pytest.raises(LintError):
        lint(m2)


def test_constant_value_propagates_through_small_ops():
    c = constant(np.array([1.0, -2.0], np.float32))
    n = neg(c)
    np.testing.assert_array_equal(n.output(0).value, [-1.0, 2.0])


def test_model_reshape_reinfers():
    x = parameter([1, "?"], name="x")
    m = Model([neg(x)], [x])
    m.reshape({"x": [1, 7]})
    assert m.output(0).partial_shape == PartialShape([1, 7])


def test_multi_output_node_needs_explicit_output():
    class _Two(Node):
        type_name = "TestTwo"

        def infer_types(self):
            self.set_output_type(0, f32, [1])
            self.set_output_type(1, f32, [1])

    t = _Two([])
    with pytest.raises(Exception, match="has 2 outputs"):
        neg(t)
    assert isinstance(Parameter([], shape=PartialShape([1])), Parameter)


@pytest.mark.parametrize("value, element_type", [
    (np.arange(4), None), (np.arange(4), "i64"), (np.float32(1.5), None), ([1.0, 2.0], f32),
    (np.arange(3), "f32"), (np.array([True, False]), "boolean")])
def test_constant_of_builds_the_generic_constant(value, element_type):
    fast, ref = Constant.of(value, element_type), Constant([], value=value,
                                                          element_type=element_type)
    assert type(fast) is Constant and fast.element_type is ref.element_type
    assert fast.value.dtype == ref.value.dtype and np.array_equal(fast.value, ref.value)
    assert list(fast.get_attributes()) == list(ref.get_attributes())
    (p, q) = (fast._outs, ref._outs)
    assert len(p) == len(q) == 1 and fast.get_input_size() == ref.get_input_size() == 0
    assert (p[0].et, p[0].ps, p[0].pval, p[0].names, p[0].rt, p[0].cons) == \
        (q[0].et, q[0].ps, q[0].pval, q[0].names, q[0].rt, q[0].cons)
    assert p[0].val is fast.value and q[0].val is ref.value
    assert fast.name.startswith("Constant_") and fast._rt is None and fast._mark == ref._mark
