"""RMSNorm chains as one RmsNorm node (``netpass.runtime.rms_norm``): the spellings exports
write, their scale fused as the epilogue (one launch), against the reference on random data
(odd row lengths, growing rows; rel. L2 <= 1e-6), and the chains that must stay as they are."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32, rel_l2_unfloored

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.testing import RUNTIME_DEVICE


def _mean_square(x, square):
    sq = opset.power(x, np.float32(2)) if square == "pow" else opset.multiply(x, x)
    return opset.reduce_mean(sq, np.array([-1], np.int64), True)


def _rms(x, square="pow", form="div_one", eps=1e-6):
    """x / sqrt(mean(x^2) + eps) in one of its spellings (``eps`` None: no Add, as Helium's
    dynamo export writes it)."""
    t = _mean_square(x, square)
    if eps is not None:
        t = opset.add(t, np.float32(eps))
    if form == "divide_x":
        return opset.divide(x, opset.sqrt(t))
    if form == "div_one":  # torch.rsqrt, ONNX Reciprocal
        r = opset.divide(np.float32(1), opset.sqrt(t))
    elif form == "pow_half":
        r = opset.power(t, np.float32(-0.5))
    else:  # "pow_minus_one"
        r = opset.power(opset.sqrt(t), np.float32(-1))
    return opset.multiply(x, r)


@pytest.mark.parametrize("square,form,eps", [
    ("pow", "div_one", 1e-6), ("mul", "div_one", 1e-6), ("pow", "pow_half", 1e-6),
    ("mul", "pow_minus_one", 1e-6), ("pow", "divide_x", 1e-6), ("pow", "div_one", None),
    ("mul", "divide_x", None)])
def test_spellings_fuse_with_their_scale(square, form, eps, rng):
    k = 37
    x = opset.parameter([2, -1, k], np.float32, name="x")
    y = opset.multiply(_rms(x, square, form, eps), randn_f32(rng, k))
    model = Model([opset.result(y, name="y")], [x])
    kinds = [n.kind for n in Program.from_model(model).nodes if not n.is_constant]
    assert kinds.count("RmsNorm") == 1 and not {"ReduceMean", "Sqrt", "Power", "Divide"} & set(kinds)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in (3, 11):
        feeds = {"x": (3 * randn_f32(rng, 2, s, k)).astype(np.float32)}
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-6
    assert req.stats["kernels_enqueued"] == 2  # one launch per infer: the scale is its epilogue


def _stays(y, inputs, outs, rng):
    """The model keeps its ops (no RmsNorm) and computes what the reference does."""
    model = Model([opset.result(y, name="y")] + outs, inputs)
    assert not any(n.kind == "RmsNorm" for n in Program.from_model(model).nodes)
    feeds = {p.get_friendly_name(): np.abs(randn_f32(rng, *p.get_output_partial_shape(0).to_shape()))
             for p in inputs}
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)
    assert rel_l2_unfloored(got["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-6


EPS = np.float32(1e-6)


def _inverse_root(ms, eps=EPS):
    return opset.divide(np.float32(1), opset.sqrt(opset.add(ms, eps)))


def test_mean_read_elsewhere_stays(rng):
    x = opset.parameter([2, 5, 8], np.float32, name="x")
    ms = _mean_square(x, "pow")
    _stays(opset.multiply(x, _inverse_root(ms)), [x], [opset.result(ms, name="ms")], rng)


def test_mean_over_another_axis_stays(rng):
    x = opset.parameter([2, 5, 8], np.float32, name="x")
    ms = opset.reduce_mean(opset.power(x, np.float32(2)), np.array([1], np.int64), True)
    _stays(opset.multiply(x, _inverse_root(ms)), [x], [], rng)


def test_scaling_another_tensor_stays(rng):
    x = opset.parameter([2, 5, 8], np.float32, name="x")
    z = opset.parameter([2, 5, 8], np.float32, name="z")
    _stays(opset.multiply(z, _inverse_root(_mean_square(x, "pow"))), [x, z], [], rng)


def test_eps_from_a_tensor_stays(rng):
    x = opset.parameter([2, 5, 8], np.float32, name="x")
    e = opset.parameter([2, 5, 1], np.float32, name="e")
    _stays(opset.multiply(x, _inverse_root(_mean_square(x, "pow"), e)), [x, e], [], rng)
