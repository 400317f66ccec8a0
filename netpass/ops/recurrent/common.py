"""What the recurrent ops share: activations, directions, and the cell and sequence base classes
(shape inference over the gate blocks, the numpy step loop)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node
from ...core.shape import PartialShape
from ..base import merged_input_type

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
    ``DEFAULT_ACTIVATIONS``; ``_step`` advances the states by one time step for a whole batch
    (given P after B when the op has it).
    """

    activations: Any  # normalised by the attribute checks

    GATES: ClassVar[int]
    STATES: ClassVar[int]
    DEFAULT_ACTIVATIONS: ClassVar[list[str]]
    # Gates with a peephole weight (LSTM: 3); such an op takes them as an optional last input P.
    PEEPHOLES: ClassVar[int] = 0

    def _check_attributes(self) -> None:
        self.check(isinstance(self.hidden_size, (int, np.integer)) and bool(self.hidden_size > 0),
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

    def _has_peepholes(self, n_in: int) -> bool:
        """Checks the input count: ``n_in``, or one more (P) for an op with peepholes."""
        n = self.get_input_size()
        self.check(n == n_in or (self.PEEPHOLES > 0 and n == n_in + 1), "expects {} inputs{}",
                   n_in, " (and optionally P)" if self.PEEPHOLES else "")
        return n > n_in

    # -- shape checks shared by cells and sequences --------------------------------------
    def _merge_dim(self, acc: Dimension, d: Dimension, what: str) -> Dimension:
        m = acc.merge(d)
        if m is None:
            self.fail("{}: {} does not match {}", what, d, acc)
        return m

    def _check_rank(self, i: int, rank: int, what: str) -> PartialShape:
        ps = self.get_input_partial_shape(i)
        if not ps.rank_is_static:
            return PartialShape.dynamic(rank)
        self.check(len(ps) == rank, "input {} ({}) must have rank {}, got {}", i, what, rank, ps)
        return ps


class _Cell(_Recurrent):
    """X [batch, input], states [batch, hidden]..., W [G*hs, input], R [G*hs, hs], B [G*hs]
    (and, for LSTM, the optional peepholes P [3*hs])."""

    def infer_types(self) -> None:
        self._check_attributes()
        n_in = 1 + self.STATES + 3
        peepholes = self._has_peepholes(n_in)
        et = merged_input_type(self, range(self.get_input_size()))
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
        if peepholes:
            p = self._check_rank(n_in, 1, "P")
            self._merge_dim(Dimension(self.PEEPHOLES * hs), p[0], "P length (3 * hidden_size)")
        for s in range(self.STATES):
            self.set_output_type(s, et, PartialShape([batch, hs]))

    def evaluate(self, inputs):
        x = inputs[0]
        states = list(inputs[1:1 + self.STATES])
        w, r, b, *p = inputs[1 + self.STATES:]
        return [s.astype(x.dtype, copy=False) for s in self._step(x, states, w, r, b, *p)]


class _Sequence(_Recurrent):
    """X [batch, seq, input], states [batch, nd, hs]..., sequence_lengths [batch],
    W [nd, G*hs, input], R [nd, G*hs, hs], B [nd, G*hs] (and, for LSTM, the optional peepholes
    P [nd, 3*hs]); outputs Y [batch, nd, seq, hs] and
    the last states [batch, nd, hs]."""

    def infer_types(self) -> None:
        self._check_attributes()
        self.check(self.direction in DIRECTIONS,
                   "direction must be one of {}, got '{}'", DIRECTIONS, self.direction)
        n_in = 1 + self.STATES + 4
        peepholes = self._has_peepholes(n_in)
        float_inputs = [i for i in range(self.get_input_size()) if i != 1 + self.STATES]
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
        if peepholes:
            p = self._check_rank(n_in, 2, "P")
            self._merge_dim(Dimension(nd), p[0], "P num_directions")
            self._merge_dim(Dimension(self.PEEPHOLES * hs), p[1], "P length (3 * hidden_size)")
        self.set_output_type(0, et, PartialShape([batch, nd, seq, hs]))
        for s in range(self.STATES):
            self.set_output_type(1 + s, et, PartialShape([batch, nd, hs]))

    def evaluate(self, inputs):
        x = inputs[0]
        init = inputs[1:1 + self.STATES]
        lens = np.asarray(inputs[1 + self.STATES]).astype(np.int64)
        w, r, b, *p = inputs[2 + self.STATES:]
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
                new = self._step(x[:, t, :], states, w[d], r[d], b[d], *(q[d] for q in p))
                states = [np.where(valid, n, s) for n, s in zip(new, states)]
                y[:, d, t, :] = np.where(valid, states[0], 0)
            for k, s in enumerate(states):
                finals[k].append(s)
        outs = [y] + [np.stack(f, axis=1).astype(x.dtype, copy=False) for f in finals]
        return outs


_COMMON_ATTRS: dict[str, Any] = {"hidden_size": 0, "activations": None,
                                 "activations_alpha": [], "activations_beta": [], "clip": 0.0}


def _attrs(hidden_size: int, activations: Sequence[str] | None, alpha, beta, clip) -> dict:
    return {"hidden_size": int(hidden_size),
            "activations": list(activations) if activations else None,
            "activations_alpha": list(alpha or []), "activations_beta": list(beta or []),
            "clip": float(clip)}
