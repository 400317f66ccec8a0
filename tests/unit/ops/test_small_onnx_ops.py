"""ReverseSequence, CenterCropPad, LRN, Det, TensorScatter and SwiGLU: import vs onnxruntime
(onnx's reference where onnxruntime lacks the op or opset) on random shapes and edge values;
partial shapes; errors; ONNX export; IR v11 read back (and run by OpenVINO for ReverseSequence
and LRN, which it knows); the runtime. rtol 1e-4 / atol 1e-5 for floats, exact otherwise."""
from __future__ import annotations

import numpy as np
import pytest
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
from netpass.errors import NetpassError

RNG = np.random.default_rng(17)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# -- ReverseSequence --------------------------------------------------------------------------

@pytest.mark.parametrize("time_axis,batch_axis", [(0, 1), (1, 0)])
def test_reverse_sequence_matches_onnxruntime(time_axis, batch_axis):
    shape = (5, 4, 3) if time_axis == 0 else (4, 5, 3)
    lens = RNG.integers(0, 6, 4).astype(np.int64)
    feeds = {"x": rand(*shape), "n": lens}
    model = check_import(one_node("ReverseSequence", feeds, opset=10, time_axis=time_axis,
                                  batch_axis=batch_axis), feeds)
    check_export(model, feeds)


def test_reverse_sequence_ir_openvino_runtime(tmp_path):
    x = opset.parameter([3, 6, 2], "f32", "x")
    n = opset.parameter([3], "i32", "n")
    model = Model([opset.reverse_sequence(x, n, 0, 1)], [x, n])
    feeds = {"x": rand(3, 6, 2), "n": np.array([6, 1, 4], np.int32)}
    check_ir_round_trip(model, feeds, tmp_path)
    check_openvino(model, feeds, tmp_path)
    check_runtime(model, feeds)
    with pytest.raises(NetpassError, match="differ"):
        opset.reverse_sequence(x, n, 1, 1)


# -- CenterCropPad -----------------------------------------------------------------------------

@pytest.mark.parametrize("target,axes", [([3, 7, 4], None), ([9, 2], [0, 1]), ([5, 6], [-1, 0])])
def test_center_crop_pad_matches_reference(target, axes):
    feeds = {"x": rand(6, 5, 4), "s": np.array(target, np.int64)}
    attrs = {"axes": axes} if axes else {}
    check_import(one_node("CenterCropPad", feeds, opset=18, **attrs), feeds, engine="reference")


def test_center_crop_pad_shapes_export_runtime():
    x = opset.parameter([-1, 5], "f32", "x")
    y = opset.center_crop_pad(x, [8], axes=[1])
    assert y.output(0).partial_shape == PartialShape([-1, 8])
    model = Model([y], [x])
    feeds = {"x": rand(3, 5)}
    check_export(model, feeds, engine="reference")
    check_runtime(model, feeds)
    s = opset.parameter([2], "i64", "s")
    dyn = Model([opset.center_crop_pad(x, s)], [x, s])
    req = netpass.compile_model(dyn, device=netpass.testing.RUNTIME_DEVICE).create_infer_request()
    for target in ([2, 2], [5, 9]):
        feeds = {"x": rand(4, 5), "s": np.array(target, np.int64)}
        got = next(iter(req.infer(feeds).values()))
        np.testing.assert_array_equal(got, next(iter(netpass.reference.infer(dyn, feeds)
                                                     .values())))


# -- LRN ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_lrn_matches_onnxruntime(size):
    feeds = {"x": rand(2, 7, 3, 4)}
    proto = one_node("LRN", feeds, opset=13, size=size, alpha=0.02, beta=0.6, bias=1.5)
    if size % 2:
        check_export(check_import(proto, feeds), feeds)
        return
    # onnxruntime takes odd sizes only and onnx's reference loops over the batch instead of the
    # channels: the specification's formula, element by element
    x = feeds["x"].astype(np.float64)
    want = np.empty_like(x)
    for c in range(x.shape[1]):
        lo, hi = max(0, c - (size - 1) // 2), min(x.shape[1] - 1, c + -(-(size - 1) // 2))
        sq = (x[:, lo:hi + 1] ** 2).sum(axis=1)
        want[:, c] = x[:, c] / (1.5 + 0.02 / size * sq) ** 0.6
    got = next(iter(netpass.reference.infer(netpass.read_model(proto), feeds).values()))
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_lrn_ir_openvino_runtime(tmp_path):
    x = opset.parameter([1, 6, 4, 4], "f32", "x")
    model = Model([opset.lrn(x, [1], alpha=0.05, beta=0.75, bias=2.0, size=3)], [x])
    feeds = {"x": rand(1, 6, 4, 4)}
    check_ir_round_trip(model, feeds, tmp_path)
    check_openvino(model, feeds, tmp_path)
    check_runtime(model, feeds)


# -- Det ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 1, 2, 2)])
def test_det_matches_onnxruntime(shape):
    feeds = {"x": rand(*shape)}
    model = check_import(one_node("Det", feeds, opset=11), feeds)
    check_export(model, feeds)


def test_det_shapes_and_errors():
    x = opset.parameter(PartialShape([Dimension(1, 3), -1, 4]), "f32", "x")
    assert opset.det(x).output(0).partial_shape == PartialShape([Dimension(1, 3)])
    with pytest.raises(NetpassError, match="square"):
        opset.det(opset.parameter([2, 3], "f32"))


# -- TensorScatter -----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis", [-2, 1])
def test_tensor_scatter_matches_reference(mode, axis):
    cache = rand(2, 3, 8, 4) if axis == -2 else rand(2, 8, 3, 4)
    upd = rand(2, 3, 3, 4) if axis == -2 else rand(2, 3, 3, 4)
    starts = np.array([0, 5] if mode == "linear" else [6, 7], np.int64)
    feeds = {"c": cache, "u": upd, "w": starts}
    model = check_import(one_node("TensorScatter", feeds, opset=24, axis=axis, mode=mode), feeds,
                         engine="reference")
    check_runtime(model, feeds)


def test_tensor_scatter_out_of_cache():
    c = opset.parameter([1, 4, 2], "f32", "c")
    u = opset.parameter([1, 3, 2], "f32", "u")
    model = Model([opset.tensor_scatter(c, u, np.array([2], np.int64), axis=1)], [c, u])
    with pytest.raises(NetpassError, match="leave the cache"):
        netpass.reference.infer(model, {"c": rand(1, 4, 2), "u": rand(1, 3, 2)})


# -- SwiGLU ------------------------------------------------------------------------------------

@pytest.mark.parametrize("alpha", [1.0, 1.702])
def test_swiglu_matches_reference(alpha):
    feeds = {"a": rand(3, 8), "b": rand(3, 8)}
    model = check_import(one_node("SwiGLU", feeds, opset=28, alpha=alpha), feeds,
                         engine="reference")
    check_runtime(model, feeds)
