"""ROIAlign (OpenVINO opset9; ONNX RoiAlign 10, 16, 22): every region of interest pooled to
``pooled_h`` x ``pooled_w`` bins from bilinear samples of its batch item's feature map.

Inputs: data ``[N, C, H, W]``, rois ``[R, 4]`` (``x1, y1, x2, y2`` in input coordinates, times
``spatial_scale``), batch_indices ``[R]``. Each bin takes ``sampling_ratio`` x
``sampling_ratio`` samples (0: ``ceil(roi size / pooled size)`` per axis); ``avg`` averages
them (checked against OpenVINO). ONNX's ``max`` takes the largest *weighted corner term* of the
samples' bilinear sums (onnx's reference and onnxruntime); the import gives it as mode
``onnx_max``, a netpass mode OpenVINO does not read. OpenVINO's own ``max`` gives other values
(it does not match either reading on random data) and is refused.
``aligned_mode``: ``asymmetric`` (no shift; a region at least one pixel wide: ONNX's
``output_half_pixel``) or ``onnx_half_pixel`` (ONNX's ``half_pixel``: coordinates shifted by
half a pixel, no minimum size), a netpass mode: OpenVINO's ``half_pixel`` and
``half_pixel_for_nn`` give other values and are refused.
"""
from __future__ import annotations

from collections.abc import Sequence
from math import ceil
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from .base import set_name, to_output
from .registry import onnx_export, onnx_rule

__all__ = ["roi_align"]

# OpenVINO's asymmetric (checked against it), and ONNX's half_pixel (onnxruntime's; OpenVINO's
# half_pixel and half_pixel_for_nn compute otherwise and are refused)
ALIGNED_MODES = ("asymmetric", "onnx_half_pixel")


class ROIAlign(Node):
    type_name = "ROIAlign"
    version = "opset9"
    IR_VERSIONS = ("opset3", "opset9")  # v3: no aligned_mode (asymmetric, v9's default)
    ATTRS = {"pooled_h": 1, "pooled_w": 1, "sampling_ratio": 0, "spatial_scale": 1.0,
             "mode": "avg", "aligned_mode": "asymmetric"}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 3, "expects data, rois and batch_indices")
        self.check(self.mode in ("avg", "onnx_max"), "mode must be avg or onnx_max (ONNX's "
                   "max), got '{}' (OpenVINO's max is not implemented)", self.mode)
        self.check(self.aligned_mode in ALIGNED_MODES, "aligned_mode must be one of {}, got "
                   "'{}'", ALIGNED_MODES, self.aligned_mode)
        self.check(self.pooled_h > 0 and self.pooled_w > 0, "pooled sizes must be positive")
        data, rois = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        self.check(not data.rank_is_static or len(data) == 4, "data must be [N, C, H, W], "
                   "got {}", data)
        self.check(not rois.rank_is_static or (len(rois) == 2 and rois[1].compatible(4)),
                   "rois must be [R, 4], got {}", rois)
        r = rois[0] if rois.rank_is_static else Dimension()
        c = data[1] if data.rank_is_static else Dimension()
        self.set_output_type(0, self.get_input_element_type(0),
                             PartialShape([r, c, self.pooled_h, self.pooled_w]))

    def _axis(self, start: float, end: float, bins: int, size: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """(low index, high index, low weight, high weight) per sample along one axis (zero
        weights outside the map), samples bin by bin, and the samples per bin."""
        length = end - start
        if self.aligned_mode == "asymmetric":
            length = max(length, 1.0)
        step = length / bins
        grid = self.sampling_ratio if self.sampling_ratio > 0 else int(ceil(length / bins))
        pos = (start + np.arange(bins)[:, None] * step +
               (np.arange(grid)[None, :] + 0.5) * step / max(grid, 1)).reshape(-1)
        outside = (pos < -1.0) | (pos > size)
        pos = np.maximum(pos, 0.0)
        low = pos.astype(np.int64)
        last = low >= size - 1
        low = np.where(last, size - 1, low)
        high = np.where(last, size - 1, low + 1)
        pos = np.where(last, low, pos)
        frac = pos - low
        w_low = np.where(outside, 0.0, 1.0 - frac)
        w_high = np.where(outside, 0.0, frac)
        return low, high, w_low, w_high, grid

    def evaluate(self, inputs: Sequence[Any]) -> list[Any]:
        data = np.asarray(inputs[0])
        rois = np.asarray(inputs[1], dtype=np.float64)
        batch = np.asarray(inputs[2]).astype(np.int64).reshape(-1)
        _, c, h, w = data.shape
        ph, pw = self.pooled_h, self.pooled_w
        out = np.zeros((len(rois), c, ph, pw), dtype=np.float64)
        shift = 0.0 if self.aligned_mode == "asymmetric" else 0.5
        for r, (x1, y1, x2, y2) in enumerate(rois * self.spatial_scale - shift):
            yl, yh, wyl, wyh, gy = self._axis(y1, y2, ph, h)
            xl, xh, wxl, wxh, gx = self._axis(x1, x2, pw, w)
            if gy * gx == 0:
                continue
            fmap = data[batch[r]].astype(np.float64)
            terms = [fmap[:, ys][:, :, xs] * (wy[:, None] * wx[None, :])
                     for ys, wy in ((yl, wyl), (yh, wyh)) for xs, wx in ((xl, wxl), (xh, wxh))]
            if self.mode == "avg":  # samples outside the map count as zeros
                out[r] = sum(terms).reshape(c, ph, gy, pw, gx).mean(axis=(2, 4))
            else:
                out[r] = np.max(terms, axis=0).reshape(c, ph, gy, pw, gx).max(axis=(2, 4))
        return [out.astype(data.dtype)]


def roi_align(data: Any, rois: Any, batch_indices: Any, pooled_h: int, pooled_w: int,
              sampling_ratio: int, spatial_scale: float, mode: str,
              aligned_mode: str = "asymmetric", name: str | None = None) -> Node:
    """ROIAlign-9 (OpenVINO's ``opset9.roi_align``): each region of ``rois`` pooled to
    ``pooled_h`` x ``pooled_w`` bins of bilinear samples (``avg``, or ONNX's ``onnx_max``)."""
    return set_name(ROIAlign([to_output(data), to_output(rois), to_output(batch_indices)],
                             pooled_h=int(pooled_h), pooled_w=int(pooled_w),
                             sampling_ratio=int(sampling_ratio),
                             spatial_scale=float(spatial_scale), mode=mode,
                             aligned_mode=aligned_mode), name)


def _import(ctx, transform: str):
    return ROIAlign(ctx.inputs[:3], pooled_h=ctx.attr("output_height", 1),
                    pooled_w=ctx.attr("output_width", 1),
                    sampling_ratio=ctx.attr("sampling_ratio", 0),
                    spatial_scale=ctx.attr("spatial_scale", 1.0),
                    mode="onnx_max" if ctx.attr("mode", "avg") == "max" else "avg",
                    aligned_mode="onnx_half_pixel" if transform == "half_pixel" else "asymmetric")


@onnx_rule("RoiAlign", since=10)
def _import_roi_align_10(ctx):
    return _import(ctx, "output_half_pixel")


@onnx_rule("RoiAlign", since=16)
def _import_roi_align(ctx):
    transform = ctx.attr("coordinate_transformation_mode", "half_pixel")
    if transform not in ("half_pixel", "output_half_pixel"):
        ctx.error(f"coordinate_transformation_mode {transform!r} is unknown")
    return _import(ctx, transform)


@onnx_export(ROIAlign, opset=16)
def _export_roi_align(node, ectx):
    transform = "half_pixel" if node.aligned_mode == "onnx_half_pixel" else "output_half_pixel"
    ectx.add_node("RoiAlign", ectx.inputs(node), ectx.outputs(node),
                  output_height=int(node.pooled_h), output_width=int(node.pooled_w),
                  sampling_ratio=int(node.sampling_ratio),
                  spatial_scale=float(node.spatial_scale),
                  mode="max" if node.mode == "onnx_max" else "avg",
                  coordinate_transformation_mode=transform)
