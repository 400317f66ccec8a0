"""The Interpolate op (opset11): class, factory, ONNX Resize/Upsample import (MatMul per axis for
the variants Interpolate cannot state) and Resize export."""
from __future__ import annotations

from collections.abc import Sequence
from math import floor
from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node, Output
from ...core.shape import PartialShape
from ...errors import UnsupportedOpError
from ..base import set_name, to_output
from ..elementwise import Add
from ..matmul import MatMul
from ..movement import Transpose
from ..registry import onnx_export, onnx_rule
from .onnx_resize import onnx_resize
from .resampling import (
    MODES,
    NEAREST_MODES,
    SCALE_EPS,
    SHAPE_MODES,
    TRANSFORMS,
    apply_taps,
    axis_taps,
    scaled_length,
    taps_matrix,
)

__all__ = ["interpolate"]


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
    antialias: Any
    cube_coeff: Any
    # The physical inputs of (scales_or_sizes, axes) and the input count(s) (Interpolate-4 picks
    # sizes or scales among its inputs; Interpolate-1 has its axes as an attribute).
    INPUTS_TEXT = "(data, scales_or_sizes[, axes])"

    def _value_input(self) -> int:
        return 1

    def _axes_input(self) -> int | None:
        return 2 if self.get_input_size() > 2 else None

    def _input_count_ok(self) -> bool:
        return self.get_input_size() in (2, 3)

    def _shape_mode(self) -> str:
        return self.shape_calculation_mode

    def _resampling(self) -> tuple[str, str, str, float, bool]:
        """(mode, coordinate_transformation_mode, nearest_mode, cube_coeff, antialias)."""
        return (self.mode, self.coordinate_transformation_mode, self.nearest_mode,
                self.cube_coeff, self.antialias)

    def _has_axes(self) -> bool:
        return self._axes_input() is not None

    def _const_axes(self) -> Any:
        """The axes as given (input or attribute), None where not known yet."""
        ai = self._axes_input()
        return None if ai is None else self.input_constant(ai)

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
        if not self._has_axes():
            self.check(count is None or count == rank,
                       "scales_or_sizes has {} elements but data rank is {} (and no axes)",
                       count, rank)
            return list(range(rank))
        axes = self._const_axes()
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
        self.check(self._input_count_ok(), "expects inputs {}", self.INPUTS_TEXT)
        self._check_attrs()
        vi = self._value_input()
        et1 = self.get_input_element_type(vi)
        if not et1.is_dynamic:
            want_int = self._shape_mode() == "sizes"
            self.check(et1.is_integral == want_int, "{} of type {} does not fit "
                       "shape_calculation_mode '{}'", "scales_or_sizes", et1, self._shape_mode())
        data = self.get_input_partial_shape(0)
        et = self.get_input_element_type(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        rank = len(data)
        pb, pe = self._pads(rank)
        ss = self.get_input_partial_shape(vi)
        self.check(not ss.rank_is_static or len(ss) == 1,
                   "scales_or_sizes must be 1-D, got shape {}", ss)
        count = ss[0].min if ss.rank_is_static and ss[0].is_static else None
        dims = [d if b == 0 and e == 0 else d + (b + e) for d, b, e in zip(data, pb, pe)]
        axes = self._axes(rank, count)
        if axes is None:
            self.set_output_type(0, et, PartialShape.dynamic(rank))
            return
        if self._shape_mode() == "sizes":
            values = self.input_partial_value(vi)
            for i, axis in enumerate(axes):
                dims[axis] = Dimension.of(values[i]) if values is not None else Dimension()
        else:
            scales = self.input_constant(vi)
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
        values = np.asarray(inputs[self._value_input()]).reshape(-1)
        ai = self._axes_input()
        given = None if not self._has_axes() else \
            self._const_axes() if ai is None else inputs[ai]
        axes = list(range(rank)) if given is None else \
            [int(a) % rank for a in np.asarray(given).reshape(-1)]
        mode, transform, nearest, cube, antialias = self._resampling()
        y = x
        for axis, v in zip(axes, values):
            n = x.shape[axis]
            if self._shape_mode() == "sizes":
                out = int(v)
                scale = float(np.float32(out) / np.float32(n))
            else:
                scale = float(np.float32(v))
                out = scaled_length(n, scale)
            idx, w, _ = axis_taps(mode, n, out, scale, transform, nearest, cube, antialias)
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
        if not _known_plan(x, sizes, roi, axes, attrs):
            return onnx_resize(x, sizes, roi, "sizes", attrs).output(0)
        return _keep_aspect_ratio(ctx, x, sizes, roi, axes, attrs)
    shape_mode = "scales" if scales is not None else "sizes"
    target = scales if scales is not None else sizes
    needs_exact = transform in ("half_pixel_symmetric", "tf_crop_and_resize") or \
        (mode == "cubic" and attrs["exclude_outside"])
    if attrs["antialias"] and mode != "nearest" and not needs_exact:
        needs_exact = _downsamples(x, target, shape_mode, axes)
    if transform == "align_corners" and shape_mode == "scales" and not needs_exact:
        needs_exact = target.value is None or _fractional_length(ctx, x, target, axes)
    if needs_exact:
        if not _known_plan(x, target, roi, axes, attrs):  # resampled at run time
            return onnx_resize(x, target, roi, shape_mode, attrs).output(0)
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


def _known_plan(x: Output, target: Output, roi: Output | None, axes: list[int] | None,
                attrs: dict[str, Any]) -> bool:
    """Whether the exact taps can be constant matrices: constant scales/sizes (and roi for
    tf_crop_and_resize), static sizes along the resized axes."""
    ps = x.partial_shape
    if target.value is None or not ps.rank_is_static:
        return False
    if attrs["transform"] == "tf_crop_and_resize" and (roi is None or roi.value is None):
        return False
    return all(ps[a % len(ps)].is_static for a in (axes or range(len(ps))))


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
        y = Add([y, to_output(fill)]).output(0)
    return y


def _matmul_along(x: Output, axis: int, rank: int, m: np.ndarray) -> Output:
    """``m @ x`` along ``axis``: axis ``rank-2`` multiplies from the left, the last axis from
    the right; any other axis is moved last and back."""
    if rank >= 2 and axis == rank - 2:
        return MatMul([to_output(m), x]).output(0)
    if axis == rank - 1:
        return MatMul([x, to_output(m)], transpose_b=True).output(0)
    order = [a for a in range(rank) if a != axis] + [axis]
    inverse = list(np.argsort(order))
    moved = Transpose([x, to_output(np.asarray(order, dtype=np.int64))]).output(0)
    y = MatMul([moved, to_output(m)], transpose_b=True).output(0)
    return Transpose([y, to_output(np.asarray(inverse, dtype=np.int64))]).output(0)


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
