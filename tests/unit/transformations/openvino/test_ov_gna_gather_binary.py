"""Ported from OpenVINO's GNA plugin (2023) ``gather_sinking_binary_test.cpp``:
GatherSinkingBinaryForward / Backward with the Gather on either input, on both, on inputs of
different ranks (broadcasting), and with branching consumers. Gathers are OpenVINO's
GatherForward (``iota`` shifted left by 2) and GatherBackward indices; only the graph
structure and shapes are compared (``TransformationTestsF``'s default comparator)."""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import check, model_of
from ts_factories import BINARY_ELEMENTWISE

from netpass import opset
from netpass.ngraph_passes.gna import (
    GatherSinkingBinaryBackward,
    GatherSinkingBinaryForward,
)

FLAGS = {"const_values": False, "attributes": False}
SHAPE = [1, 20]


def gather_forward(n):
    return np.roll(np.arange(n), -2)


def gather_backward(n):
    return np.roll(np.arange(n)[::-1], 2)


def gather(x, make, axis):
    n = x.output(0).partial_shape.to_shape()[axis]
    return opset.gather(x, opset.constant(make(n).astype(np.int64)), opset.constant(np.int64(axis)))


def c(shape):
    return opset.constant(np.ones(shape, np.float32))


def op(f, a, b, idx):
    return f.create([a, b] if idx == 0 else [b, a])


def fwd_one(f, n, idx):
    x = opset.parameter(SHAPE, np.float32)
    y = gather(x, gather_forward, 1)
    for _ in range(n):
        y = op(f, y, c(SHAPE), idx)
    return model_of([y], [x])


def fwd_one_ref(f, n, idx):
    x = opset.parameter(SHAPE, np.float32)
    y = x
    for _ in range(n):
        y = op(f, y, gather(c(SHAPE), gather_backward, 1), idx)
    return model_of([gather(y, gather_forward, 1)], [x])


def fwd_double(f, n, idx):
    x = opset.parameter(SHAPE, np.float32)
    y = gather(x, gather_forward, 1)
    for _ in range(n):
        y = f.create([y, gather(c(SHAPE), gather_forward, 1)])
    return model_of([y], [x])


def fwd_double_ref(f, n, idx):
    x = opset.parameter(SHAPE, np.float32)
    y = x
    for _ in range(n):
        y = f.create([y, gather(gather(c(SHAPE), gather_forward, 1), gather_backward, 1)])
    return model_of([gather(y, gather_forward, 1)], [x])


def bwd_one(f, n, idx):
    x = opset.parameter(SHAPE, np.float32)
    y = x
    for _ in range(n):
        y = op(f, y, c(SHAPE), idx)
    return model_of([gather(y, gather_forward, 1)], [x])


def bwd_one_ref(f, n, idx):
    x = opset.parameter(SHAPE, np.float32)
    y = gather(x, gather_forward, 1)
    for _ in range(n):
        y = op(f, y, gather(c(SHAPE), gather_forward, 1), idx)
    return model_of([y], [x])


SINGLE = []
for _f in BINARY_ELEMENTWISE:
    for _n in (1, 10):
        for _i in (0, 1):
            SINGLE.append(pytest.param(fwd_one, fwd_one_ref, GatherSinkingBinaryForward, _f, _n, _i,
                                       id=f"GatherSinkingBinaryForwardTestSuite-{_f.name}-x{_n}-in{_i}"))
            SINGLE.append(pytest.param(bwd_one, bwd_one_ref, GatherSinkingBinaryBackward, _f, _n, _i,
                                       id=f"GatherSinkingBinaryBackwardTestSuite-{_f.name}-x{_n}-in{_i}"))
        SINGLE.append(pytest.param(fwd_double, fwd_double_ref, GatherSinkingBinaryForward, _f, _n, 0,
                                   id=f"GatherSinkingBinaryTwoTransposeInputsForwardTestSuite-{_f.name}-x{_n}"))


@pytest.mark.parametrize("build, build_ref, pass_type, f, n, idx", SINGLE)
def test_single_consumer(build, build_ref, pass_type, f, n, idx):
    check(build(f, n, idx), build_ref(f, n, idx), pass_type(), **FLAGS)


# -- inputs of different ranks ----------------------------------------------------------------
SMALL, LARGE = [1, 20, 1], [5, 3, 20, 7]


def bwd_insert(f, idx):
    x = opset.parameter(SMALL, np.float32)
    return model_of([gather(op(f, x, c(LARGE), idx), gather_forward, 2)], [x])


def bwd_insert_ref(f, idx):
    x = opset.parameter(SMALL, np.float32)
    return model_of([op(f, gather(x, gather_forward, 1), gather(c(LARGE), gather_forward, 2), idx)], [x])


def bwd_no_insert(f, idx):
    x = opset.parameter(SMALL, np.float32)
    return model_of([gather(op(f, x, c(LARGE), idx), gather_forward, 0)], [x])


def bwd_no_insert_ref(f, idx):
    x = opset.parameter(SMALL, np.float32)
    return model_of([op(f, x, gather(c(LARGE), gather_forward, 0), idx)], [x])


def fwd_small_insert(f, idx):
    x = opset.parameter(SMALL, np.float32)
    return model_of([op(f, gather(c(LARGE), gather_forward, 2), x, idx)], [x])


def fwd_small_insert_ref(f, idx):
    x = opset.parameter(SMALL, np.float32)
    return model_of([gather(op(f, c(LARGE), gather(x, gather_backward, 1), idx), gather_forward, 2)], [x])


def fwd_small_no_insert(f, idx):
    x = opset.parameter(SMALL, np.float32)
    return model_of([op(f, gather(c(LARGE), gather_forward, 0), x, idx)], [x])


def fwd_small_no_insert_ref(f, idx):
    x = opset.parameter(SMALL, np.float32)
    return model_of([gather(op(f, c(LARGE), x, idx), gather_forward, 0)], [x])


def fwd_large_insert(f, idx):
    x = opset.parameter(LARGE, np.float32)
    return model_of([op(f, gather(c(SMALL), gather_forward, 1), x, idx)], [x])


def fwd_large_insert_ref(f, idx):
    x = opset.parameter(LARGE, np.float32)
    return model_of([gather(op(f, c(SMALL), gather(x, gather_backward, 2), idx), gather_forward, 2)], [x])


# -- several consumers ------------------------------------------------------------------------
def fwd_input_gather_consumers(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    g = gather(x, gather_forward, 1)
    return model_of([op(f, g, c(SHAPE), idx), opset.tanh(g)], [x])


def fwd_input_gather_consumers_ref(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    g = gather(x, gather_forward, 1)
    b = op(f, x, gather(c(SHAPE), gather_backward, 1), idx)
    return model_of([gather(b, gather_forward, 1), opset.tanh(g)], [x])


def fwd_output_consumers(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    b = op(f, gather(x, gather_forward, 1), c(SHAPE), idx)
    return model_of([opset.tanh(b), opset.tanh(b)], [x])


def fwd_output_consumers_ref(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    g = gather(op(f, x, gather(c(SHAPE), gather_backward, 1), idx), gather_forward, 1)
    return model_of([opset.tanh(g), opset.tanh(g)], [x])


def fwd_input_node_consumers(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    return model_of([op(f, gather(x, gather_forward, 1), c(SHAPE), idx), opset.tanh(x)], [x])


def fwd_input_node_consumers_ref(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    b = op(f, x, gather(c(SHAPE), gather_backward, 1), idx)
    return model_of([gather(b, gather_forward, 1), opset.tanh(x)], [x])


def bwd_input_node_consumers(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    tanh0 = opset.tanh(x)
    return model_of([gather(op(f, tanh0, c(SHAPE), idx), gather_forward, 1), opset.tanh(tanh0)], [x])


def bwd_input_node_consumers_ref(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    tanh0 = opset.tanh(x)
    b = op(f, gather(tanh0, gather_forward, 1), gather(c(SHAPE), gather_forward, 1), idx)
    return model_of([b, opset.tanh(tanh0)], [x])


def bwd_output_mult_consumers(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    g = gather(op(f, x, c(SHAPE), idx), gather_forward, 1)
    return model_of([opset.tanh(g), opset.tanh(g)], [x])


def bwd_output_mult_ref(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    b = op(f, gather(x, gather_forward, 1), gather(c(SHAPE), gather_forward, 1), idx)
    return model_of([opset.tanh(b), opset.tanh(b)], [x])


def bwd_output_mult_gathers(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    b = op(f, x, c(SHAPE), idx)
    return model_of([opset.tanh(gather(b, gather_forward, 1)), opset.tanh(gather(b, gather_forward, 1))], [x])


def bwd_no_sinking_one(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    b = op(f, opset.tanh(x), c(SHAPE), idx)
    return model_of([gather(b, gather_forward, 1), opset.tanh(b)], [x])


def bwd_no_sinking_many(f, idx):
    x = opset.parameter(SHAPE, np.float32)
    y = opset.tanh(x)
    for _ in range(10):
        y = op(f, y, c(SHAPE), idx)
    return model_of([gather(y, gather_forward, 1), opset.tanh(y)], [x])


CASES = {
    "IncompatShapesBackwardInsertGather": (GatherSinkingBinaryBackward, bwd_insert, bwd_insert_ref),
    "IncompatShapesBackwardNoGatherInsert": (GatherSinkingBinaryBackward, bwd_no_insert, bwd_no_insert_ref),
    "IncompatShapesGatherSmallInputForwardInsertGather":
        (GatherSinkingBinaryForward, fwd_small_insert, fwd_small_insert_ref),
    "IncompatShapesGatherSmallInputForwardNoGatherInsert":
        (GatherSinkingBinaryForward, fwd_small_no_insert, fwd_small_no_insert_ref),
    "IncompatShapesGatherLargeInputInsertGatherForward":
        (GatherSinkingBinaryForward, fwd_large_insert, fwd_large_insert_ref),
    "ForwardMultiConsumers-forwardInputTransposeConsumers":
        (GatherSinkingBinaryForward, fwd_input_gather_consumers, fwd_input_gather_consumers_ref),
    "ForwardMultiConsumers-forwardOutputConsumers":
        (GatherSinkingBinaryForward, fwd_output_consumers, fwd_output_consumers_ref),
    "ForwardMultiConsumers-forwardInputNodeConsumers":
        (GatherSinkingBinaryForward, fwd_input_node_consumers, fwd_input_node_consumers_ref),
    "BackwardMultiConsumers-backwardInputNodeConsumers":
        (GatherSinkingBinaryBackward, bwd_input_node_consumers, bwd_input_node_consumers_ref),
    "BackwardMultiConsumers-backwardOutputTransposeMultConsumers":
        (GatherSinkingBinaryBackward, bwd_output_mult_consumers, bwd_output_mult_ref),
    "BackwardMultiConsumers-outputTransposeMultTransposes":
        (GatherSinkingBinaryBackward, bwd_output_mult_gathers, bwd_output_mult_ref),
    "BackwardBinaryMultiConsumers-backwardOutputConsumersOneBinary":
        (GatherSinkingBinaryBackward, bwd_no_sinking_one, None),
    "BackwardBinaryMultiConsumers-backwardOutputConsumersMultipleBinaries":
        (GatherSinkingBinaryBackward, bwd_no_sinking_many, None),
}


@pytest.mark.parametrize("suite, f, idx", [pytest.param(s, f, i, id=f"{s}-{f.name}-in{i}")
                                            for s in CASES for f in BINARY_ELEMENTWISE for i in (0, 1)])
def test_gather_sinking_binary(suite, f, idx):
    pass_type, build, build_ref = CASES[suite]
    check(build(f, idx), build_ref(f, idx) if build_ref else None, pass_type(), **FLAGS)
