"""Ported from OpenVINO ``src/common/transformations/tests/op_conversions/
rnn_cell_decomposition_clip_test.cpp`` (LSTMCellDecomposition, GRUCellDecomposition; netpass
has no RNNCell), checked structurally against the ``clip == 0`` decomposition and by value
against the cell's own evaluation.

Found and fixed: a ``clip`` of +inf (no clipping, as 0, per the cell specs) gave a
``Clamp(-inf, inf)``.
"""
from __future__ import annotations

import numpy as np
import pytest
from ov_values import port, port_by_value, run

from netpass import Model, opset
from netpass.errors import NetpassError
from netpass.ngraph_passes.common import GRUCellDecomposition, LSTMCellDecomposition

NOT_PORTED = {
    "RNNCell cases / RNNClipUtilsTest": "netpass has no RNNCell op nor classify_rnn_clip",
}
BATCH, INPUT, HIDDEN = 2, 3, 4


def _const(rows, cols, v):
    return opset.constant(np.full([rows, cols] if cols else [rows], v, np.float32))


def _gru(clip):
    x, h = opset.parameter([BATCH, INPUT], np.float32), opset.parameter([BATCH, HIDDEN],
                                                                         np.float32)
    cell = opset.gru_cell(x, h, _const(3 * HIDDEN, INPUT, 1), _const(3 * HIDDEN, HIDDEN, 1),
                          _const(3 * HIDDEN, 0, 0), HIDDEN, ["sigmoid", "tanh"], clip=clip)
    return Model([opset.result(o) for o in cell.outputs()], [x, h])


def _lstm(clip):
    x = opset.parameter([BATCH, INPUT], np.float32)
    h, c = (opset.parameter([BATCH, HIDDEN], np.float32) for _ in range(2))
    cell = opset.lstm_cell(x, h, c, _const(4 * HIDDEN, INPUT, 1), _const(4 * HIDDEN, HIDDEN, 1),
                           _const(4 * HIDDEN, 0, 0), HIDDEN, ["sigmoid", "tanh", "tanh"],
                           clip=clip)
    return Model([opset.result(o) for o in cell.outputs()], [x, h, c])


CELLS = {"GRUCell": (_gru, GRUCellDecomposition), "LSTMCell": (_lstm, LSTMCellDecomposition)}


def _clamps(model):
    return sum(n.type_name == "Clamp" for n in model.get_ordered_ops())


@pytest.mark.parametrize("cell", list(CELLS))
def test_clip_inf_decomposes_like_clip_zero(cell):
    make, decomposition = CELLS[cell]
    ref = run(make(0.0), decomposition())
    assert _clamps(ref) == 0
    port(make(float("inf")), ref, decomposition(), fold_constants=False, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cell", list(CELLS))
def test_finite_clip_inserts_clamp(cell):
    make, decomposition = CELLS[cell]
    model = port_by_value(make(3.5), decomposition(), gone=(cell,), rtol=1e-5, atol=1e-5)
    assert _clamps(model) > 0


@pytest.mark.parametrize("clip", [-1.0, -float("inf"), float("nan")])
@pytest.mark.parametrize("cell", list(CELLS))
def test_invalid_clip(cell, clip):
    """OpenVINO builds such a cell and its decomposition leaves it unclipped; netpass refuses
    the cell itself (marked: its shape inference requires ``clip >= 0``), naming it."""
    make, _ = CELLS[cell]
    with pytest.raises(NetpassError, match="clip must be >= 0"):
        make(clip)
