"""ONNX sequence ops (opset 11+): SequenceEmpty, SequenceConstruct, SequenceAt, SequenceInsert,
SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence. OpenVINO has no sequences;
netpass keeps them as ops of their own on sequence values (:mod:`netpass.core.containers`: a
sequence output's partial shape is the shape every element fits, its value a box holding the
list of arrays). Positions may be negative (counted from the end); one out of range is an
error naming the op, as the specification says.
"""
from __future__ import annotations

from typing import Any, cast

import numpy as np

from ..core.containers import box, sequence_items
from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from ..core.subgraph import shape_union
from ..core.types import SequenceType, Type, f32, i64, sequence_of
from ..errors import NetpassError
from .base import NETPASS_OPSET, normalize_axis, set_name, to_output
from .onnx_types import onnx_element_type
from .registry import onnx_rule

__all__ = ["sequence_empty", "sequence_construct", "sequence_at", "sequence_insert",
           "sequence_erase", "sequence_length", "split_to_sequence", "concat_from_sequence"]


class _SequenceOp(Node):
    """Base: ops whose outputs hold lists are not folded into Constants (a Constant holds a
    tensor); the runtime runs them on the host, where sequence values live, and takes the
    shapes of what they give from the values themselves."""

    version = NETPASS_OPSET
    FOLDABLE = False
    DATA_DEPENDENT_SHAPE = True

    def sequence_input(self, i: int) -> SequenceType:
        et = self.get_input_element_type(i)
        self.check(isinstance(et, SequenceType), "input {} must be a sequence, got {}", i, et)
        return cast(SequenceType, et)

    def position(self, i: int) -> None:
        if i < self.get_input_size():
            et = self.get_input_element_type(i)
            ps = self.get_input_partial_shape(i)
            self.check(et.name in ("i32", "i64", "dynamic"), "position must be i32 or i64, got "
                       "{}", et)
            self.check(not ps.rank_is_static or len(ps) == 0 or
                       (len(ps) == 1 and ps[0].compatible(1)),
                       "position must be a scalar, got shape {}", ps)


def _index(op: Node, pos: Any, length: int, insert: bool = False) -> int:
    """A position as an index into a list of ``length`` (``insert``: ``length`` allowed)."""
    p = int(np.asarray(pos).reshape(-1)[0])
    hi = length if insert else length - 1
    if not -length <= p <= hi:
        raise NetpassError(f"{op.type_name} '{op.friendly_name}': position {p} is out of range "
                           f"for a sequence of {length}")
    return p + length if p < 0 else p


class SequenceEmpty(_SequenceOp):
    type_name = "SequenceEmpty"
    ATTRS = {"element_type": f32}

    def infer_types(self) -> None:
        self.set_output_type(0, sequence_of(Type.of(self.element_type)), PartialShape(None))

    def evaluate(self, inputs):
        return [box([])]


class SequenceConstruct(_SequenceOp):
    type_name = "SequenceConstruct"

    def infer_types(self) -> None:
        self.check(self.get_input_size() >= 1, "needs at least one input")
        et = self.get_input_element_type(0)
        ps = self.get_input_partial_shape(0)
        for i in range(1, self.get_input_size()):
            other = self.get_input_element_type(i)
            self.check(et.merge(other) is not None, "input {} is {}, input 0 {}", i, other, et)
            ps = shape_union(ps, self.get_input_partial_shape(i))
        self.set_output_type(0, sequence_of(et), ps)

    def evaluate(self, inputs):
        return [box(list(inputs))]


class SequenceAt(_SequenceOp):
    type_name = "SequenceAt"
    FOLDABLE = True  # a tensor out; its sequence input is never a known value anyway

    def infer_types(self) -> None:
        seq = self.sequence_input(0)
        self.position(1)
        self.set_output_type(0, seq.element, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        items = sequence_items(inputs[0], self.type_name)
        return [items[_index(self, inputs[1], len(items))]]


class SequenceInsert(_SequenceOp):
    type_name = "SequenceInsert"

    def infer_types(self) -> None:
        seq = self.sequence_input(0)
        et = self.get_input_element_type(1)
        self.check(seq.element.merge(et) is not None, "inserts {} into {}", et, seq)
        self.position(2)
        ps = shape_union(self.get_input_partial_shape(0), self.get_input_partial_shape(1))
        self.set_output_type(0, seq, ps)

    def evaluate(self, inputs):
        items = sequence_items(inputs[0], self.type_name)
        at = _index(self, inputs[2], len(items), insert=True) if len(inputs) > 2 else len(items)
        items.insert(at, inputs[1])
        return [box(items)]


class SequenceErase(_SequenceOp):
    type_name = "SequenceErase"

    def infer_types(self) -> None:
        seq = self.sequence_input(0)
        self.position(1)
        self.set_output_type(0, seq, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        items = sequence_items(inputs[0], self.type_name)
        at = _index(self, inputs[1], len(items)) if len(inputs) > 1 else \
            _index(self, -1, len(items))
        del items[at]
        return [box(items)]


class SequenceLength(_SequenceOp):
    type_name = "SequenceLength"
    FOLDABLE = True

    def infer_types(self) -> None:
        self.sequence_input(0)
        self.set_output_type(0, i64, PartialShape([]))

    def evaluate(self, inputs):
        return [np.array(len(sequence_items(inputs[0], self.type_name)), np.int64)]


class SplitToSequence(_SequenceOp):
    """``split``: absent (parts of one element, squeezed unless ``keepdims``), a scalar (parts
    of that length, the last one shorter) or a list of lengths."""

    type_name = "SplitToSequence"
    ATTRS = {"axis": 0, "keepdims": True}

    def infer_types(self) -> None:
        et = self.get_input_element_type(0)
        ps = self.get_input_partial_shape(0)
        if self.get_input_size() > 1:
            split_et = self.get_input_element_type(1)
            self.check(split_et.name in ("i32", "i64", "dynamic"), "split must be i32 or i64, "
                       "got {}", split_et)
        if not ps.rank_is_static:
            self.set_output_type(0, sequence_of(et), ps)
            return
        axis = normalize_axis(self, self.axis, len(ps))
        dims = list(ps)
        split = self.input_constant(1) if self.get_input_size() > 1 else None
        if self.get_input_size() == 1:
            if self.keepdims:
                dims[axis] = Dimension(1)
            else:
                del dims[axis]
        elif split is not None and np.asarray(split).ndim == 1 and \
                len(set(np.asarray(split).tolist())) == 1:
            dims[axis] = Dimension(int(np.asarray(split)[0]))
        else:
            dims[axis] = Dimension(0, dims[axis].max)
        self.set_output_type(0, sequence_of(et), PartialShape(dims))

    def evaluate(self, inputs):
        x = inputs[0]
        axis = self.axis % x.ndim
        n = x.shape[axis]
        if len(inputs) == 1:
            parts = np.split(x, n, axis=axis)
            if not self.keepdims:
                parts = [np.squeeze(p, axis=axis) for p in parts]
            return [box(parts)]
        split = np.asarray(inputs[1])
        if split.ndim == 0:
            size = int(split)
            if size <= 0:
                raise NetpassError(f"SplitToSequence '{self.friendly_name}': split {size} "
                                   "must be positive")
            cuts = list(range(size, n, size))
        else:
            lengths = split.astype(np.int64).tolist()
            if sum(lengths) != n or any(v < 0 for v in lengths):
                raise NetpassError(f"SplitToSequence '{self.friendly_name}': lengths {lengths} "
                                   f"do not add up to dim {n}")
            cuts = np.cumsum(lengths)[:-1].tolist()
        return [box(np.split(x, cuts, axis=axis))]


class ConcatFromSequence(_SequenceOp):
    """Concatenate the elements along ``axis``, or stack them on a new one (``new_axis``)."""

    type_name = "ConcatFromSequence"
    ATTRS = {"axis": 0, "new_axis": False}
    FOLDABLE = True

    def infer_types(self) -> None:
        seq = self.sequence_input(0)
        ps = self.get_input_partial_shape(0)
        if not ps.rank_is_static:
            self.set_output_type(0, seq.element, ps)
            return
        rank = len(ps) + int(bool(self.new_axis))
        axis = normalize_axis(self, self.axis, rank)
        dims = list(ps)
        if self.new_axis:
            dims.insert(axis, Dimension())
        else:
            dims[axis] = Dimension()
        self.set_output_type(0, seq.element, PartialShape(dims))

    def evaluate(self, inputs):
        items = sequence_items(inputs[0], self.type_name)
        if not items:
            raise NetpassError(f"ConcatFromSequence '{self.friendly_name}': the sequence is "
                               "empty")
        if self.new_axis:
            return [np.stack(items, axis=self.axis)]
        return [np.concatenate(items, axis=self.axis)]


# -- factories -------------------------------------------------------------------------------
def sequence_empty(element_type: Any = f32, name: str | None = None) -> Node:
    """An empty sequence of ``element_type`` (ONNX SequenceEmpty)."""
    return set_name(SequenceEmpty([], element_type=Type.of(element_type)), name)


def sequence_construct(values: list, name: str | None = None) -> Node:
    """A sequence of ``values``, in order (ONNX SequenceConstruct)."""
    return set_name(SequenceConstruct([to_output(v) for v in values]), name)


def sequence_at(sequence: Any, position: Any, name: str | None = None) -> Node:
    """The element at ``position`` (negative: from the end; ONNX SequenceAt)."""
    return set_name(SequenceAt([to_output(sequence), to_output(position, i64)]), name)


def sequence_insert(sequence: Any, value: Any, position: Any = None,
                    name: str | None = None) -> Node:
    """``sequence`` with ``value`` inserted at ``position`` (default: appended)."""
    args = [to_output(sequence), to_output(value)]
    if position is not None:
        args.append(to_output(position, i64))
    return set_name(SequenceInsert(args), name)


def sequence_erase(sequence: Any, position: Any = None, name: str | None = None) -> Node:
    """``sequence`` without the element at ``position`` (default: the last)."""
    args = [to_output(sequence)] + ([to_output(position, i64)] if position is not None else [])
    return set_name(SequenceErase(args), name)


def sequence_length(sequence: Any, name: str | None = None) -> Node:
    """The number of elements (an i64 scalar; ONNX SequenceLength)."""
    return set_name(SequenceLength([to_output(sequence)]), name)


def split_to_sequence(data: Any, split: Any = None, axis: int = 0, keepdims: bool = True,
                      name: str | None = None) -> Node:
    """``data`` cut along ``axis`` into a sequence (ONNX SplitToSequence)."""
    args = [to_output(data)] + ([to_output(split, i64)] if split is not None else [])
    return set_name(SplitToSequence(args, axis=int(axis), keepdims=bool(keepdims)), name)


def concat_from_sequence(sequence: Any, axis: int, new_axis: bool = False,
                         name: str | None = None) -> Node:
    """The elements concatenated along ``axis``, or stacked on a new one."""
    return set_name(ConcatFromSequence([to_output(sequence)], axis=int(axis),
                                       new_axis=bool(new_axis)), name)


# -- ONNX (opset 11; later versions add element types only) ----------------------------------
@onnx_rule("SequenceEmpty", since=11)
def _import_sequence_empty(ctx):
    dtype = ctx.attr("dtype", 1)
    return SequenceEmpty([], element_type=onnx_element_type(dtype, f"node '{ctx.name}' dtype"))


@onnx_rule("SequenceConstruct", since=11)
def _import_sequence_construct(ctx):
    return SequenceConstruct(ctx.inputs)


@onnx_rule("SequenceAt", since=11)
def _import_sequence_at(ctx):
    return SequenceAt(ctx.inputs[:2])


@onnx_rule("SequenceInsert", since=11)
def _import_sequence_insert(ctx):
    return SequenceInsert([v for v in ctx.inputs[:3] if v is not None])


@onnx_rule("SequenceErase", since=11)
def _import_sequence_erase(ctx):
    return SequenceErase([v for v in ctx.inputs[:2] if v is not None])


@onnx_rule("SequenceLength", since=11)
def _import_sequence_length(ctx):
    return SequenceLength(ctx.inputs[:1])


@onnx_rule("SplitToSequence", since=11)
def _import_split_to_sequence(ctx):
    return SplitToSequence([v for v in ctx.inputs[:2] if v is not None], axis=ctx.attr("axis", 0),
                           keepdims=bool(ctx.attr("keepdims", 1)))


@onnx_rule("ConcatFromSequence", since=11)
def _import_concat_from_sequence(ctx):
    return ConcatFromSequence(ctx.inputs[:1], axis=ctx.attr("axis", 0),
                              new_axis=bool(ctx.attr("new_axis", 0)))
