"""Rotary position embeddings as one :class:`~netpass.runtime.kinds.elementwise.Rotary` node,
one launch.

LLaMA, Mistral, Qwen and GPT-NeoX rotate queries and keys with transformers'
``x * cos + rotate_half(x) * sin``, ``rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])``. An
export writes that as two Slices, a Negative, a Concat, two Multiplies and an Add: six launches
per rotated tensor (twelve per layer, for the queries and the keys), and three tensors of the
activations' size written and read back. One kernel reads each element and its partner in the
other half once.

A layer rotates its queries and its keys by the same ``cos`` and ``sin``:
:func:`merge_rotary_pairs` makes the two Rotary nodes one, two tensors in one launch.

Partial rotary (GPT-NeoX, Phi, StableLM: ``rotary_pct`` < 1) rotates the first ``r`` elements
of the last axis and passes the rest: ``cat(rotate(x[..., :r]), x[..., r:])``, two slice
copies and a Concat around the rotation. :func:`absorb_partial_rotaries` makes that one Rotary
of ``x`` whose kernel copies the elements past ``r`` (``RotaryDesc.rotated``).

Conditions (:func:`fuse_rotaries`): float32; ``Add(Multiply(x, cos), Multiply(Concat(
Negative(Slice(x, d/2:)), Slice(x, :d/2)), sin))`` (either operand order) along the last axis,
whose size ``d`` is static and even; the Slices by constant bounds with step 1; every op but
``x`` read only by the next one; the Add's shape that of ``x`` (``cos`` and ``sin`` broadcast
into it).
"""
from __future__ import annotations

import numpy as np

from ..ops.elementwise import Add, Multiply, Negative
from ..ops.movement import (
    Concat,
    Reshape,
    Slice,
    Split,
    Squeeze,
    Transpose,
    Unsqueeze,
    VariadicSplit,
)
from .kinds.elementwise import Rotary, RotaryDesc
from .kinds.normalization import RmsNorm
from .program_node import ProgramNode, fuse_matches, node_users, read_once, splice, standing_for

F32 = np.dtype(np.float32)


def _const_ints(node) -> list[int] | None:
    return [int(v) for v in np.asarray(node.value).reshape(-1)] if node.is_constant else None


def _last_axis_slice(s, users: dict) -> tuple | None:
    """(x, k, start, stop) of a Slice of ``x`` along its last axis, step 1, read once."""
    if not s.is_a(Slice) or len(s.inputs) < 4 or not read_once(s, users):
        return None
    x, k = s.inputs[0]
    ps = x.out_pshapes[k]
    bounds = []
    for i, _ in s.inputs[1:]:
        b = _const_ints(i)
        if b is None or len(b) != 1:
            return None
        bounds.append(b[0])
    if not ps.rank_is_static:
        return None
    start, stop, step = bounds[:3]
    axis = bounds[3] % len(ps) if len(bounds) > 3 else 0
    return (x, k, start, stop) if step == 1 and axis == len(ps) - 1 else None


def _rotate_half(c, users: dict) -> tuple | None:
    """(x, k) when ``c`` is ``cat(-x[..., d/2:], x[..., :d/2])`` over the last axis of an
    ``x`` whose last dim is static and even."""
    if not c.is_a(Concat) or len(c.inputs) != 2 or not read_once(c, users):
        return None
    neg, _ = c.inputs[0]
    if not neg.is_a(Negative) or not read_once(neg, users):
        return None
    hi, lo = _last_axis_slice(neg.inputs[0][0], users), _last_axis_slice(c.inputs[1][0], users)
    if hi is None or lo is None or hi[:2] != lo[:2]:
        return None
    x, k = hi[0], hi[1]
    ps = x.out_pshapes[k]
    rank = len(ps)
    if int(c.attrs.get("axis", 0)) % rank != rank - 1 or not ps[rank - 1].is_static:
        return None
    d = ps[rank - 1].min
    if d % 2 or (lo[2], min(lo[3], d)) != (0, d // 2) or (hi[2], min(hi[3], d)) != (d // 2, d):
        return None
    return x, k


def _product(m, users: dict) -> list[tuple]:
    """The two (operand, other) orders of Multiply ``m`` read once, else none."""
    if not m.is_a(Multiply) or not read_once(m, users):
        return []
    a, b = m.inputs
    return [(a, b), (b, a)]


def _match(n, users: dict) -> tuple | None:
    """(x, cos, sin, replaced nodes) when Add ``n`` rotates ``x`` (module docstring)."""
    if not n.is_a(Add) or n.out_dtypes[0] != F32 or n.num_outputs != 1:
        return None
    for (m1, _), (m2, _) in (n.inputs, n.inputs[::-1]):
        for rot, sin in _product(m2, users):
            x = _rotate_half(rot[0], users)
            if x is None:
                continue
            for xs, cos in _product(m1, users):
                if xs == x and n.out_pshapes[0] == x[0].out_pshapes[x[1]] \
                        and all(s.out_dtypes[k] == F32 for s, k in (x, cos, sin)):
                    c = rot[0]
                    neg = c.inputs[0][0]
                    chain = [neg.inputs[0][0], neg, c.inputs[1][0], c, m1, m2]
                    return x, cos, sin, chain
    return None


def _rotary(n, users: dict) -> tuple | None:
    found = _match(n, users)
    if found is None:
        return None
    x, cos, sin, chain = found
    return [standing_for(n, Rotary.type_name, [x, cos, sin], RotaryDesc(chain))], chain


def fuse_rotaries(nodes: list) -> list:
    """``nodes`` (topological) with every rotate-half rotation replaced by a Rotary node."""
    return fuse_matches(nodes, _rotary)


def _partial(c, users: dict) -> tuple | None:
    """(x, its output, r, the Rotary, the two Slices) when Concat ``c`` is ``cat(Rotary(
    x[..., :r]), x[..., r:])`` along the last axis of an ``x`` whose last dim is static
    (``0 < r`` even, below it), the pieces read only by it."""
    if not c.is_a(Concat) or len(c.inputs) != 2 or c.out_dtypes[0] != F32:
        return None
    (rot, rk), (rest, _) = c.inputs
    if not rot.is_a(Rotary) or rk or len(rot.inputs) != 3 or not read_once(rot, users) \
            or rot.subgraph.rotated is not None:
        return None
    head, tail = _last_axis_slice(rot.inputs[0][0], users), _last_axis_slice(rest, users)
    if head is None or tail is None or head[:2] != tail[:2]:
        return None
    x, k = head[:2]
    ps = x.out_pshapes[k]
    rank, d = len(ps), ps[len(ps) - 1]
    if int(c.attrs.get("axis", 0)) % rank != rank - 1 or not d.is_static:
        return None
    r = min(head[3], d.min)
    if head[2] != 0 or r % 2 or not 0 < r < d.min or (tail[2], min(tail[3], d.min)) != (r, d.min):
        return None
    return x, k, r, rot, [rot.inputs[0][0], rot, rest]


def _partial_rotary(c, users: dict) -> tuple | None:
    found = _partial(c, users)
    if found is None:
        return None
    x, k, r, rot, absorbed = found
    desc = RotaryDesc(rot.subgraph.nodes + absorbed + [c], rotated=r)
    return [standing_for(c, Rotary.type_name, [(x, k), *rot.inputs[1:]], desc)], absorbed


def absorb_partial_rotaries(nodes: list) -> list:
    """``nodes`` (topological) with every partial rotary's Concat of a Rotary and the rest of
    its axis replaced by one Rotary of the whole tensor (module docstring)."""
    return fuse_matches(nodes, _partial_rotary)


_VIEWS = (Reshape, Transpose, Split, VariadicSplit, Slice, Squeeze, Unsqueeze)


def _origin(node: ProgramNode) -> ProgramNode:
    """The node a rotated tensor is cut, reshaped or transposed from (up its chain of views
    and of per-row norms, an RmsNorm and its scale by a constant: a layer's queries and keys
    reach their QKV projection, through their own norms in Qwen3)."""
    while node.inputs:
        if node.is_a(*_VIEWS, RmsNorm):
            node = node.inputs[0][0]
            continue
        computed = [s for s, _ in node.inputs if not s.is_constant]
        if not node.is_a(Multiply) or len(node.inputs) != 2 or len(computed) != 1:
            break
        node = computed[0]
    return node


def merge_rotary_pairs(nodes: list) -> list:
    """``nodes`` (topological) with each pair of one-tensor Rotary nodes that read the same
    ``cos`` and ``sin`` and rotate pieces of one node's output (:func:`_origin`: neither can
    depend on the other) as one Rotary of two tensors at the later one's place: the earlier
    one's result becomes output 1. Readers of the earlier one that came before the later one
    move after it (:func:`_topological`; an export may rotate the keys before the queries
    and append them to the cache before the queries' rotation)."""
    users = node_users(nodes)
    index = {id(n): i for i, n in enumerate(nodes)}
    waiting: dict[tuple, ProgramNode] = {}
    replace: dict[int, list] = {}
    moved: dict[int, tuple] = {}
    reorder = False
    for n in nodes:
        if not n.is_a(Rotary) or len(n.inputs) != 3:
            continue
        (c, ck), (s, sk) = n.inputs[1], n.inputs[2]
        key = (id(c), ck, id(s), sk, id(_origin(n.inputs[0][0])), n.subgraph.rotated)
        first = waiting.pop(key, None)
        if first is None:
            waiting[key] = n
            continue
        reorder = reorder or any(index[id(u)] < index[id(n)]
                                 for u, _ in users.get(id(first), ()))
        merged = ProgramNode(n.id, Rotary.type_name, {}, list(n.inputs) + [first.inputs[0]],
                             out_dtypes=[n.out_dtypes[0], first.out_dtypes[0]],
                             out_pshapes=[n.out_pshapes[0], first.out_pshapes[0]], name=n.name)
        merged.subgraph = RotaryDesc(n.subgraph.nodes + first.subgraph.nodes,
                                     n.subgraph.rotated)
        replace[id(n)] = [merged]
        moved[id(first)] = (merged, 1)
    out = splice(nodes, replace, set(moved), moved)
    return _topological(out) if reorder else out


def _topological(nodes: list) -> list:
    """``nodes`` in an order where every node follows its inputs, otherwise as they were
    (a depth-first walk of each node's inputs, in list order; no recursion: a chain of
    inputs is as deep as the model)."""
    done: set[int] = set()
    out: list = []
    for n in nodes:
        stack = [(n, 0)]
        while stack:
            node, i = stack.pop()
            if id(node) in done:
                continue
            if i < len(node.inputs):
                stack.append((node, i + 1))
                src = node.inputs[i][0]
                if id(src) not in done:
                    stack.append((src, 0))
                continue
            done.add(id(node))
            out.append(node)
    return out
