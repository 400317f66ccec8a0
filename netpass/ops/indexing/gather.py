"""Gather, GatherElements and GatherND: read elements at given indices."""
from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import OP_TYPES, Node
from ...core.ports import Output, _connect, _Port
from ...core.shape import PartialShape
from ..base import normalize_axis, set_name, to_output
from ..registry import export_error, onnx_export, onnx_rule
from ..shape_inputs import i64_operand
from .common import _check_indices, _const_axis, _scalar_axis

__all__ = ["STRICT_INDICES", "gather", "gather_elements", "gather_nd", "strict_index_bound"]


class Gather(Node):
    """Gather v8: pick ``indices`` along ``axis`` with ``batch_dims`` leading dims shared by
    data and indices. Negative indices count from the end; out-of-range ones give zeros."""

    type_name = "Gather"
    version = "opset8"
    ATTRS = {"batch_dims": 0}

    @staticmethod
    def of(value: Output, indices_value: Output, axis_value: Output, axis: int,
           count: int) -> Gather:
        """``Gather([value, indices_value, axis_value])`` (batch_dims 0), built directly when
        ``axis`` (the content of ``axis_value``, normalized) and ``count`` (the length of the
        1-D integer ``indices_value``) settle the output: the input dims with the axis dim
        replaced. Gather sinking builds Gathers by the thousand, and inference was most of
        building one. A value of dynamic rank or with known elements, or indices that are not
        1-D, take the generic way."""
        port = value.node._outs[value.index]
        dims = port.ps._dims
        idx = indices_value.node._outs[indices_value.index]
        idx_dims = idx.ps._dims
        if dims is None or not 0 <= axis < len(dims) or port.val is not None \
                or port.pval is not None or idx_dims is None or len(idx_dims) != 1 \
                or not idx.et.is_integral:
            return Gather([value, indices_value, axis_value])
        node = Gather.__new__(Gather)
        node._init_state()
        node.__dict__["batch_dims"] = 0
        node._inputs = [value, indices_value, axis_value]
        me, ref = id(node), weakref.ref(node)
        for i, v in enumerate(node._inputs):
            _connect(v.node._outs[v.index].cons, (me, i), ref)
        out = _Port()
        out.et = port.et
        out.ps = PartialShape.of_dims((*dims[:axis], Dimension.of(count), *dims[axis + 1:]))
        node._outs = (out,)
        return node

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
        # (Reads the ports directly: Gather sinking builds Gathers by the thousand.)
        ins = self._inputs
        self.check(len(ins) == 3, "expects inputs (data, indices, axis)")
        _check_indices(self, 1)
        src, isrc = ins[0], ins[1]
        port = src.node._outs[src.index]
        et, data = port.et, port.ps._dims
        idx = isrc.node._outs[isrc.index].ps._dims
        axis = _scalar_axis(self, 2, None if data is None else len(data))
        b = self._batch_dims(None if idx is None else len(idx))
        if data is None or idx is None or axis is None or b is None:
            rank = None
            if data is not None and idx is not None and b is not None:
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
        self.set_output_type(0, et, PartialShape.of_dims(
            (*batch, *data[b:axis], *idx[b:], *data[axis + 1:])))

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
                    if m is None:
                        self.fail(f"dim {k} differs: data {data[k]}, indices {idx[k]}")
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


class Gather7(Gather):
    """Gather v7 (and v1, which is v7 without ``batch_dims``): v8 without negative indices. A
    negative index is out of range there and gives zeros, as any other out-of-range index
    (OpenVINO's CPU plugin; v8 counts it from the end)."""

    type_name = "Gather"
    version = "opset7"
    IR_VERSIONS = ("opset1", "opset7")

    def evaluate(self, inputs):
        data, indices, axis = inputs
        idx = np.asarray(indices).astype(np.int64)
        return super().evaluate([data, np.where(idx < 0, np.iinfo(np.int64).max, idx), axis])


# The newer version stays the class ``netpass.ops.Gather`` names; IR reading picks the exact
# version by (type, opset).
OP_TYPES["Gather"] = Gather


class GatherND5(GatherND):
    """GatherND v5: as v8, but the ``batch_dims`` leading dims of the output are flattened
    into one (their product), as OpenVINO's opset5 defines it; the elements and their order
    are v8's."""

    type_name = "GatherND"
    version = "opset5"

    def infer_types(self) -> None:
        super().infer_types()
        b = int(self.batch_dims)
        out = self.get_output_partial_shape(0)
        if b > 0 and out.rank_is_static:
            batch = Dimension(1)
            for d in out.dims[:b]:
                batch = batch * d
            self.set_output_type(0, self.get_output_element_type(0),
                                 PartialShape([batch] + list(out.dims[b:])))

    def evaluate(self, inputs):
        out = super().evaluate(inputs)[0]
        b = int(self.batch_dims)
        return [out.reshape((math.prod(out.shape[:b]),) + out.shape[b:]) if b > 0 else out]


# The newer version stays the class ``netpass.ops.GatherND`` names; IR reading picks the exact
# version by (type, opset).
OP_TYPES["GatherND"] = GatherND


def gather(data: Any, indices: Any, axis: Any, batch_dims: int = 0,
           name: str | None = None) -> Node:
    """Gather-8: the slices of ``data`` at ``indices`` along ``axis`` (indices and axis: python
    ints or lists, or graph values; negative indices count from the end); the first
    ``batch_dims`` dims of ``data`` and ``indices`` are batch dims walked together."""
    return set_name(Gather([to_output(data), i64_operand(indices), i64_operand(axis)],
                           batch_dims=int(batch_dims)), name)


def gather_elements(data: Any, indices: Any, axis: int = 0, name: str | None = None) -> Node:
    """GatherElements-6: ``out[..., i, ...] = data[..., indices[..., i, ...], ...]`` along
    ``axis``; ``indices`` has the rank of ``data``."""
    return set_name(GatherElements([to_output(data), i64_operand(indices)], axis=int(axis)), name)


def gather_nd(data: Any, indices: Any, batch_dims: int = 0, name: str | None = None) -> Node:
    """GatherND-8: the slices of ``data`` addressed by the last dim of ``indices`` (each row a
    partial index), after ``batch_dims`` leading batch dims."""
    return set_name(GatherND([to_output(data), i64_operand(indices)], batch_dims=int(batch_dims)),
                    name)


# rt_info key of a Gather whose indices must lie in [-n, n): ONNX's Gather (onnxruntime refuses
# an index outside), where Gather-8 gives zeros.
STRICT_INDICES = "strict_indices"


@onnx_rule("Gather")
def _import_gather(ctx):
    node = Gather([ctx.inputs[0], ctx.inputs[1], i64_operand(ctx.attr("axis", 0))])
    node.rt_info[STRICT_INDICES] = True
    return node.output(0)


def strict_index_bound(value: Output) -> tuple[int, str] | None:
    """``(n, name)`` where ``value`` (a model input's) reaches the indices of strict Gathers
    (``STRICT_INDICES``) through integer Converts and reshapes: the smallest of their data
    dims ``n`` along the gathered axis, and that Gather's name; else None. Lets a caller's
    token or position ids outside an embedding table be refused by name before an inference
    (the runtime's Gather reads zeros there: a wrong answer, not an error)."""
    from ..elementwise import Convert
    from ..movement import Reshape, Squeeze, Unsqueeze
    best: tuple[int, str] | None = None
    todo, seen = [value], set()
    while todo:
        out = todo.pop()
        for port in out.consumers():
            node = port.node
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, Gather) and port.index == 1 and node.rt_info.get(STRICT_INDICES):
                data, axis = node.get_input_partial_shape(0), node.axis()
                if axis is not None and data.rank_is_static and data[axis].is_static:
                    n = data[axis].min
                    if best is None or n < best[0]:
                        best = (n, node.friendly_name)
            elif isinstance(node, (Reshape, Squeeze, Unsqueeze)) and port.index == 0 or \
                    isinstance(node, Convert) and node.output(0).element_type.is_integral:
                todo.append(node.output(0))
    return best


def _cut_to_indices(data: Output, indices: Output, axis: int) -> Output:
    """``data`` cut to the extent of ``indices`` off the axis. ONNX's GatherElements (as
    torch.gather, which exports to it, and onnxruntime) lets indices be shorter than the data
    there, reading from the front; the op (OpenVINO's) wants them equal. Nothing is added
    where the dims are provably equal, or where the indices' dim is not static (a ShapeOf
    here would be an import cycle: such indices stay an error of the op, at run time where
    they differ, as indices longer than the data do)."""
    from ..movement import Slice

    ds, ids = data.partial_shape, indices.partial_shape
    if not (ds.rank_is_static and ids.rank_is_static) or len(ds) != len(ids) or not len(ds):
        return data
    axis %= len(ds)
    cut = [k for k in range(len(ds)) if k != axis and ids[k].is_static
           and not (ds[k].is_static and ds[k].min == ids[k].min)]
    if not cut:
        return data
    return Slice([data, i64_operand([0] * len(cut)), i64_operand([ids[k].min for k in cut]),
                  i64_operand([1] * len(cut)), i64_operand(cut)]).output(0)


@onnx_rule("GatherElements", since=11)
def _import_gather_elements(ctx):
    axis = ctx.attr("axis", 0)
    data = _cut_to_indices(ctx.inputs[0], ctx.inputs[1], axis)
    return GatherElements([data, ctx.inputs[1]], axis=axis).output(0)


@onnx_rule("GatherND", since=11)
def _import_gather_nd(ctx):
    return GatherND([ctx.inputs[0], ctx.inputs[1]], batch_dims=ctx.attr("batch_dims", 0)).output(0)


@onnx_export(Gather)
def _export_gather(node, ectx):
    if node.batch_dims != 0:
        export_error(node, "ONNX Gather has no batch_dims")
    ectx.add_node("Gather", ectx.inputs(node)[:2], ectx.outputs(node), axis=_const_axis(node, 2))


@onnx_export(GatherElements)
def _export_gather_elements(node, ectx):
    ectx.add_node("GatherElements", ectx.inputs(node), ectx.outputs(node), axis=node.axis)


@onnx_export(GatherND)
def _export_gather_nd(node, ectx):
    ectx.add_node("GatherND", ectx.inputs(node), ectx.outputs(node),
                  batch_dims=int(node.batch_dims))
