"""Unary math: Exp, Log, Sqrt, Abs, Negative, Erf, Floor, Ceiling, Round, Sign, the
trigonometric and hyperbolic functions, IsNaN, IsInf and IsFinite, and ErfInv (ONNX's Reciprocal
is imported as a Divide)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Node
from ...core.types import boolean
from ..base import UnaryElementwiseArithmetic, set_name, to_output
from ..registry import onnx_export, onnx_rule
from .arithmetic import Divide
from .common import (
    _erf,
    _export_simple,
    _is_int,
    _register_unary,
    _unary,
    _unary_factory,
    const_like,
)

__all__ = ["exp", "log", "sqrt", "abs", "negative", "erf", "floor", "ceiling", "round", "sign",
           "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
           "is_nan", "is_inf", "is_finite", "erf_inv"]


def _round_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


Exp = _unary("Exp", np.exp)
Log = _unary("Log", np.log)
Sqrt = _unary("Sqrt", np.sqrt)
Abs = _unary("Abs", np.abs)
Negative = _unary("Negative", np.negative)
Erf = _unary("Erf", _erf, "Gauss error function.")
Floor = _unary("Floor", np.floor)
Ceiling = _unary("Ceiling", np.ceil)
Sign = _unary("Sign", np.sign)
Sin = _unary("Sin", np.sin)
Cos = _unary("Cos", np.cos)
Tan = _unary("Tan", np.tan)
Asin = _unary("Asin", np.arcsin)
Acos = _unary("Acos", np.arccos)
Atan = _unary("Atan", np.arctan)
Sinh = _unary("Sinh", np.sinh)
Cosh = _unary("Cosh", np.cosh)
Asinh = _unary("Asinh", np.arcsinh)
Acosh = _unary("Acosh", np.arccosh)
Atanh = _unary("Atanh", np.arctanh)
_cls: type[Node]  # (the registration loops below share it)
for _cls in (Asinh, Acosh, Atanh):
    _cls.version = "opset4"


class Round(UnaryElementwiseArithmetic):
    """Round to nearest integer; ties to even (``half_to_even``) or away from zero."""

    type_name = "Round"
    version = "opset5"
    ATTRS = {"mode": "half_to_even"}

    def infer_types(self) -> None:
        self.check(self.mode in ("half_to_even", "half_away_from_zero"),
                   "mode must be half_to_even or half_away_from_zero, got {}", self.mode)
        super().infer_types()

    def evaluate(self, inputs):
        x = inputs[0]
        if _is_int(x):
            return [x]
        return [(np.rint(x) if self.mode == "half_to_even" else _round_away(x)).astype(x.dtype)]


class IsNaN(Node):
    type_name = "IsNaN"
    version = "opset10"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.set_output_type(0, boolean, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        return [np.isnan(inputs[0])]


class IsInf(Node):
    """True for +inf (``detect_positive``) and/or -inf (``detect_negative``)."""

    type_name = "IsInf"
    version = "opset10"
    ATTRS = {"detect_negative": True, "detect_positive": True}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.set_output_type(0, boolean, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        out = np.zeros(x.shape, dtype=bool)
        if self.detect_positive:
            out |= np.isposinf(x)
        if self.detect_negative:
            out |= np.isneginf(x)
        return [out]


class IsFinite(Node):
    """IsFinite-10: true where ``data`` is neither infinite nor NaN."""

    type_name = "IsFinite"
    version = "opset10"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "IsFinite needs a float input, got {}", et)
        self.set_output_type(0, boolean, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        return [np.isfinite(inputs[0])]


def _erf_inv(y: np.ndarray) -> np.ndarray:
    """The inverse error function in float64: Giles' single-precision polynomial ("Approximating
    the erfinv function", 2010) as the start, then two Newton steps on ``erf(x) - y``; +-inf at
    +-1, NaN outside [-1, 1]."""
    y = np.asarray(y, dtype=np.float64)
    with np.errstate(all="ignore"):
        w = -np.log((1.0 - y) * (1.0 + y))
        central, tail = w - 2.5, np.sqrt(w) - 3.0
        p = np.where(w < 5.0, 2.81022636e-08, -0.000200214257)
        for a, b in ((3.43273939e-07, 0.000100950558), (-3.5233877e-06, 0.00134934322),
                     (-4.39150654e-06, -0.00367342844), (0.00021858087, 0.00573950773),
                     (-0.00125372503, -0.0076224613), (-0.00417768164, 0.00943887047),
                     (0.246640727, 1.00167406), (1.50140941, 2.83297682)):
            p = np.where(w < 5.0, a + p * central, b + p * tail)
        x = p * y
        for _ in range(2):
            x = x - (_erf(x) - y) / (2.0 / np.sqrt(np.pi) * np.exp(-x * x))
        x = np.where(np.abs(y) == 1.0, np.copysign(np.inf, y), x)
        return np.where(np.abs(y) > 1.0, np.nan, x)


class ErfInv(UnaryElementwiseArithmetic):
    """ErfInv-17: the inverse of the Gauss error function (``erf(erf_inv(y)) = y`` on
    (-1, 1); +-inf at +-1, NaN outside)."""

    type_name = "ErfInv"
    version = "opset17"
    fn = _erf_inv

    def infer_types(self) -> None:
        super().infer_types()
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "ErfInv needs a float input, got {}", et)


exp = _unary_factory(Exp)
log = _unary_factory(Log)
sqrt = _unary_factory(Sqrt)
abs = _unary_factory(Abs)
negative = _unary_factory(Negative)
erf = _unary_factory(Erf)
floor = _unary_factory(Floor)
ceiling = _unary_factory(Ceiling)
sign = _unary_factory(Sign)
sin = _unary_factory(Sin)
cos = _unary_factory(Cos)
tan = _unary_factory(Tan)
asin = _unary_factory(Asin)
acos = _unary_factory(Acos)
atan = _unary_factory(Atan)
sinh = _unary_factory(Sinh)
cosh = _unary_factory(Cosh)
asinh = _unary_factory(Asinh)
acosh = _unary_factory(Acosh)
atanh = _unary_factory(Atanh)
is_nan = _unary_factory(IsNaN)
is_finite = _unary_factory(IsFinite)
erf_inv = _unary_factory(ErfInv)


def round(data: Any, mode: str = "half_to_even", name: str | None = None) -> Node:
    """Round-5: every element of ``data`` rounded to an integer value, ties to even (``mode``
    "half_to_even") or away from zero ("half_away_from_zero")."""
    return set_name(Round([to_output(data)], mode=mode.lower()), name)


def is_inf(data: Any, attributes: dict | None = None, name: str | None = None) -> Node:
    """IsInf-10: true where ``data`` is +inf (attribute ``detect_positive``, default true) or -inf
    (``detect_negative``, default true); ``attributes`` is OpenVINO's dict of those two."""
    attrs = dict(attributes or {})
    return set_name(IsInf([to_output(data)], **attrs), name)


for _op, _cls in (("Exp", Exp), ("Log", Log), ("Sqrt", Sqrt), ("Abs", Abs), ("Neg", Negative),
                  ("Erf", Erf), ("Floor", Floor), ("Ceil", Ceiling), ("Sign", Sign), ("Sin", Sin),
                  ("Cos", Cos), ("Tan", Tan), ("Asin", Asin), ("Acos", Acos), ("Atan", Atan),
                  ("Sinh", Sinh), ("Cosh", Cosh), ("Asinh", Asinh), ("Acosh", Acosh),
                  ("Atanh", Atanh), ("IsNaN", IsNaN)):
    _register_unary(_op, _cls)


@onnx_rule("Round")
def _import_round(ctx):
    return Round([ctx.inputs[0]], mode="half_to_even")


@onnx_rule("IsInf")
def _import_isinf(ctx):
    return IsInf([ctx.inputs[0]], detect_negative=bool(ctx.attr("detect_negative", 1)),
                 detect_positive=bool(ctx.attr("detect_positive", 1)))


@onnx_rule("Reciprocal")
def _import_reciprocal(ctx):
    x = ctx.inputs[0]
    return Divide([const_like(1, x), x], m_pythondiv=False)


for _cls, _op in ((Exp, "Exp"), (Log, "Log"), (Sqrt, "Sqrt"), (Abs, "Abs"), (Negative, "Neg"),
                  (Erf, "Erf"), (Floor, "Floor"), (Ceiling, "Ceil"), (Sign, "Sign"), (Sin, "Sin"),
                  (Cos, "Cos"), (Tan, "Tan"), (Asin, "Asin"), (Acos, "Acos"), (Atan, "Atan"),
                  (Sinh, "Sinh"), (Cosh, "Cosh"), (Asinh, "Asinh"), (Acosh, "Acosh"),
                  (Atanh, "Atanh"), (IsNaN, "IsNaN")):
    onnx_export(_cls)(_export_simple(_op))


@onnx_export(Round)
def _export_round(node, ectx):
    (x,) = ectx.inputs(node)
    if node.mode == "half_to_even" or node.get_output_element_type(0).is_integral:
        ectx.add_node("Round", [x], ectx.outputs(node))
        return
    dt = node.get_output_element_type(0).dtype
    a, s, f, sg = (ectx.fresh(h) for h in ("abs", "shift", "floor", "sign"))
    ectx.add_node("Abs", [x], [a])
    ectx.add_node("Add", [a, ectx.constant(np.asarray(0.5, dt))], [s])
    ectx.add_node("Floor", [s], [f])
    ectx.add_node("Sign", [x], [sg])
    ectx.add_node("Mul", [sg, f], ectx.outputs(node))


@onnx_export(IsInf)
def _export_isinf(node, ectx):
    ectx.add_node("IsInf", ectx.inputs(node), ectx.outputs(node),
                  detect_negative=int(node.detect_negative),
                  detect_positive=int(node.detect_positive))
