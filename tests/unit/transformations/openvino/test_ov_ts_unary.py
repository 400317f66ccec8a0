"""Ported from OpenVINO ``src/common/transformations/tests/transpose_sinking/ts_unary_test.cpp``:
TSUnaryForward / TSUnaryBackward over every unary op, 1 or 10 in a chain, with a Transpose
before or after, consumers that branch at the first or last node, and ops whose other inputs
must be ignored.

Not ported: LogSoftmax (OpenVINO moves the Transpose across it without renumbering its axis,
which changes the values; netpass leaves ops with an axis alone) and LogicalNot on f32 (netpass's
LogicalNot takes boolean input only).
"""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import check, model_of, reversed_order, transpose
from ts_factories import unary_factory

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import TSUnaryBackward, TSUnaryForward

SHAPE = [1, 96, 55, 55]
NAMES = ("Clamp", "Elu", "SoftPlus", "LogicalNot", "Convert", "Abs", "Acos", "Asin", "Asinh", "Atan",
         "Ceiling", "Cos", "Cosh", "Erf", "Exp", "Gelu", "HSigmoid", "HSwish", "Log", "Negative", "Relu",
         "Sigmoid", "Sign", "Sin", "Sinh", "SoftSign", "Sqrt", "Tan", "Tanh", "Selu", "Swish",
         "HardSigmoid", "LogSoftmax", "ConvertLike")
SKIP = {"LogSoftmax": "OpenVINO sinks through LogSoftmax without renumbering its axis (values change)",
        "LogicalNot": "netpass's LogicalNot takes boolean input only"}


def t4(x):
    return transpose(x, [0, 2, 3, 1], np.uint64)


def chain(x, f, n):
    for _ in range(n):
        x = f.create([x.output(0) if hasattr(x, "output") else x])
    return x


def before(f, n):
    x = opset.parameter(SHAPE, np.float32)
    return model_of([chain(t4(x), f, n)], [x])


def after(f, n):
    x = opset.parameter(SHAPE, np.float32)
    return model_of([t4(chain(x, f, n))], [x])


def ignore_second_input(f, n):
    x = opset.parameter(SHAPE, np.float32)
    y = x
    for _ in range(n):
        y = f.create([y.output(0)])
        second = y.input_value(1)
        y.input(1).replace_source_output(
            transpose(second, reversed_order(second.partial_shape.rank.get_length()), np.uint64).output(0))
    return model_of([y], [x])


def _reshape(v):
    return opset.reshape(v, opset.constant(np.array([int(np.prod(SHAPE))], np.uint64)), False)


def with_reshape_after(f, n):
    x = opset.parameter(SHAPE, np.float32)
    t = t4(chain(x, f, n))
    return model_of([_reshape(t), _reshape(t)], [x])


def with_reshape_before(f, n):
    x = opset.parameter(SHAPE, np.float32)
    y = chain(t4(x), f, n)
    return model_of([_reshape(y), _reshape(y)], [x])


def with_eltwise_after(f, n):
    x = opset.parameter(SHAPE, np.float32)
    y = chain(x, f, n)
    return model_of([t4(opset.sinh(y)), t4(opset.cosh(y))], [x])


def with_eltwise_before(f, n):
    x = opset.parameter(SHAPE, np.float32)
    y = chain(t4(x), f, n)
    return model_of([opset.sinh(y), opset.cosh(y)], [x])


def first_node_backward(f, n):
    x = opset.parameter(SHAPE, np.float32)
    outs, y = [], x
    for _ in range(n):
        y = f.create([y.output(0)])
        outs.append(opset.cosh(y))
    return model_of(outs + [t4(y)], [x])


def mult_transposes(f, n):
    x = opset.parameter(SHAPE, np.float32)
    y = chain(x, f, n)
    return model_of([opset.tanh(t4(y)), opset.tanh(t4(y))], [x])


def mult_transposes_ref(f, n):
    x = opset.parameter(SHAPE, np.float32)
    y = chain(t4(x), f, n)
    return model_of([opset.tanh(y), opset.tanh(y)], [x])


def first_node_forward(f, n):
    x = opset.parameter(SHAPE, np.float32)
    t = t4(opset.sinh(x))
    return model_of([chain(t, f, n), _reshape(t)], [x])


def first_node_forward_ref(f, n):
    x = opset.parameter(SHAPE, np.float32)
    s = opset.sinh(x)
    return model_of([t4(chain(s, f, n)), _reshape(t4(s))], [x])


SUITES = {
    "TSUnaryForwardTestSuite": (TSUnaryForward, before, after, NAMES),
    "TSUnaryForwardMultipleInputsTestSuite": (TSUnaryForward, ignore_second_input, ignore_second_input,
                                              ("HardSigmoid", "LogSoftmax", "ConvertLike")),
    "TSUnaryBackwardTestSuite": (TSUnaryBackward, after, before, NAMES),
    "TSUnaryForwardMultConsumersTestSuiteLastNodeReshape": (TSUnaryForward, with_reshape_before,
                                                            with_reshape_after, NAMES),
    "TSUnaryBackwardMultConsumersTestSuiteLastNodeReshape": (TSUnaryBackward, with_reshape_after,
                                                             with_reshape_before, NAMES),
    "TSUnaryForwardMultConsumersTestSuiteLastNodeEltwise": (TSUnaryForward, with_eltwise_before,
                                                            with_eltwise_after, NAMES),
    "TSUnaryBackwardMultConsumersTestSuiteEltwise": (TSUnaryBackward, with_eltwise_after,
                                                     with_eltwise_before, NAMES),
    "TSUnaryBackwardMultConsumersTestSuiteFirstNode": (TSUnaryBackward, first_node_backward,
                                                       first_node_backward, NAMES),
    "TSUnaryBackwardMultTransposeConsumersTestSuiteFirstNode": (TSUnaryBackward, mult_transposes,
                                                                mult_transposes_ref, NAMES),
    "TSUnaryForwardMultTransposeConsumersTestSuiteFirstNode": (TSUnaryForward, first_node_forward,
                                                               first_node_forward_ref, NAMES),
}
MULTI_INPUT_SKIP = {"LogSoftmax": "LogSoftmax has one input: the case has no second input to transpose"}


def _params():
    out = []
    for suite, (_, _, _, names) in SUITES.items():
        skips = MULTI_INPUT_SKIP if "MultipleInputs" in suite else SKIP
        for name in names:
            for n in (1, 10):
                marks = [pytest.mark.skip(reason=skips[name])] if name in skips else []
                out.append(pytest.param(suite, name, n, id=f"{suite}-{name}-x{n}", marks=marks))
    return out


@pytest.mark.parametrize("suite, name, num_ops", _params())
def test_ts_unary(suite, name, num_ops):
    pass_type, build, build_ref, _ = SUITES[suite]
    f = unary_factory(name)
    check(build(f, num_ops), build_ref(f, num_ops), pass_type())
