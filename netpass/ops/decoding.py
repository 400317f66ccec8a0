"""Sequence decoding (OpenVINO ops ONNX lacks): the greedy CTC decoders CTCGreedyDecoder
(opset1) and CTCGreedyDecoderSeqLen (opset6), and GatherTree (opset1), which walks beam
search's parent pointers back into whole sequences (TensorFlow's ``gather_tree``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import Type, f32, i32, i64
from .base import set_name, to_output

__all__ = ["ctc_greedy_decoder", "ctc_greedy_decoder_seq_len", "gather_tree"]


def _greedy(scores: np.ndarray, length: int, blank: int, merge: bool) -> list[int]:
    """The best class per step over ``length`` steps of ``scores`` ``[T, C]``, repeats merged
    (with ``merge``) and blanks dropped."""
    out: list[int] = []
    prev = -1
    for c in np.argmax(scores[:length], axis=-1).tolist():
        if c != blank and not (merge and c == prev):
            out.append(c)
        prev = c
    return out


def _merged_dim(node: Node, a: Dimension, b: Dimension, what: str) -> Dimension:
    merged = a.merge(b)
    node.check(merged is not None, "{}: {} and {} differ", what, a, b)
    assert merged is not None
    return merged


class CTCGreedyDecoder(Node):
    """CTCGreedyDecoder-1: inputs ``data`` ``[T, N, C]`` (class scores, the last class the
    blank) and ``sequence_mask`` ``[T, N]`` (1 for the steps of each sequence, a prefix);
    output ``[N, T, 1, 1]`` (f32 like the data): each sequence's best class per step, repeats
    merged with ``ctc_merge_repeated``, blanks dropped, padded with -1."""

    type_name = "CTCGreedyDecoder"
    version = "opset1"
    ATTRS = {"ctc_merge_repeated": True}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, sequence_mask)")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "data must be a float tensor, got {}", et)
        data, mask = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        self.check(not data.rank_is_static or len(data) == 3, "data must be [T, N, C], got {}",
                   data)
        self.check(not mask.rank_is_static or len(mask) == 2, "sequence_mask must be [T, N], "
                   "got {}", mask)
        t, n = Dimension(), Dimension()
        if data.rank_is_static:
            t, n = data[0], data[1]
        if mask.rank_is_static:
            t = _merged_dim(self, t, mask[0], "T of data and sequence_mask")
            n = _merged_dim(self, n, mask[1], "N of data and sequence_mask")
        self.set_output_type(0, et if not et.is_dynamic else f32, PartialShape([n, t, 1, 1]))

    def evaluate(self, inputs):
        data, mask = np.asarray(inputs[0]), np.asarray(inputs[1])
        t, n, c = data.shape
        out = np.full((n, t, 1, 1), -1, data.dtype)
        for b in range(n):
            length = int(np.count_nonzero(mask[:, b]))
            seq = _greedy(data[:, b], length, c - 1, bool(self.ctc_merge_repeated))
            out[b, :len(seq), 0, 0] = seq
        return [out]


class CTCGreedyDecoderSeqLen(Node):
    """CTCGreedyDecoderSeqLen-6: inputs ``data`` ``[N, T, C]``, ``sequence_length`` ``[N]``
    and the optional scalar ``blank_index`` (default ``C - 1``); outputs the decoded classes
    ``[N, T]`` (``classes_index_type``, padded with -1) and their count per sequence ``[N]``
    (``sequence_length_type``). Repeats merge with ``merge_repeated``; blanks are dropped."""

    type_name = "CTCGreedyDecoderSeqLen"
    version = "opset6"
    ATTRS = {"merge_repeated": True, "classes_index_type": i32, "sequence_length_type": i32}
    classes_index_type: Any
    sequence_length_type: Any

    def infer_types(self) -> None:
        n_in = self.get_input_size()
        self.check(n_in in (2, 3), "expects inputs (data, sequence_length[, blank_index])")
        self.classes_index_type = Type.of(self.classes_index_type)
        self.sequence_length_type = Type.of(self.sequence_length_type)
        for what in ("classes_index_type", "sequence_length_type"):
            self.check(getattr(self, what) in (i32, i64), "{} must be i32 or i64, got {}", what,
                       getattr(self, what))
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "data must be a float tensor, got {}", et)
        for i, what in ((1, "sequence_length"), (2, "blank_index")):
            if i < n_in:
                it = self.get_input_element_type(i)
                self.check(it.is_dynamic or it.is_integral, "{} must be integer, got {}", what,
                           it)
        data, lengths = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        self.check(not data.rank_is_static or len(data) == 3, "data must be [N, T, C], got {}",
                   data)
        self.check(not lengths.rank_is_static or len(lengths) == 1, "sequence_length must be "
                   "1-D, got {}", lengths)
        if n_in == 3:
            ps = self.get_input_partial_shape(2)
            self.check(not ps.rank_is_static or len(ps) == 0 or (len(ps) == 1 and
                                                                 ps[0].compatible(1)),
                       "blank_index must be a scalar, got shape {}", ps)
        n = data[0] if data.rank_is_static else Dimension()
        t = data[1] if data.rank_is_static else Dimension()
        if lengths.rank_is_static:
            n = _merged_dim(self, n, lengths[0], "N of data and sequence_length")
        self.set_output_type(0, self.classes_index_type, PartialShape([n, t]))
        self.set_output_type(1, self.sequence_length_type, PartialShape([n]))

    def evaluate(self, inputs):
        data = np.asarray(inputs[0])
        lengths = np.asarray(inputs[1]).reshape(-1)
        n, t, c = data.shape
        blank = int(np.asarray(inputs[2]).reshape(-1)[0]) if len(inputs) == 3 else c - 1
        self.check(bool(((lengths >= 0) & (lengths <= t)).all()), "sequence_length {} must lie "
                   "in [0, {}]", lengths.tolist(), t)
        out = np.full((n, t), -1, self.classes_index_type.dtype)
        counts = np.zeros(n, self.sequence_length_type.dtype)
        for b in range(n):
            seq = _greedy(data[b], int(lengths[b]), blank, bool(self.merge_repeated))
            out[b, :len(seq)] = seq
            counts[b] = len(seq)
        return [out, counts]


class GatherTree(Node):
    """GatherTree-1: inputs ``step_ids`` and ``parent_idx`` ``[T, B, W]``, ``max_seq_len``
    ``[B]`` and the scalar ``end_token``; output ``[T, B, W]``: for each beam, the ids along
    its parent chain read back from step ``min(max_seq_len[b], T) - 1``, ``end_token`` past
    that length and after the first ``end_token``."""

    type_name = "GatherTree"
    version = "opset1"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 4, "expects inputs (step_ids, parent_idx, "
                   "max_seq_len, end_token)")
        steps, parents = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        lens, end = self.get_input_partial_shape(2), self.get_input_partial_shape(3)
        self.check(not steps.rank_is_static or len(steps) == 3, "step_ids must be [T, B, W], "
                   "got {}", steps)
        merged = steps.merge(parents)
        self.check(merged is not None, "parent_idx {} differs from step_ids {}", parents, steps)
        assert merged is not None
        self.check(not lens.rank_is_static or len(lens) == 1, "max_seq_len must be 1-D, got {}",
                   lens)
        if merged.rank_is_static and lens.rank_is_static:
            _merged_dim(self, merged[1], lens[0], "B of step_ids and max_seq_len")
        self.check(not end.rank_is_static or len(end) == 0, "end_token must be a scalar, got "
                   "shape {}", end)
        self.set_output_type(0, self.get_input_element_type(0), merged)

    def evaluate(self, inputs):
        steps, parents, lens, end = (np.asarray(a) for a in inputs)
        t_max, batch, width = steps.shape
        end_token = steps.dtype.type(np.asarray(end).reshape(-1)[0])
        out = np.full(steps.shape, end_token, steps.dtype)
        for b in range(batch):
            length = min(max(int(lens[b]), 0), t_max)
            for w in range(width):
                parent = w
                for t in range(length - 1, -1, -1):
                    self.check(0 <= parent < width, "parent index {} at step {} out of range "
                               "for beam width {}", parent, t + 1, width)
                    out[t, b, w] = steps[t, b, parent]
                    parent = int(parents[t, b, parent])
                ended = np.flatnonzero(out[:length, b, w] == end_token)
                if ended.size:
                    out[ended[0]:length, b, w] = end_token
        return [out]


def ctc_greedy_decoder(data: Any, sequence_mask: Any, merge_repeated: bool = True,
                       name: str | None = None) -> Node:
    """CTCGreedyDecoder-1: the greedy CTC path of ``data`` ``[T, N, C]`` over the steps of
    ``sequence_mask`` ``[T, N]``, as ``[N, T, 1, 1]`` classes padded with -1."""
    return set_name(CTCGreedyDecoder([to_output(data), to_output(sequence_mask)],
                                     ctc_merge_repeated=bool(merge_repeated)), name)


def ctc_greedy_decoder_seq_len(data: Any, sequence_length: Any, blank_index: Any = None,
                               merge_repeated: bool = True, classes_index_type: Any = "i32",
                               sequence_length_type: Any = "i32",
                               name: str | None = None) -> Node:
    """CTCGreedyDecoderSeqLen-6: the greedy CTC path of ``data`` ``[N, T, C]`` over
    ``sequence_length`` steps (blank ``blank_index``, default ``C - 1``); outputs the classes
    ``[N, T]`` padded with -1 and their counts ``[N]``."""
    ins = [to_output(data), to_output(sequence_length)]
    if blank_index is not None:
        ins.append(to_output(blank_index))
    return set_name(CTCGreedyDecoderSeqLen(ins, merge_repeated=bool(merge_repeated),
                                           classes_index_type=Type.of(classes_index_type),
                                           sequence_length_type=Type.of(sequence_length_type)),
                    name)


def gather_tree(step_ids: Any, parent_idx: Any, max_seq_len: Any, end_token: Any,
                name: str | None = None) -> Node:
    """GatherTree-1: whole beams from beam search's ``step_ids`` and ``parent_idx``
    ``[T, B, W]``, cut at ``max_seq_len`` ``[B]`` and the first ``end_token``."""
    return set_name(GatherTree([to_output(v) for v in (step_ids, parent_idx, max_seq_len,
                                                       end_token)]), name)
