"""NonMaxSuppression: ONNX import against onnxruntime on random boxes (both encodings, flipped
corners, several batches and classes, thresholds and limits, omitted inputs); OpenVINO's
NonMaxSuppression-9 on netpass's IR for the attributes ONNX lacks (sort across everything,
Soft-NMS, i32 indices); partial shapes; the runtime (output sizes follow the data). Indices
exact, scores rtol 1e-5.
"""
from __future__ import annotations

import numpy as np
import openvino as ov
import pytest
from onnx import TensorProto, helper
from opcheck import assert_close, check_export, check_ir_round_trip, expected

import netpass
from netpass import Model, opset
from netpass.core.dimension import Dimension
from netpass.testing import RUNTIME_DEVICE

RNG = np.random.default_rng(9)


def boxes_and_scores(batches, classes, n, center=False):
    xy = RNG.uniform(0, 10, (batches, n, 2))
    wh = RNG.uniform(1, 4, (batches, n, 2))
    if center:
        boxes = np.concatenate([xy, wh], -1)
    else:
        boxes = np.concatenate([xy, xy + wh], -1)
        flip = RNG.random((batches, n)) < 0.3  # the second corner first: still one box
        boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    scores = RNG.random((batches, classes, n))
    return boxes.astype(np.float32), scores.astype(np.float32)


def onnx_nms(center, with_inputs):
    names = ["boxes", "scores"] + ["limit", "iou", "score"][:with_inputs]
    node = helper.make_node("NonMaxSuppression", names, ["y"], center_point_box=int(center))
    inputs = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["b", "n", 4]),
              helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["b", "c", "n"])]
    inputs += [helper.make_tensor_value_info(n, t, [])
               for n, t in (("limit", TensorProto.INT64), ("iou", TensorProto.FLOAT),
                            ("score", TensorProto.FLOAT))][:with_inputs]
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    proto.ir_version = 8
    return proto


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("limit,iou,score", [(3, 0.3, 0.0), (10, 0.5, 0.4), (2, 0.0, 0.2),
                                             (0, 0.5, 0.0)])
def test_onnx_nms_matches_onnxruntime(center, limit, iou, score):
    boxes, scores = boxes_and_scores(2, 3, 12, center)
    feeds = {"boxes": boxes, "scores": scores, "limit": np.array(limit, np.int64),
             "iou": np.array(iou, np.float32), "score": np.array(score, np.float32)}
    proto = onnx_nms(center, 3)
    m = netpass.read_model(proto)
    got = netpass.reference.infer(m, feeds)["y"]
    assert_close(got, expected(proto, feeds, "ort")[0], what="selected_indices")
    check_export(m, feeds)


def test_onnx_nms_without_optional_inputs_selects_nothing():
    boxes, scores = boxes_and_scores(1, 2, 5)
    m = netpass.read_model(onnx_nms(False, 0))
    assert netpass.reference.infer(m, {"boxes": boxes, "scores": scores})["y"].shape == (0, 3)


def _nms9(sort, sigma, encoding="corner", output_type="i64"):
    b = opset.parameter([2, 10, 4], "f32", "boxes")
    s = opset.parameter([2, 3, 10], "f32", "scores")
    node = opset.non_max_suppression(b, s, np.int64(4), np.float32(0.4), np.float32(0.1),
                                     np.float32(sigma), box_encoding=encoding,
                                     sort_result_descending=sort, output_type=output_type)
    return Model(node.outputs(), [b, s]), node


@pytest.mark.parametrize("sort,sigma,encoding,output_type", [
    (False, 0.0, "corner", "i64"), (True, 0.0, "corner", "i32"), (False, 0.5, "center", "i64"),
    (True, 0.3, "corner", "i64")])
def test_nms9_matches_openvino(tmp_path, sort, sigma, encoding, output_type):
    model, node = _nms9(sort, sigma, encoding, output_type)
    assert node.output(0).partial_shape[0] == Dimension(0, 24)
    boxes, scores = boxes_and_scores(2, 3, 10, encoding == "center")
    feeds = {"boxes": boxes, "scores": scores}
    ref = netpass.reference.infer(model, feeds)
    path = tmp_path / "nms.xml"
    check_ir_round_trip(model, feeds, tmp_path)
    netpass.save_model(model, str(path))
    compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled([boxes, scores])
    names = model.output_names
    np.testing.assert_array_equal(got[compiled.output(0)], ref[names[0]])
    np.testing.assert_allclose(got[compiled.output(1)], ref[names[1]], rtol=1e-5)
    np.testing.assert_array_equal(got[compiled.output(2)], ref[names[2]])


def test_runtime_output_sizes_follow_the_data():
    model, _ = _nms9(False, 0.0)
    req = netpass.compile_model(model, device=RUNTIME_DEVICE).create_infer_request()
    sizes = set()
    for _ in range(3):
        boxes, scores = boxes_and_scores(2, 3, 10)
        scores *= RNG.uniform(0.05, 1.0)
        feeds = {"boxes": boxes, "scores": scores}
        got, ref = req.infer(feeds), netpass.reference.infer(model, feeds)
        for name in model.output_names:
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-6)
        sizes.add(got[model.output_names[0]].shape[0])
    assert req.stats["host_fallback_kinds"]["NonMaxSuppression"] == 3
