"""Interpolate (OpenVINO opset11) with the ONNX Resize (10, 11, 13, 18, 19) and Upsample (7, 9)
import rules and a Resize (opset 17) export rule.

Resampling is separable: every interpolated axis becomes a set of taps (source indices and
weights per output position, :func:`axis_taps`), applied with one ``take`` per tap; nothing
loops over pixels. Source coordinates are computed in float32 with onnxruntime's (and
OpenVINO's CPU plugin's) formulas so that nearest rounding ties fall the same way.

ONNX variants Interpolate-11 cannot state (cubic ``exclude_outside``, ``antialias`` when
downsampling, ``half_pixel_symmetric``, ``tf_crop_and_resize``, ``keep_aspect_ratio_policy``
whose rounded sizes differ from Interpolate's) are imported, for static spatial sizes and
constant scales/sizes, as one MatMul per axis with the taps laid out as a constant matrix;
otherwise they are refused.
"""
from __future__ import annotations

from math import ceil, floor
from typing import Any, Sequence

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..errors import UnsupportedOpError
from .base import set_name, to_output
from .registry import OP_TYPES, onnx_export, onnx_rule

__all__ = ["interpolate"]

MODES = ("nearest", "linear", "linear_onnx", "cubic", "bilinear_pillow", "bicubic_pillow")
SHAPE_MODES = ("sizes", "scales")
TRANSFORMS = ("half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn",
              "align_corners")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
# Slack of the scales -> output size rule, as OpenVINO's shape inference.
SCALE_EPS = 1e-5


# -- per-axis resampling ---------------------------------------------------------------------
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


# -- the op ----------------------------------------------------------------------------------
class Interpolate(Node):
    """Resize of ``data`` along ``axes`` (input 2, or every axis) to ``sizes`` or by
    ``scales`` (input 1, as ``shape_calculation_mode`` says), after zero padding by
    ``pads_begin``/``pads_end``."""

    type_name = "Interpolate"
    version = "opset11"
    ATTRS = {"mode": "nearest", "shape_calculation_mode": "sizes",
             "coordinate_transformation_mode": "half_pixel",
             "nearest_mode": "round_prefer_floor", "antialias": False, "pads_begin": [],
             "pads_end": [], "cube_coeff": -0.75}

    def _check_attrs(self) -> None:
        for key, allowed in (("mode", MODES), ("shape_calculation_mode", SHAPE_MODES),
                             ("coordinate_transformation_mode", TRANSFORMS),
                             ("nearest_mode", NEAREST_MODES)):
            value = str(getattr(self, key)).lower()
            self.check(value in allowed, "{} must be one of {}, got {!r}", key, allowed,
                       getattr(self, key))
            setattr(self, key, value)
        self.antialias = bool(self.antialias)
        self.cube_coeff = float(self.cube_coeff)

    def _pads(self, rank: int) -> tuple[list[int], list[int]]:
        out = []
        for key in ("pads_begin", "pads_end"):
            pads = [int(p) for p in getattr(self, key)]
            self.check(len(pads) <= rank, "{} {} is longer than the data rank {}", key, pads, rank)
            self.check(all(p >= 0 for p in pads), "{} {} must be >= 0", key, pads)
            pads = pads + [0] * (rank - len(pads))
            setattr(self, key, pads)
            out.append(pads)
        return out[0], out[1]

    def _axes(self, rank: int, count: int | None) -> list[int] | None:
        if self.get_input_size() < 3:
            self.check(count is None or count == rank,
                       "scales_or_sizes has {} elements but data rank is {} (and no axes)",
                       count, rank)
            return list(range(rank))
        axes = self.input_constant(2)
        if axes is None:
            return None
        axes = [int(a) for a in np.asarray(axes).reshape(-1)]
        self.check(all(-rank <= a < rank for a in axes), "axes {} out of range for rank {}",
                   axes, rank)
        axes = [a % rank for a in axes]
        self.check(len(set(axes)) == len(axes), "axes {} repeat an axis", axes)
        self.check(count is None or count == len(axes),
                   "scales_or_sizes has {} elements but axes {} has {}", count, axes, len(axes))
        return axes

    def infer_types(self) -> None:
        self.check(self.get_input_size() in (2, 3),
                   "expects inputs (data, scales_or_sizes[, axes])")
        self._check_attrs()
        et1 = self.get_input_element_type(1)
        if not et1.is_dynamic:
            want_int = self.shape_calculation_mode == "sizes"
            self.check(et1.is_integral == want_int, "scales_or_sizes of type {} does not fit "
                       "shape_calculation_mode '{}'", et1, self.shape_calculation_mode)
        data = self.get_input_partial_shape(0)
        et = self.get_input_element_type(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        rank = len(data)
        pb, pe = self._pads(rank)
        ss = self.get_input_partial_shape(1)
        self.check(not ss.rank_is_static or len(ss) == 1,
                   "scales_or_sizes must be 1-D, got shape {}", ss)
        count = ss[0].min if ss.rank_is_static and ss[0].is_static else None
        dims = [d if b == 0 and e == 0 else d + (b + e) for d, b, e in zip(data, pb, pe)]
        axes = self._axes(rank, count)
        if axes is None:
            self.set_output_type(0, et, PartialShape.dynamic(rank))
            return
        if self.shape_calculation_mode == "sizes":
            values = self.input_partial_value(1)
            for i, axis in enumerate(axes):
                dims[axis] = Dimension.of(values[i]) if values is not None else Dimension()
        else:
            scales = self.input_constant(1)
            for i, axis in enumerate(axes):
                dims[axis] = Dimension() if scales is None else \
                    _scaled_dim(dims[axis], float(np.asarray(scales).reshape(-1)[i]))
        self.set_output_type(0, et, PartialShape(dims))

    def evaluate(self, inputs):
        x = np.asarray(inputs[0])
        rank = x.ndim
        pb, pe = self._pads(rank)
        if any(pb) or any(pe):
            x = np.pad(x, list(zip(pb, pe)))
        values = np.asarray(inputs[1]).reshape(-1)
        axes = list(range(rank)) if len(inputs) < 3 else \
            [int(a) % rank for a in np.asarray(inputs[2]).reshape(-1)]
        y = x
        for axis, v in zip(axes, values):
            n = x.shape[axis]
            if self.shape_calculation_mode == "sizes":
                out = int(v)
                scale = float(np.float32(out) / np.float32(n))
            else:
                scale = float(np.float32(v))
                out = scaled_length(n, scale)
            idx, w, _ = axis_taps(self.mode, n, out, scale, self.coordinate_transformation_mode,
                                  self.nearest_mode, self.cube_coeff, self.antialias)
            y = apply_taps(y, axis, idx, w)
        return [_cast_like(y, x.dtype)]


def _scaled_dim(d: Dimension, scale: float) -> Dimension:
    if d.is_static:
        return Dimension(scaled_length(d.min, scale))
    hi = d.get_max_length()
    return Dimension(scaled_length(d.min, scale), -1 if hi < 0 else scaled_length(hi, scale))


def _cast_like(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if y.dtype == dtype:
        return y
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        y = np.clip(np.round(y), info.min, info.max)
    return y.astype(dtype)


# -- factory ---------------------------------------------------------------------------------
def interpolate(image: Any, scales_or_sizes: Any, mode: str, shape_calculation_mode: str,
                pads_begin: Sequence[int] | None = None, pads_end: Sequence[int] | None = None,
                coordinate_transformation_mode: str = "half_pixel",
                nearest_mode: str = "round_prefer_floor", antialias: bool = False,
                cube_coeff: float = -0.75, axes: Any = None, name: str | None = None) -> Node:
    """Interpolate-11 in OpenVINO's ``opset11.interpolate`` argument order; python scales
    become f32 and sizes i64 Constants."""
    if not isinstance(scales_or_sizes, (Node, Output)):
        dtype = np.float32 if shape_calculation_mode.lower() == "scales" else np.int64
        scales_or_sizes = np.asarray(scales_or_sizes, dtype=dtype)
    inputs = [to_output(image), to_output(scales_or_sizes)]
    if axes is not None:
        inputs.append(to_output(axes if isinstance(axes, (Node, Output))
                                else np.asarray(axes, dtype=np.int64)))
    node = Interpolate(inputs, mode=mode, shape_calculation_mode=shape_calculation_mode,
                       coordinate_transformation_mode=coordinate_transformation_mode,
                       nearest_mode=nearest_mode, antialias=antialias,
                       pads_begin=list(pads_begin or []), pads_end=list(pads_end or []),
                       cube_coeff=cube_coeff)
    return set_name(node, name)


# -- ONNX import -----------------------------------------------------------------------------
_ONNX_MODES = {"nearest": "nearest", "linear": "linear_onnx", "cubic": "cubic"}


def _present(o: Output | None) -> bool:
    """An optional ONNX input that is given and not an empty tensor."""
    if o is None:
        return False
    ps = o.partial_shape
    return not (ps.rank_is_static and len(ps) == 1 and ps[0].is_static and ps[0].min == 0)


def _import(ctx, x: Output, scales: Output | None, sizes: Output | None,
            roi: Output | None, attrs: dict[str, Any]) -> Output:
    mode = attrs["mode"]
    if mode not in _ONNX_MODES:
        ctx.error(f"mode {mode!r} is not one of nearest, linear, cubic")
    transform = attrs["transform"]
    if transform not in TRANSFORMS + ("half_pixel_symmetric", "tf_crop_and_resize"):
        ctx.error(f"coordinate_transformation_mode {transform!r} is unknown")
    if attrs["nearest_mode"] not in NEAREST_MODES:
        ctx.error(f"nearest_mode {attrs['nearest_mode']!r} is unknown")
    if (scales is None) == (sizes is None):
        ctx.error("exactly one of scales and sizes must be given")
    ps = x.partial_shape
    axes = attrs["axes"]
    if axes is not None:
        if not ps.rank_is_static:
            ctx.error("axes need data of static rank")
        axes = [a % len(ps) for a in axes]
    policy = attrs["policy"]
    if policy not in ("stretch", "not_larger", "not_smaller"):
        ctx.error(f"keep_aspect_ratio_policy {policy!r} is unknown")
    if policy != "stretch" and sizes is not None:
        return _keep_aspect_ratio(ctx, x, sizes, roi, axes, attrs)
    shape_mode = "scales" if scales is not None else "sizes"
    target = scales if scales is not None else sizes
    needs_exact = transform in ("half_pixel_symmetric", "tf_crop_and_resize") or \
        (mode == "cubic" and attrs["exclude_outside"])
    if attrs["antialias"] and mode != "nearest" and not needs_exact:
        needs_exact = _downsamples(x, target, shape_mode, axes)
    if transform == "align_corners" and shape_mode == "scales" and not needs_exact:
        needs_exact = _fractional_length(ctx, x, target, axes)
    if needs_exact:
        return _import_as_matmuls(ctx, x, target, shape_mode, roi, axes, attrs)
    inputs = [x, target]
    kept = _resized_axes(x, target, shape_mode, axes)
    if kept is not None:
        if not kept:
            return x
        axes = [a for a, _ in kept]
        inputs[1] = to_output(np.asarray([v for _, v in kept], dtype=target.value.dtype))
    if axes is not None:
        inputs.append(to_output(np.asarray(axes, dtype=np.int64)))
    return Interpolate(inputs, mode=_ONNX_MODES[mode], shape_calculation_mode=shape_mode,
                       coordinate_transformation_mode=transform,
                       nearest_mode=attrs["nearest_mode"], cube_coeff=attrs["cube_coeff"]
                       ).output(0)


def _resized_axes(x: Output, target: Output, shape_mode: str, axes: list[int] | None
                  ) -> list[tuple[int, Any]] | None:
    """(axis, scale or size) of the axes a constant scales/sizes input really resizes; None
    when unknown. onnxruntime leaves an axis of scale 1 untouched (tf_half_pixel_for_nn would
    otherwise shift it), and Interpolate then only names the axes that change."""
    ps = x.partial_shape
    if target.value is None or not ps.rank_is_static:
        return None
    values = np.asarray(target.value).reshape(-1)
    axes = axes if axes is not None else list(range(len(ps)))
    if len(values) != len(axes):
        return None
    kept = []
    for a, v in zip(axes, values):
        same = v == 1 if shape_mode == "scales" else ps[a].is_static and int(v) == ps[a].min
        if not same:
            kept.append((a, v))
    return kept


def _downsamples(x: Output, target: Output, shape_mode: str, axes: list[int] | None) -> bool:
    """True unless every resized axis is known not to shrink (antialias then has no effect)."""
    value = target.value
    if value is None:
        return True
    values = np.asarray(value).reshape(-1)
    if shape_mode == "scales":
        return bool(np.any(values < 1))
    ps = x.partial_shape
    if not ps.rank_is_static:
        return True
    axes = axes if axes is not None else list(range(len(ps)))
    return any(not ps[a].is_static or int(v) < ps[a].min for a, v in zip(axes, values))


def _fractional_length(ctx, x: Output, target: Output, axes: list[int] | None) -> bool:
    """align_corners in scales mode: True when some ``scale * size`` is fractional (ONNX then
    divides by that fractional length, Interpolate by the whole output length)."""
    value = target.value
    if value is None:
        ctx.error("align_corners with run-time scales: ONNX's reference divides by the "
                  "fractional scale * size, which Interpolate cannot follow")
    scales = np.asarray(value, dtype=np.float32).reshape(-1)
    if np.all(scales == np.round(scales)):
        return False
    ps = x.partial_shape
    if not ps.rank_is_static:
        return True
    axes = axes if axes is not None else list(range(len(ps)))
    for a, s in zip(axes, scales):
        if not ps[a].is_static:
            return True
        length = float(s) * ps[a].min
        if length != round(length):
            return True
    return False


def _static_plan(ctx, x: Output, target: Output, shape_mode: str, axes: list[int] | None,
                 what: str) -> tuple[list[int], list[int], list[float], list[int]]:
    """(axes, input lengths, scales, output lengths) for static spatial sizes and a constant
    scales/sizes input."""
    ps = x.partial_shape
    value = target.value
    if value is None:
        ctx.error(f"{what} needs constant scales/sizes (these are computed at run time)")
    if not ps.rank_is_static:
        ctx.error(f"{what} needs data of static rank, got {ps}")
    rank = len(ps)
    axes = axes if axes is not None else list(range(rank))
    values = np.asarray(value).reshape(-1)
    if len(values) != len(axes):
        ctx.error(f"scales/sizes {values.tolist()} do not match axes {axes}")
    if not all(ps[a].is_static for a in axes):
        ctx.error(f"{what} needs static sizes along the resized axes, got data {ps}")
    lens = [ps[a].min for a in axes]
    if shape_mode == "scales":
        scales = [float(np.float32(v)) for v in values]
        outs = [scaled_length(n, s) for n, s in zip(lens, scales)]
    else:
        outs = [int(v) for v in values]
        scales = [float(np.float32(o) / np.float32(n)) for o, n in zip(outs, lens)]
    return axes, lens, scales, outs


def _variant(attrs: dict[str, Any]) -> str:
    """How refusals name an ONNX resize variant."""
    text = f"{attrs['transform']} {attrs['mode']}"
    if attrs["exclude_outside"]:
        text += " with exclude_outside"
    if attrs["antialias"]:
        text += " with antialias"
    return text


def _import_as_matmuls(ctx, x: Output, target: Output, shape_mode: str, roi: Output | None,
                       axes: list[int] | None, attrs: dict[str, Any]) -> Output:
    """The exact ONNX resize for constant scales/sizes and static resized dims."""
    what = _variant(attrs)
    plan = _static_plan(ctx, x, target, shape_mode, axes, what)
    return _taps_matmuls(ctx, x, plan, roi, attrs, what, shape_mode == "scales")


def _taps_matmuls(ctx, x: Output, plan: tuple[list[int], list[int], list[float], list[int]],
                  roi: Output | None, attrs: dict[str, Any], what: str, from_scales: bool
                  ) -> Output:
    """One MatMul per resized axis with the taps as a constant matrix, plus a constant for
    tf_crop_and_resize's extrapolated positions."""
    axes, lens, scales, outs = plan
    transform = attrs["transform"]
    rank = len(x.partial_shape)
    dtype = x.element_type.dtype
    if dtype is None or dtype.kind != "f":
        ctx.error(f"{what} needs floating-point data, got {x.element_type}")
    rois = [(0.0, 1.0)] * len(axes)
    if transform == "tf_crop_and_resize":
        if roi is None or roi.value is None:
            ctx.error("tf_crop_and_resize needs a constant roi")
        r = np.asarray(roi.value, dtype=np.float64).reshape(-1)
        n = len(r) // 2
        if n not in (rank, len(axes)):
            ctx.error(f"roi of {len(r)} values fits neither the rank nor the axes")
        picked = axes if n == rank else list(range(len(axes)))
        rois = [(float(r[p]), float(r[n + p])) for p in picked]
        if from_scales:  # the output covers the roi only
            outs = [int(floor(float(np.float32(n_ * (e - b) * sc)) + SCALE_EPS))
                    for n_, (b, e), sc in zip(lens, rois, scales)]
    y = x
    valid_all = np.ones([1] * rank, dtype=bool)
    for axis, n, s, o, r in zip(axes, lens, scales, outs, rois):
        if o > 65536 or n > 65536:
            ctx.error(f"{what}: axis {axis} of {n} -> {o} is too large for a constant matrix")
        idx, w, valid = axis_taps(_ONNX_MODES[attrs["mode"]], n, o, s, transform,
                                  attrs["nearest_mode"], attrs["cube_coeff"], attrs["antialias"],
                                  attrs["exclude_outside"], r, from_scales)
        m = taps_matrix(idx, w, n) * valid[:, None]
        if o != n or not np.array_equal(m, np.eye(n)):  # untouched axes need no MatMul
            y = _matmul_along(y, axis, rank, m.astype(dtype))
        shape = [1] * rank
        shape[axis] = o
        valid_all = valid_all & valid.reshape(shape)
    if not valid_all.all():
        fill = (attrs["extrapolation_value"] * (~valid_all)).astype(dtype)
        y = OP_TYPES["Add"]([y, to_output(fill)]).output(0)
    return y


def _matmul_along(x: Output, axis: int, rank: int, m: np.ndarray) -> Output:
    """``m @ x`` along ``axis``: axis ``rank-2`` multiplies from the left, the last axis from
    the right; any other axis is moved last and back."""
    matmul, transpose = OP_TYPES["MatMul"], OP_TYPES["Transpose"]
    if rank >= 2 and axis == rank - 2:
        return matmul([to_output(m), x]).output(0)
    if axis == rank - 1:
        return matmul([x, to_output(m)], transpose_b=True).output(0)
    order = [a for a in range(rank) if a != axis] + [axis]
    inverse = list(np.argsort(order))
    moved = transpose([x, to_output(np.asarray(order, dtype=np.int64))]).output(0)
    y = matmul([moved, to_output(m)], transpose_b=True).output(0)
    return transpose([y, to_output(np.asarray(inverse, dtype=np.int64))]).output(0)


def _keep_aspect_ratio(ctx, x: Output, sizes: Output, roi: Output | None,
                       axes: list[int] | None, attrs: dict[str, Any]) -> Output:
    """not_larger / not_smaller: one scale for every resized axis, sizes rounded from it;
    Interpolate in scales mode where its floored sizes agree, constant matrices otherwise."""
    what = f"keep_aspect_ratio_policy {attrs['policy']}"
    axes, lens, _, wanted = _static_plan(ctx, x, sizes, "sizes", axes, what)
    ratios = [np.float32(w) / np.float32(n) for w, n in zip(wanted, lens)]
    scale = float(min(ratios) if attrs["policy"] == "not_larger" else max(ratios))
    outs = [int(np.floor(n * scale + 0.5)) for n in lens]
    if outs != [scaled_length(n, scale) for n in lens] or attrs["antialias"] or \
            attrs["transform"] in ("half_pixel_symmetric", "tf_crop_and_resize") or \
            (attrs["mode"] == "cubic" and attrs["exclude_outside"]):
        plan = (axes, lens, [scale] * len(axes), outs)
        return _taps_matmuls(ctx, x, plan, roi, attrs, what, False)
    return Interpolate([x, to_output(np.full(len(axes), scale, dtype=np.float32)),
                        to_output(np.asarray(axes, dtype=np.int64))],
                       mode=_ONNX_MODES[attrs["mode"]], shape_calculation_mode="scales",
                       coordinate_transformation_mode=attrs["transform"],
                       nearest_mode=attrs["nearest_mode"], cube_coeff=attrs["cube_coeff"]
                       ).output(0)


def _onnx_attrs(ctx, legacy: bool) -> dict[str, Any]:
    mode = ctx.attr("mode", "nearest")
    if legacy:  # Resize-10 and Upsample: asymmetric coordinates, onnxruntime's 'simple' rounding
        return {"mode": mode, "transform": "asymmetric", "nearest_mode": "simple",
                "cube_coeff": -0.75, "exclude_outside": False, "extrapolation_value": 0.0,
                "antialias": False, "axes": None, "policy": "stretch"}
    return {"mode": mode,
            "transform": ctx.attr("coordinate_transformation_mode", "half_pixel"),
            "nearest_mode": ctx.attr("nearest_mode", "round_prefer_floor"),
            "cube_coeff": ctx.attr("cubic_coeff_a", -0.75),
            "exclude_outside": bool(ctx.attr("exclude_outside", 0)),
            "extrapolation_value": ctx.attr("extrapolation_value", 0.0),
            "antialias": bool(ctx.attr("antialias", 0)),
            "axes": ctx.attr("axes", None),
            "policy": ctx.attr("keep_aspect_ratio_policy", "stretch")}


@onnx_rule("Resize", since=10)
def _import_resize_10(ctx):
    return _import(ctx, ctx.inputs[0], ctx.input(1), None, None, _onnx_attrs(ctx, True))


@onnx_rule("Resize", since=19)
@onnx_rule("Resize", since=18)
@onnx_rule("Resize", since=13)
@onnx_rule("Resize", since=11)
def _import_resize(ctx):
    if ctx.opset < 18 and any(ctx.has_attr(a) for a in
                              ("antialias", "axes", "keep_aspect_ratio_policy")):
        ctx.error("antialias, axes and keep_aspect_ratio_policy need opset 18")
    attrs = _onnx_attrs(ctx, False)
    if ctx.opset < 19 and attrs["transform"] == "half_pixel_symmetric":
        ctx.error("half_pixel_symmetric needs opset 19")
    scales = ctx.input(2) if _present(ctx.input(2)) else None
    sizes = ctx.input(3) if _present(ctx.input(3)) else None
    roi = ctx.input(1) if _present(ctx.input(1)) else None
    return _import(ctx, ctx.inputs[0], scales, sizes, roi, attrs)


@onnx_rule("Upsample", since=7)
def _import_upsample_7(ctx):
    scales = ctx.attr("scales", [])
    if not scales:
        ctx.error("scales attribute is required")
    attrs = _onnx_attrs(ctx, True)
    if attrs["mode"] == "bilinear":
        attrs["mode"] = "linear"
    return _import(ctx, ctx.inputs[0], to_output(np.asarray(scales, dtype=np.float32)), None,
                   None, attrs)


@onnx_rule("Upsample", since=9)
def _import_upsample_9(ctx):
    attrs = _onnx_attrs(ctx, True)
    if attrs["mode"] == "bilinear":
        attrs["mode"] = "linear"
    return _import(ctx, ctx.inputs[0], ctx.inputs[1], None, None, attrs)


# -- ONNX export -----------------------------------------------------------------------------
_EXPORT_MODES = {"nearest": "nearest", "linear_onnx": "linear", "cubic": "cubic"}


@onnx_export(Interpolate)
def _export_interpolate(node: Interpolate, ectx) -> None:
    """Resize-13 form (opset 17 has no axes attribute): scales/sizes widened to every axis."""
    def refuse(reason: str) -> None:
        raise UnsupportedOpError(node.type_name, node_name=node.friendly_name, reason=reason)

    mode = node.mode
    if mode == "linear" and not node.antialias:
        mode = "linear_onnx"  # OpenVINO's triangle filter is plain linear without antialias
    if mode not in _EXPORT_MODES:
        refuse(f"mode {node.mode!r} has no ONNX Resize equivalent")
    if node.antialias and mode != "nearest":
        refuse("antialias needs ONNX opset 18")
    names = ectx.inputs(node)
    data = node.get_input_partial_shape(0)
    if not data.rank_is_static:
        refuse("ONNX export needs a static data rank")
    rank = len(data)
    x = names[0]
    if any(node.pads_begin) or any(node.pads_end):
        padded = ectx.fresh(f"{node.friendly_name}/padded")
        pads = np.asarray(list(node.pads_begin) + list(node.pads_end), dtype=np.int64)
        ectx.add_node("Pad", [x, ectx.constant(pads)], [padded])
        x = padded
    target = names[1]
    if node.get_input_size() == 3:
        axes = node.input_constant(2)
        values = node.input_constant(1)
        if axes is None or values is None:
            refuse("ONNX export of a partial axes list needs constant axes and scales/sizes")
        axes = [int(a) % rank for a in np.asarray(axes).reshape(-1)]
        if node.shape_calculation_mode == "scales":
            full = np.ones(rank, dtype=np.float32)
        else:
            padded_dims = [d + (b + e) for d, b, e in zip(data, node.pads_begin, node.pads_end)]
            if not all(padded_dims[a].is_static for a in range(rank) if a not in axes):
                refuse("ONNX export of sizes on some axes needs the other dims static")
            full = np.asarray([d.min if d.is_static else 0 for d in padded_dims], dtype=np.int64)
        full[axes] = np.asarray(values).reshape(-1)
        target = ectx.constant(full)
    inputs = [x, "", target] if node.shape_calculation_mode == "scales" else [x, "", "", target]
    attrs: dict[str, Any] = {"mode": _EXPORT_MODES[mode],
                             "coordinate_transformation_mode":
                                 node.coordinate_transformation_mode}
    if mode == "nearest":
        if node.nearest_mode == "simple":
            refuse("nearest_mode 'simple' has no ONNX Resize-13 equivalent")
        attrs["nearest_mode"] = node.nearest_mode
    if mode == "cubic":
        attrs["cubic_coeff_a"] = node.cube_coeff
    ectx.add_node("Resize", inputs, ectx.outputs(node), **attrs)
