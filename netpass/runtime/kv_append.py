"""A decode step's key/value append inside its attention kernel.

A decoder appends each layer's new keys and values to its cache (``Concat(ReadValue(v), x)``
growing in place in the variable's buffer: :mod:`~netpass.runtime.state`) and then attends
over the grown cache. Run apart, the append is a strided copy launch per variable and step,
and the new keys are first moved into the cache layout by a Transpose launch of their own:
four launches per layer besides the attention, for a row of each.

:func:`attach_kv_appends` gives a fused attention whose k and v read two such appends (k
through the transposed view of its cache, or directly) the appends' new rows as two more
inputs (``AttentionDesc.appends``): for a step of up to ``kernels.decode.DECODE_ROWS`` new
rows the decode attention kernel reads them from there and writes them into the cache itself
(``ProgramNode.append_by``: the append then copies nothing). A longer step over empty caches
(a prompt after ``reset_state``: its keys are its new rows) is read from the new rows by the
flash or row kernel, whose work-groups write their query rows into the caches
(``kernels.attention.fill_caches``); a longer step over a past (a chunk of a prompt) is
appended by copies as before. The Transposes that lay the new rows out as the cache become
permuted views (the copy and the kernel read through their strides), and so the projection's
Split becomes strided views too (``Program._mark_strided_views``).

Conditions: float32; both caches append along their second-to-last axis (``[..., rows,
head]``) and are read by nothing but this attention (through its views of them), their
Assigns and ShapeOf; the new rows are the attention's query rows (the same dim). The views:
k's swap of the last two axes (unless m1 transposes b), and for either cache batch-view
Reshapes that keep the last two dims and regroup those before (bmm exports, Bloom's and
XGLM's: the cache ``[b, h, n, d]`` read as ``[b * h, n, d]``; the attention may have batch
views of its scores too). The kernels lay the new rows ``[b, h, rows, d]`` over the batch
layout they walk (``attention_views.regrouped``), so they land at the cache's strided places;
grouped-query heads take no Reshapes (the kernels keep them a batch dim of their own).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ops.movement import Reshape, Transpose
from ..ops.state import Assign
from .kinds import FusedAttention
from .kinds.base import same_dim
from .program_node import data_users
from .state_marks import APPEND


def _append_of(node: Any) -> bool:
    """``node`` is an in-place cache append along its second-to-last axis."""
    ps = node.out_pshapes[0]
    return node.state_role == APPEND and ps.rank_is_static and node.state_axis == len(ps) - 2 \
        and node.out_dtypes[0] == np.float32


def _swaps_last_two(order: tuple) -> bool:
    n = len(order)
    return n >= 2 and list(order) == list(range(n - 2)) + [n - 1, n - 2]


def _permute(x: Any, reader: Any, j: int) -> None:
    """A Transpose by a constant order laying the new rows out as the cache becomes a view
    its readers (the append's copy, ``reader`` at input ``j``) walk through its strides."""
    t = x
    if not t.is_a(Transpose) or t.is_output or t.fused or t.fused_into is not None \
            or not t.inputs[1][0].is_constant or t.in_shape_of_subgraph or t.permute_view \
            or t.inputs[0][0].out_dtypes[t.inputs[0][1]] != t.out_dtypes[0]:
        return
    order = tuple(int(v) for v in np.asarray(t.inputs[1][0].value).reshape(-1))
    if sorted(order) != list(range(len(order))):
        return
    t.permute_view = order
    t.optimized = True
    reader.permuted_inputs[j] = order


def _batch_view(node: Any) -> bool:
    """``node`` is a Reshape that keeps the last two dims (rows and head) of its data input
    and regroups only the dims before them (a bmm export's ``[b, h, n, d] -> [b * h, n, d]``
    and back): a view of a capacity layout (``state_marks``), row for row."""
    if not node.is_a(Reshape) or node.is_output or node.fused or node.fused_into is not None \
            or node.in_shape_of_subgraph:
        return False
    src, k = node.inputs[0]
    ps, out = src.out_pshapes[k], node.out_pshapes[0]
    return ps.rank_is_static and out.rank_is_static and len(ps) >= 2 and len(out) >= 2 \
        and src.out_dtypes[k] == node.out_dtypes[0] \
        and all(same_dim(ps[len(ps) - i], out[len(out) - i]) for i in (1, 2))


def _cache_of(x: Any, swaps: int) -> tuple[Any, list] | None:
    """The node an attention input ``x`` reads through batch-view Reshapes (:func:`_batch_view`)
    and exactly ``swaps`` permuted views swapping the last two axes, with the nodes between
    (``x`` first); None where it reads through anything else."""
    chain: list = []
    while True:
        if x.permute_view is not None and _swaps_last_two(x.permute_view) and swaps:
            swaps -= 1
        elif _batch_view(x):
            pass
        else:
            break
        chain.append(x)
        x = x.inputs[0][0]
    return (x, chain) if not swaps else None


def _read_only_along(cache: Any, chain: list, a: Any) -> bool:
    """Whether ``cache`` (an append) is read by nothing but its Assigns and ``chain`` (the
    views from the attention ``a`` back to it, nearest ``a`` first) and each view only by the
    next one (ShapeOf aside)."""
    readers = [a] + chain
    for node, reader in zip([*chain, cache], readers):
        ok = (Assign,) if node is cache else ()
        if any(u is not reader and not (ok and u.is_a(*ok)) for u, _ in data_users(node)):
            return False
    return True


def attach_kv_appends(program: Any) -> bool:
    """Attach the appends to the fused attentions that take them (module docstring); whether
    any did."""
    changed = False
    for a in program.nodes:
        desc = a.subgraph
        if not a.is_a(FusedAttention) or desc is None or desc.appends or desc.ta or desc.tv:
            continue
        found_k = _cache_of(a.inputs[1][0], 0 if desc.tb else 1)
        found_v = _cache_of(a.inputs[2][0], 0)
        if found_k is None or found_v is None:
            continue
        (ck, k_chain), (cv, v_chain) = found_k, found_v
        if desc.group > 1 and any(n.is_a(Reshape) for n in k_chain + v_chain):
            continue  # (the kernels' grouped heads are k's and v's own batch dim)
        if ck is cv or not (_append_of(ck) and _append_of(cv)) or \
                not _read_only_along(ck, k_chain, a) or not _read_only_along(cv, v_chain, a):
            continue
        xk, xv = ck.inputs[1], cv.inputs[1]
        q_ps = a.inputs[0][0].out_pshapes[a.inputs[0][1]]
        rows = [x[0].out_pshapes[x[1]] for x in (xk, xv)]
        if not q_ps.rank_is_static or any(not ps.rank_is_static for ps in rows) or \
                not all(same_dim(q_ps[len(q_ps) - 2], ps[len(ps) - 2]) for ps in rows):
            continue
        first = len(a.inputs)
        a.inputs += [xk, xv]
        for j, (src, k) in enumerate((xk, xv), first):
            src.users[k].append((a, j))
            a.strided_inputs.add(j)
            _permute(src, a, j)
        desc.appends = 2
        ck.append_by = cv.append_by = a
        changed = True
    return changed
