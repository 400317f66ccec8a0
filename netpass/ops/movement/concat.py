"""Concat: join along an axis."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node
from ...core.shape import PartialShape
from ..base import merged_input_type, normalize_axis, set_name, to_output
from ..registry import onnx_export, onnx_rule

__all__ = ["concat"]


class Concat(Node):
    """Concat v0 along ``axis`` (negative counts from the end)."""

    type_name = "Concat"
    version = "opset1"
    ATTRS = {"axis": 0}

    def infer_types(self) -> None:
        n = self.get_input_size()
        self.check(n >= 1, "expects at least one input")
        et = merged_input_type(self)
        # (Transpose sinking re-infers Concats of many inputs by the thousand: the input dims
        # are read once, and equal dims merge without new objects.)
        shapes = [o.node._outs[o.index].ps._dims for o in self._inputs]
        rank = None
        for i, dims_i in enumerate(shapes):
            if dims_i is not None:
                self.check(rank is None or len(dims_i) == rank,
                           "input {} has rank {}, expected {}", i, len(dims_i), rank)
                rank = len(dims_i)
        if rank is None:
            self.set_output_type(0, et, PartialShape(None))
            return
        self.check(rank >= 1, "inputs must have rank >= 1")
        axis = normalize_axis(self, self.axis, rank)
        dims: list[Dimension] = [Dimension() for _ in range(rank)]
        total: Dimension | None = Dimension(0)
        known_rank = False
        for i, dims_i in enumerate(shapes):
            if dims_i is None:
                total = None
                continue
            for k, d in enumerate(dims_i):
                if k == axis:
                    continue
                merged = dims[k].merge(d) if known_rank else d
                if merged is None:
                    self.fail("input {} dim {} is {}, incompatible with {}", i, k, d, dims[k])
                dims[k] = merged
            known_rank = True
            if total is not None:
                total = total + dims_i[axis]
        dims[axis] = total if total is not None else Dimension()
        self.set_output_type(0, et, PartialShape.of_dims(tuple(dims)))

    def infer_values(self) -> None:
        ps = self.get_output_partial_shape(0)
        if not ps.rank_is_static or len(ps) != 1:
            return
        parts = [self.input_partial_value(i) for i in range(self.get_input_size())]
        if all(p is None for p in parts):
            return
        # Unknown pieces of static length become unknown dims, so the known ones still
        # reach a Reshape (e.g. [batch, <computed>, 64] keeps batch and 64).
        pieces: list[tuple] = []
        for i, p in enumerate(parts):
            if p is None:
                ps = self.get_input_partial_shape(i)
                if not ps.is_static:
                    return
                p = (Dimension(),) * (ps.to_shape()[0] if len(ps) else 1)
            pieces.append(p)
        self.set_output_partial_value(0, [v for p in pieces for v in p])

    def evaluate(self, inputs):
        return [np.concatenate(inputs, axis=self.axis)]


def concat(nodes: Sequence[Any], axis: int, name: str | None = None) -> Node:
    """Concat-1: the ``nodes`` joined along ``axis`` (negative counts from the end); all other
    dims must agree. Python values among ``nodes`` become Constants."""
    return set_name(Concat([to_output(n) for n in nodes], axis=int(axis)), name)


@onnx_rule("Concat")
def _import_concat(ctx):
    return Concat([x for x in ctx.inputs if x is not None], axis=ctx.attr("axis", 1)).output(0)


@onnx_export(Concat)
def _export_concat(node, ectx):
    ectx.add_node("Concat", ectx.inputs(node), ectx.outputs(node), axis=node.axis)
