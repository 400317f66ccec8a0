"""LSTMCellDecomposition and GRUCellDecomposition."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import count, model_of, param, rand, run_checked

from netpass import opset
from netpass.ngraph_passes.common import GRUCellDecomposition, LSTMCellDecomposition

B, I, H = 2, 5, 4


@pytest.mark.parametrize("clip,peepholes", [(0.0, False), (0.7, False), (0.0, True), (0.7, True)])
def test_lstm_cell(clip, peepholes):
    x, h, c = param([B, I], "x"), param([B, H], "h"), param([B, H], "c")
    p = opset.constant(rand(3 * H, seed=3)) if peepholes else None
    cell = opset.lstm_cell(x, h, c, opset.constant(rand(4 * H, I)), opset.constant(rand(4 * H, H, seed=1)),
                           opset.constant(rand(4 * H, seed=2)), H, clip=clip, name="cell",
                           peepholes=p)
    m = model_of([cell.output(0), cell.output(1)], [x, h, c])
    run_checked(m, LSTMCellDecomposition())
    assert count(m, "LSTMCell") == 0 and count(m, "Split") == 1 + peepholes
    assert [r.input_value(0).node.friendly_name for r in m.results] == ["cell.0", "cell.1"]


@pytest.mark.parametrize("lbr", [False, True])
def test_gru_cell(lbr):
    x, h = param([B, I], "x"), param([B, H], "h")
    cell = opset.gru_cell(x, h, opset.constant(rand(3 * H, I)), opset.constant(rand(3 * H, H, seed=1)),
                          opset.constant(rand((4 if lbr else 3) * H, seed=2)), H,
                          linear_before_reset=lbr, name="g")
    m = model_of(cell, [x, h])
    run_checked(m, GRUCellDecomposition())
    assert count(m, "GRUCell") == 0
    assert m.results[0].input_value(0).node.friendly_name == "g.0"


def test_lstm_cell_dynamic_batch():
    x, h, c = (opset.parameter([-1, n], np.float32, k) for k, n in (("x", I), ("h", H), ("c", H)))
    cell = opset.lstm_cell(x, h, c, opset.constant(rand(4 * H, I)), opset.constant(rand(4 * H, H)),
                           opset.constant(rand(4 * H)), H)
    m = model_of([cell.output(0), cell.output(1)], [x, h, c])
    run_checked(m, LSTMCellDecomposition())
    assert count(m, "LSTMCell") == 0
