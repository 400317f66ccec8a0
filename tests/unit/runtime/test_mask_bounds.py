"""Causal bounds of attention masks (netpass.runtime.mask_bounds): what the build proves of a
mask made of Ranges, comparisons, logical ops and Select, one behaviour per test, each mask
also checked on its values (the bound must hold on every element the reference computes)."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.runtime.mask_bounds import EVERYWHERE, Bound, bound_of
from netpass.testing import RUNTIME_DEVICE

MIN = np.finfo(np.float32).min


def _positions(s, start: int, axis: int):
    """arange(start, start + s) as [1, 1, s, 1] (axis -2, queries) or [1, 1, 1, s] (-1, keys)."""
    r = opset.range(ints64(start), opset.add(s, ints64(start)), ints64(1), "i64")
    return opset.unsqueeze(r, ints64([0, 1, 3] if axis == -2 else [0, 1, 2]))


def _bound(build) -> tuple[Bound | None, np.ndarray]:
    """The bound of ``build(q, kv, pad)``'s output (q, kv: positions from 0; pad: a boolean
    input [1, 1, 1, s]) and its values for 9 tokens."""
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
    return bound_of(*node.inputs[0]), netpass.reference.infer(model, feeds)["mask"]


def _holds(bound: Bound, values: np.ndarray) -> bool:
    m, n = np.indices(values.shape[-2:])
    past = np.broadcast_to(n - m > bound.offset, values.shape)
    want = {"false": values == False, "true": values == True,  # noqa: E712
            "dead": values <= -1e30}[bound.kind]
    return bool(np.all(want[past]))


def _causal(q, kv, pad):
    return opset.less_equal(kv(), q())


@pytest.mark.parametrize("build,want", [
    (_causal, Bound("false", 0)),
    (lambda q, kv, pad: opset.less(kv(), opset.add(q(), ints64(1))), Bound("false", 0)),
    (lambda q, kv, pad: opset.greater_equal(q(), kv()), Bound("false", 0)),
    (lambda q, kv, pad: opset.less_equal(kv(), q(2)), Bound("false", 2)),
    (lambda q, kv, pad: opset.less(kv(3), q()), Bound("false", -4)),
    (lambda q, kv, pad: opset.greater(kv(), q()), Bound("true", 0)),
])
def test_comparisons_of_positions(build, want):
    bound, values = _bound(build)
    assert bound == want and _holds(bound, values)


def test_gpt2_mask_is_dead_past_the_diagonal():
    """transformers' export: Where(kv <= q AND padding, 0, float32 min)."""
    bound, values = _bound(lambda q, kv, pad: opset.select(
        opset.logical_and(_causal(q, kv, pad), pad), np.float32(0.0), np.float32(MIN)))
    assert bound == Bound("dead", 0) and _holds(bound, values)


def test_masked_positions_select_minus_infinity():
    """The inverted form: Where(kv > q, -inf, 0), and Not(kv > q)."""
    bound, values = _bound(lambda q, kv, pad: opset.select(
        opset.greater(kv(), q()), np.float32(-np.inf), np.float32(0.0)))
    assert bound == Bound("dead", 0) and _holds(bound, values)
    bound, values = _bound(lambda q, kv, pad: opset.logical_not(opset.greater(kv(), q())))
    assert bound == Bound("false", 0) and _holds(bound, values)


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
    assert bound == Bound("dead", EVERYWHERE)
