"""Data movement: Reshape, Squeeze, Unsqueeze, Transpose, Concat, Split, VariadicSplit, Slice,
StridedSlice, Broadcast, Tile, Pad, Reverse, DepthToSpace, SpaceToDepth.

These ops carry the shape math of real models (``Reshape(x, Concat(Gather(ShapeOf(x)), ..))``)
and are what transpose and gather sinking move around, so their semantics follow OpenVINO's
exactly. Shape inputs are read as constants first and as partial values (ints and Dimensions)
second, so that static inputs give static shapes and dynamic dims keep their symbols.
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as np

from ..core.dimension import INF, Dimension
from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..errors import UnsupportedOpError
from .base import merged_input_type, normalize_axis, set_name, to_output

# The module's ``slice`` factory (OpenVINO's name) hides the builtin.
_pyslice = builtins.slice

__all__ = ["reshape", "squeeze", "unsqueeze", "transpose", "concat", "split", "variadic_split",
           "slice", "strided_slice", "broadcast", "tile", "pad", "reverse", "depth_to_space",
           "space_to_depth"]


# -- helpers shared by the shape-consuming ops (also used by indexing and shape_ops) ---------
def shape_values(node: Node, i: int) -> list | None:
    """Elements of the 0/1-D shape-like input ``i``: ints where known, Dimensions where not."""
    v = node.input_constant(i)
    if v is not None:
        return [int(x) for x in np.asarray(v).reshape(-1)]
    pv = node.input_partial_value(i)
    return list(pv) if pv is not None else None


def const_ints(node: Node, i: int) -> list[int] | None:
    """Input ``i`` as a flat list of python ints when fully known at compile time."""
    v = node.input_constant(i)
    return None if v is None else [int(x) for x in np.asarray(v).reshape(-1).tolist()]


def vector_length(node: Node, i: int) -> int | None:
    """Number of elements of a 0/1-D input when its shape says so (None when unknown)."""
    ps = node.get_input_partial_shape(i)
    if not ps.rank_is_static:
        return None
    node.check(len(ps) <= 1, "input {} must be a scalar or 1-D, got shape {}", i, ps)
    if len(ps) == 0:
        return 1
    return ps[0].min if ps[0].is_static else None


def as_dim(v: Any) -> Dimension:
    return v if isinstance(v, Dimension) else Dimension(int(v))


def _dim_product(dims: Sequence[Dimension]) -> Dimension:
    out = Dimension(1)
    for d in dims:
        out = out * d
    return out


def check_shape_input(node: Node, i: int, what: str) -> None:
    ps = node.get_input_partial_shape(i)
    et = node.get_input_element_type(i)
    node.check(et.is_dynamic or et.is_integral, "{} (input {}) must be integer, got {}",
               what, i, et)
    node.check(not ps.rank_is_static or len(ps) <= 1,
               "{} (input {}) must be a scalar or 1-D, got shape {}", what, i, ps)


def pass_partial_value(node: Node, src: int = 0, out: int = 0) -> None:
    """Forward the partial value of input ``src`` when output ``out`` holds the same elements."""
    pv = node.input_partial_value(src)
    ps = node.get_output_partial_shape(out)
    if pv is not None and ps.rank_is_static and len(ps) <= 1:
        node.set_output_partial_value(out, pv)


# -- Reshape --------------------------------------------------------------------------------
class Reshape(Node):
    """Reshape v1: ``output_shape`` may hold one ``-1`` (inferred) and, with ``special_zero``,
    ``0`` (copy the input dim at that position)."""

    type_name = "Reshape"
    version = "opset1"
    ATTRS = {"special_zero": False}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, shape)")
        check_shape_input(self, 1, "shape")
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        pattern = shape_values(self, 1)
        if pattern is None:
            n = vector_length(self, 1)
            self.set_output_type(0, et, PartialShape.dynamic(n))
            return
        self.set_output_type(0, et, self._output_shape(data, pattern))

    def _output_shape(self, data: PartialShape, pattern: list) -> PartialShape:
        out: list[Dimension | None] = []
        minus_one = None
        for i, v in enumerate(pattern):
            if isinstance(v, Dimension):
                out.append(v)
            elif v == -1:
                self.check(minus_one is None, "more than one -1 in output shape {}", pattern)
                minus_one = i
                out.append(None)
            elif v == 0 and self.special_zero:
                if data.rank_is_static:
                    self.check(i < len(data), "special zero at {} past input rank {}", i, len(data))
                    out.append(data[i])
                else:
                    out.append(Dimension())
            else:
                self.check(v >= 0, "invalid value {} in output shape {}", v, pattern)
                out.append(Dimension(v))
        if minus_one is not None:
            others = [d for d in out if d is not None]
            out[minus_one] = self._infer_minus_one(data, others)
        dims: list[Dimension] = out  # type: ignore[assignment]
        if data.is_static and all(d.is_static for d in dims):
            n_in, n_out = math.prod(data.to_shape()), math.prod(d.min for d in dims)
            self.check(n_in == n_out, "cannot reshape {} ({} elements) to {} ({} elements)",
                       data, n_in, pattern, n_out)
        return PartialShape(dims)

    @staticmethod
    def _infer_minus_one(data: PartialShape, others: list[Dimension]) -> Dimension:
        if not data.rank_is_static:
            return Dimension()
        ins = list(data.dims)
        outs = list(others)
        # Equal symbols cancel out: [b, s, 64] -> [b, -1] gives s*64 without losing b.
        for d in list(outs):
            if d.is_dynamic and d.symbol is not None:
                for j, e in enumerate(ins):
                    if e.is_dynamic and e.symbol is d.symbol:
                        del ins[j]
                        outs.remove(d)
                        break
        ins_dyn = [d for d in ins if d.is_dynamic]
        s_in = math.prod(d.min for d in ins if d.is_static)
        s_out = math.prod(d.min for d in outs if d.is_static)
        n_in = _dim_product(ins)
        if any(d.is_dynamic for d in outs):
            n_out = _dim_product(outs)
            if n_out.min == 0:
                return Dimension()
            hi = -1 if n_in.max == INF else n_in.max // n_out.min
            lo = 0 if n_out.max == INF else -(-n_in.min // n_out.max)
            return Dimension(lo if hi == -1 else min(lo, hi), hi)
        if s_out == 0:
            return Dimension(0) if n_in.max == 0 else Dimension()
        if not ins_dyn:
            return Dimension(s_in // s_out)
        if len(ins_dyn) == 1 and s_in == s_out:
            return ins_dyn[0]
        hi = -1 if n_in.max == INF else n_in.max // s_out
        return Dimension(-(-n_in.min // s_out), hi)

    def infer_values(self) -> None:
        pass_partial_value(self)

    def evaluate(self, inputs):
        x, pattern = inputs
        shape = []
        minus_one = None
        for i, v in enumerate(np.asarray(pattern).reshape(-1).tolist()):
            if v == 0 and self.special_zero:
                shape.append(x.shape[i])
            elif v == -1:
                minus_one = i
                shape.append(1)
            else:
                shape.append(v)
        if minus_one is not None:
            rest = math.prod(shape)
            shape[minus_one] = x.size // rest if rest else 0
        return [x.reshape(shape)]


# -- Squeeze / Unsqueeze --------------------------------------------------------------------
class Squeeze(Node):
    """Squeeze v0: remove the given axes (each of size 1), or, without axes or with an empty
    list, every dim of size 1."""

    type_name = "Squeeze"
    version = "opset1"

    def infer_types(self) -> None:
        n_in = self.get_input_size()
        self.check(n_in in (1, 2), "expects inputs (data[, axes])")
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        if n_in == 2:
            check_shape_input(self, 1, "axes")
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        rank = len(data)
        axes = const_ints(self, 1) if n_in == 2 else []
        if not axes and (n_in == 1 or axes is not None):  # no axes, or empty: every dim of 1
            if any(d.is_dynamic and d.min <= 1 for d in data):
                self.set_output_type(0, et, PartialShape(None))
                return
            self.set_output_type(0, et, PartialShape([d for d in data if d != 1]))
            return
        if axes is None:
            self.set_output_type(0, et, PartialShape(None))
            return
        norm = {normalize_axis(self, a, rank) for a in axes}
        for a in sorted(norm):
            self.check(data[a].compatible(1),
                       "axis {} has dimension {}; only axes of size 1 may be removed", a, data[a])
        self.set_output_type(0, et, PartialShape([d for i, d in enumerate(data) if i not in norm]))

    def infer_values(self) -> None:
        pass_partial_value(self)

    def evaluate(self, inputs):
        x = inputs[0]
        axes = tuple({int(a) % max(x.ndim, 1) for a in np.asarray(inputs[1]).reshape(-1)}) \
            if len(inputs) == 2 else ()
        if not axes:
            return [np.squeeze(x)] if x.ndim else [x]
        return [np.squeeze(x, axis=axes)]


class Unsqueeze(Node):
    """Unsqueeze v0: insert dims of size 1 at ``axes`` (positions in the output)."""

    type_name = "Unsqueeze"
    version = "opset1"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, axes)")
        check_shape_input(self, 1, "axes")
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        axes = const_ints(self, 1)
        if axes is None or not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        out_rank = len(data) + len(axes)
        norm = {normalize_axis(self, a, out_rank) for a in axes}
        self.check(len(norm) == len(axes), "repeated axes {}", axes)
        dims = iter(data.dims)
        self.set_output_type(0, et, PartialShape(
            [Dimension(1) if i in norm else next(dims) for i in range(out_rank)]))

    def infer_values(self) -> None:
        pass_partial_value(self)

    def evaluate(self, inputs):
        x, axes = inputs
        out_rank = x.ndim + np.asarray(axes).size
        norm = sorted(int(a) % out_rank for a in np.asarray(axes).reshape(-1))
        return [np.expand_dims(x, tuple(norm)) if norm else x]


# -- Transpose ------------------------------------------------------------------------------
class Transpose(Node):
    """Transpose v1: ``output.shape[i] = input.shape[input_order[i]]``; an empty order reverses."""

    type_name = "Transpose"
    version = "opset1"

    def order(self) -> list[int] | None:
        """The normalized permutation when known (an empty order means reversed axes)."""
        order = const_ints(self, 1)
        data = self.get_input_partial_shape(0)
        if order is None:
            return None
        if not order:
            return list(range(len(data)))[::-1] if data.rank_is_static else None
        return order

    def infer_types(self) -> None:
        # Reads the ports directly: transpose sinking creates Transposes by the thousand.
        ins = self._inputs
        self.check(len(ins) == 2, "expects inputs (data, input_order)")
        src, order_src = ins
        port = src.node._outs[src.index]
        et, data = port.et, port.ps
        order_port = order_src.node._outs[order_src.index]
        ops = order_port.ps
        self.check(not ops.rank_is_static or len(ops) == 1,
                   "input order must have shape [n], got {}", ops)
        value = order_port.val
        dims = data._dims
        if value is None:
            order = None
        else:
            order = [int(a) for a in value.reshape(-1).tolist()]
            if not order:  # an empty order reverses the axes
                order = list(range(len(dims)))[::-1] if dims is not None else None
        if order is None:
            rank = len(dims) if dims is not None else vector_length(self, 1)
            self.set_output_type(0, et, PartialShape.dynamic(rank))
            return
        rank = len(order)
        self.check(sorted(order) == list(range(rank)),
                   "input order {} is not a permutation of 0..{}", order, rank - 1)
        if dims is None:
            self.set_output_type(0, et, PartialShape.dynamic(rank))
            return
        self.check(len(dims) == rank, "input order {} does not match input rank {}", order,
                   len(dims))
        self.set_output_type(0, et, PartialShape.of_dims(tuple([dims[a] for a in order])))

    def infer_values(self) -> None:
        pass_partial_value(self)

    def evaluate(self, inputs):
        x, order = inputs
        order = [int(a) for a in np.asarray(order).reshape(-1)]
        return [np.transpose(x, order if order else None)]


# -- Concat ---------------------------------------------------------------------------------
class Concat(Node):
    """Concat v0 along ``axis`` (negative counts from the end)."""

    type_name = "Concat"
    version = "opset1"
    ATTRS = {"axis": 0}

    def infer_types(self) -> None:
        n = self.get_input_size()
        self.check(n >= 1, "expects at least one input")
        et = merged_input_type(self)
        rank = None
        for i in range(n):
            ps = self.get_input_partial_shape(i)
            if ps.rank_is_static:
                self.check(rank is None or len(ps) == rank,
                           "input {} has rank {}, expected {}", i, len(ps), rank)
                rank = len(ps)
        if rank is None:
            self.set_output_type(0, et, PartialShape(None))
            return
        self.check(rank >= 1, "inputs must have rank >= 1")
        axis = normalize_axis(self, self.axis, rank)
        dims: list[Dimension] = [Dimension() for _ in range(rank)]
        total: Dimension | None = Dimension(0)
        known_rank = False
        for i in range(n):
            ps = self.get_input_partial_shape(i)
            if not ps.rank_is_static:
                total = None
                continue
            for k, d in enumerate(ps):
                if k == axis:
                    continue
                merged = dims[k].merge(d) if known_rank else d
                self.check(merged is not None,
                           "input {} dim {} is {}, incompatible with {}", i, k, d, dims[k])
                dims[k] = merged
            known_rank = True
            if total is not None:
                total = total + ps[axis]
        dims[axis] = total if total is not None else Dimension()
        self.set_output_type(0, et, PartialShape(dims))

    def infer_values(self) -> None:
        ps = self.get_output_partial_shape(0)
        if not ps.rank_is_static or len(ps) != 1:
            return
        parts = [self.input_partial_value(i) for i in range(self.get_input_size())]
        if all(p is None for p in parts):
            return
        # Unknown pieces of static length become unknown dims, so the known ones still
        # reach a Reshape (e.g. [batch, <computed>, 64] keeps batch and 64).
        for i, p in enumerate(parts):
            if p is None:
                ps = self.get_input_partial_shape(i)
                if not ps.is_static:
                    return
                parts[i] = (Dimension(),) * (ps.to_shape()[0] if len(ps) else 1)
        self.set_output_partial_value(0, [v for p in parts for v in p])

    def evaluate(self, inputs):
        return [np.concatenate(inputs, axis=self.axis)]


# -- Split / VariadicSplit ------------------------------------------------------------------
def _same_rank(data: PartialShape) -> PartialShape:
    return PartialShape.dynamic(len(data)) if data.rank_is_static else PartialShape(None)


def _split_axis(node: Node, rank: int | None) -> int | None:
    check_shape_input(node, 1, "axis")
    axis = const_ints(node, 1)
    if axis is None or rank is None:
        return None
    node.check(len(axis) == 1, "axis must be a scalar, got {}", axis)
    return normalize_axis(node, axis[0], rank)


def _split_partial_values(node: Node, lengths: Sequence[int]) -> None:
    pv = node.input_partial_value(0)
    ps = node.get_input_partial_shape(0)
    if pv is None or not ps.rank_is_static or len(ps) != 1:
        return
    start = 0
    for i, n in enumerate(lengths):
        node.set_output_partial_value(i, pv[start:start + n])
        start += n


class Split(Node):
    """Split v1: ``num_splits`` equal parts along the scalar ``axis`` input."""

    type_name = "Split"
    version = "opset1"
    ATTRS = {"num_splits": 1}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, axis)")
        n = int(self.num_splits)
        self.check(n > 0, "num_splits must be positive, got {}", n)
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        axis = _split_axis(self, len(data) if data.rank_is_static else None)
        self.set_output_size(n)
        for i in range(n):
            if axis is None:
                shape = _same_rank(data)
            else:
                d = data[axis]
                if d.is_static:
                    self.check(d.min % n == 0, "dimension {} on axis {} is not divisible "
                               "into {} splits", d, axis, n)
                    part = Dimension(d.min // n)
                else:
                    part = Dimension(-(-d.min // n), -1 if d.max == INF else d.max // n)
                shape = PartialShape([part if k == axis else x for k, x in enumerate(data)])
            self.set_output_type(i, et, shape)

    def infer_values(self) -> None:
        ps = self.get_input_partial_shape(0)
        if ps.is_static and len(ps) == 1:
            _split_partial_values(self, [ps[0].min // self.num_splits] * self.num_splits)

    def evaluate(self, inputs):
        x, axis = inputs
        return list(np.split(x, int(self.num_splits), axis=int(np.asarray(axis).reshape(-1)[0])))


class VariadicSplit(Node):
    """VariadicSplit v1: parts of ``split_lengths`` along ``axis``; one length may be -1."""

    type_name = "VariadicSplit"
    version = "opset1"

    def lengths(self) -> list[int] | None:
        """The split lengths with -1 resolved when the axis dim is static."""
        lengths = const_ints(self, 2)
        data = self.get_input_partial_shape(0)
        axis = _split_axis(self, len(data) if data.rank_is_static else None)
        if lengths is None or axis is None or -1 not in lengths:
            return lengths
        d = data[axis]
        if not d.is_static:
            return lengths
        known = sum(v for v in lengths if v != -1)
        return [d.min - known if v == -1 else v for v in lengths]

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 3, "expects inputs (data, axis, split_lengths)")
        check_shape_input(self, 2, "split_lengths")
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        axis = _split_axis(self, len(data) if data.rank_is_static else None)
        raw = const_ints(self, 2)
        if raw is None:
            n = vector_length(self, 2)
            self.check(n is not None, "the number of outputs is unknown: split_lengths must "
                       "have a static shape")
            self.set_output_size(n)
            for i in range(n):
                self.set_output_type(i, et, _same_rank(data))
            return
        self.check(raw.count(-1) <= 1, "split_lengths {} has more than one -1", raw)
        self.check(all(v >= -1 for v in raw), "invalid split_lengths {}", raw)
        lengths = self.lengths()
        self.set_output_size(len(lengths))
        if axis is not None and data[axis].is_static:
            d, known = data[axis].min, sum(v for v in raw if v != -1)
            self.check(known <= d if -1 in raw else known == d,
                       "split_lengths {} do not add up to dimension {} on axis {}", raw, d, axis)
        for i, v in enumerate(lengths):
            if axis is None:
                shape = _same_rank(data)
            else:
                if v == -1:
                    part = data[axis] - sum(x for x in raw if x != -1)
                else:
                    part = Dimension(v)
                shape = PartialShape([part if k == axis else x for k, x in enumerate(data)])
            self.set_output_type(i, et, shape)

    def infer_values(self) -> None:
        ps = self.get_input_partial_shape(0)
        lengths = self.lengths()
        if ps.is_static and len(ps) == 1 and lengths is not None and -1 not in lengths:
            _split_partial_values(self, lengths)

    def evaluate(self, inputs):
        x, axis, lengths = inputs
        axis = int(np.asarray(axis).reshape(-1)[0]) % x.ndim
        lengths = [int(v) for v in np.asarray(lengths).reshape(-1)]
        if -1 in lengths:
            lengths[lengths.index(-1)] = x.shape[axis] - sum(v for v in lengths if v != -1)
        bounds = np.cumsum(lengths)[:-1]
        return list(np.split(x, bounds, axis=axis))


# -- Slice ----------------------------------------------------------------------------------
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

    def _params(self) -> tuple | None:
        start, stop, step = (shape_values(self, i) for i in (1, 2, 3))
        if any(v is None or any(isinstance(x, Dimension) for x in v) for v in (start, stop, step)):
            return None
        n = len(start)
        self.check(len(stop) == n and len(step) == n,
                   f"start, stop and step lengths differ: {len(start)}, {len(stop)}, {len(step)}")
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


# -- StridedSlice ---------------------------------------------------------------------------
def _mask(values: Sequence[int], i: int) -> bool:
    return i < len(values) and bool(values[i])


def _strided_length(dim: int, begin: int, end: int, stride: int, bmask: bool, emask: bool) -> int:
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
        return _strided_length(n, *self.args)


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
                n = _strided_length(d, begin[i], end[i], st, _mask(self.begin_mask, i),
                                    _mask(self.end_mask, i))
                if n == 0:
                    index.append(_pyslice(0, 0))
                    continue
                first = self._first(d, begin[i], st, _mask(self.begin_mask, i))
                last = first + (n - 1) * st
                index.append(python_slice(first, last + (1 if st > 0 else -1), st))
        index.extend(_pyslice(None) for _ in rest)
        return tuple(index)

    @staticmethod
    def _first(dim: int, begin: int, stride: int, bmask: bool) -> int:
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


# -- Broadcast / Tile -----------------------------------------------------------------------
class Broadcast(Node):
    """Broadcast v3: ``numpy`` (data right-aligned to target_shape), ``bidirectional`` (numpy
    broadcasting of both shapes) or ``explicit`` (data axis i goes to ``axes_mapping[i]``)."""

    type_name = "Broadcast"
    version = "opset3"
    ATTRS = {"mode": "numpy"}

    def infer_types(self) -> None:
        mode = self.mode
        self.check(mode in ("numpy", "bidirectional", "explicit"),
                   "unsupported broadcast mode '{}'", mode)
        n_in = self.get_input_size()
        self.check(n_in == (3 if mode == "explicit" else 2),
                   "expects inputs (data, target_shape" + (", axes_mapping)" if mode == "explicit"
                                                           else ")"))
        check_shape_input(self, 1, "target_shape")
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        target = shape_values(self, 1)
        if target is None:
            n = vector_length(self, 1)
            if mode == "bidirectional" and n is not None and data.rank_is_static:
                n = max(n, len(data))
            self.set_output_type(0, et, PartialShape.dynamic(n))
            return
        tdims = [as_dim(v) if not isinstance(v, int) or v >= 0 else None for v in target]
        self.check(all(d is not None for d in tdims), "invalid target shape {}", target)
        if mode == "bidirectional":
            out = data.broadcast_merge(PartialShape(tdims))
            self.check(out is not None, "shapes {} and {} do not broadcast", data, target)
            self.set_output_type(0, et, out)
            return
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(tdims))
            return
        if mode == "numpy":
            self.check(len(data) <= len(tdims), f"target shape {target} has lower rank than {data}")
            off = len(tdims) - len(data)
            out = list(tdims)
            for i, d in enumerate(data):
                t = tdims[off + i]
                if d == 1:
                    continue
                if t.is_static and d.is_static:
                    m = t if t.min == d.min else None
                else:
                    m = t.merge(d)
                self.check(m is not None, "data dim {} ({}) does not broadcast to {}", i, d, t)
                out[off + i] = t if t.is_static else m
            self.set_output_type(0, et, PartialShape(out))
            return
        mapping = const_ints(self, 2)
        if mapping is not None:
            self.check(len(mapping) == len(data),
                       "axes_mapping {} must have {} elements", mapping, len(data))
            self.check(mapping == sorted(mapping), "axes_mapping {} must be increasing", mapping)
            for i, a in enumerate(mapping):
                self.check(0 <= a < len(tdims), "axes_mapping {} out of range", mapping)
                d, t = data[i], tdims[a]
                self.check(d == 1 or d.compatible(t),
                           "data dim {} ({}) does not match target dim {} ({})", i, d, a, t)
        self.set_output_type(0, et, PartialShape(tdims))

    def infer_values(self) -> None:
        # A broadcast scalar of a shape computation (e.g. [d] * n) keeps its dim.
        pv = self.input_partial_value(0)
        ps = self.get_output_partial_shape(0)
        if pv is not None and len(pv) == 1 and ps.is_static and len(ps) <= 1:
            self.set_output_partial_value(0, list(pv) * (ps[0].min if len(ps) else 1))

    def evaluate(self, inputs):
        x, target = inputs[0], [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
        if self.mode == "bidirectional":
            shape = np.broadcast_shapes(x.shape, tuple(target))
            return [np.array(np.broadcast_to(x, shape))]
        if self.mode == "explicit":
            mapping = [int(a) for a in np.asarray(inputs[2]).reshape(-1)]
            shape = [1] * len(target)
            for i, a in enumerate(mapping):
                shape[a] = x.shape[i]
            x = x.reshape(shape)
        return [np.array(np.broadcast_to(x, tuple(target)))]


class Tile(Node):
    """Tile v0: repeat ``data`` ``repeats[i]`` times along axis i (shorter side padded with 1s
    on the left)."""

    type_name = "Tile"
    version = "opset1"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, repeats)")
        check_shape_input(self, 1, "repeats")
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        reps = shape_values(self, 1)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        if reps is None:
            n = vector_length(self, 1)
            rank = None if n is None else max(n, len(data))
            self.set_output_type(0, et, PartialShape.dynamic(rank))
            return
        self.check(all(isinstance(r, Dimension) or r >= 0 for r in reps),
                   "repeats {} must be non-negative", reps)
        rank = max(len(reps), len(data))
        dims = [Dimension(1)] * (rank - len(data)) + list(data.dims)
        reps = [1] * (rank - len(reps)) + list(reps)
        # A repeat of 1 keeps the dim itself, symbol included.
        self.set_output_type(0, et, PartialShape(
            [d if isinstance(r, int) and r == 1 else d * as_dim(r) for d, r in zip(dims, reps)]))

    def infer_values(self) -> None:
        pv = self.input_partial_value(0)
        data = self.get_input_partial_shape(0)
        reps = const_ints(self, 1)
        if pv is not None and reps is not None and data.rank_is_static and len(data) == 1 \
                and len(reps) == 1:
            self.set_output_partial_value(0, list(pv) * reps[0])

    def evaluate(self, inputs):
        x, reps = inputs
        return [np.tile(x, [int(r) for r in np.asarray(reps).reshape(-1)])]


# -- Pad ------------------------------------------------------------------------------------
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


# -- DepthToSpace / SpaceToDepth ------------------------------------------------------------
class DepthToSpace(Node):
    """DepthToSpace v0: channels into ``block_size`` blocks of every spatial axis;
    ``blocks_first`` (ONNX DCR) or ``depth_first`` (ONNX CRD)."""

    type_name = "DepthToSpace"
    version = "opset1"
    ATTRS = {"block_size": 1, "mode": "blocks_first"}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.check(self.mode in ("blocks_first", "depth_first"), "unknown mode '{}'", self.mode)
        bs = int(self.block_size)
        self.check(bs > 0, "block_size must be positive, got {}", bs)
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        self.check(len(data) >= 3, "input rank must be >= 3, got {}", data)
        k = len(data) - 2
        div = bs ** k
        c = data[1]
        if c.is_static:
            self.check(c.min % div == 0, f"channels {c.min} not divisible by block_size^{k}={div}")
        self.set_output_type(0, et, PartialShape(
            [data[0], c // div] + [d * bs for d in data.dims[2:]]))

    def evaluate(self, inputs):
        x = inputs[0]
        bs, k = int(self.block_size), x.ndim - 2
        n, c, sp = x.shape[0], x.shape[1], list(x.shape[2:])
        c2 = c // bs ** k
        if self.mode == "blocks_first":
            y = x.reshape([n] + [bs] * k + [c2] + sp)
            order = [0, k + 1] + [a for i in range(k) for a in (k + 2 + i, 1 + i)]
        else:
            y = x.reshape([n, c2] + [bs] * k + sp)
            order = [0, 1] + [a for i in range(k) for a in (k + 2 + i, 2 + i)]
        return [y.transpose(order).reshape([n, c2] + [d * bs for d in sp])]


class SpaceToDepth(Node):
    """SpaceToDepth v0: ``block_size`` blocks of every spatial axis into channels."""

    type_name = "SpaceToDepth"
    version = "opset1"
    ATTRS = {"block_size": 1, "mode": "blocks_first"}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.check(self.mode in ("blocks_first", "depth_first"), "unknown mode '{}'", self.mode)
        bs = int(self.block_size)
        self.check(bs > 0, "block_size must be positive, got {}", bs)
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        self.check(len(data) >= 3, "input rank must be >= 3, got {}", data)
        k = len(data) - 2
        for i, d in enumerate(data.dims[2:]):
            if d.is_static:
                self.check(d.min % bs == 0, f"spatial dim {i + 2} ({d.min}) not divisible by {bs}")
        self.set_output_type(0, et, PartialShape(
            [data[0], data[1] * bs ** k] + [d // bs for d in data.dims[2:]]))

    def evaluate(self, inputs):
        x = inputs[0]
        bs, k = int(self.block_size), x.ndim - 2
        n, c, sp = x.shape[0], x.shape[1], list(x.shape[2:])
        y = x.reshape([n, c] + [v for d in sp for v in (d // bs, bs)])
        blocks = [3 + 2 * i for i in range(k)]
        spatial = [2 + 2 * i for i in range(k)]
        order = [0] + blocks + [1] + spatial if self.mode == "blocks_first" else \
            [0, 1] + blocks + spatial
        return [y.transpose(order).reshape([n, c * bs ** k] + [d // bs for d in sp])]


# -- Reverse --------------------------------------------------------------------------------
class Reverse(Node):
    """Reverse v1: flip ``data`` along ``reverse_axes`` (``mode`` "index": axis numbers;
    "mask": one boolean per axis)."""

    type_name = "Reverse"
    version = "opset1"
    ATTRS = {"mode": "index"}

    def axes(self) -> list[int] | None:
        v = self.input_constant(1)
        data = self.get_input_partial_shape(0)
        if v is None or not data.rank_is_static:
            return None
        flat = np.asarray(v).reshape(-1)
        if self.mode == "mask":
            self.check(flat.size == len(data), f"mask {flat.tolist()} must have {len(data)} "
                       "elements (the input rank)")
            return [i for i, m in enumerate(flat) if m]
        return sorted({normalize_axis(self, int(a), len(data)) for a in flat})

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, reverse_axes)")
        self.check(self.mode in ("index", "mask"), "unknown mode '{}'", self.mode)
        et = self.get_input_element_type(1)
        if self.mode == "mask":
            self.check(et.is_dynamic or et.name == "boolean", "mask must be boolean, got {}", et)
        else:
            check_shape_input(self, 1, "reverse_axes")
        self.axes()
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x, axes = inputs
        flat = np.asarray(axes).reshape(-1)
        ax = [i for i, m in enumerate(flat) if m] if self.mode == "mask" else \
            [int(a) % x.ndim for a in flat]
        return [np.flip(x, tuple(ax)) if ax else x]


# -- factories ------------------------------------------------------------------------------
def _i64(value: Any) -> Output:
    """A shape-like value: graph values pass through, python values become i64 Constants."""
    if isinstance(value, (Node, Output)):
        return to_output(value)
    return to_output(np.asarray(value, dtype=np.int64))


def reshape(node: Any, output_shape: Any, special_zero: bool, name: str | None = None) -> Node:
    return set_name(Reshape([to_output(node), _i64(output_shape)],
                            special_zero=bool(special_zero)), name)


def squeeze(data: Any, axes: Any = None, name: str | None = None) -> Node:
    inputs = [to_output(data)] + ([] if axes is None else [_i64(axes)])
    return set_name(Squeeze(inputs), name)


def unsqueeze(data: Any, axes: Any, name: str | None = None) -> Node:
    return set_name(Unsqueeze([to_output(data), _i64(axes)]), name)


def transpose(data: Any, input_order: Any, name: str | None = None) -> Node:
    return set_name(Transpose([to_output(data), _i64(input_order)]), name)


def concat(nodes: Sequence[Any], axis: int, name: str | None = None) -> Node:
    return set_name(Concat([to_output(n) for n in nodes], axis=int(axis)), name)


def split(data: Any, axis: Any, num_splits: int, name: str | None = None) -> Node:
    return set_name(Split([to_output(data), _i64(axis)], num_splits=int(num_splits)), name)


def variadic_split(data: Any, axis: Any, split_lengths: Any, name: str | None = None) -> Node:
    return set_name(VariadicSplit([to_output(data), _i64(axis), _i64(split_lengths)]), name)


def slice(data: Any, start: Any, stop: Any, step: Any, axes: Any = None,  # noqa: A001
          name: str | None = None) -> Node:
    inputs = [to_output(data), _i64(start), _i64(stop), _i64(step)]
    if axes is not None:
        inputs.append(_i64(axes))
    return set_name(Slice(inputs), name)


def strided_slice(data: Any, begin: Any, end: Any, strides: Any, begin_mask: Sequence[int],
                  end_mask: Sequence[int], new_axis_mask: Sequence[int] = (),
                  shrink_axis_mask: Sequence[int] = (), ellipsis_mask: Sequence[int] = (),
                  name: str | None = None) -> Node:
    return set_name(StridedSlice(
        [to_output(data), _i64(begin), _i64(end), _i64(strides)],
        begin_mask=[int(v) for v in begin_mask], end_mask=[int(v) for v in end_mask],
        new_axis_mask=[int(v) for v in new_axis_mask],
        shrink_axis_mask=[int(v) for v in shrink_axis_mask],
        ellipsis_mask=[int(v) for v in ellipsis_mask]), name)


def broadcast(data: Any, target_shape: Any, axes_mapping: Any = None, mode: str = "numpy",
              name: str | None = None, broadcast_spec: str | None = None) -> Node:
    """``broadcast_spec`` is OpenVINO's keyword for ``mode``."""
    mode = str(broadcast_spec or mode).lower()
    inputs = [to_output(data), _i64(target_shape)]
    if mode == "explicit":
        inputs.append(_i64(axes_mapping))
    return set_name(Broadcast(inputs, mode=mode), name)


def tile(data: Any, repeats: Any, name: str | None = None) -> Node:
    return set_name(Tile([to_output(data), _i64(repeats)]), name)


def pad(arg: Any, pads_begin: Any, pads_end: Any, pad_mode: str, arg_pad_value: Any = None,
        name: str | None = None) -> Node:
    x = to_output(arg)
    inputs = [x, _i64(pads_begin), _i64(pads_end)]
    if arg_pad_value is not None:
        inputs.append(arg_pad_value if isinstance(arg_pad_value, (Node, Output)) else
                      to_output(np.asarray(arg_pad_value, dtype=x.element_type.dtype)))
    return set_name(Pad(inputs, pad_mode=str(pad_mode).lower()), name)


def reverse(data: Any, reverse_axes: Any, mode: str, name: str | None = None) -> Node:
    axes = reverse_axes if isinstance(reverse_axes, (Node, Output)) else (
        to_output(np.asarray(reverse_axes, dtype=bool)) if mode == "mask" else _i64(reverse_axes))
    return set_name(Reverse([to_output(data), axes], mode=str(mode).lower()), name)


def depth_to_space(node: Any, mode: str, block_size: int = 1, name: str | None = None) -> Node:
    return set_name(DepthToSpace([to_output(node)], mode=str(mode).lower(),
                                 block_size=int(block_size)), name)


def space_to_depth(data: Any, mode: str, block_size: int = 1, name: str | None = None) -> Node:
    return set_name(SpaceToDepth([to_output(data)], mode=str(mode).lower(),
                                 block_size=int(block_size)), name)


# -- ONNX import ----------------------------------------------------------------------------
from .registry import onnx_export, onnx_rule  # noqa: E402

INT64_MAX = (1 << 63) - 1


def _input_or_attr(ctx, index: int, attr: str) -> Output | None:
    """An optional list-valued operand: the input in newer opsets, the attribute in older."""
    x = ctx.input(index)
    if x is not None:
        return x
    if ctx.has_attr(attr):
        return _i64(ctx.attr(attr))
    return None


@onnx_rule("Reshape", since=1)
def _import_reshape_v1(ctx):
    return Reshape([ctx.inputs[0], _i64(ctx.attr("shape", []))], special_zero=True).output(0)


@onnx_rule("Reshape", since=5)
def _import_reshape(ctx):
    allow_zero = ctx.attr("allowzero", 0)
    return Reshape([ctx.inputs[0], ctx.inputs[1]], special_zero=not allow_zero).output(0)


@onnx_rule("Flatten")
def _import_flatten(ctx):
    x = ctx.inputs[0]
    ps = x.partial_shape
    if not ps.rank_is_static:
        ctx.error("Flatten needs an input of static rank")
    axis = ctx.attr("axis", 1)
    rank = len(ps)
    if not -rank <= axis <= rank:
        ctx.error(f"axis {axis} out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    head, tail = ps.dims[:axis], ps.dims[axis:]
    if all(d.is_static for d in tail):
        pattern = [-1, math.prod(d.min for d in tail)]
    elif all(d.is_static for d in head):
        pattern = [math.prod(d.min for d in head), -1]
    elif axis == 1:
        return Reshape([x, _i64([0, -1])], special_zero=True).output(0)
    else:
        from .. import opset
        if not hasattr(opset, "reduce_prod"):
            ctx.error("dynamic dims before and after the axis need ReduceProd")
        from .shape_ops import ShapeOf
        shape = ShapeOf([x]).output(0)
        first = opset.reduce_prod(slice(shape, [0], [axis], [1]), [0], True)
        return Reshape([x, Concat([to_output(first), _i64([-1])], axis=0).output(0)],
                       special_zero=False).output(0)
    return Reshape([x, _i64(pattern)], special_zero=False).output(0)


@onnx_rule("Squeeze", since=1)
def _import_squeeze_v1(ctx):
    axes = _input_or_attr(ctx, 1, "axes")
    return Squeeze([ctx.inputs[0]] + ([axes] if axes is not None else [])).output(0)


@onnx_rule("Unsqueeze", since=1)
def _import_unsqueeze(ctx):
    axes = _input_or_attr(ctx, 1, "axes")
    if axes is None:
        ctx.error("Unsqueeze needs axes")
    return Unsqueeze([ctx.inputs[0], axes]).output(0)


@onnx_rule("Transpose")
def _import_transpose(ctx):
    perm = ctx.attr("perm", [])
    return Transpose([ctx.inputs[0], _i64(perm)]).output(0)


@onnx_rule("Concat")
def _import_concat(ctx):
    return Concat([x for x in ctx.inputs if x is not None], axis=ctx.attr("axis", 1)).output(0)


@onnx_rule("Split")
def _import_split(ctx):
    x = ctx.inputs[0]
    axis = ctx.attr("axis", 0)
    n = ctx.num_outputs
    if ctx.opset >= 13:
        lengths = ctx.input(1)
    else:
        lengths = ctx.input(1) if ctx.opset < 2 and ctx.input(1) is not None else (
            _i64(ctx.attr("split")) if ctx.has_attr("split") else None)
    if lengths is not None:
        return VariadicSplit([x, _i64(axis), lengths]).outputs()
    if ctx.opset >= 18 and ctx.has_attr("num_outputs"):
        n = ctx.attr("num_outputs", 0)
    ps = x.partial_shape
    if ps.rank_is_static:
        d = ps[axis]
        if d.is_static and d.min % n:
            # ONNX 18: the last chunk is smaller when the dim does not divide evenly.
            chunk = -(-d.min // n)
            sizes = [chunk] * (d.min // chunk) + ([d.min % chunk] if d.min % chunk else [])
            if len(sizes) != n:
                ctx.error(f"dimension {d.min} cannot be split into {n} chunks")
            return VariadicSplit([x, _i64(axis), _i64(sizes)]).outputs()
    return Split([x, _i64(axis)], num_splits=n).outputs()


@onnx_rule("Slice", since=1)
def _import_slice_v1(ctx):
    starts, ends = ctx.attr("starts", []), ctx.attr("ends", [])
    axes = ctx.attr("axes", list(range(len(starts))))
    return Slice([ctx.inputs[0], _i64(starts), _i64(ends), _i64([1] * len(starts)),
                  _i64(axes)]).output(0)


@onnx_rule("Slice", since=10)
def _import_slice(ctx):
    x, starts, ends = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    axes, steps = ctx.input(3), ctx.input(4)
    if steps is None:
        length = starts.partial_shape
        if not length.is_static:
            ctx.error("starts must have a static shape when steps are omitted")
        n = length.to_shape()[0] if len(length) else 1
        steps = _i64([1] * n)
    inputs = [x, starts, ends, steps] + ([axes] if axes is not None else [])
    return Slice(inputs).output(0)


@onnx_rule("Expand", since=8)
def _import_expand(ctx):
    return Broadcast([ctx.inputs[0], ctx.inputs[1]], mode="bidirectional").output(0)


@onnx_rule("Tile", since=6)
def _import_tile(ctx):
    return Tile([ctx.inputs[0], ctx.inputs[1]]).output(0)


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
    return Pad([x, _i64(pads[:n]), _i64(pads[n:]), to_output(value)],
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
        return _i64(full[:rank]), _i64(full[rank:])
    n = axes.partial_shape
    if not n.is_static:
        ctx.error("axes must have a static shape")
    n = n.to_shape()[0] if len(n) else 1
    from .indexing import ScatterUpdate
    zeros = _i64([0] * rank)
    halves = [Slice([pads, _i64([lo]), _i64([lo + n]), _i64([1])]).output(0) for lo in (0, n)]
    return tuple(ScatterUpdate([zeros, axes, h, _i64(0)]).output(0) for h in halves)


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
        begin, end = _i64(flat[:rank]), _i64(flat[rank:])
    else:
        begin = Slice([pads, _i64([0]), _i64([rank]), _i64([1])]).output(0)
        end = Slice([pads, _i64([rank]), _i64([2 * rank]), _i64([1])]).output(0)
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
    from .indexing import Gather
    b, e = begin.value, end.value
    for axis in builtins.range(len(x.partial_shape)):
        d = x.partial_shape[axis]
        if b is not None and e is not None and d.is_static:
            pb, pe = int(np.asarray(b)[axis]), int(np.asarray(e)[axis])
            if pb == 0 and pe == 0:
                continue
            kept = d.min + min(pb, 0) + min(pe, 0)
            pos = np.arange(kept + max(pb, 0) + max(pe, 0)) - max(pb, 0)
            idx = _i64(max(-pb, 0) + np.mod(pos, kept))
        else:
            idx = _wrap_indices(ctx, x, begin, end, axis)
        x = Gather([x, idx, _i64(axis)]).output(0)
    return x


def _wrap_indices(ctx, x: Output, begin: Output, end: Output, axis: int) -> Output:
    from .. import opset
    from .indexing import Gather
    from .shape_ops import Range, ShapeOf
    needed = ("add", "subtract", "floor_mod", "maximum", "minimum")
    if not all(hasattr(opset, f) for f in needed):
        ctx.error("wrap padding with run-time pads needs Add, Subtract, FloorMod, Maximum, Minimum")
    zero = _i64(0)
    dim = Gather([ShapeOf([x]).output(0), _i64(axis), zero]).output(0)
    pb, pe = (Gather([v, _i64(axis), zero]).output(0) for v in (begin, end))
    kept = opset.add(opset.add(dim, opset.minimum(pb, zero)), opset.minimum(pe, zero))
    grow_b, grow_e = opset.maximum(pb, zero), opset.maximum(pe, zero)
    n = opset.add(opset.add(kept, grow_b), grow_e)
    pos = opset.subtract(Range([zero, to_output(n), _i64(1)]).output(0), grow_b)
    crop = opset.maximum(opset.subtract(zero, pb), zero)
    return to_output(opset.add(crop, opset.floor_mod(pos, kept)))


@onnx_rule("DepthToSpace")
def _import_depth_to_space(ctx):
    mode = ctx.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        ctx.error(f"unknown mode '{mode}'")
    return DepthToSpace([ctx.inputs[0]], block_size=ctx.attr("blocksize", 1),
                        mode="blocks_first" if mode == "DCR" else "depth_first").output(0)


@onnx_rule("SpaceToDepth")
def _import_space_to_depth(ctx):
    mode = ctx.attr("mode", "DCR")  # the attribute exists from opset 28 on
    if mode not in ("DCR", "CRD"):
        ctx.error(f"unknown mode '{mode}'")
    return SpaceToDepth([ctx.inputs[0]], block_size=ctx.attr("blocksize", 1),
                        mode="blocks_first" if mode == "DCR" else "depth_first").output(0)


# -- ONNX export (opset 17) -----------------------------------------------------------------
def _export_error(node: Node, reason: str) -> None:
    raise UnsupportedOpError(node.type_name, "", 17, node.friendly_name,
                             f"cannot be written as ONNX: {reason}")


def _const_input(node: Node, i: int) -> list[int]:
    v = const_ints(node, i)
    if v is None:
        _export_error(node, f"input {i} must be constant")
    return v  # type: ignore[return-value]


@onnx_export(Reshape)
def _export_reshape(node, ectx):
    ins = ectx.inputs(node)
    pattern = const_ints(node, 1)
    allow_zero = 0 if node.special_zero or (pattern is not None and 0 not in pattern) else 1
    ectx.add_node("Reshape", ins, ectx.outputs(node), allowzero=allow_zero)


@onnx_export(Squeeze, Unsqueeze)
def _export_squeeze(node, ectx):
    ectx.add_node(node.type_name, ectx.inputs(node), ectx.outputs(node))


@onnx_export(Transpose)
def _export_transpose(node, ectx):
    order = node.order()
    if order is None:
        _export_error(node, "input_order must be constant")
    ectx.add_node("Transpose", ectx.inputs(node)[:1], ectx.outputs(node), perm=order)


@onnx_export(Concat)
def _export_concat(node, ectx):
    ectx.add_node("Concat", ectx.inputs(node), ectx.outputs(node), axis=node.axis)


@onnx_export(Split, VariadicSplit)
def _export_split(node, ectx):
    axis = _const_input(node, 1)[0]
    ins = ectx.inputs(node)
    if isinstance(node, Split):
        ectx.add_node("Split", ins[:1], ectx.outputs(node), axis=axis)
        return
    lengths = node.lengths()
    if lengths is None or -1 in lengths:
        _export_error(node, "split_lengths must be constant and resolvable")
    ectx.add_node("Split", [ins[0], ectx.constant(np.asarray(lengths, dtype=np.int64))],
                  ectx.outputs(node), axis=axis)


@onnx_export(Slice)
def _export_slice(node, ectx):
    ins = ectx.inputs(node)
    if len(ins) == 4:
        ins = ins[:3] + [ectx.constant(np.arange(_vector_size(node, 1), dtype=np.int64)), ins[3]]
    else:
        ins = ins[:3] + [ins[4], ins[3]]
    ectx.add_node("Slice", ins, ectx.outputs(node))


def _vector_size(node: Node, i: int) -> int:
    n = vector_length(node, i)
    if n is None:
        _export_error(node, f"input {i} must have a static shape")
    return n  # type: ignore[return-value]


@onnx_export(StridedSlice)
def _export_strided_slice(node, ectx):
    data = node.get_input_partial_shape(0)
    begin, end = _const_input(node, 1), _const_input(node, 2)
    strides = _const_input(node, 3) if node.get_input_size() == 4 else [1] * len(begin)
    if not data.rank_is_static:
        _export_error(node, "input rank must be static")
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


@onnx_export(Broadcast)
def _export_broadcast(node, ectx):
    ins = ectx.inputs(node)
    data = ins[0]
    if node.mode == "explicit":
        mapping = _const_input(node, 2)
        target_rank = _vector_size(node, 1)
        shape = node.get_input_partial_shape(0)
        ones = [a for a in range(target_rank) if a not in mapping]
        if not shape.rank_is_static:
            _export_error(node, "data rank must be static")
        data = ectx.fresh("unsqueezed")
        ectx.add_node("Unsqueeze", [ins[0], ectx.constant(np.asarray(ones, dtype=np.int64))],
                      [data])
    ectx.add_node("Expand", [data, ins[1]], ectx.outputs(node))


@onnx_export(Tile)
def _export_tile(node, ectx):
    reps = _const_input(node, 1)
    data = node.get_input_partial_shape(0)
    if not data.rank_is_static:
        _export_error(node, "data rank must be static")
    name = ectx.inputs(node)[0]
    rank = len(data)
    if len(reps) > rank:
        name2 = ectx.fresh("unsqueezed")
        ectx.add_node("Unsqueeze", [name, ectx.constant(
            np.arange(len(reps) - rank, dtype=np.int64))], [name2])
        name = name2
    reps = [1] * (rank - len(reps)) + reps
    ectx.add_node("Tile", [name, ectx.constant(np.asarray(reps, dtype=np.int64))],
                  ectx.outputs(node))


@onnx_export(Pad)
def _export_pad(node, ectx):
    if node.pad_mode == "symmetric":
        _export_error(node, "ONNX Pad has no symmetric mode")
    ins = ectx.inputs(node)
    begin, end = const_ints(node, 1), const_ints(node, 2)
    if begin is not None and end is not None:
        pads = ectx.constant(np.asarray(begin + end, dtype=np.int64))
    else:
        pads = ectx.fresh("pads")
        ectx.add_node("Concat", ins[1:3], [pads], axis=0)
    ectx.add_node("Pad", [ins[0], pads] + ins[3:4], ectx.outputs(node), mode=node.pad_mode)


@onnx_export(Reverse)
def _export_reverse(node, ectx):
    axes = node.axes()
    if axes is None:
        _export_error(node, "reverse_axes must be constant")
    if not axes:
        ectx.add_node("Identity", ectx.inputs(node)[:1], ectx.outputs(node))
        return
    n = len(axes)
    consts = [ectx.constant(np.asarray(v, dtype=np.int64))
              for v in ([-1] * n, [-INT64_MAX - 1] * n, axes, [-1] * n)]
    ectx.add_node("Slice", ectx.inputs(node)[:1] + consts, ectx.outputs(node))


@onnx_export(DepthToSpace)
def _export_depth_to_space(node, ectx):
    ectx.add_node("DepthToSpace", ectx.inputs(node), ectx.outputs(node),
                  blocksize=int(node.block_size),
                  mode="DCR" if node.mode == "blocks_first" else "CRD")


@onnx_export(SpaceToDepth)
def _export_space_to_depth(node, ectx):
    if node.mode != "blocks_first":
        _export_error(node, "ONNX SpaceToDepth has only the blocks_first order before opset 28")
    ectx.add_node("SpaceToDepth", ectx.inputs(node), ectx.outputs(node),
                  blocksize=int(node.block_size))
