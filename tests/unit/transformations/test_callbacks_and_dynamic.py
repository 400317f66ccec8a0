"""Every sinking/rewrite pass: applies on a static 4-D graph, leaves the graph as it was when
the PassConfig callback refuses, and (passes that need static ranks) leaves a graph with a
dynamic-rank input untouched."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import assert_same_graph, model_of, run, run_checked, types

from netpass import opset
from netpass.ngraph_passes import transpose_sinking as ts
from netpass.ngraph_passes.common import (
    ConvertDivide,
    ConvertGlobalAvgPoolToReduceMean,
    SliceToStridedSlice,
)
from netpass.ngraph_passes.gna import (
    ConvertGatherToSlice,
    ConvertSteppedSliceToMatMul,
    ConvertStridedSliceToCrop,
    GatherSinkingSplitForward,
    GatherSinkingTransposeReshapeForward,
    SubstituteGNAGroupConvolution,
    TransposeCompress,
    TransposeMatMulForward,
)
from netpass.passes import PassConfig

T4 = [0, 2, 3, 1]


def c(*shape):
    return opset.constant(np.full(shape, 0.5, np.float32))


def _gather(x, indices, axis):
    return opset.gather(x, opset.constant(np.array(indices, np.int64)), opset.constant(np.int64(axis)))


# pass -> (graph builder taking the input Parameter, needs static rank)
CASES = {
    ts.TSUnaryForward: (lambda x: opset.relu(opset.transpose(x, T4)), False),
    ts.TSUnaryBackward: (lambda x: opset.transpose(opset.relu(x), T4), False),
    ts.TSBinaryForward: (lambda x: opset.add(opset.transpose(x, T4), c(1, 1, 1, 2)), True),
    ts.TSBinaryBackward: (lambda x: opset.transpose(opset.add(x, c(2, 1, 1)), T4), True),
    ts.TSConcatForward: (lambda x: opset.concat([opset.transpose(x, T4), opset.transpose(x, T4)], 1), True),
    ts.TSConcatBackward: (lambda x: opset.transpose(opset.concat([x, x], 1), T4), True),
    ts.TSSplitForward: (lambda x: opset.split(opset.transpose(x, T4), 3, 2).output(0), True),
    ts.TSDataMovementForward: (lambda x: opset.pad(opset.transpose(x, T4), [0, 1, 0, 0], [0, 0, 1, 0], "constant"), True),
    ts.TSDataMovementBackward: (lambda x: opset.transpose(opset.pad(x, [0, 1, 0, 0], [0, 0, 1, 0], "constant"), T4), True),
    ts.TSReductionForward: (lambda x: opset.reduce_sum(opset.transpose(x, T4), [1], False), True),
    ts.TSReductionBackward: (lambda x: opset.transpose(opset.reduce_sum(x, [1], True), T4), True),
    ts.TSUnsqueezeForward: (lambda x: opset.unsqueeze(opset.transpose(x, T4), [0]), True),
    ts.TSSliceForward: (lambda x: opset.slice(opset.transpose(x, T4), [1], [3], [1], [1]), True),
    ts.TSSliceBackward: (lambda x: opset.transpose(opset.slice(x, [1], [3], [1], [2]), T4), True),
    ts.TSFuse: (lambda x: opset.relu(opset.transpose(opset.transpose(x, T4), [0, 2, 1, 3])), False),
    ConvertDivide: (lambda x: opset.divide(x, c(1)), False),
    SliceToStridedSlice: (lambda x: opset.slice(x, [1], [3], [1], [-1]), True),
    TransposeCompress: (lambda x: opset.relu(opset.transpose(x, T4)), True),
    GatherSinkingTransposeReshapeForward: (lambda x: opset.reshape(opset.transpose(x, T4), [1, -1], False), True),
    ConvertGlobalAvgPoolToReduceMean: (lambda x: opset.avg_pool(x, [1, 1], [0, 0], [0, 0], [4, 16], True), True),
    SubstituteGNAGroupConvolution: (lambda x: opset.group_convolution(x, c(2, 1, 1, 3, 3), [1, 1], [1, 1], [1, 1],
                                                                      [1, 1]), True),
    ConvertSteppedSliceToMatMul: (lambda x: opset.slice(x, [0], [16], [2], [3]), True),
    ConvertGatherToSlice: (lambda x: _gather(x, [1, 2], 2), True),
    TransposeMatMulForward: (lambda x: opset.matmul(opset.transpose(x, [1, 0, 2, 3]), c(16, 3), False, False), True),
    GatherSinkingSplitForward: (lambda x: opset.split(_gather(x, [1, 0], 1), 2, 2).output(0), True),
}
SHAPE = [1, 2, 4, 16]


def _model(build, shape):
    x = opset.parameter(shape, np.float32, "x")
    return model_of(opset.relu(build(x)), x)


@pytest.mark.parametrize("pass_type", list(CASES), ids=lambda t: t.__name__)
def test_applies_on_static_graph(pass_type):
    m = _model(CASES[pass_type][0], SHAPE)
    before = types(m)
    run_checked(m, pass_type())
    assert types(m) != before


@pytest.mark.parametrize("pass_type", list(CASES), ids=lambda t: t.__name__)
def test_refusing_callback_leaves_graph(pass_type):
    m = _model(CASES[pass_type][0], SHAPE)
    ref = m.clone()
    config = PassConfig()
    config.set_callback(lambda node: True, pass_type)
    run(m, pass_type(), config=config)
    assert_same_graph(m, ref)


@pytest.mark.parametrize("pass_type", [t for t, (_, static) in CASES.items() if static], ids=lambda t: t.__name__)
def test_dynamic_rank_leaves_graph(pass_type):
    m = _model(CASES[pass_type][0], None)
    ref = m.clone()
    run(m, pass_type())
    assert_same_graph(m, ref)


def test_strided_slice_to_crop_callback():
    x = opset.parameter([2, 6], np.float32, "x")
    m = model_of(opset.relu(opset.strided_slice(x, [0, 1], [0, 4], [1, 1], [1, 0], [1, 0])), x)
    ref = m.clone()
    config = PassConfig()
    config.set_callback(lambda node: True, ConvertStridedSliceToCrop)
    run(m, ConvertStridedSliceToCrop(), config=config)
    assert_same_graph(m, ref)
