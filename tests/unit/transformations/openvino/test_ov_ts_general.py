"""Ported from OpenVINO ``src/common/transformations/tests/transpose_sinking/ts_general_test.cpp``:
TSGeneralForward / TSGeneralBackward / TSGeneral on chains of unary, binary, Concat and Split
ops, the no-sinking marks and the names the backward pass keeps."""
from __future__ import annotations

import numpy as np
from ov_port import check, model_of, transpose

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import (
    TSGeneral,
    TSGeneralBackward,
    TSGeneralForward,
    mark_as_no_sinking,
)
from netpass.passes import Manager

SHAPE = [1, 96, 55, 55]


def u64_transpose(x, order):
    return transpose(x, order, np.uint64)


def _unary_pairs(num=10):
    x = opset.parameter(SHAPE, np.float32)
    y = x
    for _ in range(num):
        y = u64_transpose(opset.tanh(u64_transpose(y, [0, 2, 3, 1])), [0, 3, 1, 2])
    return model_of([y], [x])


def _tanh_chain(num=10, transpose_after=False):
    x = opset.parameter(SHAPE, np.float32)
    y = x
    for _ in range(num):
        y = opset.tanh(y)
    if transpose_after:
        y = u64_transpose(y, [0, 2, 3, 1])
    return model_of([y], [x])


def test_unaries_transposes_forward():
    check(_unary_pairs(), _tanh_chain(), TSGeneralForward())


def test_unaries_transposes_backward():
    check(_unary_pairs(), _tanh_chain(), TSGeneralBackward())


def test_unaries_transposes_general():
    """X -> Transpose -> 10 x {Transpose, Tanh, Transpose}: the Transpose ends at the output
    (forward sinking marks the one it left before the Result, so backward keeps it there)."""
    x = opset.parameter(SHAPE, np.float32)
    y = u64_transpose(x, [0, 2, 3, 1])
    for _ in range(10):
        y = u64_transpose(opset.tanh(u64_transpose(y, [0, 2, 3, 1])), [0, 3, 1, 2])
    check(model_of([y], [x]), _tanh_chain(transpose_after=True), TSGeneral())


def test_binary_general():
    x = opset.parameter(SHAPE, np.float32)
    y = u64_transpose(x, [0, 2, 3, 1])
    for _ in range(10):
        y = opset.add(y, u64_transpose(opset.constant(np.ones(SHAPE, np.float32)), [0, 2, 3, 1]))
    x2 = opset.parameter(SHAPE, np.float32)
    r = x2
    for _ in range(10):
        r = opset.add(r, opset.constant(np.ones(SHAPE, np.float32)))
    check(model_of([y], [x]), model_of([u64_transpose(r, [0, 2, 3, 1])], [x2]), TSGeneral())


def test_concat_general():
    x = opset.parameter(SHAPE, np.float32)
    y = u64_transpose(x, [0, 2, 3, 1])
    for _ in range(3):
        c = u64_transpose(opset.constant(np.ones(SHAPE, np.float32)), [0, 2, 3, 1])
        y = opset.concat([y, c], 1)
    x2 = opset.parameter(SHAPE, np.float32)
    r = x2
    for _ in range(3):
        r = opset.concat([r, opset.constant(np.ones(SHAPE, np.float32))], 2)
    check(model_of([y], [x]), model_of([u64_transpose(r, [0, 2, 3, 1])], [x2]), TSGeneral())


# -- TSGeneralTestMultipleTypes: pairs of Unary (Sinh), Split and Concat nodes ------------------
class _Unary:
    inputs = outputs = 1

    @staticmethod
    def create(values, split_axis, concat_axis):
        return opset.sinh(values[0])


class _Split:
    inputs, outputs = 1, 2

    @staticmethod
    def create(values, split_axis, concat_axis):
        return opset.split(values[0], opset.constant(np.uint64(split_axis)), 2)


class _Concat:
    inputs, outputs = 2, 1

    @staticmethod
    def create(values, split_axis, concat_axis):
        return opset.concat(list(values), concat_axis)


def _node_pair(first, second, parent, split_axis, concat_axis):
    node = parent
    if first.inputs != 1:
        node = _Split.create(node.outputs(), split_axis, concat_axis)
    node = first.create(node.outputs(), split_axis, concat_axis)
    if first.outputs < second.inputs:
        node = _Split.create(node.outputs(), split_axis, concat_axis)
    elif first.outputs > second.inputs:
        node = _Concat.create(node.outputs(), split_axis, concat_axis)
    out = second.create(node.outputs(), split_axis, concat_axis)
    if out.get_output_size() > 1:
        out = _Concat.create(out.outputs(), split_axis, concat_axis)
    return out


def _all_nodes_subgraph(parent, split_axis, concat_axis):
    node = parent
    for first in (_Unary, _Split, _Concat):
        for second in (_Unary, _Split, _Concat):
            node = _node_pair(first, second, node, split_axis, concat_axis)
    return node


def test_multiple_types():
    shape = [1, 96, 40, 55]

    def build(ref):
        x = opset.parameter(shape, np.float32)
        node0 = _all_nodes_subgraph(x, 1, 1)
        t0 = u64_transpose(node0, [0, 2, 3, 1])
        reshape = opset.reshape(t0, opset.constant(np.array([1, 40, 55, 96], np.uint64)), False)
        if ref:
            out = u64_transpose(_all_nodes_subgraph(reshape, 3, 3), [0, 3, 1, 2])
        else:
            out = _all_nodes_subgraph(u64_transpose(reshape, [0, 3, 1, 2]), 1, 1)
        return model_of([out], [x])
    check(build(False), build(True), TSGeneral(), result_names=False)


def test_check_shape_of_const_folding_disabled():
    x = opset.parameter([96, 40, 55], np.float32)
    shape = opset.parameter([1, 96, 40, 55], np.float32)
    t = u64_transpose(x, [0, 2, 1])
    reshape = opset.reshape(t, opset.shape_of(shape), False)
    out = u64_transpose(reshape, [0, 3, 1, 2])
    check(model_of([out], [x, shape]), None, TSGeneral())


def test_backward_sinking_not_available_for_one_of_multiple_transposes():
    x = opset.parameter([96, 40, 55], np.float32)
    relu = opset.relu(x)
    t = u64_transpose(relu, [0, 2, 1])
    mark_as_no_sinking(t)
    t2 = u64_transpose(relu, [0, 2, 1])
    check(model_of([opset.relu(t), t2], [x]), None, TSGeneralBackward())


def test_backward_check_friendly_and_tensor_names_for_multiple_transposes():
    x = opset.parameter([96, 40, 55], np.float32)
    relu = opset.relu(x)
    relu.friendly_name = "relu"
    relu.output(0).names.update({"relu:0"})
    t1 = u64_transpose(relu, [0, 2, 1])
    t1.friendly_name = "transpose_1"
    t1.output(0).names.update({"transpose_1:0"})
    t2 = u64_transpose(relu, [0, 2, 1])
    t2.friendly_name = "transpose_2"
    t2.output(0).names.update({"transpose_2:0"})
    model = model_of([t1, t2], [x])
    manager = Manager()
    manager.register_pass(TSGeneralBackward())
    manager.run_passes(model)
    assert sum(n.type_name == "Transpose" for n in model.get_ordered_ops()) == 1
    assert relu.friendly_name in ("transpose_1", "transpose_2")
    assert {"relu:0", "transpose_1:0", "transpose_2:0"} <= relu.output(0).names


# -- ts_reset_no_sinking_attribute.cpp --------------------------------------------------------
def test_reset_no_sinking_attribute():
    from netpass.ngraph_passes.transpose_sinking import (
        NO_SINKING,
        TSResetNoSinkingAttribute,
    )
    a = opset.parameter([12, 3, 4, 8], np.float32)
    b = opset.parameter([12, 3, 4, 8], np.float32)
    ta = transpose(a, [1, 0, 2, 3], np.int64)
    tb = transpose(b, [1, 0, 2, 3], np.int64)
    after = transpose(opset.add(ta, tb), [1, 0, 2, 3], np.int64)
    model = model_of([after], [a, b])
    for n in (ta, tb, after):
        mark_as_no_sinking(n)
    ops = model.get_ordered_ops()
    assert sum(NO_SINKING in n.rt_info for n in ops) == 3
    manager = Manager()
    manager.register_pass(TSResetNoSinkingAttribute())
    manager.run_passes(model)
    assert sum(NO_SINKING in n.rt_info for n in ops) == 0
