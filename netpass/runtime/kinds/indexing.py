"""Indexing (``netpass/ops/indexing``): Gather (batch_dims 0) on the ``gather`` template, a view
where its indices are the identity or one constant index picking a contiguous piece (q, k or v
of torch's MultiheadAttention export: ``proj[0]`` of a [3, S, B, D] tensor); GatherElements
on ``gather_elements``; a sum of row gathers (:class:`GatherSum`, made by
``netpass.runtime.gather_sum``) on ``gather_sum``; GatherND on ``gather_nd`` (the dynamo
exporter's padding-mask lookup of a decoder: on the host, a wait per decode step);
ScatterNDUpdate and ScatterElementsUpdate of reduction none (DeepSeek-V3's and MiniCPM3's key
heads put together with slice assignments, a router's top-k mask) as a copy of the data and
the ``scatter_nd`` / ``scatter_elements`` kernels; other scatters and OneHot run on the
host."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ...errors import ShapeInferenceError
from ...ops.indexing import (
    Gather,
    Gather7,
    GatherElements,
    GatherND,
    GatherND5,
    OneHot,
    ScatterElementsUpdate,
    ScatterNDUpdate,
)
from ..impls import Impl, Launch, Params, bits_dtype, broadcast_strides, collapse, size, work_1d
from ..index_forms import Form, form_of
from ..kernels.movement import gather, gather_elements, gather_nd, gather_sum
from ..kernels.scatter import copy, scatter_elements, scatter_nd
from ..shape_infer import infer_host
from .base import OpKind, Skip, StridedView, broadcast, ints, table

GATHER_MAX_INDICES = 10 * 1024  # identity checks read back at most this many indices


def _gather_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    if 2 not in values or attrs.get("batch_dims", 0):
        return None
    s = shapes[0]
    axis = ints(values[2])[0] % len(s)
    return [tuple(s[:axis]) + tuple(shapes[1]) + tuple(s[axis + 1:])]


def gather_impl(p: Params, key: Any) -> Impl | None:
    if p.attrs.get("batch_dims", 0) or p.values.get(2) is None:
        return None
    shape = p.in_shapes[0]
    axis = ints(p.values[2])[0] % len(shape)
    nidx = size(p.in_shapes[1])
    n = size(p.out_shapes[0])
    src = gather(bits_dtype(p.in_dtypes[0]), p.in_dtypes[1])
    return Impl(key, [Launch(src, *work_1d(n), [("i", 0), ("i", 1), ("o", 0), n, nidx, shape[axis],
                                                size(shape[axis + 1:])])])


def gather7_impl(p: Params, key: Any) -> Impl | None:
    """Gather-1/7: v8's kernel where the indices are a constant without negative values (a
    negative index gives zeros in v7, in v8 it counts from the end); else the host."""
    src = p.node.inputs[1][0] if p.node is not None else None
    if src is None or not src.is_constant or (np.asarray(src.value) < 0).any():
        return None
    return gather_impl(p, key)


def _may_be_identity(n: Any, same_dtype: bool) -> bool:
    """Computed rank-1 indices (a constant index list is never worth checking per infer)."""
    src, k = n.inputs[1]
    ps = src.out_pshapes[k]
    return not n.fused and same_dtype and not src.is_constant and ps.rank.is_static and len(ps) == 1


def _one_constant_index(n: Any) -> bool:
    src, _ = n.inputs[1]
    value = np.asarray(src.value) if src.is_constant else None
    return value is not None and value.size == 1 and value.dtype.kind in "iu"


def _picks_one(n: Any) -> bool:
    """One constant index, in range of a static axis of a constant position (no batch dims):
    the output is a strided view of the data (the index's dims of size 1)."""
    if not _one_constant_index(n) or n.attrs.get("batch_dims", 0) or not n.inputs[2][0].is_constant:
        return False
    src, k = n.inputs[0]
    ps = src.out_pshapes[k]
    if not ps.rank_is_static or not len(ps):
        return False
    dim = ps[ints(n.inputs[2][0].value)[0] % len(ps)]
    i = int(np.asarray(n.inputs[1][0].value).reshape(-1)[0])
    return dim.is_static and -dim.get_length() <= i < dim.get_length()


def _pick_views(inst: Any, shape: Sequence[int],
                strides: Sequence[int]) -> list[tuple[int, tuple]]:
    """The element :func:`_picks_one` takes: its offset along the axis, the axis dropped (a
    scalar index) or kept at size 1 per index dim."""
    node = inst.node
    axis = ints(node.inputs[2][0].value)[0] % len(shape)
    index = np.asarray(node.inputs[1][0].value)
    at = int(index.reshape(-1)[0]) % shape[axis]
    kept = [strides[axis]] * index.ndim
    return [(at * strides[axis], tuple(strides[:axis]) + tuple(kept) + tuple(strides[axis + 1:]))]


def _index_form(n: Any) -> Form | None:
    """The form the build proves of a Gather's computed indices (``index_forms``), or None."""
    src, k = n.inputs[1]
    return None if src.is_constant else form_of(src, k)


def _may_be_view(n: Any, same_dtype: bool) -> bool:
    """Computed rank-1 indices (a constant index list is never worth checking per infer), one
    constant index, or computed indices of a known base whose form the build proves."""
    form = None if n.fused or not same_dtype else _index_form(n)
    one = not n.fused and same_dtype and _one_constant_index(n)
    return one or (form is not None and form.base is not None) \
        or _may_be_identity(n, same_dtype)


def _form_view_offset(form: Form, data: tuple, idx: tuple, axis: int) -> int | None:
    """Element offset of a Gather's output in its input where the indices' form makes them
    ``base, base + 1, ...`` in order, within the axis, with only size-1 dims before it: a
    contiguous piece. None: the kernel runs."""
    at = form.at(idx)
    n = size(idx)
    if at is None or not n or size(data[:axis]) != 1:
        return None
    base, slopes = at
    if base < 0 or base + n > data[axis]:
        return None
    stride = 1
    for d, s in zip(reversed(idx), reversed(slopes)):
        if d > 1 and s != stride:
            return None
        stride *= d
    return base * size(data[axis + 1:])


def _gather_view_offset(inst: Any) -> int | None:
    """Element offset of the output in the input: one constant index on an axis with only
    size-1 dims before it picks a contiguous piece; computed indices 0, 1, ... along the
    whole axis (read back when that dim is not 1) the whole input. None: the kernel runs."""
    data, idx = inst.in_shapes[0], inst.in_shapes[1]
    axis_v = inst.values.get(2)
    if axis_v is None or size(data) == 0:
        return None
    if _one_constant_index(inst.node):
        axis = ints(axis_v)[0] % len(data)
        i = int(np.asarray(inst.node.inputs[1][0].value).reshape(-1)[0])
        if size(data[:axis]) != 1 or not -data[axis] <= i < data[axis]:
            return None
        return (i % data[axis]) * size(data[axis + 1:])
    axis = ints(axis_v)[0] % len(data)
    form = _index_form(inst.node)
    if form is not None:
        return _form_view_offset(form, tuple(data), tuple(idx), axis)
    if len(idx) != 1:
        return None
    dim = data[axis]
    if idx[0] != dim or dim > GATHER_MAX_INDICES:
        return None
    if dim == 1:
        return 0
    ind = inst.net.host_values([inst.src(1)])[0]
    return 0 if np.array_equal(np.asarray(ind).reshape(-1), np.arange(dim)) else None


def _gather_by_shapes(inst: Any) -> bool:
    """Whether the shapes alone decide :func:`_gather_view_offset` (no index values read: one
    constant index, indices of a proven form, or computed ones that cannot be the identity): a
    step plan may then replay the decision."""
    if _one_constant_index(inst.node) or _index_form(inst.node) is not None:
        return True
    data, idx = inst.in_shapes[0], inst.in_shapes[1]
    axis_v = inst.values.get(2)
    if axis_v is None or size(data) == 0 or len(idx) != 1:
        return True
    dim = data[ints(axis_v)[0] % len(data)]
    return bool(idx[0] != dim or dim > GATHER_MAX_INDICES or dim == 1)


def _host_gather(attrs: dict, arrays: list, out_shapes: list) -> list[np.ndarray] | None:
    """numpy's take for in-range indices (shape math); None: the op's reference."""
    data, idx, axis = arrays
    if attrs.get("batch_dims", 0) or axis.size != 1 or idx.dtype.kind not in "iu" or not data.ndim:
        return None
    axis = int(axis.reshape(-1)[0]) % data.ndim
    if idx.size and (idx.min() < -data.shape[axis] or idx.max() >= data.shape[axis]):
        return None  # out-of-range semantics of the op
    return [np.take(data, idx, axis=axis)]


def _gather_elements_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    """The indices' shape, where the data has the same rank and the same dims off the axis
    (else None: the op's own inference names the mismatch)."""
    data, idx = shapes
    if len(data) != len(idx) or not data:
        return None
    axis = attrs.get("axis", 0) % len(data)
    if any(d != i for k, (d, i) in enumerate(zip(data, idx)) if k != axis):
        return None
    return [tuple(idx)]


def gather_elements_impl(p: Params, key: Any) -> Impl:
    """One ``gather_elements`` launch over the output (the shape rule has checked that data
    and indices agree off the axis, so both walk [outer, axis, inner] alike)."""
    data, idx = p.in_shapes[0], p.in_shapes[1]
    axis = p.attrs.get("axis", 0) % len(data)
    n = size(idx)
    if not n:
        return Impl(key, [])
    src = gather_elements(bits_dtype(p.in_dtypes[0]), p.in_dtypes[1])
    spec = [("i", 0), ("i", 1), ("o", 0), n, idx[axis], data[axis], size(idx[axis + 1:])]
    return Impl(key, [Launch(src, *work_1d(n), spec)])


class GatherSum:
    """The kind of a sum of row gathers (``Gather(T_j, I_j, axis 0)`` added together: token and
    position embeddings), made by ``netpass.runtime.gather_sum``, never an op of a model; its
    inputs are ``T_0, I_0, T_1, I_1...``, its node's ``subgraph`` a :class:`GatherSumDesc`."""

    type_name: ClassVar[str] = "GatherSum"


class GatherSumDesc:
    """What a GatherSum computes: the ``gathers`` (their nodes, for the host reference) summed
    in order; every table has the same row shape, the index shapes broadcast."""

    def __init__(self, gathers: list) -> None:
        self.gathers = gathers

    def key(self) -> tuple:
        return ("gather_sum", len(self.gathers))

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        tables, idx = shapes[0::2], shapes[1::2]
        rows = broadcast(list(idx))
        if rows is None or any(not t or t[1:] != tables[0][1:] for t in tables):
            raise ShapeInferenceError(f"GatherSum '{self.gathers[-1].id}': tables "
                                      f"{[list(t) for t in tables]} and indices "
                                      f"{[list(i) for i in idx]} do not sum")
        return [rows[0] + tuple(tables[0][1:])]

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Each Gather's own reference, then numpy's sum in order."""
        rows = [infer_host(g, [arrays[2 * j], arrays[2 * j + 1], g.inputs[2][0].value])[0]
                for j, g in enumerate(self.gathers)]
        out = rows[0]
        for v in rows[1:]:
            out = out + v
        return [out]


def gather_sum_impl(p: Params, key: Any) -> Impl | None:
    """One ``gather_sum`` launch over the output (contiguous indices only: the node keeps
    no strided inputs)."""
    idx = p.in_shapes[1::2]
    rows = p.out_shapes[0][:len(p.out_shapes[0]) - len(p.in_shapes[0]) + 1]
    inner = size(p.in_shapes[0][1:])
    n = size(p.out_shapes[0])
    if not n:
        return Impl(key, [])
    dims, strides = collapse(list(rows), [broadcast_strides(s, rows) for s in idx])
    src = gather_sum(tuple(p.in_dtypes[1::2]), len(dims))
    spec: list = []
    for j in range(len(idx)):
        spec += [("i", 2 * j), ("i", 2 * j + 1)]
    spec += [("o", 0), n, inner] + [t[0] for t in p.in_shapes[0::2]] + dims
    spec += [s for st in strides for s in st]
    return Impl(key, [Launch(src, *work_1d(n), spec)])


def _gather_nd_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    data, idx = shapes[0], shapes[1]
    b = int(attrs.get("batch_dims", 0))
    if not idx or b + idx[-1] > len(data) or b >= len(idx) or tuple(data[:b]) != tuple(idx[:b]):
        return None  # (the op's own inference names what does not fit)
    return [tuple(idx[:-1]) + tuple(data[b + idx[-1]:])]


def _gather_nd5_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    """v8's shape with the batch dims flattened into one (the same elements in order)."""
    v8 = _gather_nd_shape(attrs, shapes, values)
    b = int(attrs.get("batch_dims", 0))
    if v8 is None or not b:
        return v8
    return [(size(v8[0][:b]),) + tuple(v8[0][b:])]


def gather_nd_impl(p: Params, key: Any) -> Impl | None:
    """One ``gather_nd`` launch over the output (contiguous data and indices)."""
    data, idx = p.in_shapes[0], p.in_shapes[1]
    if p.in_strides and any(p.in_strides):
        return None
    b, m = int(p.attrs.get("batch_dims", 0)), idx[-1]
    n = size(p.out_shapes[0])
    if not n:
        return Impl(key, [])
    strides = [size(data[i + 1:]) for i in range(len(data))]
    spec: list = [("i", 0), ("i", 1), ("o", 0), n, size(data[b + m:]),
                  max(size(idx[b:-1]), 1), size(data[b:])]
    for c in range(m):
        spec += [data[b + c], strides[b + c]]
    src = gather_nd(bits_dtype(p.in_dtypes[0]), p.in_dtypes[1], m)
    return Impl(key, [Launch(src, *work_1d(n), spec)])


def _scatter_launches(p: Params, key: Any, launch: Launch | None) -> Impl:
    """The copy of the data into the output, then ``launch`` (None: no updates)."""
    n = size(p.out_shapes[0])
    if not n:
        return Impl(key, [])
    launches = [Launch(copy(bits_dtype(p.in_dtypes[0])), *work_1d(n), [("i", 0), ("o", 0), n])]
    return Impl(key, launches + ([launch] if launch is not None else []))


def scatter_nd_impl(p: Params, key: Any) -> Impl | None:
    """Reduction none, contiguous inputs: the data copied, then one ``scatter_nd`` launch over
    the updates."""
    if p.attrs.get("reduction", "none") != "none" or (p.in_strides and any(p.in_strides)):
        return None
    data, idx = p.in_shapes[0], p.in_shapes[1]
    m = idx[-1]
    n = size(p.in_shapes[2])
    strides = [size(data[i + 1:]) for i in range(len(data))]
    spec: list = [("i", 1), ("i", 2), ("o", 0), n, size(data[m:])]
    for c in range(m):
        spec += [data[c], strides[c]]
    src = scatter_nd(bits_dtype(p.in_dtypes[0]), p.in_dtypes[1], m)
    return _scatter_launches(p, key, Launch(src, *work_1d(n), spec) if n else None)


def scatter_elements_impl(p: Params, key: Any) -> Impl | None:
    """Reduction none, contiguous inputs, indices of the data's dims off the axis: the data
    copied, then one ``scatter_elements`` launch over the updates."""
    data, idx = p.in_shapes[0], p.in_shapes[1]
    if p.attrs.get("reduction", "none") != "none" or (p.in_strides and any(p.in_strides)) \
            or p.values.get(3) is None or len(data) != len(idx) or not data:
        return None
    axis = ints(p.values[3])[0] % len(data)
    if any(d != i for k, (d, i) in enumerate(zip(data, idx)) if k != axis):
        return None
    n = size(idx)
    src = scatter_elements(bits_dtype(p.in_dtypes[0]), p.in_dtypes[1])
    spec = [("i", 1), ("i", 2), ("o", 0), n, idx[axis], data[axis], size(idx[axis + 1:])]
    return _scatter_launches(p, key, Launch(src, *work_1d(n), spec) if n else None)


ROWS = table(
    OpKind(Gather, deps=(2,), shape=_gather_shape, impl=gather_impl, copy_only=True, uniform=True,
           skip=Skip(_may_be_view, _gather_view_offset, reads_values=True,
                     by_shapes=_gather_by_shapes), host=_host_gather,
           strided=StridedView(_pick_views, None, _picks_one)),
    OpKind(Gather7, deps=(2,), shape=_gather_shape, impl=gather7_impl, copy_only=True),
    OpKind(GatherElements, shape=_gather_elements_shape, impl=gather_elements_impl, copy_only=True),
    OpKind(GatherND, shape=_gather_nd_shape, impl=gather_nd_impl, copy_only=True, uniform=True),
    OpKind(GatherND5, shape=_gather_nd5_shape, impl=gather_nd_impl, copy_only=True, uniform=True),
    OpKind(OneHot, deps=(1,)),
    OpKind(ScatterNDUpdate, shape=lambda attrs, shapes, values: [tuple(shapes[0])],
           impl=scatter_nd_impl, copy_only=True),
    OpKind(ScatterElementsUpdate, deps=(3,), shape=lambda attrs, shapes, values: [tuple(shapes[0])],
           impl=scatter_elements_impl, copy_only=True),
    OpKind(GatherSum, impl=gather_sum_impl, uniform=True),
)
