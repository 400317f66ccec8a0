"""LSTMCell and LSTMSequence (ONNX LSTM): gates f, i, c, o.

Peephole weights are an optional last input P (``[3 * hidden]`` per direction) in ONNX's
and OpenVINO opset1's order i, o, f; they add ``P * C`` to the input and forget gates (the
previous cell state) and to the output gate (the new one), before the clip."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.node import OP_TYPES
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
    PEEPHOLES = 3
    DEFAULT_ACTIVATIONS = ["sigmoid", "tanh", "tanh"]

    def _step(self, x, states, w, r, b, p=None):
        h, c = states
        f_act, g_act, h_act = self._acts()
        f, i, g, o = np.split(x @ w.T + h @ r.T + b, 4, axis=-1)
        if p is not None:
            p_i, p_o, p_f = np.split(p, 3, axis=-1)
            f, i = f + p_f * c, i + p_i * c
        c_new = f_act(self._clip(f)) * c + f_act(self._clip(i)) * g_act(self._clip(g))
        if p is not None:
            o = o + p_o * c_new
        h_new = f_act(self._clip(o)) * h_act(c_new)
        return [h_new, c_new]


class LSTMCell(_LSTMStep, _Cell):
    """One LSTM step: inputs (X, H, C, W, R, B[, P]), outputs (H, C); gates f, i, c, o."""

    type_name = "LSTMCell"
    version = "opset4"
    ATTRS = dict(_COMMON_ATTRS)


class LSTMCell1(LSTMCell):
    """LSTMCell v0 (opset1): v4's step with the optional peepholes P (input 6) and the
    attributes ``input_forget`` (only false: coupled input and forget gates are not
    implemented) and ``weights_format`` (only OpenVINO's "fico", v4's gate order)."""

    type_name = "LSTMCell"
    version = "opset1"
    ATTRS = {**_COMMON_ATTRS, "input_forget": False, "weights_format": "fico"}

    def infer_types(self) -> None:
        self.check(not self.input_forget, "input_forget=true is not implemented")
        self.check(str(self.weights_format).lower() == "fico",
                   "weights_format '{}' is not implemented (only fico)", self.weights_format)
        super().infer_types()


# The newer version stays the class ``netpass.ops.LSTMCell`` names; IR reading picks the exact
# version by (type, opset).
OP_TYPES["LSTMCell"] = LSTMCell


class LSTMSequence(_LSTMStep, _Sequence):
    """LSTM over a batch-first sequence: (X, H, C, sequence_lengths, W, R, B[, P]) ->
    (Y, Ho, Co)."""

    type_name = "LSTMSequence"
    version = "opset5"
    ATTRS = {**_COMMON_ATTRS, "direction": "forward"}


def lstm_cell(X: Any, initial_hidden_state: Any, initial_cell_state: Any, W: Any, R: Any, B: Any,
              hidden_size: int, activations: Sequence[str] | None = None,
              activations_alpha: Sequence[float] | None = None,
              activations_beta: Sequence[float] | None = None, clip: float = 0.0,
              name: str | None = None, peepholes: Any = None) -> LSTMCell:
    """LSTMCell-4, one time step: ``X`` ``[batch, input]``, ``initial_hidden_state`` and
    ``initial_cell_state`` ``[batch, hidden]``, ``W`` ``[4 * hidden, input]``, ``R`` ``[4 * hidden,
    hidden]``, ``B`` ``[4 * hidden]``; gates f, i, c, o (OpenVINO's order). ``activations`` (default
    sigmoid, tanh, tanh), their alpha/beta and ``clip`` as OpenVINO's; ``peepholes`` ``[3 *
    hidden]`` (order i, o, f) when given. Outputs: hidden and cell states."""
    ins = [to_output(v) for v in (X, initial_hidden_state, initial_cell_state, W, R, B)
           + ((peepholes,) if peepholes is not None else ())]
    return set_name(LSTMCell(ins, **_attrs(hidden_size, activations, activations_alpha,
                                           activations_beta, clip)), name)


def lstm_sequence(X: Any, initial_hidden_state: Any, initial_cell_state: Any,
                  sequence_lengths: Any, W: Any, R: Any, B: Any, hidden_size: int,
                  direction: str, activations: Sequence[str] | None = None,
                  activations_alpha: Sequence[float] | None = None,
                  activations_beta: Sequence[float] | None = None, clip: float = 0.0,
                  name: str | None = None, peepholes: Any = None) -> LSTMSequence:
    """LSTMSequence-5 over a batch-first sequence: ``X`` ``[batch, seq, input]``, hidden and cell
    states ``[batch, dirs, hidden]``, ``sequence_lengths`` ``[batch]``, ``W`` ``[dirs, 4 * hidden,
    input]``, ``R`` ``[dirs, 4 * hidden, hidden]``, ``B`` ``[dirs, 4 * hidden]``; ``direction``
    "forward", "reverse" or "bidirectional"; ``peepholes`` ``[dirs, 3 * hidden]`` (order i, o,
    f) when given. Outputs Y ``[batch, dirs, seq, hidden]`` and the last hidden and cell
    states."""
    ins = [to_output(v) for v in (X, initial_hidden_state, initial_cell_state, sequence_lengths,
                                  W, R, B) + ((peepholes,) if peepholes is not None else ())]
    return set_name(LSTMSequence(ins, direction=direction.lower(),
                                 **_attrs(hidden_size, activations, activations_alpha,
                                          activations_beta, clip)), name)


def _peepholes(ctx: Any) -> list:
    """ONNX's P (already [nd, 3*hs], order i, o, f), or nothing when it is absent or a constant
    of zeros (which changes nothing, and the op without P has more lowerings)."""
    p = ctx.input(7)
    if p is None or (p.value is not None and not np.any(p.value)):
        return []
    return [p]


@onnx_rule("LSTM", since=7)
def _import_lstm(ctx):
    if ctx.attr("input_forget", 0):
        ctx.error("input_forget=1 is not supported")
    t = _OnnxRecurrent(ctx, 4, 3, _LSTMStep.DEFAULT_ACTIVATIONS)
    seq = LSTMSequence(
        [t.x, t.initial_state(5), t.initial_state(6), t.sequence_lengths(),
         _reorder_blocks(t.w, _LSTM_FROM_ONNX, 1), _reorder_blocks(t.r, _LSTM_FROM_ONNX, 1),
         t.bias(order=_LSTM_FROM_ONNX), *_peepholes(ctx)],
        hidden_size=t.hs, activations=t.acts, clip=t.clip, direction=t.direction)
    return t.outputs(seq, 2)


@onnx_export(LSTMCell, LSTMSequence)
def _export_lstm(node, ectx):
    _export_recurrent(node, ectx, "LSTM", _LSTM_TO_ONNX)
