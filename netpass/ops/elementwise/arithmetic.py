"""Binary arithmetic: Add, Subtract, Multiply, Divide, Power, Maximum, Minimum,
SquaredDifference, FloorMod, Mod, and ONNX's variadic Sum/Mean/Max/Min.

Arithmetic on small integer shape tensors also propagates partial values (``Dimension``
arithmetic), so shape sub-graphs such as ``ShapeOf -> Gather -> Multiply -> Concat -> Reshape``
keep their known dims and symbols."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node
from ..base import BinaryElementwiseArithmetic, set_name, to_output
from ..registry import onnx_export, onnx_rule
from .common import (
    _binary_factory,
    _binary_operands,
    _export_simple,
    _is_int,
    _quiet,
    _register_binary,
    const_like,
)
from .convert import Convert

__all__ = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum",
           "squared_difference", "floor_mod", "mod"]


def _dim_or_int(v: Any) -> Any:
    return v.min if isinstance(v, Dimension) and v.is_static else v


def _elementwise_partial_value(node: Node, op: Callable[[Any, Any], Any]) -> None:
    """Set output 0's partial value from both inputs' partial values (broadcast 1 <-> n)."""
    a, b = node.input_partial_value(0), node.input_partial_value(1)
    ps = node.get_output_partial_shape(0)
    if a is None or b is None or not ps.rank_is_static or len(ps) > 1:
        return
    if len(a) != len(b) and 1 not in (len(a), len(b)):
        return
    n = max(len(a), len(b))
    a = a * n if len(a) == 1 else a
    b = b * n if len(b) == 1 else b
    out = []
    for x, y in zip(a, b):
        x, y = _dim_or_int(x), _dim_or_int(y)
        try:
            r = op(x, y)
        except (ValueError, ZeroDivisionError, TypeError):
            r = None
        out.append(r if r is not None else Dimension())
    node.set_output_partial_value(0, out)


def _pv_add(x: Any, y: Any) -> Any:
    if isinstance(y, int) and y == 0:
        return x
    if isinstance(x, int) and x == 0:
        return y
    return x + y


def _pv_sub(x: Any, y: Any) -> Any:
    if isinstance(y, int) and y == 0:
        return x
    if isinstance(x, int) and isinstance(y, Dimension):
        return Dimension(x) - y
    return x - y


def _pv_mul(x: Any, y: Any) -> Any:
    if isinstance(y, int) and y == 1:
        return x
    if isinstance(x, int) and x == 1:
        return y
    return x * y


def _pv_div(floor: bool) -> Callable[[Any, Any], Any]:
    """Integer division of partial values, flooring (python) or truncating (C)."""
    def div(x: Any, y: Any) -> Any:
        if isinstance(x, int) and isinstance(y, int):
            if y == 0:
                return None
            q = x // y
            # (the module's ``abs`` is the opset factory, so truncation is done by hand)
            return q if floor or q >= 0 or q * y == x else q + 1
        if isinstance(x, Dimension) and isinstance(y, int) and y > 0:
            return x if y == 1 else x // y  # a dimension is non-negative: floor == trunc
        return None
    return div


class Add(BinaryElementwiseArithmetic):
    """a + b with numpy broadcasting."""

    type_name = "Add"
    commutative = True
    fn = staticmethod(np.add)

    def infer_values(self) -> None:
        _elementwise_partial_value(self, _pv_add)


class Subtract(BinaryElementwiseArithmetic):
    """a - b."""

    type_name = "Subtract"
    fn = staticmethod(np.subtract)

    def infer_values(self) -> None:
        _elementwise_partial_value(self, _pv_sub)


class Multiply(BinaryElementwiseArithmetic):
    """a * b."""

    type_name = "Multiply"
    commutative = True
    fn = staticmethod(np.multiply)

    def infer_values(self) -> None:
        _elementwise_partial_value(self, _pv_mul)


class Divide(BinaryElementwiseArithmetic):
    """a / b. Integer division floors when ``m_pythondiv`` (OpenVINO's default) and truncates
    toward zero otherwise (ONNX, C); integer division by zero gives 0."""

    type_name = "Divide"
    ATTRS = {"auto_broadcast": "numpy", "m_pythondiv": True}

    def evaluate(self, inputs):
        a, b = inputs
        et = self._outs[0].et
        if not _is_int(a):
            with np.errstate(all="ignore"):
                return [np.asarray(np.divide(a, b)).astype(a.dtype, copy=False)]
        safe = np.where(b == 0, 1, b)
        if self.m_pythondiv:
            q = np.floor_divide(a, safe)
        else:
            q = np.abs(a) // np.abs(safe)
            q = np.where((a < 0) != (safe < 0), -q, q)
        q = np.where(b == 0, 0, q)
        return [np.asarray(q).astype(et.dtype or a.dtype, copy=False)]

    def infer_values(self) -> None:
        if self.get_output_element_type(0).is_integral:
            _elementwise_partial_value(self, _pv_div(self.m_pythondiv))


@_quiet
def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_int(a) and np.any(b < 0):
        # numpy refuses negative integer exponents; truncating the real power is C's result.
        real = np.trunc(np.power(a.astype(np.float64), b.astype(np.float64)))
        return np.where(b < 0, real, np.power(a, np.maximum(b, 0))).astype(a.dtype)
    return np.power(a, b)


class Power(BinaryElementwiseArithmetic):
    """a ** b."""

    type_name = "Power"
    fn = staticmethod(_power)


class Maximum(BinaryElementwiseArithmetic):
    """The larger of a and b."""

    type_name = "Maximum"
    commutative = True
    fn = staticmethod(np.maximum)


class Minimum(BinaryElementwiseArithmetic):
    """The smaller of a and b."""

    type_name = "Minimum"
    commutative = True
    fn = staticmethod(np.minimum)


class SquaredDifference(BinaryElementwiseArithmetic):
    """(a - b) ** 2."""

    type_name = "SquaredDifference"
    fn = staticmethod(_quiet(lambda a, b: np.square(np.subtract(a, b))))


@_quiet
def _int_safe(fn: Callable, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_int(a):
        return np.where(b == 0, 0, fn(a, np.where(b == 0, 1, b)))
    return fn(a, b)


class FloorMod(BinaryElementwiseArithmetic):
    """Remainder with the sign of the divisor (python ``%``; ONNX Mod with fmod=0)."""

    type_name = "FloorMod"
    fn = staticmethod(lambda a, b: _int_safe(np.mod, a, b))


class Mod(BinaryElementwiseArithmetic):
    """Remainder with the sign of the dividend (C ``fmod``; ONNX Mod with fmod=1)."""

    type_name = "Mod"
    fn = staticmethod(lambda a, b: _int_safe(np.fmod, a, b))


add = _binary_factory(Add)
subtract = _binary_factory(Subtract)
multiply = _binary_factory(Multiply)
power = _binary_factory(Power)
maximum = _binary_factory(Maximum)
minimum = _binary_factory(Minimum)
squared_difference = _binary_factory(SquaredDifference)
floor_mod = _binary_factory(FloorMod)
mod = _binary_factory(Mod)


def divide(left_node: Any, right_node: Any, auto_broadcast: str = "numpy",
           name: str | None = None, m_pythondiv: bool = True) -> Node:
    """Divide-1: ``left_node / right_node``, broadcast as :func:`add`; integer division floors
    when ``m_pythondiv`` (OpenVINO's default) and truncates otherwise."""
    return set_name(Divide([to_output(left_node), to_output(right_node)],
                           auto_broadcast=auto_broadcast.lower(), m_pythondiv=m_pythondiv), name)


_cls: type[Node]  # (the registration loops below share it)
for _op, _cls in (("Add", Add), ("Sub", Subtract), ("Mul", Multiply)):
    _register_binary(_op, _cls)


@onnx_rule("Div")
def _import_div(ctx):
    return Divide(list(_binary_operands(ctx)), m_pythondiv=False)


@onnx_rule("Pow")
def _import_pow(ctx):
    # ONNX lets the exponent's type differ; OpenVINO's Power wants one type. An integer base
    # with a real exponent is raised in the exponent's type and truncated back (C's cast).
    base, exponent = _binary_operands(ctx)
    bt, et = base.element_type, exponent.element_type
    if et is bt:
        return Power([base, exponent])
    if bt.is_integral and et.is_real:
        real = Power([Convert([base], destination_type=et), exponent])
        return Convert([real], destination_type=bt)
    return Power([base, Convert([exponent], destination_type=bt)])


@onnx_rule("Mod")
def _import_mod(ctx):
    if ctx.attr("fmod", 0):
        return Mod([ctx.inputs[0], ctx.inputs[1]])
    return FloorMod([ctx.inputs[0], ctx.inputs[1]])


def _register_variadic(onnx_op: str, cls: type, mean: bool = False) -> None:
    def rule(ctx):
        args = [i for i in ctx.inputs if i is not None]
        if not args:
            ctx.error("needs at least one input")
        acc = args[0]
        for other in args[1:]:
            acc = cls([acc, other]).output(0)
        if mean and len(args) > 1:
            acc = Divide([acc, const_like(len(args), acc)], m_pythondiv=False).output(0)
        return acc
    onnx_rule(onnx_op)(rule)


_register_variadic("Sum", Add)


_register_variadic("Mean", Add, mean=True)


_register_variadic("Max", Maximum)


_register_variadic("Min", Minimum)


for _cls, _op in ((Add, "Add"), (Subtract, "Sub"), (Multiply, "Mul"), (Power, "Pow"),
                  (Maximum, "Max"), (Minimum, "Min"), (Mod, "Mod")):
    onnx_export(_cls)(_export_simple(_op, fmod=1) if _cls is Mod else _export_simple(_op))


@onnx_export(SquaredDifference)
def _export_squared_difference(node, ectx):
    d = ectx.fresh("diff")
    ectx.add_node("Sub", ectx.inputs(node), [d])
    ectx.add_node("Mul", [d, d], ectx.outputs(node))


@onnx_export(FloorMod)
def _export_floor_mod(node, ectx):
    a, b = ectx.inputs(node)
    if node.get_output_element_type(0).is_integral:
        ectx.add_node("Mod", [a, b], ectx.outputs(node), fmod=0)
        return
    # ONNX Mod with fmod=0 is integer-only: a - floor(a / b) * b.
    q, fq, p = ectx.fresh("div"), ectx.fresh("floor"), ectx.fresh("mul")
    ectx.add_node("Div", [a, b], [q])
    ectx.add_node("Floor", [q], [fq])
    ectx.add_node("Mul", [fq, b], [p])
    ectx.add_node("Sub", [a, p], ectx.outputs(node))


@onnx_export(Divide)
def _export_divide(node, ectx):
    a, b = ectx.inputs(node)
    et = node.get_output_element_type(0)
    if not (et.is_integral and node.m_pythondiv and et.is_signed):
        ectx.add_node("Div", [a, b], ectx.outputs(node))
        return
    # ONNX Div truncates; floor = trunc - 1 where the remainder is non-zero and signs differ.
    t, p, r = ectx.fresh("trunc"), ectx.fresh("mul"), ectx.fresh("rem")
    zero = ectx.constant(np.zeros((), et.dtype))
    one = ectx.constant(np.ones((), et.dtype))
    names = [ectx.fresh(h) for h in ("rz", "nz", "rneg", "bneg", "differ", "fix", "fixv")]
    ectx.add_node("Div", [a, b], [t])
    ectx.add_node("Mul", [t, b], [p])
    ectx.add_node("Sub", [a, p], [r])
    ectx.add_node("Equal", [r, zero], [names[0]])
    ectx.add_node("Not", [names[0]], [names[1]])
    ectx.add_node("Less", [r, zero], [names[2]])
    ectx.add_node("Less", [b, zero], [names[3]])
    ectx.add_node("Xor", [names[2], names[3]], [names[4]])
    ectx.add_node("And", [names[1], names[4]], [names[5]])
    ectx.add_node("Where", [names[5], one, zero], [names[6]])
    ectx.add_node("Sub", [t, names[6]], ectx.outputs(node))
