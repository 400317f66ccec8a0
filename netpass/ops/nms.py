"""NonMaxSuppression (OpenVINO opset9; ONNX 10, 11): greedy selection of boxes per batch item
and class, highest score first, dropping boxes that overlap a selected one by more than
``iou_threshold`` (Soft-NMS with ``soft_nms_sigma`` > 0: their scores decay instead).

Inputs: boxes ``[batches, boxes, 4]`` (``corner``: ``[y1, x1, y2, x2]``, either corner first;
``center``: ``[x_center, y_center, width, height]``), scores ``[batches, classes, boxes]``, then
the optional scalars max_output_boxes_per_class (0), iou_threshold (0), score_threshold (0)
and soft_nms_sigma (0). Outputs, one row per selected box: ``selected_indices`` ``[n, 3]``
(batch, class, box), ``selected_scores`` ``[n, 3]`` (batch, class, score) and ``valid_outputs``
``[1]`` = n. Rows go batch by batch, class by class, in selection order, or by descending score
over everything with ``sort_result_descending``. The number of rows depends on the data: the
runtime computes it on the host.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import Type, f32, i32, i64
from .base import set_name, to_output
from .registry import export_error, onnx_export, onnx_rule

__all__ = ["non_max_suppression"]


class NonMaxSuppression(Node):
    type_name = "NonMaxSuppression"
    version = "opset9"
    # v1, v3, v4: one output (selected_indices; v1 i64, no output_type) and no
    # soft_nms_sigma; OpenVINO's CPU plugin gives their selected rows as v5 and v9 do (only the
    # rows selected, not padded with -1 to a static bound), and so does this class
    IR_VERSIONS = ("opset1", "opset3", "opset4", "opset5", "opset9")
    ATTRS = {"box_encoding": "corner", "sort_result_descending": True, "output_type": i64}
    output_type: Type
    DATA_DEPENDENT_SHAPE = True

    def infer_types(self) -> None:
        n_in = self.get_input_size()
        self.check(2 <= n_in <= 6, "expects 2 to 6 inputs, got {}", n_in)
        self.check(self.box_encoding in ("corner", "center"),
                   "box_encoding must be corner or center, got '{}'", self.box_encoding)
        self.output_type = Type.of(self.output_type)
        self.check(self.output_type in (i32, i64), "output_type must be i32 or i64, got {}",
                   self.output_type)
        boxes, scores = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        self.check(not boxes.rank_is_static or (len(boxes) == 3 and boxes[2].compatible(4)),
                   "boxes must be [batches, boxes, 4], got {}", boxes)
        self.check(not scores.rank_is_static or len(scores) == 3,
                   "scores must be [batches, classes, boxes], got {}", scores)
        et = self.get_input_element_type(1)
        self.check(et.is_dynamic or et.is_real, "scores must be floats, got {}", et)
        for i, what in ((2, "max_output_boxes_per_class"), (3, "iou_threshold"),
                        (4, "score_threshold"), (5, "soft_nms_sigma")):
            if i < n_in:
                ps = self.get_input_partial_shape(i)
                self.check(not ps.rank_is_static or len(ps) == 0 or
                           (len(ps) == 1 and ps[0].compatible(1)),
                           "{} must be a scalar, got shape {}", what, ps)
        rows = Dimension()
        if boxes.rank_is_static and scores.rank_is_static:
            limit = self.input_constant(2) if n_in > 2 else np.array(0)
            per_class = boxes[1].max
            if limit is not None:
                per_class = min(per_class, max(int(np.asarray(limit).reshape(-1)[0]), 0))
            rows = Dimension(0, per_class * scores[0].max * scores[1].max)
        self.set_output_type(0, self.output_type, PartialShape([rows, 3]))
        self.set_output_type(1, et if not et.is_dynamic else f32, PartialShape([rows, 3]))
        self.set_output_type(2, self.output_type, PartialShape([1]))

    def evaluate(self, inputs):
        boxes, scores = np.asarray(inputs[0]), np.asarray(inputs[1])
        scalar = [float(np.asarray(v).reshape(-1)[0]) if v is not None else 0.0
                  for v in (list(inputs[2:6]) + [None] * (6 - len(inputs)))]
        limit = int(scalar[0])
        iou_threshold, score_threshold, sigma = scalar[1], scalar[2], scalar[3]
        corners = _corners(boxes.astype(np.float64), self.box_encoding)
        rows = []  # (batch, class, box, score)
        for b in range(scores.shape[0]):
            for c in range(scores.shape[1]):
                for box, score in _select(corners[b], scores[b, c].astype(np.float64), limit,
                                          iou_threshold, score_threshold, sigma):
                    rows.append((b, c, box, score))
        if self.sort_result_descending:
            rows.sort(key=lambda r: -r[3])  # stable: ties keep batch, class, selection order
        dt = self.output_type.dtype
        indices = np.array([r[:3] for r in rows], dtype=dt).reshape(-1, 3)
        selected = np.array([(r[0], r[1], r[3]) for r in rows],
                            dtype=scores.dtype).reshape(-1, 3)
        return [indices, selected, np.array([len(rows)], dtype=dt)]


def _corners(boxes: np.ndarray, encoding: str) -> np.ndarray:
    """``[..., 4]`` boxes as ``(ymin, xmin, ymax, xmax)``."""
    if encoding == "center":
        xc, yc, w, h = np.moveaxis(boxes, -1, 0)
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1)
    y1, x1, y2, x2 = np.moveaxis(boxes, -1, 0)
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2),
                     np.maximum(x1, x2)], axis=-1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    h = np.clip(np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]), 0, None)
    w = np.clip(np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]), 0, None)
    inter = h * w
    union = area + areas - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where((area > 0) & (areas > 0) & (union > 0), inter / union, 0.0)
    return iou


def _select(corners: np.ndarray, scores: np.ndarray, limit: int, iou_threshold: float,
            score_threshold: float, sigma: float) -> list[tuple[int, float]]:
    """``(box, score)`` of the boxes one class keeps, in selection order."""
    selected: list[tuple[int, float]] = []
    live = np.flatnonzero(scores >= score_threshold) if sigma == 0 else np.arange(len(scores))
    current = scores.copy()
    while len(selected) < limit and live.size:
        best = live[np.argmax(current[live])]  # argmax: the lowest index among equal scores
        score = current[best]
        if score < score_threshold:
            break
        selected.append((int(best), float(score)))
        live = live[live != best]
        if not live.size:
            break
        iou = _iou(corners[best], corners[live])
        if sigma == 0:
            live = live[iou <= iou_threshold]
        else:
            keep = iou <= iou_threshold
            current[live] = np.where(keep, current[live] * np.exp(-0.5 * iou * iou / sigma), 0.0)
            live = live[keep & (current[live] >= score_threshold)]
    return selected


def non_max_suppression(boxes: Any, scores: Any, max_output_boxes_per_class: Any = None,
                        iou_threshold: Any = None, score_threshold: Any = None,
                        soft_nms_sigma: Any = None, box_encoding: str = "corner",
                        sort_result_descending: bool = True, output_type: Any = "i64",
                        name: str | None = None) -> Node:
    """NonMaxSuppression-9 (OpenVINO's ``opset9.non_max_suppression``)."""
    args = [to_output(boxes), to_output(scores)]
    for i, v in enumerate((max_output_boxes_per_class, iou_threshold, score_threshold,
                           soft_nms_sigma)):
        if v is None:
            if any(w is not None for w in (iou_threshold, score_threshold, soft_nms_sigma)[i:]):
                v = np.int64(0) if i == 0 else np.float32(0)
            else:
                break
        args.append(to_output(v, i64 if i == 0 else None))
    return set_name(NonMaxSuppression(args, box_encoding=box_encoding,
                                      sort_result_descending=bool(sort_result_descending),
                                      output_type=Type.of(output_type)), name)


@onnx_rule("NonMaxSuppression", since=10)
def _import_nms(ctx):
    boxes, scores = ctx.inputs[0], ctx.inputs[1]
    limit = ctx.input(2) if ctx.input(2) is not None else to_output(np.int64(0))
    iou = ctx.input(3) if ctx.input(3) is not None else to_output(np.float32(0))
    # no score_threshold: every score counts, however low
    floor = to_output(np.array(-np.inf, dtype=scores.element_type.dtype or np.float32))
    score = ctx.input(4) if ctx.input(4) is not None else floor
    encoding = "center" if ctx.attr("center_point_box", 0) else "corner"
    node = NonMaxSuppression([boxes, scores, limit, iou, score], box_encoding=encoding,
                             sort_result_descending=False, output_type=i64)
    return node.output(0)


@onnx_export(NonMaxSuppression, opset=11)
def _export_nms(node, ectx):
    if node.sort_result_descending or node.get_input_size() > 5:
        export_error(node, "ONNX NonMaxSuppression has no sort across classes or Soft-NMS")
    if node.output(1).consumers() or node.output(2).consumers():
        export_error(node, "ONNX NonMaxSuppression gives selected_indices only")
    out = ectx.outputs(node)[0]
    indices = out if node.output_type is i64 else ectx.fresh("nms_indices")
    ectx.add_node("NonMaxSuppression", ectx.inputs(node), [indices],
                  center_point_box=int(node.box_encoding == "center"))
    if indices != out:
        ectx.add_node("Cast", [indices], [out], to=int(TensorProto.INT32))
