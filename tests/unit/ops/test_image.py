"""GridSample and AffineGrid: import vs onnxruntime on random data and grids reaching past
the borders (every mode, padding mode and align_corners; 4-D at opset 16, 5-D at opset 22 vs
onnx's reference), AffineGrid 2-D and 3-D; AffineGrid feeding GridSample; partial shapes; IR v11
run by OpenVINO (4-D GridSample); export; the runtime. rtol 1e-4, atol 1e-5."""
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
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError

RNG = np.random.default_rng(16)
MODES = ["bilinear", "nearest", "bicubic"]
PADDINGS = ["zeros", "border", "reflection"]


def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_4d_matches_onnxruntime(mode, padding, align):
    feeds = {"x": rand(2, 3, 5, 7), "g": rand(2, 4, 6, 2, lo=-1.6, hi=1.6)}
    if mode == "bicubic" and padding == "border":
        # onnx's reference clamps the sampling point into the border before taking the 4x4
        # taps (netpass too); onnxruntime (as PyTorch) clamps only the taps
        check_import(one_node("GridSample", feeds, opset=22, mode="cubic",
                              padding_mode=padding, align_corners=align), feeds,
                     engine="reference")
        return
    model = check_import(one_node("GridSample", feeds, opset=16, mode=mode, padding_mode=padding,
                                  align_corners=align), feeds)
    check_export(model, feeds)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", PADDINGS)
def test_grid_sample_5d_matches_reference(mode, padding):
    if mode == "cubic":
        pytest.skip("cubic is defined for 4-D data only")
    feeds = {"x": rand(1, 2, 3, 4, 5), "g": rand(1, 2, 3, 2, 3, lo=-1.4, hi=1.4)}
    check_import(one_node("GridSample", feeds, opset=22, mode=mode, padding_mode=padding,
                          align_corners=1), feeds, engine="reference")


@pytest.mark.parametrize("size", [[2, 3, 5, 6], [2, 1, 3, 4, 5]])
@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid_matches_onnxruntime(size, align):
    k = len(size) - 2
    feeds = {"t": rand(2, k, k + 1), "s": np.array(size, np.int64)}
    check_import(one_node("AffineGrid", feeds, opset=20, align_corners=align), feeds)


def test_affine_grid_then_grid_sample_is_identity():
    x = opset.parameter([1, 2, 4, 5], "f32", "x")
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], np.float32)
    grid = opset.affine_grid(theta, [1, 2, 4, 5], align_corners=True)
    assert grid.output(0).partial_shape == PartialShape([1, 4, 5, 2])
    y = opset.grid_sample(x, grid, {"align_corners": True})
    feeds = {"x": rand(1, 2, 4, 5)}
    check_runtime(Model([y], [x]), feeds)
    np.testing.assert_allclose(next(iter(netpass.reference.infer(Model([y], [x]), feeds)
                                         .values())), feeds["x"], atol=1e-6)


def test_shapes_and_errors():
    x = opset.parameter([-1, 3, -1, -1], "f32", "x")
    g = opset.parameter([2, 7, 9, 2], "f32", "g")
    assert opset.grid_sample(x, g).output(0).partial_shape == PartialShape([2, 3, 7, 9])
    with pytest.raises(NetpassError, match="last axis"):
        opset.grid_sample(x, opset.parameter([2, 7, 9, 3], "f32"))
    with pytest.raises(NetpassError, match="mode"):
        opset.grid_sample(x, g, {"mode": "area"})


def test_openvino_ir_and_runtime(tmp_path):
    x = opset.parameter([1, 2, 5, 6], "f32", "x")
    g = opset.parameter([1, 3, 4, 2], "f32", "g")
    model = Model([opset.grid_sample(x, g, {"mode": m, "padding_mode": p}).output(0)
                   for m, p in (("bilinear", "zeros"), ("nearest", "border"),
                                ("bicubic", "reflection"))], [x, g])
    feeds = {"x": rand(1, 2, 5, 6), "g": rand(1, 3, 4, 2, lo=-1.2, hi=1.2)}
    check_ir_round_trip(model, feeds, tmp_path)
    check_openvino(model, feeds, tmp_path)
    check_runtime(model, feeds)
