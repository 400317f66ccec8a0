"""Recurrent cells and sequences: LSTM (:mod:`.lstm`), GRU (:mod:`.gru`) and RNN (:mod:`.rnn`), in
OpenVINO's layouts and gate orders.

OpenVINO (and so netpass) orders LSTM gates f, i, c, o and GRU gates z, r, h, and lays out
sequences batch-first: X [batch, seq, input], states [batch, num_directions, hidden], Y
[batch, num_directions, seq, hidden]. ONNX orders LSTM gates i, o, f, c and is sequence-first
by default; the import and export rules translate between the two (:mod:`.onnx_rules`).
"""
from __future__ import annotations

# Classes and factories; ``__all__`` lists the factories (``netpass.opset`` takes them).
from .gru import GRUCell, GRUSequence, gru_cell, gru_sequence  # noqa: F401
from .lstm import LSTMCell, LSTMCell1, LSTMSequence, lstm_cell, lstm_sequence  # noqa: F401
from .rnn import RNNCell, RNNSequence, rnn_cell, rnn_sequence  # noqa: F401

__all__ = ["lstm_cell", "lstm_sequence", "gru_cell", "gru_sequence", "rnn_cell", "rnn_sequence"]
