"""GRUCell and GRUSequence (ONNX GRU): gates z, r, h."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..base import set_name, to_output
from ..registry import onnx_export, onnx_rule
from .common import _COMMON_ATTRS, _attrs, _Cell, _Sequence
from .onnx_rules import _export_recurrent, _OnnxRecurrent

__all__ = ["gru_cell", "gru_sequence"]


class _GRUStep:
    linear_before_reset: bool  # (an attribute of the op classes this mixin serves)
    GATES = 3
    STATES = 1
    DEFAULT_ACTIVATIONS = ["sigmoid", "tanh"]

    def _bias_blocks(self) -> int:
        # linear_before_reset keeps the recurrence bias of the h gate apart: [z, r, h_w, h_r].
        return 4 if self.linear_before_reset else 3

    def _step(self, x, states, w, r, b):
        (h,) = states
        f_act, g_act = self._acts()
        hs = self.hidden_size
        gx = x @ w.T
        rz, rr, rh = r[:hs], r[hs:2 * hs], r[2 * hs:]
        z = f_act(self._clip(gx[:, :hs] + h @ rz.T + b[:hs]))
        rg = f_act(self._clip(gx[:, hs:2 * hs] + h @ rr.T + b[hs:2 * hs]))
        if self.linear_before_reset:
            pre = gx[:, 2 * hs:] + b[2 * hs:3 * hs] + rg * (h @ rh.T + b[3 * hs:])
        else:
            pre = gx[:, 2 * hs:] + (rg * h) @ rh.T + b[2 * hs:]
        hh = g_act(self._clip(pre))
        return [(1 - z) * hh + z * h]


class GRUCell(_GRUStep, _Cell):
    """One GRU step: inputs (X, H, W, R, B), output H; gates z, r, h."""

    type_name = "GRUCell"
    version = "opset3"
    ATTRS = {**_COMMON_ATTRS, "linear_before_reset": False}


class GRUSequence(_GRUStep, _Sequence):
    """GRU over a batch-first sequence: (X, H, sequence_lengths, W, R, B) -> (Y, Ho)."""

    type_name = "GRUSequence"
    version = "opset5"
    ATTRS = {**_COMMON_ATTRS, "direction": "forward", "linear_before_reset": False}


def gru_cell(X: Any, initial_hidden_state: Any, W: Any, R: Any, B: Any, hidden_size: int,
             activations: Sequence[str] | None = None,
             activations_alpha: Sequence[float] | None = None,
             activations_beta: Sequence[float] | None = None, clip: float = 0.0,
             linear_before_reset: bool = False, name: str | None = None) -> GRUCell:
    """GRUCell-3, one time step: ``X`` ``[batch, input]``, ``initial_hidden_state`` ``[batch,
    hidden]``, ``W`` ``[3 * hidden, input]``, ``R`` ``[3 * hidden, hidden]``, ``B`` ``[3 * hidden]``
    (``[4 * hidden]`` with ``linear_before_reset``); gates z, r, h. ``activations`` (default
    sigmoid, tanh), their alpha/beta, ``clip`` as OpenVINO's. Output: the new hidden state."""
    ins = [to_output(v) for v in (X, initial_hidden_state, W, R, B)]
    return set_name(GRUCell(ins, linear_before_reset=bool(linear_before_reset),
                            **_attrs(hidden_size, activations, activations_alpha,
                                     activations_beta, clip)), name)


def gru_sequence(X: Any, initial_hidden_state: Any, sequence_lengths: Any, W: Any, R: Any,
                 B: Any, hidden_size: int, direction: str,
                 activations: Sequence[str] | None = None,
                 activations_alpha: Sequence[float] | None = None,
                 activations_beta: Sequence[float] | None = None, clip: float = 0.0,
                 linear_before_reset: bool = False, name: str | None = None) -> GRUSequence:
    """GRUSequence-5 over a batch-first sequence: ``X`` ``[batch, seq, input]``,
    ``initial_hidden_state`` ``[batch, dirs, hidden]``, ``sequence_lengths`` ``[batch]``, ``W``
    ``[dirs, 3 * hidden, input]``, ``R`` ``[dirs, 3 * hidden, hidden]``, ``B``
    ``[dirs, 3 * hidden]`` (``4 * hidden`` with ``linear_before_reset``); ``direction``
    "forward", "reverse" or "bidirectional". Outputs Y ``[batch, dirs, seq, hidden]`` and the last
    hidden state."""
    ins = [to_output(v) for v in (X, initial_hidden_state, sequence_lengths, W, R, B)]
    return set_name(GRUSequence(ins, direction=direction.lower(),
                                linear_before_reset=bool(linear_before_reset),
                                **_attrs(hidden_size, activations, activations_alpha,
                                         activations_beta, clip)), name)


@onnx_rule("GRU", since=7)
def _import_gru(ctx):
    lbr = bool(ctx.attr("linear_before_reset", 0))
    t = _OnnxRecurrent(ctx, 3, 2, _GRUStep.DEFAULT_ACTIVATIONS)
    hs = t.hs

    def combine(wb: np.ndarray, rb: np.ndarray) -> np.ndarray:
        # [Wb_z + Rb_z, Wb_r + Rb_r, Wb_h, Rb_h]
        return np.concatenate([wb[:, :2 * hs] + rb[:, :2 * hs], wb[:, 2 * hs:], rb[:, 2 * hs:]], 1)

    seq = GRUSequence([t.x, t.initial_state(5), t.sequence_lengths(), t.w, t.r,
                       t.bias(combine if lbr else None)],
                      hidden_size=hs, activations=t.acts, clip=t.clip, direction=t.direction,
                      linear_before_reset=lbr)
    return t.outputs(seq, 1)


@onnx_export(GRUCell, GRUSequence)
def _export_gru(node, ectx):
    _export_recurrent(node, ectx, "GRU", None)
