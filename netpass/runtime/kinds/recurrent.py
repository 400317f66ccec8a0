"""Recurrent ops (``netpass/ops/recurrent``): LSTM, GRU and RNN cells and sequences, each in one
launch of the ``recurrent`` template (a work-group per batch row and direction keeps h and c in
local memory and loops over time); activation alpha/beta and hidden sizes over 1024 run on the
host."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ops.recurrent import GRUCell, GRUSequence, LSTMCell, LSTMSequence, RNNCell, RNNSequence
from ..impls import Impl, Launch, Params
from ..kernels.common import ctype
from ..kernels.recurrent import RNN_ACTIVATIONS, RNN_LS, recurrent
from .base import OpKind, table


def recurrent_impl(p: Params, key: Any, cell: str, is_cell: bool) -> Impl | None:
    """A ``cell`` ("lstm", "gru", "rnn") cell or sequence in one launch (kernels.recurrent);
    int32 or int64 sequence lengths; default-style activations without alpha/beta."""
    a = p.attrs
    hs = int(a.get("hidden_size", 0))
    defaults = {"lstm": ["sigmoid", "tanh", "tanh"], "gru": ["sigmoid", "tanh"], "rnn": ["tanh"]}
    acts = tuple(str(x).lower() for x in (a.get("activations") or defaults[cell]))
    states = 2 if cell == "lstm" else 1
    lens_idx = None if is_cell else 1 + states
    if any(np.dtype(d) != np.float32 for i, d in enumerate(p.in_dtypes) if i != lens_idx) \
            or a.get("activations_alpha") or a.get("activations_beta") \
            or any(x not in RNN_ACTIVATIONS for x in acts) or not 0 < hs <= 1024:
        return None
    x = p.in_shapes[0]
    lens_ct = "int"
    if is_cell:
        batch, T, IS, nd, rev = x[0], 1, x[1], 1, 0
    else:
        batch, T, IS = x
        direction = a.get("direction", "forward")
        nd, rev = (2 if direction == "bidirectional" else 1), int(direction == "reverse")
        lens_dtype: np.dtype = np.dtype(p.in_dtypes[1 + states])  # (input lens_idx)
        if lens_dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            return None
        lens_ct = ctype(lens_dtype)
    w0 = 1 + states if is_cell else 2 + states
    peepholes = len(p.in_shapes) > w0 + 3  # LSTM's optional P
    src = p.cached(("rnn",), lambda: recurrent(cell, hs, acts, float(a.get("clip", 0.0) or 0.0),
                                               bool(a.get("linear_before_reset", False)), is_cell,
                                               lens_ct, peepholes))
    spec: list = [("i", 0)] + [("i", 1 + s) for s in range(states)]
    lens: list = [] if is_cell else [("i", 1 + states)]
    spec += lens + [("i", w0 + k) for k in range(4 if peepholes else 3)]
    spec += [] if is_cell else [("o", 0)]
    spec += [("o", s if is_cell else 1 + s) for s in range(states)]
    spec += [T, IS, nd, rev, 0 if is_cell else 1]
    return Impl(key, [Launch(src, (max(batch * nd, 1) * RNN_LS,), (RNN_LS,), spec)])


def _recurrent(cls: type, cell: str, is_cell: bool) -> OpKind:
    return OpKind(cls, impl=lambda p, key: recurrent_impl(p, key, cell, is_cell))


ROWS = table(
    _recurrent(LSTMSequence, "lstm", False), _recurrent(GRUSequence, "gru", False),
    _recurrent(RNNSequence, "rnn", False), _recurrent(LSTMCell, "lstm", True),
    _recurrent(GRUCell, "gru", True), _recurrent(RNNCell, "rnn", True),
)
