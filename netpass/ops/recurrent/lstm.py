"""LSTMCell and LSTMSequence (ONNX LSTM): gates f, i, c, o."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..base import set_name, to_output
from ..registry import onnx_export, onnx_rule
from .common import _COMMON_ATTRS, _attrs, _Cell, _Sequence
from .onnx_rules import (
    _LSTM_FROM_ONNX,
    _LSTM_TO_ONNX,
    _export_recurrent,
    _OnnxRecurrent,
    _reorder_blocks,
)

__all__ = ["lstm_cell", "lstm_sequence"]


class _LSTMStep:
    GATES = 4
    STATES = 2
    DEFAULT_ACTIVATIONS = ["sigmoid", "tanh", "tanh"]

    def _step(self, x, states, w, r, b):
        h, c = states
        f_act, g_act, h_act = self._acts()
        gates = self._clip(x @ w.T + h @ r.T + b)
        f, i, g, o = np.split(gates, 4, axis=-1)
        c_new = f_act(f) * c + f_act(i) * g_act(g)
        h_new = f_act(o) * h_act(c_new)
        return [h_new, c_new]


class LSTMCell(_LSTMStep, _Cell):
    """One LSTM step: inputs (X, H, C, W, R, B), outputs (H, C); gates f, i, c, o."""

    type_name = "LSTMCell"
    version = "opset4"
    ATTRS = dict(_COMMON_ATTRS)


class LSTMSequence(_LSTMStep, _Sequence):
    """LSTM over a batch-first sequence: (X, H, C, sequence_lengths, W, R, B) -> (Y, Ho, Co)."""

    type_name = "LSTMSequence"
    version = "opset5"
    ATTRS = {**_COMMON_ATTRS, "direction": "forward"}


def lstm_cell(X: Any, initial_hidden_state: Any, initial_cell_state: Any, W: Any, R: Any, B: Any,
              hidden_size: int, activations: Sequence[str] | None = None,
              activations_alpha: Sequence[float] | None = None,
              activations_beta: Sequence[float] | None = None, clip: float = 0.0,
              name: str | None = None) -> LSTMCell:
    """LSTMCell-4, one time step: ``X`` ``[batch, input]``, ``initial_hidden_state`` and
    ``initial_cell_state`` ``[batch, hidden]``, ``W`` ``[4 * hidden, input]``, ``R`` ``[4 * hidden,
    hidden]``, ``B`` ``[4 * hidden]``; gates f, i, c, o (OpenVINO's order). ``activations`` (default
    sigmoid, tanh, tanh), their alpha/beta and ``clip`` as OpenVINO's. Outputs: hidden and cell
    states."""
    ins = [to_output(v) for v in (X, initial_hidden_state, initial_cell_state, W, R, B)]
    return set_name(LSTMCell(ins, **_attrs(hidden_size, activations, activations_alpha,
                                           activations_beta, clip)), name)


def lstm_sequence(X: Any, initial_hidden_state: Any, initial_cell_state: Any,
                  sequence_lengths: Any, W: Any, R: Any, B: Any, hidden_size: int,
                  direction: str, activations: Sequence[str] | None = None,
                  activations_alpha: Sequence[float] | None = None,
                  activations_beta: Sequence[float] | None = None, clip: float = 0.0,
                  name: str | None = None) -> LSTMSequence:
    """LSTMSequence-5 over a batch-first sequence: ``X`` ``[batch, seq, input]``, hidden and cell
    states ``[batch, dirs, hidden]``, ``sequence_lengths`` ``[batch]``, ``W`` ``[dirs, 4 * hidden,
    input]``, ``R`` ``[dirs, 4 * hidden, hidden]``, ``B`` ``[dirs, 4 * hidden]``; ``direction``
    "forward", "reverse" or "bidirectional". Outputs Y ``[batch, dirs, seq, hidden]`` and the last
    hidden and cell states."""
    ins = [to_output(v) for v in (X, initial_hidden_state, initial_cell_state, sequence_lengths,
                                  W, R, B)]
    return set_name(LSTMSequence(ins, direction=direction.lower(),
                                 **_attrs(hidden_size, activations, activations_alpha,
                                          activations_beta, clip)), name)


def _refuse_peepholes(ctx: Any) -> None:
    p = ctx.input(7)
    if p is None:
        return
    if p.value is None or np.any(p.value != 0):
        ctx.error("peephole weights (input P) are not supported")


@onnx_rule("LSTM", since=7)
def _import_lstm(ctx):
    if ctx.attr("input_forget", 0):
        ctx.error("input_forget=1 is not supported")
    _refuse_peepholes(ctx)
    t = _OnnxRecurrent(ctx, 4, 3, _LSTMStep.DEFAULT_ACTIVATIONS)
    seq = LSTMSequence(
        [t.x, t.initial_state(5), t.initial_state(6), t.sequence_lengths(),
         _reorder_blocks(t.w, _LSTM_FROM_ONNX, 1), _reorder_blocks(t.r, _LSTM_FROM_ONNX, 1),
         t.bias(order=_LSTM_FROM_ONNX)],
        hidden_size=t.hs, activations=t.acts, clip=t.clip, direction=t.direction)
    return t.outputs(seq, 2)


@onnx_export(LSTMCell, LSTMSequence)
def _export_lstm(node, ectx):
    _export_recurrent(node, ectx, "LSTM", _LSTM_TO_ONNX)
