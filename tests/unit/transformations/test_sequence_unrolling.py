"""LSTMSequenceUnrolling and GRUSequenceUnrolling (then the cell decompositions)."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.common import (
    ConstantFolding,
    GRUCellDecomposition,
    GRUSequenceUnrolling,
    LSTMCellDecomposition,
    LSTMSequenceUnrolling,
)
from netpass.ngraph_passes.gna import GnaTransformationsPipeline, interior_layout_ops
from netpass.reference import infer

B, T, I, H = 2, 3, 5, 4


def _lstm(direction, lens=None, x_shape=(B, T, I), peepholes=False):
    nd = 2 if direction == "bidirectional" else 1
    x = opset.parameter(list(x_shape), np.float32, "x")
    h, c = opset.constant(rand(B, nd, H, seed=5)), opset.constant(rand(B, nd, H, seed=6))
    p = opset.constant(rand(nd, 3 * H, seed=7)) if peepholes else None
    seq = opset.lstm_sequence(x, h, c, opset.constant(np.array(lens or [T] * B, np.int32)),
                              opset.constant(rand(nd, 4 * H, I)), opset.constant(rand(nd, 4 * H, H, seed=1)),
                              opset.constant(rand(nd, 4 * H, seed=2)), H, direction, name="lstm",
                              peepholes=p)
    return model_of([seq.output(0), seq.output(1), seq.output(2)], x)


@pytest.mark.parametrize("direction,peepholes", [("forward", False), ("reverse", False),
                                                 ("bidirectional", False),
                                                 ("bidirectional", True)])
def test_lstm_sequence_unrolled_and_decomposed(direction, peepholes):
    m = _lstm(direction, peepholes=peepholes)
    run_checked(m, LSTMSequenceUnrolling(), LSTMCellDecomposition(), ConstantFolding())
    nd = 2 if direction == "bidirectional" else 1
    # one X·W and one H·R per step and direction; the first H·R has a constant H and folds
    assert count(m, "LSTMSequence", "LSTMCell") == 0 and count(m, "MatMul") == (2 * T - 1) * nd


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_gru_sequence(direction):
    nd = 2 if direction == "bidirectional" else 1
    x = param([B, T, I])
    seq = opset.gru_sequence(x, opset.constant(rand(B, nd, H)), opset.constant(np.array([T] * B, np.int64)),
                             opset.constant(rand(nd, 3 * H, I)), opset.constant(rand(nd, 3 * H, H, seed=1)),
                             opset.constant(rand(nd, 3 * H, seed=2)), H, direction)
    m = model_of([seq.output(0), seq.output(1)], x)
    run_checked(m, GRUSequenceUnrolling(), GRUCellDecomposition())
    assert count(m, "GRUSequence", "GRUCell") == 0


def test_shorter_sequence_lengths_stay():
    m = _lstm("forward", lens=[T, 1])
    run(m, LSTMSequenceUnrolling())
    assert count(m, "LSTMSequence") == 1


def test_dynamic_sequence_length_stays():
    m = _lstm("forward", x_shape=(B, -1, I))
    run(m, LSTMSequenceUnrolling())
    assert count(m, "LSTMSequence") == 1


def test_single_step_sequence():
    x = param([B, 1, I])
    seq = opset.lstm_sequence(x, opset.constant(rand(B, 1, H)), opset.constant(rand(B, 1, H)),
                              opset.constant(np.array([1] * B, np.int32)), opset.constant(rand(1, 4 * H, I)),
                              opset.constant(rand(1, 4 * H, H)), opset.constant(rand(1, 4 * H)), H, "forward")
    m = model_of([seq.output(0), seq.output(1), seq.output(2)], x)
    run_checked(m, LSTMSequenceUnrolling(), LSTMCellDecomposition())
    assert count(m, "LSTMSequence", "LSTMCell") == 0


def _concat_axes(m) -> list[tuple[int, tuple]]:
    return [(n.axis, tuple(n.input_value(0).shape)) for n in m.get_ordered_ops() if n.type_name == "Concat"]


def test_bidirectional_y_is_built_from_whole_rows():
    """Y is assembled time-major: per step the directions side by side ([B, 2H], axis 1 of
    [B, H] states), then the steps stacked on axis 0 (zoo finding F5)."""
    m = _lstm("bidirectional")
    run_checked(m, LSTMSequenceUnrolling(), LSTMCellDecomposition())
    y_concats = [(axis, shape) for axis, shape in _concat_axes(m) if len(shape) == 2]
    assert sorted(y_concats) == [(0, (B, 2 * H))] + [(1, (B, H))] * T


def test_dynamic_batch_is_unrolled():
    """The time-major Y is reshaped with -1 for the batch, so a dynamic batch unrolls."""
    x = opset.parameter([-1, T, I], np.float32, "x")
    batch = opset.gather(opset.shape_of(x), opset.constant(np.int64([0])), opset.constant(np.int64(0)))
    h0 = opset.broadcast(opset.constant(rand(1, 1, H)), opset.concat([batch, opset.constant(np.int64([1, H]))], 0))
    seq = opset.gru_sequence(x, h0,
                             opset.constant(np.array([T], np.int64)),
                             opset.constant(rand(1, 3 * H, I)), opset.constant(rand(1, 3 * H, H, seed=1)),
                             opset.constant(rand(1, 3 * H, seed=2)), H, "forward")
    m = model_of(seq.output(0), x)
    original = m.clone()
    run(m, GRUSequenceUnrolling(), GRUCellDecomposition())
    assert count(m, "GRUSequence", "GRUCell") == 0
    feeds = {"x": rand(3, T, I, seed=9)}
    np.testing.assert_allclose(infer(m, feeds)["out0"], infer(original, feeds)["out0"], rtol=1e-5, atol=1e-6)


def _onnx_bilstm_stack(t: int, b: int, i: int, h: int, batch_first: bool):
    """Two bidirectional LSTMs wired as torch exports and netpass imports them: X [T, B, I]
    -> Transpose to batch-major -> LSTMSequence -> Y [B, 2, T, H] -> Transpose to ONNX's
    [T, 2, B, H] -> the exporter's Transpose(0, 2, 1, 3) + Reshape [T, B, 2H] -> next layer;
    a Linear head on the last Y. ``batch_first``: the input is [B, T, I] and the exporter
    transposes it to time-major and the last Y back to [B, T, 2H]."""
    x = param([b, t, i] if batch_first else [t, b, i])
    value, width = (opset.transpose(x, [1, 0, 2]) if batch_first else x), i
    for layer in range(2):
        xb = opset.transpose(value, [1, 0, 2])
        zeros = opset.constant(np.zeros((b, 2, h), np.float32))
        seq = opset.lstm_sequence(xb, zeros, zeros, opset.constant(np.array([t] * b, np.int32)),
                                  opset.constant(rand(2, 4 * h, width, seed=10 + layer)),
                                  opset.constant(rand(2, 4 * h, h, seed=20 + layer)),
                                  opset.constant(rand(2, 4 * h, seed=30 + layer)), h, "bidirectional")
        y = opset.transpose(opset.transpose(seq.output(0), [2, 1, 0, 3]), [0, 2, 1, 3])
        value, width = opset.reshape(y, [t, b, 2 * h], False), 2 * h
    if batch_first:
        value = opset.transpose(value, [1, 0, 2])
    head = opset.add(opset.matmul(value, opset.constant(rand(2 * h, 3, seed=40)), False, False),
                     opset.constant(rand(3, seed=41)))
    return model_of(head, x)


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("batch_first", [False, True])
def test_bidirectional_stack_leaves_no_layout_op_inside(batch, batch_first):
    """After the GNA pipeline no Transpose GNA cannot run and no Gather is left between the
    layers or before the head (a batch-first head's reorder goes to the Result)."""
    m = _onnx_bilstm_stack(4, batch, 6, 5, batch_first)
    run_checked(m, GnaTransformationsPipeline(), rtol=1e-4, atol=1e-5)
    assert count(m, "LSTMSequence", "LSTMCell") == 0
    assert not interior_layout_ops(m)
