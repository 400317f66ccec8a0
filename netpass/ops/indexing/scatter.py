"""ScatterUpdate, ScatterElementsUpdate and ScatterNDUpdate: write updates at given indices."""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ...core.node import OP_TYPES, Node
from ...core.shape import PartialShape
from ..base import set_name, to_output
from ..registry import export_error, onnx_export, onnx_rule
from ..shape_inputs import i64_operand
from .common import _check_indices, _const_axis, _scalar_axis

__all__ = ["scatter_update", "scatter_elements_update", "scatter_nd_update"]


class ScatterUpdate(Node):
    """ScatterUpdate v3: ``data`` with the slices at ``indices`` along ``axis`` replaced by
    ``updates`` (shape ``data[:axis] + indices.shape + data[axis+1:]``)."""

    type_name = "ScatterUpdate"
    version = "opset3"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 4, "expects inputs (data, indices, updates, axis)")
        _check_indices(self, 1)
        et = self.get_input_element_type(0)
        self.check(et.merge(self.get_input_element_type(2)) is not None,
                   "updates type {} differs from data type {}", self.get_input_element_type(2), et)
        data = self.get_input_partial_shape(0)
        _scalar_axis(self, 3, len(data) if data.rank_is_static else None)
        self.set_output_type(0, et, data)

    def evaluate(self, inputs):
        data, idx, upd, axis = inputs
        axis = int(np.asarray(axis).reshape(-1)[0]) % data.ndim
        out = data.copy()
        idx = idx.astype(np.int64)
        idx = np.where(idx < 0, idx + data.shape[axis], idx)
        moved = np.moveaxis(out, axis, 0)
        u = upd.reshape(data.shape[:axis] + (idx.size,) + data.shape[axis + 1:])
        u = np.moveaxis(u, axis, 0)
        for n, i in enumerate(idx.reshape(-1)):
            moved[i] = u[n]
        return [out]


_REDUCTIONS = ("none", "sum", "prod", "min", "max", "mean")


class ScatterElementsUpdate(Node):
    """ScatterElementsUpdate v12: ``data[..indices[i,j]..] (op)= updates[i,j]`` along ``axis``
    with ``reduction`` none/sum/prod/min/max/mean; ``use_init_val`` keeps data in the
    reduction."""

    type_name = "ScatterElementsUpdate"
    version = "opset12"
    IR_VERSIONS = ("opset3", "opset12")  # v3: no reduction (v12's default, none)
    ATTRS = {"reduction": "none", "use_init_val": True}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 4, "expects inputs (data, indices, updates, axis)")
        self.check(self.reduction in _REDUCTIONS, "unknown reduction '{}'", self.reduction)
        _check_indices(self, 1)
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        idx, upd = self.get_input_partial_shape(1), self.get_input_partial_shape(2)
        self.check(idx.compatible(upd), "indices shape {} differs from updates shape {}", idx, upd)
        if data.rank_is_static and idx.rank_is_static:
            self.check(len(data) == len(idx), f"indices rank {len(idx)} != data rank {len(data)}")
        _scalar_axis(self, 3, len(data) if data.rank_is_static else None)
        self.set_output_type(0, et, data)

    def evaluate(self, inputs):
        data, idx, upd, axis = inputs
        axis = int(np.asarray(axis).reshape(-1)[0]) % data.ndim
        idx = idx.astype(np.int64)
        idx = np.where(idx < 0, idx + data.shape[axis], idx)
        coords = list(np.indices(idx.shape, sparse=False))
        coords[axis] = idx
        target = tuple(c.reshape(-1) for c in coords)
        values = upd.reshape(-1)
        return [_scatter_reduce(data, target, values, self.reduction, self.use_init_val)]


def _scatter_reduce(data: np.ndarray, target: tuple, values: np.ndarray, reduction: str,
                    use_init_val: bool) -> np.ndarray:
    """Scatter ``values`` to ``data[target]`` in order, combining repeats by ``reduction``."""
    out = data.copy()
    if reduction == "none":
        out[target] = values  # later duplicates win, as in the reference implementations
        return out
    flat = np.ravel_multi_index(target, data.shape) if values.size else np.zeros(0, np.int64)
    res = out.reshape(-1)
    touched = np.unique(flat)
    if not use_init_val:
        neutral = {"sum": 0, "mean": 0, "prod": 1,
                   "min": _extreme(data.dtype, True), "max": _extreme(data.dtype, False)}
        res[touched] = neutral[reduction]
    if reduction in ("sum", "mean"):
        acc = res.astype(np.float64) if reduction == "mean" else res
        np.add.at(acc, flat, values)
        if reduction == "mean":
            counts = np.bincount(flat, minlength=res.size)[touched] + (1 if use_init_val else 0)
            mean = acc[touched] / counts
            res[touched] = np.floor(mean) if data.dtype.kind in "iu" else mean
        return res.reshape(data.shape)
    ufunc = {"prod": np.multiply, "min": np.minimum, "max": np.maximum}[reduction]
    ufunc.at(res, flat, values)
    return res.reshape(data.shape)


def _extreme(dtype: np.dtype, high: bool):
    if dtype.kind == "b":
        return high
    info = np.iinfo(dtype) if dtype.kind in "iu" else ml_dtypes.finfo(dtype)  # (bf16 too)
    return info.max if high else info.min


class ScatterNDUpdate(Node):
    """ScatterNDUpdate v3 (in opset 4): ``data`` with the elements or slices at
    ``indices[..., :K]`` replaced by ``updates``."""

    type_name = "ScatterNDUpdate"
    version = "opset4"
    reduction: str = "none"  # an attribute from opset 15 on (ScatterNDUpdate15)

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 3, "expects inputs (data, indices, updates)")
        self.check(self.reduction in ("none", "sum", "sub", "prod", "min", "max"),
                   "unknown reduction '{}'", self.reduction)
        _check_indices(self, 1)
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        idx, upd = self.get_input_partial_shape(1), self.get_input_partial_shape(2)
        if data.rank_is_static and idx.rank_is_static and upd.rank_is_static and len(idx) \
                and idx[-1].is_static:
            k = idx[-1].min
            self.check(k <= len(data), "indices last dim {} exceeds data rank {}", k, len(data))
            expect = PartialShape(list(idx.dims[:-1]) + list(data.dims[k:]))
            self.check(upd.compatible(expect), "updates shape {} must be {}", upd, expect)
        self.set_output_type(0, et, data)

    def evaluate(self, inputs):
        data, idx, upd = inputs
        k = idx.shape[-1]
        idx = idx.astype(np.int64).reshape(-1, k)
        idx = np.where(idx < 0, idx + np.asarray(data.shape[:k]), idx)
        out = data.copy()
        slices = upd.reshape((idx.shape[0],) + data.shape[k:])
        ops = {"sum": np.add, "sub": np.subtract, "prod": np.multiply, "min": np.minimum,
               "max": np.maximum}
        for row, u in zip(idx, slices):
            t = tuple(row)
            out[t] = u if self.reduction == "none" else ops[self.reduction](out[t], u)
        return [out]


class ScatterNDUpdate15(ScatterNDUpdate):
    """ScatterNDUpdate v15: combines ``updates`` into ``data`` by ``reduction`` (none, sum,
    sub, prod, min, max), repeated indices applied in order."""

    type_name = "ScatterNDUpdate"
    version = "opset15"
    ATTRS = {"reduction": "none"}


# The older versions stay the classes ``netpass.ops.<Type>`` names; IR reading picks the
# exact version by (type, opset).
OP_TYPES["ScatterNDUpdate"] = ScatterNDUpdate


def scatter_update(data: Any, indices: Any, updates: Any, axis: Any,
                   name: str | None = None) -> Node:
    """ScatterUpdate-3: a copy of ``data`` whose slices at ``indices`` along ``axis`` are replaced
    by ``updates`` (shape: ``indices.shape`` put in place of that axis)."""
    return set_name(ScatterUpdate([to_output(data), i64_operand(indices), to_output(updates),
                                   i64_operand(axis)]), name)


def scatter_elements_update(data: Any, indices: Any, updates: Any, axis: Any,
                            reduction: str = "none", use_init_val: bool = True,
                            name: str | None = None) -> Node:
    """ScatterElementsUpdate-12: a copy of ``data`` where, along ``axis``, the element at each
    index of ``indices`` becomes (or, with ``reduction`` "sum", "prod", "min", "max", "mean", is
    combined with) the matching element of ``updates``; ``use_init_val=False`` leaves the original
    value out of the reduction."""
    return set_name(ScatterElementsUpdate(
        [to_output(data), i64_operand(indices), to_output(updates), i64_operand(axis)],
        reduction=str(reduction).lower(), use_init_val=bool(use_init_val)), name)


def scatter_nd_update(data: Any, indices: Any, updates: Any, reduction: str | None = None,
                      name: str | None = None) -> Node:
    """ScatterNDUpdate: a copy of ``data`` where the slices addressed by the last dim of
    ``indices`` become ``updates``; with ``reduction`` ("sum", "sub", "prod", "min", "max") this is
    ScatterNDUpdate-15, combining instead of replacing."""
    inputs = [to_output(data), i64_operand(indices), to_output(updates)]
    if reduction is None:
        return set_name(ScatterNDUpdate(inputs), name)
    return set_name(ScatterNDUpdate15(inputs, reduction=str(reduction).lower()), name)


_ONNX_REDUCTIONS = {"none": "none", "add": "sum", "mul": "prod", "min": "min", "max": "max"}


def _reduction(ctx) -> str:
    r = ctx.attr("reduction", "none")
    if r not in _ONNX_REDUCTIONS:
        ctx.error(f"reduction '{r}' is not supported")
    return _ONNX_REDUCTIONS[r]


@onnx_rule("Scatter", since=9)
@onnx_rule("ScatterElements", since=11)
def _import_scatter_elements(ctx):
    return ScatterElementsUpdate([ctx.inputs[0], ctx.inputs[1], ctx.inputs[2],
                                  i64_operand(ctx.attr("axis", 0))],
                                 reduction=_reduction(ctx)).output(0)


@onnx_rule("ScatterND", since=11)
def _import_scatter_nd(ctx):
    inputs = [ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]]
    reduction = _reduction(ctx)
    if reduction == "none":
        return ScatterNDUpdate(inputs).output(0)
    return ScatterNDUpdate15(inputs, reduction=reduction).output(0)


@onnx_export(ScatterUpdate)
def _export_scatter_update(node, ectx):
    if _const_axis(node, 3) != 0:
        export_error(node, "only axis 0 maps to ONNX ScatterND")
    ins = ectx.inputs(node)
    idx = ectx.fresh("indices")
    ectx.add_node("Unsqueeze", [ins[1], ectx.constant(np.asarray([-1], dtype=np.int64))], [idx])
    ectx.add_node("ScatterND", [ins[0], idx, ins[2]], ectx.outputs(node))


_TO_ONNX_REDUCTION = {"none": "none", "sum": "add", "prod": "mul", "min": "min", "max": "max"}


@onnx_export(ScatterElementsUpdate)
def _export_scatter_elements(node, ectx):
    if node.reduction not in _TO_ONNX_REDUCTION or (node.reduction != "none"
                                                    and not node.use_init_val):
        export_error(node, f"reduction '{node.reduction}' has no ONNX equivalent")
    ectx.add_node("ScatterElements", ectx.inputs(node)[:3], ectx.outputs(node),
                  axis=_const_axis(node, 3), reduction=_TO_ONNX_REDUCTION[node.reduction])


@onnx_export(ScatterNDUpdate)
def _export_scatter_nd(node, ectx):
    if node.reduction not in _TO_ONNX_REDUCTION:
        export_error(node, f"reduction '{node.reduction}' has no ONNX equivalent")
    ectx.add_node("ScatterND", ectx.inputs(node), ectx.outputs(node),
                  reduction=_TO_ONNX_REDUCTION[node.reduction])
