"""Elementwise operations: binary arithmetic (:mod:`.arithmetic`), comparison, logic and Select
(:mod:`.logical`), unary math (:mod:`.unary`), activations (:mod:`.activations`) and
Convert/ConvertLike (:mod:`.convert`). ONNX ops without an OpenVINO twin (LeakyRelu, Reciprocal,
Celu, ThresholdedRelu, Shrink, variadic Sum/Mean/Max/Min, Clip with tensor bounds) are imported
as compositions of these.

Class hierarchy follows OpenVINO (``Relu`` is a ``UnaryElementwiseArithmetic``; ``Clamp``,
``Elu``, ``Convert``... are plain ops) so that passes matching a family see the same ops as
OpenVINO's. Arithmetic on small integer shape tensors also propagates partial values
(``Dimension`` arithmetic), so shape sub-graphs such as ``ShapeOf -> Gather -> Multiply ->
Concat -> Reshape`` keep their known dims and symbols.
"""
from __future__ import annotations

# Classes and factories; ``__all__`` lists the factories (``netpass.opset`` takes them).
from .activations import (  # noqa: F401
    Clamp, Elu, Gelu, HSigmoid, HSwish, HardSigmoid, Mish, PRelu, Relu, Selu, Sigmoid, SoftPlus,
    SoftSign, Swish, Tanh, clamp, elu, gelu, hard_sigmoid, hsigmoid, hswish, mish, prelu, relu,
    selu, sigmoid, softplus, softsign, swish, tanh)
from .arithmetic import (  # noqa: F401
    Add, Divide, FloorMod, Maximum, Minimum, Mod, Multiply, Power, SquaredDifference, Subtract, add,
    divide, floor_mod, maximum, minimum, mod, multiply, power, squared_difference, subtract)
from .bitcast import BitCast, bitcast  # noqa: F401
from .common import const_like  # noqa: F401
from .convert import Convert, ConvertLike, convert, convert_like, onnx_element_type  # noqa: F401
from .logical import (  # noqa: F401
    Equal, Greater, GreaterEqual, Less, LessEqual, LogicalAnd, LogicalNot, LogicalOr, LogicalXor,
    NotEqual, Select, equal, greater, greater_equal, less, less_equal, logical_and, logical_not,
    logical_or, logical_xor, not_equal, select)
from .unary import (  # noqa: F401
    Abs, Acos, Acosh, Asin, Asinh, Atan, Atanh, Ceiling, Cos, Cosh, Erf, Exp, Floor, IsInf, IsNaN,
    Log, Negative, Round, Sign, Sin, Sinh, Sqrt, Tan, abs, acos, acosh, asin, asinh, atan, atanh,
    ceiling, cos, cosh, erf, exp, floor, is_inf, is_nan, log, negative, round, sign, sin, sinh,
    sqrt, tan)

# Non-decreasing activations: ``max(f(x)) == f(max(x))``, so max-pooling commutes with them
# (the GNA and legacy pool/activation reorderings read this one list).
MONOTONIC_ACTIVATIONS: tuple[type, ...] = (Relu, Sigmoid, Tanh, Clamp, Elu, SoftPlus, Exp, Erf)

__all__ = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum",
           "squared_difference", "floor_mod", "mod", "equal", "not_equal", "less", "greater",
           "less_equal", "greater_equal", "logical_not", "logical_and", "logical_or", "logical_xor",
           "select", "relu", "prelu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "negative",
           "erf", "gelu", "clamp", "elu", "softplus", "swish", "hswish", "hsigmoid", "hard_sigmoid",
           "selu", "softsign", "floor", "ceiling", "round", "sign", "sin", "cos", "tan", "asin",
           "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "mish", "is_nan", "is_inf",
           "convert", "convert_like", "bitcast"]
