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

The kernel (:func:`netpass.runtime.kernels.attention`) gives each work-group one query row of
one batch: the row's scores for a block of keys at a time (one key per work-item, the score
ops applied with their side inputs read through strides), a running maximum and sum (online
softmax), and the value rows accumulated per output column. q, k and v are read through
strides (permuted views of the heads need no copy), and the output is written in the layout
of the Transpose it absorbed.

The node keeps the absorbed nodes: shape inference and the host reference run them in turn
(:class:`AttentionDesc`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import ShapeInferenceError
from . import impls
from . import kernels
from .kernels import flash, mma

KIND = "FusedAttention"
MAX_HEAD = 1024  # largest contraction (q·k) and value width the kernel keeps per work-group
F32 = np.dtype(np.float32)


class AttentionDesc:
    """What a FusedAttention node computes: scores = m1(q, k), the score ops ``chain`` (stage
    0 is the raw score; side inputs are the node's inputs from 3 on, in ``chain`` order), a
    softmax over the last axis (NaN probabilities read as 0 with ``nan_guard``), m2(probabilities,
    v), then ``out_perm`` when a Transpose was absorbed."""

    def __init__(self, m1, softmax, m2, chain: list[impls.FusedDesc], out_perm: tuple | None,
                 nan_guard: tuple | None = None, prescaled: tuple = ()) -> None:
        self.m1, self.softmax, self.m2 = m1, softmax, m2
        self.chain = chain
        self.out_perm = out_perm
        self.nan_guard = nan_guard  # (IsNaN, Select): NaN probabilities read as 0
        # (input 0 or 1, Multiply node, its scalar): q or k scaled before m1 (torch's SDPA
        # export scales both by sqrt(scale)); the kernels scale the scores instead
        self.prescaled = prescaled
        self.scale = float(np.prod([c for _, _, c in prescaled])) if prescaled else None
        self.ta = bool(m1.attrs.get("transpose_a"))
        self.tb = bool(m1.attrs.get("transpose_b"))
        self.tv = bool(m2.attrs.get("transpose_b"))

    def key(self) -> tuple:
        return (self.ta, self.tb, self.tv, tuple(f.key() for f in self.chain), self.out_perm,
                self.nan_guard is not None, self.scale)

    def stages(self) -> list:
        """The kernel's score stages: the absorbed q / k scale, then the score ops."""
        if self.scale is None:
            return impls.fused_stages(self.chain, 0)
        first = kernels.Stage(f"({{0}} * {kernels.flit(self.scale)})", [("x", None)], "float")
        return [first] + impls.fused_stages([f.shifted(1) for f in self.chain], 0)

    def scores_shape(self, shapes: Sequence[tuple]) -> tuple | None:
        """The score ops' output shape (their side inputs may broadcast the scores)."""
        from .shape_infer import _fast
        cur = _fast("MatMul", self.m1.attrs, [shapes[0], shapes[1]], {})
        sides = iter(shapes[3:])
        for f in self.chain:
            if cur is None:
                return None
            cur = _fast(f.kind, f.attrs, [cur[0] if r is not None else next(sides) for r in f.refs], {})
        return cur[0] if cur is not None else None

    def infer_shapes(self, shapes: Sequence[tuple]) -> list[tuple]:
        from .shape_infer import _fast
        scores = self.scores_shape(shapes)
        out = _fast("MatMul", self.m2.attrs, [scores, shapes[2]], {}) if scores is not None else None
        if out is None:
            raise ShapeInferenceError(f"{KIND} '{self.m2.id}': q, k, v and score input shapes "
                                      f"{[list(s) for s in shapes]} do not fit")
        o = out[0]
        return [tuple(o[i] for i in self.out_perm) if self.out_perm is not None else o]

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The absorbed nodes' own references, in turn (host fallback, REFERENCE device)."""
        from .shape_infer import infer_host
        qk = list(arrays[:2])
        for j, mul, _ in self.prescaled:
            qk[j] = infer_host(mul, [qk[j], next(src.value for src, _ in mul.inputs if src.kind == "Constant")])[0]
        scores = infer_host(self.m1, qk)[0]
        sides = iter(arrays[3:])
        scores = impls.evaluate_fused(self.chain, scores, lambda *_: next(sides), infer_host)
        probs = infer_host(self.softmax, [scores])[0]
        if self.nan_guard is not None:
            isn, sel = self.nan_guard
            probs = infer_host(sel, [infer_host(isn, [probs])[0], sel.inputs[1][0].value, probs])[0]
        out = infer_host(self.m2, [probs, arrays[2]])[0]
        return [np.transpose(out, self.out_perm) if self.out_perm is not None else out]


# -- program pass ----------------------------------------------------------------------------------
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
    if src.kind == "Constant" or src.num_outputs != 1 or len(users.get(id(src), ())) != 1 \
            or src.out_dtypes[0] != F32 or depth > 16:
        return None
    if src.kind == "MatMul":
        return src
    if src.kind not in impls.ELTWISE_KINDS or src.kind == "Convert" or src.is_output:
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
    if sm.kind != "Softmax" or sm.num_outputs != 1 or sm.out_dtypes[0] != F32 or sm.is_output:
        return None
    ps = sm.out_pshapes[0]
    if not ps.rank_is_static or len(ps) < 2 or int(sm.attrs.get("axis", 1)) % len(ps) != len(ps) - 1:
        return None
    su = users.get(id(sm), [])
    guard = _nan_guard(sm, su, users)
    if guard is not None:
        su = users.get(id(guard[1]), [])
    if len(su) != 1:
        return None
    m2, j = su[0]
    if m2.kind != "MatMul" or j != 0 or m2.attrs.get("transpose_a") or m2.out_dtypes[0] != F32:
        return None
    chain = []
    cur = sm.inputs[0][0]
    while cur.kind != "MatMul":
        if cur.kind not in impls.ELTWISE_KINDS or cur.kind == "Convert" or cur.num_outputs != 1 \
                or cur.is_output or cur.out_dtypes[0] != F32 or len(chain) > 16:
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
        if impls.fusable_expr(node.kind, node.attrs, in_dts, node.out_dtypes[0]) is None:
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
    if not m2.is_output and len(mu) == 1 and mu[0][0].kind == "Transpose" \
            and mu[0][0].inputs[1][0].kind == "Constant" and mu[0][0].out_dtypes[0] == F32:
        t = mu[0][0]
    return m1, chain, m2, t, guard


def _nan_guard(sm, su: list, users: dict):
    """(IsNaN, Select) when the probabilities go through ``Where(IsNaN(p), 0, p)`` (torch's
    scaled_dot_product_attention export: a fully masked row gives zeros, not NaN), else None."""
    if len(su) != 2:
        return None
    isn = next((u for u, _ in su if u.kind == "IsNaN"), None)
    sel = next((u for u, _ in su if u.kind == "Select"), None)
    if isn is None or sel is None or len(users.get(id(isn), ())) != 1 or isn.is_output or sel.is_output:
        return None
    (c, _), (zero, _), (p, _) = sel.inputs
    if c is not isn or p is not sm or zero.kind != "Constant" or np.any(np.asarray(zero.value) != 0) \
            or zero.value.size != 1:
        return None
    return isn, sel


def _scalar_scale(src, users: dict):
    """(src, its scalar) when ``src`` is a Multiply of a tensor by a float32 scalar constant
    read only by the attention's first MatMul (q or k scaled before the product, as torch's
    scaled_dot_product_attention exports), else None."""
    if src.kind != "Multiply" or src.num_outputs != 1 or src.is_output or src.out_dtypes[0] != F32 \
            or len(users.get(id(src), ())) != 1 or len(src.inputs) != 2:
        return None
    consts = [s for s, _ in src.inputs if s.kind == "Constant"]
    data = [(s, k) for s, k in src.inputs if s.kind != "Constant"]
    if len(consts) != 1 or len(data) != 1:
        return None
    c = np.asarray(consts[0].value)
    ps, out = data[0][0].out_pshapes[data[0][1]], src.out_pshapes[0]
    if c.size != 1 or c.dtype != F32 or not ps.rank_is_static or not out.rank_is_static or len(ps) != len(out):
        return None
    return src, float(c.reshape(-1)[0])


def fuse_attention(nodes: list) -> list:
    """``nodes`` (topological) with every attention chain replaced by one FusedAttention node
    at the position of its last absorbed node; users of that node read the new one."""
    from .program import ProgramNode, node_users, splice
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
                qk[j] = next((src, k) for src, k in scaled[0].inputs if src.kind != "Constant")
        descs, sides = [], []
        for stage, (node, j) in enumerate(chain):
            others = [(s, k) for i, (s, k) in enumerate(node.inputs) if i != j]
            descs.append(impls.FusedDesc(node.kind, node.attrs, impls.chained(len(node.inputs), j, stage),
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
        node = ProgramNode(last.id, KIND, {}, qk + [m2.inputs[1]] + sides,
                           out_dtypes=last.out_dtypes, out_pshapes=last.out_pshapes, name=last.name)
        node.subgraph = AttentionDesc(m1, sm, m2, descs, perm, guard, tuple(prescaled))
        replace[id(last)] = [node]
        dropped.update(id(n) for n in [m1, sm, m2] + [c for c, _ in chain] + list(guard or ())
                       + ([t] if t is not None else []) + [mul for _, mul, _ in prescaled])
    return splice(nodes, replace, dropped)


# -- implementation ----------------------------------------------------------------------------------
def _operand(shape: Sequence[int], strides: Sequence[int] | None, swap: bool) -> tuple[list, list, int, int]:
    """(batch dims, batch strides, row stride, column stride) of a matrix operand, its last two
    dims swapped when ``swap``."""
    st = list(strides) if strides is not None else impls.contiguous_strides(shape)
    rs, cs = st[-2], st[-1]
    if swap:
        rs, cs = cs, rs
    return list(shape[:-2]), st[:-2], rs, cs


def attention_impl(p: impls.Params, key) -> impls.Impl | None:
    desc: AttentionDesc = p.node.subgraph
    if any(np.dtype(d) != F32 for d in p.in_dtypes[:3] + p.out_dtypes):
        return None
    shapes, strides = p.in_shapes, p.in_strides or [None] * len(p.in_shapes)
    qb, qbs, sqm, sqd = _operand(shapes[0], strides[0], desc.ta)
    kb, kbs, skd, skn = _operand(shapes[1], strides[1], desc.tb)  # k as [d, n]
    vb, vbs, svn, svj = _operand(shapes[2], strides[2], desc.tv)
    M, D = (shapes[0][-1], shapes[0][-2]) if desc.ta else (shapes[0][-2], shapes[0][-1])
    N = shapes[1][-2] if desc.tb else shapes[1][-1]
    DV = shapes[2][-2] if desc.tv else shapes[2][-1]
    if D > MAX_HEAD or DV > MAX_HEAD:
        return None
    scores = desc.scores_shape(shapes)
    if scores is None or tuple(scores[-2:]) != (M, N):
        return None  # a score op broadcasts the rows or keys: the host runs it
    batch = list(np.broadcast_shapes(tuple(qb), tuple(kb), tuple(vb), tuple(scores[:-2])))
    scores_shape = tuple(batch) + (M, N)
    logical = tuple(batch) + (M, DV)
    out_cs = impls.contiguous_strides(p.out_shapes[0])
    if desc.out_perm is not None:
        inv = [0] * len(desc.out_perm)
        for d, e in enumerate(desc.out_perm):
            inv[e] = d
        ost = [out_cs[inv[e]] for e in range(len(logical))]
    else:
        ost = out_cs
    rank = len(batch)
    operands = ((qb, qbs, sqm, sqd), (kb, kbs, skn, skd), (vb, vbs, svn, svj))
    flash_launch = _flash_launch(p, desc, batch, operands, ost, M, N, D, DV, scores_shape)
    if flash_launch is not None:
        return impls.Impl(key, [flash_launch] if M and _size(batch) else [])
    bstr = [impls.broadcast_strides(b, batch, s) if b else [0] * rank for b, s in ((qb, qbs), (kb, kbs), (vb, vbs))]
    dims, (q_s, k_s, v_s, o_s) = impls.collapse(batch, bstr + [list(ost[:rank])])
    if len(dims) > 2:
        return None
    while len(dims) < 2:
        dims, q_s, k_s, v_s, o_s = [1] + dims, [0] + q_s, [0] + k_s, [0] + v_s, [0] + o_s
    nb = dims[0] * dims[1]
    n_sides = len(shapes) - 3
    side_strides = [impls.broadcast_strides(shapes[3 + j], scores_shape, strides[3 + j]) for j in range(n_sides)]
    edims, est = impls.collapse(list(scores_shape), side_strides) if n_sides else ([], [])
    stages = p.cached(("attention_stages",), desc.stages)
    jt = impls._cdiv(DV, kernels.LS)
    dmax = max(kernels.LS, 1 << max(D - 1, 0).bit_length())
    guard = desc.nan_guard is not None
    src = p.cached(("attention", len(edims), jt, dmax, guard),
                   lambda: kernels.attention(stages, [p.in_dtypes[3 + j] for j in range(n_sides)], len(edims),
                                       jt, dmax, guard))
    spec = [("i", 0), ("i", 1), ("i", 2), ("o", 0), M, N, D, DV, dims[1],
            q_s[0], q_s[1], sqm, sqd, k_s[0], k_s[1], skn, skd, v_s[0], v_s[1], svn, svj,
            o_s[0], o_s[1], ost[-2], ost[-1]]
    spec += [("i", 3 + j) for j in range(n_sides)]
    if n_sides:
        spec += list(edims) + [x for s in est for x in s]
    if M == 0 or nb == 0:
        return impls.Impl(key, [])
    return impls.Impl(key, [impls.Launch(src, (kernels.LS, M, nb), (kernels.LS, 1, 1), spec)])


def _size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


FLASH_MIN_M = 16  # query rows from which the flash kernel replaces the row-per-work-group one


def _flash_launch(p: impls.Params, desc: AttentionDesc, batch: list, operands, ost: list, M: int,
                  N: int, D: int, DV: int, scores_shape: tuple) -> impls.Launch | None:
    """The tensor-core flash kernel (kernels.flash) for prefill-sized M on devices with
    ``engine.mma``: TF32 with INFERENCE_PRECISION_HINT "tf32", 3xTF32 (kernels.mma.F32_SPLIT)
    for float32 up to head size 64. None where it does not apply (the batch of q, k, v, the
    output and the score ops' side inputs must collapse to two dims)."""
    kind = getattr(p.engine, "mma", "") if p.engine is not None else ""
    split = 1 if p.precision == "tf32" else mma.F32_SPLIT
    if not kind or M < FLASH_MIN_M or split is None or D > flash.MAX_HEAD or DV > flash.MAX_HEAD \
            or (split == 3 and D > 64):
        return None
    rank = len(batch)
    strides = p.in_strides or [None] * len(p.in_shapes)
    n_sides = len(p.in_shapes) - 3
    side = [impls.broadcast_strides(p.in_shapes[3 + j], scores_shape, strides[3 + j]) for j in range(n_sides)]
    bstr = [impls.broadcast_strides(b, batch, s) if b else [0] * rank for b, s, _, _ in operands]
    dims, coll = impls.collapse(batch, bstr + [list(ost[:rank])] + [s[:rank] for s in side])
    if len(dims) > 2:
        return None
    while len(dims) < 2:
        dims, coll = [1] + dims, [[0] + c for c in coll]
    (q_s, k_s, v_s, o_s), side_b = coll[:4], coll[4:]
    (_, _, sqm, sqd), (_, _, skn, skd), (_, _, svn, svj) = operands
    vec = sqd == 1 and skd == 1 and svj == 1 and D % 4 == 0 and DV % 4 == 0 \
        and all(x % 4 == 0 for x in [sqm, skn, svn] + q_s + k_s + v_s)
    cfg = flash.config_for(D)
    stages = p.cached(("attention_stages",), desc.stages)
    side_dtypes = [p.in_dtypes[3 + j] for j in range(n_sides)]
    src = p.cached(("flash", cfg, D, DV, split, kind, vec),
                   lambda: flash.flash_attention(cfg, D, DV, split, kind == "ptx", vec, stages, side_dtypes,
                                              False, "zero_nan" if desc.nan_guard is not None else "nan",
                                              mma.HI_ROUND))
    spec = [("i", 0), ("i", 1), ("i", 2), ("o", 0), M, N, D, DV, dims[1], 1, N - M,
            q_s[0], q_s[1], sqm, sqd, k_s[0], k_s[1], skn, skd, v_s[0], v_s[1], svn, svj,
            o_s[0], o_s[1], ost[-2], ost[-1]]
    for j in range(n_sides):
        spec += [("i", 3 + j), side_b[j][0], side_b[j][1], side[j][-2], side[j][-1]]
    nb = dims[0] * dims[1]
    return impls.Launch(src, (impls._cdiv(M, cfg.bq) * cfg.threads, max(nb, 1), 1), (cfg.threads, 1, 1), spec)


def _heads_view(shape: Sequence[int], heads: int) -> tuple[tuple, list]:
    """A 3-D ONNX Attention operand [b, s, heads * size] as [b, heads, s, size]: (shape, strides)."""
    b, s, hidden = shape
    size = hidden // heads
    return (b, heads, s, size), [s * hidden, size, hidden, 1]


def onnx_attention_impl(p: impls.Params, key) -> impls.Impl | None:
    """ONNX Attention (``ops/attention.py``) on the flash kernel where the device has tensor
    cores: 3-D or 4-D q, k, v, grouped-query heads, a boolean or additive mask as long as the
    keys (broadcast over batch, heads and queries), ``is_causal``, ``scale`` and ``softcap``;
    a row whose keys are all masked gives zeros. Past caches, padded lengths, windows, a
    softmax precision other than float32, and used ``present`` / QK outputs run on the host."""
    a = p.attrs
    kind = getattr(p.engine, "mma", "") if p.engine is not None else ""
    split = 1 if p.precision == "tf32" else mma.F32_SPLIT
    sp = a.get("softmax_precision")
    if not kind or split is None or a.get("has_past") or a.get("has_nonpad_kv_seqlen") \
            or a.get("left_window_size", -1) != -1 or a.get("right_window_size", -1) != -1 \
            or (sp is not None and np.dtype(getattr(sp, "dtype", sp)) != F32) \
            or any(np.dtype(d) != F32 for d in p.in_dtypes[:3]) \
            or (p.node is not None and any(p.node.users[1:])):
        return None
    q, k, v = (tuple(s) for s in p.in_shapes[:3])
    if len(q) == 4:
        qs, ks, vs = (impls.contiguous_strides(s) for s in (q, k, v))
    elif len(q) == 3:
        hq, hkv = int(a.get("q_num_heads", 0)), int(a.get("kv_num_heads", 0))
        if hq <= 0 or hkv <= 0:
            return None
        (q, qs), (k, ks), (v, vs) = _heads_view(q, hq), _heads_view(k, hkv), _heads_view(v, hkv)
    else:
        return None
    B, Hq, M, D = q
    Hkv, N, DV = k[1], k[2], v[3]
    if Hkv == 0 or Hq % Hkv or D > flash.MAX_HEAD or DV > flash.MAX_HEAD or (split == 3 and D > 64):
        return None
    out = p.out_shapes[0]
    os_ = impls.contiguous_strides(out)
    ost = os_ if len(out) == 4 else [os_[0], DV, os_[1], 1]  # [b, m, heads * dv] as [b, heads, m, dv]
    scale = float(a.get("scale") or 0.0) or 1.0 / np.sqrt(D)
    stages = [kernels.Stage(f"({{0}} * {kernels.flit(scale)})", [("x", None)], "float")]
    cap = float(a.get("softcap") or 0.0)
    if cap > 0:
        stages.append(kernels.Stage(f"({kernels.flit(cap)} * tanh({{0}} / {kernels.flit(cap)}))", [("x", None)], "float"))
    spec_mask, side_dtypes = [], []
    if a.get("has_attn_mask"):
        ms, mdt = tuple(p.in_shapes[3]), np.dtype(p.in_dtypes[3])
        if not ms or ms[-1] != N or len(ms) > 4 or mdt not in (F32, np.dtype(np.bool_)):
            return None
        expr = "({1} ? {0} : -INFINITY)" if mdt == np.bool_ else "({0} + {1})"
        stages.append(kernels.Stage(expr, [("x", None), ("in", 0)], "float"))
        side_dtypes = [mdt]
        mst = (p.in_strides or [None] * 4)[3]
        st = impls.broadcast_strides(ms, (B, Hq, M, N), mst)
        spec_mask = [("i", 3)] + list(st)
    if M == 0 or B * Hq == 0:
        return impls.Impl(key, [])
    vec = all(x % 4 == 0 for x in list(qs[:3]) + list(ks[:3]) + list(vs[:3]) + [D, DV])
    cfg = flash.config_for(D)
    causal = bool(a.get("is_causal"))
    src = p.cached(("flash", cfg, D, DV, split, kind, vec, causal, scale, cap, tuple(side_dtypes)),
                   lambda: flash.flash_attention(cfg, D, DV, split, kind == "ptx", vec, stages, side_dtypes,
                                              causal, "zero", mma.HI_ROUND))
    spec = [("i", 0), ("i", 1), ("i", 2), ("o", 0), M, N, D, DV, Hq, Hq // Hkv, 0,
            qs[0], qs[1], qs[2], qs[3], ks[0], ks[1], ks[2], ks[3], vs[0], vs[1], vs[2], vs[3],
            ost[0], ost[1], ost[2], ost[3]] + spec_mask
    return impls.Impl(key, [impls.Launch(src, (impls._cdiv(M, cfg.bq) * cfg.threads, B * Hq, 1), (cfg.threads, 1, 1), spec)])


impls.FACTORIES[KIND] = attention_impl
impls.FACTORIES["Attention"] = onnx_attention_impl
impls.HAS_KERNEL.update((KIND, "Attention"))
