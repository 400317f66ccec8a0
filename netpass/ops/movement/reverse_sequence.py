"""ReverseSequence (OpenVINO opset1, ONNX 10): per batch entry, reverse the first
``seq_lengths[b]`` elements along ``seq_axis``; the rest stay in place."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Node
from ..base import normalize_axis, set_name, to_output
from ..registry import onnx_export, onnx_rule

__all__ = ["reverse_sequence"]


class ReverseSequence(Node):
    type_name = "ReverseSequence"
    version = "opset1"
    ATTRS = {"batch_axis": 0, "seq_axis": 1}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, seq_lengths)")
        ps = self.get_input_partial_shape(0)
        lens = self.get_input_partial_shape(1)
        self.check(not lens.rank_is_static or len(lens) == 1, "seq_lengths must be 1-D, got {}",
                   lens)
        let = self.get_input_element_type(1)
        self.check(let.is_dynamic or let.is_integral or let.is_real,
                   "seq_lengths must be numbers, got {}", let)
        if ps.rank_is_static:
            b = normalize_axis(self, self.batch_axis, len(ps))
            s = normalize_axis(self, self.seq_axis, len(ps))
            self.check(b != s, "batch_axis and seq_axis must differ, both are {}", b)
            if lens.rank_is_static:
                self.check(ps[b].compatible(lens[0]), "seq_lengths has {} entries for a batch "
                           "of {}", lens[0], ps[b])
        self.set_output_type(0, self.get_input_element_type(0), ps)

    def evaluate(self, inputs):
        x, lengths = inputs
        b = self.batch_axis % x.ndim
        s = self.seq_axis % x.ndim
        out = x.copy()
        moved_in, moved_out = np.moveaxis(x, (b, s), (0, 1)), np.moveaxis(out, (b, s), (0, 1))
        for i, n in enumerate(np.asarray(lengths).astype(np.int64).reshape(-1)):
            self.check(0 <= n <= x.shape[s], "seq_lengths[{}] = {} outside [0, {}]", i, n,
                       x.shape[s])
            moved_out[i, :n] = moved_in[i, :n][::-1]
        return [out]


def reverse_sequence(data: Any, seq_lengths: Any, batch_axis: int = 0, seq_axis: int = 1,
                     name: str | None = None) -> Node:
    """ReverseSequence-1: for each batch entry ``b`` along ``batch_axis``, the first
    ``seq_lengths[b]`` elements along ``seq_axis`` reversed, the rest kept."""
    return set_name(ReverseSequence([to_output(data), to_output(seq_lengths)],
                                    batch_axis=batch_axis, seq_axis=seq_axis), name)


@onnx_rule("ReverseSequence", since=10)
def _import_reverse_sequence(ctx):
    return ReverseSequence(ctx.inputs[:2], batch_axis=ctx.attr("batch_axis", 1),
                           seq_axis=ctx.attr("time_axis", 0))


@onnx_export(ReverseSequence)
def _export_reverse_sequence(node, ectx):
    data, lengths = ectx.inputs(node)
    if node.get_input_element_type(1).name != "i64":
        wide = ectx.fresh("lengths")
        ectx.add_node("Cast", [lengths], [wide], to=7)  # INT64
        lengths = wide
    ectx.add_node("ReverseSequence", [data, lengths], ectx.outputs(node),
                  batch_axis=int(node.batch_axis), time_axis=int(node.seq_axis))
