"""A Concat of one elementwise op whose pieces differ only in constants, as that op over the
constants concatenated: ``cat((a * c_1, a * c_2), axis) = a * cat((c_1, c_2), axis)`` where
``a`` is 1 along the axis (it broadcasts there), one launch less.

LLaMA's rotary angles are ``cat((freqs, freqs), -1)`` of ``freqs = positions[..., None] *
inv_freq``: the Multiply then the Concat, each a launch per decode step. As one Multiply by
``cat((inv_freq, inv_freq))`` every element is the same product.

Conditions (:func:`distribute_concats`): the pieces output 0 of nodes of one elementwise row
with the same attrs (numpy broadcasting), read by the Concat alone; at each input position
either one tensor for all pieces, whose dim along the axis is statically 1 (or absent), or a
constant in each piece whose size along the axis is static; at least one tensor and at least
one constant (the concatenated constant gives the output its size along the axis: Relu of a
tensor 1 there is 1 there, whatever the pieces); the concatenated constants at most
``MAX_ELEMENTS``.
"""
from __future__ import annotations

import numpy as np

from ..core.boundary import Constant
from ..ops.movement import Concat
from .program_node import ProgramNode, node_users, splice

MAX_ELEMENTS = 1 << 16


def _broadcasts_along(ps, rank: int, axis: int) -> bool:
    """Whether a tensor of partial shape ``ps`` is 1 along ``axis`` of a ``rank`` output."""
    if not ps.rank_is_static or len(ps) > rank:
        return False
    i = axis - (rank - len(ps))
    return i < 0 or ps[i].min == ps[i].max == 1


def _constant_piece(c: ProgramNode, piece: ProgramNode, rank: int,
                    axis: int) -> np.ndarray | None:
    """The constant ``c`` of ``piece`` as the piece sees it along the axis (rank ``rank``,
    its size there the piece's), or None."""
    d = piece.out_pshapes[0][axis]
    v = np.asarray(c.value)
    if d.min != d.max or v.ndim > rank:
        return None
    v = v.reshape((1,) * (rank - v.ndim) + v.shape)
    if v.shape[axis] not in (1, d.min):
        return None
    return np.broadcast_to(v, v.shape[:axis] + (d.min,) + v.shape[axis + 1:])


def _distributed(c: ProgramNode, users: dict, made: list) -> ProgramNode | None:
    """The node standing for Concat ``c`` (its constants appended to ``made``), or None."""
    ps = c.out_pshapes[0]
    if len(c.inputs) < 2 or not ps.rank_is_static or "axis" not in c.attrs:
        return None
    rank = len(ps)
    axis = int(c.attrs["axis"]) % rank
    pieces = [m for m, _ in c.inputs]
    m0 = pieces[0]
    if m0.row.expr is None or m0.attrs.get("auto_broadcast", "numpy") != "numpy" \
            or any(k for _, k in c.inputs):
        return None
    for m in pieces:
        if m.row is not m0.row or m.attrs != m0.attrs or len(m.inputs) != len(m0.inputs) \
                or m.num_outputs != 1 or m.out_dtypes[0] != c.out_dtypes[0] \
                or any(u is not c for u, _ in users.get(id(m), ())):
            return None
    inputs: list = []
    for j, (src, k) in enumerate(m0.inputs):
        if not src.is_constant:
            if any(m.inputs[j] != (src, k) for m in pieces) \
                    or not _broadcasts_along(src.out_pshapes[k], rank, axis):
                return None
            inputs.append((src, k))
            continue
        parts: list[np.ndarray] = []
        for m in pieces:
            part = _constant_piece(m.inputs[j][0], m, rank, axis) \
                if m.inputs[j][0].is_constant else None
            if part is None:
                return None
            parts.append(part)
        if len({p.shape[:axis] + p.shape[axis + 1:] for p in parts}) != 1:
            return None
        value = np.concatenate(parts, axis)
        if value.size > MAX_ELEMENTS:
            return None
        const = ProgramNode(f"{c.id}/{j}", Constant.type_name, value=value)
        made.append(const)
        inputs.append((const, 0))
    if len({s.is_constant for s, _ in inputs}) < 2:
        return None  # (with no constant, nothing carries the pieces' sizes along the axis)
    return ProgramNode(c.id, m0.kind, m0.attrs, inputs, out_dtypes=c.out_dtypes,
                       out_pshapes=c.out_pshapes, name=c.name)


def distribute_concats(nodes: list) -> list:
    """``nodes`` (topological) with each Concat that the module docstring's conditions allow
    replaced by its pieces' op over the concatenated constants (the pieces then unread)."""
    users = node_users(nodes)
    replace: dict[int, list] = {}
    dropped: set[int] = set()
    for c in nodes:
        if not c.is_a(Concat):
            continue
        made: list = []
        node = _distributed(c, users, made)
        if node is not None:
            replace[id(c)] = made + [node]
            dropped.update(id(m) for m, _ in c.inputs)
    return splice(nodes, replace, dropped)
