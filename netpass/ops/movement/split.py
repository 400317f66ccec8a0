"""Split (equal parts) and VariadicSplit (given lengths) along an axis (their ONNX import rule
is in :mod:`netpass.ops.shape_ops`: ONNX 18's uneven chunks of a dynamic dim take ShapeOf math)."""
from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.dimension import INF, Dimension
from ...core.node import Node
from ...core.ports import Output, _connect, _Port
from ...core.shape import PartialShape
from ..base import normalize_axis, set_name, to_output
from ..registry import onnx_export
from ..shape_inputs import (
    check_shape_input,
    const_ints,
    export_const_ints,
    export_error,
    i64_operand,
    vector_length,
)

__all__ = ["split", "variadic_split"]


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


def _runtime_lengths(node: Node, n: int) -> list[Dimension]:
    """The axis dims of a VariadicSplit's ``n`` outputs when its lengths are not constant: each
    length's partial value where known (a ShapeOf's dim divided, ...), else dynamic."""
    pv = node.input_partial_value(2)
    if pv is None or len(pv) != n:
        return [Dimension()] * n
    return [v if isinstance(v, Dimension) else Dimension(v) if v >= 0 else Dimension()
            for v in pv]


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

    @staticmethod
    def of(value: Output, axis_value: Output, lengths_value: Output, axis: int,
           lengths: Sequence[int]) -> VariadicSplit:
        """``VariadicSplit([value, axis_value, lengths_value])``, built directly when ``axis``
        and ``lengths`` (the contents of the two Constants: a normalized axis, lengths without
        -1 that add up to the dim) settle the outputs: the input dims with the axis dim
        replaced, no known elements. Gather absorption cuts inputs by the thousand, and
        inference was most of building a VariadicSplit. A value of dynamic rank, with a
        dynamic dim on the axis or with known elements takes the generic way."""
        port = value.node._outs[value.index]
        dims = port.ps._dims
        if dims is None or not 0 <= axis < len(dims) or not dims[axis].is_static \
                or port.val is not None or port.pval is not None:
            return VariadicSplit([value, axis_value, lengths_value])
        node = VariadicSplit.__new__(VariadicSplit)
        node._init_state()
        node._inputs = [value, axis_value, lengths_value]
        me, ref = id(node), weakref.ref(node)
        for i, v in enumerate(node._inputs):
            _connect(v.node._outs[v.index].cons, (me, i), ref)
        of, et, row = Dimension.of, port.et, list(dims)
        outs = []
        for n in lengths:
            out = _Port()
            out.et = et
            row[axis] = of(n)
            out.ps = PartialShape.of_dims(tuple(row))
            outs.append(out)
        node._outs = tuple(outs)
        return node

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
            if n is None:
                self.fail("the number of outputs is unknown: split_lengths must have a static "
                          "shape")
            self.set_output_size(n)
            for i, length in enumerate(_runtime_lengths(self, n)):
                if axis is None:
                    self.set_output_type(i, et, _same_rank(data))
                else:  # (only the axis dim is unknown: lengths computed from a ShapeOf)
                    self.set_output_type(i, et, PartialShape(
                        [length if k == axis else x for k, x in enumerate(data)]))
            return
        self.check(raw.count(-1) <= 1, "split_lengths {} has more than one -1", raw)
        self.check(all(v >= -1 for v in raw), "invalid split_lengths {}", raw)
        lengths = raw
        known = sum(v for v in raw if v != -1)
        if axis is not None and data[axis].is_static:
            d = data[axis].min
            self.check(known <= d if -1 in raw else known == d,
                       "split_lengths {} do not add up to dimension {} on axis {}", raw, d, axis)
            if -1 in raw:  # (what lengths() gives)
                lengths = [d - known if v == -1 else v for v in raw]
        self.set_output_size(len(lengths))
        if axis is None:
            same = _same_rank(data)
            for i in range(len(lengths)):
                self.set_output_type(i, et, same)
            return
        # (Sinking re-infers VariadicSplits by the thousand: the dims are copied as a list
        # once, and each output's tuple differs only on the axis.)
        of = Dimension.of
        dims = list(data._dims)  # type: ignore[arg-type]  # (a static rank: axis is known)
        for i, v in enumerate(lengths):
            dims[axis] = data[axis] - known if v == -1 else of(v)
            self.set_output_type(i, et, PartialShape.of_dims(tuple(dims)))

    def infer_values(self) -> None:
        ps = self.get_input_partial_shape(0)
        if not (ps.is_static and len(ps) == 1):
            return
        lengths = self.lengths()
        if lengths is not None and -1 not in lengths:
            _split_partial_values(self, lengths)

    def evaluate(self, inputs):
        x, axis, lengths = inputs
        axis = int(np.asarray(axis).reshape(-1)[0]) % x.ndim
        lengths = [int(v) for v in np.asarray(lengths).reshape(-1)]
        # (lengths computed at run time get the checks inference gives constant ones)
        self.check(lengths.count(-1) <= 1 and min(lengths, default=0) >= -1,
                   "invalid split_lengths {}", lengths)
        known = sum(v for v in lengths if v != -1)
        d = x.shape[axis]
        self.check(known <= d if -1 in lengths else known == d,
                   "split_lengths {} do not add up to dimension {} on axis {}", lengths, d, axis)
        if -1 in lengths:
            lengths[lengths.index(-1)] = d - known
        bounds = np.cumsum(lengths)[:-1]
        return list(np.split(x, bounds, axis=axis))


def split(data: Any, axis: Any, num_splits: int, name: str | None = None) -> Node:
    """Split-1: ``data`` cut into ``num_splits`` equal parts along ``axis``; one output per part."""
    return set_name(Split([to_output(data), i64_operand(axis)], num_splits=int(num_splits)), name)


def variadic_split(data: Any, axis: Any, split_lengths: Any, name: str | None = None) -> Node:
    """VariadicSplit-1: ``data`` cut along ``axis`` into parts of ``split_lengths`` (one of them
    may be -1: what is left); one output per part."""
    return set_name(VariadicSplit([to_output(data), i64_operand(axis), i64_operand(split_lengths)]),
                    name)


@onnx_export(Split, VariadicSplit)
def _export_split(node, ectx):
    axis = export_const_ints(node, 1)[0]
    ins = ectx.inputs(node)
    if isinstance(node, Split):
        ectx.add_node("Split", ins[:1], ectx.outputs(node), axis=axis)
        return
    lengths = node.lengths()
    if lengths is None or -1 in lengths:
        export_error(node, "split_lengths must be constant and resolvable")
    ectx.add_node("Split", [ins[0], ectx.constant(np.asarray(lengths, dtype=np.int64))],
                  ectx.outputs(node), axis=axis)
