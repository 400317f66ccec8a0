"""Ported from OpenVINO ``src/common/transformations/tests/transpose_sinking/ts_concat_test.cpp``:
TSConcatForward / TSConcatBackward on chains of 1 or 10 five-input Concats (the moving value on
input 0 or 2, Constants elsewhere), all inputs transposed, and branching consumers
(``TransformationTestsF``: constant values and attributes not compared)."""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import check, model_of, transpose

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import TSConcatBackward, TSConcatForward

SHAPE = [1, 96, 55, 55]
NHWC = [1, 55, 55, 96]
FLAGS = {"const_values": False, "attributes": False}
INPUTS = 5


def t(x, order=(0, 2, 3, 1)):
    return transpose(x, list(order), np.uint64)


def c(shape):
    return opset.constant(np.ones(shape, np.float32))


def chain(x, n, idx, cshape, axis, const_orders=()):
    """OpenVINO's CreateConcat{,Transposed,DoubleTransposed}Chain: ``n`` Concats, the running
    value at input ``idx``, Constants (transposed by ``const_orders`` in turn) elsewhere."""
    for _ in range(n):
        ins = []
        for j in range(INPUTS):
            if j == idx:
                ins.append(x)
            else:
                v = c(cshape)
                for order in const_orders:
                    v = t(v, order)
                ins.append(v)
        x = opset.concat(ins, axis)
    return x


def x_param():
    return opset.parameter(SHAPE, np.float32)


def fwd_one(n, idx):
    x = x_param()
    return model_of([chain(t(x), n, idx, NHWC, 1)], [x])


def fwd_one_ref(n, idx):
    x = x_param()
    return model_of([t(chain(x, n, idx, NHWC, 2, [(0, 3, 1, 2)]))], [x])


def fwd_double(n, idx):
    x = x_param()
    return model_of([chain(t(x), n, 0, SHAPE, 1, [(0, 2, 3, 1)])], [x])


def fwd_double_ref(n, idx):
    x = x_param()
    return model_of([t(chain(x, n, 0, SHAPE, 2, [(0, 2, 3, 1), (0, 3, 1, 2)]))], [x])


def bwd_one(n, idx):
    x = x_param()
    return model_of([t(chain(x, n, idx, SHAPE, 1))], [x])


def bwd_one_ref(n, idx):
    x = x_param()
    return model_of([chain(t(x), n, idx, SHAPE, 3, [(0, 2, 3, 1)])], [x])


def fwd_input_transpose_consumers(n, idx):
    x = x_param()
    t0 = t(x)
    return model_of([chain(t0, n, idx, NHWC, 1), opset.tanh(t0)], [x])


def fwd_input_transpose_consumers_ref(n, idx):
    x = x_param()
    return model_of([t(chain(x, n, idx, NHWC, 2, [(0, 3, 1, 2)])), opset.tanh(t(x))], [x])


def fwd_output_consumers(n, idx):
    x = x_param()
    y = chain(t(x), n, idx, NHWC, 1)
    return model_of([opset.tanh(y), opset.tanh(y)], [x])


def fwd_output_consumers_ref(n, idx):
    x = x_param()
    y = t(chain(x, n, idx, NHWC, 2, [(0, 3, 1, 2)]))
    return model_of([opset.tanh(y), opset.tanh(y)], [x])


def fwd_input_node_consumers(n, idx):
    x = x_param()
    return model_of([chain(t(x), n, idx, NHWC, 1), opset.tanh(x)], [x])


def fwd_input_node_consumers_ref(n, idx):
    x = x_param()
    return model_of([t(chain(x, n, idx, NHWC, 2, [(0, 3, 1, 2)])), opset.tanh(x)], [x])


def bwd_input_node_consumers(n, idx):
    x = x_param()
    tanh0 = opset.tanh(x)
    return model_of([t(chain(tanh0, n, idx, SHAPE, 1)), opset.tanh(tanh0)], [x])


def bwd_input_node_consumers_ref(n, idx):
    x = x_param()
    tanh0 = opset.tanh(x)
    return model_of([chain(t(tanh0), n, idx, SHAPE, 3, [(0, 2, 3, 1)]), opset.tanh(tanh0)], [x])


def bwd_output_transpose_mult_consumers(n, idx):
    x = x_param()
    t0 = t(chain(x, n, idx, SHAPE, 1))
    return model_of([opset.tanh(t0), opset.tanh(t0)], [x])


def bwd_output_mult_ref(n, idx):
    x = x_param()
    y = chain(t(x), n, idx, SHAPE, 3, [(0, 2, 3, 1)])
    return model_of([opset.tanh(y), opset.tanh(y)], [x])


def bwd_output_transpose_mult_transposes(n, idx):
    x = x_param()
    y = chain(x, n, idx, SHAPE, 1)
    return model_of([opset.tanh(t(y)), opset.tanh(t(y))], [x])


def bwd_no_sinking(n, idx):
    x = x_param()
    y = chain(opset.tanh(x), n, idx, SHAPE, 1)
    return model_of([t(y), opset.tanh(y)], [x])


SUITES = {
    "TSConcatForwardTestSuite": (TSConcatForward, fwd_one, fwd_one_ref, (0, 2)),
    "TSConcatBackwardTestSuite": (TSConcatBackward, bwd_one, bwd_one_ref, (0, 2)),
    "TSConcatForwardAllTransposesTestSuite": (TSConcatForward, fwd_double, fwd_double_ref, (0,)),
    "TSConcatForwardMultiConsumers-forwardInputTransposeConsumers":
        (TSConcatForward, fwd_input_transpose_consumers, fwd_input_transpose_consumers_ref, (0, 2)),
    "TSConcatForwardMultiConsumers-forwardOutputConsumers":
        (TSConcatForward, fwd_output_consumers, fwd_output_consumers_ref, (0, 2)),
    "TSConcatForwardMultiConsumers-forwardInputNodeConsumers":
        (TSConcatForward, fwd_input_node_consumers, fwd_input_node_consumers_ref, (0, 2)),
    "TSConcatBackwardMultiConsumers-backwardInputNodeConsumers":
        (TSConcatBackward, bwd_input_node_consumers, bwd_input_node_consumers_ref, (0, 2)),
    "TSConcatBackwardMultiConsumers-backwardOutputTransposeMultConsumers":
        (TSConcatBackward, bwd_output_transpose_mult_consumers, bwd_output_mult_ref, (0, 2)),
    "TSConcatBackwardMultiConsumers-outputTransposeMultTransposes":
        (TSConcatBackward, bwd_output_transpose_mult_transposes, bwd_output_mult_ref, (0, 2)),
    # backwardOutputConsumersOneBinary and ...MultipleBinaries build the same graph in OpenVINO
    "TSConcatBackwardNoSinking-backwardOutputConsumersOneBinary": (TSConcatBackward, bwd_no_sinking, None, (0, 2)),
    "TSConcatBackwardNoSinking-backwardOutputConsumersMultipleBinaries": (TSConcatBackward, bwd_no_sinking, None,
                                                                         (0, 2)),
}


@pytest.mark.parametrize("suite, n, idx", [pytest.param(s, n, i, id=f"{s}-x{n}-in{i}")
                                            for s, v in SUITES.items() for n in (1, 10) for i in v[3]])
def test_ts_concat(suite, n, idx):
    pass_type, build, build_ref, _ = SUITES[suite]
    check(build(n, idx), build_ref(n, idx) if build_ref else None, pass_type(), **FLAGS)
