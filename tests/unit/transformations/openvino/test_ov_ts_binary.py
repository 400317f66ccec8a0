"""Ported from OpenVINO ``src/common/transformations/tests/transpose_sinking/ts_binary_test.cpp``:
TSBinaryForward / TSBinaryBackward with one or two transposed inputs, inputs of lower rank,
branching consumers, PRelu slopes and a dynamic rank.

These are ``TransformationTestsF`` cases, whose comparator does not compare constant values
or attributes (``const_values``/``attributes`` off here too)."""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import check, model_of, transpose
from ts_factories import BINARY, BINARY_ELEMENTWISE

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import TSBinaryBackward, TSBinaryForward

SHAPE = [1, 96, 55, 55]
NHWC = [1, 55, 55, 96]
FLAGS = {"const_values": False, "attributes": False}


def t(x, order=(0, 2, 3, 1)):
    return transpose(x, list(order), np.uint64)


def c(shape):
    return opset.constant(np.ones(shape, np.float32))


def op(f, a, b, idx):
    return f.create([a, b] if idx == 0 else [b, a])


def x_param(shape=SHAPE):
    return opset.parameter(shape, np.float32)


# -- single consumer --------------------------------------------------------------------------
def fwd_one(f, n, idx):
    x = x_param()
    y = t(x)
    for _ in range(n):
        y = op(f, y, c(NHWC), idx)
    return model_of([y], [x])


def fwd_one_ref(f, n, idx):
    x = x_param()
    y = x
    for _ in range(n):
        y = op(f, y, t(c(NHWC), (0, 3, 1, 2)), idx)
    return model_of([t(y)], [x])


def bwd_one(f, n, idx):
    x = x_param()
    y = x
    for _ in range(n):
        y = op(f, y, c(SHAPE), idx)
    return model_of([t(y)], [x])


def bwd_one_ref(f, n, idx):
    x = x_param()
    y = t(x)
    for _ in range(n):
        y = op(f, y, t(c(SHAPE)), idx)
    return model_of([y], [x])


def fwd_double(f, n, idx):
    x = x_param()
    y = t(x)
    for _ in range(n):
        y = f.create([y, t(c(SHAPE))])
    return model_of([y], [x])


def fwd_double_ref(f, n, idx):
    x = x_param()
    y = x
    for _ in range(n):
        y = f.create([y, t(t(c(SHAPE)), (0, 3, 1, 2))])
    return model_of([t(y)], [x])


SINGLE = []
for _f in BINARY:
    for _n in (1, 10):
        for _i in (0, 1):
            SINGLE.append(pytest.param(fwd_one, fwd_one_ref, TSBinaryForward, _f, _n, _i,
                                       id=f"TSBinaryForwardTestSuite-{_f.name}-x{_n}-in{_i}"))
            SINGLE.append(pytest.param(bwd_one, bwd_one_ref, TSBinaryBackward, _f, _n, _i,
                                       id=f"TSBinaryBackwardTestSuite-{_f.name}-x{_n}-in{_i}"))
        SINGLE.append(pytest.param(fwd_double, fwd_double_ref, TSBinaryForward, _f, _n, 0,
                                   id=f"TwoTransposeInputsForwardTestSuite-{_f.name}-x{_n}"))


@pytest.mark.parametrize("build, build_ref, pass_type, f, n, idx", SINGLE)
def test_single_consumer(build, build_ref, pass_type, f, n, idx):
    check(build(f, n, idx), build_ref(f, n, idx), pass_type(), **FLAGS)


# -- inputs of lower rank (IncompatShapes) ----------------------------------------------------
def _unsqueezed(cst_shape, rank=4):
    k = rank - len(cst_shape)
    return opset.unsqueeze(c(cst_shape), opset.constant(np.arange(k, dtype=np.int64)))


def incompat_bwd(f, shape, cst, idx):
    x = x_param(shape)
    return model_of([t(op(f, x, c(cst), idx))], [x])


def incompat_bwd_ref(f, shape, cst, idx):
    x = x_param(shape)
    return model_of([op(f, t(x), t(_unsqueezed(cst)), idx)], [x])


def incompat_fwd(f, shape, cst, idx):
    x = x_param(shape)
    return model_of([op(f, t(x), c(cst), idx)], [x])


def incompat_fwd_ref(f, shape, cst, idx):
    x = x_param(shape)
    return model_of([t(op(f, x, t(_unsqueezed(cst), (0, 3, 1, 2)), idx))], [x])


INCOMPAT = []
for _f in BINARY_ELEMENTWISE:
    for _i in (0, 1):
        for _cst in ([96, 55, 55], [1]):
            INCOMPAT.append(pytest.param(incompat_bwd, incompat_bwd_ref, TSBinaryBackward, _f, SHAPE, _cst, _i,
                                         id=f"IncompatShapesBackward-{_f.name}-{_cst}-in{_i}"))
        for _cst in ([55, 55, 96], [1]):
            INCOMPAT.append(pytest.param(incompat_fwd, incompat_fwd_ref, TSBinaryForward, _f, SHAPE, _cst, _i,
                                         id=f"IncompatShapesForward-{_f.name}-{_cst}-in{_i}"))
INCOMPAT.append(pytest.param(incompat_fwd, incompat_fwd_ref, TSBinaryForward, BINARY[-1], [1, 3, 16, 16], [3], 0,
                             id="PReluIncompatShapesForward"))


@pytest.mark.parametrize("build, build_ref, pass_type, f, shape, cst, idx", INCOMPAT)
def test_incompat_shapes(build, build_ref, pass_type, f, shape, cst, idx):
    check(build(f, shape, cst, idx), build_ref(f, shape, cst, idx), pass_type(), **FLAGS)


# -- several consumers ------------------------------------------------------------------------
def fwd_input_transpose_consumers(f, idx):
    x = x_param()
    t0 = t(x)
    return model_of([op(f, t0, c(NHWC), idx), opset.tanh(t0)], [x])


def fwd_input_transpose_consumers_ref(f, idx):
    x = x_param()
    return model_of([t(op(f, x, t(c(NHWC), (0, 3, 1, 2)), idx)), opset.tanh(t(x))], [x])


def fwd_output_consumers(f, idx):
    x = x_param()
    b = op(f, t(x), c(NHWC), idx)
    return model_of([opset.tanh(b), opset.tanh(b)], [x])


def fwd_output_consumers_ref(f, idx):
    x = x_param()
    t0 = t(op(f, x, t(c(NHWC), (0, 3, 1, 2)), idx))
    return model_of([opset.tanh(t0), opset.tanh(t0)], [x])


def fwd_input_node_consumers(f, idx):
    x = x_param()
    return model_of([op(f, t(x), c(NHWC), idx), opset.tanh(x)], [x])


def fwd_input_node_consumers_ref(f, idx):
    x = x_param()
    return model_of([t(op(f, x, t(c(NHWC), (0, 3, 1, 2)), idx)), opset.tanh(x)], [x])


def bwd_input_node_consumers(f, idx):
    x = x_param()
    tanh0 = opset.tanh(x)
    return model_of([t(op(f, tanh0, c(SHAPE), idx)), opset.tanh(tanh0)], [x])


def bwd_input_node_consumers_ref(f, idx):
    x = x_param()
    tanh0 = opset.tanh(x)
    return model_of([op(f, t(tanh0), t(c(SHAPE)), idx), opset.tanh(tanh0)], [x])


def bwd_output_transpose_mult_consumers(f, idx):
    x = x_param()
    t0 = t(op(f, x, c(SHAPE), idx))
    return model_of([opset.tanh(t0), opset.tanh(t0)], [x])


def bwd_output_mult_ref(f, idx):
    x = x_param()
    b = op(f, t(x), t(c(SHAPE)), idx)
    return model_of([opset.tanh(b), opset.tanh(b)], [x])


def bwd_output_transpose_mult_transposes(f, idx):
    x = x_param()
    b = op(f, x, c(SHAPE), idx)
    return model_of([opset.tanh(t(b)), opset.tanh(t(b))], [x])


def bwd_no_sinking_one(f, idx):
    x = x_param()
    b = op(f, opset.tanh(x), c(SHAPE), idx)
    return model_of([t(b), opset.tanh(b)], [x])


def bwd_no_sinking_many(f, idx):
    x = x_param()
    y = opset.tanh(x)
    for _ in range(10):
        y = op(f, y, c(SHAPE), idx)
    return model_of([t(y), opset.tanh(y)], [x])


MULTI = {
    "TSBinaryForwardMultiConsumers-forwardInputTransposeConsumers":
        (TSBinaryForward, fwd_input_transpose_consumers, fwd_input_transpose_consumers_ref),
    "TSBinaryForwardMultiConsumers-forwardOutputConsumers":
        (TSBinaryForward, fwd_output_consumers, fwd_output_consumers_ref),
    "TSBinaryForwardMultiConsumers-forwardInputNodeConsumers":
        (TSBinaryForward, fwd_input_node_consumers, fwd_input_node_consumers_ref),
    "TSBinaryBackwardMultiConsumers-backwardInputNodeConsumers":
        (TSBinaryBackward, bwd_input_node_consumers, bwd_input_node_consumers_ref),
    "TSBinaryBackwardMultiConsumers-backwardOutputTransposeMultConsumers":
        (TSBinaryBackward, bwd_output_transpose_mult_consumers, bwd_output_mult_ref),
    "TSBinaryBackwardMultiConsumers-outputTransposeMultTransposes":
        (TSBinaryBackward, bwd_output_transpose_mult_transposes, bwd_output_mult_ref),
    "TSBinaryBackwardBinaryMultiConsumers-backwardOutputConsumersOneBinary":
        (TSBinaryBackward, bwd_no_sinking_one, None),
    "TSBinaryBackwardBinaryMultiConsumers-backwardOutputConsumersMultipleBinaries":
        (TSBinaryBackward, bwd_no_sinking_many, None),
}


@pytest.mark.parametrize("suite, f, idx", [pytest.param(s, f, i, id=f"{s}-{f.name}-in{i}")
                                            for s in MULTI for f in BINARY for i in (0, 1)])
def test_multiple_consumers(suite, f, idx):
    pass_type, build, build_ref = MULTI[suite]
    check(build(f, idx), build_ref(f, idx) if build_ref else None, pass_type(), **FLAGS)


# -- PRelu slopes and a dynamic rank ----------------------------------------------------------
def _prelu_case(shape, slope_shape, unsqueeze_axes, order):
    x = x_param(shape)
    model = model_of([transpose(opset.prelu(x, c(slope_shape)), order, np.uint64)], [x])
    x2 = x_param(shape)
    slope = c(slope_shape)
    if unsqueeze_axes:
        slope = opset.unsqueeze(slope, opset.constant(np.array(unsqueeze_axes, np.int64)))
    ref = model_of([opset.prelu(transpose(x2, order, np.uint64), transpose(slope, order, np.uint64))], [x2])
    return model, ref


def test_backward_prelu_slope_special():
    check(*_prelu_case([2, 3, 5, 5], [3], [0, 2, 3], [0, 2, 3, 1]), TSBinaryBackward(), **FLAGS)


def test_backward_prelu_slope_not_special():
    check(*_prelu_case([2, 3, 5, 5], [5], [0, 1, 2], [0, 2, 3, 1]), TSBinaryBackward(), **FLAGS)


def test_backward_prelu_slope_special_rank1():
    check(*_prelu_case([5], [5], [], [0]), TSBinaryBackward(), **FLAGS)


def test_forward_dynamic():
    x = opset.parameter(None, np.float32)
    add = opset.add(opset.transpose(x, opset.constant(np.zeros([0], np.uint64))),
                    opset.constant(np.zeros([0], np.float32)))
    check(model_of([add], [x]), None, TSBinaryForward(), **FLAGS)
