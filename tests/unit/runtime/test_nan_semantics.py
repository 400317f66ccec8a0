"""IEEE NaN and Inf on the OpenCL device: wherever the reference evaluator (numpy) propagates
NaN, the kernels do too (OpenCL's fmax/fmin/sign drop it), per op family; the data is random
with NaN and +-Inf placed at random positions (and one whole row NaN)."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.testing import RUNTIME_DEVICE


def _hostile(rng, *shape) -> np.ndarray:
    """Random normal data with ~6% NaN, ~3% +Inf, ~3% -Inf, and the first row all NaN."""
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    pos = rng.permutation(flat.size)
    k = max(1, flat.size // 32)
    flat[pos[:2 * k]] = np.nan
    flat[pos[2 * k:3 * k]] = np.inf
    flat[pos[3 * k:4 * k]] = -np.inf
    x.reshape(-1, shape[-1])[0] = np.nan
    return x


def _check(model: Model, feeds: dict, kernels_only: bool = True):
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    got = req.infer(feeds)
    ref = netpass.reference.infer(model, feeds)
    for name, want in ref.items():
        assert np.isnan(want).any(), "the case must reach NaN in the reference"
        np.testing.assert_array_equal(np.isnan(got[name]), np.isnan(want), err_msg=f"NaN positions of {name}")
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=name)
    if kernels_only:
        assert req.stats["host_fallbacks"] == 0, req.stats["host_fallback_kinds"]
    return req


def _param(name: str, shape) -> object:
    return opset.parameter(list(shape), np.float32, name=name)


def _one(build, *shapes, rng, kernels_only: bool = True):
    params = [_param(f"x{j}", s) for j, s in enumerate(shapes)]
    model = Model([opset.result(build(*params), name="y")], params)
    return _check(model, {f"x{j}": _hostile(rng, *s) for j, s in enumerate(shapes)}, kernels_only)


# -- elementwise ----------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("shapes", [((4, 64), (4, 64)), ((3, 5, 7), (5, 1))], ids=["flat", "broadcast"])
def test_binary_max_min(op, shapes, rng):
    _one(lambda a, b: getattr(opset, op)(a, b), *shapes, rng=rng)


@pytest.mark.parametrize("build", [
    opset.relu, opset.sign, opset.hsigmoid, opset.hswish,
    lambda x: opset.clamp(x, -0.5, 0.5),
    lambda x: opset.hard_sigmoid(x, np.float32(0.2), np.float32(0.5)),
], ids=["relu", "sign", "hsigmoid", "hswish", "clamp", "hard_sigmoid"])
@pytest.mark.parametrize("shape", [(4, 64), (3, 7)], ids=["vec4", "odd"])
def test_unary(build, shape, rng):
    _one(build, shape, rng=rng)


def test_relu_fused_into_a_gemm(rng):
    """The GEMM's epilogue applies the Relu: a NaN row of A stays NaN after it."""
    w = rng.standard_normal((16, 8)).astype(np.float32)
    req = _one(lambda x: opset.relu(opset.matmul(x, w, False, False)), (5, 16), rng=rng)
    assert req.stats["fused"] >= 1


def test_legacy_eltwise_max_and_relu_ie(rng):
    _one(lambda a, b: opset.relu_ie(opset.eltwise(a, b, "max"), 0.0), (4, 12), (4, 12), rng=rng)


# -- pooling --------------------------------------------------------------------------------------
def test_max_pool(rng):
    _one(lambda x: opset.max_pool(x, [2, 2], [1, 1], [1, 1], [0, 0], [3, 3]).output(0), (2, 3, 7, 7), rng=rng)


def test_gna_max_pool(rng):
    _one(lambda x: opset.gna_max_pool(x, [2, 2], [0, 0], [0, 0], [2, 2]), (1, 6, 6, 4), rng=rng)


def test_avg_pool(rng):
    _one(lambda x: opset.avg_pool(x, [2, 2], [0, 0], [0, 0], [2, 2], True), (2, 3, 6, 6), rng=rng)


# -- reductions, softmax, normalization -------------------------------------------------------------
@pytest.mark.parametrize("op", ["reduce_max", "reduce_min", "reduce_sum", "reduce_mean", "reduce_l2"])
@pytest.mark.parametrize("axes", [[-1], [1, 2]], ids=["last", "inner"])
def test_reductions(op, axes, rng):
    _one(lambda x: getattr(opset, op)(x, np.array(axes, np.int64), True), (3, 5, 8), rng=rng)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(op, rng):
    _one(lambda x: getattr(opset, op)(x, -1), (6, 10), rng=rng)


def test_mvn(rng):
    _one(lambda x: opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt"), (4, 16), rng=rng)


@pytest.mark.parametrize("mode", ["max", "min"])
def test_topk(rng, mode):
    """ArgMax / TopK (the topk kernel: NaN the worst element, as the reference's argsort)."""
    _one(lambda x: opset.topk(x, np.int64(3), -1, mode, "value").output(0), (4, 9), rng=rng)


# -- recurrent and attention ---------------------------------------------------------------------
def test_rnn_relu_with_clip(rng):
    """The cell clips before its activation: fmin(fmax(NaN)) would give the clip value."""
    hs, d = 8, 5
    w = rng.uniform(-0.5, 0.5, (1, hs, d)).astype(np.float32)
    r = rng.uniform(-0.5, 0.5, (1, hs, hs)).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, (1, hs)).astype(np.float32)
    h0 = np.zeros((2, 1, hs), np.float32)
    lens = np.array([4, 4], np.int32)
    _one(lambda x: opset.rnn_sequence(x, h0, lens, w, r, b, hs, "forward", ["relu"], clip=3.0).output(0),
         (2, 4, d), rng=rng)


def test_fused_attention_scores(rng):
    """softmax(q k^T * s) v fused into one kernel: a NaN in q makes its rows NaN."""
    q, k, v = (_param(n, (2, 6, 16)) for n in "qkv")
    scores = opset.multiply(opset.matmul(q, k, False, True), np.float32(0.25))
    y = opset.matmul(opset.softmax(scores, -1), v, False, False)
    model = Model([opset.result(y, name="y")], [q, k, v])
    feeds = {"q": _hostile(rng, 2, 6, 16), "k": rng.standard_normal((2, 6, 16)).astype(np.float32),
             "v": rng.standard_normal((2, 6, 16)).astype(np.float32)}
    _check(model, feeds)


# -- a whole model -------------------------------------------------------------------------------
def test_all_nan_input_to_kws_cnn_gives_nan():
    """The issue's check: Convolution, BatchNorm, Relu, MaxPool, MatMul, Softmax after the GNA
    pipeline (legacy layers), an all-NaN input: NaN out, as the reference and onnxruntime."""
    x = np.full((1, 1, 49, 10), np.nan, np.float32)
    probs = netpass.compile_model("examples/kws_cnn.onnx", RUNTIME_DEVICE).create_infer_request() \
        .infer({"input": x})["probs"]
    assert np.isnan(probs).all(), probs
