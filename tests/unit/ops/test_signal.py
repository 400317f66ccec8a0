"""Signal ops: ONNX DFT (17 and 20: real and complex input, forward/inverse, one-sided, every
axis, dft_length padding and trimming, a run-time axis) and STFT (window or frame_length) vs
onnxruntime / onnx's reference; windows and MelWeightMatrix vs onnx's reference; OpenVINO's
DFT/IDFT/RDFT/IRDFT/STFT from netpass's IR run by OpenVINO; partial shapes; the runtime.
rtol 1e-4, atol 1e-4 (sums of tens of float32 terms)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from opcheck import (
    check_export,
    check_import,
    check_ir_round_trip,
    check_openvino,
    check_runtime,
    one_node,
)

import netpass
from netpass import Model, opset
from netpass.core.dimension import Dimension
from netpass.core.shape import PartialShape

RNG = np.random.default_rng(19)
TOL = {"rtol": 1e-4, "atol": 1e-4}


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("complex_in", [False, True])
@pytest.mark.parametrize("axis", [1, 2, -2, -3])
@pytest.mark.parametrize("inverse,onesided", [(0, 0), (1, 0), (0, 1)])
@pytest.mark.parametrize("length", [None, 6, 11])
def test_dft_20_matches(complex_in, axis, inverse, onesided, length):
    if onesided and complex_in:
        pytest.skip("one-sided needs real input")
    x = rand(2, 8, 9, 2 if complex_in else 1)
    feeds = {"x": x, "a": np.array(axis, np.int64)}
    inputs = ["x", "", "a"]
    if length is not None:
        feeds["n"] = np.array(length, np.int64)
        inputs = ["x", "n", "a"]
    proto = one_node("DFT", feeds, opset=20, inputs=inputs, inverse=inverse,
                     onesided=onesided)
    check_import(proto, feeds, engine="reference", **TOL)


@pytest.mark.parametrize("axis", [1, 2])
def test_dft_17_matches_onnxruntime(axis):
    x = rand(3, 8, 6, 1)
    check_import(one_node("DFT", {"x": x}, opset=17, axis=axis), {"x": x}, **TOL)


def test_inverse_one_sided_gives_real_samples():
    x = rand(1, 10, 4, 1)
    spec = netpass.reference.infer(netpass.read_model(one_node(
        "DFT", {"x": x}, opset=17, axis=1, onesided=1)), {"x": x})["y0"]
    back = netpass.reference.infer(netpass.read_model(one_node(
        "DFT", {"s": spec}, opset=17, axis=1, inverse=1, onesided=1)), {"s": spec})["y0"]
    np.testing.assert_allclose(back, x, **TOL)


@pytest.mark.parametrize("window", [True, False])
@pytest.mark.parametrize("step", [3, 8])
def test_stft_matches_reference(window, step):
    feeds = {"s": rand(2, 64, 1), "step": np.array(step, np.int64)}
    if window:
        feeds["w"] = RNG.uniform(0, 1, 16).astype(np.float32)
        inputs = ["s", "step", "w"]
    else:
        feeds["n"] = np.array(16, np.int64)
        inputs = ["s", "step", "", "n"]
    check_import(one_node("STFT", feeds, opset=17, inputs=inputs), feeds, engine="reference",
                 **TOL)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.DOUBLE])
def test_windows_match_reference(op, periodic, dtype):
    feeds = {"n": np.array(17, np.int64)}
    check_import(one_node(op, feeds, opset=17, periodic=periodic, output_datatype=dtype),
                 feeds, engine="reference")


@pytest.mark.parametrize("bins,length,rate,low,high", [(8, 16, 8192, 0.0, 4096.0),
                                                       (5, 64, 16000, 100.0, 7000.0)])
def test_mel_weight_matrix_matches_reference(bins, length, rate, low, high):
    feeds = {"b": np.array(bins, np.int64), "n": np.array(length, np.int64),
             "r": np.array(rate, np.int64), "lo": np.array(low, np.float32),
             "hi": np.array(high, np.float32)}
    check_import(one_node("MelWeightMatrix", feeds, opset=17), feeds, engine="reference")


def test_partial_shapes():
    x = opset.parameter(PartialShape([Dimension(1, 4), 16, -1, 2]), "f32", "x")
    assert opset.dft(x, [1], [10]).output(0).partial_shape == \
        PartialShape([Dimension(1, 4), 10, -1, 2])
    r = opset.rdft(opset.parameter([3, 16], "f32"), [1])
    assert r.output(0).partial_shape == PartialShape([3, 9, 2])
    back = opset.irdft(r, [1])
    assert back.output(0).partial_shape == PartialShape([3, 16])
    s = opset.stft(opset.parameter([2, 100], "f32"), np.ones(20, np.float32), 20, 5, False)
    assert s.output(0).partial_shape == PartialShape([2, 17, 11, 2])


def _ov_model():
    x = opset.parameter([2, 8, 6, 2], "f32", "x")
    r = opset.parameter([2, 12], "f32", "r")
    outs = [opset.dft(x, [1]), opset.idft(x, [0, 2], [3, 8]), opset.rdft(r, [1]),
            opset.irdft(opset.rdft(r, [1]), [1]),
            opset.stft(r, np.hanning(4).astype(np.float32), 4, 2, False)]
    return Model([o.output(0) for o in outs], [x, r]), {"x": rand(2, 8, 6, 2), "r": rand(2, 12)}


def test_openvino_agrees(tmp_path):
    model, feeds = _ov_model()
    check_ir_round_trip(model, feeds, tmp_path)
    check_openvino(model, feeds, tmp_path, **TOL)


def test_runtime_and_export():
    model, feeds = _ov_model()
    check_runtime(model, feeds, **TOL)
    x = opset.parameter([2, 8, 1], "f32", "x")
    single = Model([opset.rdft(opset.squeeze(x, [2]), [1]).output(0)], [x])
    check_export(single, {"x": rand(2, 8, 1)}, engine="reference", **TOL)
