"""A swap of the last two axes written by way of 3-D, as one Transpose.

The dynamo exporter writes ``k.transpose(-1, -2)`` of attention keys ``[b, h, s, d]`` for a
batched matmul as ``Reshape`` to ``[b * h, s, d]``, ``Transpose [0, 2, 1]``, ``Reshape`` back
to ``[b, h, d, s]``. Row-major order makes that ``Transpose(k, [0, 1, 3, 2])``, which the
attention fusion takes as its keys' transpose (a permuted view the kernels read through their
strides, the cache appends attach in place), where the 3-D detour made every decode step copy
the whole key cache transposed.

Conditions (:func:`fold_3d_swaps`): the shapes prove it, each dim of the 4-D ends the same
static size or the same symbol (``kinds.base.same_dim``) as the axis it comes from. The
detour's nodes go where nothing else reads them, stay shape-only where only ShapeOfs do (so
that the source has the Transpose as its one data reader: the grouped attention's repeat
asks for that), and stay as they are for other readers.
"""
from __future__ import annotations

import numpy as np

from ..core.boundary import Constant
from ..ops.movement import Reshape, Transpose
from ..ops.shape_ops import ShapeOf
from .kinds.base import same_dim
from .program_node import ProgramNode, node_users, splice

SWAP_LAST_TWO = (0, 1, 3, 2)


def swapped_source(node) -> tuple | None:
    """The 4-D source (node, output) whose last two axes ``node`` swaps by way of 3-D (module
    docstring), or None."""
    if not node.is_a(Reshape):
        return None
    t = node.inputs[0][0]
    if not t.is_a(Transpose) or not t.inputs[1][0].is_constant or t.inputs[1][0].value is None \
            or [int(a) for a in np.asarray(t.inputs[1][0].value).reshape(-1)] != [0, 2, 1]:
        return None
    r3 = t.inputs[0][0]
    if not r3.is_a(Reshape):
        return None
    src, k = r3.inputs[0]
    sp, mid, out = src.out_pshapes[k], r3.out_pshapes[0], node.out_pshapes[0]
    if not (sp.rank_is_static and mid.rank_is_static and out.rank_is_static) \
            or (len(sp), len(mid), len(out)) != (4, 3, 4):
        return None
    pairs = ((out[0], sp[0]), (out[1], sp[1]), (out[2], sp[3]), (out[3], sp[2]),
             (mid[1], sp[2]), (mid[2], sp[3]))
    return (src, k) if all(same_dim(a, b) for a, b in pairs) else None


def fold_3d_swaps(nodes: list) -> list:
    """``nodes`` (topological) with each swap of the last two axes by way of 3-D replaced by
    a Transpose of its source (and the Transpose's order, a Constant)."""
    users = node_users(nodes)
    replace: dict[int, list] = {}
    dropped: set[int] = set()
    for n in nodes:
        src = swapped_source(n)
        if src is None:
            continue
        order = ProgramNode(f"{n.id}/order", Constant.type_name,
                            value=np.array(SWAP_LAST_TWO, np.int64))
        replace[id(n)] = [order, ProgramNode(n.id, Transpose.type_name, {}, [src, (order, 0)],
                                             out_dtypes=n.out_dtypes,
                                             out_pshapes=n.out_pshapes, name=n.name)]
        t = n.inputs[0][0]
        outer_gone = True  # (n: replaced)
        for inner, outer in ((t, n), (t.inputs[0][0], t)):
            others = [u for u, _ in users.get(id(inner), ()) if u is not outer]
            if inner.is_output or any(not u.is_a(ShapeOf) for u in others):
                break  # (a data reader of its own: it stays as it is, and what it reads)
            if others or not outer_gone:
                inner.shape_only = inner.optimized = True
                outer_gone = False
            else:
                dropped.add(id(inner))
    return splice(nodes, replace, dropped)
