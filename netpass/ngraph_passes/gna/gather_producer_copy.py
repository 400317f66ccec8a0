"""GatherIntoMatMulCopy: a Gather left inside on the columns of ``A @ B`` (B a constant
matrix) whose output other ops read too becomes a copy of the MatMul with B's columns in the
Gather's order.

Where it comes from: a stepped Slice (a MatMul by a selection matrix,
ConvertSteppedSliceToMatMul) whose output a GNA layout block reads in two channel orders,
the shuffle's residual Add in one and its Split in the other. Gather sinking brings the
permutation up to the MatMul, where GatherSinkingMatmulBackward stops: the Gather is not the
MatMul's only reader. GNA runs the copy (one more affine layer), not the Gather."""
from __future__ import annotations

from itertools import compress, repeat

import numpy as np

from ...core.boundary import Constant
from ...core.graph_util import copy_runtime_info
from ...ops.indexing import Gather
from ...ops.matmul import MatMul
from ...passes.base import ModelPass
from ..utils import const, make, static_rank
from .gather_utils import gather_info
from .limitations import interior_layout_ops


class GatherIntoMatMulCopy(ModelPass):
    """The module doc's rewrite on each such Gather ``interior_layout_ops`` finds."""

    def run_on_model(self, model) -> bool:
        ops = model.cached_order()
        # (the Gathers picked out at C level; the walk to the edges only where one reads a
        # MatMul)
        if not any(isinstance(g.input_value(0).node, MatMul)
                   for g in compress(ops, map(isinstance, ops, repeat(Gather)))):
            return False
        changed = False
        for g in interior_layout_ops(model):
            info = gather_info(g)
            mm = g.input_value(0).node
            if info is None or not isinstance(mm, MatMul) or self.transformation_callback(g):
                continue
            w, rank = mm.input_value(1).node, static_rank(mm.output(0))
            if not isinstance(w, Constant) or np.ndim(w.value) != 2 or rank is None or \
                    info.axis != rank - 1:
                continue
            cols = np.take(w.value, info.indices, axis=0 if mm.transpose_b else 1)
            copy = make(MatMul, [mm.input_value(0), const(cols)],
                        transpose_a=mm.transpose_a, transpose_b=mm.transpose_b)
            copy.friendly_name = g.friendly_name
            copy_runtime_info(g, copy)
            g.output(0).replace(copy.output(0))
            changed = True
        return changed
