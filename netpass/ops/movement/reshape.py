"""Reshape, Squeeze and Unsqueeze: new shape, same data."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.dimension import INF, Dimension, symbolic_quotient
from ...core.node import OP_TYPES, Node, Output
from ...core.shape import PartialShape
from ..base import normalize_axis, set_name, to_output
from ..registry import onnx_export, onnx_rule
from ..shape_inputs import (
    check_shape_input,
    const_ints,
    i64_operand,
    pass_partial_value,
    shape_values,
    vector_length,
)

__all__ = ["reshape", "squeeze", "unsqueeze"]


def _dim_product(dims: Sequence[Dimension]) -> Dimension:
    out = Dimension(1)
    for d in dims:
        out = out * d
    return out


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
            # (a symbolic quotient: [b * s, 64] -> [b, -1, 64] gives s)
            symbol = symbolic_quotient(n_in, n_out)
            if n_out.min == 0:
                return Dimension(symbol=symbol)
            hi = -1 if n_in.max == INF else n_in.max // n_out.min
            lo = 0 if n_out.max == INF else -(-n_in.min // n_out.max)
            return Dimension(lo if hi == -1 else min(lo, hi), hi, symbol)
        if s_out == 0:
            return Dimension(0) if n_in.max == 0 else Dimension()
        if not ins_dyn:
            return Dimension(s_in // s_out)
        if len(ins_dyn) == 1 and s_in == s_out:
            return ins_dyn[0]
        hi = -1 if n_in.max == INF else n_in.max // s_out
        # (the product of the symbolic dims: [b, s, 64] -> [-1, 64] gives b * s)
        return Dimension(-(-n_in.min // s_out), hi, symbolic_quotient(n_in, Dimension(s_out)))

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


class Squeeze(Node):
    """Squeeze v0: remove the given axes that are (or may be) of size 1, or, without axes or
    with an empty list, every dim of size 1. A listed axis of another size is kept as is: the
    spec since OpenVINO 2024.3, which its torch frontend relies on for ``x.squeeze(d)`` (a no-op
    in torch where dim ``d`` is not 1)."""

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
        self.set_output_type(0, et, PartialShape(
            [d for i, d in enumerate(data) if i not in norm or not d.compatible(1)]))

    def infer_values(self) -> None:
        pass_partial_value(self)

    def evaluate(self, inputs):
        x = inputs[0]
        axes = tuple({int(a) % max(x.ndim, 1) for a in np.asarray(inputs[1]).reshape(-1)}) \
            if len(inputs) == 2 else ()
        if not axes:
            return [np.squeeze(x)] if x.ndim else [x]
        return [np.squeeze(x, axis=tuple(a for a in axes if x.shape[a] == 1))]


class Squeeze15(Squeeze):
    """Squeeze v15: v1 with ``allow_axis_skip``: where true, a listed axis of unknown size may
    be kept, so the output rank is unknown until its size is (v1, and v15 without it, take
    such an axis for a 1). The values are v1's."""

    type_name = "Squeeze"
    version = "opset15"
    ATTRS = {"allow_axis_skip": False}

    def infer_types(self) -> None:
        super().infer_types()
        data = self.get_input_partial_shape(0)
        if not self.allow_axis_skip or self.get_input_size() < 2 or not data.rank_is_static:
            return
        axes = const_ints(self, 1) or []
        if any(data[normalize_axis(self, a, len(data))].is_dynamic for a in axes):
            self.set_output_type(0, self.get_input_element_type(0), PartialShape(None))


# The first version stays the class ``netpass.ops.Squeeze`` names; IR reading picks the exact
# version by (type, opset).
OP_TYPES["Squeeze"] = Squeeze


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


def reshape(node: Any, output_shape: Any, special_zero: bool, name: str | None = None) -> Node:
    """Reshape-1: ``node`` with shape ``output_shape`` (a list or a graph value); one -1 takes
    what is left of the element count, and with ``special_zero`` a 0 keeps the input dim at that
    position."""
    return set_name(Reshape([to_output(node), i64_operand(output_shape)],
                            special_zero=bool(special_zero)), name)


def squeeze(data: Any, axes: Any = None, name: str | None = None) -> Node:
    """Squeeze-1: ``data`` without the dims of length 1 listed in ``axes`` (default: every dim of
    length 1)."""
    inputs = [to_output(data)] + ([] if axes is None else [i64_operand(axes)])
    return set_name(Squeeze(inputs), name)


def unsqueeze(data: Any, axes: Any, name: str | None = None) -> Node:
    """Unsqueeze-1: ``data`` with dims of length 1 inserted at ``axes`` (positions in the
    output; negative counts from its end)."""
    return set_name(Unsqueeze([to_output(data), i64_operand(axes)]), name)


def _input_or_attr(ctx, index: int, attr: str) -> Output | None:
    """An optional list-valued operand: the input in newer opsets, the attribute in older."""
    x = ctx.input(index)
    if x is not None:
        return x
    if ctx.has_attr(attr):
        return i64_operand(ctx.attr(attr))
    return None


@onnx_rule("Reshape", since=1)
def _import_reshape_v1(ctx):
    return Reshape([ctx.inputs[0], i64_operand(ctx.attr("shape", []))], special_zero=True).output(0)


@onnx_rule("Reshape", since=5)
def _import_reshape(ctx):
    allow_zero = ctx.attr("allowzero", 0)
    return Reshape([ctx.inputs[0], ctx.inputs[1]], special_zero=not allow_zero).output(0)


@onnx_rule("Squeeze", since=1)
def _import_squeeze_v1(ctx):
    axes = _input_or_attr(ctx, 1, "axes")
    node = Squeeze([ctx.inputs[0]] + ([axes] if axes is not None else []))
    data = ctx.inputs[0].partial_shape
    listed = const_ints(node, 1) if axes is not None else None
    if listed and data.rank_is_static:  # (ONNX, unlike OpenVINO, refuses a dim other than 1)
        for a in listed:
            dim = data[a % max(len(data), 1)]
            node.check(dim.compatible(1), "axis {} has dimension {}; ONNX Squeeze removes only "
                       "axes of size 1", a, dim)
    return node.output(0)


@onnx_rule("Unsqueeze", since=1)
def _import_unsqueeze(ctx):
    axes = _input_or_attr(ctx, 1, "axes")
    if axes is None:
        ctx.error("Unsqueeze needs axes")
    return Unsqueeze([ctx.inputs[0], axes]).output(0)


@onnx_export(Reshape)
def _export_reshape(node, ectx):
    ins = ectx.inputs(node)
    pattern = const_ints(node, 1)
    allow_zero = 0 if node.special_zero or (pattern is not None and 0 not in pattern) else 1
    ectx.add_node("Reshape", ins, ectx.outputs(node), allowzero=allow_zero)


@onnx_export(Squeeze, Unsqueeze)
def _export_squeeze(node, ectx):
    ectx.add_node(node.type_name, ectx.inputs(node), ectx.outputs(node))
