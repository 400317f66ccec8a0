"""Fused attention: ``MatMul -> elementwise score ops -> Softmax -> MatMul [-> Transpose]`` as
one program node (kind ``FusedAttention``) and one kernel launch.

Exported transformers compute attention as such a chain: ``q @ k^T``, a scale (Multiply
or Divide), a mask (an Add of a sliced constant, or a Where on a boolean), a softmax over the
keys, ``@ v``, and often a Transpose that brings the heads back next to the features (torch's
TorchScript export of scaled_dot_product_attention puts a Reshape to the same shape before it:
absorbed too, where each dim is the same size or symbol). Run as
separate primitives that is five or six launches per layer and an ``[.., M, N]`` score tensor
written and read back, whose size grows with the square of a decoder's sequence. OpenVINO's
GPU plugin fuses it into its own SDPA primitive; :func:`fuse_attention` does the same at
program build time, on the program's nodes, for any score chain whose side inputs broadcast
into the scores.

Grouped-query attention (LLaMA 2/3, Mistral, Qwen) repeats each key and value head for its
group of query heads first (transformers' ``repeat_kv``: ``Unsqueeze -> Broadcast ->
Reshape``): a copy of the whole key/value cache per layer and decode step, ``group`` times its
size. The fused node reads the heads where they are instead (``AttentionDesc.group``; the
kernels read key head ``b1 / group`` for query head ``b1``), also where a ShapeOf reads the
repeat's shape (the dynamo exporter's, whose keys' transpose ``swap_views`` made one).

Exports that multiply per-head matrices (Bloom, DeBERTa, bmm-style attention) reshape the
scores from ``[b * h, m, n]`` to ``[b, h, m, n]`` for the mask and the probabilities back
before ``@ v``: batch views in the chain, whose target shapes the node reads on the host and
whose regrouping the kernels fold into the strides. A scalar factor of q or k that is not a
constant (DeBERTa divides k by ``sqrt`` of its size) becomes the first score op. Absorbed
nodes whose shapes a ShapeOf reads (torch's exporter computes view targets from them) stay
in the program but never run.

The ONNX Attention op (torch's dynamo exporter from opset 23) becomes such a node too where
the kernels compute it (4-D, no cache, causal mask, window or soft cap: :func:`_onnx_attention`),
so that it runs on every device; the others keep the op (its flash kernel on tensor cores).

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

from ..core.boundary import Constant
from ..core.node import Node
from ..core.shape import PartialShape
from ..ops.attention import Attention
from ..ops.elementwise import Add, Divide, IsNaN, Multiply, Select
from ..ops.matmul import MatMul
from ..ops.movement import Broadcast, Reshape, Transpose, Unsqueeze
from ..ops.normalization import Softmax
from .impls import FusedDesc, chained, scalar_literal
from .kinds.attention import MAX_HEAD, AttentionDesc, FusedAttention
from .kinds.base import same_dim, static_dim
from .program_node import (
    ProgramNode,
    data_users,
    droppable,
    node_users,
    splice,
    standing_for,
)

F32 = np.dtype(np.float32)


def _side_ok(src, k: int, scores_ps) -> bool:
    """A score op's side input must have at most the scores' rank. Whether it broadcasts into
    the scores without enlarging their last two dims is checked per shape: the kernel takes
    the shapes where it does, the host reference the others (``attention_impl``)."""
    ps = src.out_pshapes[k]
    return ps.rank_is_static and len(ps) <= len(scores_ps)


def _batch_view(node) -> bool:
    """Whether ``node`` is a Reshape of float32 scores or probabilities that may regroup only
    their batch dims (``[b * h, m, n]`` to ``[b, h, m, n]`` and back: Bloom, DeBERTa, exports
    that multiply per-head matrices with bmm): batch dims on both sides, the last two not
    known to differ. The kernels check per shape that it keeps them
    (``AttentionDesc.views``); where it does not, the host runs the node. (A flattening to
    2-D rows, a softmax over ``[b * h * m, n]``, stays unfused: it is never a batch view.)"""
    if not node.is_a(Reshape) or node.is_output or node.out_dtypes[0] != F32:
        return False
    ins, out = node.inputs[0][0].out_pshapes[node.inputs[0][1]], node.out_pshapes[0]
    return ins.rank_is_static and out.rank_is_static and min(len(ins), len(out)) >= 3 \
        and all(a.min != a.max or b.min != b.max or a.min == b.min
                for a, b in zip(list(ins)[-2:], list(out)[-2:]))


def _score_source(src, users: dict, depth: int = 0):
    """The MatMul whose scores ``src`` carries, following single-reader score ops (and batch
    views) back, else None."""
    if src.is_constant or src.num_outputs != 1 or len(data_users(src, users)) != 1 \
            or src.out_dtypes[0] != F32 or depth > 16:
        return None
    if src.is_a(MatMul):
        return src
    if src.is_output:
        return None
    if _batch_view(src):
        return _score_source(src.inputs[0][0], users, depth + 1)
    if not src.row.fusable:
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
    """(m1, chain, m2, transpose or None, NaN guard or None, the probabilities' batch views)
    when ``sm`` closes an attention, else None. The chain holds (score op, the input that
    carries the scores) and (batch view, 0), m1's side first."""
    if not sm.is_a(Softmax) or sm.num_outputs != 1 or sm.out_dtypes[0] != F32 or sm.is_output:
        return None
    ps = sm.out_pshapes[0]
    if not ps.rank_is_static or len(ps) < 2 \
            or int(sm.attrs.get("axis", 1)) % len(ps) != len(ps) - 1:
        return None
    su = data_users(sm, users)
    guard = _nan_guard(sm, su, users)
    if guard is not None:
        su = data_users(guard[1], users)
    if len(su) != 1:
        return None
    m2, j = su[0]
    pviews: list = []
    while m2.is_a(Reshape) and j == 0 and _batch_view(m2) and len(pviews) < 4:
        pviews.append(m2)
        su = data_users(m2, users)
        if len(su) != 1 or m2.is_output:
            return None
        m2, j = su[0]
    if not m2.is_a(MatMul) or j != 0 or m2.attrs.get("transpose_a") or m2.out_dtypes[0] != F32:
        return None
    chain: list = []
    cur = sm.inputs[0][0]
    while not cur.is_a(MatMul):
        if cur.num_outputs != 1 or cur.is_output or cur.out_dtypes[0] != F32 or len(chain) > 16 \
                or len(data_users(cur, users)) != 1:  # (nothing else reads the scores)
            return None
        if _batch_view(cur):
            chain.insert(0, (cur, 0))
            cur = cur.inputs[0][0]
            continue
        j = _chain_input(cur, users) if cur.row.fusable else None
        if j is None:
            return None
        chain.insert(0, (cur, j))
        cur = cur.inputs[j][0]
    m1 = cur
    if m1.is_output or len(data_users(m1, users)) != 1 or m1.out_dtypes[0] != F32 \
            or any(s.out_dtypes[k] != F32 for s, k in m1.inputs + m2.inputs[1:]):
        return None
    scores_ps = m1.out_pshapes[0]
    if not scores_ps.rank_is_static or len(scores_ps) < 2:
        return None
    for node, j in chain:
        if node.is_a(Reshape):
            continue
        in_dts = [s.out_dtypes[k] for s, k in node.inputs]
        if node.row.expr(node.attrs, in_dts, node.out_dtypes[0]) is None:
            return None
        # (the scores as this op reads them: a batch view before it may have changed the rank)
        here = node.inputs[j][0].out_pshapes[node.inputs[j][1]]
        if not here.rank_is_static \
                or any(not _side_ok(s, k, here) for i, (s, k) in enumerate(node.inputs) if i != j):
            return None
    q_ps = m1.inputs[0][0].out_pshapes[m1.inputs[0][1]]
    v_ps = m2.inputs[1][0].out_pshapes[m2.inputs[1][1]]
    # (a head size or value width left dynamic, as torch's exporter leaves DeBERTa's, is
    # checked per shape: the host runs what is over MAX_HEAD)
    for ps, i in ((q_ps, -2 if m1.attrs.get("transpose_a") else -1),
                  (v_ps, -2 if m2.attrs.get("transpose_b") else -1)):
        if not ps.rank_is_static or len(ps) < 2 or ps[i].min > MAX_HEAD:
            return None
    t, oview = _out_transpose(m2, users), None
    if t is None:
        mu = data_users(m2, users)
        if not m2.is_output and len(mu) == 1 and _out_view(mu[0][0], m2) and mu[0][1] == 0:
            oview = mu[0][0]
            t = _out_transpose(oview, users, data_only=True)
            if t is None:
                oview = None
    return m1, chain, m2, t, guard, pviews, oview


def _out_transpose(node, users: dict, data_only: bool = False):
    """The Transpose (constant order) that is ``node``'s only reader (with ``data_only``: of
    its data), else None."""
    mu = data_users(node, users) if data_only else users.get(id(node), [])
    if not node.is_output and len(mu) == 1 and mu[0][0].is_a(Transpose) \
            and mu[0][0].inputs[1][0].is_constant and mu[0][0].out_dtypes[0] == F32:
        return mu[0][0]
    return None


def _out_view(r, m2) -> bool:
    """Whether ``r`` is a Reshape of m2's output to the very same shape (each dim the same
    size or symbol): torch's TorchScript export of scaled_dot_product_attention reshapes
    ``@ v`` to the shape it has, before transformers' Transpose."""
    if not r.is_a(Reshape) or r.is_output or r.out_dtypes[0] != F32:
        return False
    ins, out = m2.out_pshapes[0], r.out_pshapes[0]
    return ins.rank_is_static and out.rank_is_static and len(ins) == len(out) \
        and all(same_dim(a, b) for a, b in zip(ins, out))


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


def _scale_stage(src, users: dict) -> tuple | None:
    """(src, its data input) when ``src`` multiplies or divides q or k by a scalar that is no
    float32 constant (:func:`_scalar_scale` takes those), read only by the attention's first
    MatMul: DeBERTa divides k by ``sqrt(head size)`` computed from k's shape. A scalar factor
    commutes with the product, so it becomes the first score op."""
    if not src.is_a(Multiply, Divide) or src.num_outputs != 1 or src.is_output \
            or src.out_dtypes[0] != F32 or len(data_users(src, users)) != 1 \
            or len(src.inputs) != 2:
        return None
    for j in (0, 1) if src.is_a(Multiply) else (0,):
        (x, xk), (c, ck) = src.inputs[j], src.inputs[1 - j]
        xs, cs, out = x.out_pshapes[xk], c.out_pshapes[ck], src.out_pshapes[0]
        if x.is_constant or c.out_dtypes[ck] != F32 or not cs.is_static or not xs.rank_is_static \
                or not out.rank_is_static or len(xs) != len(out) or len(cs) > len(out) \
                or any(d != 1 for d in cs.to_shape()):
            continue
        return src, j
    return None


def _kv_repeat(node, users: dict) -> tuple | None:
    """((src, k), group) when ``node`` repeats each head of a rank-4 ``src`` ``group`` times
    (transformers' ``repeat_kv`` for grouped-query attention: ``Reshape(Broadcast(
    Unsqueeze(src, 2)))`` to [b, heads * group, s, d]), each read only by the next (and by
    ShapeOfs: :func:`~netpass.runtime.program_node.droppable`)."""
    if not node.is_a(Reshape) or len(data_users(node, users)) != 1:
        return None
    bc = node.inputs[0][0]
    if not bc.is_a(Broadcast) or len(data_users(bc, users)) != 1:
        return None
    un = bc.inputs[0][0]
    if not un.is_a(Unsqueeze) or len(data_users(un, users)) != 1 \
            or not un.inputs[1][0].is_constant \
            or [int(a) for a in np.asarray(un.inputs[1][0].value).reshape(-1)] != [2]:
        return None
    src, k = un.inputs[0]
    sp, bp, rp = src.out_pshapes[k], bc.out_pshapes[0], node.out_pshapes[0]
    if not (sp.rank_is_static and bp.rank_is_static and rp.rank_is_static) \
            or (len(sp), len(bp), len(rp)) != (4, 5, 4):
        return None
    heads, group = static_dim(sp, 1), static_dim(bp, 2)
    if heads is None or group is None or group < 2 or static_dim(bp, 1) != heads \
            or static_dim(rp, 1) != heads * group \
            or any(rp[i] != sp[i] for i in (0, 2, 3)) or any(bp[i + 1] != sp[i] for i in (2, 3)) \
            or bp[0] != sp[0]:
        return None
    return (src, k), group


def _grouped_kv(k_in, v_in, users: dict) -> tuple | None:
    """(k input, v input, group, replaced nodes, new nodes) when both the keys and the values
    reach the attention through ``_kv_repeat`` with the same group: the attention reads the
    heads it repeats (``AttentionDesc.group``). A Transpose of the keys that keeps the batch
    and head axes moves in front of the repeat."""
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
    k_src, made = kr[0], []
    if t is not None:
        ps = k_src[0].out_pshapes[k_src[1]]
        made.append(ProgramNode(t.id, t.kind, dict(t.attrs), [k_src, t.inputs[1]],
                                out_dtypes=t.out_dtypes,
                                out_pshapes=[PartialShape([ps[i] for i in perm])], name=t.name))
        k_src = (made[-1], 0)
        dropped.append(t)
    return k_src, vr[0], kr[1], dropped, made


def _onnx_attention(a, users: dict) -> list | None:
    """The nodes that stand for ONNX Attention ``a`` (constants, then a FusedAttention node),
    when it is one the fused kernels compute: 4-D float32 q, k, v (grouped-query heads read
    repeated where the graph knows their counts), a float or boolean mask, no cache, causal
    mask, window or soft cap, only Y read.
    The node holds its decomposition (``q * scale @ k^T``, the mask added or selected,
    softmax, NaN rows as 0, ``@ v``) for the kernels and ``a`` for its shape and host
    reference (``AttentionDesc.source``: ONNX pads a mask shorter than the keys)."""
    at = a.attrs
    sp = at.get("softmax_precision")
    if at.get("has_past") or at.get("has_nonpad_kv_seqlen") or at.get("is_causal") \
            or float(at.get("softcap") or 0.0) > 0 or at.get("left_window_size", -1) != -1 \
            or at.get("right_window_size", -1) != -1 or int(at.get("qk_matmul_output_mode", 0)) \
            or (sp is not None and np.dtype(getattr(sp, "dtype", sp)) != F32) \
            or any(u.inputs[j][1] != 0 for u, j in users.get(id(a), ())) \
            or any(s.out_dtypes[k] != F32 for s, k in a.inputs[:3]) or a.out_dtypes[0] != F32:
        return None
    q_ps, k_ps, v_ps = (s.out_pshapes[k] for s, k in a.inputs[:3])
    if any(not ps.rank_is_static or len(ps) != 4 for ps in (q_ps, k_ps, v_ps)):
        return None
    # (heads left dynamic: no group; the kernels then take only as many key heads as query
    # heads, or one, and the host runs the rest)
    heads, kv_heads = static_dim(q_ps, 1), static_dim(k_ps, 1)
    group = heads // kv_heads if heads and kv_heads and heads % kv_heads == 0 else 1
    scale = float(at.get("scale") or 0.0) or (
        1.0 / np.sqrt(q_ps[3].min) if q_ps[3].min == q_ps[3].max else 0.0)
    if not scale or q_ps[3].min > MAX_HEAD or v_ps[3].min > MAX_HEAD:
        return None
    mask = a.inputs[3] if at.get("has_attn_mask") else None
    if mask is not None and (mask[0].out_dtypes[mask[1]] not in (F32, np.dtype(np.bool_))
                             or not mask[0].out_pshapes[mask[1]].rank_is_static
                             or len(mask[0].out_pshapes[mask[1]]) > 4):
        return None

    def node(what: str, kind: type[Node], attrs: dict, inputs: list, dtype=F32) -> ProgramNode:
        return ProgramNode(f"{a.id}/{what}", kind.type_name, attrs, inputs, out_dtypes=[dtype])

    def const(what: str, value: float) -> ProgramNode:
        return ProgramNode(f"{a.id}/{what}", Constant.type_name, value=np.asarray(value, F32))

    q, k, v = a.inputs[:3]
    consts = [const("scale", scale), const("zero", 0.0)]
    mul = node("scale", Multiply, {}, [q, (consts[0], 0)])
    m1 = node("qk", MatMul, {"transpose_a": False, "transpose_b": True}, [(mul, 0), k])
    chain, sides, cur = [], [], m1
    if mask is not None:
        if mask[0].out_dtypes[mask[1]] == F32:
            cur = node("mask", Add, {}, [(m1, 0), mask])
            chain.append(FusedDesc(cur.row, {}, (0, None), [mask], [F32, F32], F32, cur))
        else:
            consts.append(const("masked", -np.inf))
            cur = node("mask", Select, {}, [mask, (m1, 0), (consts[-1], 0)])
            others = [mask, (consts[-1], 0)]
            chain.append(FusedDesc(cur.row, {}, (None, 0, None), others,
                                   [np.dtype(np.bool_), F32, F32], F32, cur))
        sides = chain[0].others
    sm = node("softmax", Softmax, {"axis": -1}, [(cur, 0)])
    isn = node("isnan", IsNaN, {}, [(sm, 0)], np.dtype(np.bool_))
    sel = node("guard", Select, {}, [(isn, 0), (consts[1], 0), (sm, 0)])
    m2 = node("pv", MatMul, {"transpose_a": False, "transpose_b": False}, [(sel, 0), v])
    desc = AttentionDesc(m1, sm, m2, chain, None, (isn, sel), ((0, mul, scale),), group,
                         source=a)
    fused = ProgramNode(a.id, FusedAttention.type_name, {}, [q, k, v] + sides,
                        out_dtypes=a.out_dtypes[:1], out_pshapes=a.out_pshapes[:1], name=a.name)
    fused.subgraph = desc
    return [c for c in consts if any(s is c for s, _ in fused.inputs)] + [fused]


def fuse_attention(nodes: list) -> list:
    """``nodes`` (topological) with every attention chain replaced by one FusedAttention node
    at the position of its last absorbed node, and every ONNX Attention the kernels compute
    by one in its place (:func:`_onnx_attention`); users of that node read the new one."""
    users = node_users(nodes)
    replace: dict[int, list] = {}   # id(absorbed last node) -> [new node]
    dropped: set[int] = set()
    claimed: set[int] = set()  # (nodes an earlier chain absorbed: one chain each)
    for sm in nodes:
        if id(sm) in dropped:
            continue
        if sm.is_a(Attention):
            lowered = _onnx_attention(sm, users)
            if lowered is not None:
                replace[id(sm)] = lowered
            continue
        found = _match(sm, users)
        if found is None:
            continue
        m1, chain, m2, t, guard, pviews, oview = found
        qk, prescaled, lead = [m1.inputs[0], m1.inputs[1]], [], []
        for j in (0, 1):
            scaled = _scalar_scale(qk[j][0], users)
            if scaled is not None:
                prescaled.append((j,) + scaled)
                qk[j] = next((src, k) for src, k in scaled[0].inputs if not src.is_constant)
                continue
            stage = _scale_stage(qk[j][0], users)
            if stage is not None:
                lead.append(stage)
                qk[j] = stage[0].inputs[stage[1]]
        descs: list[FusedDesc] = []
        sides, views, targets = [], [], []
        for node, j in lead + chain:
            if node.is_a(Reshape):
                views.append((len(descs), node))
                targets.append(node.inputs[1])
                continue
            others = [(s, k) for i, (s, k) in enumerate(node.inputs) if i != j]
            descs.append(FusedDesc(node.row, node.attrs, chained(len(node.inputs), j, len(descs)),
                                   others, [s.out_dtypes[k] for s, k in node.inputs],
                                   node.out_dtypes[0], node,
                                   [None if i == j else scalar_literal(s)
                                    for i, (s, _) in enumerate(node.inputs)]))
            sides += others
        targets += [r.inputs[1] for r in pviews]
        perm = None
        if t is not None:
            perm = tuple(int(x) for x in np.asarray(t.inputs[1][0].value).reshape(-1))
            rank = len(m2.out_pshapes[0]) if m2.out_pshapes[0].rank_is_static else -1
            if sorted(perm) != list(range(rank)):
                t, perm, oview = None, None, None
        last = t if t is not None else m2
        absorbed = [m1, sm, m2] + [c for c, _ in lead + chain] + list(guard or ()) \
            + ([t] if t is not None else []) + [mul for _, mul, _ in prescaled] \
            + pviews + ([oview] if oview is not None else [])
        v_in, group, made = m2.inputs[1], 1, []
        grouped = _grouped_kv(qk[1], v_in, users) if not targets else None
        repeats = grouped[3] if grouped is not None else []
        if any(id(n) in claimed for n in absorbed + list(repeats)):
            continue  # (an earlier chain's node: its output carries this one's "scores")
        claimed.update(id(n) for n in absorbed + list(repeats))
        if grouped is not None:
            qk[1], v_in, group, _, made = grouped
        desc = AttentionDesc(m1, sm, m2, descs, perm, guard, tuple(prescaled), group,
                             tuple(views), tuple(pviews))
        node = standing_for(last, FusedAttention.type_name, qk + [v_in] + sides + targets, desc)
        replace[id(last)] = made + [node]
        dropped.update(id(n) for n in droppable(absorbed + repeats, last, users))
    return splice(nodes, replace, dropped)
