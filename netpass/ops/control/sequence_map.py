"""SequenceMap (ONNX 17): its body applied to every position of its input sequences.

Input 0 is a sequence; further inputs are sequences of the same length (read position by
position too) or tensors (given whole every time). Body Parameter ``i`` receives input ``i``
(``InvariantInput(i, i)``; for a sequence, one element; outer values the body captured follow
the ONNX inputs and are given whole), and output ``k`` collects body Result ``k`` of every
position into a sequence. OpenVINO has no sequences; netpass keeps the op whole.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from ...core.containers import box, sequence_items
from ...core.subgraph import (
    BodyOutput,
    InvariantInput,
    MultiSubGraphOp,
    evaluate_body,
    infer_body,
    set_body_parameter,
)
from ...core.types import SequenceType, sequence_of
from ...errors import NetpassError
from ..base import NETPASS_OPSET
from ..registry import onnx_rule


class SequenceMap(MultiSubGraphOp):
    type_name = "SequenceMap"
    version = NETPASS_OPSET
    # the ONNX inputs (sequences among them are read position by position); inputs after them
    # are outer values the body captured, given whole
    ATTRS = {**MultiSubGraphOp.ATTRS, "mapped_inputs": 1}
    DATA_DEPENDENT_SHAPE = True
    FOLDABLE = False  # its outputs are sequences, which no Constant holds

    def infer_types(self) -> None:
        self.check(self.get_input_size() >= 1 and
                   isinstance(self.get_input_element_type(0), SequenceType),
                   "input 0 must be a sequence, got {}",
                   self.get_input_element_type(0) if self.get_input_size() else "nothing")
        self.check(len(self.bodies) == 1, "needs one body, has {}", len(self.bodies))
        self.check_descriptions()
        body = self.bodies[0]
        for d in self.body_inputs(0):
            src = self._inputs[d.input_index]
            et = src.element_type
            param = body._parameters[d.body_parameter_index]
            # a sequence gives one element at a time: its element type, the shape they fit
            set_body_parameter(param,
                               cast(SequenceType, et).element if self._mapped(d.input_index)
                               else et,
                               src.partial_shape)
        infer_body(body)
        self.set_output_size(self.num_outputs_described())
        for o in self.body_outputs(0):
            src = body._results[o.body_value_index]._inputs[0]
            self.set_output_type(o.output_index, sequence_of(src.element_type),
                                 src.partial_shape)

    def _mapped(self, index: int) -> bool:
        return index < self.mapped_inputs and \
            isinstance(self.get_input_element_type(index), SequenceType)

    def evaluate(self, inputs: Sequence[Any]) -> list[Any]:
        where = self.where(0)
        seqs = {d.input_index: sequence_items(inputs[d.input_index], where)
                for d in self.body_inputs(0) if self._mapped(d.input_index)}
        lengths = {len(v) for v in seqs.values()}
        if len(lengths) != 1:
            raise NetpassError(f"{where}: input sequences have different lengths "
                               f"{sorted(lengths)}")
        n = lengths.pop()
        body = self.bodies[0]
        outs: list[list] = [[] for _ in range(self.get_output_size())]
        for pos in range(n):
            feeds: list[Any] = [None] * len(body._parameters)
            for d in self.body_inputs(0):
                feeds[d.body_parameter_index] = seqs[d.input_index][pos] \
                    if d.input_index in seqs else inputs[d.input_index]
            results = evaluate_body(body, feeds, where)
            for o in self.body_outputs(0):
                outs[o.output_index].append(results[o.body_value_index])
        return [box(items) for items in outs]


@onnx_rule("SequenceMap", since=17)
def _import_sequence_map(ctx):
    specs = []
    for v in ctx.inputs:
        if v is None:
            ctx.error("an input is omitted")
        et = v.element_type
        specs.append((et.element if isinstance(et, SequenceType) else et, v.partial_shape))
    body, captured = ctx.subgraph("body", specs)
    inputs = list(ctx.inputs) + list(captured)
    descs = [InvariantInput(i, i) for i in range(len(inputs))]
    outs = [BodyOutput(k, k) for k in range(len(body.results))]
    return SequenceMap(inputs, bodies=[body], input_descriptions=[descs],
                       output_descriptions=[outs], mapped_inputs=len(ctx.inputs)).outputs()
