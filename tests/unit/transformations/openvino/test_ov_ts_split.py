"""Ported from OpenVINO ``src/common/transformations/tests/transpose_sinking/ts_split_test.cpp``:
TSSplitForward on chains of Splits (1 or 10, 2 or 3 outputs) with branching consumers,
TSSplitBackward on trees of Splits (depth 1 or 3), and the cases backward sinking must leave
alone (not every leaf transposed, or transposed differently)."""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import check, model_of, transpose

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import TSSplitBackward, TSSplitForward

FLAGS = {"const_values": False, "attributes": False}


def t(x, order=(0, 3, 1, 2)):
    return transpose(x, list(order), np.uint64)


def split(x, axis, n):
    return opset.split(x, opset.constant(np.uint64(axis)), n)


def x_param(n_ops, n_out):
    return opset.parameter([96, n_out ** (n_ops + 1), 55, 55], np.float32)


def split_chain(x, n_ops, n_out, axis, transpose_outputs):
    """Splits on ``axis``: every output but the last is a model output (transposed when asked),
    the last one is split again; returns (outputs, last)."""
    outs = []
    for _ in range(n_ops):
        s = split(x, axis, n_out)
        for i in range(n_out - 1):
            outs.append(t(s.output(i)) if transpose_outputs else s.output(i))
        x = s.output(n_out - 1)
    return outs, x


def fwd_single(n_ops, n_out):
    x = x_param(n_ops, n_out)
    outs, last = split_chain(t(x), n_ops, n_out, 2, False)
    return model_of(outs + [last], [x])


def fwd_single_ref(n_ops, n_out):
    x = x_param(n_ops, n_out)
    outs, last = split_chain(x, n_ops, n_out, 1, True)
    return model_of(outs + [t(last)], [x])


def fwd_input_node(n_ops, n_out):
    x = x_param(n_ops, n_out)
    tanh = opset.tanh(x)
    outs, last = split_chain(t(tanh), n_ops, n_out, 2, False)
    return model_of(outs + [last, opset.tanh(tanh)], [x])


def fwd_input_node_ref(n_ops, n_out):
    x = x_param(n_ops, n_out)
    tanh = opset.tanh(x)
    outs, last = split_chain(tanh, n_ops, n_out, 1, True)
    return model_of(outs + [t(last), opset.tanh(tanh)], [x])


def fwd_input_transpose(n_ops, n_out):
    x = x_param(n_ops, n_out)
    t0 = t(x)
    outs, last = split_chain(t0, n_ops, n_out, 2, False)
    return model_of(outs + [last, opset.tanh(t0)], [x])


def fwd_input_transpose_ref(n_ops, n_out):
    x = x_param(n_ops, n_out)
    outs, last = split_chain(x, n_ops, n_out, 1, True)
    return model_of(outs + [t(last), opset.tanh(t(x))], [x])


def fwd_output(n_ops, n_out):
    x = x_param(n_ops, n_out)
    outs, last = split_chain(t(x), n_ops, n_out, 2, False)
    return model_of(outs + [last, opset.tanh(last), opset.tanh(last)], [x])


def fwd_output_ref(n_ops, n_out):
    x = x_param(n_ops, n_out)
    outs, last = split_chain(x, n_ops, n_out, 1, True)
    t0 = t(last)
    return model_of(outs + [t0, opset.tanh(t0), opset.tanh(t0)], [x])


def split_tree(x, depth, n_out, axis):
    if depth == 0:
        return [x]
    s = split(x, axis, n_out)
    return [leaf for i in range(n_out) for leaf in split_tree(s.output(i), depth - 1, n_out, axis)]


def _reshape(v, depth, n_out):
    cur = n_out ** (depth + 1) // n_out ** depth
    return opset.reshape(v, opset.constant(np.array([96, 55, cur * 55], np.uint64)), False)


def bwd_single(depth, n_out):
    x = x_param(depth, n_out)
    tanh = opset.tanh(x)
    outs = [_reshape(t(leaf), depth, n_out) for leaf in split_tree(tanh, depth, n_out, 1)]
    return model_of(outs + [opset.tanh(tanh)], [x])


def bwd_single_ref(depth, n_out):
    x = x_param(depth, n_out)
    tanh = opset.tanh(x)
    outs = [_reshape(leaf, depth, n_out) for leaf in split_tree(t(tanh), depth, n_out, 2)]
    return model_of(outs + [opset.tanh(tanh)], [x])


def bwd_mult_output(depth, n_out):
    x = x_param(depth, n_out)
    outs = []
    for leaf in split_tree(x, depth, n_out, 1):
        t0 = t(leaf)
        outs += [opset.tanh(t0), opset.tanh(t0)]
    return model_of(outs, [x])


def bwd_mult_output_ref(depth, n_out):
    x = x_param(depth, n_out)
    outs = []
    for leaf in split_tree(t(x), depth, n_out, 2):
        outs += [opset.tanh(leaf), opset.tanh(leaf)]
    return model_of(outs, [x])


def bwd_mult_split(depth, n_out):
    x = x_param(depth, n_out)
    outs = []
    for leaf in split_tree(x, depth, n_out, 1):
        t(leaf)          # a Transpose nothing reads: not part of the model
        outs += [opset.tanh(leaf), opset.tanh(leaf)]
    return model_of(outs, [x])


SUITES = {
    "TSSplitForwardSingleConsumer": (TSSplitForward, fwd_single, fwd_single_ref, (1, 10)),
    "TSSplitForwardMultInputNodeConsumers": (TSSplitForward, fwd_input_node, fwd_input_node_ref, (1, 10)),
    "TSSplitForwardMultInputTransposeConsumers": (TSSplitForward, fwd_input_transpose, fwd_input_transpose_ref,
                                                  (1, 10)),
    "TSSplitForwardMultOutputConsumers": (TSSplitForward, fwd_output, fwd_output_ref, (1, 10)),
    "TSSplitBackward": (TSSplitBackward, bwd_single, bwd_single_ref, (1, 3)),
    "TSSplitBackwardMultOutputConsumers": (TSSplitBackward, bwd_mult_output, bwd_mult_output_ref, (1, 3)),
    "TSSplitBackwardMultSplitConsumers": (TSSplitBackward, bwd_mult_split, bwd_mult_split, (1, 3)),
}


@pytest.mark.parametrize("suite, n, n_out", [pytest.param(s, n, k, id=f"{s}-{n}-out{k}")
                                              for s, v in SUITES.items() for n in v[3] for k in (2, 3)])
def test_ts_split(suite, n, n_out):
    pass_type, build, build_ref, _ = SUITES[suite]
    check(build(n, n_out), build_ref(n, n_out), pass_type(), **FLAGS)


# -- backward restrictions: the model stays as it is ------------------------------------------
def only_first(leaves):
    return [t(leaves[0])] + leaves[1:]


def only_last(leaves):
    return [t(leaves[-1])] + leaves[:-1]


def _middle(leaves):
    return len(leaves) // 2 + len(leaves) % 2


def only_middle(leaves):
    mid = _middle(leaves)
    return [t(v) if i == mid else v for i, v in enumerate(leaves[:-1])]


def first_another(leaves):
    return [t(leaves[0], (0, 2, 3, 1))] + [t(v) for v in leaves[1:]]


def last_another(leaves):
    return [t(leaves[-1], (0, 2, 3, 1))] + [t(v) for v in leaves[:-1]]


def middle_another(leaves):
    mid = _middle(leaves)
    return [t(v, (0, 2, 3, 1)) if i == mid else t(v) for i, v in enumerate(leaves)]


@pytest.mark.parametrize("insert", [only_first, only_last, only_middle, first_another, last_another,
                                    middle_another], ids=lambda f: f.__name__)
def test_ts_split_backward_restrictions(insert):
    depth, n_out = 1, 5
    x = x_param(depth, n_out)
    leaves = split_tree(x, depth, n_out, 1)
    outs = [_reshape(v, depth, n_out) for v in insert(leaves)]
    check(model_of(outs, [x]), None, TSSplitBackward(), **FLAGS)
