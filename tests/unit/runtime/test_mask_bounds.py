"""Causal bounds of attention masks (netpass.runtime.mask_bounds): what the build proves of a
mask made of Ranges, comparisons, logical ops and Select, one behaviour per test, each mask
also checked on its values (the bound must hold on every element the reference computes; a
mask proven the same in every row inside its bound must be so)."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.runtime.mask_bounds import EVERYWHERE, Bound, bound_of, past_value, row_free
from netpass.testing import RUNTIME_DEVICE

MIN = np.finfo(np.float32).min


def _positions(s, start: int, axis: int):
    """arange(start, start + s) as [1, 1, s, 1] (axis -2, queries) or [1, 1, 1, s] (-1, keys)."""
    r = opset.range(ints64(start), opset.add(s, ints64(start)), ints64(1), "i64")
    return opset.unsqueeze(r, ints64([0, 1, 3] if axis == -2 else [0, 1, 2]))


def _mask(build) -> tuple[tuple, np.ndarray]:
    """``build(q, kv, pad)``'s output (q, kv: positions from 0; pad: a boolean input
    [1, 1, 1, s]) as (program node, output index) and its values for 9 tokens."""
    x = opset.parameter([1, -1, 4], np.float32, name="x")
    pad = opset.parameter([1, 1, 1, -1], np.bool_, name="pad")
    s = opset.squeeze(opset.gather(opset.shape_of(x), ints64([1]), ints64(0)), ints64([0]))
    out = build(lambda start=0: _positions(s, start, -2), lambda start=0: _positions(s, start, -1),
                pad)
    model = Model([opset.result(out, name="mask")], [x, pad])
    program = compile_program(model, RUNTIME_DEVICE).program
    (node,) = [n for n in program.nodes if n.is_result]
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((1, 9, 4)).astype(np.float32),
             "pad": rng.random((1, 1, 1, 9)) < 0.7}
    return node.inputs[0], netpass.reference.infer(model, feeds)["mask"]


def _bound(build) -> tuple[Bound | None, np.ndarray]:
    """The bound of ``build``'s mask (:func:`_mask`) and its values."""
    out, values = _mask(build)
    return bound_of(*out), values


def _holds(bound: Bound, values: np.ndarray) -> bool:
    m, n = np.indices(values.shape[-2:])
    past = np.broadcast_to(n - m > bound.offset, values.shape)
    want = {"false": values == False, "true": values == True,  # noqa: E712
            "dead": values <= -1e30}[bound.kind]
    return bool(np.all(want[past]))


def _causal(q, kv, pad):
    return opset.less_equal(kv(), q())


@pytest.mark.parametrize("build,want", [
    (_causal, Bound("false", 0, exact=True)),
    (lambda q, kv, pad: opset.less(kv(), opset.add(q(), ints64(1))), Bound("false", 0, exact=True)),
    (lambda q, kv, pad: opset.greater_equal(q(), kv()), Bound("false", 0, exact=True)),
    (lambda q, kv, pad: opset.less_equal(kv(), q(2)), Bound("false", 2, exact=True)),
    (lambda q, kv, pad: opset.less(kv(3), q()), Bound("false", -4, exact=True)),
    (lambda q, kv, pad: opset.greater(kv(), q()), Bound("true", 0, exact=True)),
])
def test_comparisons_of_positions(build, want):
    bound, values = _bound(build)
    assert bound == want and _holds(bound, values)


def test_gpt2_mask_is_dead_past_the_diagonal():
    """transformers' export: Where(kv <= q AND padding, 0, float32 min)."""
    bound, values = _bound(lambda q, kv, pad: opset.select(
        opset.logical_and(_causal(q, kv, pad), pad), np.float32(0.0), np.float32(MIN)))
    assert bound == Bound("dead", 0, float(MIN)) and _holds(bound, values)


def test_masked_positions_select_minus_infinity():
    """The inverted form: Where(kv > q, -inf, 0), and Not(kv > q)."""
    bound, values = _bound(lambda q, kv, pad: opset.select(
        opset.greater(kv(), q()), np.float32(-np.inf), np.float32(0.0)))
    assert bound == Bound("dead", 0, -np.inf) and _holds(bound, values)
    bound, values = _bound(lambda q, kv, pad: opset.logical_not(opset.greater(kv(), q())))
    assert bound == Bound("false", 0, exact=True) and _holds(bound, values)


def test_sliding_window_keeps_the_causal_edge():
    bound, values = _bound(lambda q, kv, pad: opset.logical_and(
        _causal(q, kv, pad), opset.greater(kv(), opset.subtract(q(), ints64(4)))))
    assert bound == Bound("false", 0) and _holds(bound, values)


def test_or_needs_every_input_bounded():
    bound, _ = _bound(lambda q, kv, pad: opset.logical_or(_causal(q, kv, pad), pad))
    assert bound is None
    bound, values = _bound(lambda q, kv, pad: opset.logical_or(
        _causal(q, kv, pad), opset.less_equal(kv(), q(3))))
    assert bound == Bound("false", 3) and _holds(bound, values)


@pytest.mark.parametrize("build", [
    lambda q, kv, pad: opset.select(_causal(q, kv, pad), np.float32(0.0), np.float32(-1e4)),
    lambda q, kv, pad: opset.select(opset.less_equal(q(), kv()), np.float32(0.0), np.float32(MIN)),
    lambda q, kv, pad: opset.less_equal(kv(), opset.multiply(q(), ints64(2))),
    lambda q, kv, pad: opset.select(pad, np.float32(0.0), np.float32(MIN)),
])
def test_no_bound(build):
    """A fill that is not dead (-1e4), the anti-causal mask (the fill lands before the
    diagonal), a slope of 2, a padding mask alone."""
    assert _bound(build)[0] is None


def test_constants_hold_everywhere():
    bound, _ = _bound(lambda q, kv, pad: opset.select(
        opset.logical_and(_causal(q, kv, pad), np.array(False)), np.float32(0.0), np.float32(MIN)))
    assert bound == Bound("dead", EVERYWHERE, float(MIN))


def _same_rows_inside(offset: int, values: np.ndarray) -> bool:
    """Whether every row of ``values`` equals the last one wherever n - m <= ``offset``."""
    m, n = np.indices(values.shape[-2:])
    inside = np.broadcast_to(n - m <= offset, values.shape)
    last = np.broadcast_to(values[..., -1:, :], values.shape)
    return bool(np.all((values == last)[inside]))


def test_gpt2_mask_is_one_row_inside_its_bound():
    """Where(kv <= q AND padding, 0, min): the comparison is true inside the bound, the
    padding one row, so the flash kernel may read the last row for every query, and the value
    past the bound is the fill."""
    out, values = _mask(lambda q, kv, pad: opset.select(
        opset.logical_and(_causal(q, kv, pad), pad), np.float32(0.0), np.float32(MIN)))
    bound = bound_of(*out)
    assert row_free(*out, bound.offset) and _same_rows_inside(bound.offset, values)
    assert past_value(bound) == float(MIN)


def test_a_shifted_diagonal_is_one_row_up_to_its_own_offset():
    """kv <= q + 2 AND padding: one row inside n - m <= 2, not inside n - m <= 3."""
    out, values = _mask(lambda q, kv, pad: opset.logical_and(opset.less_equal(kv(), q(2)), pad))
    assert row_free(*out, 2) and _same_rows_inside(2, values) and past_value(bound_of(*out)) == 0.0
    assert not row_free(*out, 3) and not _same_rows_inside(3, values)


@pytest.mark.parametrize("build", [
    lambda q, kv, pad: opset.logical_and(
        _causal(q, kv, pad), opset.greater(kv(), opset.subtract(q(), ints64(4)))),
    lambda q, kv, pad: opset.select(
        opset.logical_and(_causal(q, kv, pad), opset.less(opset.add(kv(), q()), ints64(12))),
        np.float32(0.0), np.float32(MIN)),
])
def test_rows_that_differ_inside_the_bound(build):
    """A sliding window of 4 over 9 tokens (its lower edge moves with the row), and
    kv + q < 12 (a slope on the query axis): bounded, and not one row."""
    out, values = _mask(build)
    bound = bound_of(*out)
    assert bound is not None and not _same_rows_inside(bound.offset, values)
    assert not row_free(*out, bound.offset)
