"""RNNCell and RNNSequence (ONNX RNN): the vanilla recurrence."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..base import set_name, to_output
from ..registry import onnx_export, onnx_rule
from .common import _COMMON_ATTRS, _attrs, _Cell, _Sequence
from .onnx_rules import _export_recurrent, _OnnxRecurrent

__all__ = ["rnn_cell", "rnn_sequence"]


class _RNNStep:
    GATES = 1
    STATES = 1
    DEFAULT_ACTIVATIONS = ["tanh"]

    def _step(self, x, states, w, r, b):
        (h,) = states
        (act,) = self._acts()
        return [act(self._clip(x @ w.T + h @ r.T + b))]


class RNNCell(_RNNStep, _Cell):
    """One vanilla RNN step: inputs (X, H, W, R, B), output H."""

    type_name = "RNNCell"
    version = "opset1"
    ATTRS = dict(_COMMON_ATTRS)


class RNNSequence(_RNNStep, _Sequence):
    """Vanilla RNN over a batch-first sequence: (X, H, sequence_lengths, W, R, B) -> (Y, Ho)."""

    type_name = "RNNSequence"
    version = "opset5"
    ATTRS = {**_COMMON_ATTRS, "direction": "forward"}


def rnn_cell(X: Any, initial_hidden_state: Any, W: Any, R: Any, B: Any, hidden_size: int,
             activations: Sequence[str] | None = None,
             activations_alpha: Sequence[float] | None = None,
             activations_beta: Sequence[float] | None = None, clip: float = 0.0,
             name: str | None = None) -> RNNCell:
    """RNNCell, one time step: ``H' = f(X @ W.T + H @ R.T + B)`` with ``X`` ``[batch, input]``,
    ``initial_hidden_state`` ``[batch, hidden]``, ``W`` ``[hidden, input]``, ``R`` ``[hidden,
    hidden]``, ``B`` ``[hidden]``; ``activations`` (default tanh), their alpha/beta and ``clip``."""
    ins = [to_output(v) for v in (X, initial_hidden_state, W, R, B)]
    return set_name(RNNCell(ins, **_attrs(hidden_size, activations, activations_alpha,
                                          activations_beta, clip)), name)


def rnn_sequence(X: Any, initial_hidden_state: Any, sequence_lengths: Any, W: Any, R: Any,
                 B: Any, hidden_size: int, direction: str,
                 activations: Sequence[str] | None = None,
                 activations_alpha: Sequence[float] | None = None,
                 activations_beta: Sequence[float] | None = None, clip: float = 0.0,
                 name: str | None = None) -> RNNSequence:
    """RNNSequence-5 over a batch-first sequence: shapes as :func:`gru_sequence` with one gate
    block; outputs Y ``[batch, dirs, seq, hidden]`` and the last hidden state."""
    ins = [to_output(v) for v in (X, initial_hidden_state, sequence_lengths, W, R, B)]
    return set_name(RNNSequence(ins, direction=direction.lower(),
                                **_attrs(hidden_size, activations, activations_alpha,
                                         activations_beta, clip)), name)


@onnx_rule("RNN", since=7)
def _import_rnn(ctx):
    t = _OnnxRecurrent(ctx, 1, 1, _RNNStep.DEFAULT_ACTIVATIONS)
    seq = RNNSequence([t.x, t.initial_state(5), t.sequence_lengths(), t.w, t.r, t.bias()],
                      hidden_size=t.hs, activations=t.acts, clip=t.clip, direction=t.direction)
    return t.outputs(seq, 1)


@onnx_export(RNNCell, RNNSequence)
def _export_rnn(node, ectx):
    _export_recurrent(node, ectx, "RNN", None)
