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

Grouped-query attention (LLaMA 2/3, Mistral, Qwen) repeats each key and value head for its
group of query heads first (transformers' ``repeat_kv``: ``Unsqueeze -> Broadcast ->
Reshape``): a copy of the whole key/value cache per layer and decode step, ``group`` times its
size. The fused node reads the heads where they are instead (``AttentionDesc.group``; the
kernels read key head ``b1 / group`` for query head ``b1``).

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

from ..core.shape import PartialShape
from ..ops.elementwise import IsNaN, Multiply, Select
from ..ops.matmul import MatMul
from ..ops.movement import Broadcast, Reshape, Transpose, Unsqueeze
from ..ops.normalization import Softmax
from .impls import FusedDesc, chained
from .kinds.attention import MAX_HEAD, AttentionDesc, FusedAttention
from .program_node import ProgramNode, node_users, splice, standing_for

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


def _kv_repeat(node, users: dict) -> tuple | None:
    """((src, k), group) when ``node`` repeats each head of a rank-4 ``src`` ``group`` times
    (transformers' ``repeat_kv`` for grouped-query attention: ``Reshape(Broadcast(
    Unsqueeze(src, 2)))`` to [b, heads * group, s, d]), each read only by the next."""
    if not node.is_a(Reshape) or len(users.get(id(node), ())) != 1:
        return None
    bc = node.inputs[0][0]
    if not bc.is_a(Broadcast) or len(users.get(id(bc), ())) != 1:
        return None
    un = bc.inputs[0][0]
    if not un.is_a(Unsqueeze) or len(users.get(id(un), ())) != 1 \
            or not un.inputs[1][0].is_constant \
            or [int(a) for a in np.asarray(un.inputs[1][0].value).reshape(-1)] != [2]:
        return None
    src, k = un.inputs[0]
    sp, bp, rp = src.out_pshapes[k], bc.out_pshapes[0], node.out_pshapes[0]
    if not (sp.rank_is_static and bp.rank_is_static and rp.rank_is_static) \
            or (len(sp), len(bp), len(rp)) != (4, 5, 4):
        return None
    heads, group = _static_dim(sp, 1), _static_dim(bp, 2)
    if heads is None or group is None or group < 2 or _static_dim(bp, 1) != heads \
            or _static_dim(rp, 1) != heads * group \
            or any(rp[i] != sp[i] for i in (0, 2, 3)) or any(bp[i + 1] != sp[i] for i in (2, 3)) \
            or bp[0] != sp[0]:
        return None
    return (src, k), group


def _grouped_kv(k_in, v_in, users: dict) -> tuple | None:
    """(k input, v input, group, replaced nodes, new Transpose or None) when both the keys and
    the values reach the attention through ``_kv_repeat`` with the same group: the attention
    reads the heads it repeats (``AttentionDesc.group``). A Transpose of the keys that keeps
    the batch and head axes moves in front of the repeat."""
    t, perm = None, []
    k_node = k_in[0]
    if k_node.is_a(Transpose) and k_node.inputs[1][0].is_constant \
            and len(users.get(id(k_node), ())) == 1:
        perm = [int(a) for a in np.asarray(k_node.inputs[1][0].value).reshape(-1)]
        if perm[:2] != [0, 1]:
            return None
        t, k_node = k_in[0], k_node.inputs[0][0]
    kr, vr = _kv_repeat(k_node, users), _kv_repeat(v_in[0], users)
    if kr is None or vr is None or kr[1] != vr[1]:
        return None
    dropped = []
    for node in (k_node, v_in[0]):
        bc = node.inputs[0][0]
        dropped += [node, bc, bc.inputs[0][0]]
    k_src, new_t = kr[0], None
    if t is not None:
        ps = k_src[0].out_pshapes[k_src[1]]
        new_t = ProgramNode(t.id, t.kind, dict(t.attrs), [k_src, t.inputs[1]],
                            out_dtypes=t.out_dtypes,
                            out_pshapes=[PartialShape([ps[i] for i in perm])], name=t.name)
        k_src = (new_t, 0)
        dropped.append(t)
    return k_src, vr[0], kr[1], dropped, new_t


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
        v_in, group, new_t = m2.inputs[1], 1, None
        grouped = _grouped_kv(qk[1], v_in, users)
        if grouped is not None:
            qk[1], v_in, group, repeats, new_t = grouped
            dropped.update(id(n) for n in repeats)
        node = standing_for(last, FusedAttention.type_name, qk + [v_in] + sides,
                            AttentionDesc(m1, sm, m2, descs, perm, guard, tuple(prescaled), group))
        replace[id(last)] = [node] if new_t is None else [new_t, node]
        dropped.update(id(n) for n in [m1, sm, m2] + [c for c, _ in chain] + list(guard or ())
                       + ([t] if t is not None else []) + [mul for _, mul, _ in prescaled])
    return splice(nodes, replace, dropped)
