"""Resize (ONNX 11-19) kept whole, for the variants Interpolate-11 cannot state whose scales,
sizes or roi are only known at run time: cubic ``exclude_outside``, ``antialias`` when
downsampling, ``half_pixel_symmetric``, ``tf_crop_and_resize``, ``keep_aspect_ratio_policy``
and align_corners over a fractional ``scale * size``. The import turns such a node into one
MatMul per axis when everything is constant (:mod:`.op`); this op computes the same taps
(:func:`.resampling.axis_taps`) from the values each inference brings. Its output sizes
depend on those values: the runtime computes it on the host.
"""
from __future__ import annotations

from collections.abc import Sequence
from math import floor
from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node
from ...core.shape import PartialShape
from ..base import NETPASS_OPSET
from .resampling import SCALE_EPS, apply_taps, axis_taps, scaled_length

_MODES = {"nearest": "nearest", "linear": "linear_onnx", "cubic": "cubic"}


class Resize(Node):
    """ONNX Resize on inputs ``[data, scales or sizes, roi?]`` (``shape_calculation_mode``
    says which); attributes as ONNX's (``axes`` None: every axis)."""

    type_name = "Resize"
    version = NETPASS_OPSET
    ATTRS = {"mode": "nearest", "shape_calculation_mode": "scales",
             "coordinate_transformation_mode": "half_pixel",
             "nearest_mode": "round_prefer_floor", "cube_coeff": -0.75,
             "exclude_outside": False, "extrapolation_value": 0.0, "antialias": False,
             "axes": None, "keep_aspect_ratio_policy": "stretch"}
    DATA_DEPENDENT_SHAPE = True

    def infer_types(self) -> None:
        self.check(self.get_input_size() in (2, 3), "expects data, scales or sizes, roi")
        self.check(self.mode in _MODES, "mode {!r} is not nearest, linear or cubic", self.mode)
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "data must be floats, got {}", et)
        ps = self.get_input_partial_shape(0)
        if ps.rank_is_static:
            resized = set(self._axes(len(ps)))
            ps = PartialShape([Dimension() if a in resized else d for a, d in enumerate(ps)])
        self.set_output_type(0, et, ps)

    def _axes(self, rank: int) -> list[int]:
        return [a % rank for a in self.axes] if self.axes is not None else list(range(rank))

    def plan(self, shape: Sequence[int], target: np.ndarray, roi: np.ndarray | None
             ) -> tuple[list[int], list[float], list[int], list[tuple[float, float]], bool]:
        """``(axes, scales, output lengths, rois, lengths from scales)`` for concrete values."""
        axes = self._axes(len(shape))
        values = np.asarray(target).reshape(-1)
        if len(values) != len(axes):
            raise ValueError(f"{len(values)} scales/sizes for axes {axes}")
        lens = [shape[a] for a in axes]
        from_scales = self.shape_calculation_mode == "scales"
        if from_scales:
            scales = [float(np.float32(v)) for v in values]
            outs = [scaled_length(n, s) for n, s in zip(lens, scales)]
        elif self.keep_aspect_ratio_policy != "stretch":
            ratios = [np.float32(w) / np.float32(n) for w, n in zip(values, lens)]
            scale = float(min(ratios) if self.keep_aspect_ratio_policy == "not_larger"
                          else max(ratios))
            scales = [scale] * len(axes)
            outs = [int(np.floor(n * scale + 0.5)) for n in lens]
        else:
            outs = [int(v) for v in values]
            scales = [float(np.float32(o) / np.float32(n)) for o, n in zip(outs, lens)]
        rois = [(0.0, 1.0)] * len(axes)
        if self.coordinate_transformation_mode == "tf_crop_and_resize":
            if roi is None:
                raise ValueError("tf_crop_and_resize needs a roi")
            r = np.asarray(roi, dtype=np.float64).reshape(-1)
            n = len(r) // 2
            picked = axes if n == len(shape) else list(range(len(axes)))
            rois = [(float(r[p]), float(r[n + p])) for p in picked]
            if from_scales:  # the output covers the roi only
                outs = [int(floor(float(np.float32(n_ * (e - b) * sc)) + SCALE_EPS))
                        for n_, (b, e), sc in zip(lens, rois, scales)]
        return axes, scales, outs, rois, from_scales

    def evaluate(self, inputs: Sequence[Any]) -> list[Any]:
        x = np.asarray(inputs[0])
        roi = inputs[2] if len(inputs) > 2 else None
        axes, scales, outs, rois, from_scales = self.plan(x.shape, inputs[1], roi)
        transform = self.coordinate_transformation_mode
        y = x.astype(np.float64)
        valid_all = np.ones([1] * x.ndim, dtype=bool)
        for axis, s, o, r in zip(axes, scales, outs, rois):
            n = x.shape[axis]
            # from scales, align_corners divides by the fractional scale * n - 1 (ONNX)
            idx, w, valid = axis_taps(_MODES[self.mode], n, o, s, transform, self.nearest_mode,
                                      self.cube_coeff, self.antialias, self.exclude_outside,
                                      r, from_scales)
            y = apply_taps(y, axis, idx, w)
            shape = [1] * x.ndim
            shape[axis] = o
            valid_all = valid_all & valid.reshape(shape)
        y = np.where(valid_all, y, self.extrapolation_value)
        return [y.astype(x.dtype)]


def onnx_resize(x: Any, target: Any, roi: Any, shape_mode: str, attrs: dict[str, Any]) -> Node:
    """The op for an ONNX Resize whose attributes the import gathered (``attrs`` of
    :mod:`.op`'s ``_onnx_attrs``)."""
    inputs = [x, target] + ([roi] if roi is not None else [])
    return Resize(inputs, mode=attrs["mode"], shape_calculation_mode=shape_mode,
                  coordinate_transformation_mode=attrs["transform"],
                  nearest_mode=attrs["nearest_mode"], cube_coeff=attrs["cube_coeff"],
                  exclude_outside=attrs["exclude_outside"],
                  extrapolation_value=attrs["extrapolation_value"],
                  antialias=attrs["antialias"], axes=attrs["axes"],
                  keep_aspect_ratio_policy=attrs["policy"])
