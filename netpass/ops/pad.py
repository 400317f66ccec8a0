"""Pad: constant, edge, reflect and symmetric padding (ONNX's wrap mode is imported as Gathers)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dimension import INF, Dimension
from ..core.node import Node, Output
from ..core.shape import PartialShape
from .base import set_name, to_output
from .elementwise import add, floor_mod, maximum, minimum, subtract
from .indexing import Gather, ScatterUpdate
from .movement import Slice, Squeeze
from .registry import onnx_export, onnx_rule
from .shape_inputs import (
    check_shape_input,
    const_ints,
    export_error,
    i64_operand,
    shape_values,
    vector_length,
)
from .shape_ops import Range, ShapeOf

__all__ = ["pad"]


PAD_MODES = ("constant", "edge", "reflect", "symmetric")


def _pad_source(n_out: int, dim: int, begin: int, mode: str) -> np.ndarray:
    """Source index of each output position along one axis (-1 where the pad value goes)."""
    src = np.arange(n_out) - begin
    inside = (src >= 0) & (src < dim)
    if mode == "constant" or dim == 0:
        return np.where(inside, src, -1)
    if mode == "edge":
        return np.clip(src, 0, dim - 1)
    if mode == "reflect":
        if dim == 1:
            return np.zeros_like(src)
        period = 2 * (dim - 1)
        m = np.mod(src, period)
        return np.where(m < dim, m, period - m)
    period = 2 * dim
    m = np.mod(src, period)
    return np.where(m < dim, m, period - 1 - m)


class Pad(Node):
    """Pad v12: ``pads_begin``/``pads_end`` per axis (negative values crop), ``pad_mode``
    constant (with ``pad_value``), edge, reflect or symmetric."""

    type_name = "Pad"
    version = "opset12"
    IR_VERSIONS = ("opset1", "opset12")  # v1: pads >= 0, a subset of v12's
    ATTRS = {"pad_mode": "constant"}

    def infer_types(self) -> None:
        n_in = self.get_input_size()
        self.check(n_in in (3, 4), "expects inputs (arg, pads_begin, pads_end[, pad_value])")
        self.check(self.pad_mode in PAD_MODES, "unknown pad_mode '{}'", self.pad_mode)
        check_shape_input(self, 1, "pads_begin")
        check_shape_input(self, 2, "pads_end")
        et = self.get_input_element_type(0)
        if n_in == 4:
            ps = self.get_input_partial_shape(3)
            self.check(not ps.rank_is_static or len(ps) == 0,
                       "pad_value must be a scalar, got shape {}", ps)
            self.check(et.merge(self.get_input_element_type(3)) is not None,
                       "pad_value type {} differs from {}", self.get_input_element_type(3), et)
        data = self.get_input_partial_shape(0)
        begin, end = shape_values(self, 1), shape_values(self, 2)
        if not data.rank_is_static:
            n = vector_length(self, 1)
            self.set_output_type(0, et, PartialShape.dynamic(n))
            return
        rank = len(data)
        for name, v in (("pads_begin", begin), ("pads_end", end)):
            self.check(v is None or len(v) == rank,
                       "{} {} must have {} elements (the input rank)", name, v, rank)
        dims = []
        for i, d in enumerate(data):
            b = begin[i] if begin is not None else None
            e = end[i] if end is not None else None
            if not isinstance(b, int) or not isinstance(e, int):
                dims.append(Dimension())
            elif b == 0 and e == 0:
                dims.append(d)
            elif d.is_static:
                n = d.min + b + e
                self.check(n >= 0, "pads {}, {} leave a negative dimension on axis {}", b, e, i)
                if self.pad_mode in ("reflect", "symmetric") and (b > 0 or e > 0):
                    lim = d.min - (1 if self.pad_mode == "reflect" else 0)
                    self.check(max(b, e) <= lim, f"{self.pad_mode} pads {b}, {e} exceed "
                               f"dimension {d.min} on axis {i}")
                dims.append(Dimension(n))
            else:
                lo = max(d.min + b + e, 0)
                dims.append(Dimension(lo, -1 if d.max == INF else max(d.max + b + e, lo)))
        self.set_output_type(0, et, PartialShape(dims))

    def evaluate(self, inputs):
        x = inputs[0]
        begin = [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
        end = [int(v) for v in np.asarray(inputs[2]).reshape(-1)]
        value = np.asarray(inputs[3]).astype(x.dtype) if len(inputs) == 4 else x.dtype.type(0)
        out = x
        invalid = np.zeros([1] * x.ndim, dtype=bool)
        for axis, (b, e) in enumerate(zip(begin, end)):
            dim = x.shape[axis]
            src = _pad_source(dim + b + e, dim, b, self.pad_mode)
            out = np.take(out, np.maximum(src, 0), axis=axis) if dim else \
                np.zeros(out.shape[:axis] + (len(src),) + out.shape[axis + 1:], dtype=x.dtype)
            shape = [1] * x.ndim
            shape[axis] = len(src)
            invalid = invalid | (src < 0).reshape(shape)
        if self.pad_mode == "constant" or x.size == 0:
            out = np.where(invalid, value, out).astype(x.dtype)
        return [out]


def pad(arg: Any, pads_begin: Any, pads_end: Any, pad_mode: str, arg_pad_value: Any = None,
        name: str | None = None) -> Node:
    """Pad-12: ``arg`` padded by ``pads_begin`` / ``pads_end`` per dim (negative values crop);
    ``pad_mode`` "constant" (with ``arg_pad_value``, default 0), "edge", "reflect" or
    "symmetric"."""
    x = to_output(arg)
    inputs = [x, i64_operand(pads_begin), i64_operand(pads_end)]
    if arg_pad_value is not None:
        inputs.append(arg_pad_value if isinstance(arg_pad_value, (Node, Output)) else
                      to_output(np.asarray(arg_pad_value, dtype=x.element_type.dtype)))
    return set_name(Pad(inputs, pad_mode=str(pad_mode).lower()), name)


_ONNX_PAD_MODES = {"constant": "constant", "edge": "edge", "reflect": "reflect"}


def _pad_mode(ctx) -> str:
    mode = ctx.attr("mode", "constant")
    if mode not in _ONNX_PAD_MODES:
        ctx.error(f"pad mode '{mode}' is not supported")
    return _ONNX_PAD_MODES[mode]


@onnx_rule("Pad", since=1)
def _import_pad_v2(ctx):
    x = ctx.inputs[0]
    pads = ctx.attr("pads", None) or ctx.attr("paddings", [])
    n = len(pads) // 2
    value = np.asarray(ctx.attr("value", 0.0)).astype(x.element_type.dtype)
    return Pad([x, i64_operand(pads[:n]), i64_operand(pads[n:]), to_output(value)],
               pad_mode=_pad_mode(ctx)).output(0)


def _pads_for_axes(ctx, pads: Output, axes: Output, rank: int) -> tuple[Output, Output]:
    """Full-rank pads_begin/pads_end from ONNX 18 pads over ``axes`` (zeros elsewhere)."""
    ax, values = axes.value, pads.value
    if ax is not None and values is not None:
        ax = [int(a) + rank if a < 0 else int(a) for a in np.asarray(ax).reshape(-1)]
        flat = [int(v) for v in np.asarray(values).reshape(-1)]
        full = [0] * (2 * rank)
        for i, a in enumerate(ax):
            full[a], full[rank + a] = flat[i], flat[len(ax) + i]
        return i64_operand(full[:rank]), i64_operand(full[rank:])
    n = axes.partial_shape
    if not n.is_static:
        ctx.error("axes must have a static shape")
    n = n.to_shape()[0] if len(n) else 1
    zeros = i64_operand([0] * rank)
    halves = [Slice([pads, i64_operand([lo]), i64_operand([lo + n]), i64_operand([1])]).output(0)
              for lo in (0, n)]
    return tuple(ScatterUpdate([zeros, axes, h, i64_operand(0)]).output(0) for h in halves)


@onnx_rule("Pad", since=11)
def _import_pad(ctx):
    x, pads = ctx.inputs[0], ctx.inputs[1]
    value, axes = ctx.input(2), ctx.input(3)
    ps = x.partial_shape
    if not ps.rank_is_static:
        ctx.error("Pad needs an input of static rank")
    rank = len(ps)
    values = pads.value
    if axes is not None:
        begin, end = _pads_for_axes(ctx, pads, axes, rank)
    elif values is not None:
        flat = [int(v) for v in np.asarray(values).reshape(-1)]
        begin, end = i64_operand(flat[:rank]), i64_operand(flat[rank:])
    else:
        begin = Slice([pads, i64_operand([0]), i64_operand([rank]), i64_operand([1])]).output(0)
        end = Slice([pads, i64_operand([rank]), i64_operand([2 * rank]),
                     i64_operand([1])]).output(0)
    if ctx.attr("mode", "constant") == "wrap":
        return _wrap_pad(ctx, x, begin, end)
    inputs = [x, begin, end]
    if value is not None:
        vps = value.partial_shape
        if vps.rank_is_static and len(vps) == 1:
            value = Squeeze([value]).output(0)
        inputs.append(value)
    return Pad(inputs, pad_mode=_pad_mode(ctx)).output(0)


def _wrap_pad(ctx, x: Output, begin: Output, end: Output) -> Output:
    """ONNX 19 wrap padding (OpenVINO's Pad has no such mode): one Gather per padded axis.
    As onnxruntime does, negative pads crop first and the rest wraps around what is left:
    ``index = crop_begin + (i - pad_begin) mod kept``. Constant indices when pads and dims
    are known, else computed with Range and FloorMod."""
    b, e = begin.value, end.value
    for axis in range(len(x.partial_shape)):
        d = x.partial_shape[axis]
        if b is not None and e is not None and d.is_static:
            pb, pe = int(np.asarray(b)[axis]), int(np.asarray(e)[axis])
            if pb == 0 and pe == 0:
                continue
            kept = d.min + min(pb, 0) + min(pe, 0)
            pos = np.arange(kept + max(pb, 0) + max(pe, 0)) - max(pb, 0)
            idx = i64_operand(max(-pb, 0) + np.mod(pos, kept))
        else:
            idx = _wrap_indices(ctx, x, begin, end, axis)
        x = Gather([x, idx, i64_operand(axis)]).output(0)
    return x


def _wrap_indices(ctx, x: Output, begin: Output, end: Output, axis: int) -> Output:
    zero = i64_operand(0)
    dim = Gather([ShapeOf([x]).output(0), i64_operand(axis), zero]).output(0)
    pb, pe = (Gather([v, i64_operand(axis), zero]).output(0) for v in (begin, end))
    kept = add(add(dim, minimum(pb, zero)), minimum(pe, zero))
    grow_b, grow_e = maximum(pb, zero), maximum(pe, zero)
    n = add(add(kept, grow_b), grow_e)
    pos = subtract(Range([zero, to_output(n), i64_operand(1)]).output(0), grow_b)
    crop = maximum(subtract(zero, pb), zero)
    return to_output(add(crop, floor_mod(pos, kept)))


@onnx_export(Pad)
def _export_pad(node, ectx):
    if node.pad_mode == "symmetric":
        export_error(node, "ONNX Pad has no symmetric mode")
    ins = ectx.inputs(node)
    begin, end = const_ints(node, 1), const_ints(node, 2)
    if begin is not None and end is not None:
        pads = ectx.constant(np.asarray(begin + end, dtype=np.int64))
    else:
        pads = ectx.fresh("pads")
        ectx.add_node("Concat", ins[1:3], [pads], axis=0)
    ectx.add_node("Pad", [ins[0], pads] + ins[3:4], ectx.outputs(node), mode=node.pad_mode)
