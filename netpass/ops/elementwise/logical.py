"""Comparison (Equal, NotEqual, Less, Greater, LessEqual, GreaterEqual), logic (LogicalAnd,
LogicalOr, LogicalXor, LogicalNot) and Select."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node, Output
from ...core.types import Type, boolean
from ..base import BinaryElementwiseComparison, BinaryElementwiseLogical, set_name, to_output
from ..registry import onnx_export, onnx_rule
from .arithmetic import _elementwise_partial_value
from .common import _binary_factory, _export_simple, _like, _register_binary, _unary_factory

__all__ = ["equal", "not_equal", "less", "greater", "less_equal", "greater_equal", "logical_not",
           "logical_and", "logical_or", "logical_xor", "select"]


class Equal(BinaryElementwiseComparison):
    """a == b, boolean."""

    type_name = "Equal"
    commutative = True
    fn = staticmethod(np.equal)

    def infer_values(self) -> None:
        # torch's expand writes Where(Equal(shape, -1), 1, shape): a dimension is never -1
        _elementwise_partial_value(self, _pv_equal)


def _pv_equal(x: Any, y: Any) -> Any:
    """1 or 0 where known, None (unknown) otherwise; a Dimension lies in its interval and is
    equal to a dim of the same symbol."""
    if isinstance(x, int) and isinstance(y, int):
        return int(x == y)
    if isinstance(x, int):
        x, y = y, x
    if isinstance(y, int):
        return 0 if y < x.min or y > x.max else None
    if x.symbol is not None and x.symbol is y.symbol:
        return 1
    return 0 if x.merge(y) is None else None


class NotEqual(BinaryElementwiseComparison):
    """a != b, boolean."""

    type_name = "NotEqual"
    commutative = True
    fn = staticmethod(np.not_equal)


class Less(BinaryElementwiseComparison):
    """a < b, boolean."""

    type_name = "Less"
    fn = staticmethod(np.less)


class Greater(BinaryElementwiseComparison):
    """a > b, boolean."""

    type_name = "Greater"
    fn = staticmethod(np.greater)


class LessEqual(BinaryElementwiseComparison):
    """a <= b, boolean."""

    type_name = "LessEqual"
    fn = staticmethod(np.less_equal)


class GreaterEqual(BinaryElementwiseComparison):
    """a >= b, boolean."""

    type_name = "GreaterEqual"
    fn = staticmethod(np.greater_equal)


class _Logical(BinaryElementwiseLogical):
    """Boolean inputs only (OpenVINO's rule)."""

    def _out_type(self) -> Type:
        for i in range(2):
            et = self.get_input_element_type(i)
            self.check(et.is_dynamic or et is boolean, "input {} must be boolean, got {}", i, et)
        return super()._out_type()


class LogicalAnd(_Logical):
    """a and b (boolean inputs)."""

    type_name = "LogicalAnd"
    commutative = True
    fn = staticmethod(np.logical_and)


class LogicalOr(_Logical):
    """a or b (boolean inputs)."""

    type_name = "LogicalOr"
    commutative = True
    fn = staticmethod(np.logical_or)


class LogicalXor(_Logical):
    """a xor b (boolean inputs)."""

    type_name = "LogicalXor"
    commutative = True
    IR_VERSIONS = ("opset1", "opset2")  # (OpenVINO names its LogicalXor-1 opset2)
    fn = staticmethod(np.logical_xor)


class LogicalNot(Node):
    """Boolean negation (a plain op in OpenVINO, not a unary arithmetic one)."""

    type_name = "LogicalNot"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et is boolean, "input must be boolean, got {}", et)
        self.set_output_type(0, boolean, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        return [np.logical_not(inputs[0])]


class Select(Node):
    """``cond ? then : else`` elementwise, the three inputs broadcast together (numpy)."""

    type_name = "Select"
    ATTRS = {"auto_broadcast": "numpy"}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 3, "expects inputs (cond, then, else)")
        cet = self.get_input_element_type(0)
        self.check(cet.is_dynamic or cet is boolean, "condition must be boolean, got {}", cet)
        t, e = self.get_input_element_type(1), self.get_input_element_type(2)
        et = t.merge(e)
        self.check(et is not None, "then ({}) and else ({}) element types differ", t, e)
        shapes = [self.get_input_partial_shape(i) for i in range(3)]
        if self.auto_broadcast == "none":
            out = shapes[0].merge(shapes[1])
            out = out.merge(shapes[2]) if out is not None else None
        else:
            out = shapes[1].broadcast_merge(shapes[2])
            out = out.broadcast_merge(shapes[0]) if out is not None else None
        self.check(out is not None, "shapes {} do not broadcast", ', '.join(map(str, shapes)))
        self.set_output_type(0, et, out)

    def evaluate(self, inputs):
        c, t, e = inputs
        return [np.where(c, t, e).astype(self._outs[0].et.dtype or t.dtype, copy=False)]

    def infer_values(self) -> None:
        """Shape values through a known condition (torch's expand: ``Where(Equal(shape, -1),
        1, shape)``), or where both branches agree."""
        c, t, e = (self.input_partial_value(i) for i in range(3))
        ps = self.get_output_partial_shape(0)
        if t is None or e is None or not ps.rank_is_static or len(ps) > 1:
            return
        c = c if c is not None else (Dimension(),)
        if len(ps) == 1 and not ps[0].is_static:
            return
        n = ps[0].min if len(ps) == 1 else 1
        if any(len(v) not in (1, n) for v in (c, t, e)):
            return
        c, t, e = (v * n if len(v) == 1 else v for v in (c, t, e))
        out = []
        for ci, ti, ei in zip(c, t, e):
            if isinstance(ci, int):
                out.append(ti if ci else ei)
            elif ti == ei and (isinstance(ti, int) or ti.symbol is ei.symbol):
                out.append(ti)
            else:
                out.append(Dimension())
        self.set_output_partial_value(0, out)


equal = _binary_factory(Equal)
not_equal = _binary_factory(NotEqual)
less = _binary_factory(Less)
greater = _binary_factory(Greater)
less_equal = _binary_factory(LessEqual)
greater_equal = _binary_factory(GreaterEqual)
logical_and = _binary_factory(LogicalAnd)
logical_or = _binary_factory(LogicalOr)
logical_xor = _binary_factory(LogicalXor)
logical_not = _unary_factory(LogicalNot)


def select(cond: Any, then_node: Any, else_node: Any, auto_broadcast: str = "numpy",
           name: str | None = None) -> Node:
    """Select-1: ``then_node`` where ``cond`` is true, else ``else_node``, the three broadcast
    together (numpy); a python ``then``/``else`` value takes the other branch's element type."""
    then_out = to_output(then_node) if isinstance(then_node, (Node, Output)) else None
    else_out = to_output(else_node) if isinstance(else_node, (Node, Output)) else None
    then_out = then_out or (_like(then_node, else_out) if else_out else to_output(then_node))
    else_out = else_out or _like(else_node, then_out)
    return set_name(Select([to_output(cond), then_out, else_out],
                           auto_broadcast=auto_broadcast.lower()), name)


_cls: type[Node]  # (the registration loops below share it)
for _op, _cls in (("Equal", Equal), ("Less", Less), ("Greater", Greater),
                  ("LessOrEqual", LessEqual), ("GreaterOrEqual", GreaterEqual), ("And", LogicalAnd),
                  ("Or", LogicalOr), ("Xor", LogicalXor)):
    _register_binary(_op, _cls)


@onnx_rule("Not")
def _import_not(ctx):
    return LogicalNot([ctx.inputs[0]])


@onnx_rule("Where")
def _import_where(ctx):
    return Select(ctx.inputs[:3])


for _cls, _op in ((Equal, "Equal"), (Less, "Less"), (Greater, "Greater"),
                  (LessEqual, "LessOrEqual"), (GreaterEqual, "GreaterOrEqual"), (LogicalAnd, "And"),
                  (LogicalOr, "Or"), (LogicalXor, "Xor"), (LogicalNot, "Not")):
    onnx_export(_cls)(_export_simple(_op))


@onnx_export(Select)
def _export_select(node, ectx):
    cond, then, other = ectx.inputs(node)
    if node.get_output_element_type(0) is not boolean:
        ectx.add_node("Where", [cond, then, other], ectx.outputs(node))
        return
    # onnxruntime has no boolean Where kernel: (c and t) or (not c and e).
    names = [ectx.fresh(h) for h in ("then_part", "not_cond", "else_part")]
    ectx.add_node("And", [cond, then], [names[0]])
    ectx.add_node("Not", [cond], [names[1]])
    ectx.add_node("And", [names[1], other], [names[2]])
    ectx.add_node("Or", [names[0], names[2]], ectx.outputs(node))


@onnx_export(NotEqual)
def _export_not_equal(node, ectx):
    eq = ectx.fresh("eq")
    ectx.add_node("Equal", ectx.inputs(node), [eq])
    ectx.add_node("Not", [eq], ectx.outputs(node))
