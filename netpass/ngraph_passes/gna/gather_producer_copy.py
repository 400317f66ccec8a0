"""GatherIntoProducerCopy: a Gather left inside whose producer other ops read too, where the
producer can compute the gathered order itself, reads a copy of the producer that does: ``A @
B`` (B a constant matrix) with B's columns in the Gather's order, a Concat along the Gather's
axis with its pieces in that order.

Where they come from: a value a GNA layout block reads in two channel orders, the shuffle's
residual Add in one and its Split in the other, or a channel shuffle's Concat that a model
output reads too. Gather sinking brings the permutation up to the producer, where
GatherSinkingMatmulBackward and GatherConcatAbsorbBackward stop: the Gather is not its only
reader. GNA runs the copy (one more affine layer, or a Concat of the same pieces), not the
Gather."""
from __future__ import annotations

from itertools import compress, repeat

import numpy as np

from ...core.boundary import Constant
from ...core.graph_util import copy_runtime_info
from ...core.node import Node
from ...ops.indexing import Gather
from ...ops.matmul import MatMul
from ...ops.movement import Concat
from ...passes.base import ModelPass
from ..utils import const, make, static_rank, static_shape
from .gather_movement import reordered
from .gather_utils import GatherInfo, gather_info
from .limitations import interior_layout_ops


def _matmul_copy(mm: Node, info: GatherInfo) -> Node | None:
    w, rank = mm.input_value(1).node, static_rank(mm.output(0))
    if not isinstance(w, Constant) or np.ndim(w.value) != 2 or rank is None or \
            info.axis != rank - 1:
        return None
    cols = np.take(w.value, info.indices, axis=0 if mm.transpose_b else 1)
    return make(MatMul, [mm.input_value(0), const(cols)], transpose_a=mm.transpose_a,
                transpose_b=mm.transpose_b)


def _concat_copy(concat: Node, info: GatherInfo) -> Node | None:
    rank = static_rank(concat.output(0))
    if rank is None or info.axis != concat.axis % rank or \
            any(static_shape(v) is None for v in concat.input_values()):
        return None
    return make(Concat, reordered(concat.input_values(), info.axis, info.indices, concat),
                axis=concat.axis)


_COPIES = {MatMul: _matmul_copy, Concat: _concat_copy}


class GatherIntoProducerCopy(ModelPass):
    """The module doc's rewrite on each such Gather ``interior_layout_ops`` finds."""

    def run_on_model(self, model) -> bool:
        ops = model.cached_order()
        # (the Gathers picked out at C level; the walk to the edges only where one reads a
        # producer it may go into)
        if not any(type(g.input_value(0).node) in _COPIES
                   for g in compress(ops, map(isinstance, ops, repeat(Gather)))):
            return False
        changed = False
        for g in interior_layout_ops(model):
            info = gather_info(g)
            producer = g.input_value(0).node
            copy_of = _COPIES.get(type(producer))
            if info is None or copy_of is None or self.transformation_callback(g):
                continue
            copy = copy_of(producer, info)
            if copy is None:
                continue
            copy.friendly_name = g.friendly_name
            copy_runtime_info(g, copy)
            g.output(0).replace(copy.output(0))
            changed = True
        return changed
