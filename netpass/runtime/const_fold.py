"""Values known before any input: small nodes computed from constants alone, and shape values
whose partial values are all static, become constants of the program.

``compile_model``'s legacy stage keeps what the model computes at run time; exporters write
an attention's scale as ``1 / sqrt(q.shape[-1])`` through ShapeOf, Slice, Convert and Sqrt.
The head width is static, so the partial values already hold the number: as a constant the
Multiply by it is absorbed into the fused attention (``AttentionDesc.prescaled``) instead of
running over q and k, and the sub-graph does not run per infer.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.boundary import Constant
from ..ops.indexing import Gather
from ..ops.movement import (
    Broadcast,
    Concat,
    Reshape,
    Slice,
    Squeeze,
    StridedSlice,
    Tile,
    Transpose,
    Unsqueeze,
)
from ..ops.shape_ops import Range, ShapeOf
from .kinds import elementwise
from .shape_infer import infer_host
from .shape_terms import without_unused_shape_nodes

FOLD_ELEMENTS = 64  # largest value folded (the shape-of sub-graphs' constant limit)
# deterministic ops whose value is a function of their inputs' values: the elementwise rows of
# the op table (Select and Convert among them) and the shape-math movement ops
FOLDABLE: frozenset[type] = frozenset({row.cls for row in elementwise.ROWS} | {
    Reshape, Squeeze, Unsqueeze, Concat, Gather, Slice, StridedSlice, Transpose, Range, ShapeOf,
    Broadcast, Tile})


def _static_pvalue(node: Any) -> np.ndarray | None:
    """The value of ``node``'s single integer output when its partial value is all static."""
    if node.num_outputs != 1 or not node.out_pvalues or node.out_pvalues[0] is None \
            or node.out_dtypes[0].kind not in "iu" or not node.out_pshapes[0].is_static:
        return None
    items = []
    for d in node.out_pvalues[0]:
        if isinstance(d, (int, np.integer)):
            items.append(int(d))
        elif d.min == d.max:
            items.append(int(d.min))
        else:
            return None
    shape = tuple(node.out_pshapes[0].to_shape())
    if len(items) != int(np.prod(shape, dtype=np.int64)) or len(items) > FOLD_ELEMENTS:
        return None
    return np.array(items, dtype=node.out_dtypes[0]).reshape(shape)


def _constant_inputs_value(node: Any) -> np.ndarray | None:
    """The value of ``node`` evaluated on the host when every input is a Constant and its
    output is small."""
    if node.num_outputs != 1 or not node.inputs or any(not s.is_constant for s, _ in node.inputs):
        return None
    ps = node.out_pshapes[0]
    if not ps.is_static or int(np.prod(ps.to_shape(), dtype=np.int64)) > FOLD_ELEMENTS:
        return None
    value = np.asarray(infer_host(node, [s.value for s, _ in node.inputs])[0],
                       dtype=node.out_dtypes[0])
    return value if tuple(value.shape) == tuple(ps.to_shape()) else None


def fold_constants(nodes: list) -> list:
    """``nodes`` (topological, users not linked yet) with known values as Constants (module
    docstring), and the sub-graphs left without users removed."""
    replaced: dict[int, Any] = {}
    for n in nodes:
        n.inputs = [((replaced[id(s)], 0) if id(s) in replaced else (s, k)) for s, k in n.inputs]
        if n.row.cls not in FOLDABLE:
            continue
        value = _static_pvalue(n)
        if value is None:
            value = _constant_inputs_value(n)
        if value is not None:
            # (a ProgramNode)
            replaced[id(n)] = type(n)(n.id, Constant.type_name, value=value, name=n.name)
    if not replaced:
        return nodes
    out = [replaced.get(id(n), n) for n in nodes]
    return without_unused_shape_nodes(out, set())
