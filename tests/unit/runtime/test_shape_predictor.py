"""ShapePredictor against the reference's test vectors (shape_predictor_test.cpp), its limits,
option parsing and can_preallocate."""
from __future__ import annotations

import pytest

from netpass.errors import NetpassError
from netpass.runtime import ShapePredictor, parse_options
from netpass.runtime.shape_predictor import ENV_OPTIONS

VECTORS = [
    # iterations-ahead mode
    ([(1, 1), (1, 1), (1, 1)], (), 1.0, False),
    ([(1, 1), (1, 21), (1, 31)], (), 1.0, False),
    ([(1, 3), (1, 2), (1, 1)], (), 1.0, False),
    ([(1, 1), (1, 2), (1, 3)], (1, 13), 1.0, False),
    ([(1, 1), (1, 2), (1, 3)], (1, 13), 1.1, False),
    ([(1, 1, 1), (1, 2, 2), (1, 3, 3)], (1, 13, 13), 1.0, False),
    ([(1, 1, 1), (1, 2, 2), (1, 3, 3)], (1, 13, 13), 1.1, False),
    ([(1, 1, 1), (1, 3, 2), (1, 7, 3)], (), 1.0, False),
    ([(1, 1, 1), (1, 1, 3), (1, 1, 5)], (1, 1, 25), 1.0, False),
    ([(1, 1, 1), (1, 1, 3), (1, 1, 5)], (1, 1, 25), 1.1, False),
    ([(1, 1)] * 6, (), 1.0, False),
    ([(1, 10), (1, 1), (1, 2), (1, 3)], (1, 13), 1.0, False),
    ([(1, 10), (1, 1), (1, 2), (1, 3)], (1, 13), 1.1, False),
    ([(1, 3, 480, 720), (3, 3, 480, 720), (5, 3, 480, 720)], (), 1.0, False),
    ([(1, 1), (1, 1), (1, 1)], (), 1.0, True),
    ([(1, 1), (1, 2), (1, 3)], (), 1.0, True),
    # percentage mode
    ([(1, 1), (1, 1), (1, 1)], (1, 1), 1.1, False),
    ([(1, 1), (1, 128), (1, 256)], (281, 1), 1.1, False),
    ([(1, 3, 128), (1, 3, 112), (1, 3, 418), (1, 3, 512)], (1689, 1, 1), 1.1, False),
    ([(1, 1), (1, 1), (1, 1)], (), 1.1, True),
    ([(1, 1), (1, 128), (1, 256)], (), 1.1, True),
    ([(1, 3, 128), (1, 3, 112), (1, 3, 418), (1, 3, 512)], (), 1.1, True),
]


@pytest.mark.parametrize("shapes,expected,ratio,can_reuse", VECTORS)
def test_reference_vectors(shapes, expected, ratio, can_reuse):
    sp = ShapePredictor(ratio=ratio)
    for s in shapes:
        result = sp.predict_preallocation_shape("dummy_name", s, 32, can_reuse)
    assert result == (bool(expected), expected)


def test_monotonic_fixed_step_predicts_ten_iterations_ahead():
    sp = ShapePredictor()
    out = [sp.predict_preallocation_shape("p", (1, 8, s, 64), 32, False) for s in (5, 7, 9)]
    assert out[:2] == [(False, ()), (False, ())]
    assert out[2] == (True, (1, 8, 29, 64))


def test_unpredictable_growth_uses_ratio():
    sp = ShapePredictor()
    for s in (5, 11, 12):
        ok, shape = sp.predict_preallocation_shape("p", (2, s), 32, False)
    assert (ok, shape) == (True, (26, 1))  # floor(24 * 1.1) in float32


def test_per_iteration_size_limit_falls_back_to_ratio():
    sp = ShapePredictor(max_per_iter_size=1024)
    for s in (1, 2, 3):
        ok, shape = sp.predict_preallocation_shape("p", (s, 512), 32, False)
    # one step is 512 floats = 2048 bytes > 1024: percentage mode, float32 arithmetic
    assert (ok, shape) == (True, (1689, 1))


def test_per_dim_diff_limit():
    sp = ShapePredictor(ratio=1.0, max_per_dim_diff=1)
    for s in (1, 3, 5):
        result = sp.predict_preallocation_shape("p", (1, s), 32, False)
    assert result == (False, ())


def test_history_is_per_id_and_output_index():
    sp = ShapePredictor()
    for s in (1, 2, 3):
        sp.predict_preallocation_shape("a", (1, s), 32, False)
        last_b = sp.predict_preallocation_shape("a", (1, 10 * s), 32, False, out_idx=1)
    assert sp.predict_preallocation_shape("a", (1, 4), 32, False) == (True, (1, 14))
    assert last_b == (True, (33, 1))


def test_custom_dim_and_count():
    sp = ShapePredictor()
    assert sp.predict_preallocation_shape("kv", (1, 8, 17, 64), 16, False, custom_count=128,
                                          custom_dim=2) == (True, (1, 8, 145, 64))


def test_disabled_by_options():
    sp = ShapePredictor(*parse_options("0 0 0 1.0"))
    for s in (1, 2, 3, 4):
        result = sp.predict_preallocation_shape("p", (1, s), 32, False)
    assert result == (False, ())
    assert sp.disabled


def test_option_parsing():
    assert parse_options("20 65536 2 1.0") == (20, 65536, 2, 1.0)
    with pytest.raises(NetpassError, match=ENV_OPTIONS):
        parse_options("20 65536")
    with pytest.raises(NetpassError, match="integers"):
        parse_options("a b c d")


def test_env_options(monkeypatch):
    monkeypatch.setenv(ENV_OPTIONS, "5 100 1 1.5")
    sp = ShapePredictor.from_env()
    assert (sp.iterations, sp.max_per_iter_size, sp.max_per_dim_diff, sp.ratio) == (5, 100, 1, 1.5)


def test_can_preallocate_max_single_allocation():
    sp = ShapePredictor(max_global_mem_size=10_000, max_alloc_mem_size=1000)
    for _ in range(3):
        ok, shape = sp.predict_preallocation_shape("p", (1000,), 8, False)
    assert ok and shape == (1100,)
    assert not sp.can_preallocate(1100)
    assert sp.can_preallocate(1000)


def test_can_preallocate_against_ninety_percent_of_memory():
    used = {"bytes": 8000}
    sp = ShapePredictor(max_global_mem_size=10_000, max_alloc_mem_size=10_000,
                        used_device_memory=lambda: used["bytes"])
    assert sp.can_preallocate(999)
    assert not sp.can_preallocate(1000)
    used["bytes"] = 0
    assert sp.can_preallocate(8999)
