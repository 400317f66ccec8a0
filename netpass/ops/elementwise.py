"""Elementwise operations: binary arithmetic, comparison and logic, Select, activations and
other unary math, Convert/ConvertLike. ONNX ops without an OpenVINO twin (LeakyRelu, Reciprocal,
Celu, ThresholdedRelu, Shrink, variadic Sum/Mean/Max/Min, Clip with tensor bounds) are imported
as compositions of these.

Class hierarchy follows OpenVINO (``Relu`` is a ``UnaryElementwiseArithmetic``; ``Clamp``,
``Elu``, ``Convert``... are plain ops) so that passes matching a family see the same ops as
OpenVINO's. Arithmetic on small integer shape tensors also propagates partial values
(``Dimension`` arithmetic), so shape sub-graphs such as ``ShapeOf -> Gather -> Multiply ->
Concat -> Reshape`` keep their known dims and symbols.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import onnx

from ..core.dimension import Dimension
from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..core.types import Type, boolean, f32
from ..errors import UnsupportedOpError
from .base import (BinaryElementwiseArithmetic, BinaryElementwiseComparison,
                   BinaryElementwiseLogical, UnaryElementwiseArithmetic, merged_input_type,
                   set_name, to_output)
from .registry import onnx_export, onnx_rule

__all__ = [
    "add", "subtract", "multiply", "divide", "power", "maximum", "minimum",
    "squared_difference", "floor_mod", "mod", "equal", "not_equal", "less", "greater",
    "less_equal", "greater_equal", "logical_not", "logical_and", "logical_or", "logical_xor",
    "select", "relu", "prelu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "negative", "erf",
    "gelu", "clamp", "elu", "softplus", "swish", "hswish", "hsigmoid", "hard_sigmoid", "selu",
    "softsign", "floor", "ceiling", "round", "sign", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "asinh", "acosh", "atanh", "mish", "is_nan", "is_inf", "convert",
    "convert_like",
]


def _quiet(fn: Callable) -> Callable:
    """Run a numpy kernel without floating point warnings (inf/nan results are the semantics)."""
    def wrapped(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args)
    return wrapped


def _is_int(arr: np.ndarray) -> bool:
    return arr.dtype.kind in "iu"


# -- partial values of shape tensors ----------------------------------------------------------

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


# -- binary arithmetic ------------------------------------------------------------------------

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
    type_name = "Maximum"
    commutative = True
    fn = staticmethod(np.maximum)


class Minimum(BinaryElementwiseArithmetic):
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


# -- comparison and logic ---------------------------------------------------------------------

class Equal(BinaryElementwiseComparison):
    type_name = "Equal"
    commutative = True
    fn = staticmethod(np.equal)


class NotEqual(BinaryElementwiseComparison):
    type_name = "NotEqual"
    commutative = True
    fn = staticmethod(np.not_equal)


class Less(BinaryElementwiseComparison):
    type_name = "Less"
    fn = staticmethod(np.less)


class Greater(BinaryElementwiseComparison):
    type_name = "Greater"
    fn = staticmethod(np.greater)


class LessEqual(BinaryElementwiseComparison):
    type_name = "LessEqual"
    fn = staticmethod(np.less_equal)


class GreaterEqual(BinaryElementwiseComparison):
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
    type_name = "LogicalAnd"
    commutative = True
    fn = staticmethod(np.logical_and)


class LogicalOr(_Logical):
    type_name = "LogicalOr"
    commutative = True
    fn = staticmethod(np.logical_or)


class LogicalXor(_Logical):
    type_name = "LogicalXor"
    commutative = True
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


# -- unary arithmetic (OpenVINO's UnaryElementwiseArithmetic family) ---------------------------

def _unary(name: str, fn: Callable, doc: str = "") -> type:
    cls = type(name, (UnaryElementwiseArithmetic,),
               {"type_name": name, "fn": staticmethod(_quiet(fn)), "__doc__": doc or None,
                "__module__": __name__})
    return cls


def _erf(x: np.ndarray) -> np.ndarray:
    """math.erf per element, in float64 (numpy has no erf; mapping over a list is ~3x faster
    than np.vectorize)."""
    flat = np.asarray(x, dtype=np.float64).ravel().tolist()
    return np.fromiter(map(math.erf, flat), np.float64, len(flat)).reshape(np.shape(x))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _round_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


Relu = _unary("Relu", lambda x: np.maximum(x, 0), "max(x, 0).")
Sigmoid = _unary("Sigmoid", _sigmoid, "1 / (1 + exp(-x)), computed without overflow.")
Tanh = _unary("Tanh", np.tanh)
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
SoftSign = _unary("SoftSign", lambda x: x / (1 + np.abs(x)), "x / (1 + |x|).")
HSwish = _unary("HSwish", lambda x: x * np.clip(x + 3, 0, 6) / 6, "x * relu6(x + 3) / 6.")
HSigmoid = _unary("HSigmoid", lambda x: np.clip(x + 3, 0, 6) / 6, "relu6(x + 3) / 6.")
Mish = _unary("Mish", lambda x: x * np.tanh(np.logaddexp(np.zeros((), x.dtype), x)),
              "x * tanh(softplus(x)).")
for _cls, _ver in ((SoftSign, "opset9"), (HSwish, "opset4"), (HSigmoid, "opset5"),
                   (Mish, "opset4"), (Asinh, "opset4"), (Acosh, "opset4"), (Atanh, "opset4")):
    _cls.version = _ver


class Gelu(UnaryElementwiseArithmetic):
    """x * Phi(x), exactly (``ERF``) or by the tanh approximation (``TANH``)."""

    type_name = "Gelu"
    version = "opset7"
    ATTRS = {"approximation_mode": "ERF"}

    def infer_types(self) -> None:
        self.approximation_mode = str(self.approximation_mode).upper()
        self.check(self.approximation_mode in ("ERF", "TANH"),
                   "approximation_mode must be ERF or TANH, got {}", self.approximation_mode)
        super().infer_types()

    def evaluate(self, inputs):
        x = inputs[0]
        xf = x.astype(np.float64)
        if self.approximation_mode == "TANH":
            y = 0.5 * xf * (1 + np.tanh(math.sqrt(2 / math.pi) * (xf + 0.044715 * xf ** 3)))
        else:
            y = 0.5 * xf * (1 + _erf(xf / math.sqrt(2)))
        return [y.astype(x.dtype)]


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


# -- other single-data-input ops (plain ops in OpenVINO) -------------------------------------

class _SameTypeUnary(Node):
    """Data (input 0) plus ``INPUTS`` - 1 scalar parameters; output has the data's type and
    shape."""

    INPUTS: tuple[str, ...] = ("data",)
    OPTIONAL = 0  # trailing inputs that may be left out

    def infer_types(self) -> None:
        n, full = self.get_input_size(), len(self.INPUTS)
        self.check(full - self.OPTIONAL <= n <= full, "expects inputs ({})", ', '.join(self.INPUTS))
        for i in range(1, n):
            ps = self.get_input_partial_shape(i)
            self.check(not ps.rank_is_static or all(d.max == 1 for d in ps),
                       "{} (input {}) must hold one element, got shape {}", self.INPUTS[i], i, ps)
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))


class Clamp(_SameTypeUnary):
    """Clip to [min, max]; for integer data min rounds up and max rounds down."""

    type_name = "Clamp"
    ATTRS = {"min": 0.0, "max": 0.0}

    def infer_types(self) -> None:
        self.check(self.min <= self.max, "min {} must not exceed max {}", self.min, self.max)
        super().infer_types()

    def evaluate(self, inputs):
        x = inputs[0]
        lo, hi = float(self.min), float(self.max)
        if _is_int(x):
            info = np.iinfo(x.dtype)
            lo = info.min if lo < info.min else int(math.ceil(lo))
            hi = info.max if hi > info.max else int(math.floor(hi))
            return [np.clip(x, lo, hi).astype(x.dtype)]
        return [np.clip(x, np.asarray(lo, x.dtype), np.asarray(hi, x.dtype))]


class Elu(_SameTypeUnary):
    """x if x > 0 else alpha * (exp(x) - 1)."""

    type_name = "Elu"
    ATTRS = {"alpha": 1.0}

    def evaluate(self, inputs):
        x = inputs[0]
        with np.errstate(all="ignore"):
            return [np.where(x > 0, x, self.alpha * np.expm1(x)).astype(x.dtype)]


class SoftPlus(_SameTypeUnary):
    """log(1 + exp(x)), computed without overflow."""

    type_name = "SoftPlus"
    version = "opset4"

    def evaluate(self, inputs):
        x = inputs[0]
        return [np.logaddexp(np.zeros((), x.dtype), x).astype(x.dtype)]


class Swish(_SameTypeUnary):
    """x * sigmoid(beta * x); optional scalar input beta (default 1)."""

    type_name = "Swish"
    version = "opset4"
    INPUTS = ("data", "beta")
    OPTIONAL = 1

    def evaluate(self, inputs):
        x = inputs[0]
        beta = np.asarray(inputs[1]).reshape(()) if len(inputs) > 1 else 1.0
        with np.errstate(all="ignore"):
            return [(x * _sigmoid(beta * x)).astype(x.dtype)]


class HardSigmoid(_SameTypeUnary):
    """max(0, min(1, alpha * x + beta)); alpha and beta are scalar inputs."""

    type_name = "HardSigmoid"
    INPUTS = ("data", "alpha", "beta")

    def evaluate(self, inputs):
        x, alpha, beta = inputs
        y = np.clip(np.asarray(alpha).reshape(()) * x + np.asarray(beta).reshape(()), 0, 1)
        return [y.astype(x.dtype)]


class Selu(_SameTypeUnary):
    """lambda * (x if x > 0 else alpha * (exp(x) - 1)); alpha and lambda are scalar inputs."""

    type_name = "Selu"
    INPUTS = ("data", "alpha", "lambda")

    def evaluate(self, inputs):
        x, alpha, lam = (np.asarray(v) for v in inputs)
        alpha, lam = alpha.reshape(()), lam.reshape(())
        with np.errstate(all="ignore"):
            return [(lam * np.where(x > 0, x, alpha * np.expm1(x))).astype(x.dtype)]


class PRelu(Node):
    """x if x >= 0 else slope * x. A 1-D slope as long as the channel dim (dim 1) of data of rank
    >= 2 applies per channel (OpenVINO's rule); any other slope broadcasts numpy-style."""

    type_name = "PRelu"

    @staticmethod
    def _per_channel(data: PartialShape, slope: PartialShape) -> bool:
        if not (data.rank_is_static and slope.rank_is_static) or len(slope) != 1 or len(data) < 2:
            return False
        n = slope[0]
        return n.is_static and n.min != 1 and data[1].is_static and data[1].min == n.min

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, slope)")
        et = merged_input_type(self)
        data, slope = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        if self._per_channel(data, slope):
            out = data
        else:
            out = data.broadcast_merge(slope)
            self.check(out is not None and (not data.rank_is_static or not out.rank_is_static
                                            or len(out) == len(data)),
                       "slope shape {} does not broadcast to data shape {}", slope, data)
        self.set_output_type(0, et, out)

    def evaluate(self, inputs):
        x, slope = inputs
        if slope.ndim == 1 and x.ndim >= 2 and slope.shape[0] == x.shape[1] and slope.shape[0] != 1:
            slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))
        return [np.where(x >= 0, x, slope * x).astype(x.dtype, copy=False)]


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


class Convert(Node):
    """Change the element type. Float to integer truncates toward zero; to boolean is ``!= 0``.
    Integer shape tensors keep their partial values (``Convert(ShapeOf(x), i32)``)."""

    type_name = "Convert"
    ATTRS = {"destination_type": f32}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.destination_type = Type.of(self.destination_type)
        self.check(not self.destination_type.is_dynamic and self.destination_type.dtype is not None,
                   "unsupported destination_type {}", self.destination_type)
        self.set_output_type(0, self.destination_type, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        dt = self.destination_type.dtype
        if dt == np.bool_:
            return [x != 0]
        with np.errstate(all="ignore"):
            if x.dtype.kind == "f" and dt.kind in "iu":
                x = np.trunc(x)
            return [x.astype(dt)]

    def infer_values(self) -> None:
        pv = self.input_partial_value(0)
        if pv is not None and self.destination_type.is_integral and \
                self.get_input_element_type(0).is_integral:
            self.set_output_partial_value(0, pv)


class ConvertLike(Node):
    """Convert data (input 0) to the element type of ``like`` (input 1)."""

    type_name = "ConvertLike"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, like)")
        self.set_output_type(0, self.get_input_element_type(1), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x, like = inputs
        if like.dtype == np.bool_:
            return [x != 0]
        with np.errstate(all="ignore"):
            if x.dtype.kind == "f" and like.dtype.kind in "iu":
                x = np.trunc(x)
            return [x.astype(like.dtype)]


# -- factories ---------------------------------------------------------------------------------

def _binary_factory(cls: type) -> Callable:
    def factory(left_node: Any, right_node: Any, auto_broadcast: str = "numpy",
                name: str | None = None) -> Node:
        return set_name(cls([to_output(left_node), to_output(right_node)],
                            auto_broadcast=auto_broadcast.lower()), name)
    factory.__name__ = cls.type_name
    factory.__doc__ = f"{cls.type_name}(left, right) with numpy broadcasting."
    return factory


def _unary_factory(cls: type) -> Callable:
    def factory(node: Any, name: str | None = None) -> Node:
        return set_name(cls([to_output(node)]), name)
    factory.__name__ = cls.type_name
    factory.__doc__ = f"{cls.type_name}(node)."
    return factory


add = _binary_factory(Add)
subtract = _binary_factory(Subtract)
multiply = _binary_factory(Multiply)
power = _binary_factory(Power)
maximum = _binary_factory(Maximum)
minimum = _binary_factory(Minimum)
squared_difference = _binary_factory(SquaredDifference)
floor_mod = _binary_factory(FloorMod)
mod = _binary_factory(Mod)
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
relu = _unary_factory(Relu)
sigmoid = _unary_factory(Sigmoid)
tanh = _unary_factory(Tanh)
exp = _unary_factory(Exp)
log = _unary_factory(Log)
sqrt = _unary_factory(Sqrt)
abs = _unary_factory(Abs)  # noqa: A001  (OpenVINO's name)
negative = _unary_factory(Negative)
erf = _unary_factory(Erf)
softplus = _unary_factory(SoftPlus)
hswish = _unary_factory(HSwish)
hsigmoid = _unary_factory(HSigmoid)
softsign = _unary_factory(SoftSign)
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
mish = _unary_factory(Mish)
is_nan = _unary_factory(IsNaN)


def divide(left_node: Any, right_node: Any, auto_broadcast: str = "numpy",
           name: str | None = None, m_pythondiv: bool = True) -> Node:
    """left / right; integer division floors when ``m_pythondiv`` else truncates."""
    return set_name(Divide([to_output(left_node), to_output(right_node)],
                           auto_broadcast=auto_broadcast.lower(), m_pythondiv=m_pythondiv), name)


def select(cond: Any, then_node: Any, else_node: Any, auto_broadcast: str = "numpy",
           name: str | None = None) -> Node:
    then_out = to_output(then_node) if isinstance(then_node, (Node, Output)) else None
    else_out = to_output(else_node) if isinstance(else_node, (Node, Output)) else None
    then_out = then_out or (_like(then_node, else_out) if else_out else to_output(then_node))
    else_out = else_out or _like(else_node, then_out)
    return set_name(Select([to_output(cond), then_out, else_out],
                           auto_broadcast=auto_broadcast.lower()), name)


def const_like(value: Any, ref: Output) -> Output:
    """A constant holding ``value`` in ``ref``'s element type (used by other op families)."""
    et = ref.element_type
    # element_type keeps f64 constants f64 (to_output narrows untyped float64 to f32); a type
    # without a numpy dtype (bf16) holds its values as f32.
    return to_output(np.asarray(value, dtype=et.dtype or np.float32), element_type=et)


def _like(value: Any, data: Output) -> Output:
    """A graph value, or a python value as a constant of ``data``'s element type."""
    return to_output(value) if isinstance(value, (Node, Output)) else const_like(value, data)


def prelu(data: Any, slope: Any, name: str | None = None) -> Node:
    x = to_output(data)
    return set_name(PRelu([x, _like(slope, x)]), name)


def gelu(data: Any, approximation_mode: str = "erf", name: str | None = None) -> Node:
    return set_name(Gelu([to_output(data)], approximation_mode=approximation_mode.upper()), name)


def clamp(data: Any, min_value: float, max_value: float, name: str | None = None) -> Node:
    return set_name(Clamp([to_output(data)], min=float(min_value), max=float(max_value)), name)


def elu(data: Any, alpha: float, name: str | None = None) -> Node:
    return set_name(Elu([to_output(data)], alpha=float(alpha)), name)


def swish(data: Any, beta: Any = None, name: str | None = None) -> Node:
    x = to_output(data)
    inputs = [x] if beta is None else [x, _like(beta, x)]
    return set_name(Swish(inputs), name)


def hard_sigmoid(data: Any, alpha: Any, beta: Any, name: str | None = None) -> Node:
    x = to_output(data)
    return set_name(HardSigmoid([x, _like(alpha, x), _like(beta, x)]), name)


def selu(data: Any, alpha: Any, lambda_value: Any, name: str | None = None) -> Node:
    x = to_output(data)
    return set_name(Selu([x, _like(alpha, x), _like(lambda_value, x)]), name)


def round(data: Any, mode: str = "half_to_even", name: str | None = None) -> Node:  # noqa: A001
    return set_name(Round([to_output(data)], mode=mode.lower()), name)


def is_inf(data: Any, attributes: dict | None = None, name: str | None = None) -> Node:
    attrs = dict(attributes or {})
    return set_name(IsInf([to_output(data)], **attrs), name)


def convert(data: Any, destination_type: Any, name: str | None = None) -> Node:
    return set_name(Convert([to_output(data)], destination_type=Type.of(destination_type)), name)


def convert_like(data: Any, like: Any, name: str | None = None) -> Node:
    return set_name(ConvertLike([to_output(data), to_output(like)]), name)


# -- ONNX import ------------------------------------------------------------------------------

def onnx_element_type(to: int, ctx: Any) -> Type:
    """netpass element type of an ONNX TensorProto data type, or ctx.error."""
    try:
        dt = onnx.helper.tensor_dtype_to_np_dtype(to)
        et = Type.of(dt)
    except (KeyError, TypeError, ValueError):
        et = None
    if et is None or to == onnx.TensorProto.BFLOAT16:
        name = onnx.TensorProto.DataType.Name(to) if to in onnx.TensorProto.DataType.values() \
            else str(to)
        ctx.error(f"element type {name} is not supported")
    return et


def _check_legacy_broadcast(ctx: Any) -> None:
    # Before opset 7, broadcast=1 with an explicit axis aligned the right operand elsewhere
    # than numpy does; without axis it is suffix matching, which numpy rules cover.
    if ctx.opset < 7 and ctx.attr("broadcast", 0) and ctx.has_attr("axis"):
        ctx.error("legacy broadcast with an explicit axis is not supported")


def _register_binary(onnx_op: str, cls: type) -> None:
    def rule(ctx):
        _check_legacy_broadcast(ctx)
        return cls([ctx.inputs[0], ctx.inputs[1]])
    onnx_rule(onnx_op)(rule)


for _op, _cls in (("Add", Add), ("Sub", Subtract), ("Mul", Multiply), ("Equal", Equal),
                  ("Less", Less), ("Greater", Greater), ("LessOrEqual", LessEqual),
                  ("GreaterOrEqual", GreaterEqual), ("And", LogicalAnd), ("Or", LogicalOr),
                  ("Xor", LogicalXor)):
    _register_binary(_op, _cls)


@onnx_rule("Div")
def _import_div(ctx):
    _check_legacy_broadcast(ctx)
    return Divide([ctx.inputs[0], ctx.inputs[1]], m_pythondiv=False)


@onnx_rule("Pow")
def _import_pow(ctx):
    # ONNX lets the exponent's type differ; OpenVINO's Power wants one type. An integer base
    # with a real exponent is raised in the exponent's type and truncated back (C's cast).
    base, exponent = ctx.inputs[0], ctx.inputs[1]
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


@onnx_rule("Not")
def _import_not(ctx):
    return LogicalNot([ctx.inputs[0]])


@onnx_rule("Where")
def _import_where(ctx):
    return Select(ctx.inputs[:3])


def _register_unary(onnx_op: str, cls: type) -> None:
    onnx_rule(onnx_op)(lambda ctx: cls([ctx.inputs[0]]))


for _op, _cls in (("Relu", Relu), ("Sigmoid", Sigmoid), ("Tanh", Tanh), ("Exp", Exp),
                  ("Log", Log), ("Sqrt", Sqrt), ("Abs", Abs), ("Neg", Negative), ("Erf", Erf),
                  ("Floor", Floor), ("Ceil", Ceiling), ("Sign", Sign), ("Sin", Sin), ("Cos", Cos),
                  ("Tan", Tan), ("Asin", Asin), ("Acos", Acos), ("Atan", Atan), ("Sinh", Sinh),
                  ("Cosh", Cosh), ("Asinh", Asinh), ("Acosh", Acosh), ("Atanh", Atanh),
                  ("Softplus", SoftPlus), ("Softsign", SoftSign), ("HardSwish", HSwish),
                  ("IsNaN", IsNaN)):
    _register_unary(_op, _cls)


@onnx_rule("Mish", since=18)
def _import_mish(ctx):
    return Mish([ctx.inputs[0]])


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


@onnx_rule("PRelu")
def _import_prelu(ctx):
    x, slope = ctx.inputs[0], ctx.inputs[1]
    xs, ss = x.partial_shape, slope.partial_shape
    if ss.rank_is_static and len(ss) == 1 and not (ss[0].is_static and ss[0].min == 1):
        # ONNX aligns a 1-D slope with the last axis; OpenVINO's PRelu would read a slope as long
        # as dim 1 per channel. Give the slope data's rank so both agree on numpy broadcasting.
        if not xs.rank_is_static:
            ctx.error("a 1-D slope needs data of known rank")
        if len(xs) > 2:
            lead = len(xs) - 1
            if slope.value is not None:
                slope = to_output(slope.value.reshape((1,) * lead + slope.value.shape),
                                  element_type=slope.element_type)
            else:
                from .. import opset
                unsqueeze = getattr(opset, "unsqueeze", None)
                if unsqueeze is None:
                    ctx.error("a non-constant 1-D slope on data of rank > 2 needs Unsqueeze")
                slope = unsqueeze(slope, list(range(lead))).output(0)
    return PRelu([x, slope])


@onnx_rule("LeakyRelu")
def _import_leaky_relu(ctx):
    x = ctx.inputs[0]
    return PRelu([x, const_like(ctx.attr("alpha", 0.01), x)])


@onnx_rule("Elu")
def _import_elu(ctx):
    return Elu([ctx.inputs[0]], alpha=float(ctx.attr("alpha", 1.0)))


@onnx_rule("Selu")
def _import_selu(ctx):
    x = ctx.inputs[0]
    return Selu([x, const_like(ctx.attr("alpha", 1.67326319217681884765625), x),
                 const_like(ctx.attr("gamma", 1.05070102214813232421875), x)])


@onnx_rule("HardSigmoid")
def _import_hard_sigmoid(ctx):
    x = ctx.inputs[0]
    return HardSigmoid([x, const_like(ctx.attr("alpha", 0.2), x),
                        const_like(ctx.attr("beta", 0.5), x)])


@onnx_rule("Swish")
def _import_swish(ctx):
    x = ctx.inputs[0]
    alpha = float(ctx.attr("alpha", 1.0))
    return Swish([x]) if alpha == 1.0 else Swish([x, const_like(alpha, x)])


@onnx_rule("Celu", since=12)
def _import_celu(ctx):
    # alpha * Elu(x / alpha) with Elu's alpha 1 is max(0, x) + min(0, alpha * (exp(x/alpha) - 1)).
    x = ctx.inputs[0]
    alpha = const_like(ctx.attr("alpha", 1.0), x)
    return Multiply([Elu([Divide([x, alpha], m_pythondiv=False)], alpha=1.0), alpha])


@onnx_rule("ThresholdedRelu", since=10)
def _import_thresholded_relu(ctx):
    x = ctx.inputs[0]
    return Select([Greater([x, const_like(ctx.attr("alpha", 1.0), x)]), x, const_like(0, x)])


@onnx_rule("Shrink", since=9)
def _import_shrink(ctx):
    x = ctx.inputs[0]
    lambd, bias = float(ctx.attr("lambd", 0.5)), float(ctx.attr("bias", 0.0))
    above = Select([Greater([x, const_like(lambd, x)]), Subtract([x, const_like(bias, x)]),
                    const_like(0, x)])
    return Select([Less([x, const_like(-lambd, x)]), Add([x, const_like(bias, x)]), above])


@onnx_rule("Gelu", since=20)
def _import_gelu(ctx):
    mode = ctx.attr("approximate", "none")
    if mode not in ("none", "tanh"):
        ctx.error(f"approximate={mode!r} is not supported")
    return Gelu([ctx.inputs[0]], approximation_mode="TANH" if mode == "tanh" else "ERF")


def _clip(x: Output, lo: Any, hi: Any) -> Output:
    """Clamp when both bounds (Outputs, numbers or None) are known, else Maximum/Minimum."""
    def number(v: Any, missing: float) -> float | None:
        if v is None:
            return missing
        value = v.value if isinstance(v, Output) else np.asarray(v)
        return None if value is None or value.size != 1 else float(value.reshape(()))
    lo_f, hi_f = number(lo, -math.inf), number(hi, math.inf)
    if lo_f is not None and hi_f is not None and lo_f <= hi_f:
        return Clamp([x], min=lo_f, max=hi_f).output(0)
    out = x
    if lo is not None:
        out = Maximum([out, lo if isinstance(lo, Output) else const_like(lo, x)]).output(0)
    if hi is not None:
        out = Minimum([out, hi if isinstance(hi, Output) else const_like(hi, x)]).output(0)
    return out


@onnx_rule("Clip")
def _import_clip_attrs(ctx):
    return _clip(ctx.inputs[0], ctx.attr("min", -3.4028234663852886e38),
                 ctx.attr("max", 3.4028234663852886e38))


@onnx_rule("Clip", since=11)
def _import_clip(ctx):
    return _clip(ctx.inputs[0], ctx.input(1), ctx.input(2))


def _check_numpy_type(ctx: Any, x: Output) -> None:
    if x.element_type.dtype is None:
        ctx.error(f"input element type {x.element_type} is not supported")


@onnx_rule("Cast")
def _import_cast(ctx):
    x = ctx.inputs[0]
    _check_numpy_type(ctx, x)
    et = onnx_element_type(ctx.attr("to", 0), ctx)
    if ctx.attr("round_mode", "up") != "up":
        ctx.error("round_mode other than 'up' is not supported")
    if et is x.element_type:
        return x
    return Convert([x], destination_type=et)


@onnx_rule("CastLike")
def _import_castlike(ctx):
    x, like = ctx.inputs[0], ctx.inputs[1]
    _check_numpy_type(ctx, x)
    _check_numpy_type(ctx, like)
    et = like.element_type
    if et is x.element_type:
        return x
    return Convert([x], destination_type=et)


# -- ONNX export (opset 17) -------------------------------------------------------------------

def _onnx_dtype(et: Type) -> int:
    return int(onnx.helper.np_dtype_to_tensor_dtype(et.dtype))


def _export_simple(onnx_op: str, **attrs: Any) -> Callable:
    def rule(node, ectx):
        ectx.add_node(onnx_op, ectx.inputs(node), ectx.outputs(node), **attrs)
    return rule


for _cls, _op in ((Add, "Add"), (Subtract, "Sub"), (Multiply, "Mul"), (Power, "Pow"),
                  (Maximum, "Max"), (Minimum, "Min"), (Equal, "Equal"), (Less, "Less"),
                  (Greater, "Greater"), (LessEqual, "LessOrEqual"),
                  (GreaterEqual, "GreaterOrEqual"), (LogicalAnd, "And"), (LogicalOr, "Or"),
                  (LogicalXor, "Xor"), (LogicalNot, "Not"), (Relu, "Relu"),
                  (Sigmoid, "Sigmoid"), (Tanh, "Tanh"), (Exp, "Exp"), (Log, "Log"),
                  (Sqrt, "Sqrt"), (Abs, "Abs"), (Negative, "Neg"), (Erf, "Erf"),
                  (Floor, "Floor"), (Ceiling, "Ceil"), (Sign, "Sign"), (Sin, "Sin"),
                  (Cos, "Cos"), (Tan, "Tan"), (Asin, "Asin"), (Acos, "Acos"), (Atan, "Atan"),
                  (Sinh, "Sinh"), (Cosh, "Cosh"), (Asinh, "Asinh"), (Acosh, "Acosh"),
                  (Atanh, "Atanh"), (SoftPlus, "Softplus"), (SoftSign, "Softsign"),
                  (HSwish, "HardSwish"), (IsNaN, "IsNaN"), (Mod, "Mod")):
    onnx_export(_cls)(_export_simple(_op, fmod=1) if _cls is Mod else _export_simple(_op))


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


@onnx_export(PRelu)
def _export_prelu(node, ectx):
    x, slope = ectx.inputs(node)
    data, sps = node.get_input_partial_shape(0), node.get_input_partial_shape(1)
    if node._per_channel(data, sps) and len(data) > 2:
        # OpenVINO reads this slope per channel; ONNX would align it with the last axis.
        shape = ectx.constant(np.array([-1] + [1] * (len(data) - 2), np.int64))
        reshaped = ectx.fresh("slope")
        ectx.add_node("Reshape", [slope, shape], [reshaped])
        slope = reshaped
    ectx.add_node("PRelu", [x, slope], ectx.outputs(node))


@onnx_export(Gelu)
def _export_gelu(node, ectx):
    # ONNX Gelu arrives in opset 20; opset 17 spells it out.
    (x,) = ectx.inputs(node)
    dt = node.get_output_element_type(0).dtype
    c = lambda v: ectx.constant(np.asarray(v, dt))  # noqa: E731
    half_x, inner, t, onep = (ectx.fresh(h) for h in ("half_x", "inner", "t", "onep"))
    ectx.add_node("Mul", [x, c(0.5)], [half_x])
    if node.approximation_mode == "TANH":
        x2, x3, k, s, sc = (ectx.fresh(h) for h in ("x2", "x3", "k", "s", "sc"))
        ectx.add_node("Mul", [x, x], [x2])
        ectx.add_node("Mul", [x2, x], [x3])
        ectx.add_node("Mul", [x3, c(0.044715)], [k])
        ectx.add_node("Add", [x, k], [s])
        ectx.add_node("Mul", [s, c(math.sqrt(2 / math.pi))], [sc])
        ectx.add_node("Tanh", [sc], [t])
    else:
        ectx.add_node("Mul", [x, c(1 / math.sqrt(2))], [inner])
        ectx.add_node("Erf", [inner], [t])
    ectx.add_node("Add", [t, c(1)], [onep])
    ectx.add_node("Mul", [half_x, onep], ectx.outputs(node))


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


@onnx_export(Clamp)
def _export_clamp(node, ectx):
    (x,) = ectx.inputs(node)
    et = node.get_output_element_type(0)
    if et.is_integral:
        info = np.iinfo(et.dtype)
        lo = max(info.min, math.ceil(node.min)) if math.isfinite(node.min) else info.min
        hi = min(info.max, math.floor(node.max)) if math.isfinite(node.max) else info.max
    else:
        lo, hi = node.min, node.max
    ectx.add_node("Clip", [x, ectx.constant(np.asarray(lo, et.dtype)),
                           ectx.constant(np.asarray(hi, et.dtype))], ectx.outputs(node))


@onnx_export(Elu)
def _export_elu(node, ectx):
    ectx.add_node("Elu", ectx.inputs(node), ectx.outputs(node), alpha=float(node.alpha))


def _scalar_attr(node: Node, i: int) -> float:
    value = node.input_constant(i)
    if value is None:
        raise UnsupportedOpError(node.type_name, "", 17, node.friendly_name,
                                 f"input {i} must be constant to export to ONNX")
    return float(np.asarray(value).reshape(()))


@onnx_export(Selu)
def _export_selu(node, ectx):
    ectx.add_node("Selu", ectx.inputs(node)[:1], ectx.outputs(node),
                  alpha=_scalar_attr(node, 1), gamma=_scalar_attr(node, 2))


@onnx_export(HardSigmoid)
def _export_hard_sigmoid(node, ectx):
    ectx.add_node("HardSigmoid", ectx.inputs(node)[:1], ectx.outputs(node),
                  alpha=_scalar_attr(node, 1), beta=_scalar_attr(node, 2))


@onnx_export(HSigmoid)
def _export_hsigmoid(node, ectx):
    ectx.add_node("HardSigmoid", ectx.inputs(node), ectx.outputs(node), alpha=1 / 6, beta=0.5)


@onnx_export(Swish)
def _export_swish(node, ectx):
    # ONNX Swish arrives in opset 24: x * Sigmoid(beta * x).
    names = ectx.inputs(node)
    x = names[0]
    arg = x
    if len(names) > 1:
        arg = ectx.fresh("beta_x")
        ectx.add_node("Mul", [x, names[1]], [arg])
    sig = ectx.fresh("sigmoid")
    ectx.add_node("Sigmoid", [arg], [sig])
    ectx.add_node("Mul", [x, sig], ectx.outputs(node))


@onnx_export(IsInf)
def _export_isinf(node, ectx):
    ectx.add_node("IsInf", ectx.inputs(node), ectx.outputs(node),
                  detect_negative=int(node.detect_negative),
                  detect_positive=int(node.detect_positive))


@onnx_export(Mish)
def _export_mish(node, ectx):
    # ONNX Mish arrives in opset 18: x * Tanh(Softplus(x)).
    (x,) = ectx.inputs(node)
    sp, t = ectx.fresh("softplus"), ectx.fresh("tanh")
    ectx.add_node("Softplus", [x], [sp])
    ectx.add_node("Tanh", [sp], [t])
    ectx.add_node("Mul", [x, t], ectx.outputs(node))


@onnx_export(ConvertLike)
def _export_convert_like(node, ectx):
    ectx.add_node("CastLike", ectx.inputs(node), ectx.outputs(node))


@onnx_export(Convert)
def _export_convert(node, ectx):
    ectx.add_node("Cast", ectx.inputs(node), ectx.outputs(node),
                  to=_onnx_dtype(node.destination_type))

