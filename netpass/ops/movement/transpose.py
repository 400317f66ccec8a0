"""Transpose: permute the axes."""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ...core.node import Node
from ...core.ports import Output, _connect, _Port
from ...core.shape import PartialShape
from ..base import set_name, to_output
from ..registry import onnx_export, onnx_rule
from ..shape_inputs import const_ints, export_error, i64_operand, pass_partial_value, vector_length

__all__ = ["transpose"]


# Orders already checked to be permutations, by (dtype code, bytes) of the order value: a
# Transpose's inference then skips parsing and checking it (sinking builds tens of thousands
# of Transposes from a handful of orders). Bounded: cleared when full.
_known_orders: dict[tuple[str, bytes], list[int]] = {}
_KNOWN_ORDERS_MAX = 4096


def _remember_order(value: np.ndarray, order: list[int]) -> None:
    if len(_known_orders) >= _KNOWN_ORDERS_MAX:
        _known_orders.clear()
    _known_orders[(value.dtype.char, value.tobytes())] = order


class Transpose(Node):
    """Transpose v1: ``output.shape[i] = input.shape[input_order[i]]``; an empty order reverses."""

    type_name = "Transpose"
    version = "opset1"

    @staticmethod
    def of(value: Output, order_value: Output, order: list[int],
           shape: PartialShape | None = None) -> Transpose:
        """``Transpose([value, order_value])``, built directly when ``order`` (the content of
        ``order_value``, a permutation of the value's rank) settles the output: the permuted
        dims, no known elements. Sinking builds Transposes by the ten thousand, and inference
        was ~40% of building one. A value of dynamic rank or with known elements (which
        inference passes on) takes the generic way. ``shape``: the permuted dims when the
        caller has them (a forward step's output Transpose restores the shape its op had
        before the step), taken as they are."""
        port = value.node._outs[value.index]
        dims = port.ps._dims
        if dims is None or len(dims) != len(order) or port.val is not None \
                or port.pval is not None:
            return Transpose([value, order_value])
        node = Transpose.__new__(Transpose)
        node._init_state()
        node._inputs = [value, order_value]
        me, ref = id(node), weakref.ref(node)
        _connect(port.cons, (me, 0), ref)
        _connect(order_value.node._outs[order_value.index].cons, (me, 1), ref)
        out = _Port()
        out.et = port.et
        out.ps = shape if shape is not None else \
            PartialShape.of_dims(tuple([dims[a] for a in order]))
        node._outs = (out,)
        return node

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
        if len(ins) != 2:
            self.fail("expects inputs (data, input_order)")
        src, order_src = ins
        port = src.node._outs[src.index]
        et, data = port.et, port.ps
        order_port = order_src.node._outs[order_src.index]
        ops = order_port.ps
        if ops._dims is not None and len(ops._dims) != 1:
            self.fail("input order must have shape [n], got {}", ops)
        value = order_port.val
        dims = data._dims
        order = None
        if value is not None:
            order = _known_orders.get((value.dtype.char, value.tobytes()))
            if order is None:
                order = [int(a) for a in value.reshape(-1).tolist()]
                if order:
                    self.check(sorted(order) == list(range(len(order))),
                               "input order {} is not a permutation of 0..{}", order,
                               len(order) - 1)
                    _remember_order(value, order)
                elif dims is not None:  # an empty order reverses the axes
                    order = list(range(len(dims)))[::-1]
                else:
                    order = None
        if order is None:
            rank = len(dims) if dims is not None else vector_length(self, 1)
            self.set_output_type(0, et, PartialShape.dynamic(rank))
            return
        rank = len(order)
        if dims is None:
            self.set_output_type(0, et, PartialShape.dynamic(rank))
            return
        if len(dims) != rank:
            self.fail("input order {} does not match input rank {}", list(order), len(dims))
        self.set_output_type(0, et, PartialShape.of_dims(tuple([dims[a] for a in order])))

    def infer_values(self) -> None:
        src = self._inputs[0]
        port = src.node._outs[src.index]
        if port.val is not None or port.pval is not None:  # (else nothing to pass)
            pass_partial_value(self)

    def evaluate(self, inputs):
        x, order = inputs
        order = [int(a) for a in np.asarray(order).reshape(-1)]
        return [np.transpose(x, order if order else None)]


def transpose(data: Any, input_order: Any, name: str | None = None) -> Node:
    """Transpose-1: ``data`` with its dims permuted: output dim ``i`` is input dim
    ``input_order[i]`` (a list or a graph value; an empty order reverses the dims)."""
    return set_name(Transpose([to_output(data), i64_operand(input_order)]), name)


@onnx_rule("Transpose")
def _import_transpose(ctx):
    perm = ctx.attr("perm", [])
    return Transpose([ctx.inputs[0], i64_operand(perm)]).output(0)


@onnx_export(Transpose)
def _export_transpose(node, ectx):
    order = node.order()
    if order is None:
        export_error(node, "input_order must be constant")
    ectx.add_node("Transpose", ectx.inputs(node)[:1], ectx.outputs(node), perm=order)
