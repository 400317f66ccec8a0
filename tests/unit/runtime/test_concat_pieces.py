"""A Concat of one elementwise op whose pieces differ only in constants is that op over the
constants concatenated (``runtime.concat_pieces``): LLaMA's rotary angles
``cat((p * inv_freq, p * inv_freq), -1)`` are one Multiply. Each case against the reference,
with the launches it takes."""
from __future__ import annotations

import numpy as np
from graph_blocks import ints64
from launch_counts import run_counted

from netpass import Model, opset
from netpass.runtime import Program


def _run(model, feeds_list):
    """Kernels per infer after each feeds, outputs checked against the reference."""
    return run_counted(model, feeds_list)[1]


def _angles_model(c1, c2, axis: int = -1, unsqueeze_at: int = 2):
    """positions [B, L], one axis inserted -> times c1 and c2 -> Concat -> Exp."""
    p = opset.parameter([-1, -1], np.float32, name="p")
    a = opset.unsqueeze(p, ints64([unsqueeze_at]))
    m1 = opset.multiply(a, c1)
    m2 = m1 if c2 is c1 else opset.multiply(a, c2)
    y = opset.exp(opset.concat([m1, m2], axis))
    return Model([opset.result(y, name="y")], [p])


def _feeds(rng, *shape):
    return {"p": rng.integers(-20, 20, shape).astype(np.float32)}


def test_concat_of_one_product_twice_is_one_multiply(rng):
    inv = (1.0 / 10000 ** (np.arange(0, 8, 2) / 8)).astype(np.float32)
    model = _angles_model(inv, inv)
    prog = Program.from_model(model)
    assert not any(n.kind == "Concat" for n in prog.nodes)
    (m,) = [n for n in prog.nodes if n.kind == "Multiply"]
    c = next(s for s, _ in m.inputs if s.is_constant)
    np.testing.assert_array_equal(c.value.reshape(-1), np.concatenate([inv, inv]))
    assert _run(model, [_feeds(rng, 1, 5), _feeds(rng, 2, 1)]) == [1, 1]  # * + Exp


def test_concat_of_products_by_different_constants(rng):
    """Pieces of different widths (a [3] and a [1, 2] constant, the latter broadcast from
    [1, 1]), along the last axis."""
    c1 = np.float32([0.5, -2.0, 3.0])
    c2 = np.float32([[1.5]]) * np.ones((1, 1), np.float32)
    model = _angles_model(c1, opset.multiply(c2, np.ones((1, 2), np.float32)))
    assert _run(model, [_feeds(rng, 2, 3)]) == [1]


def test_concat_where_the_tensor_is_not_one_along_the_axis_stays(rng):
    """The shared tensor is [B, 1, L] and the Concat along axis 2 (L): not distributed."""
    inv = np.float32([0.5, 2.0]).reshape(2, 1)
    model = _angles_model(inv, inv, axis=2, unsqueeze_at=1)
    assert any(n.kind == "Concat" for n in Program.from_model(model).nodes)
    _run(model, [_feeds(rng, 1, 4)])


def test_concat_of_one_unary_op_of_a_tensor_one_along_the_axis_stays(rng):
    """``cat((relu(x), relu(x)), 0)`` with x [1, 2, 3]: no constant carries the pieces' sizes
    along the axis, and Relu over x alone is 1 there, not 2: the runtime gave [1, 2, 3]
    (found by tests/property/test_legacy_fuzz.py). A Concat with no constant input position
    is left alone."""
    x = opset.parameter([1, 2, 3], np.float32, name="x")
    r = opset.relu(x)
    y = opset.abs(opset.concat([r, r, r], 0))
    model = Model([opset.result(y, name="y")], [x])
    assert any(n.kind == "Concat" for n in Program.from_model(model).nodes)
    _run(model, [{"x": rng.standard_normal((1, 2, 3)).astype(np.float32)}])
