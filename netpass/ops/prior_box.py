"""Anchor generation of SSD-style detectors (OpenVINO ops ONNX lacks): PriorBox (opset8) and
PriorBoxClustered (opset1), boxes centred on every cell of a feature map, as corner
coordinates normalised by the image size, with their variances."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import f32
from .base import set_name
from .shape_inputs import i64_operand, shape_values

__all__ = ["prior_box_clustered", "prior_box"]


def _sizes(node: Node, i: int, what: str) -> list | None:
    """The two values of the 1-D size input ``i`` (ints where known), checked."""
    ps = node.get_input_partial_shape(i)
    et = node.get_input_element_type(i)
    node.check(et.is_dynamic or et.is_integral, "{} must be integer, got {}", what, et)
    node.check(not ps.rank_is_static or (len(ps) == 1 and ps[0].compatible(2)),
               "{} must hold 2 values (height, width), got shape {}", what, ps)
    return shape_values(node, i)


class PriorBoxClustered(Node):
    """PriorBoxClustered-1: inputs ``output_size`` ``[H, W]`` (the feature map) and
    ``image_size`` ``[IH, IW]``; output ``[2, 4 * H * W * P]`` (f32) for ``P = len(width)``
    boxes per cell: row 0 the corners ``(xmin, ymin, xmax, ymax)`` of box ``(width[p],
    height[p])`` centred at ``((w + offset) * step_w, (h + offset) * step_h)`` divided by the
    image size (clipped to [0, 1] with ``clip``), row 1 the variances (one value for all four,
    or four). A step of 0 (``step_w``/``step_h``, else ``step``) is the image size over the
    map size."""

    type_name = "PriorBoxClustered"
    version = "opset1"
    ATTRS = {"width": [1.0], "height": [1.0], "clip": True, "step": 0.0, "step_w": 0.0,
             "step_h": 0.0, "offset": 0.5, "variance": []}
    SHAPE_INFER_INPUTS = (0,)

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (output_size, image_size)")
        self.check(len(self.width) == len(self.height) and len(self.width) > 0, "width {} and "
                   "height {} must be non-empty and equally long", self.width, self.height)
        self.check(len(self.variance) in (0, 1, 4), "variance must have 0, 1 or 4 values, got "
                   "{}", self.variance)
        sizes = _sizes(self, 0, "output_size")
        _sizes(self, 1, "image_size")
        length = Dimension()
        if sizes is not None and all(isinstance(v, int) for v in sizes):
            length = Dimension(4 * sizes[0] * sizes[1] * len(self.width))
        self.set_output_type(0, f32, PartialShape([2, length]))

    def evaluate(self, inputs):
        layer_h, layer_w = (int(v) for v in np.asarray(inputs[0]).reshape(-1))
        img_h, img_w = (float(v) for v in np.asarray(inputs[1]).reshape(-1))
        step_w = float(self.step_w) or float(self.step) or img_w / layer_w
        step_h = float(self.step_h) or float(self.step) or img_h / layer_h
        cy, cx = np.meshgrid((np.arange(layer_h) + float(self.offset)) * step_h,
                             (np.arange(layer_w) + float(self.offset)) * step_w, indexing="ij")
        half_w = np.asarray(self.width, np.float64) / 2
        half_h = np.asarray(self.height, np.float64) / 2
        boxes = np.stack([(cx[..., None] - half_w) / img_w, (cy[..., None] - half_h) / img_h,
                          (cx[..., None] + half_w) / img_w, (cy[..., None] + half_h) / img_h],
                         axis=-1)
        if self.clip:
            boxes = np.clip(boxes, 0, 1)
        variance = list(self.variance) or [0.1]
        variances = np.broadcast_to(np.asarray(variance * (4 // len(variance)), np.float64),
                                    boxes.shape)
        return [np.stack([boxes.reshape(-1), variances.reshape(-1)]).astype(np.float32)]


def prior_box_clustered(output_size: Any, image_size: Any, attrs: dict,
                        name: str | None = None) -> Node:
    """PriorBoxClustered-1: clustered prior boxes for a feature map of ``output_size`` over
    an image of ``image_size``; ``attrs`` as OpenVINO's (width, height, clip, step, step_w,
    step_h, offset, variance)."""
    known = {k: v for k, v in attrs.items() if k in PriorBoxClustered.ATTRS}
    for key in ("width", "height", "variance"):
        if key in known:
            known[key] = [float(v) for v in known[key]]
    return set_name(PriorBoxClustered([i64_operand(output_size), i64_operand(image_size)],
                                      **known), name)


def _aspect_ratios(ratios: list, flip: bool) -> list[float]:
    """1, then each ratio not seen yet (and its inverse with ``flip``)."""
    out = [1.0]
    for r in ratios:
        if all(abs(r - seen) >= 1e-6 for seen in out):
            out.append(float(r))
            if flip:
                out.append(1.0 / r)
    return out


class PriorBox(Node):
    """PriorBox-8 (SSD's prior boxes): inputs ``output_size`` ``[H, W]`` and ``image_size``
    ``[IH, IW]``; output ``[2, 4 * H * W * P]`` (f32): row 0 each box's corners divided by
    the image size, row 1 the variances. Per cell, in OpenVINO's order: the ``fixed_size``
    boxes (``density`` x ``density`` shifted copies, ``fixed_ratio`` or the aspect ratios),
    then for each ``min_size`` the square box, the ``sqrt(min * max)`` box and the aspect-ratio
    boxes (those two swapped without ``min_max_aspect_ratios_order``; the ratio boxes after the
    last min size only, without ``scale_all_sizes``, whose sizes are then fractions of the
    image height). Cell centres are ``(w + 0.5) * IW / W`` for a ``step`` of 0, else
    ``(w + offset) * step``; ``clip`` clamps every coordinate to [0, 1]."""

    type_name = "PriorBox"
    version = "opset8"
    IR_VERSIONS = ("opset1", "opset8")  # v1: no min_max_aspect_ratios_order (true, v8's default)
    ATTRS = {"min_size": [], "max_size": [], "aspect_ratio": [], "density": [],
             "fixed_ratio": [], "fixed_size": [], "clip": False, "flip": False, "step": 0.0,
             "offset": 0.0, "variance": [], "scale_all_sizes": True,
             "min_max_aspect_ratios_order": True}
    SHAPE_INFER_INPUTS = (0,)

    def _cell(self, image_h: float) -> list[tuple[float, float, float, float, bool]]:
        """One cell's boxes: (centre shift x, shift y, half width, half height, clipped)."""
        ratios = _aspect_ratios(list(self.aspect_ratio), bool(self.flip))
        boxes: list[tuple[float, float, float, float, bool]] = []
        for s, size in enumerate(self.fixed_size):
            whole = int(size)
            density = int(self.density[s]) if s < len(self.density) else 0
            shift = int(size / density) if density else 0
            grid = [(-(whole // 2) + shift / 2 + c * shift, -(whole // 2) + shift / 2 + r * shift)
                    for r in range(density) for c in range(density)]
            if self.fixed_ratio:
                shapes = [(size * 0.5 * a ** 0.5, size * 0.5 / a ** 0.5) for a in self.fixed_ratio]
            else:
                shapes = [(whole * 0.5, whole * 0.5)] + [
                    (size * 0.5 * a ** 0.5, size * 0.5 / a ** 0.5)
                    for a in ratios if abs(a - 1) >= 1e-6]
            boxes += [(dx, dy, hw, hh, True) for hw, hh in shapes for dx, dy in grid]
        min_sizes = [float(m) if self.scale_all_sizes else float(m) * image_h
                     for m in self.min_size]
        for i, m in enumerate(min_sizes):
            square = [(0.0, 0.0, m / 2, m / 2, False)]
            big = [(0.0, 0.0, (m * self.max_size[i]) ** 0.5 / 2,
                    (m * self.max_size[i]) ** 0.5 / 2, False)] if i < len(self.max_size) else []
            ratio_boxes = []
            if self.scale_all_sizes or i == len(min_sizes) - 1:
                base = m if self.scale_all_sizes else min_sizes[0]
                ratio_boxes = [(0.0, 0.0, base / 2 * a ** 0.5, base / 2 / a ** 0.5, False)
                               for a in ratios if abs(a - 1) >= 1e-6]
            order = big + ratio_boxes if self.min_max_aspect_ratios_order else ratio_boxes + big
            boxes += square + order
        return boxes

    def _openvino_count(self) -> int:
        """The boxes per cell OpenVINO sizes its output for (its ``number_of_priors``)."""
        ratios = len(_aspect_ratios(list(self.aspect_ratio), bool(self.flip)))
        if self.fixed_size:
            count = ratios * len(self.fixed_size)
        elif self.scale_all_sizes:
            count = ratios * len(self.min_size) + len(self.max_size)
        else:
            count = ratios + len(self.min_size) - 1
        per_density = len(self.fixed_ratio) if self.fixed_ratio else ratios
        return count + sum(per_density * (int(d) ** 2 - 1) for d in self.density)

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (output_size, image_size)")
        self.check(len(self.variance) in (0, 1, 4), "variance must have 0, 1 or 4 values, got "
                   "{}", self.variance)
        boxes, sized = len(self._cell(1.0)), self._openvino_count()
        self.check(boxes == sized, "these attributes generate {} boxes per cell where OpenVINO "
                   "sizes its output for {} (fixed_size with several fixed_ratio values or "
                   "with min_size, or max_size without scale_all_sizes): not supported",
                   boxes, sized)
        self.check(len(self.density) >= len(self.fixed_size) or not self.fixed_size,
                   "density {} needs one value per fixed_size {}", self.density,
                   self.fixed_size)
        self.check(all(float(v) > 0 for v in list(self.min_size) + list(self.aspect_ratio)),
                   "min_size {} and aspect_ratio {} must be positive", self.min_size,
                   self.aspect_ratio)
        sizes = _sizes(self, 0, "output_size")
        _sizes(self, 1, "image_size")
        length = Dimension()
        if sizes is not None and all(isinstance(v, int) for v in sizes):
            length = Dimension(4 * sizes[0] * sizes[1] * boxes)
        self.set_output_type(0, f32, PartialShape([2, length]))

    def evaluate(self, inputs):
        layer_h, layer_w = (int(v) for v in np.asarray(inputs[0]).reshape(-1))
        img_h, img_w = (float(v) for v in np.asarray(inputs[1]).reshape(-1))
        step = float(self.step)
        if not self.scale_all_sizes:  # MXNet's sizes and step: fractions of the image height
            step = img_h / layer_h if step == -1 else step * img_h
        if step == 0:
            cy, cx = np.meshgrid((np.arange(layer_h) + 0.5) * (img_h / layer_h),
                                 (np.arange(layer_w) + 0.5) * (img_w / layer_w), indexing="ij")
        else:
            cy, cx = np.meshgrid((np.arange(layer_h) + float(self.offset)) * step,
                                 (np.arange(layer_w) + float(self.offset)) * step,
                                 indexing="ij")
        cell = np.asarray(self._cell(img_h), np.float64).reshape(-1, 5)
        dx, dy, hw, hh, clipped = (cell[:, k] for k in range(5))
        x, y = cx[..., None] + dx, cy[..., None] + dy
        boxes = np.stack([(x - hw) / img_w, (y - hh) / img_h, (x + hw) / img_w,
                          (y + hh) / img_h], axis=-1)
        if self.clip:
            boxes = np.clip(boxes, 0, 1)
        else:
            boxes = np.where(clipped.astype(bool)[:, None], np.clip(boxes, 0, 1), boxes)
        variance = list(self.variance) or [0.1]
        variances = np.broadcast_to(np.asarray(variance * (4 // len(variance)), np.float64),
                                    boxes.shape)
        return [np.stack([boxes.reshape(-1), variances.reshape(-1)]).astype(np.float32)]


def prior_box(layer_shape: Any, image_shape: Any, attrs: dict, name: str | None = None) -> Node:
    """PriorBox-8: SSD prior boxes for a feature map of ``layer_shape`` over an image of
    ``image_shape``; ``attrs`` as OpenVINO's (min_size, max_size, aspect_ratio, flip, clip,
    step, offset, variance, scale_all_sizes, fixed_ratio, fixed_size, density,
    min_max_aspect_ratios_order)."""
    known = {k: v for k, v in attrs.items() if k in PriorBox.ATTRS}
    for key in ("min_size", "max_size", "aspect_ratio", "density", "fixed_ratio", "fixed_size",
                "variance"):
        if key in known:
            known[key] = [float(v) for v in known[key]]
    return set_name(PriorBox([i64_operand(layer_shape), i64_operand(image_shape)], **known),
                    name)
