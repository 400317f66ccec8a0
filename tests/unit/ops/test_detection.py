"""OpenVINO ReorgYolo-2, RegionYolo-1, ROIPooling-2, PriorBox-8 and PriorBoxClustered-1: netpass's
reference against OpenVINO's CPU plugin on the IR netpass writes (ReorgYolo: strides 1 to 3;
RegionYolo: YOLOv2's softmax form flattened whole and in part, YOLOv3's masked sigmoid form;
ROIPooling: max with scales that round box corners both ways, a one-point box, boxes past
the map, bilinear over whole and partial maps, pooled sizes 1x1 to 4x5; PriorBoxClustered:
one and four variances, steps given and derived, clipped or not), on IR OpenVINO writes, the IR round trip, the runtime (host
fallback), shape inference, and the errors. ReorgYolo and max pooling exact; the others
rtol 1e-4, atol 1e-5 (opcheck)."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_ir_round_trip, check_openvino, check_reads_openvino_ir, check_runtime

import netpass
from netpass import Model, opset
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError
from netpass.ops.detection import PSROIPooling, RegionYolo, ReorgYolo, ROIPooling
from netpass.ops.prior_box import PriorBox, PriorBoxClustered

RNG = np.random.default_rng(2)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _reorg_model(shape, stride):
    x = opset.parameter(list(shape), "f32", "x")
    return Model([opset.reorg_yolo(x, [stride]).output(0)], [x])


@pytest.mark.parametrize("shape,stride", [((2, 4, 6, 4), 2), ((1, 18, 9, 6), 3),
                                          ((1, 3, 2, 2), 1), ((1, 8, 2, 4), 2)])
def test_reorg_yolo_matches_openvino(shape, stride, tmp_path):
    check_openvino(_reorg_model(shape, stride), {"x": _x(*shape)}, tmp_path, 0, 0)


def test_reorg_yolo_is_a_permutation():
    x = np.arange(2 * 8 * 4 * 6, dtype=np.float32).reshape(2, 8, 4, 6)
    model = _reorg_model(x.shape, 2)
    got = netpass.reference.infer(model, {"x": x})[model.output_names[0]]
    assert got.shape == (2, 32, 2, 3)
    np.testing.assert_array_equal(np.sort(got.reshape(-1)), x.reshape(-1))


REGION = {
    "yolo2": ((1, 125, 13, 13), 4, 20, 5, True, [], 1, 3),
    "yolo2_partial_flatten": ((1, 24, 3, 3), 4, 3, 3, True, [], 1, 2),
    "yolo3": ((2, 255, 5, 4), 4, 80, 9, False, [0, 1, 2], 1, 3),
    "yolo3_other_mask": ((1, 30, 4, 4), 4, 5, 3, False, [3, 4, 5], 1, 3),
}


def _region_model(name):
    shape, *attrs = REGION[name]
    x = opset.parameter(list(shape), "f32", "x")
    node = opset.region_yolo(x, *attrs, anchors=[10.0, 13.0] * attrs[2])
    return Model([node.output(0)], [x]), shape


@pytest.mark.parametrize("name", sorted(REGION))
def test_region_yolo_matches_openvino(name, tmp_path):
    model, shape = _region_model(name)
    check_openvino(model, {"x": _x(*shape)}, tmp_path)


def test_region_yolo_scores():
    """Softmax form: every region's class scores sum to 1; x, y and objectness in (0, 1)."""
    model, shape = _region_model("yolo2_partial_flatten")
    got = netpass.reference.infer(model, {"x": _x(*shape)})[model.output_names[0]]
    regions = got.reshape(1, 3, 8, 3, 3)
    np.testing.assert_allclose(regions[:, :, 5:].sum(axis=2), 1, rtol=1e-5)
    assert ((regions[:, :, [0, 1, 4]] > 0) & (regions[:, :, [0, 1, 4]] < 1)).all()


MAX_ROIS = np.array([[0, 1, 2, 13, 17], [1, 0, 0, 17, 21], [0, 5.2, 3.7, 9.9, 8.1],
                     [1, 3, 3, 3, 3], [0, 14, 18, 40, 60]], np.float32)
BILINEAR_ROIS = np.array([[0, 0.1, 0.2, 0.8, 0.9], [1, 0, 0, 1, 1], [0, 0.33, 0.25, 0.5, 0.6]],
                         np.float32)


def _roi_model(rois, pooled, scale, method):
    x = opset.parameter([2, 3, 11, 9], "f32", "x")
    r = opset.parameter(list(rois.shape), "f32", "r")
    node = opset.roi_pooling(x, r, pooled, spatial_scale=scale, method=method)
    return Model([node.output(0)], [x, r])


@pytest.mark.parametrize("pooled", [(3, 2), (1, 1), (4, 5)])
@pytest.mark.parametrize("method,scale", [("max", 0.5), ("max", 0.25), ("bilinear", 1.0)])
def test_roi_pooling_matches_openvino(method, scale, pooled, tmp_path):
    rois = MAX_ROIS if method == "max" else BILINEAR_ROIS
    check_openvino(_roi_model(rois, list(pooled), scale, method),
                   {"x": _x(2, 3, 11, 9), "r": rois}, tmp_path)


def test_roi_pooling_max_of_a_whole_map():
    x = _x(2, 3, 11, 9)
    rois = np.array([[1, 0, 0, 8, 10]], np.float32)
    model = _roi_model(rois, [1, 1], 1.0, "max")
    got = netpass.reference.infer(model, {"x": x, "r": rois})[model.output_names[0]]
    np.testing.assert_array_equal(got[0, :, 0, 0], x[1].max(axis=(1, 2)))


def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset2
    x = opset1.parameter([2, 3, 11, 9], ov.Type.f32, name="x")
    y = opset1.parameter([1, 8, 4, 4], ov.Type.f32, name="y")
    outs = [opset2.roi_pooling(x, opset1.constant(MAX_ROIS), [2, 3], spatial_scale=0.5),
            opset2.reorg_yolo(y, [2]), opset1.region_yolo(x, 1, 1, 1, True, [], 1, 3)]
    model = ov.Model([o.output(0) for o in outs], [x, y])
    check_reads_openvino_ir(model, {"x": _x(2, 3, 11, 9), "y": _x(1, 8, 4, 4)}, tmp_path)


def test_ir_round_trip_and_runtime(tmp_path):
    model = _roi_model(BILINEAR_ROIS, [3, 4], 1.0, "bilinear")
    feeds = {"x": _x(2, 3, 11, 9), "r": BILINEAR_ROIS}
    back = check_ir_round_trip(model, feeds, tmp_path)
    assert [n.method for n in back.get_ordered_ops() if isinstance(n, ROIPooling)] == \
        ["bilinear"]
    check_runtime(model, feeds)
    model = _reorg_model((1, 18, 9, 6), 3)
    feeds = {"x": _x(1, 18, 9, 6)}
    back = check_ir_round_trip(model, feeds, tmp_path)
    assert sum(isinstance(n, ReorgYolo) for n in back.get_ordered_ops()) == 1
    check_runtime(model, feeds)
    for name in ("yolo2", "yolo3"):
        model, shape = _region_model(name)
        feeds = {"x": _x(*shape)}
        back = check_ir_round_trip(model, feeds, tmp_path)
        region = next(n for n in back.get_ordered_ops() if isinstance(n, RegionYolo))
        assert region.mask == REGION[name][5]
        check_runtime(model, feeds)


def test_shape_inference():
    x = opset.parameter(PartialShape([-1, 12, 6, -1]), "f32", "x")
    assert opset.reorg_yolo(x, [2]).get_output_partial_shape(0) == \
        PartialShape([-1, 48, 3, -1])
    r = opset.parameter(PartialShape([-1, 5]), "f32", "r")
    assert opset.roi_pooling(x, r, [2, 3]).get_output_partial_shape(0) == \
        PartialShape([-1, 12, 2, 3])


def test_errors_name_the_op():
    x = opset.parameter([1, 6, 4, 4], "f32", "x")
    with pytest.raises(NetpassError, match="ReorgYolo.*not a multiple of stride\\^2"):
        opset.reorg_yolo(x, [2])
    with pytest.raises(NetpassError, match="RegionYolo.*must be positive"):
        opset.region_yolo(x, 4, 1, 3, False, [], 1, 3)
    with pytest.raises(NetpassError, match="RegionYolo.*data must be \\[N, C, H, W\\]"):
        opset.region_yolo(opset.parameter([6, 4], "f32", "y"), 4, 1, 1, True, [], 1, 3)
    with pytest.raises(NetpassError, match="ROIPooling.*rois must be \\[R, 5\\]"):
        opset.roi_pooling(x, opset.parameter([3, 4], "f32", "r"), [2, 2])
    with pytest.raises(NetpassError, match="ROIPooling.*method must be max or bilinear"):
        opset.roi_pooling(x, opset.parameter([3, 5], "f32", "r"), [2, 2], method="avg")
    model = _roi_model(np.zeros((1, 5), np.float32), [2, 2], 1.0, "max")
    with pytest.raises(NetpassError, match="roi 0 names batch 4 of 2"):
        netpass.reference.infer(model, {"x": _x(2, 3, 11, 9),
                                        "r": np.array([[4, 0, 0, 1, 1]], np.float32)})


# -- PriorBoxClustered -------------------------------------------------------------------------

PRIORS = {
    "four_variances": ({"width": [10.0, 20.0, 30.5], "height": [12.0, 8.0, 30.0], "clip": True,
                        "offset": 0.5, "variance": [0.1, 0.1, 0.2, 0.2]}, [4, 5], [300, 320]),
    "step_no_clip": ({"width": [50.0, 200.0], "height": [40.0, 300.0], "clip": False,
                      "offset": 0.3, "step": 16.0, "variance": [0.2]}, [3, 2], [100, 120]),
    "step_w_h": ({"width": [9.0], "height": [7.0], "clip": True, "offset": 0.5, "step_w": 10.0,
                  "step_h": 7.0}, [2, 6], [20, 50]),
}


def _prior_model(name):
    """PriorBoxClustered over run-time sizes (Parameters o and i)."""
    attrs, _, _ = PRIORS[name]
    o = opset.parameter([2], "i64", "o")
    i = opset.parameter([2], "i64", "i")
    return Model([opset.prior_box_clustered(o, i, attrs).output(0)], [o, i])


def _prior_feeds(name):
    _, out_size, image_size = PRIORS[name]
    return {"o": np.asarray(out_size, np.int64), "i": np.asarray(image_size, np.int64)}


@pytest.mark.parametrize("name", sorted(PRIORS))
def test_prior_box_clustered_matches_openvino(name, tmp_path):
    check_openvino(_prior_model(name), _prior_feeds(name), tmp_path)


def test_prior_box_clustered_values():
    """One 4x2 box on a 1x2 map of a 10x10 image, steps 10 down and 5 across: centres (2.5, 5)
    and (7.5, 5)."""
    attrs = {"width": [4.0], "height": [2.0], "clip": False, "offset": 0.5}
    model = Model([opset.prior_box_clustered([1, 2], [10, 10], attrs).output(0)], [])
    got = netpass.reference.infer(model, {})[model.output_names[0]]
    np.testing.assert_allclose(got, [[0.05, 0.4, 0.45, 0.6, 0.55, 0.4, 0.95, 0.6],
                                     [0.1] * 8], rtol=1e-6)


def test_prior_box_clustered_ir_both_ways_and_runtime(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1
    o = opset1.parameter([2], ov.Type.i64, name="o")
    i = opset1.parameter([2], ov.Type.i64, name="i")
    attrs, _, _ = PRIORS["four_variances"]
    node = opset1.prior_box_clustered(o, i, attrs)
    check_reads_openvino_ir(ov.Model([node], [o, i]), _prior_feeds("four_variances"),
                            tmp_path)
    model = _prior_model("step_no_clip")
    feeds = _prior_feeds("step_no_clip")
    back = check_ir_round_trip(model, feeds, tmp_path)
    prior = next(n for n in back.get_ordered_ops() if isinstance(n, PriorBoxClustered))
    assert prior.variance == [0.2] and prior.step == 16.0
    check_runtime(model, feeds)


def test_prior_box_clustered_shapes_and_errors():
    attrs = {"width": [1.0, 2.0], "height": [1.0, 2.0], "offset": 0.5}
    assert opset.prior_box_clustered([3, 4], [30, 40], attrs).get_output_partial_shape(0) == \
        PartialShape([2, 96])
    sizes = opset.parameter([2], "i64", "s")
    assert opset.prior_box_clustered(sizes, [30, 40], attrs).get_output_partial_shape(0) == \
        PartialShape([2, -1])
    with pytest.raises(NetpassError, match="PriorBoxClustered.*equally long"):
        opset.prior_box_clustered([3, 4], [30, 40], {"width": [1.0], "height": [1.0, 2.0]})
    with pytest.raises(NetpassError, match="PriorBoxClustered.*output_size must hold 2"):
        opset.prior_box_clustered([3, 4, 5], [30, 40], attrs)


# -- PriorBox ----------------------------------------------------------------------------------

PRIOR_BOXES = {
    "ssd": ({"min_size": [64.0], "max_size": [300.0], "aspect_ratio": [2.0],
             "variance": [0.1, 0.1, 0.2, 0.2], "step": 16.0, "offset": 0.5, "clip": False,
             "flip": True}, [5, 4], [300, 300]),
    "two_sizes_ratio_order": ({"min_size": [30.0, 60.0], "max_size": [60.0, 111.0],
                               "aspect_ratio": [2.0, 3.0], "step": 0.0, "offset": 0.5,
                               "clip": True, "flip": True,
                               "min_max_aspect_ratios_order": False}, [3, 3], [200, 240]),
    "mxnet_sizes": ({"min_size": [0.2, 0.4], "aspect_ratio": [2.0, 0.5], "step": 0.05,
                     "offset": 0.5, "clip": False, "flip": False, "scale_all_sizes": False,
                     "variance": [0.2]}, [4, 6], [128, 160]),
    "fixed_ratio": ({"fixed_size": [32.0, 64.0], "density": [2.0, 1.0], "fixed_ratio": [2.0],
                     "step": 8.0, "offset": 0.5, "clip": False}, [3, 2], [64, 64]),
    "fixed_density_ratios": ({"fixed_size": [16.0], "density": [2.0], "aspect_ratio": [2.0],
                              "flip": True, "step": 8.0, "offset": 0.5, "clip": False},
                             [3, 2], [64, 64]),
}


@pytest.mark.parametrize("name", sorted(PRIOR_BOXES))
def test_prior_box_matches_openvino(name, tmp_path):
    """Constant sizes: OpenVINO's CPU plugin cannot infer some PriorBox shapes from inputs."""
    attrs, out_size, image_size = PRIOR_BOXES[name]
    model = Model([opset.prior_box(out_size, image_size, attrs).output(0)], [])
    check_openvino(model, {}, tmp_path)


def test_prior_box_values():
    """One cell of a 10x10 image: the 4x4 square, the sqrt(4 * 16) = 8 square, then the 2:1
    and 1:2 boxes of min size 4 (half sides 2 * sqrt(2) and 2 / sqrt(2))."""
    attrs = {"min_size": [4.0], "max_size": [16.0], "aspect_ratio": [2.0], "flip": True,
             "offset": 0.5}
    model = Model([opset.prior_box([1, 1], [10, 10], attrs).output(0)], [])
    got = netpass.reference.infer(model, {})[model.output_names[0]][0].reshape(4, 4)
    r = np.sqrt(2)
    want = np.array([[3, 3, 7, 7], [1, 1, 9, 9], [5 - 2 * r, 5 - 2 / r, 5 + 2 * r, 5 + 2 / r],
                     [5 - 2 / r, 5 - 2 * r, 5 + 2 / r, 5 + 2 * r]]) / 10
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_prior_box_ir_both_ways_and_runtime(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset8
    attrs, out_size, image_size = PRIOR_BOXES["two_sizes_ratio_order"]
    node = opset8.prior_box(opset1.constant(np.array(out_size, np.int64)),
                            opset1.constant(np.array(image_size, np.int64)), attrs)
    model = check_reads_openvino_ir(ov.Model([node], []), {}, tmp_path)
    assert model.outputs[0].partial_shape == PartialShape([2, 432])
    attrs, out_size, image_size = PRIOR_BOXES["mxnet_sizes"]
    o = opset.parameter([2], "i64", "o")
    model = Model([opset.prior_box(o, image_size, attrs).output(0)], [o])
    feeds = {"o": np.asarray(out_size, np.int64)}
    back = check_ir_round_trip(model, feeds, tmp_path)
    prior = next(n for n in back.get_ordered_ops() if isinstance(n, PriorBox))
    assert not prior.scale_all_sizes and prior.min_size == [0.2, 0.4]
    check_runtime(model, feeds)


def test_prior_box_refuses_what_openvino_miscounts():
    """OpenVINO sizes the output for fewer boxes than its own algorithm writes here."""
    attrs = {"fixed_size": [32.0], "density": [2.0], "fixed_ratio": [1.0, 2.0], "step": 8.0}
    with pytest.raises(NetpassError, match="PriorBox.*generate 8 boxes per cell where "
                       "OpenVINO sizes its output for 7"):
        opset.prior_box([2, 2], [64, 64], attrs)


# -- PSROIPooling ------------------------------------------------------------------------------

PSROI = {
    "average": ("average", 3, 2, 1, 1, 0.5, MAX_ROIS[:3]),
    "average_3x3": ("average", 2, 3, 1, 1, 1.0, np.array([[1, 0, 0, 8, 10], [0, 2, 2, 4, 5]],
                                                         np.float32)),
    "bilinear": ("bilinear", 3, 2, 2, 3, 1.0, BILINEAR_ROIS[:2]),
    "bilinear_one_bin": ("bilinear", 2, 1, 3, 2, 1.0, BILINEAR_ROIS),
}


def _psroi(name):
    mode, dim, group, bins_x, bins_y, scale, rois = PSROI[name]
    channels = dim * (group * group if mode == "average" else bins_x * bins_y)
    x = opset.parameter([2, channels, 11, 9], "f32", "x")
    r = opset.parameter(list(rois.shape), "f32", "r")
    node = opset.psroi_pooling(x, r, dim, group, scale, bins_x, bins_y, mode)
    return Model([node.output(0)], [x, r]), {"x": _x(2, channels, 11, 9), "r": rois}


@pytest.mark.parametrize("name", sorted(PSROI))
def test_psroi_pooling_matches_openvino(name, tmp_path):
    model, feeds = _psroi(name)
    check_openvino(model, feeds, tmp_path)


def test_psroi_pooling_average_reads_its_own_channel():
    """A 2x2 grid over the whole 4x4 map: bin (i, j) of output channel c is the mean of the
    matching quarter of input channel (c * 2 + i) * 2 + j."""
    x = _x(1, 8, 4, 4)
    p = opset.parameter([1, 8, 4, 4], "f32", "x")
    node = opset.psroi_pooling(p, np.array([[0, 0, 0, 3, 3]], np.float32), 2, 2, 1.0, 1, 1,
                               "average")
    model = Model([node.output(0)], [p])
    got = netpass.reference.infer(model, {"x": x})[model.output_names[0]]
    for c in range(2):
        for i in range(2):
            for j in range(2):
                quarter = x[0, (c * 2 + i) * 2 + j, 2 * i:2 * i + 2, 2 * j:2 * j + 2]
                np.testing.assert_allclose(got[0, c, i, j], quarter.mean(), rtol=1e-6)


def test_psroi_pooling_ir_both_ways_runtime_and_errors(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1
    x = opset1.parameter([2, 12, 11, 9], ov.Type.f32, name="x")
    node = opset1.psroi_pooling(x, opset1.constant(MAX_ROIS[:3]), 3, 2, 0.5, 1, 1, "average")
    check_reads_openvino_ir(ov.Model([node], [x]), {"x": _x(2, 12, 11, 9)}, tmp_path)
    model, feeds = _psroi("bilinear")
    back = check_ir_round_trip(model, feeds, tmp_path)
    pool = next(n for n in back.get_ordered_ops() if isinstance(n, PSROIPooling))
    assert (pool.mode, pool.spatial_bins_y) == ("bilinear", 3)
    check_runtime(model, feeds)
    with pytest.raises(NetpassError, match="PSROIPooling.*feature has 10 channels where "
                       "output_dim 3 needs 12"):
        opset.psroi_pooling(opset.parameter([1, 10, 4, 4], "f32", "y"), MAX_ROIS, 3, 2, 1.0, 1,
                            1, "average")
