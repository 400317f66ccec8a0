"""Fused attention: ``MatMul -> elementwise score ops -> Softmax -> MatMul [-> Transpose]`` as
one program node (kind ``FusedAttention``) and one kernel launch.

Exported transformers compute attention as such a chain: ``q @ k^T``, a scale (Multiply
or Divide), a mask (an Add of a sliced constant, or a Where on a boolean), a softmax over the
keys, ``@ v``, and often a Transpose that brings the heads back next to the features. Run as
separate primitives that is five or six launches per layer and an ``[.., M, N]`` score tensor
written and read back, whose size grows with the square of a decoder's sequence. OpenVINO's
GPU plugin fuses it into its own SDPA primitive; :func:`fuse_attention` does the same at
program build time, on the program's nodes, for any score chain whose side inputs broadcast
into the scores.

The kernel (:func:`netpass.runtime.kernels.attention`, the FusedAttention row of the op table:
:mod:`netpass.runtime.kinds.attention`) gives each work-group one query row of one batch: the
row's scores for a block of keys at a time (one key per work-item, the score ops applied with
their side inputs read through strides), a running maximum and sum (online softmax), and the
value rows accumulated per output column. q, k and v are read through strides (permuted views
of the heads need no copy), and the output is written in the layout of the Transpose it
absorbed.

The node keeps the absorbed nodes: shape inference and the host reference run them in turn
(:class:`AttentionDesc`).
"""
from __future__ import annotations

import numpy as np

from ..ops.elementwise import IsNaN, Multiply, Select
from ..ops.matmul import MatMul
from ..ops.movement import Transpose
from ..ops.normalization import Softmax
from .impls import FusedDesc, chained
from .kinds.attention import MAX_HEAD, AttentionDesc, FusedAttention
from .program_node import ProgramNode, node_users, splice

F32 = np.dtype(np.float32)


def _static_dim(ps, i: int) -> int | None:
    if not ps.rank_is_static or len(ps) < 2:
        return None
    d = ps[i]
    return d.min if d.min == d.max else None


def _side_ok(src, k: int, scores_ps) -> bool:
    """A score op's side input must have at most the scores' rank. Whether it broadcasts into
    the scores without enlarging their last two dims is checked per shape: the kernel takes
    the shapes where it does, the host reference the others (``attention_impl``)."""
    ps = src.out_pshapes[k]
    return ps.rank_is_static and len(ps) <= len(scores_ps)


def _score_source(src, users: dict, depth: int = 0):
    """The MatMul whose scores ``src`` carries, following single-user score ops back, else
    None."""
    if src.is_constant or src.num_outputs != 1 or len(users.get(id(src), ())) != 1 \
            or src.out_dtypes[0] != F32 or depth > 16:
        return None
    if src.is_a(MatMul):
        return src
    if not src.row.fusable or src.is_output:
        return None
    for s, _ in src.inputs:
        found = _score_source(s, users, depth + 1)
        if found is not None:
            return found
    return None


def _chain_input(node, users: dict) -> int | None:
    """The input of a score op that carries the scores (leads back to their MatMul through
    single-user score ops; a mask computed by elementwise ops does not)."""
    for j, (src, _) in enumerate(node.inputs):
        if _score_source(src, users) is not None:
            return j
    return None


def _match(sm, users: dict):
    """(m1, chain nodes, m2, transpose or None) when ``sm`` closes an attention, else None."""
    if not sm.is_a(Softmax) or sm.num_outputs != 1 or sm.out_dtypes[0] != F32 or sm.is_output:
        return None
    ps = sm.out_pshapes[0]
    if not ps.rank_is_static or len(ps) < 2 \
            or int(sm.attrs.get("axis", 1)) % len(ps) != len(ps) - 1:
        return None
    su = users.get(id(sm), [])
    guard = _nan_guard(sm, su, users)
    if guard is not None:
        su = users.get(id(guard[1]), [])
    if len(su) != 1:
        return None
    m2, j = su[0]
    if not m2.is_a(MatMul) or j != 0 or m2.attrs.get("transpose_a") or m2.out_dtypes[0] != F32:
        return None
    chain: list = []
    cur = sm.inputs[0][0]
    while not cur.is_a(MatMul):
        if not cur.row.fusable or cur.num_outputs != 1 \
                or cur.is_output or cur.out_dtypes[0] != F32 or len(chain) > 16 \
                or len(users.get(id(cur), ())) != 1:  # (nothing else reads the scores)
            return None
        j = _chain_input(cur, users)
        if j is None:
            return None
        chain.insert(0, (cur, j))
        cur = cur.inputs[j][0]
    m1 = cur
    if m1.is_output or len(users.get(id(m1), ())) != 1 or m1.out_dtypes[0] != F32 \
            or any(s.out_dtypes[k] != F32 for s, k in m1.inputs + m2.inputs[1:]):
        return None
    scores_ps = m1.out_pshapes[0]
    if not scores_ps.rank_is_static or len(scores_ps) < 2:
        return None
    for node, j in chain:
        in_dts = [s.out_dtypes[k] for s, k in node.inputs]
        if node.row.expr(node.attrs, in_dts, node.out_dtypes[0]) is None:
            return None
        if any(not _side_ok(s, k, scores_ps) for i, (s, k) in enumerate(node.inputs) if i != j):
            return None
    q_ps = m1.inputs[0][0].out_pshapes[m1.inputs[0][1]]
    v_ps = m2.inputs[1][0].out_pshapes[m2.inputs[1][1]]
    head = _static_dim(q_ps, -2 if m1.attrs.get("transpose_a") else -1)
    width = _static_dim(v_ps, -2 if m2.attrs.get("transpose_b") else -1)
    if head is None or width is None or head > MAX_HEAD or width > MAX_HEAD:
        return None
    t = None
    mu = users.get(id(m2), [])
    if not m2.is_output and len(mu) == 1 and mu[0][0].is_a(Transpose) \
            and mu[0][0].inputs[1][0].is_constant and mu[0][0].out_dtypes[0] == F32:
        t = mu[0][0]
    return m1, chain, m2, t, guard


def _nan_guard(sm, su: list, users: dict):
    """(IsNaN, Select) when the probabilities go through ``Where(IsNaN(p), 0, p)`` (torch's
    scaled_dot_product_attention export: a fully masked row gives zeros, not NaN), else None."""
    if len(su) != 2:
        return None
    isn = next((u for u, _ in su if u.is_a(IsNaN)), None)
    sel = next((u for u, _ in su if u.is_a(Select)), None)
    if isn is None or sel is None or len(users.get(id(isn), ())) != 1 or isn.is_output \
            or sel.is_output:
        return None
    (c, _), (zero, _), (p, _) = sel.inputs
    if c is not isn or p is not sm or not zero.is_constant or np.any(np.asarray(zero.value) != 0) \
            or zero.value.size != 1:
        return None
    return isn, sel


def _scalar_scale(src, users: dict):
    """(src, its scalar) when ``src`` is a Multiply of a tensor by a float32 scalar constant
    read only by the attention's first MatMul (q or k scaled before the product, as torch's
    scaled_dot_product_attention exports), else None."""
    if not src.is_a(Multiply) or src.num_outputs != 1 or src.is_output or src.out_dtypes[0] != F32 \
            or len(users.get(id(src), ())) != 1 or len(src.inputs) != 2:
        return None
    consts = [s for s, _ in src.inputs if s.is_constant]
    data = [(s, k) for s, k in src.inputs if not s.is_constant]
    if len(consts) != 1 or len(data) != 1:
        return None
    c = np.asarray(consts[0].value)
    ps, out = data[0][0].out_pshapes[data[0][1]], src.out_pshapes[0]
    if c.size != 1 or c.dtype != F32 or not ps.rank_is_static or not out.rank_is_static \
            or len(ps) != len(out):
        return None
    return src, float(c.reshape(-1)[0])


def fuse_attention(nodes: list) -> list:
    """``nodes`` (topological) with every attention chain replaced by one FusedAttention node
    at the position of its last absorbed node; users of that node read the new one."""
    users = node_users(nodes)
    replace: dict[int, list] = {}   # id(absorbed last node) -> [new node]
    dropped: set[int] = set()
    for sm in nodes:
        if id(sm) in dropped:
            continue
        found = _match(sm, users)
        if found is None:
            continue
        m1, chain, m2, t, guard = found
        qk, prescaled = [m1.inputs[0], m1.inputs[1]], []
        for j in (0, 1):
            scaled = _scalar_scale(qk[j][0], users)
            if scaled is not None:
                prescaled.append((j,) + scaled)
                qk[j] = next((src, k) for src, k in scaled[0].inputs if not src.is_constant)
        descs, sides = [], []
        for stage, (node, j) in enumerate(chain):
            others = [(s, k) for i, (s, k) in enumerate(node.inputs) if i != j]
            descs.append(FusedDesc(node.row, node.attrs, chained(len(node.inputs), j, stage),
                                     others, [s.out_dtypes[k] for s, k in node.inputs],
                                     node.out_dtypes[0], node))
            sides += others
        perm = None
        if t is not None:
            perm = tuple(int(x) for x in np.asarray(t.inputs[1][0].value).reshape(-1))
            rank = len(m2.out_pshapes[0]) if m2.out_pshapes[0].rank_is_static else -1
            if sorted(perm) != list(range(rank)):
                t, perm = None, None
        last = t if t is not None else m2
        node = ProgramNode(last.id, FusedAttention.type_name, {}, qk + [m2.inputs[1]] + sides,
                           out_dtypes=last.out_dtypes, out_pshapes=last.out_pshapes, name=last.name)
        node.subgraph = AttentionDesc(m1, sm, m2, descs, perm, guard, tuple(prescaled))
        replace[id(last)] = [node]
        dropped.update(id(n) for n in [m1, sm, m2] + [c for c, _ in chain] + list(guard or ())
                       + ([t] if t is not None else []) + [mul for _, mul, _ in prescaled])
    return splice(nodes, replace, dropped)
