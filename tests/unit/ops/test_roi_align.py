"""ROIAlign: OpenVINO's ROIAlign-9 on netpass's IR (avg, asymmetric, fixed and adaptive
sampling, regions inside, across and outside the map) and the IR round trip; ONNX RoiAlign
against onnxruntime (avg and ONNX's max; both coordinate modes); OpenVINO's max and
half-pixel modes are refused. rtol 1e-4, atol 1e-5."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_export, check_import, check_ir_round_trip, check_openvino, one_node

from netpass import Model, opset
from netpass.errors import ShapeInferenceError

RNG = np.random.default_rng(16)


def _rois(n, h, w):
    x1, y1 = RNG.uniform(-2, w - 1, n), RNG.uniform(-2, h - 1, n)
    return np.stack([x1, y1, x1 + RNG.uniform(0.3, w, n), y1 + RNG.uniform(0.3, h, n)],
                    axis=1).astype(np.float32)


@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align_avg_matches_openvino(tmp_path, sampling_ratio):
    x = opset.parameter([2, 3, 8, 10], "f32", "x")
    rois = opset.parameter([5, 4], "f32", "rois")
    idx = opset.parameter([5], "i32", "idx")
    node = opset.roi_align(x, rois, idx, 3, 4, sampling_ratio, 0.5, "avg", "asymmetric")
    model = Model([node], [x, rois, idx])
    feeds = {"x": RNG.standard_normal((2, 3, 8, 10)).astype(np.float32),
             "rois": _rois(5, 16, 20), "idx": RNG.integers(0, 2, 5).astype(np.int32)}
    check_ir_round_trip(model, feeds, tmp_path)
    check_openvino(model, feeds, tmp_path, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("mode", ["avg", "max"])
def test_onnx_roi_align_matches_onnxruntime(transform, mode):
    """ONNX's max: the largest weighted corner term (onnxruntime's and onnx's reference's)."""
    feeds = {"x": RNG.standard_normal((2, 4, 9, 7)).astype(np.float32),
             "rois": _rois(6, 9, 7), "idx": RNG.integers(0, 2, 6).astype(np.int64)}
    proto = one_node("RoiAlign", feeds, opset=16, output_height=2, output_width=3,
                     sampling_ratio=2, coordinate_transformation_mode=transform, mode=mode)
    model = check_import(proto, feeds)
    check_export(model, feeds)


@pytest.mark.parametrize("mode,aligned,message", [
    ("max", "asymmetric", "OpenVINO's max is not implemented"),
    ("avg", "half_pixel", "aligned_mode must be one of")])
def test_openvino_modes_that_differ_are_refused(mode, aligned, message):
    x = opset.parameter([1, 1, 4, 4], "f32", "x")
    with pytest.raises(ShapeInferenceError, match=message):
        opset.roi_align(x, np.zeros((1, 4), np.float32), np.zeros(1, np.int32), 1, 1, 2, 1.0,
                        mode, aligned)
