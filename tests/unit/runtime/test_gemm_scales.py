"""A projection's output scaled by a constant folded into its weights
(netpass.runtime.gemm_scales): BART-style attention's ``q_proj(x) * scaling`` merges with the
keys' and values' projections, and the results are the reference's; scales that are no column
factors stay as they are."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32

import netpass
from netpass import Model, opset
from netpass.testing import RUNTIME_DEVICE

D, HEADS = 32, 4
HD = D // HEADS


def _proj(x, rng):
    return opset.add(opset.matmul(x, randn_f32(rng, D, D), False, True), randn_f32(rng, D))


def _heads(y):
    return opset.transpose(opset.reshape(y, np.array([0, 0, HEADS, HD], np.int64), True),
                           np.array([0, 2, 1, 3], np.int64))


def _attention(rng, scale):
    """OPT's attention block: q, k and v Linears of x, q's output times ``scale`` (a constant,
    or a function of the graph's inputs: ``(x, scale) -> node``), softmax(q k^T) v."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    q = scale(x, _proj(x, rng)) if callable(scale) else opset.multiply(_proj(x, rng), scale)
    k, v = _proj(x, rng), _proj(x, rng)
    y = opset.matmul(opset.softmax(opset.matmul(_heads(q), _heads(k), False, True), -1),
                     _heads(v), False, False)
    return Model([opset.result(y, name="y")], [x])


def _run(model, rng):
    cm = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
    req = cm.create_infer_request()
    for s in (1, 6):
        feeds = {"x": randn_f32(rng, 1, s, D)}
        np.testing.assert_allclose(req.infer(feeds)["y"],
                                   netpass.reference.infer(model, feeds)["y"],
                                   rtol=1e-4, atol=1e-5)
    return [n for n in cm.runtime.program.nodes if n.kind == "FullyConnected"]


@pytest.mark.parametrize("scale", [np.float32(HD ** -0.5), np.array([[[0.5]]], np.float32),
                                   "columns"])
def test_a_scaled_query_projection_merges_with_keys_and_values(rng, scale):
    """One value, one value of the output's rank, or a factor per column: the three
    projections are one FullyConnected."""
    if isinstance(scale, str):
        scale = (0.5 + rng.random(D)).astype(np.float32)
    fcs = _run(_attention(rng, scale), rng)
    assert len(fcs) == 1 and fcs[0].inputs[1][0].value.shape == (3 * D, D)


def test_a_scale_that_grows_the_rank_stays(rng):
    """A [1, 1, 1, 1] factor makes the [1, S, D] projection 4-D: not folded."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    y = opset.multiply(_proj(x, rng), np.ones((1, 1, 1, 1), np.float32) * 0.5)
    model = Model([opset.result(y, name="y")], [x])
    cm = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
    feeds = {"x": randn_f32(rng, 1, 3, D)}
    got = cm.create_infer_request().infer(feeds)["y"]
    want = netpass.reference.infer(model, feeds)["y"]
    assert got.shape == want.shape == (1, 1, 3, D)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("how", ["computed", "read_elsewhere"])
def test_what_is_no_constant_scale_stays(rng, how):
    """A factor computed from the input, or a projection read by something else too: q keeps
    its own FullyConnected."""
    def scale(x, q):
        if how == "computed":
            return opset.multiply(q, opset.reduce_mean(x, np.array([-1], np.int64), True))
        return opset.add(opset.multiply(q, np.float32(0.5)), opset.multiply(q, np.float32(0.1)))
    assert len(_run(_attention(rng, scale), rng)) == 2
