"""LayerNorm written as the RMSNorm of the centered rows (Cohere: ``d = x - mean(x)``, then
``d * rsqrt(mean(d^2) + eps)``) as one MVN (``rms_norm.center_rms_norms``): one launch alone,
none where it folds into the GEMM that reads it (``norm_gemm``); against the reference (rel.
L2 <= 1e-5) over rows far from zero mean, one and several rows through one request; the
look-alikes (another axis' mean, another tensor's mean, the difference read elsewhere) stay."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32, rel_l2_unfloored

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.runtime.norm_gemm import NormDesc
from netpass.testing import RUNTIME_DEVICE

K = 37
LAST = np.array([-1], np.int64)


def _centered_rms(x, eps=1e-5, mean_of=None, axis=LAST, form="rsqrt"):
    """transformers' CohereLayerNorm as an export writes it: the difference taken twice (CSE
    makes it one), its mean square, ``rsqrt`` (or ``Power(-0.5)``, no eps when ``eps`` is
    None). ``mean_of``: the tensor whose mean is taken off (x's by default), ``axis`` the
    mean's."""
    mean = opset.reduce_mean(x if mean_of is None else mean_of, axis, True)
    var = opset.reduce_mean(opset.power(opset.subtract(x, mean), np.float32(2)), LAST, True)
    if eps is not None:
        var = opset.add(var, np.float32(eps))
    r = opset.divide(np.float32(1), opset.sqrt(var)) if form == "rsqrt" \
        else opset.power(var, np.float32(-0.5))
    return opset.multiply(opset.subtract(x, mean), r)


def _kinds(model) -> list[str]:
    return [n.kind for n in Program.from_model(model).nodes
            if not (n.is_constant or n.shape_only or n.in_shape_of_subgraph
                    or n.fused_into is not None)]


def _check(model, rng, rows=(1, 5, 1, 3), mean=40.0) -> dict:
    """Rows far from zero mean, one and several rows through one request."""
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in rows:
        feeds = {"x": (mean + randn_f32(rng, 1, s, K, scale=2.0)).astype(np.float32)}
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-5
    return req.stats


@pytest.mark.parametrize("eps,form", [(1e-5, "rsqrt"), (1e-6, "pow_half"), (None, "rsqrt")])
def test_centered_rms_norm_is_one_mvn_launch(rng, eps, form):
    x = opset.parameter([1, -1, K], np.float32, name="x")
    y = opset.multiply(_centered_rms(x, eps, form=form), 1.0 + randn_f32(rng, K, scale=0.2))
    model = Model([opset.result(y, name="y")], [x])
    kinds = _kinds(model)
    assert kinds.count("MVN") == 1
    assert not {"ReduceMean", "Subtract", "RmsNorm", "Multiply"} & set(kinds)  # (scale fused)
    stats = _check(model, rng)
    assert stats["kernels_enqueued"] == 4  # (one a request)


def test_centered_rms_norm_folds_into_its_gemm(rng):
    """Cohere's norm in front of a projection: no launch of its own."""
    x = opset.parameter([1, -1, K], np.float32, name="x")
    h = opset.multiply(_centered_rms(x), 1.0 + randn_f32(rng, K, scale=0.2))
    y = opset.matmul(h, randn_f32(rng, K, 24), False, False)
    model = Model([opset.result(y, name="y")], [x])
    gemms = [n for n in Program.from_model(model).nodes if n.kind in ("MatMul", "FullyConnected")]
    assert len(gemms) == 1 and isinstance(gemms[0].subgraph, NormDesc)
    assert not gemms[0].subgraph.rms and "MVN" not in _kinds(model)
    assert _check(model, rng)["kernels_enqueued"] == 4


def _other_axis(x, rng):
    return _centered_rms(x, axis=np.array([1], np.int64))


def _other_tensor(x, rng):
    return _centered_rms(x, mean_of=opset.multiply(x, np.float32(0.5)))


def _read_elsewhere(x, rng):
    d = opset.subtract(x, opset.reduce_mean(x, LAST, True))
    ms = opset.reduce_mean(opset.multiply(d, d), LAST, True)
    h = opset.multiply(d, opset.divide(np.float32(1), opset.sqrt(opset.add(ms, np.float32(1e-5)))))
    return opset.add(h, d)


@pytest.mark.parametrize("make", [_other_axis, _other_tensor, _read_elsewhere])
def test_look_alikes_stay(rng, make):
    """The mean over another axis, another tensor's mean taken off, the difference also read
    by another op: no MVN (the RmsNorm of the difference stays), the reference's results."""
    x = opset.parameter([1, -1, K], np.float32, name="x")
    model = Model([opset.result(make(x, rng), name="y")], [x])
    kinds = _kinds(model)
    assert "MVN" not in kinds and "RmsNorm" in kinds and "Subtract" in kinds
    _check(model, rng, rows=(2, 4))  # (another axis' mean of one row: all zeros)
