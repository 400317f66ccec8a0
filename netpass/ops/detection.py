"""Detection-network ops of OpenVINO that ONNX lacks: ReorgYolo (opset2, YOLOv2's passthrough
layer), RegionYolo (opset1, the YOLO v2/v3 region layer), ROIPooling (opset2, Fast R-CNN) and
PSROIPooling (opset1, R-FCN)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from .base import set_name, to_output

__all__ = ["reorg_yolo", "roi_pooling", "region_yolo", "psroi_pooling"]


class ReorgYolo(Node):
    """ReorgYolo-2: ``[N, C, H, W] -> [N, C * s * s, H / s, W / s]`` (``stride`` ``s``) in
    Darknet's element order: output element ``(b, k, j, i)``, counted flat over the input's
    shape, is input element ``(b, k % C', (j * s + o // s), (i * s + o % s))`` of the input
    seen as ``[N, C', H * s, W * s]``, where ``C' = C / s^2`` and ``o = k // C'``."""

    type_name = "ReorgYolo"
    version = "opset2"
    ATTRS = {"stride": [1]}

    def _stride(self) -> int:
        values = self.stride if isinstance(self.stride, (list, tuple)) else [self.stride]
        self.check(len(values) >= 1 and all(int(v) == int(values[0]) for v in values)
                   and int(values[0]) >= 1, "stride must be one positive value, got {}",
                   self.stride)
        return int(values[0])

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        s = self._stride()
        data = self.get_input_partial_shape(0)
        et = self.get_input_element_type(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape.dynamic(4))
            return
        self.check(len(data) == 4, "data must be [N, C, H, W], got {}", data)
        n, c, h, w = data
        self.check(not c.is_static or c.min % (s * s) == 0, "channels {} are not a multiple of "
                   "stride^2 = {}", c, s * s)
        for d, what in ((h, "height"), (w, "width")):
            self.check(not d.is_static or d.min % s == 0, "{} {} is not a multiple of stride {}",
                       what, d, s)
        spatial = [Dimension(d.min // s) if d.is_static else Dimension() for d in (h, w)]
        self.set_output_type(0, et, PartialShape([n, c * (s * s)] + spatial))

    def evaluate(self, inputs):
        x = inputs[0]
        s = self._stride()
        n, c, h, w = x.shape
        self.check(c % (s * s) == 0 and h % s == 0 and w % s == 0, "data {} does not divide "
                   "by stride {}", list(x.shape), s)
        oc = c // (s * s)
        b, k, j, i = np.indices(x.shape, sparse=True)
        offset = k // oc
        source = (i * s + offset % s) + w * s * ((j * s + offset // s) + h * s * (k % oc + oc * b))
        return [x.reshape(-1)[source].reshape(n, c * s * s, h // s, w // s)]


def reorg_yolo(input: Any, stride: Any, name: str | None = None) -> Node:
    """ReorgYolo-2: the passthrough reorganisation of ``input`` ``[N, C, H, W]`` by ``stride``
    (a list of one value, as OpenVINO's)."""
    values = [int(v) for v in stride] if isinstance(stride, (list, tuple)) else [int(stride)]
    return set_name(ReorgYolo([to_output(input)], stride=values), name)


def _round_half_away(v: float) -> int:
    return int(np.sign(v) * np.floor(abs(v) + 0.5))


class ROIPooling(Node):
    """ROIPooling-2: inputs ``feature`` ``[N, C, H, W]`` and ``rois`` ``[R, 5]`` (batch index,
    x1, y1, x2, y2); output ``[R, C, pooled_h, pooled_w]``. ``method`` "max" (Fast R-CNN):
    box corners scaled by ``spatial_scale`` and rounded, each bin the max over its cells (0
    for an empty bin); "bilinear": box corners in [0, 1] of the feature map, each bin the
    bilinear sample at its position."""

    type_name = "ROIPooling"
    version = "opset2"
    ATTRS = {"pooled_h": 1, "pooled_w": 1, "spatial_scale": 1.0, "method": "max"}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (feature, rois)")
        self.check(self.method in ("max", "bilinear"), "method must be max or bilinear, got {}",
                   self.method)
        self.check(int(self.pooled_h) >= 1 and int(self.pooled_w) >= 1, "pooled_h and "
                   "pooled_w must be >= 1, got {} and {}", self.pooled_h, self.pooled_w)
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "feature must be a float tensor, got {}", et)
        feature, rois = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        self.check(not feature.rank_is_static or len(feature) == 4, "feature must be [N, C, H, "
                   "W], got {}", feature)
        self.check(not rois.rank_is_static or (len(rois) == 2 and rois[1].compatible(5)),
                   "rois must be [R, 5], got {}", rois)
        r = rois[0] if rois.rank_is_static else Dimension()
        c = feature[1] if feature.rank_is_static else Dimension()
        self.set_output_type(0, et, PartialShape([r, c, int(self.pooled_h),
                                                  int(self.pooled_w)]))

    def evaluate(self, inputs):
        x, rois = np.asarray(inputs[0]), np.asarray(inputs[1])
        ph, pw = int(self.pooled_h), int(self.pooled_w)
        out = np.zeros((rois.shape[0], x.shape[1], ph, pw), x.dtype)
        for r, roi in enumerate(rois.astype(np.float64)):
            b = int(roi[0])
            self.check(0 <= b < x.shape[0], "roi {} names batch {} of {}", r, b, x.shape[0])
            image = x[b].astype(np.float64)
            pool = self._max if self.method == "max" else self._bilinear
            out[r] = pool(image, roi[1:], ph, pw)
        return [out]

    def _max(self, image: np.ndarray, box: np.ndarray, ph: int, pw: int) -> np.ndarray:
        _, h, w = image.shape
        x1, y1, x2, y2 = (_round_half_away(v * float(self.spatial_scale)) for v in box)
        bin_h = max(y2 - y1 + 1, 1) / ph
        bin_w = max(x2 - x1 + 1, 1) / pw
        out = np.zeros((image.shape[0], ph, pw))
        for i in range(ph):
            top = min(max(int(np.floor(i * bin_h)) + y1, 0), h)
            bottom = min(max(int(np.ceil((i + 1) * bin_h)) + y1, 0), h)
            for j in range(pw):
                left = min(max(int(np.floor(j * bin_w)) + x1, 0), w)
                right = min(max(int(np.ceil((j + 1) * bin_w)) + x1, 0), w)
                if bottom > top and right > left:
                    out[:, i, j] = image[:, top:bottom, left:right].max(axis=(1, 2))
        return out

    @staticmethod
    def _bilinear(image: np.ndarray, box: np.ndarray, ph: int, pw: int) -> np.ndarray:
        _, h, w = image.shape
        x1, y1, x2, y2 = box
        height_scale = (y2 - y1) * (h - 1) / (ph - 1) if ph > 1 else 0.0
        width_scale = (x2 - x1) * (w - 1) / (pw - 1) if pw > 1 else 0.0
        out = np.zeros((image.shape[0], ph, pw))
        for i in range(ph):
            y = y1 * (h - 1) + i * height_scale if ph > 1 else 0.5 * (y1 + y2) * (h - 1)
            if y < 0 or y > h - 1:
                continue
            for j in range(pw):
                xx = x1 * (w - 1) + j * width_scale if pw > 1 else 0.5 * (x1 + x2) * (w - 1)
                if xx < 0 or xx > w - 1:
                    continue
                top, left = int(np.floor(y)), int(np.floor(xx))
                bottom, right = min(int(np.ceil(y)), h - 1), min(int(np.ceil(xx)), w - 1)
                dy, dx = y - top, xx - left
                upper = image[:, top, left] + (image[:, top, right] - image[:, top, left]) * dx
                lower = image[:, bottom, left] + (image[:, bottom, right] -
                                                  image[:, bottom, left]) * dx
                out[:, i, j] = upper + (lower - upper) * dy
        return out


def roi_pooling(input: Any, coords: Any, output_roi: Any = None, output_size: Any = None,
                spatial_scale: float = 1.0, method: str = "max",
                name: str | None = None) -> Node:
    """ROIPooling-2: ``input`` ``[N, C, H, W]`` pooled over each box of ``coords`` ``[R, 5]``
    into ``output_roi`` ``[pooled_h, pooled_w]`` bins (``output_size``: OpenVINO's older
    name); ``method`` max or bilinear."""
    size = output_roi if output_roi is not None else output_size
    ph, pw = (int(v) for v in size)
    return set_name(ROIPooling([to_output(input), to_output(coords)], pooled_h=ph, pooled_w=pw,
                               spatial_scale=float(spatial_scale), method=method), name)


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


class RegionYolo(Node):
    """RegionYolo-1: the YOLO v2/v3 region layer over ``[N, C, H, W]``, ``C`` holding for
    each of the regions (``num`` with ``do_softmax``, else ``len(mask)``) the channels ``x, y,
    w, h`` (``coords``), objectness and ``classes`` scores. ``x``, ``y`` and objectness go
    through a sigmoid; class scores through a softmax over the classes (``do_softmax``) or a
    sigmoid. With ``do_softmax`` the output is flattened from ``axis`` to ``end_axis``."""

    type_name = "RegionYolo"
    version = "opset1"
    ATTRS = {"coords": 4, "classes": 1, "num": 1, "do_softmax": True, "mask": [],
             "axis": 1, "end_axis": 3, "anchors": []}

    def _regions(self) -> int:
        return int(self.num) if self.do_softmax else len(self.mask)

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "data must be a float tensor, got {}", et)
        self.check(min(int(self.coords), int(self.classes), self._regions()) >= 0 and
                   self._regions() > 0, "coords {}, classes {} and the region count {} must "
                   "be positive", self.coords, self.classes, self._regions())
        data = self.get_input_partial_shape(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        self.check(len(data) == 4, "data must be [N, C, H, W], got {}", data)
        if not self.do_softmax:
            self.set_output_type(0, et, data)
            return
        rank = len(data)
        axis, end = int(self.axis) % rank, int(self.end_axis) % rank
        self.check(axis <= end, "axis {} must not come after end_axis {}", self.axis,
                   self.end_axis)
        flat = Dimension(1)
        for d in list(data)[axis:end + 1]:
            flat = flat * d
        self.set_output_type(0, et, PartialShape(list(data)[:axis] + [flat] +
                                                 list(data)[end + 1:]))

    def evaluate(self, inputs):
        x = inputs[0]
        n, c, h, w = x.shape
        coords, classes, regions = int(self.coords), int(self.classes), self._regions()
        block = coords + 1 + classes
        self.check(c >= regions * block, "data has {} channels, fewer than {} regions of {}",
                   c, regions, block)
        y = x.astype(np.float64)
        for r in range(regions):
            base = r * block
            y[:, base:base + 2] = _sigmoid(y[:, base:base + 2])
            y[:, base + coords] = _sigmoid(y[:, base + coords])
            scores = y[:, base + coords + 1:base + block]
            if not classes:
                continue
            if self.do_softmax:
                e = np.exp(scores - scores.max(axis=1, keepdims=True))
                y[:, base + coords + 1:base + block] = e / e.sum(axis=1, keepdims=True)
            else:
                y[:, base + coords + 1:base + block] = _sigmoid(scores)
        out = y.astype(x.dtype)
        if not self.do_softmax:
            return [out]
        axis, end = int(self.axis) % out.ndim, int(self.end_axis) % out.ndim
        return [out.reshape(out.shape[:axis] + (-1,) + out.shape[end + 1:])]


def region_yolo(input: Any, coords: int, classes: int, num: int, do_softmax: bool, mask: Any,
                axis: int, end_axis: int, anchors: Any = None,
                name: str | None = None) -> Node:
    """RegionYolo-1: sigmoids (and a class softmax with ``do_softmax``) over the YOLO region
    channels of ``input`` ``[N, C, H, W]``."""
    return set_name(RegionYolo([to_output(input)], coords=int(coords), classes=int(classes),
                               num=int(num), do_softmax=bool(do_softmax),
                               mask=[int(m) for m in mask], axis=int(axis),
                               end_axis=int(end_axis),
                               anchors=[float(a) for a in (anchors or [])]), name)


class PSROIPooling(Node):
    """PSROIPooling-1 (R-FCN's position-sensitive pooling): inputs ``feature`` ``[N, C, H, W]``
    and ``rois`` ``[R, 5]``; output ``[R, output_dim, group_size, group_size]``. "average":
    box corners rounded, scaled by ``spatial_scale`` (the far corner one cell further), and
    bin ``(i, j)`` of output channel ``c`` is the mean of its cells in input channel ``(c *
    group_size + i) * group_size + j``. "bilinear": each of the ``spatial_bins_y`` x
    ``spatial_bins_x`` sub-boxes samples input channel ``sub_box * output_dim + c`` bilinearly
    at the bin's position; the bin is their mean."""

    type_name = "PSROIPooling"
    version = "opset1"
    ATTRS = {"output_dim": 1, "group_size": 1, "spatial_scale": 1.0, "spatial_bins_x": 1,
             "spatial_bins_y": 1, "mode": "average"}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (feature, rois)")
        self.check(self.mode in ("average", "bilinear"), "mode must be average or bilinear, "
                   "got {}", self.mode)
        dim, group = int(self.output_dim), int(self.group_size)
        bins = int(self.spatial_bins_x) * int(self.spatial_bins_y)
        self.check(dim >= 1 and group >= 1 and min(int(self.spatial_bins_x),
                                                   int(self.spatial_bins_y)) >= 1,
                   "output_dim, group_size and the spatial bins must be >= 1")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "feature must be a float tensor, got {}", et)
        feature, rois = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        self.check(not feature.rank_is_static or len(feature) == 4, "feature must be [N, C, H, "
                   "W], got {}", feature)
        if feature.rank_is_static and feature[1].is_static:
            need = dim * (group * group if self.mode == "average" else bins)
            self.check(feature[1].min == need, "feature has {} channels where output_dim {} "
                       "needs {}", feature[1], dim, need)
        self.check(not rois.rank_is_static or (len(rois) == 2 and rois[1].compatible(5)),
                   "rois must be [R, 5], got {}", rois)
        r = rois[0] if rois.rank_is_static else Dimension()
        self.set_output_type(0, et, PartialShape([r, dim, group, group]))

    def evaluate(self, inputs):
        x, rois = np.asarray(inputs[0]), np.asarray(inputs[1], np.float64)
        dim, group = int(self.output_dim), int(self.group_size)
        out = np.zeros((rois.shape[0], dim, group, group), np.float64)
        for r, roi in enumerate(rois):
            b = int(roi[0])
            self.check(0 <= b < x.shape[0], "roi {} names batch {} of {}", r, b, x.shape[0])
            image = x[b].astype(np.float64)
            pool = self._average if self.mode == "average" else self._bilinear
            out[r] = pool(image, roi[1:], dim, group)
        return [out.astype(x.dtype)]

    def _average(self, image: np.ndarray, box: np.ndarray, dim: int, group: int) -> np.ndarray:
        _, h, w = image.shape
        scale = float(self.spatial_scale)
        x1, y1 = (_round_half_away(v) * scale for v in box[:2])
        x2, y2 = ((_round_half_away(v) + 1) * scale for v in box[2:])
        bin_w, bin_h = (x2 - x1) / group, (y2 - y1) / group
        out = np.zeros((dim, group, group))
        channels = image.reshape(dim, group, group, h, w)
        with np.errstate(all="ignore"):
            for i in range(group):
                top = min(int(np.floor(y1 + i * bin_h)), h - 1)
                bottom = min(int(np.ceil(y1 + (i + 1) * bin_h)), h)
                for j in range(group):
                    left = min(int(np.floor(x1 + j * bin_w)), w - 1)
                    right = min(int(np.ceil(x1 + (j + 1) * bin_w)), w)
                    cells = channels[:, i, j, top:bottom, left:right]
                    out[:, i, j] = cells.sum(axis=(1, 2)) / ((bottom - top) * (right - left))
        return out

    def _bilinear(self, image: np.ndarray, box: np.ndarray, dim: int, group: int
                  ) -> np.ndarray:
        _, h, w = image.shape
        bins_x, bins_y = int(self.spatial_bins_x), int(self.spatial_bins_y)
        x1, y1, x2, y2 = (v * float(self.spatial_scale) for v in box)
        bin_w, bin_h = (x2 - x1) / bins_x, (y2 - y1) / bins_y
        width_scale = bin_w * (w - 1) / (group - 1) if group > 1 else 0.0
        height_scale = bin_h * (h - 1) / (group - 1) if group > 1 else 0.0
        channels = image.reshape(bins_y, bins_x, dim, h, w)
        out = np.zeros((dim, group, group))
        for i in range(group):
            for j in range(group):
                for by in range(bins_y):
                    for bx in range(bins_x):
                        start_x, start_y = x1 + bx * bin_w, y1 + by * bin_h
                        px = j * width_scale + start_x * (w - 1) if group > 1 else \
                            (2 * start_x + bin_w) * (w - 1) / 2
                        py = i * height_scale + start_y * (h - 1) if group > 1 else \
                            (2 * start_y + bin_h) * (h - 1) / 2
                        if px >= w or py >= h:
                            continue
                        left, top = int(np.floor(px)), int(np.floor(py))
                        right, bottom = min(int(np.ceil(px)), w - 1), min(int(np.ceil(py)), h - 1)
                        plane = channels[by, bx]
                        upper = plane[:, top, left] + (plane[:, top, right] -
                                                       plane[:, top, left]) * (px - left)
                        lower = plane[:, bottom, left] + (plane[:, bottom, right] -
                                                          plane[:, bottom, left]) * (px - left)
                        out[:, i, j] += upper + (lower - upper) * (py - top)
        return out / (bins_x * bins_y)


def psroi_pooling(input: Any, coords: Any, output_dim: int, group_size: int,
                  spatial_scale: float, spatial_bins_x: int, spatial_bins_y: int, mode: str,
                  name: str | None = None) -> Node:
    """PSROIPooling-1: position-sensitive pooling of ``input`` over each box of ``coords``
    into ``[output_dim, group_size, group_size]``; ``mode`` average or bilinear."""
    return set_name(PSROIPooling([to_output(input), to_output(coords)],
                                 output_dim=int(output_dim), group_size=int(group_size),
                                 spatial_scale=float(spatial_scale),
                                 spatial_bins_x=int(spatial_bins_x),
                                 spatial_bins_y=int(spatial_bins_y), mode=mode), name)
