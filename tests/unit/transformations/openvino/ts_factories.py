"""Main-op factories of OpenVINO's transpose-sinking tests (``ts_common_test.cpp``,
``ts_unary_test.cpp``, ``ts_binary_test.cpp``): the ops and the attributes OpenVINO builds
them with."""
from __future__ import annotations

import numpy as np
from ov_port import Factory

from netpass import opset


def unary(name: str, fn=None) -> Factory:
    fn = fn or getattr(opset, name.lower())
    return Factory(name, lambda v: fn(v[0]))


def _convert_like(v):
    return opset.convert_like(v[0], opset.constant(np.ones([1, 2, 3, 2, 1, 1], np.float64)))


UNARY_SPECIAL = {
    "Clamp": lambda v: opset.clamp(v[0], 0.1, 0.2),
    "Convert": lambda v: opset.convert(v[0], np.float64),
    "Elu": lambda v: opset.elu(v[0], 0.1),
    "Selu": lambda v: opset.selu(v[0], opset.constant(np.float32(2.0)), opset.constant(np.float32(3.0))),
    "Swish": lambda v: opset.swish(v[0], opset.constant(np.float32(0.9))),
    "HardSigmoid": lambda v: opset.hard_sigmoid(v[0], opset.constant(np.float32(2.0)),
                                                opset.constant(np.float32(3.0))),
    "LogSoftmax": lambda v: opset.log_softmax(v[0], 2),
    "ConvertLike": _convert_like,
    "SoftPlus": lambda v: opset.softplus(v[0]),
    "SoftSign": lambda v: opset.softsign(v[0]),
    "HSigmoid": lambda v: opset.hsigmoid(v[0]),
    "HSwish": lambda v: opset.hswish(v[0]),
    "LogicalNot": lambda v: opset.logical_not(v[0]),
    "IsInf": lambda v: opset.is_inf(v[0]),
    "IsNaN": lambda v: opset.is_nan(v[0]),
    "IsFinite": lambda v: opset.is_finite(v[0]),
}


def unary_factory(name: str) -> Factory:
    return Factory(name, UNARY_SPECIAL[name]) if name in UNARY_SPECIAL else unary(name)


COMMON_UNARY = [unary_factory(n) for n in (
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceiling", "Clamp", "Cos", "Cosh",
    "Convert", "Erf", "Elu", "Exp", "Floor", "Gelu", "HSigmoid", "HSwish", "Log", "LogicalNot",
    "Mish", "Negative", "Relu", "Sigmoid", "Sign", "Sin", "Sinh", "SoftPlus", "SoftSign", "Sqrt",
    "Tan", "Tanh")]
LOGICAL_UNARY = [unary_factory(n) for n in ("IsInf", "IsNaN", "IsFinite")]

_BINARY_FNS = {"Add": opset.add, "Divide": opset.divide, "Maximum": opset.maximum,
               "Minimum": opset.minimum, "Mod": opset.mod, "Multiply": opset.multiply,
               "Power": opset.power, "SquaredDifference": opset.squared_difference,
               "Subtract": opset.subtract, "PRelu": opset.prelu}


def binary(name: str) -> Factory:
    fn = _BINARY_FNS[name]
    return Factory(name, lambda v: fn(v[0], v[1]))


BINARY_ELEMENTWISE = [binary(n) for n in ("Add", "Divide", "Maximum", "Minimum", "Mod", "Multiply",
                                          "Power", "SquaredDifference", "Subtract")]
BINARY = BINARY_ELEMENTWISE + [binary("PRelu")]

REDUCTIONS = [Factory(n, (lambda fn: lambda v: fn(v[0], v[1], True))(getattr(opset, f)))
              for n, f in (("ReduceMax", "reduce_max"), ("ReduceMin", "reduce_min"),
                           ("ReduceMean", "reduce_mean"), ("ReduceSum", "reduce_sum"),
                           ("ReduceProd", "reduce_prod"), ("ReduceL1", "reduce_l1"),
                           ("ReduceL2", "reduce_l2"))]


def concat(axis: int) -> Factory:
    return Factory("Concat", lambda v: opset.concat(list(v), axis))


SPLIT3 = Factory("Split", lambda v: opset.split(v[0], v[1], 3))
PAD = Factory("Pad", lambda v: opset.pad(v[0], v[1], v[2], "constant"))
SLICE = Factory("Slice", lambda v: opset.slice(v[0], v[1], v[2], v[3], v[4]))
RESHAPE = Factory("Reshape", lambda v: opset.reshape(v[0], v[1], False))
SQUEEZE = Factory("Squeeze", lambda v: opset.squeeze(v[0], v[1]))
UNSQUEEZE = Factory("Unsqueeze", lambda v: opset.unsqueeze(v[0], v[1]))
