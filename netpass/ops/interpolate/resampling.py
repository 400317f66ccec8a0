"""Separable resampling: for one axis, the taps (source indices and weights per output position)
of each Interpolate mode and coordinate transform, computed in float32 with onnxruntime's (and
OpenVINO's CPU plugin's) formulas so that nearest rounding ties fall the same way, and their
application with one ``take`` per tap."""
from __future__ import annotations

from math import ceil, floor

import numpy as np

MODES = ("nearest", "linear", "linear_onnx", "cubic", "bilinear_pillow", "bicubic_pillow")


SHAPE_MODES = ("sizes", "scales")


TRANSFORMS = ("half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn",
              "align_corners")


NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


# Slack of the scales -> output size rule, as OpenVINO's shape inference.
SCALE_EPS = 1e-5


def scaled_length(length: int, scale: float) -> int:
    """Output length of ``length`` scaled by ``scale`` (float32 product, floored)."""
    return int(floor(float(np.float32(length) * np.float32(scale)) + SCALE_EPS))


def source_coords(transform: str, out_len: int, in_len: int, scale: float,
                  roi: tuple[float, float] = (0.0, 1.0), exact_length: bool = False
                  ) -> np.ndarray:
    """Source coordinate of every output position, in float32 (onnxruntime's formulas).

    ``exact_length``: align_corners divides by ``scale * in_len - 1`` (ONNX's reference, which
    keeps the resized length fractional in scales mode) instead of ``out_len - 1``."""
    x = np.arange(out_len, dtype=np.float32)
    s = np.float32(scale)
    half = np.float32(0.5)

    if transform == "half_pixel":
        return (x + half) / s - half
    if transform == "pytorch_half_pixel":
        return (x + half) / s - half if out_len > 1 else np.zeros_like(x)
    if transform == "asymmetric":
        return x / s
    if transform == "tf_half_pixel_for_nn":
        return (x + half) / s
    if transform == "align_corners":
        length = float(s) * in_len if exact_length else out_len
        if length == 1:
            return np.zeros_like(x)
        return (x * np.float32(in_len - 1) / np.float32(length - 1)).astype(np.float32)
    if transform == "half_pixel_symmetric":
        adjustment = np.float32(out_len) / (s * np.float32(in_len))
        offset = np.float32(in_len) / np.float32(2) * (np.float32(1) - adjustment)
        return offset + (x + half) / s - half
    if transform == "tf_crop_and_resize":
        lo, hi = np.float32(roi[0]), np.float32(roi[1])
        span = np.float32(in_len - 1)
        if out_len == 1:
            return np.full_like(x, np.float32(0.5) * (lo + hi) * span)
        return lo * span + x * (hi - lo) * span / np.float32(out_len - 1)
    raise ValueError(f"unknown coordinate_transformation_mode {transform!r}")


def nearest_index(coords: np.ndarray, nearest_mode: str, scale: float) -> np.ndarray:
    """Rounded source coordinates (before clamping)."""
    if nearest_mode == "round_prefer_floor":
        r = np.ceil(coords - np.float32(0.5))
    elif nearest_mode == "round_prefer_ceil":
        r = np.floor(coords + np.float32(0.5))
    elif nearest_mode == "floor":
        r = np.floor(coords)
    elif nearest_mode == "ceil":
        r = np.ceil(coords)
    elif nearest_mode == "simple":
        r = np.ceil(coords) if scale < 1 else np.trunc(coords)
    else:
        raise ValueError(f"unknown nearest_mode {nearest_mode!r}")
    return r.astype(np.int64)


def _triangle(d: np.ndarray) -> np.ndarray:
    return np.clip(1.0 - np.abs(d), 0.0, None)


def _cubic(d: np.ndarray, a: float) -> np.ndarray:
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _kernel(mode: str, cube_coeff: float):
    if mode in ("linear", "linear_onnx", "bilinear_pillow"):
        return _triangle, 1.0
    return (lambda d: _cubic(d, cube_coeff)), 2.0


def axis_taps(mode: str, in_len: int, out_len: int, scale: float, transform: str,
              nearest_mode: str = "round_prefer_floor", cube_coeff: float = -0.75,
              antialias: bool = False, exclude_outside: bool = False,
              roi: tuple[float, float] = (0.0, 1.0), exact_length: bool = False
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(index, weight, valid)``: output position ``o`` is ``sum_k weight[o, k] *
    x[index[o, k]]``; ``valid[o]`` is False where tf_crop_and_resize extrapolates.

    ``linear_onnx`` and ``cubic`` follow ONNX Resize (edge-clamped taps; with ``antialias``
    the kernel stretches by ``1/scale`` when downsampling, as ONNX 18 does); ``linear`` is
    OpenVINO's triangle filter over in-range taps; the pillow modes are Pillow's resampling.
    """
    if mode in ("bilinear_pillow", "bicubic_pillow"):
        return _pillow_taps(mode, in_len, out_len, scale)
    coords = source_coords(transform, out_len, in_len, scale, roi, exact_length)
    valid = np.ones(out_len, dtype=bool)
    if transform == "tf_crop_and_resize":
        valid = (coords >= 0) & (coords <= np.float32(in_len - 1))
    if mode == "nearest":
        idx = np.clip(nearest_index(coords, nearest_mode, scale), 0, in_len - 1)
        return idx[:, None], np.ones((out_len, 1)), valid
    x = coords.astype(np.float64)
    kernel, support = _kernel(mode, cube_coeff)
    if mode == "linear":
        stretch = min(scale, 1.0) if antialias else 1.0
        r = 2 if not antialias or scale >= 1 else int(ceil(2.0 / stretch))
        idx = np.round(x).astype(np.int64)[:, None] + np.arange(-r, r + 1)
        inside = (idx >= 0) & (idx < in_len)
        w = np.where(inside, kernel(stretch * (x[:, None] - idx)), 0.0)
        total = w.sum(axis=1, keepdims=True)
        w = np.divide(w, total, out=np.zeros_like(w), where=total != 0)
        return np.clip(idx, 0, in_len - 1), w, valid
    stretch = min(scale, 1.0) if antialias else 1.0
    start = int(floor(-support / stretch)) + 1
    offsets = np.arange(start, 1 - start + 1)
    base = np.ceil(x) - 1  # an integral coordinate takes the pixel on its left (ratio 1)
    ratio = x - base
    idx = base.astype(np.int64)[:, None] + offsets
    w = kernel(stretch * (offsets - ratio[:, None]))
    if exclude_outside:
        w = np.where((idx >= 0) & (idx < in_len), w, 0.0)
    if antialias or exclude_outside:
        w = w / w.sum(axis=1, keepdims=True)
    return np.clip(idx, 0, in_len - 1), w, valid


def _pillow_taps(mode: str, in_len: int, out_len: int, scale: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pillow's ImagingResample taps: an antialiased filter whose support grows by the
    downsampling factor, over in-range pixels only. Bicubic is Pillow's (a = -0.5, whatever
    ``cube_coeff`` says), as OpenVINO's CPU plugin computes it."""
    kernel, support = _kernel(mode, -0.5)
    step = 1.0 / scale                      # input pixels per output pixel
    filter_scale = max(step, 1.0)
    support *= filter_scale
    center = (np.arange(out_len) + 0.5) * step
    xmin = np.maximum(np.trunc(center - support + 0.5), 0).astype(np.int64)
    xmax = np.minimum(np.trunc(center + support + 0.5), in_len).astype(np.int64)
    width = int((xmax - xmin).max(initial=1))
    idx = xmin[:, None] + np.arange(width)
    inside = idx < xmax[:, None]
    w = np.where(inside, kernel((idx - center[:, None] + 0.5) / filter_scale), 0.0)
    total = w.sum(axis=1, keepdims=True)
    w = np.divide(w, total, out=np.zeros_like(w), where=total != 0)
    return np.clip(idx, 0, in_len - 1), w, np.ones(out_len, dtype=bool)


def apply_taps(x: np.ndarray, axis: int, idx: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Resample ``x`` along ``axis`` with taps ``(idx, w)`` (one gather per tap column)."""
    if w.shape[1] == 1 and np.all(w == 1.0):
        return np.take(x, idx[:, 0], axis=axis)
    shape = [1] * x.ndim
    shape[axis] = idx.shape[0]
    acc = np.zeros(x.shape[:axis] + (idx.shape[0],) + x.shape[axis + 1:], dtype=np.float64)
    for k in range(idx.shape[1]):
        acc += np.take(x, idx[:, k], axis=axis) * w[:, k].reshape(shape)
    return acc


def taps_matrix(idx: np.ndarray, w: np.ndarray, in_len: int) -> np.ndarray:
    """The taps as a dense ``[out, in]`` matrix (repeated indices add up)."""
    m = np.zeros((idx.shape[0], in_len))
    np.add.at(m, (np.repeat(np.arange(idx.shape[0]), idx.shape[1]), idx.reshape(-1)),
              w.reshape(-1))
    return m
