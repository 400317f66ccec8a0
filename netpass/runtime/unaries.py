"""One-input elementwise ops of one tensor as one :class:`~netpass.runtime.kinds.fused_elementwise.
Unaries` node, one launch.

A rotary embedding's tables are ``cos(f)`` and ``sin(f)`` of one tensor of angles, once per
decode step (LLaMA, Mistral, Qwen): two launches, each reading ``f``. One kernel reads each
element once and writes both.

Conditions (:func:`merge_unaries`): float32 ops of one input with an elementwise expression,
at least two reading the same tensor, none a model output, and no reader of any of them an
elementwise op (whose region one of them might have headed: nothing is lost to the merge).
"""
from __future__ import annotations

import numpy as np

from .kinds.fused_elementwise import Unaries, UnariesDesc
from .program_node import ProgramNode, node_users, splice

F32 = np.dtype(np.float32)


def _mergeable(n: ProgramNode, users: dict) -> bool:
    if n.row.expr is None or not n.row.fusable or len(n.inputs) != 1 or n.num_outputs != 1 \
            or n.subgraph is not None or n.out_dtypes[0] != F32:
        return False
    src, k = n.inputs[0]
    if src.out_dtypes[k] != F32 or n.row.expr(n.attrs, [F32], F32) is None:
        return False
    return all(u.row.expr is None and not u.is_result for u, _ in users.get(id(n), ()))


def merge_unaries(nodes: list) -> list:
    """``nodes`` (topological) with each group of mergeable ops (module docstring) of one
    tensor as one Unaries node at the first one's place (all read only that tensor, so every
    reader of the group comes after it), output ``i`` the group's ``i``-th op's result."""
    users = node_users(nodes)
    groups: dict[tuple, list] = {}
    for n in nodes:
        if _mergeable(n, users):
            src, k = n.inputs[0]
            groups.setdefault((id(src), k), []).append(n)
    replace: dict[int, list] = {}
    moved: dict[int, tuple] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        first = group[0]
        merged = ProgramNode(first.id, Unaries.type_name, {"outputs": len(group)},
                             list(first.inputs), out_dtypes=[n.out_dtypes[0] for n in group],
                             out_pshapes=[n.out_pshapes[0] for n in group], name=first.name)
        merged.subgraph = UnariesDesc(group)
        replace[id(first)] = [merged]
        moved.update((id(n), (merged, i)) for i, n in enumerate(group) if i)
    return splice(nodes, replace, set(moved), moved)
