"""Ported from OpenVINO's GNA plugin (2023) ``src/plugins/intel_gna/tests/unit/transformations/
gather_sinking_unary_test.cpp``: GatherSinkingUnaryForward / Backward over every unary op, 1 or
10 in a chain, with branching consumers. The Gather is OpenVINO's: axis 1, indices the next
permutation of ``range(size of its input)`` (only shapes are compared, as there).

Not ported: LogicalNot on f32 (netpass's LogicalNot takes boolean input only)."""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import check, model_of
from ts_factories import unary_factory

from netpass import opset
from netpass.ngraph_passes.gna import (
    GatherSinkingUnaryBackward,
    GatherSinkingUnaryForward,
)

SHAPE = [1, 96, 55, 55]
FLAGS = {"const_values": False, "attributes": False}
NAMES = ("Clamp", "Elu", "SoftPlus", "LogicalNot", "Convert", "Abs", "Acos", "Asin", "Asinh", "Atan", "Ceiling",
         "Cos", "Cosh", "Erf", "Exp", "Gelu", "HSigmoid", "HSwish", "Log", "Negative", "Relu", "Sigmoid", "Sign",
         "Sin", "Sinh", "SoftSign", "Sqrt", "Tan", "Tanh")


def gather(x):
    """OpenVINO's MakeGather: axis 1, ``next_permutation(range(prod(shape)))``."""
    n = int(np.prod(x.output(0).partial_shape.to_shape()))
    idx = np.arange(n, dtype=np.int64)
    idx[-2:] = idx[-2:][::-1]
    return opset.gather(x, opset.constant(idx), opset.constant(np.int64(1)))


def chain(x, f, n):
    for _ in range(n):
        x = f.create([x.output(0)])
    return x


def reshape(v):
    n = int(np.prod(v.output(0).partial_shape.to_shape()))
    return opset.reshape(v, opset.constant(np.array([n], np.uint64)), False)


def x_param():
    return opset.parameter(SHAPE, np.float32)


def before(f, n):
    x = x_param()
    return model_of([chain(gather(x), f, n)], [x])


def after(f, n):
    x = x_param()
    return model_of([gather(chain(x, f, n))], [x])


def reshape_after(f, n):
    x = x_param()
    g = gather(chain(x, f, n))
    return model_of([reshape(g), reshape(g)], [x])


def reshape_before(f, n):
    x = x_param()
    y = chain(gather(x), f, n)
    return model_of([reshape(y), reshape(y)], [x])


def eltwise_after(f, n):
    x = x_param()
    y = chain(x, f, n)
    return model_of([gather(opset.sinh(y)), gather(opset.cosh(y))], [x])


def eltwise_before(f, n):
    x = x_param()
    y = chain(gather(x), f, n)
    return model_of([opset.sinh(y), opset.cosh(y)], [x])


def first_node_backward(f, n):
    x = x_param()
    outs, y = [], x
    for _ in range(n):
        y = f.create([y.output(0)])
        outs.append(opset.cosh(y))
    return model_of(outs + [gather(y)], [x])


def mult_gathers(f, n):
    x = x_param()
    y = chain(x, f, n)
    return model_of([opset.tanh(gather(y)), opset.tanh(gather(y))], [x])


def mult_gathers_ref(f, n):
    x = x_param()
    y = chain(gather(x), f, n)
    return model_of([opset.tanh(y), opset.tanh(y)], [x])


def first_node_forward(f, n):
    x = x_param()
    g = gather(opset.sinh(x))
    return model_of([chain(g, f, n), reshape(g)], [x])


def first_node_forward_ref(f, n):
    x = x_param()
    s = opset.sinh(x)
    return model_of([gather(chain(s, f, n)), reshape(gather(s))], [x])


SUITES = {
    "GatherSinkingUnaryForwardTestSuite": (GatherSinkingUnaryForward, before, after),
    "GatherSinkingUnaryBackwardTestSuite": (GatherSinkingUnaryBackward, after, before),
    "GatherSinkingUnaryForwardMultConsumersTestSuiteLastNodeReshape":
        (GatherSinkingUnaryForward, reshape_before, reshape_after),
    "GatherSinkingUnaryBackwardMultConsumersTestSuiteLastNodeReshape":
        (GatherSinkingUnaryBackward, reshape_after, reshape_before),
    "GatherSinkingUnaryForwardMultConsumersTestSuiteLastNodeEltwise":
        (GatherSinkingUnaryForward, eltwise_before, eltwise_after),
    "GatherSinkingUnaryForwardMultConsumersTestSuiteFirstNode":
        (GatherSinkingUnaryForward, first_node_forward, first_node_forward_ref),
    "GatherSinkingUnaryBackwardMultConsumersTestSuiteFirstNode":
        (GatherSinkingUnaryBackward, first_node_backward, first_node_backward),
    "GatherSinkingUnaryBackwardMultTransposeConsumersTestSuiteFirstNode":
        (GatherSinkingUnaryBackward, mult_gathers, mult_gathers_ref),
}


def _params():
    out = []
    for suite in SUITES:
        for name in NAMES:
            for n in (1, 10):
                marks = [pytest.mark.skip(reason="netpass's LogicalNot takes boolean input only")] \
                    if name == "LogicalNot" else []
                out.append(pytest.param(suite, name, n, id=f"{suite}-{name}-x{n}", marks=marks))
    return out


@pytest.mark.parametrize("suite, name, num_ops", _params())
def test_gather_sinking_unary(suite, name, num_ops):
    pass_type, build, build_ref = SUITES[suite]
    f = unary_factory(name)
    check(build(f, num_ops), build_ref(f, num_ops), pass_type(), **FLAGS)
