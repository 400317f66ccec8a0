"""LRU cache semantics, memory pool reuse rules and fully-connected fake alignment (the
reference's fc_fake_alignment_test vectors: "igpu" = integrated, "dgpu" = discrete)."""
from __future__ import annotations

import numpy as np
import pytest

from netpass.runtime import LruCache, MemoryPool, fake_aligned_shapes
from netpass.runtime.memory import Allocation


def test_lru_get_touches_has_does_not():
    c = LruCache(2)
    c.add("a", 1)
    c.add("b", 2)
    assert c.has("a")
    assert c.get_lru_element() == ("a", 1)
    assert c.get("a") == 1
    assert c.get_lru_element() == ("b", 2)


def test_lru_evicts_least_recent_and_calls_back():
    evicted = []
    c = LruCache(2, on_evict=lambda k, v: evicted.append(k))
    c.add("a", 1)
    c.add("b", 2)
    c.get("a")
    c.add("c", 3)
    assert evicted == ["b"]
    assert c.keys() == ["c", "a"]
    assert c.is_full()


def test_lru_add_existing_updates_and_touches():
    c = LruCache(2)
    c.add("a", 1)
    c.add("b", 2)
    c.add("a", 10)
    assert c.keys() == ["a", "b"] and c.get("a") == 10


def test_lru_capacity_zero_is_unbounded():
    c = LruCache(0)
    for i in range(1000):
        c.add(i, i)
    assert len(c) == 1000 and not c.is_full()


def _pool():
    made = []

    def alloc(n):
        a = Allocation(object(), n)
        made.append(a)
        return a
    return MemoryPool(alloc), made


def test_pool_reuses_record_without_conflict():
    pool, made = _pool()
    a, reused_a = pool.get_memory(1000, user=1)
    b, reused_b = pool.get_memory(800, user=2, restrictions={3})
    assert not reused_a and reused_b and a is b and len(made) == 1


def test_pool_respects_restrictions():
    pool, made = _pool()
    a, _ = pool.get_memory(1000, user=1)
    b, reused = pool.get_memory(800, user=2, restrictions={1})
    assert not reused and a is not b and len(made) == 2


def test_pool_half_size_rule_for_dynamic_requests():
    pool, _ = _pool()
    pool.get_memory(1000, user=1)
    _, static_reuse = pool.get_memory(400, user=2)
    pool2, _ = _pool()
    pool2.get_memory(1000, user=1)
    _, dynamic_reuse = pool2.get_memory(400, user=2, is_dynamic=True)
    _, dynamic_big = pool2.get_memory(600, user=3, is_dynamic=True)
    assert static_reuse and not dynamic_reuse and dynamic_big


def test_pool_takes_smallest_fitting_record():
    pool, _ = _pool()
    big, _ = pool.get_memory(4000, user=1)
    small, _ = pool.get_memory(1000, user=2, restrictions={1})
    got, reused = pool.get_memory(900, user=3)
    assert reused and got is small


def test_pool_release_erases_record_when_last_user_leaves():
    pool, _ = _pool()
    a, _ = pool.get_memory(1000, user=1)
    pool.get_memory(1000, user=2)
    pool.release(a, 1)
    assert len(pool) == 1
    pool.release(a, 2)
    assert len(pool) == 0


def test_pool_keeps_a_free_record_while_used_bytes_cover_it():
    pool, made = _pool()
    pool.get_memory(4000, user=1)
    small, _ = pool.get_memory(1000, user=2, restrictions={1})
    pool.release(small, 2)
    got, reused = pool.get_memory(900, user=3, restrictions={1}, is_dynamic=True)
    assert reused and got is small and len(made) == 2


def test_pool_frees_smallest_free_records_beyond_used_bytes():
    pool, _ = _pool()
    big, _ = pool.get_memory(3000, user=1)
    mid, _ = pool.get_memory(2000, user=2, restrictions={1})
    small, _ = pool.get_memory(1000, user=3, restrictions={1, 2})
    pool.release(small, 3)
    pool.release(mid, 2)  # free 3000 <= used 3000: both kept
    assert len(pool) == 3
    pool.release(big, 1)  # nothing used: every free record goes
    assert len(pool) == 0


FC_VECTORS = [  # input shape, N, integrated?, int weights?, pad on dim 1?, expected input shape
    ((0, 1024), 1000, True, True, False, (0, 1024)),
    ((11, 1024), 1000, True, True, False, (16, 1024)),
    ((11, 1024), 1000, False, True, False, (16, 1024)),
    ((133, 511), 800, True, True, False, (144, 511)),
    ((133, 511), 800, False, True, False, (136, 511)),
    ((1, 55, 511), 800, True, False, False, (64, 1, 511)),
    ((1, 55, 511), 800, False, False, False, (56, 1, 511)),
    ((2, 55, 511), 800, True, False, False, (112, 1, 511)),
    ((55, 1, 511), 800, True, False, False, (64, 1, 511)),
    ((55, 1, 511), 800, False, False, False, (56, 1, 511)),
    ((240, 1, 511), 800, True, False, False, (240, 1, 511)),
    ((241, 1, 511), 800, True, False, False, (256, 1, 511)),
    ((241, 1, 511), 800, False, False, False, (248, 1, 511)),
    ((257, 1, 511), 800, True, False, False, (272, 1, 511)),
    ((257, 1, 511), 800, False, False, False, (264, 1, 511)),
    ((55, 1, 511), 800, True, False, True, (55, 1, 511)),
    ((240, 1, 511), 800, True, True, False, (240, 1, 511)),
    ((241, 1, 511), 800, True, True, False, (256, 1, 511)),
    ((257, 1, 511), 800, True, True, False, (320, 1, 511)),
    ((257, 1, 511), 800, False, True, False, (264, 1, 511)),
]


@pytest.mark.parametrize("shape,n,integrated,int_w,pad1,expected", FC_VECTORS)
def test_fake_alignment_reference_vectors(shape, n, integrated, int_w, pad1, expected):
    ins, outs = fake_aligned_shapes(shape, n, integrated=integrated, int_weights=int_w, pad_dim1=pad1)
    assert ins == expected
    assert outs == expected[:-1] + (n,)


def test_fake_alignment_skipped_for_gemv_and_full_tensor_fused_input():
    assert fake_aligned_shapes((1, 1, 2048), 512)[0] == (1, 1, 2048)
    assert fake_aligned_shapes((1, 1000, 2048), 512, full_tensor_fused_input=True)[1] == (1, 1000, 512)


def test_reshape_strides_agree_with_numpy_views():
    """Random strided views (slices, permutations) reshaped: the strides found read the same
    elements as numpy's reshape; None exactly where numpy would have to copy."""
    from netpass.runtime.impls import reshape_strides
    rng = np.random.default_rng(5)
    for _ in range(500):
        base = rng.integers(1, 5, rng.integers(1, 5)).tolist()
        a = np.arange(int(np.prod(base))).reshape(base)
        v = a[tuple(slice(0, int(rng.integers(1, d + 1)), int(rng.integers(1, 3))) for d in base)]
        if v.ndim > 1 and rng.random() < 0.5:
            v = v.transpose(rng.permutation(v.ndim))
        strides = [s // a.itemsize for s in v.strides]
        dims, rem = [], v.size
        while rem > 1:
            d = int(rng.choice([d for d in range(2, rem + 1) if rem % d == 0]))
            dims.append(d)
            rem //= d
        dims = dims or [1]
        got = reshape_strides(list(v.shape), strides, dims)
        try:
            w = v.view()
            w.shape = dims
            viewable = True
        except AttributeError:
            viewable = False
        if got is None:
            assert not viewable
        else:
            read = np.lib.stride_tricks.as_strided(v, dims, [g * a.itemsize for g in got])
            np.testing.assert_array_equal(read, v.reshape(dims))


def test_restriction_sets_are_the_overlapping_lifetimes():
    """The sweep's sets hold exactly the nodes whose exec-order lifetimes overlap (what the
    O(1) Lifetime test answers, its fallback for programs with too many overlaps)."""
    from netpass.runtime import Program
    from netpass.runtime.memory import Lifetime
    from netpass.runtime.models import gpt_decoder
    prog = Program.from_model(gpt_decoder(64, 2, 32, 2, 64))
    ids = list(prog.lifetimes)
    for n in prog.exec_order:
        assert isinstance(n.restrictions, frozenset)
        life = Lifetime(id(n), prog.lifetimes)
        assert n.restrictions == {m for m in ids if m in life}


def test_the_lifetime_fallback_runs_models_right(monkeypatch, rng):
    import netpass
    from netpass.runtime import compile_program, program
    from netpass.runtime.memory import Lifetime
    from netpass.runtime.models import gpt_decoder
    from netpass.testing import RUNTIME_DEVICE
    monkeypatch.setattr(program, "RESTRICTION_PAIRS_PER_NODE", 0)
    model = gpt_decoder(64, 2, 32, 2, 64)
    cm = compile_program(model, RUNTIME_DEVICE)
    assert all(isinstance(n.restrictions, Lifetime) for n in cm.program.exec_order)
    req = cm.create_infer_request()
    for s in (1, 3, 2, 5, 5):
        feeds = {"ids": rng.integers(0, 64, (1, s)).astype(np.int64)}
        np.testing.assert_allclose(req.infer(feeds)["logits"], netpass.reference.infer(model, feeds)["logits"],
                                   rtol=1e-4, atol=1e-5)
