"""Slice (start/stop/step per axis, ONNX-like) and StridedSlice (OpenVINO's masks)."""
from __future__ import annotations

import builtins
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.dimension import INF, Dimension
from ...core.node import Node
from ...core.ports import Output, _connect, _Port
from ...core.shape import PartialShape
from ..base import normalize_axis, set_name, to_output
from ..registry import onnx_export, onnx_rule
from ..shape_inputs import (
    INT64_MAX,
    check_shape_input,
    const_ints,
    export_const_ints,
    export_error,
    export_vector_length,
    i64_operand,
    shape_values,
    vector_length,
)

__all__ = ["slice", "strided_slice"]


# The module's ``slice`` factory (OpenVINO's name) hides the builtin.
_pyslice = builtins.slice


def slice_bounds(dim: int, start: int, stop: int, step: int) -> tuple[int, int, int]:
    """ONNX/OpenVINO Slice-8 clamping: ``(start, stop, length)`` with ``stop == -1`` meaning
    "past the first element" for negative steps."""
    if dim == 0:
        return 0, 0, 0
    if start < 0:
        start += dim
    if stop < 0:
        stop += dim
    if step > 0:
        start = min(max(start, 0), dim)
        stop = min(max(stop, 0), dim)
        length = max(0, -(-(stop - start) // step))
    else:
        start = min(max(start, 0), dim - 1)
        stop = min(max(stop, -1), dim - 1)
        length = max(0, -(-(start - stop) // -step))
    return start, stop, length


def slice_range(dim: int, start: int, stop: int, step: int) -> range:
    """The indices a Slice-8 of an axis of ``dim`` reads, in order (:func:`slice_bounds`'s
    clamping: a start below ``-dim`` with a negative step still reads element 0, where
    Python's ``slice.indices`` reads nothing)."""
    b, e, _ = slice_bounds(dim, start, stop, step)
    return range(b, e, step)


def dynamic_length(d: Dimension, length_of) -> Dimension:
    """The dimension a slice of dim ``d`` gives, where ``length_of(n)`` is the length for a
    static ``n``. The length is monotonic between breakpoints near the slice's parameters, so
    evaluating there and at the interval's ends bounds it exactly; a slice that keeps the
    whole axis keeps ``d`` itself (and its symbol)."""
    if d.is_static:
        return Dimension(length_of(d.min))
    period = max(1, length_of.period)
    points = {0, 1, 2, d.min}
    for p in length_of.breakpoints:
        points.update((p - 1, p, p + 1))
    far = max(points) + 4 * period
    hi = d.max if d.max != INF else far + 4 * period
    cand = sorted({c for c in points | {far, hi} if d.min <= c <= hi})
    values = [length_of(c) for c in cand]
    if values == cand:
        return d
    if d.max == INF and length_of(hi) > length_of(far):
        return Dimension(min(values), -1)
    return Dimension(min(values), max(values))


class _SliceLength:
    """Length of a Slice-8 axis as a function of the dim, with its breakpoints."""

    def __init__(self, start: int, stop: int, step: int) -> None:
        self.start, self.stop, self.step = start, stop, step
        big = 1 << 40
        self.breakpoints = [abs(v) for v in (start, stop) if abs(v) < big]
        self.period = abs(step)

    def __call__(self, n: int) -> int:
        return slice_bounds(n, self.start, self.stop, self.step)[2]


def python_slice(start: int, stop: int, step: int) -> builtins.slice:
    return _pyslice(start, stop if stop >= 0 else None, step)


class Slice(Node):
    """Slice v8: (data, start, stop, step[, axes]); numpy/ONNX clamping, negative steps."""

    type_name = "Slice"
    version = "opset8"

    @staticmethod
    def like(main: Node, inputs: Sequence[Output]) -> Slice:
        """``Slice(inputs)`` that starts with ``main``'s output state (element type, shape),
        not inferred: for a rewrite that rebuilds ``main`` with other axes in its place and
        gives it new inputs or shapes right after (transpose sinking: inferring the new axes
        on the old input computed a shape nothing read, and the consumers the Slice took over
        were stale for validation). An output with known elements (which inference passes on)
        takes the generic way."""
        port = main._outs[0] if len(main._outs) == 1 else None
        if port is None or port.val is not None or port.pval is not None:
            return Slice(inputs)
        node = Slice.__new__(Slice)
        node._init_state()
        node._inputs = list(inputs)
        me, ref = id(node), weakref.ref(node)
        for i, v in enumerate(node._inputs):
            _connect(v.node._outs[v.index].cons, (me, i), ref)
        out = _Port()
        out.et, out.ps = port.et, port.ps
        node._outs = (out,)
        return node

    def _params(self) -> tuple | None:
        start, stop, step = (shape_values(self, i) for i in (1, 2, 3))
        if any(v is None or any(isinstance(x, Dimension) for x in v) for v in (start, stop, step)):
            return None
        n = len(start)
        self.check(len(stop) == n and len(step) == n,
                   "start, stop and step lengths differ: {}, {}, {}", n, len(stop), len(step))
        self.check(all(s != 0 for s in step), "step must be non-zero, got {}", step)
        if self.get_input_size() == 5:
            axes = const_ints(self, 4)
            if axes is None:
                return None
            self.check(len(axes) == n, "axes {} must have {} elements", axes, n)
        else:
            axes = list(range(n))
        return start, stop, step, axes

    def infer_types(self) -> None:
        self.check(self.get_input_size() in (4, 5),
                   "expects inputs (data, start, stop, step[, axes])")
        for i, what in ((1, "start"), (2, "stop"), (3, "step"), (4, "axes")):
            if i < self.get_input_size():
                check_shape_input(self, i, what)
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        rank = len(data)
        params = self._params()
        if params is None:
            axes = const_ints(self, 4) if self.get_input_size() == 5 else None
            touched = set(range(rank)) if axes is None else {
                normalize_axis(self, a, rank) for a in axes}
            if self.get_input_size() == 4:
                n = vector_length(self, 1)
                touched = set(range(min(n, rank))) if n is not None else touched
            self.set_output_type(0, et, PartialShape(
                [Dimension(0, d.get_max_length()) if i in touched else d
                 for i, d in enumerate(data)]))
            return
        start, stop, step, axes = params
        dims = list(data.dims)
        seen = set()
        for b, e, s, a in zip(start, stop, step, axes):
            a = normalize_axis(self, a, rank)
            self.check(a not in seen, "repeated axis {} in axes {}", a, axes)
            seen.add(a)
            dims[a] = dynamic_length(dims[a], _SliceLength(b, e, s))
        self.set_output_type(0, et, PartialShape(dims))

    def infer_values(self) -> None:
        pv = self.input_partial_value(0)
        ps = self.get_input_partial_shape(0)
        params = self._params() if pv is not None and ps.rank_is_static and len(ps) == 1 else None
        if params is None:
            return
        start, stop, step, axes = params
        if len(start) != 1 or axes[0] not in (0, -1):
            return
        b, e, _ = slice_bounds(len(pv), start[0], stop[0], step[0])
        s = step[0]
        self.set_output_partial_value(0, list(pv)[python_slice(b, e, s)])

    def evaluate(self, inputs):
        x = inputs[0]
        start, stop, step = ([int(v) for v in np.asarray(a).reshape(-1)] for a in inputs[1:4])
        axes = [int(a) for a in np.asarray(inputs[4]).reshape(-1)] if len(inputs) == 5 \
            else list(range(len(start)))
        index = [_pyslice(None)] * x.ndim
        for b, e, s, a in zip(start, stop, step, axes):
            a %= x.ndim
            b, e, _ = slice_bounds(x.shape[a], b, e, s)
            index[a] = python_slice(b, e, s)
        return [x[tuple(index)]]


def _mask(values: Sequence[int], i: int) -> bool:
    return i < len(values) and bool(values[i])


def strided_length(dim: int, begin: int, end: int, stride: int, bmask: bool, emask: bool) -> int:
    """Length of one ordinary StridedSlice axis, as OpenVINO computes it."""
    lb, ub = begin, end
    if lb < 0:
        lb = max(dim + lb, 0)
    if ub < 0:
        ub = max(dim + ub, 0 if stride > 0 else -1)
    lb = min(dim, lb)
    ub = min(dim, ub)
    if stride < 0:
        if bmask:
            lb = dim - 1
        if emask:
            ub = -1
        lb = min(lb, dim - 1)
        lb -= 1
        return (ub - lb) // stride + 1 if ub <= lb else 0
    if bmask:
        lb = 0
    if emask:
        ub = dim
    lb += 1
    return (ub - lb) // stride + 1 if lb <= ub else 0


class _StridedLength:
    def __init__(self, begin: int, end: int, stride: int, bmask: bool, emask: bool) -> None:
        self.args = (begin, end, stride, bmask, emask)
        big = 1 << 40
        self.breakpoints = [abs(v) for v in (begin, end) if abs(v) < big]
        self.period = abs(stride)

    def __call__(self, n: int) -> int:
        return strided_length(n, *self.args)


class StridedSlice(Node):
    """StridedSlice v1 with OpenVINO's masks: ``begin_mask``/``end_mask`` 1 = ignore the bound,
    ``new_axis_mask`` inserts a dim of 1, ``shrink_axis_mask`` drops the axis (begin is an
    index), ``ellipsis_mask`` expands to the axes not named."""

    type_name = "StridedSlice"
    version = "opset1"
    ATTRS = {"begin_mask": [], "end_mask": [], "new_axis_mask": [], "shrink_axis_mask": [],
             "ellipsis_mask": []}

    def _plan(self, rank: int, n: int):
        """Per slice index: ('new',) | ('shrink', in_axis) | ('ellipsis', [in_axes]) |
        ('slice', in_axis); then the input axes past the last index."""
        ell = [i for i in range(n) if _mask(self.ellipsis_mask, i)]
        self.check(len(ell) <= 1, "ellipsis_mask {} has more than one bit set", self.ellipsis_mask)
        new = [i for i in range(n) if _mask(self.new_axis_mask, i) and i not in ell]
        real = n - len(new) - len(ell)
        self.check(real <= rank, "{} sliced axes for an input of rank {}", real, rank)
        plan = []
        axis = 0
        for i in range(n):
            if i in ell:
                hidden = rank - real
                plan.append(("ellipsis", list(range(axis, axis + hidden))))
                axis += hidden
            elif i in new:
                plan.append(("new",))
            elif _mask(self.shrink_axis_mask, i):
                plan.append(("shrink", axis))
                axis += 1
            else:
                plan.append(("slice", axis))
                axis += 1
        return plan, list(range(axis, rank))

    def infer_types(self) -> None:
        n_in = self.get_input_size()
        self.check(n_in in (3, 4), "expects inputs (data, begin, end[, strides])")
        for i, what in ((1, "begin"), (2, "end"), (3, "strides")):
            if i < n_in:
                check_shape_input(self, i, what)
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        begin = const_ints(self, 1)
        end = const_ints(self, 2)
        strides = const_ints(self, 3) if n_in == 4 else None
        n = len(begin) if begin is not None else vector_length(self, 1)
        if not data.rank_is_static or n is None:
            self.set_output_type(0, et, PartialShape(None))
            return
        if strides is None and n_in == 3:
            strides = [1] * n
        plan, rest = self._plan(len(data), n)
        dims: list[Dimension] = []
        for i, step in enumerate(plan):
            kind = step[0]
            if kind == "new":
                dims.append(Dimension(1))
            elif kind == "ellipsis":
                dims.extend(data[a] for a in step[1])
            elif kind == "shrink":
                if begin is not None and data[step[1]].is_static:
                    d = data[step[1]].min
                    self.check(-d <= begin[i] < d,
                               "shrink index {} out of range for dimension {}", begin[i], d)
            else:
                d = data[step[1]]
                bm, em = _mask(self.begin_mask, i), _mask(self.end_mask, i)
                st = strides[i] if strides is not None else None
                if st is not None:
                    self.check(st != 0, "stride {} is zero", i)
                if st is None or (begin is None and not bm) or (end is None and not em):
                    dims.append(Dimension(0, d.get_max_length()))
                    continue
                b = begin[i] if begin is not None else 0
                e = end[i] if end is not None else 0
                dims.append(dynamic_length(d, _StridedLength(b, e, st, bm, em)))
        dims.extend(data[a] for a in rest)
        self.set_output_type(0, et, PartialShape(dims))

    def _index(self, shape: Sequence[int], begin, end, strides) -> tuple:
        plan, rest = self._plan(len(shape), len(begin))
        index: list[Any] = []
        for i, step in enumerate(plan):
            kind = step[0]
            if kind == "new":
                index.append(None)
            elif kind == "ellipsis":
                index.extend(_pyslice(None) for _ in step[1])
            elif kind == "shrink":
                d = shape[step[1]]
                self.check(-d <= begin[i] < d, f"shrink index {begin[i]} out of range for "
                           f"dimension {d}")
                index.append(begin[i] % d)
            else:
                d = shape[step[1]]
                st = strides[i]
                n = strided_length(d, begin[i], end[i], st, _mask(self.begin_mask, i),
                                    _mask(self.end_mask, i))
                if n == 0:
                    index.append(_pyslice(0, 0))
                    continue
                first = self.first_index(d, begin[i], st, _mask(self.begin_mask, i))
                last = first + (n - 1) * st
                index.append(python_slice(first, last + (1 if st > 0 else -1), st))
        index.extend(_pyslice(None) for _ in rest)
        return tuple(index)

    @staticmethod
    def first_index(dim: int, begin: int, stride: int, bmask: bool) -> int:
        """The first index one ordinary StridedSlice axis takes, as OpenVINO computes it."""
        if bmask:
            return 0 if stride > 0 else dim - 1
        b = max(dim + begin, 0) if begin < 0 else begin
        return min(b, dim) if stride > 0 else min(b, dim - 1)

    def infer_values(self) -> None:
        pv = self.input_partial_value(0)
        ps = self.get_input_partial_shape(0)
        out = self.get_output_partial_shape(0)
        if pv is None or not (ps.rank_is_static and len(ps) == 1) or not out.rank_is_static \
                or len(out) > 1:
            return
        begin, end = const_ints(self, 1), const_ints(self, 2)
        strides = const_ints(self, 3) if self.get_input_size() == 4 else [1] * len(begin or [])
        if begin is None or end is None or strides is None:
            return
        idx = self._index([len(pv)], begin, end, strides)
        res = np.array(pv, dtype=object)[idx]
        self.set_output_partial_value(0, list(np.asarray(res).reshape(-1)))

    def evaluate(self, inputs):
        x = inputs[0]
        begin, end = ([int(v) for v in np.asarray(a).reshape(-1)] for a in inputs[1:3])
        strides = [int(v) for v in np.asarray(inputs[3]).reshape(-1)] if len(inputs) == 4 \
            else [1] * len(begin)
        return [np.array(x[self._index(x.shape, begin, end, strides)])]


def slice(data: Any, start: Any, stop: Any, step: Any, axes: Any = None,
          name: str | None = None) -> Node:
    """Slice-8: elements of ``data`` from ``start`` to ``stop`` (exclusive) by ``step`` along
    ``axes`` (default: the first ``len(start)`` dims); negative values count from the end, and
    bounds past the end are clamped, as numpy slicing."""
    inputs = [to_output(data), i64_operand(start), i64_operand(stop), i64_operand(step)]
    if axes is not None:
        inputs.append(i64_operand(axes))
    return set_name(Slice(inputs), name)


def strided_slice(data: Any, begin: Any, end: Any, strides: Any, begin_mask: Sequence[int],
                  end_mask: Sequence[int], new_axis_mask: Sequence[int] = (),
                  shrink_axis_mask: Sequence[int] = (), ellipsis_mask: Sequence[int] = (),
                  name: str | None = None) -> Node:
    """StridedSlice-1: numpy-style slicing of ``data`` by ``begin``, ``end``, ``strides`` per dim,
    with OpenVINO's masks: ``begin_mask`` / ``end_mask`` (1: ignore the bound, take from the start
    or to the end), ``new_axis_mask`` (insert a dim), ``shrink_axis_mask`` (drop the dim, taking
    index ``begin``), ``ellipsis_mask`` (the remaining dims)."""
    return set_name(StridedSlice(
        [to_output(data), i64_operand(begin), i64_operand(end), i64_operand(strides)],
        begin_mask=[int(v) for v in begin_mask], end_mask=[int(v) for v in end_mask],
        new_axis_mask=[int(v) for v in new_axis_mask],
        shrink_axis_mask=[int(v) for v in shrink_axis_mask],
        ellipsis_mask=[int(v) for v in ellipsis_mask]), name)


@onnx_rule("Slice", since=1)
def _import_slice_v1(ctx):
    starts, ends = ctx.attr("starts", []), ctx.attr("ends", [])
    axes = ctx.attr("axes", list(range(len(starts))))
    return Slice([ctx.inputs[0], i64_operand(starts), i64_operand(ends),
                  i64_operand([1] * len(starts)), i64_operand(axes)]).output(0)


@onnx_rule("Slice", since=10)
def _import_slice(ctx):
    x, starts, ends = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    axes, steps = ctx.input(3), ctx.input(4)
    if steps is None:
        length = starts.partial_shape
        if not length.is_static:
            ctx.error("starts must have a static shape when steps are omitted")
        n = length.to_shape()[0] if len(length) else 1
        steps = i64_operand([1] * n)
    inputs = [x, starts, ends, steps] + ([axes] if axes is not None else [])
    return Slice(inputs).output(0)


@onnx_export(Slice)
def _export_slice(node, ectx):
    ins = ectx.inputs(node)
    if len(ins) == 4:
        ins = ins[:3] + [ectx.constant(np.arange(export_vector_length(node, 1), dtype=np.int64)),
                         ins[3]]
    else:
        ins = ins[:3] + [ins[4], ins[3]]
    ectx.add_node("Slice", ins, ectx.outputs(node))


@onnx_export(StridedSlice)
def _export_strided_slice(node, ectx):
    data = node.get_input_partial_shape(0)
    begin, end = export_const_ints(node, 1), export_const_ints(node, 2)
    strides = export_const_ints(node, 3) if node.get_input_size() == 4 else [1] * len(begin)
    if not data.rank_is_static:
        export_error(node, "input rank must be static")
    plan, _ = node._plan(len(data), len(begin))
    starts, ends, steps, axes, new_axes, shrink = [], [], [], [], [], []
    out_axis = 0
    for i, step in enumerate(plan):
        if step[0] == "new":
            new_axes.append(out_axis)
            out_axis += 1
        elif step[0] == "ellipsis":
            out_axis += len(step[1])
        elif step[0] == "shrink":
            b = begin[i]
            starts.append(b)
            ends.append(b + 1 if b != -1 else INT64_MAX)
            steps.append(1)
            axes.append(step[1])
            shrink.append(step[1])
        else:
            s = strides[i]
            bm, em = _mask(node.begin_mask, i), _mask(node.end_mask, i)
            starts.append((0 if s > 0 else INT64_MAX) if bm else begin[i])
            ends.append((INT64_MAX if s > 0 else -INT64_MAX) if em else end[i])
            steps.append(s)
            axes.append(step[1])
            out_axis += 1
    name = ectx.inputs(node)[0]
    outs = ectx.outputs(node)
    if axes:
        nxt = ectx.fresh("sliced") if shrink or new_axes else outs[0]
        ectx.add_node("Slice", [name] + [ectx.constant(np.asarray(v, dtype=np.int64))
                                         for v in (starts, ends, axes, steps)], [nxt])
        name = nxt
    if shrink:
        nxt = ectx.fresh("shrunk") if new_axes else outs[0]
        ectx.add_node("Squeeze", [name, ectx.constant(np.asarray(shrink, dtype=np.int64))], [nxt])
        name = nxt
    if new_axes:
        ectx.add_node("Unsqueeze", [name, ectx.constant(np.asarray(new_axes, dtype=np.int64))],
                      outs)
        name = outs[0]
    if name != outs[0]:
        ectx.add_node("Identity", [name], outs)
