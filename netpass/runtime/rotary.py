"""Rotary position embeddings as one :class:`~netpass.runtime.kinds.fused_elementwise.Rotary` node,
one launch.

LLaMA, Mistral, Qwen and GPT-NeoX rotate queries and keys with transformers'
``x * cos + rotate_half(x) * sin``, ``rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])``. An
export writes that as two Slices, a Negative, a Concat, two Multiplies and an Add: six launches
per rotated tensor (twelve per layer, for the queries and the keys), and three tensors of the
activations' size written and read back. One kernel reads each element and its partner in the
other half once.

GPT-J and CodeGen rotate neighbouring pairs instead (``rotate_every_two(x) = flatten(
stack((-x[..., 1::2], x[..., ::2]), -1))``, ``cos`` and ``sin`` repeated per pair): stepped
Slices, a Negative, two Unsqueezes, a Concat and a Reshape whose target the export computes
from the Concat's shape. The same Rotary takes it (``RotaryDesc.interleaved``); the nodes a
ShapeOf reads stay for their shapes, never run.

A layer rotates its queries and its keys by the same ``cos`` and ``sin``:
:func:`merge_rotary_pairs` makes the two Rotary nodes one, two tensors in one launch.

Partial rotary (GPT-NeoX, Phi, StableLM: ``rotary_pct`` < 1) rotates the first ``r`` elements
of the last axis and passes the rest: ``cat(rotate(x[..., :r]), x[..., r:])``, two slice
copies and a Concat around the rotation. :func:`absorb_partial_rotaries` makes that one Rotary
of ``x`` whose kernel copies the elements past ``r`` (``RotaryDesc.rotated``; GPT-J writes the
same with ``r`` the whole axis and an empty rest).

Conditions (:func:`fuse_rotaries`): float32; ``Add(Multiply(x, cos), Multiply(Concat(
Negative(Slice(x, d/2:)), Slice(x, :d/2)), sin))`` (either operand order) along the last axis,
whose size ``d`` is static and even; the Slices by constant bounds with step 1; every op but
``x`` read only by the next one; the Add's shape that of ``x`` (``cos`` and ``sin`` broadcast
into it).
"""
from __future__ import annotations

import numpy as np

from ..ops.elementwise import Add, Multiply, Negative
from ..ops.indexing import Gather
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
from .kinds.base import same_dim
from .kinds.fused_elementwise import Rotary, RotaryDesc
from .kinds.normalization import RmsNorm
from .program_node import (
    ProgramNode,
    data_users,
    droppable,
    fuse_matches,
    node_users,
    read_once,
    splice,
    standing_for,
)
from .shape_terms import reshape_keeps_prefix

F32 = np.dtype(np.float32)


def _const_ints(node) -> list[int] | None:
    return [int(v) for v in np.asarray(node.value).reshape(-1)] if node.is_constant else None


def _last_axis_slice(s, users: dict, step: int = 1) -> tuple | None:
    """(x, k, start, stop) of a Slice of ``x`` along its last axis by ``step``, its data read
    once."""
    if not s.is_a(Slice) or len(s.inputs) < 4 or s.is_output or len(data_users(s, users)) != 1:
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
    start, stop, by = bounds[:3]
    axis = bounds[3] % len(ps) if len(bounds) > 3 else 0
    return (x, k, start, stop) if by == step and axis == len(ps) - 1 else None


def _rotate_half(c, users: dict) -> tuple | None:
    """(x, k) when ``c`` is ``cat(-x[..., d/2:], x[..., :d/2])`` over the last axis of an
    ``x`` whose last dim is static and even."""
    if not c.is_a(Concat) or len(c.inputs) != 2 or c.is_output \
            or len(data_users(c, users)) != 1:
        return None
    neg, _ = c.inputs[0]
    if not neg.is_a(Negative) or neg.is_output or len(data_users(neg, users)) != 1:
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


def _new_last_axis(u, users: dict):
    """The input of Unsqueeze ``u`` when it appends an axis of 1 (its data read once)."""
    if not u.is_a(Unsqueeze) or len(u.inputs) != 2 or u.is_output \
            or len(data_users(u, users)) != 1:
        return None
    axes, ps = _const_ints(u.inputs[1][0]), u.out_pshapes[0]
    if axes is None or len(axes) != 1 or not ps.rank_is_static \
            or axes[0] % len(ps) != len(ps) - 1:
        return None
    return u.inputs[0][0]


def _rotate_pairs(r, users: dict) -> tuple | None:
    """(x, k, the nodes of the rotation) when ``r`` is GPT-J's ``rotate_every_two(x)``:
    ``flatten(stack((-x[..., 1::2], x[..., ::2]), -1), -2)``, an Unsqueeze of each half and a
    Concat along the new axis, reshaped back to ``x``'s dims (its target proven to keep
    them), over a last axis of static, even size."""
    if not r.is_a(Reshape) or r.is_output or len(data_users(r, users)) != 1:
        return None
    c = r.inputs[0][0]
    cps = c.out_pshapes[0]
    if not c.is_a(Concat) or len(c.inputs) != 2 or c.is_output \
            or len(data_users(c, users)) != 1 or not cps.rank_is_static \
            or int(c.attrs.get("axis", 0)) % len(cps) != len(cps) - 1:
        return None
    (u_neg, _), (u_even, _) = c.inputs
    neg, lo = _new_last_axis(u_neg, users), _new_last_axis(u_even, users)
    if neg is None or lo is None or not neg.is_a(Negative) or neg.is_output \
            or len(data_users(neg, users)) != 1:
        return None
    hi = neg.inputs[0][0]
    odd, even = _last_axis_slice(hi, users, 2), _last_axis_slice(lo, users, 2)
    if odd is None or even is None or odd[:2] != even[:2]:
        return None
    x, k = odd[:2]
    ps, rps = x.out_pshapes[k], r.out_pshapes[0]
    rank, d = len(ps), ps[len(ps) - 1]
    if not d.is_static or d.min % 2 or (odd[2], even[2]) != (1, 0) \
            or odd[3] < d.min or even[3] < d.min - 1 or not rps.rank_is_static \
            or len(rps) != rank or rps[rank - 1] != d or not _reshaped_alike(r, x, k, rank):
        return None
    return x, k, [hi, neg, u_neg, lo, u_even, c, r]


def _reshaped_alike(r, x, k: int, rank: int) -> bool:
    """Whether Reshape ``r`` of a tensor of ``x``'s size (output ``k``, ``rank`` dims) gives
    ``x``'s dims: each the same static size or symbol (the dynamo exporter reads the batch and
    sequence off the model's input), or a target that keeps its input's leading dims
    (TorchScript computes it from the stacked halves' shape)."""
    rps = r.out_pshapes[0]
    return all(same_dim(a, b) for a, b in zip(rps, x.out_pshapes[k])) \
        or reshape_keeps_prefix(r, rank - 1)


def _product(m, users: dict) -> list[tuple]:
    """The two (operand, other) orders of Multiply ``m`` read once, else none."""
    if not m.is_a(Multiply) or not read_once(m, users):
        return []
    a, b = m.inputs
    return [(a, b), (b, a)]


def _rotation(r, users: dict) -> tuple | None:
    """(x, k, the rotation's nodes, interleaved) when ``r`` is ``rotate_half(x)`` or
    ``rotate_every_two(x)``."""
    half = _rotate_half(r, users)
    if half is not None:
        neg = r.inputs[0][0]
        return half[0], half[1], [neg.inputs[0][0], neg, r.inputs[1][0], r], False
    pairs = _rotate_pairs(r, users)
    return None if pairs is None else (*pairs, True)


def _match(n, users: dict) -> tuple | None:
    """(x, cos, sin, replaced nodes, interleaved) when Add ``n`` rotates ``x`` (module
    docstring)."""
    if not n.is_a(Add) or n.out_dtypes[0] != F32 or n.num_outputs != 1:
        return None
    for (m1, _), (m2, _) in (n.inputs, n.inputs[::-1]):
        for rot, sin in _product(m2, users):
            found = _rotation(rot[0], users)
            if found is None:
                continue
            x, rotation, interleaved = found[:2], found[2], found[3]
            for xs, cos in _product(m1, users):
                if xs == x and n.out_pshapes[0] == x[0].out_pshapes[x[1]] \
                        and all(s.out_dtypes[k] == F32 for s, k in (x, cos, sin)):
                    return x, cos, sin, rotation + [m1, m2], interleaved
    return None


def _rotary(n, users: dict) -> tuple | None:
    found = _match(n, users)
    if found is None:
        return None
    x, cos, sin, chain, interleaved = found
    desc = RotaryDesc(chain, interleaved=interleaved)
    return [standing_for(n, Rotary.type_name, [x, cos, sin], desc)], droppable(chain, None, users)


def fuse_rotaries(nodes: list) -> list:
    """``nodes`` (topological) with every rotation (``rotate_half`` or ``rotate_every_two``)
    replaced by a Rotary node."""
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
    if head[2] != 0 or r % 2 or not 0 < r <= d.min \
            or (min(tail[2], d.min), min(tail[3], d.min)) != (r, d.min):
        return None
    return x, k, r, rot, [rot.inputs[0][0], rot, rest]


def _partial_rotary(c, users: dict) -> tuple | None:
    found = _partial(c, users)
    if found is None:
        return None
    x, k, r, rot, absorbed = found
    ps = x.out_pshapes[k]
    rotated = r if r < ps[len(ps) - 1].min else None
    desc = RotaryDesc(rot.subgraph.nodes + absorbed + [c], rotated, rot.subgraph.interleaved)
    return [standing_for(c, Rotary.type_name, [(x, k), *rot.inputs[1:]], desc)], \
        droppable(absorbed, None, users)


def absorb_partial_rotaries(nodes: list) -> list:
    """``nodes`` (topological) with every partial rotary's Concat of a Rotary and the rest of
    its axis replaced by one Rotary of the whole tensor (module docstring)."""
    return fuse_matches(nodes, _partial_rotary)


_VIEWS = (Reshape, Transpose, Split, VariadicSplit, Slice, Squeeze, Unsqueeze)


def _origin(node: ProgramNode) -> ProgramNode:
    """The node a rotated tensor is cut, picked, reshaped or transposed from (up its chain of
    views, of Gathers by constant indices, and of per-row norms, an RmsNorm and its scale by
    a constant: a layer's queries and keys reach their QKV projection, through their own
    norms in Qwen3, by Falcon's pick of its key head in TorchScript)."""
    while node.inputs:
        if node.is_a(*_VIEWS, RmsNorm) or node.is_a(Gather) and node.inputs[1][0].is_constant:
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
        key = (id(c), ck, id(s), sk, id(_origin(n.inputs[0][0])), n.subgraph.key())
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
                                     n.subgraph.rotated, n.subgraph.interleaved)
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
