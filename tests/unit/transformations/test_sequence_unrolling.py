"""LSTMSequenceUnrolling and GRUSequenceUnrolling (then the cell decompositions)."""
from __future__ import annotations

import numpy as np
import pytest

from netpass import opset
from netpass.ngraph_passes.common import (ConstantFolding, GRUCellDecomposition,
                                          GRUSequenceUnrolling, LSTMCellDecomposition,
                                          LSTMSequenceUnrolling)
from tr_helpers import count, model_of, param, rand, run, run_checked

B, T, I, H = 2, 3, 5, 4


def _lstm(direction, lens=None, x_shape=(B, T, I)):
    nd = 2 if direction == "bidirectional" else 1
    x = opset.parameter(list(x_shape), np.float32, "x")
    h, c = opset.constant(rand(B, nd, H, seed=5)), opset.constant(rand(B, nd, H, seed=6))
    seq = opset.lstm_sequence(x, h, c, opset.constant(np.array(lens or [T] * B, np.int32)),
                              opset.constant(rand(nd, 4 * H, I)), opset.constant(rand(nd, 4 * H, H, seed=1)),
                              opset.constant(rand(nd, 4 * H, seed=2)), H, direction, name="lstm")
    return model_of([seq.output(0), seq.output(1), seq.output(2)], x)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lstm_sequence_unrolled_and_decomposed(direction):
    m = _lstm(direction)
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
