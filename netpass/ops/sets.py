"""Ops whose output shapes depend on the input values: NonZero (OpenVINO opset3) and Unique
(opset10), and ONNX Compress as NonZero + Gather (as OpenVINO's ONNX frontend builds it).

Their classes set ``DATA_DEPENDENT_SHAPE``: shape inference gives the largest possible extent
as an interval, and the runtime computes their outputs on the host before it sizes the buffers
that follow.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import Type, i32, i64
from .base import normalize_axis, set_name, to_output
from .indexing import Gather
from .movement import Reshape
from .registry import export_error, onnx_export, onnx_rule
from .shape_inputs import i64_operand

__all__ = ["non_zero", "unique"]


def _count(ps: PartialShape) -> Dimension:
    """The element count of ``ps`` as a Dimension (an interval when dims are)."""
    if not ps.rank_is_static:
        return Dimension()
    total = Dimension(1)
    for d in ps:
        total = total * d
    return total


class NonZero(Node):
    """Indices of the non-zero elements, ``[rank, count]`` in row-major order (a scalar gives
    ``[0, count]``)."""

    type_name = "NonZero"
    version = "opset3"
    ATTRS = {"output_type": i64}
    output_type: Any
    DATA_DEPENDENT_SHAPE = True

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.output_type = Type.of(self.output_type)
        self.check(self.output_type in (i32, i64), "output_type must be i32 or i64, got {}",
                   self.output_type)
        ps = self.get_input_partial_shape(0)
        rank = Dimension(len(ps)) if ps.rank_is_static else Dimension()
        self.set_output_type(0, self.output_type,
                             PartialShape([rank, Dimension(0, _count(ps).max)]))

    def evaluate(self, inputs):
        x = inputs[0]
        dt = self.output_type.dtype
        if x.ndim == 0:
            return [np.zeros((0, int(bool(x))), dt)]
        nz = x != 0 if x.dtype != object else x != ""
        return [np.array(np.nonzero(nz), dtype=dt).reshape(x.ndim, -1)]


class Unique(Node):
    """The distinct elements (``axis`` None: of the flattened data) or distinct slices along
    ``axis``, ascending when ``sorted`` else in order of first occurrence; outputs
    ``(unique, first indices, inverse indices, counts)``."""

    type_name = "Unique"
    version = "opset10"
    ATTRS = {"sorted": True, "axis": None, "index_element_type": i64,
             "count_element_type": i64}
    count_element_type: Any
    index_element_type: Any
    DATA_DEPENDENT_SHAPE = True

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input (the axis is an attribute)")
        self.index_element_type = Type.of(self.index_element_type)
        self.count_element_type = Type.of(self.count_element_type)
        ps = self.get_input_partial_shape(0)
        et = self.get_input_element_type(0)
        if self.axis is None or not ps.rank_is_static:
            n = _count(ps)
            out = PartialShape([Dimension(min(n.min, 1), n.max)]) if \
                self.axis is None else PartialShape(None)
            inverse = n
        else:
            axis = normalize_axis(self, self.axis, len(ps))
            d = ps[axis]
            dims = list(ps)
            dims[axis] = Dimension(min(d.min, 1), d.max)
            out, n, inverse = PartialShape(dims), d, d
        k = Dimension(min(n.min, 1), n.max)
        self.set_output_type(0, et, out)
        self.set_output_type(1, self.index_element_type, PartialShape([k]))
        self.set_output_type(2, self.index_element_type, PartialShape([inverse]))
        self.set_output_type(3, self.count_element_type, PartialShape([k]))

    def evaluate(self, inputs):
        x = inputs[0]
        if self.axis is None:
            values, first, inverse, counts = np.unique(x.reshape(-1), return_index=True,
                                                       return_inverse=True, return_counts=True)
            axis = 0
        else:
            axis = self.axis % x.ndim
            values, first, inverse, counts = np.unique(x, axis=axis, return_index=True,
                                                       return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        if not self.sorted:  # reorder by first occurrence
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order))
            values = np.take(values, order, axis=axis)
            first, counts, inverse = first[order], counts[order], rank[inverse]
        it, ct = self.index_element_type.dtype, self.count_element_type.dtype
        return [values, first.astype(it), inverse.astype(it), counts.astype(ct)]


# -- factories ---------------------------------------------------------------------------------

def non_zero(data: Any, output_type: Any = "i64", name: str | None = None) -> Node:
    """NonZero-3: the indices of the non-zero elements of ``data`` as ``[rank, count]``
    (row-major order) of ``output_type``; ``count`` is known only when the data is."""
    return set_name(NonZero([to_output(data)], output_type=Type.of(output_type)), name)


def unique(data: Any, axis: int | None = None, sorted: bool = True,
           index_element_type: Any = "i64", count_element_type: Any = "i64",
           name: str | None = None) -> Node:
    """Unique-10: the distinct elements of ``data`` (``axis`` None: flattened) or distinct slices
    along ``axis``, ascending when ``sorted`` else in order of first occurrence. Outputs: unique
    values, first indices, inverse indices (``index_element_type``) and counts
    (``count_element_type``)."""
    return set_name(Unique([to_output(data)], axis=axis, sorted=sorted,
                           index_element_type=Type.of(index_element_type),
                           count_element_type=Type.of(count_element_type)), name)


# -- ONNX import -------------------------------------------------------------------------------

onnx_rule("NonZero", since=9)(lambda ctx: NonZero(ctx.inputs[:1]))


@onnx_rule("Unique", since=11)
def _import_unique(ctx):
    axis = ctx.attr("axis", 0) if ctx.has_attr("axis") else None
    return Unique(ctx.inputs[:1], axis=axis, sorted=bool(ctx.attr("sorted", 1))).outputs()


@onnx_rule("Compress", since=9)
def _import_compress(ctx):
    x, cond = ctx.inputs[0], ctx.inputs[1]
    picked = Reshape([NonZero([cond]).output(0), i64_operand([-1])], special_zero=False)
    if ctx.has_attr("axis"):
        return Gather([x, picked.output(0), i64_operand(ctx.attr("axis", 0))])
    flat = Reshape([x, i64_operand([-1])], special_zero=False)
    return Gather([flat.output(0), picked.output(0), i64_operand(0)])


# -- ONNX export -------------------------------------------------------------------------------

@onnx_export(NonZero)
def _export_non_zero(node, ectx):
    out = ectx.outputs(node)[0]
    if node.output_type is i64:
        ectx.add_node("NonZero", ectx.inputs(node), [out])
        return
    wide = ectx.fresh("nonzero")
    ectx.add_node("NonZero", ectx.inputs(node), [wide])
    ectx.add_node("Cast", [wide], [out], to=6)  # INT32


@onnx_export(Unique)
def _export_unique(node, ectx):
    outs = [n if node.output(i).consumers() or i == 0 else ""
            for i, n in enumerate(ectx.outputs(node))]
    while not outs[-1]:
        outs.pop()
    attrs: dict[str, Any] = {"sorted": int(node.sorted)}
    if node.axis is not None:
        attrs["axis"] = int(node.axis)
    if node.index_element_type is not i64 or node.count_element_type is not i64:
        export_error(node, "ONNX Unique returns i64 indices and counts")
    ectx.add_node("Unique", ectx.inputs(node), outs, **attrs)
