"""Shape vectors traced through their ShapeOf sub-graphs, element by element.

Exporters compute a Reshape's target from the shape of some tensor (``x.size()[:-1] + (n,)``
becomes ShapeOf -> Gather/Slice -> Unsqueeze -> Concat). Partial shapes often lose the
symbols that would prove such a target equal to a tensor's dims (a batch dim through a
broadcast with an attention mask), but the sub-graph itself says it: each element of the
target is "dim ``i`` of tensor ``x``" or a constant. ``shape_terms`` names every element that
way, so two vectors compare term by term, whatever the partial shapes know.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.boundary import Constant
from ..ops.elementwise import Convert
from ..ops.indexing import Gather
from ..ops.movement import Concat, Reshape, Slice, Split, Squeeze, Unsqueeze, VariadicSplit
from ..ops.movement.slice import slice_range
from ..ops.shape_ops import ShapeOf
from .kinds.base import ints

TRACE_DEPTH = 12      # shape sub-graphs are a few nodes deep; deeper ones are not traced
TRACE_ELEMENTS = 16   # longest shape vector traced


def dims_terms(node: Any, k: int) -> list | None:
    """Output ``k`` of ``node``'s dims as terms: the int where static, else
    ``("dim", id(tensor), output, axis)``; None when the rank is not static. A piece of a
    Split names the dims it shares with the split tensor by that tensor's (q, k and v of one
    projection have one batch and sequence)."""
    ps = node.out_pshapes[k]
    if not ps.rank_is_static or len(ps) > TRACE_ELEMENTS:
        return None
    out: list = []
    for i, d in enumerate(ps):
        src, sk = node, k
        while src.is_a(Split, VariadicSplit) and src.inputs[1][0].is_constant:
            rank = len(src.out_pshapes[sk])
            if ints(src.inputs[1][0].value)[0] % rank == i:
                break
            src, sk = src.inputs[0]
        out.append(d.min if d.min == d.max else ("dim", id(src), sk, i))
    return out


def shape_terms(node: Any, k: int = 0, depth: int = 0) -> list | None:
    """The elements of a small integer vector computed from shapes (output ``k`` of
    ``node``): ints and ``dims_terms`` items; None when the sub-graph does anything else
    (arithmetic, a computed index)."""
    if depth > TRACE_DEPTH:
        return None
    if node.is_constant:
        v = np.asarray(node.value)
        return ints(v) if v.dtype.kind in "iu" and v.size <= TRACE_ELEMENTS else None
    if node.is_a(ShapeOf):
        return dims_terms(*node.inputs[0])
    if node.is_a(Reshape, Squeeze, Unsqueeze, Convert):  # a vector keeps its elements
        src, sk = node.inputs[0]
        return shape_terms(src, sk, depth + 1)
    if node.is_a(Concat):
        out: list = []
        for src, sk in node.inputs:
            part = shape_terms(src, sk, depth + 1)
            if part is None:
                return None
            out += part
        return out
    if not node.is_a(Gather, Slice):
        return None
    src, sk = node.inputs[0]
    data = shape_terms(src, sk, depth + 1)
    consts = [s.value for s, _ in node.inputs[1:]]
    if data is None or any(c is None for c in consts):
        return None
    if node.is_a(Gather):
        if len(consts) != 2 or node.attrs.get("batch_dims", 0) or ints(consts[1]) != [0]:
            return None
        idx = ints(consts[0])
        return [data[i] for i in idx] if all(-len(data) <= i < len(data) for i in idx) else None
    if len(consts) not in (3, 4) or any(len(ints(c)) != 1 for c in consts) or \
            (len(consts) == 4 and ints(consts[3]) != [0]):
        return None
    start, stop, step = (ints(c)[0] for c in consts[:3])
    return [data[i] for i in slice_range(len(data), start, stop, step)] if step else None


def reshape_keeps_prefix(reshape: Any, prefix: int) -> bool:
    """Whether Reshape ``reshape``'s target begins with its input's first ``prefix`` dims
    (traced; no 0 or -1 among them, whose meaning depends on the other dims)."""
    if not reshape.is_a(Reshape) or len(reshape.inputs) < 2:
        return False
    src = dims_terms(*reshape.inputs[0])
    target = shape_terms(*reshape.inputs[1])
    if src is None or target is None or len(src) < prefix or len(target) < prefix:
        return False
    head = target[:prefix]
    return head == src[:prefix] and all(t > 0 for t in head if isinstance(t, int))


# shape-math ops a removed node may leave without users (removed with it)
_SHAPE_OPS = (ShapeOf, Gather, Slice, Concat, Reshape, Squeeze, Unsqueeze, Convert, Constant)


def without_unused_shape_nodes(nodes: list, dead: set[int]) -> list:
    """``nodes`` (topological, users not linked yet) without ``dead`` (ids) and the
    shape-math nodes and constants that are left without users."""
    users = {id(n): 0 for n in nodes}
    for n in nodes:
        for s, _ in n.inputs:
            users[id(s)] += 1
    for n in reversed(nodes):  # users come later: one backward sweep settles the counts
        if id(n) not in dead and (users[id(n)] or not n.is_a(*_SHAPE_OPS)):
            continue
        dead.add(id(n))
        for s, _ in n.inputs:
            users[id(s)] -= 1
    return [n for n in nodes if id(n) not in dead]
