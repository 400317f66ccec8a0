"""GEMMs without the reshapes around them: ``Reshape([..., K] -> [M, K]) -> FullyConnected ->
Reshape([M, N] -> [..., N])`` becomes one FullyConnected on ``[..., K]``.

Exporters write a Linear layer on a 3-D activation as a flatten, a 2-D GEMM and an unflatten
(transformers' GPT-2 ``Conv1D``: ``x.view(-1, K)``, ``addmm``, ``view(size_out)`` with
``size_out`` taken from ``x``'s own shape). The runtime's GEMMs take any number of leading
dims, so the reshapes move no data; but they stand between the GEMM and what would fuse with
it: a bias, GELU or residual Add after the unflatten cannot join the GEMM's epilogue, and a
LayerNorm before the flatten cannot fold into its prologue (``norm_gemm``). Each such pair
also keeps a ShapeOf sub-graph of a dozen host nodes alive.

Conditions (:func:`drop_gemm_reshapes`): a FullyConnected (or a MatMul by a 2-D B without
``transpose_a``) whose A is a Reshape to rank 2 that keeps the last dim of its input ``x``
(statically, or because its target's last element is ``x``'s last dim), and whose only user
(after single-user elementwise ops by per-column constants, a MatMul's bias) is a Reshape
whose target is, element by element, ``x``'s leading dims then N (traced through
the ShapeOf sub-graph, ``shape_terms``; a dim read off another tensor counts where it is the
same symbol: the dynamo exporter reads the batch and sequence off the model's input).
Row-major order makes the two equal: row ``i`` of the flattened ``x`` is leading index ``i``
of ``x``. A flatten that merges x's last static dims into K (an attention's heads, as the
dynamo exporter writes its output projection) leaves a view of ``x`` keeping the other dims
in its place. What the removed reshapes leave unused (their ShapeOf sub-graphs) goes too.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.boundary import Constant
from ..core.dimension import Dimension
from ..core.shape import PartialShape
from ..ops.legacy import FullyConnected
from ..ops.matmul import MatMul
from ..ops.movement import Reshape
from .kinds.base import same_dim
from .program_node import ProgramNode, node_users
from .shape_terms import dims_terms, shape_terms, without_unused_shape_nodes

CHAIN_LIMIT = 4  # per-column ops (a bias) a MatMul's value may pass before its unflatten


def _n_of(g: Any) -> int | None:
    """The GEMM's static N, or None."""
    ps = g.out_pshapes[0]
    if not ps.rank_is_static or not len(ps):
        return None
    d = ps[len(ps) - 1]
    return d.min if d.min == d.max else None


def _gemm(g: Any) -> bool:
    if g.is_a(FullyConnected):
        return True
    if not g.is_a(MatMul) or g.attrs.get("transpose_a") or g.subgraph is not None:
        return False
    b, k = g.inputs[1]
    ps = b.out_pshapes[k]
    return ps.rank_is_static and len(ps) == 2


def _flatten_source(r: Any) -> tuple | None:
    """(x, output, merged) when Reshape ``r`` flattens ``x`` to [rows, K]: K is x's last dim
    (``merged`` 1), or the product of its last ``merged`` static dims with a leading dim
    left (an attention's output [b, s, heads, d], as the dynamo exporter flattens it)."""
    if not r.is_a(Reshape) or len(r.inputs) < 2:
        return None
    x, xk = r.inputs[0]
    xd, rps = dims_terms(x, xk), r.out_pshapes[0]
    if xd is None or len(xd) < 2 or not rps.rank_is_static or len(rps) != 2:
        return None
    last = rps[1]
    if isinstance(xd[-1], int) and last.min == last.max == xd[-1] and xd[-1] > 0:
        return x, xk, 1
    target = shape_terms(*r.inputs[1])
    if target is not None and len(target) == 2 and target[1] == xd[-1] \
            and not isinstance(xd[-1], int):
        return x, xk, 1
    k = 1
    for merged in range(1, len(xd)):
        d = xd[-merged]
        if not isinstance(d, int) or d <= 0:
            break
        k *= d
        if merged > 1 and last.min == last.max == k:
            return x, xk, merged
    return None


def _restores(r2: Any, x: Any, xk: int, n: int, by_id: dict, merged: int = 1) -> bool:
    """Whether Reshape ``r2``'s target is ``x``'s leading dims (but its last ``merged``),
    then ``n``: term by term the same, or dims of other tensors that are provably the same
    (one symbol: the dynamo exporter reads the batch and sequence off the model's input, not
    off ``x``)."""
    if not r2.is_a(Reshape) or len(r2.inputs) < 2:
        return False
    want = dims_terms(x, xk)
    target = shape_terms(*r2.inputs[1])
    if want is None or target is None or len(want) - merged + 1 != len(target):
        return False
    want = want[:-merged] + [n]
    return all(t == w or _same_dim_terms(t, w, by_id) for t, w in zip(target, want)) \
        and all(t != 0 for t in target if isinstance(t, int))


def _same_dim_terms(a: Any, b: Any, by_id: dict) -> bool:
    """Whether ``a`` and ``b`` are ``dims_terms`` items of dims with one symbol."""
    if not (isinstance(a, tuple) and isinstance(b, tuple)) or a[1] not in by_id \
            or b[1] not in by_id:
        return False
    da, db = (by_id[t[1]].out_pshapes[t[2]][t[3]] for t in (a, b))
    return same_dim(da, db)


def _per_column(u: Any, j: int, n: int) -> bool:
    """Whether elementwise ``u`` reads input ``j`` with constants that vary at most along the
    last axis (a bias): it computes the same on [rows, n] as on [..., n] (an elementwise op
    with numpy broadcasting: the fusable ones)."""
    if not u.row.fusable or u.num_outputs != 1:
        return False
    for i, (s, _) in enumerate(u.inputs):
        if i == j:
            continue
        if not s.is_constant:
            return False
        shape = np.shape(s.value)
        if len(shape) > 2 or any(d != 1 for d in shape[:-1]) or (shape and shape[-1] not in (1, n)):
            return False
    return True


def _unflatten(g: Any, users: dict, n: int) -> tuple | None:
    """(the unflatten Reshape, the per-column ops between ``g`` and it) when ``g``'s value
    reaches a Reshape through single-user per-column ops only (a MatMul's bias Add)."""
    chain: list = []
    cur = g
    while len(chain) <= CHAIN_LIMIT:
        us = users.get(id(cur), [])
        if len(us) != 1 or us[0][0].out_dtypes[0] != g.out_dtypes[0]:
            return None
        u, j = us[0]
        if u.is_a(Reshape):
            return (u, chain) if j == 0 else None
        if not _per_column(u, j, n):
            return None
        chain.append(u)
        cur = u
    return None


def drop_gemm_reshapes(nodes: list) -> list:
    """``nodes`` (topological, users not linked yet) with the flatten/unflatten Reshape pairs
    around GEMMs removed (module docstring), and the shape sub-graphs only they used."""
    users = node_users(nodes)
    by_id = {id(m): m for m in nodes}
    redirect: dict[int, Any] = {}  # id(unflatten reshape) -> the node now producing its value
    views: dict[int, list] = {}  # id(GEMM) -> the view of x it now reads, and its target
    for g in nodes:
        if not _gemm(g) or g.num_outputs != 1:
            continue
        src = _flatten_source(g.inputs[0][0]) if g.inputs[0][1] == 0 else None
        n = _n_of(g)
        if src is None or n is None:
            continue
        x, xk, merged = src
        found = _unflatten(g, users, n)
        if found is None or not _restores(found[0], x, xk, n, by_id, merged):
            continue
        r2, chain = found
        g.inputs[0] = (x, xk)
        if merged > 1:  # (x's merged dims as one: a view keeping its leading dims)
            views[id(g)] = _merged_view(g, x, xk, merged)
            g.inputs[0] = (views[id(g)][-1], 0)
        for m in [g, *chain]:  # each now computes on x's leading dims
            m.out_pshapes = list(r2.out_pshapes)
            m.is_dynamic = r2.is_dynamic
        redirect[id(r2)] = chain[-1] if chain else g
    if not redirect:
        return nodes
    for m in nodes:
        m.inputs = [((redirect[id(s)], 0) if id(s) in redirect else (s, k)) for s, k in m.inputs]
    if views:
        nodes = [v for m in nodes for v in views.get(id(m), []) + [m]]
    return without_unused_shape_nodes(nodes, set(redirect))


def _merged_view(g: Any, x: Any, xk: int, merged: int) -> list:
    """A Reshape of ``x`` keeping its leading dims (``special_zero``) and merging its last
    ``merged`` static dims, and its target: what GEMM ``g`` reads instead of the flatten."""
    ps = x.out_pshapes[xk]
    lead, k = len(ps) - merged, int(np.prod([d.min for d in list(ps)[-merged:]]))
    target = ProgramNode(f"{g.id}/rows", Constant.type_name,
                         value=np.array([0] * lead + [k], np.int64))
    view = ProgramNode(f"{g.id}/rows_view", Reshape.type_name, {"special_zero": True},
                       [(x, xk), (target, 0)], out_dtypes=[x.out_dtypes[xk]],
                       out_pshapes=[PartialShape(list(ps)[:lead] + [Dimension(k)])])
    return [target, view]
