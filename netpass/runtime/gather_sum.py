"""Sums of row gathers: ``Gather(T_0, I_0, 0) + Gather(T_1, I_1, 0) [+ ...]`` as one
:class:`~netpass.runtime.kinds.indexing.GatherSum` node, one launch.

A transformer's input embeddings are the token table's rows plus the position table's (BERT
adds a token-type table's too): two or three gathers and the adds, each a launch per step,
and an embedding-sized tensor written and read back between them. One kernel reads each row
once and writes the sum.

Conditions (:func:`fuse_gather_sums`): a float32 Add tree (numpy broadcast) whose leaves are
Gathers along axis 0 (constant axis, no batch dims) of float32 tables with the same static
row shape, each Gather and inner Add read by the tree alone (besides ShapeOfs, which keep
it as a node that never runs) and not a model output.
"""
from __future__ import annotations

import numpy as np

from ..ops.elementwise import Add
from ..ops.indexing import Gather
from .kinds.indexing import GatherSum, GatherSumDesc
from .program_node import node_users, splice, standing_for

F32 = np.dtype(np.float32)


def _read_once(n, users: dict) -> bool:
    """Whether ``n``'s data has one reader (ShapeOfs read only its shape)."""
    return not n.is_output and n.num_outputs == 1 and \
        sum(u.reads_data for u, _ in users.get(id(n), ())) == 1


def _row_gather(g, users: dict) -> bool:
    """A float32 Gather of whole rows (axis 0, batch dims 0) of a table with a static row
    shape, read once."""
    if not g.is_a(Gather) or not _read_once(g, users) or g.attrs.get("batch_dims", 0) \
            or len(g.inputs) != 3 or g.out_dtypes[0] != F32:
        return False
    axis, (table, k) = g.inputs[2][0], g.inputs[0]
    ps = table.out_pshapes[k]
    if not axis.is_constant or np.asarray(axis.value).size != 1 or not ps.rank_is_static \
            or not len(ps) or table.out_dtypes[k] != F32:
        return False
    return int(np.asarray(axis.value).reshape(-1)[0]) % len(ps) == 0 and \
        all(d.min == d.max for d in list(ps)[1:])


def _leaves(a, users: dict, inner: list) -> list | None:
    """The Gathers an Add tree rooted at ``a`` sums, left to right (its inner Adds appended to
    ``inner``), or None when a leaf is something else."""
    out: list = []
    for src, k in a.inputs:
        if k != 0:
            return None
        if _row_gather(src, users):
            out.append(src)
        elif src.is_a(Add) and _read_once(src, users) and src.out_dtypes[0] == F32 \
                and src.attrs.get("auto_broadcast", "numpy") == "numpy":
            inner.append(src)
            sub = _leaves(src, users, inner)
            if sub is None:
                return None
            out.extend(sub)
        else:
            return None
    return out


def _rows(g) -> list:
    t, k = g.inputs[0]
    return [d.min for d in list(t.out_pshapes[k])[1:]]


def fuse_gather_sums(nodes: list) -> list:
    """``nodes`` (topological) with every sum of row gathers replaced by a GatherSum node
    (inputs ``[T_0, I_0, T_1, I_1...]``)."""
    users = node_users(nodes)
    replace: dict[int, list] = {}
    dropped: set[int] = set()
    for a in reversed(nodes):  # (the root of a tree first: its inner Adds are then dropped)
        if id(a) in dropped or not a.is_a(Add) or a.out_dtypes[0] != F32 \
                or a.attrs.get("auto_broadcast", "numpy") != "numpy":
            continue
        inner: list = []
        gathers = _leaves(a, users, inner)
        if not gathers or len(gathers) < 2 or any(_rows(g) != _rows(gathers[0]) for g in gathers):
            continue
        ins = [inp for g in gathers for inp in g.inputs[:2]]
        replace[id(a)] = [standing_for(a, GatherSum.type_name, ins, GatherSumDesc(gathers))]
        dropped.update(id(n) for n in gathers + inner if len(users[id(n)]) == 1)
    return splice(nodes, replace, dropped)
