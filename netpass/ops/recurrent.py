"""Recurrent cells and sequences: LSTM, GRU and RNN, in OpenVINO's layouts and gate orders.

OpenVINO (and so netpass) orders LSTM gates f, i, c, o and GRU gates z, r, h, and lays out
sequences batch-first: X [batch, seq, input], states [batch, num_directions, hidden], Y
[batch, num_directions, seq, hidden]. ONNX orders LSTM gates i, o, f, c and is sequence-first
by default; the import and export rules at the end of this module translate between the two.
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..errors import UnsupportedOpError
from . import elementwise, indexing, movement, shape_ops
from .base import merged_input_type, set_name, to_output

__all__ = ["lstm_cell", "lstm_sequence", "gru_cell", "gru_sequence", "rnn_cell", "rnn_sequence"]

# Activations OpenVINO's recurrent ops accept (by lowercase name).
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0),
}

DIRECTIONS = ("forward", "reverse", "bidirectional")


def _num_directions(direction: str) -> int:
    return 2 if direction == "bidirectional" else 1


class _Recurrent(Node):
    """Shared attribute checks and the numpy time step of one cell kind.

    Subclasses set ``GATES`` (gate blocks in W/R), ``STATES`` (1 for H, 2 for H and C) and
    ``DEFAULT_ACTIVATIONS``; ``_step`` advances the states by one time step for a whole batch.
    """

    GATES: ClassVar[int]
    STATES: ClassVar[int]
    DEFAULT_ACTIVATIONS: ClassVar[list[str]]

    def _check_attributes(self) -> None:
        self.check(isinstance(self.hidden_size, (int, np.integer)) and self.hidden_size > 0,
                   "hidden_size must be a positive integer, got {!r}", self.hidden_size)
        if not self.activations:
            self.activations = list(self.DEFAULT_ACTIVATIONS)
        self.activations = [str(a).lower() for a in self.activations]
        self.check(len(self.activations) == len(self.DEFAULT_ACTIVATIONS),
                   f"expects {len(self.DEFAULT_ACTIVATIONS)} activations, got {self.activations}")
        for a in self.activations:
            self.check(a in ACTIVATIONS, f"unsupported activation '{a}' "
                                         f"(supported: {', '.join(ACTIVATIONS)})")
        self.check(self.clip >= 0, "clip must be >= 0, got {}", self.clip)

    def _bias_blocks(self) -> int:
        return self.GATES

    def _acts(self) -> list[Callable[[np.ndarray], np.ndarray]]:
        return [ACTIVATIONS[a] for a in self.activations]

    def _clip(self, x: np.ndarray) -> np.ndarray:
        return np.clip(x, -self.clip, self.clip) if self.clip > 0 else x

    def _step(self, x: np.ndarray, states: list[np.ndarray], w: np.ndarray, r: np.ndarray,
              b: np.ndarray) -> list[np.ndarray]:
        raise NotImplementedError

    # -- shape checks shared by cells and sequences --------------------------------------
    def _merge_dim(self, acc: Dimension, d: Dimension, what: str) -> Dimension:
        m = acc.merge(d)
        self.check(m is not None, "{}: {} does not match {}", what, d, acc)
        return m

    def _check_rank(self, i: int, rank: int, what: str) -> PartialShape:
        ps = self.get_input_partial_shape(i)
        if not ps.rank_is_static:
            return PartialShape.dynamic(rank)
        self.check(len(ps) == rank, "input {} ({}) must have rank {}, got {}", i, what, rank, ps)
        return ps


class _Cell(_Recurrent):
    """X [batch, input], states [batch, hidden]..., W [G*hs, input], R [G*hs, hs], B [G*hs]."""

    def infer_types(self) -> None:
        self._check_attributes()
        n_in = 1 + self.STATES + 3
        self.check(self.get_input_size() == n_in, "expects {} inputs", n_in)
        et = merged_input_type(self, range(n_in))
        hs = self.hidden_size
        x = self._check_rank(0, 2, "X")
        batch, in_size = x[0], x[1]
        for s in range(self.STATES):
            st = self._check_rank(1 + s, 2, "initial state")
            batch = self._merge_dim(batch, st[0], "batch size of an initial state")
            self._merge_dim(Dimension(hs), st[1], "hidden size of an initial state")
        w_i = 1 + self.STATES
        w = self._check_rank(w_i, 2, "W")
        self._merge_dim(Dimension(self.GATES * hs), w[0], "W rows (gates * hidden_size)")
        self._merge_dim(in_size, w[1], "W columns (input size)")
        r = self._check_rank(w_i + 1, 2, "R")
        self._merge_dim(Dimension(self.GATES * hs), r[0], "R rows (gates * hidden_size)")
        self._merge_dim(Dimension(hs), r[1], "R columns (hidden_size)")
        b = self._check_rank(w_i + 2, 1, "B")
        self._merge_dim(Dimension(self._bias_blocks() * hs), b[0],
                        "B length (bias blocks * hidden_size)")
        for s in range(self.STATES):
            self.set_output_type(s, et, PartialShape([batch, hs]))

    def evaluate(self, inputs):
        x = inputs[0]
        states = list(inputs[1:1 + self.STATES])
        w, r, b = inputs[1 + self.STATES:]
        return [s.astype(x.dtype, copy=False) for s in self._step(x, states, w, r, b)]


class _Sequence(_Recurrent):
    """X [batch, seq, input], states [batch, nd, hs]..., sequence_lengths [batch],
    W [nd, G*hs, input], R [nd, G*hs, hs], B [nd, G*hs]; outputs Y [batch, nd, seq, hs] and
    the last states [batch, nd, hs]."""

    def infer_types(self) -> None:
        self._check_attributes()
        self.check(self.direction in DIRECTIONS,
                   "direction must be one of {}, got '{}'", DIRECTIONS, self.direction)
        n_in = 1 + self.STATES + 4
        self.check(self.get_input_size() == n_in, "expects {} inputs", n_in)
        float_inputs = [i for i in range(n_in) if i != 1 + self.STATES]
        et = merged_input_type(self, float_inputs)
        lens_et = self.get_input_element_type(1 + self.STATES)
        self.check(lens_et.is_dynamic or lens_et.is_integral,
                   "sequence_lengths must be integers, got {}", lens_et)
        hs = self.hidden_size
        nd = _num_directions(self.direction)
        x = self._check_rank(0, 3, "X")
        batch, seq, in_size = x[0], x[1], x[2]
        for s in range(self.STATES):
            st = self._check_rank(1 + s, 3, "initial state")
            batch = self._merge_dim(batch, st[0], "batch size of an initial state")
            self._merge_dim(Dimension(nd), st[1], "num_directions of an initial state")
            self._merge_dim(Dimension(hs), st[2], "hidden size of an initial state")
        lens = self._check_rank(1 + self.STATES, 1, "sequence_lengths")
        batch = self._merge_dim(batch, lens[0], "length of sequence_lengths")
        w_i = 2 + self.STATES
        w = self._check_rank(w_i, 3, "W")
        self._merge_dim(Dimension(nd), w[0], "W num_directions")
        self._merge_dim(Dimension(self.GATES * hs), w[1], "W rows (gates * hidden_size)")
        self._merge_dim(in_size, w[2], "W columns (input size)")
        r = self._check_rank(w_i + 1, 3, "R")
        self._merge_dim(Dimension(nd), r[0], "R num_directions")
        self._merge_dim(Dimension(self.GATES * hs), r[1], "R rows (gates * hidden_size)")
        self._merge_dim(Dimension(hs), r[2], "R columns (hidden_size)")
        b = self._check_rank(w_i + 2, 2, "B")
        self._merge_dim(Dimension(nd), b[0], "B num_directions")
        self._merge_dim(Dimension(self._bias_blocks() * hs), b[1],
                        "B length (bias blocks * hidden_size)")
        self.set_output_type(0, et, PartialShape([batch, nd, seq, hs]))
        for s in range(self.STATES):
            self.set_output_type(1 + s, et, PartialShape([batch, nd, hs]))

    def evaluate(self, inputs):
        x = inputs[0]
        init = inputs[1:1 + self.STATES]
        lens = np.asarray(inputs[1 + self.STATES]).astype(np.int64)
        w, r, b = inputs[2 + self.STATES:]
        batch, seq = x.shape[0], x.shape[1]
        nd = _num_directions(self.direction)
        hs = self.hidden_size
        y = np.zeros((batch, nd, seq, hs), dtype=x.dtype)
        finals: list[list[np.ndarray]] = [[] for _ in range(self.STATES)]
        for d in range(nd):
            reverse = self.direction == "reverse" or d == 1
            states = [s[:, d, :].copy() for s in init]
            # Reverse runs visit each batch row's valid steps last to first; steps past a
            # row's length leave its state unchanged and its Y zero.
            steps = range(seq - 1, -1, -1) if reverse else range(seq)
            for t in steps:
                valid = (t < lens)[:, None]
                new = self._step(x[:, t, :], states, w[d], r[d], b[d])
                states = [np.where(valid, n, s) for n, s in zip(new, states)]
                y[:, d, t, :] = np.where(valid, states[0], 0)
            for k, s in enumerate(states):
                finals[k].append(s)
        outs = [y] + [np.stack(f, axis=1).astype(x.dtype, copy=False) for f in finals]
        return outs


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


class _GRUStep:
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


class _RNNStep:
    GATES = 1
    STATES = 1
    DEFAULT_ACTIVATIONS = ["tanh"]

    def _step(self, x, states, w, r, b):
        (h,) = states
        (act,) = self._acts()
        return [act(self._clip(x @ w.T + h @ r.T + b))]


_COMMON_ATTRS: dict[str, Any] = {"hidden_size": 0, "activations": None,
                                 "activations_alpha": [], "activations_beta": [], "clip": 0.0}


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


# -- factories (OpenVINO's argument order) ---------------------------------------------------
def _attrs(hidden_size: int, activations: Sequence[str] | None, alpha, beta, clip) -> dict:
    return {"hidden_size": int(hidden_size),
            "activations": list(activations) if activations else None,
            "activations_alpha": list(alpha or []), "activations_beta": list(beta or []),
            "clip": float(clip)}


def lstm_cell(X: Any, initial_hidden_state: Any, initial_cell_state: Any, W: Any, R: Any, B: Any,
              hidden_size: int, activations: Sequence[str] | None = None,
              activations_alpha: Sequence[float] | None = None,
              activations_beta: Sequence[float] | None = None, clip: float = 0.0,
              name: str | None = None) -> LSTMCell:
    ins = [to_output(v) for v in (X, initial_hidden_state, initial_cell_state, W, R, B)]
    return set_name(LSTMCell(ins, **_attrs(hidden_size, activations, activations_alpha,
                                           activations_beta, clip)), name)


def lstm_sequence(X: Any, initial_hidden_state: Any, initial_cell_state: Any,
                  sequence_lengths: Any, W: Any, R: Any, B: Any, hidden_size: int,
                  direction: str, activations: Sequence[str] | None = None,
                  activations_alpha: Sequence[float] | None = None,
                  activations_beta: Sequence[float] | None = None, clip: float = 0.0,
                  name: str | None = None) -> LSTMSequence:
    ins = [to_output(v) for v in (X, initial_hidden_state, initial_cell_state, sequence_lengths,
                                  W, R, B)]
    return set_name(LSTMSequence(ins, direction=direction.lower(),
                                 **_attrs(hidden_size, activations, activations_alpha,
                                          activations_beta, clip)), name)


def gru_cell(X: Any, initial_hidden_state: Any, W: Any, R: Any, B: Any, hidden_size: int,
             activations: Sequence[str] | None = None,
             activations_alpha: Sequence[float] | None = None,
             activations_beta: Sequence[float] | None = None, clip: float = 0.0,
             linear_before_reset: bool = False, name: str | None = None) -> GRUCell:
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
    ins = [to_output(v) for v in (X, initial_hidden_state, sequence_lengths, W, R, B)]
    return set_name(GRUSequence(ins, direction=direction.lower(),
                                linear_before_reset=bool(linear_before_reset),
                                **_attrs(hidden_size, activations, activations_alpha,
                                         activations_beta, clip)), name)


def rnn_cell(X: Any, initial_hidden_state: Any, W: Any, R: Any, B: Any, hidden_size: int,
             activations: Sequence[str] | None = None,
             activations_alpha: Sequence[float] | None = None,
             activations_beta: Sequence[float] | None = None, clip: float = 0.0,
             name: str | None = None) -> RNNCell:
    ins = [to_output(v) for v in (X, initial_hidden_state, W, R, B)]
    return set_name(RNNCell(ins, **_attrs(hidden_size, activations, activations_alpha,
                                          activations_beta, clip)), name)


def rnn_sequence(X: Any, initial_hidden_state: Any, sequence_lengths: Any, W: Any, R: Any,
                 B: Any, hidden_size: int, direction: str,
                 activations: Sequence[str] | None = None,
                 activations_alpha: Sequence[float] | None = None,
                 activations_beta: Sequence[float] | None = None, clip: float = 0.0,
                 name: str | None = None) -> RNNSequence:
    ins = [to_output(v) for v in (X, initial_hidden_state, sequence_lengths, W, R, B)]
    return set_name(RNNSequence(ins, direction=direction.lower(),
                                **_attrs(hidden_size, activations, activations_alpha,
                                         activations_beta, clip)), name)


# -- ONNX import -----------------------------------------------------------------------------
from .registry import onnx_export, onnx_rule  # noqa: E402

# Position of each OpenVINO gate block in ONNX's block order (LSTM: ONNX i,o,f,c -> f,i,c,o).
_LSTM_FROM_ONNX = [2, 0, 3, 1]
_LSTM_TO_ONNX = [1, 3, 0, 2]
_ONNX_ACT_NAMES = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu"}


def _reorder_blocks(value: Output, order: list[int], axis: int) -> Output:
    """Reorder equal gate blocks of ``value`` along ``axis`` (in numpy when it is known)."""
    if order == sorted(order):
        return value
    known = value.value
    if known is not None:
        parts = np.split(known, len(order), axis=axis)
        return to_output(np.concatenate([parts[i] for i in order], axis=axis))
    parts = movement.split(value, axis, len(order))
    return _single(movement.concat([parts.output(i) for i in order], axis))


def _single(node: Any) -> Output:
    return node if isinstance(node, Output) else node.output(0)


class _OnnxRecurrent:
    """Translation of one ONNX LSTM/GRU/RNN node into an OpenVINO-style Sequence op."""

    def __init__(self, ctx: Any, gates: int, n_acts: int, default_acts: list[str]) -> None:
        self.ctx = ctx
        self.gates = gates
        direction = ctx.attr("direction", "forward")
        if direction not in DIRECTIONS:
            ctx.error(f"direction '{direction}' is not one of {DIRECTIONS}")
        self.direction = direction
        self.nd = _num_directions(direction)
        self.layout = ctx.attr("layout", 0)
        if self.layout not in (0, 1):
            ctx.error(f"layout must be 0 or 1, got {self.layout}")
        x, w, r = ctx.input(0), ctx.input(1), ctx.input(2)
        if x is None or w is None or r is None:
            ctx.error("inputs X, W and R are required")
        self.w, self.r = w, r
        hs = ctx.attr("hidden_size", 0)
        if not hs:
            rps = r.partial_shape
            if not (rps.rank_is_static and len(rps) == 3 and rps[2].is_static):
                ctx.error("hidden_size is not given and R's shape is not static")
            hs = rps[2].get_length()
        self.hs = hs
        self.acts = self._activations(n_acts, default_acts)
        self.clip = float(ctx.attr("clip", 0.0))
        # ONNX layout 0 is [seq, batch, input]; netpass sequences are batch-first.
        self.x = self._transpose(x, [1, 0, 2]) if self.layout == 0 else x

    def _transpose(self, value: Output, order: list[int]) -> Output:
        return _single(movement.transpose(value, np.array(order, dtype=np.int64)))

    def _activations(self, n: int, default: list[str]) -> list[str]:
        names = self.ctx.attr("activations", [])
        if not names:
            return list(default)
        names = [a.lower() for a in names]
        if len(names) != n * self.nd:
            self.ctx.error(f"expects {n * self.nd} activations, got {names}")
        if self.nd == 2 and names[:n] != names[n:]:
            self.ctx.error(f"different activations per direction are not supported: {names}")
        for a in names[:n]:
            if a not in ACTIVATIONS:
                self.ctx.error(f"activation '{a}' is not supported "
                               f"(supported: {', '.join(_ONNX_ACT_NAMES.values())})")
        return names[:n]

    def batch_size_vector(self) -> Output:
        """A 1-D i64 tensor [batch] from X's shape (batch is dim 0 after the layout transpose)."""
        shape = shape_ops.shape_of(self.x, "i64")
        return _single(indexing.gather(shape, np.array([0], dtype=np.int64),
                                    np.array(0, dtype=np.int64)))

    def initial_state(self, index: int) -> Output:
        """ONNX state input ``index`` as [batch, nd, hs], zeros when omitted."""
        value = self.ctx.input(index)
        if value is not None:
            return self._transpose(value, [1, 0, 2]) if self.layout == 0 else value
        dims = _single(movement.concat([self.batch_size_vector(),
                                     to_output(np.array([self.nd, self.hs], dtype=np.int64))], 0))
        zero = to_output(np.array(0, dtype=self.x.element_type.dtype or np.float32))
        return _single(movement.broadcast(zero, dims))

    def sequence_lengths(self) -> Output:
        value = self.ctx.input(4)
        if value is not None:
            return value
        shape = shape_ops.shape_of(self.x, "i64")
        seq = indexing.gather(shape, np.array([1], dtype=np.int64), np.array(0, dtype=np.int64))
        return _single(movement.broadcast(seq, self.batch_size_vector()))

    def bias(self, combine: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
             order: list[int] | None = None) -> Output:
        """OpenVINO's B from ONNX's [nd, 2*G*hs] (W bias then R bias); zeros when omitted."""
        b = self.ctx.input(3)
        g, hs = self.gates, self.hs
        dtype = self.x.element_type.dtype or np.float32
        if b is None:
            blocks = g + (1 if combine is not None else 0)
            return to_output(np.zeros((self.nd, blocks * hs), dtype=dtype))
        if b.value is not None:
            wb, rb = b.value[:, :g * hs], b.value[:, g * hs:]
            arr = combine(wb, rb) if combine is not None else wb + rb
            out = to_output(arr.astype(dtype))
        else:
            if combine is not None:
                self.ctx.error("linear_before_reset=1 needs a constant B")
            halves = movement.split(b, 1, 2)
            out = _single(elementwise.add(halves.output(0), halves.output(1)))
        return _reorder_blocks(out, order, 1) if order else out

    def outputs(self, seq: Node, n_states: int) -> list[Output]:
        """ONNX outputs (Y, Y_h[, Y_c]) from the Sequence op's batch-first outputs."""
        y = seq.output(0)  # [batch, nd, seq, hs]
        if self.layout == 0:
            y = self._transpose(y, [2, 1, 0, 3])   # [seq, nd, batch, hs]
        else:
            y = self._transpose(y, [0, 2, 1, 3])   # [batch, seq, nd, hs]
        outs = [y]
        for s in range(n_states):
            st = seq.output(1 + s)
            outs.append(self._transpose(st, [1, 0, 2]) if self.layout == 0 else st)
        return outs[:max(self.ctx.num_outputs, 1)]


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


@onnx_rule("RNN", since=7)
def _import_rnn(ctx):
    t = _OnnxRecurrent(ctx, 1, 1, _RNNStep.DEFAULT_ACTIVATIONS)
    seq = RNNSequence([t.x, t.initial_state(5), t.sequence_lengths(), t.w, t.r, t.bias()],
                      hidden_size=t.hs, activations=t.acts, clip=t.clip, direction=t.direction)
    return t.outputs(seq, 1)


# -- ONNX export -----------------------------------------------------------------------------
def _unsupported(node: Node, reason: str) -> UnsupportedOpError:
    return UnsupportedOpError(node.type_name, "", 17, node.friendly_name, reason)


def _export_reorder(ectx: Any, node: Node, index: int, name: str, order: list[int] | None,
                    axis: int) -> str:
    """ONNX name of input ``index`` with its gate blocks reordered to ONNX's order."""
    value = node.input_value(index)
    if not order:
        return name
    if value.value is not None:
        parts = np.split(value.value, len(order), axis=axis)
        return ectx.constant(np.concatenate([parts[i] for i in order], axis=axis))
    dim = value.partial_shape[axis] if value.partial_shape.rank_is_static else Dimension()
    if not dim.is_static:
        raise _unsupported(node, f"input {index} is not constant and its gate axis is dynamic")
    size = dim.get_length() // len(order)
    pieces = [ectx.fresh(f"{name}_gate") for _ in order]
    ectx.add_node("Split", [name, ectx.constant(np.array([size] * len(order), dtype=np.int64))],
                  pieces, axis=axis)
    out = ectx.fresh(f"{name}_onnx_order")
    ectx.add_node("Concat", [pieces[i] for i in order], [out], axis=axis)
    return out


def _onnx_bias_array(node: Node, arr: np.ndarray, order: list[int] | None) -> np.ndarray:
    """ONNX B [nd, 2*G*hs] from OpenVINO's [nd, blocks*hs]: W bias = B and R bias = 0 (only
    their sum matters), except GRU linear_before_reset, whose h-gate biases stay apart."""
    hs = node.hidden_size
    if getattr(node, "linear_before_reset", False):
        wb = arr[:, :3 * hs]
        rb = np.concatenate([np.zeros_like(arr[:, :2 * hs]), arr[:, 3 * hs:]], 1)
        return np.concatenate([wb, rb], axis=1)
    if order:
        parts = np.split(arr, len(order), axis=1)
        arr = np.concatenate([parts[i] for i in order], axis=1)
    return np.concatenate([arr, np.zeros_like(arr)], axis=1)


def _export_bias(ectx: Any, node: Node, name: str, order: list[int] | None,
                 is_cell: bool) -> str:
    """ONNX B from the op's B input ``name`` (already [nd, ...] shaped for cells)."""
    b = node.input_value(node.get_input_size() - 1)
    if b.value is not None:
        arr = b.value[None] if is_cell else b.value
        return ectx.constant(_onnx_bias_array(node, arr, order))
    if getattr(node, "linear_before_reset", False) or (order and is_cell):
        raise _unsupported(node, "a non-constant B of this op cannot be exported")
    wb = _export_reorder(ectx, node, node.get_input_size() - 1, name, order, 1)
    zeros = ectx.fresh("zero_bias")
    ectx.add_node("Sub", [wb, wb], [zeros])
    out = ectx.fresh("onnx_bias")
    ectx.add_node("Concat", [wb, zeros], [out], axis=1)
    return out


def _transpose(ectx: Any, name: str, perm: list[int], hint: str) -> str:
    out = ectx.fresh(hint)
    ectx.add_node("Transpose", [name], [out], perm=perm)
    return out


def _export_recurrent(node: Node, ectx: Any, onnx_type: str, order: list[int] | None) -> None:
    """Write a cell or sequence as one ONNX node (layout 0) with Transposes (sequences) or
    Unsqueeze/Squeeze (cells: a sequence of length 1) around it."""
    names = ectx.inputs(node)
    outs = ectx.outputs(node)
    is_seq = isinstance(node, _Sequence)
    states = node.STATES
    w_i = 1 + states + (1 if is_seq else 0)
    axes = "" if is_seq else ectx.constant(np.array([0], dtype=np.int64), "axis0")

    def unsqueeze(name: str, hint: str) -> str:
        out = ectx.fresh(hint)
        ectx.add_node("Unsqueeze", [name, axes], [out])
        return out

    if is_seq:
        x = _transpose(ectx, names[0], [1, 0, 2], "x_seq_first")
        inits = [_transpose(ectx, names[1 + s], [1, 0, 2], "state_dir_first")
                 for s in range(states)]
        lens = ectx.fresh("sequence_lens")
        ectx.add_node("Cast", [names[1 + states]], [lens], to=6)  # ONNX wants int32 lengths
        w = _export_reorder(ectx, node, w_i, names[w_i], order, 1)
        r = _export_reorder(ectx, node, w_i + 1, names[w_i + 1], order, 1)
        b = _export_bias(ectx, node, names[w_i + 2], order, False)
    else:
        x = unsqueeze(names[0], "x_seq1")
        inits = [unsqueeze(names[1 + s], "state_dir1") for s in range(states)]
        lens = ""
        w = unsqueeze(_export_reorder(ectx, node, w_i, names[w_i], order, 0), "W")
        r = unsqueeze(_export_reorder(ectx, node, w_i + 1, names[w_i + 1], order, 0), "R")
        b = _export_bias(ectx, node, unsqueeze(names[w_i + 2], "B"), order, True)
    attrs: dict[str, Any] = {"hidden_size": node.hidden_size}
    nd = _num_directions(node.direction) if is_seq else 1
    attrs["direction"] = node.direction if is_seq else "forward"
    if node.activations != node.DEFAULT_ACTIVATIONS:
        attrs["activations"] = [_ONNX_ACT_NAMES[a] for a in node.activations] * nd
    if node.clip > 0:
        attrs["clip"] = float(node.clip)
    if getattr(node, "linear_before_reset", False):
        attrs["linear_before_reset"] = 1
    y = ectx.fresh("Y")
    state_outs = [ectx.fresh("Y_state") for _ in range(states)]
    ectx.add_node(onnx_type, [x, w, r, b, lens] + inits, [y] + state_outs, **attrs)
    if is_seq:
        ectx.add_node("Transpose", [y], [outs[0]], perm=[2, 1, 0, 3])
        for s in range(states):
            ectx.add_node("Transpose", [state_outs[s]], [outs[1 + s]], perm=[1, 0, 2])
    else:
        for s in range(states):
            ectx.add_node("Squeeze", [state_outs[s], axes], [outs[s]])


@onnx_export(LSTMCell, LSTMSequence)
def _export_lstm(node, ectx):
    _export_recurrent(node, ectx, "LSTM", _LSTM_TO_ONNX)


@onnx_export(GRUCell, GRUSequence)
def _export_gru(node, ectx):
    _export_recurrent(node, ectx, "GRU", None)


@onnx_export(RNNCell, RNNSequence)
def _export_rnn(node, ectx):
    _export_recurrent(node, ectx, "RNN", None)

