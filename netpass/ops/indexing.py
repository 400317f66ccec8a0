"""Indexing: Gather, GatherElements, GatherND, ScatterUpdate, ScatterElementsUpdate,
ScatterNDUpdate and OneHot.

Gather also carries shape math (``Gather(ShapeOf(x), [0])`` picks the batch dim), so it
propagates partial values: picked dims keep their symbols.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import OP_TYPES, Node, Output
from ..core.shape import PartialShape
from ..errors import UnsupportedOpError
from .base import normalize_axis, set_name, to_output
from .movement import Reshape, _i64, check_shape_input, const_ints

__all__ = ["gather", "gather_elements", "gather_nd", "scatter_update",
           "scatter_elements_update", "scatter_nd_update", "one_hot"]


def _scalar_axis(node: Node, i: int, rank: int | None) -> int | None:
    check_shape_input(node, i, "axis")
    axis = const_ints(node, i)
    if axis is None or rank is None:
        return None
    node.check(len(axis) == 1, "axis must be a scalar, got {}", axis)
    return normalize_axis(node, axis[0], rank)


def _check_indices(node: Node, i: int) -> None:
    et = node.get_input_element_type(i)
    node.check(et.is_dynamic or et.is_integral, "indices (input {}) must be integer, got {}", i, et)


# -- Gather ---------------------------------------------------------------------------------
class Gather(Node):
    """Gather v8: pick ``indices`` along ``axis`` with ``batch_dims`` leading dims shared by
    data and indices. Negative indices count from the end; out-of-range ones give zeros."""

    type_name = "Gather"
    version = "opset8"
    ATTRS = {"batch_dims": 0}

    def _batch_dims(self, idx_rank: int | None) -> int | None:
        b = int(self.batch_dims)
        if b < 0:
            if idx_rank is None:
                return None
            b += idx_rank
        self.check(b >= 0 and (idx_rank is None or b <= idx_rank),
                   "batch_dims {} out of range for indices rank {}", self.batch_dims, idx_rank)
        return b

    def axis(self) -> int | None:
        data = self.get_input_partial_shape(0)
        return _scalar_axis(self, 2, len(data) if data.rank_is_static else None)

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 3, "expects inputs (data, indices, axis)")
        _check_indices(self, 1)
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        idx = self.get_input_partial_shape(1)
        axis = self.axis()
        b = self._batch_dims(len(idx) if idx.rank_is_static else None)
        if not data.rank_is_static or not idx.rank_is_static or axis is None or b is None:
            rank = None
            if data.rank_is_static and idx.rank_is_static and b is not None:
                rank = len(data) + len(idx) - 1 - b
            self.set_output_type(0, et, PartialShape.dynamic(rank))
            return
        self.check(axis >= b, "axis {} must be >= batch_dims {}", axis, b)
        self.check(b <= len(data), "batch_dims {} exceeds data rank {}", b, len(data))
        batch = []
        for k in range(b):
            m = data[k].merge(idx[k])
            self.check(m is not None, f"batch dim {k} differs: data {data[k]}, indices {idx[k]}")
            batch.append(m)
        dims = batch + list(data.dims[b:axis]) + list(idx.dims[b:]) + list(data.dims[axis + 1:])
        self.set_output_type(0, et, PartialShape(dims))

    def infer_values(self) -> None:
        pv = self.input_partial_value(0)
        data = self.get_input_partial_shape(0)
        indices = self.input_constant(1)
        if pv is None or indices is None or not data.rank_is_static or len(data) > 1 \
                or self.axis() not in (0, None) or np.asarray(indices).ndim > 1:
            return
        n = len(pv)
        picked = []
        for i in np.asarray(indices).reshape(-1):
            i = int(i)
            if not -n <= i < n:
                return
            picked.append(pv[i])
        self.set_output_partial_value(0, picked)

    def evaluate(self, inputs):
        data, indices, axis = inputs
        axis = int(np.asarray(axis).reshape(-1)[0])
        axis = axis + data.ndim if axis < 0 else axis
        b = int(self.batch_dims)
        b = b + indices.ndim if b < 0 else b
        dim = data.shape[axis]
        idx = indices.astype(np.int64)
        idx = np.where(idx < 0, idx + dim, idx)
        valid = (idx >= 0) & (idx < dim)
        safe = np.where(valid, idx, 0)
        lead = data.shape[:b]
        nb = int(np.prod(lead, dtype=np.int64))
        d2 = data.reshape((nb,) + data.shape[b:])
        i2 = safe.reshape((nb,) + idx.shape[b:])
        v2 = valid.reshape((nb,) + idx.shape[b:])
        a = axis - b
        outs = []
        for k in range(nb):
            taken = np.take(d2[k], i2[k], axis=a)
            mask = v2[k].reshape((1,) * a + v2[k].shape + (1,) * (d2.ndim - 2 - a))
            outs.append(np.where(mask, taken, np.zeros((), dtype=data.dtype)))
        out_shape = lead + data.shape[b:axis] + idx.shape[b:] + data.shape[axis + 1:]
        if nb == 0:
            return [np.zeros(out_shape, dtype=data.dtype)]
        return [np.stack(outs).reshape(out_shape).astype(data.dtype, copy=False)]


class GatherElements(Node):
    """GatherElements v6: ``out[i][j][k] = data[i][indices[i][j][k]][k]`` along ``axis``."""

    type_name = "GatherElements"
    version = "opset6"
    ATTRS = {"axis": 0}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, indices)")
        _check_indices(self, 1)
        data = self.get_input_partial_shape(0)
        idx = self.get_input_partial_shape(1)
        et = self.get_input_element_type(0)
        if data.rank_is_static and idx.rank_is_static:
            self.check(len(data) == len(idx), f"data rank {len(data)} != indices rank {len(idx)}")
        rank = len(data) if data.rank_is_static else (len(idx) if idx.rank_is_static else None)
        if rank is None:
            self.set_output_type(0, et, PartialShape(None))
            return
        axis = normalize_axis(self, self.axis, rank)
        if not idx.rank_is_static:
            self.set_output_type(0, et, PartialShape(
                [d if k != axis else Dimension() for k, d in enumerate(data)]))
            return
        dims = list(idx.dims)
        if data.rank_is_static:
            for k in range(rank):
                if k != axis:
                    m = idx[k].merge(data[k])
                    self.check(m is not None, f"dim {k} differs: data {data[k]}, indices {idx[k]}")
                    dims[k] = m
        self.set_output_type(0, et, PartialShape(dims))

    def evaluate(self, inputs):
        data, idx = inputs
        axis = self.axis % data.ndim
        idx = idx.astype(np.int64)
        idx = np.where(idx < 0, idx + data.shape[axis], idx)
        return [np.take_along_axis(data, idx, axis=axis)]


class GatherND(Node):
    """GatherND v8: ``indices[..., :K]`` address slices of ``data`` after ``batch_dims``
    shared leading dims; the batch dims stay unflattened in the output."""

    type_name = "GatherND"
    version = "opset8"
    ATTRS = {"batch_dims": 0}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, indices)")
        _check_indices(self, 1)
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        idx = self.get_input_partial_shape(1)
        b = int(self.batch_dims)
        if not (data.rank_is_static and idx.rank_is_static and len(idx) and idx[-1].is_static):
            self.set_output_type(0, et, PartialShape(None))
            return
        k = idx[-1].min
        self.check(b + k <= len(data), f"indices last dim {k} + batch_dims {b} exceed data "
                   f"rank {len(data)}")
        self.check(b < len(idx), "batch_dims {} must be less than indices rank {}", b, len(idx))
        batch = []
        for i in range(b):
            m = data[i].merge(idx[i])
            self.check(m is not None, f"batch dim {i} differs: data {data[i]}, indices {idx[i]}")
            batch.append(m)
        self.set_output_type(0, et, PartialShape(
            batch + list(idx.dims[b:-1]) + list(data.dims[b + k:])))

    def evaluate(self, inputs):
        data, idx = inputs
        b = int(self.batch_dims)
        k = idx.shape[-1]
        lead = data.shape[:b]
        nb = int(np.prod(lead, dtype=np.int64))
        d2 = data.reshape((nb,) + data.shape[b:])
        i2 = idx.astype(np.int64).reshape((nb, -1, k))
        outs = []
        for n in range(nb):
            ii = i2[n]
            ii = np.where(ii < 0, ii + np.asarray(d2.shape[1:1 + k]), ii)
            outs.append(d2[n][tuple(ii.T)])
        out_shape = lead + idx.shape[b:-1] + data.shape[b + k:]
        if nb == 0:
            return [np.zeros(out_shape, dtype=data.dtype)]
        return [np.stack(outs).reshape(out_shape)]


# -- Scatter family -------------------------------------------------------------------------
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
    info = np.iinfo(dtype) if dtype.kind in "iu" else np.finfo(dtype)
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


# -- OneHot ---------------------------------------------------------------------------------
class OneHot(Node):
    """OneHot v1: a new ``axis`` of length ``depth``, ``on_value`` where it equals the index
    and ``off_value`` elsewhere; negative indices give all off values."""

    type_name = "OneHot"
    version = "opset1"
    ATTRS = {"axis": -1}
    negative_indices_mode: str = "ignore_negative"  # an attribute from opset 16 on (OneHot16)

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 4,
                   "expects inputs (indices, depth, on_value, off_value)")
        self.check(self.negative_indices_mode in ("ignore_negative", "normalize"),
                   "unknown negative_indices_mode '{}'", self.negative_indices_mode)
        _check_indices(self, 0)
        et = self.get_input_element_type(2)
        self.check(et.merge(self.get_input_element_type(3)) is not None,
                   f"on_value type {et} differs from off_value type "
                   f"{self.get_input_element_type(3)}")
        idx = self.get_input_partial_shape(0)
        depth = const_ints(self, 1)
        if not idx.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        rank = len(idx) + 1
        axis = normalize_axis(self, self.axis, rank)
        if depth is not None:
            self.check(len(depth) == 1 and depth[0] >= 0, f"depth must be a non-negative scalar, "
                       f"got {depth}")
        d = Dimension(depth[0]) if depth is not None else Dimension()
        dims = list(idx.dims)
        dims.insert(axis, d)
        self.set_output_type(0, et, PartialShape(dims))

    def evaluate(self, inputs):
        idx, depth, on, off = inputs
        depth = int(np.asarray(depth).reshape(-1)[0])
        idx = idx.astype(np.int64)
        if self.negative_indices_mode == "normalize":
            idx = np.where(idx < 0, idx + depth, idx)
        axis = self.axis % (idx.ndim + 1)
        hot = np.expand_dims(idx, axis) == np.arange(depth).reshape(
            (1,) * axis + (depth,) + (1,) * (idx.ndim - axis))
        dt = self._outs[0].et.dtype or np.asarray(on).dtype
        return [np.where(hot, np.asarray(on).reshape(()), np.asarray(off).reshape(())).astype(dt)]


class OneHot16(OneHot):
    """OneHot v16: ``negative_indices_mode`` "normalize" counts negative indices from
    ``depth`` (as ONNX does); "ignore_negative" behaves as v1."""

    type_name = "OneHot"
    version = "opset16"
    ATTRS = {"axis": -1, "negative_indices_mode": "ignore_negative"}


# The older versions stay the classes ``netpass.ops.<Type>`` names; IR reading picks the
# exact version by (type, opset).
OP_TYPES["ScatterNDUpdate"] = ScatterNDUpdate
OP_TYPES["OneHot"] = OneHot


# -- factories ------------------------------------------------------------------------------
def gather(data: Any, indices: Any, axis: Any, batch_dims: int = 0,
           name: str | None = None) -> Node:
    return set_name(Gather([to_output(data), _i64(indices), _i64(axis)],
                           batch_dims=int(batch_dims)), name)


def gather_elements(data: Any, indices: Any, axis: int = 0, name: str | None = None) -> Node:
    return set_name(GatherElements([to_output(data), _i64(indices)], axis=int(axis)), name)


def gather_nd(data: Any, indices: Any, batch_dims: int = 0, name: str | None = None) -> Node:
    return set_name(GatherND([to_output(data), _i64(indices)], batch_dims=int(batch_dims)), name)


def scatter_update(data: Any, indices: Any, updates: Any, axis: Any,
                   name: str | None = None) -> Node:
    return set_name(ScatterUpdate([to_output(data), _i64(indices), to_output(updates),
                                   _i64(axis)]), name)


def scatter_elements_update(data: Any, indices: Any, updates: Any, axis: Any,
                            reduction: str = "none", use_init_val: bool = True,
                            name: str | None = None) -> Node:
    return set_name(ScatterElementsUpdate(
        [to_output(data), _i64(indices), to_output(updates), _i64(axis)],
        reduction=str(reduction).lower(), use_init_val=bool(use_init_val)), name)


def scatter_nd_update(data: Any, indices: Any, updates: Any, reduction: str | None = None,
                      name: str | None = None) -> Node:
    inputs = [to_output(data), _i64(indices), to_output(updates)]
    if reduction is None:
        return set_name(ScatterNDUpdate(inputs), name)
    return set_name(ScatterNDUpdate15(inputs, reduction=str(reduction).lower()), name)


def one_hot(indices: Any, depth: Any, on_value: Any, off_value: Any, axis: int,
            negative_indices_mode: str | None = None, name: str | None = None) -> Node:
    inputs = [_i64(indices), _i64(depth), to_output(on_value), to_output(off_value)]
    if negative_indices_mode is None:
        return set_name(OneHot(inputs, axis=int(axis)), name)
    return set_name(OneHot16(inputs, axis=int(axis),
                             negative_indices_mode=str(negative_indices_mode).lower()), name)


# -- ONNX import ----------------------------------------------------------------------------
from .registry import onnx_export, onnx_rule  # noqa: E402


@onnx_rule("Gather")
def _import_gather(ctx):
    return Gather([ctx.inputs[0], ctx.inputs[1], _i64(ctx.attr("axis", 0))]).output(0)


@onnx_rule("GatherElements", since=11)
def _import_gather_elements(ctx):
    return GatherElements([ctx.inputs[0], ctx.inputs[1]], axis=ctx.attr("axis", 0)).output(0)


@onnx_rule("GatherND", since=11)
def _import_gather_nd(ctx):
    return GatherND([ctx.inputs[0], ctx.inputs[1]], batch_dims=ctx.attr("batch_dims", 0)).output(0)


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
                                  _i64(ctx.attr("axis", 0))], reduction=_reduction(ctx)).output(0)


@onnx_rule("ScatterND", since=11)
def _import_scatter_nd(ctx):
    inputs = [ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]]
    reduction = _reduction(ctx)
    if reduction == "none":
        return ScatterNDUpdate(inputs).output(0)
    return ScatterNDUpdate15(inputs, reduction=reduction).output(0)


def _as_i64(ctx, x: Output, what: str) -> Output:
    """ONNX allows float indices and depth; OpenVINO's OneHot wants integers."""
    if x.element_type.is_integral:
        return x
    from .. import opset
    if not hasattr(opset, "convert"):
        ctx.error(f"a float {what} needs Convert")
    return to_output(opset.convert(x, "i64"))


@onnx_rule("OneHot", since=9)
def _import_one_hot(ctx):
    indices, depth, values = ctx.inputs
    indices = _as_i64(ctx, indices, "indices")
    if depth.value is not None:
        depth = _i64(np.asarray(depth.value).reshape(()).astype(np.int64))
    else:
        depth = Reshape([_as_i64(ctx, depth, "depth"), _i64([])], special_zero=False).output(0)
    off = Gather([values, _i64(0), _i64(0)]).output(0)
    on = Gather([values, _i64(1), _i64(0)]).output(0)
    return OneHot16([indices, depth, on, off], axis=ctx.attr("axis", -1),
                    negative_indices_mode="normalize").output(0)


# -- ONNX export (opset 17) -----------------------------------------------------------------
def _export_error(node: Node, reason: str) -> None:
    raise UnsupportedOpError(node.type_name, "", 17, node.friendly_name,
                             f"cannot be written as ONNX: {reason}")


def _const_axis(node: Node, i: int) -> int:
    v = const_ints(node, i)
    if v is None:
        _export_error(node, f"axis (input {i}) must be constant")
    return v[0]  # type: ignore[index]


@onnx_export(Gather)
def _export_gather(node, ectx):
    if node.batch_dims != 0:
        _export_error(node, "ONNX Gather has no batch_dims")
    ectx.add_node("Gather", ectx.inputs(node)[:2], ectx.outputs(node), axis=_const_axis(node, 2))


@onnx_export(GatherElements)
def _export_gather_elements(node, ectx):
    ectx.add_node("GatherElements", ectx.inputs(node), ectx.outputs(node), axis=node.axis)


@onnx_export(GatherND)
def _export_gather_nd(node, ectx):
    ectx.add_node("GatherND", ectx.inputs(node), ectx.outputs(node),
                  batch_dims=int(node.batch_dims))


@onnx_export(ScatterUpdate)
def _export_scatter_update(node, ectx):
    if _const_axis(node, 3) != 0:
        _export_error(node, "only axis 0 maps to ONNX ScatterND")
    ins = ectx.inputs(node)
    idx = ectx.fresh("indices")
    ectx.add_node("Unsqueeze", [ins[1], ectx.constant(np.asarray([-1], dtype=np.int64))], [idx])
    ectx.add_node("ScatterND", [ins[0], idx, ins[2]], ectx.outputs(node))


_TO_ONNX_REDUCTION = {"none": "none", "sum": "add", "prod": "mul", "min": "min", "max": "max"}


@onnx_export(ScatterElementsUpdate)
def _export_scatter_elements(node, ectx):
    if node.reduction not in _TO_ONNX_REDUCTION or (node.reduction != "none"
                                                    and not node.use_init_val):
        _export_error(node, f"reduction '{node.reduction}' has no ONNX equivalent")
    ectx.add_node("ScatterElements", ectx.inputs(node)[:3], ectx.outputs(node),
                  axis=_const_axis(node, 3), reduction=_TO_ONNX_REDUCTION[node.reduction])


@onnx_export(ScatterNDUpdate)
def _export_scatter_nd(node, ectx):
    if node.reduction not in _TO_ONNX_REDUCTION:
        _export_error(node, f"reduction '{node.reduction}' has no ONNX equivalent")
    ectx.add_node("ScatterND", ectx.inputs(node), ectx.outputs(node),
                  reduction=_TO_ONNX_REDUCTION[node.reduction])


@onnx_export(OneHot)
def _export_one_hot(node, ectx):
    if node.negative_indices_mode != "normalize":
        _export_error(node, "ONNX OneHot always counts negative indices from depth")
    ins = ectx.inputs(node)
    values = ectx.fresh("values")
    off, on = ectx.fresh("off"), ectx.fresh("on")
    one = ectx.constant(np.asarray([0], dtype=np.int64))
    ectx.add_node("Unsqueeze", [ins[3], one], [off])
    ectx.add_node("Unsqueeze", [ins[2], one], [on])
    ectx.add_node("Concat", [off, on], [values], axis=0)
    ectx.add_node("OneHot", [ins[0], ins[1], values], ectx.outputs(node), axis=node.axis)
