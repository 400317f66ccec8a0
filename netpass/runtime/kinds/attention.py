"""Fused attention (the primitive :func:`netpass.runtime.attention.fuse_attention` makes of an
exported ``MatMul -> score ops -> Softmax -> MatMul [-> Transpose]`` chain): what it computes
(:class:`AttentionDesc`) and its kernel, one launch of the ``attention`` template (a work-group
per query row: a block of keys per pass, score ops with their side inputs, online softmax,
value rows accumulated per column; q, k, v, masks and the output through strides). A shape the
kernel cannot take (a side input that broadcasts the scores' rows or keys) runs the absorbed
nodes' own references on the host. From 16 query rows, on devices with tensor cores, the
flash kernel (``kernels.flash``) runs it instead. An ONNX ``Attention`` op
(``netpass/ops/attention``) the fusion decomposes (4-D, no cache, causal mask or soft cap) is
such a primitive; the flash kernel runs the others where it can."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ...errors import NetpassError, ShapeInferenceError
from ...ops.elementwise import Add, Select
from ..impls import (
    FusedDesc,
    Impl,
    Launch,
    Params,
    Scratch,
    broadcast_strides,
    cdiv,
    collapse,
    contiguous_strides,
    epilogue_args,
    evaluate_fused,
    fused_stages,
    size,
)
from ..kernels import decode, flash, mma_plan
from ..kernels.attention import attention
from ..kernels.common import LS, Stage, flit
from ..mask_bounds import EVERYWHERE, bound_of, past_value, row_free
from ..shape_infer import infer_host
from .attention_views import regrouped, view_shape
from .base import OpKind, table
from .matmul import matmul_shape

MAX_HEAD = 1024  # largest contraction (q·k) and value width the kernel keeps per work-group
F32 = np.dtype(np.float32)


class FusedAttention:
    """The kind of a fused attention primitive: made by the program's attention fusion, never
    an op of a model (so not a ``Node``); its node's ``subgraph`` is an :class:`AttentionDesc`."""

    type_name: ClassVar[str] = "FusedAttention"


class AttentionDesc:
    """What a FusedAttention node computes: scores = m1(q, k), the score ops ``chain`` (stage
    0 is the raw score; side inputs are the node's inputs from 3 on, in ``chain`` order), a
    softmax over the last axis (NaN probabilities read as 0 with ``nan_guard``), m2(probabilities,
    v), then ``out_perm`` when a Transpose was absorbed. With ``group`` > 1, k and v hold a
    head for every ``group`` query heads (axis -3; grouped-query attention), which m1 and m2
    read repeated.

    ``views``: (i, Reshape) for a batch view of the scores after ``chain[:i]``, and
    ``probs_views`` those of the probabilities, in turn (``[b * h, m, n]`` to ``[b, h, m, n]``
    and back: XGLM's export does both between the softmax and ``@ v``);
    their target shapes are the node's inputs after the side inputs (``deps``: read on the
    host). The kernels run where each keeps the last two dims (:meth:`walk`), over a batch
    layout that every other one splits into (``attention_views``)."""

    def __init__(self, m1, softmax, m2, chain: list[FusedDesc], out_perm: tuple | None,
                 nan_guard: tuple | None = None, prescaled: tuple = (), group: int = 1,
                 views: tuple = (), probs_views: tuple = (), source=None) -> None:
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
        self.group = group
        self.views, self.probs_views = views, probs_views
        self.sides = sum(len(f.others) for f in chain)
        n_views = len(views) + len(probs_views)
        self.deps = tuple(range(3 + self.sides, 3 + self.sides + n_views))
        # inputs after the score ops' side inputs: the new keys and values a decode step
        # appends to the cache that k and v read (kv_append), 0 or 2
        self.appends = 0
        # the ONNX Attention node this decomposes (fuse_attention): its shape rule and
        # reference are the node's (it pads a mask shorter than the keys)
        self.source = source
        # a decode step's rotary embedding of q and the new keys, read from inputs after the
        # appends (rotary_fold.RotaryFold)
        self.rotary: Any = None

    def key(self) -> tuple:
        views = tuple((i, bool(r.attrs.get("special_zero"))) for i, r in self.views)
        pviews = tuple(bool(r.attrs.get("special_zero")) for r in self.probs_views)
        return (self.ta, self.tb, self.tv, tuple(f.key() for f in self.chain), self.out_perm,
                self.nan_guard is not None, self.scale, self.appends, self.group, views,
                pviews, self.rotary.key() if self.rotary is not None else None)

    def logical(self, shapes: Sequence[tuple]) -> list[tuple]:
        """``shapes`` with k's and v's heads (axis -3) repeated ``group`` times, as m1 and m2
        see them."""
        out = [tuple(s) for s in shapes]
        if self.group > 1:
            for j in (1, 2):
                s = out[j]
                out[j] = s[:-3] + (s[-3] * self.group,) + s[-2:]
        return out

    def dead_mask(self) -> int | None:
        """The side input (counted from 0) of a final mask stage whose keys the flash kernel
        may find dead (``kernels.flash``, "Dead key blocks"): an additive float mask,
        ``scores + mask``, or a boolean one choosing the scores or a constant dead everywhere
        (``Select(mask, scores, -inf)``: ONNX Attention's); else None."""
        last = self.chain[-1] if self.chain else None
        if last is None or last.node is None:
            return None
        if last.node.is_a(Add) and len(last.others) == 1 \
                and all(np.dtype(d) == F32 for d in last.in_dtypes):
            return self.sides - 1
        if last.node.is_a(Select) and last.refs == (None, len(self.chain) - 1, None) \
                and np.dtype(last.in_dtypes[0]) == np.bool_:
            other = bound_of(*last.others[1])
            if other is not None and (other.kind, other.offset) == ("dead", EVERYWHERE):
                return self.sides - 2
        return None

    def stages(self) -> list:
        """The kernel's score stages: the absorbed q / k scale, then the score ops."""
        if self.scale is None:
            return fused_stages(self.chain, 0)
        first = Stage(f"({{0}} * {flit(self.scale)})", [("x", None)], "float")
        return [first] + fused_stages([f.shifted(1) for f in self.chain], 0)

    def walk(self, shapes: Sequence[tuple], values: Mapping[int, np.ndarray],
             strict: bool = True) -> tuple[list[tuple], list[int], tuple] | None:
        """The scores' shapes (m1's, then after each batch view; each as the score ops before
        the next view leave it), the one of them each side input is read against, and the
        probabilities' shape (m2's left operand). None where the shapes do not fit, or, when
        ``strict``, where a view is not a batch view for these shapes."""
        shapes = self.logical(shapes)
        cur = matmul_shape(self.m1.attrs, [shapes[0], shapes[1]], {})
        if cur is None:
            return None
        layouts: list[tuple] = [cur[0]]
        at: list[int] = []
        sides = iter(shapes[3:3 + self.sides])
        targets = iter(self.deps)
        views = list(self.views)
        for i, f in enumerate([*self.chain, None]):
            while views and views[0][0] == i:
                viewed = view_shape(views.pop(0)[1], layouts[-1], values.get(next(targets)),
                                    strict)
                if viewed is None:
                    return None
                layouts.append(viewed)
            if f is None:
                break
            ins = [layouts[-1] if r is not None else next(sides) for r in f.refs]
            at += [len(layouts) - 1] * sum(r is None for r in f.refs)
            out = f.row.shape(f.attrs, ins, {})
            if out is None:
                return None
            layouts[-1] = out[0]
        probs: tuple | None = layouts[-1]
        for r in self.probs_views:
            probs = view_shape(r, probs, values.get(next(targets)), strict) \
                if probs is not None else None
        return (layouts, at, probs) if probs is not None else None

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        if self.source is not None:  # (4-D: [batch, q heads, q rows, v width])
            return [tuple(shapes[0][:-1]) + (shapes[2][-1],)]
        walked = self.walk(shapes, values, strict=False)
        out = matmul_shape(self.m2.attrs, [walked[2], self.logical(shapes)[2]], {}) \
            if walked is not None else None
        if out is None:
            raise ShapeInferenceError(f"FusedAttention '{self.m2.id}': q, k, v and score input "
                                      f"shapes {[list(s) for s in shapes]} do not fit")
        o = out[0]
        return [tuple(o[i] for i in self.out_perm) if self.out_perm is not None else o]

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The absorbed nodes' own references, in turn (host fallback, REFERENCE device)."""
        if self.source is not None:
            return infer_host(self.source, list(arrays[:len(self.source.inputs)]))[:1]
        arrays = list(arrays)
        if self.group > 1:
            for j in (1, 2):
                arrays[j] = np.repeat(arrays[j], self.group, axis=-3)
        qk = list(arrays[:2])
        for j, mul, _ in self.prescaled:
            scale = next(src.value for src, _ in mul.inputs if src.is_constant)
            qk[j] = infer_host(mul, [qk[j], scale])[0]
        scores = infer_host(self.m1, qk)[0]
        sides = iter(arrays[3:3 + self.sides])
        targets = iter(arrays[d] for d in self.deps)
        done = 0
        for i, r in [*self.views, (len(self.chain), None)]:
            scores = evaluate_fused([f.shifted(-done) for f in self.chain[done:i]], scores,
                                    lambda *_: next(sides), infer_host)
            if r is not None:
                scores = infer_host(r, [scores, next(targets)])[0]
            done = i
        probs = infer_host(self.softmax, [scores])[0]
        if self.nan_guard is not None:
            isn, sel = self.nan_guard
            probs = infer_host(sel, [infer_host(isn, [probs])[0], sel.inputs[1][0].value, probs])[0]
        for r in self.probs_views:
            probs = infer_host(r, [probs, next(targets)])[0]
        out = infer_host(self.m2, [probs, arrays[2]])[0]
        return [np.transpose(out, self.out_perm) if self.out_perm is not None else out]


def _operand(shape: Sequence[int], strides: Sequence[int] | None,
             swap: bool) -> tuple[list, list, int, int]:
    """(batch dims, batch strides, row stride, column stride) of a matrix operand, its last two
    dims swapped when ``swap``."""
    st = list(strides) if strides is not None else contiguous_strides(shape)
    rs, cs = st[-2], st[-1]
    if swap:
        rs, cs = cs, rs
    return list(shape[:-2]), st[:-2], rs, cs


def attention_impl(p: Params, key, proj: tuple | None = None) -> Impl | None:
    """The fused attention's kernels for ``p``'s shapes (None: the host runs it). ``proj``:
    the decode kernel with an output projection folded in (``kernels.decode``'s ``proj``:
    attention_proj builds the rest of its launch)."""
    desc: AttentionDesc = p.node.subgraph
    if any(np.dtype(d) != F32 for d in p.in_dtypes[:3] + p.out_dtypes):
        return None
    if proj is None and p.node.proj_fold is not None and p.node.proj_fold.applies(p.in_shapes[0]):
        return Impl(key, [])  # (its output projection's kernel computes it: attention_proj)
    shapes, strides = p.in_shapes, p.in_strides or [None] * len(p.in_shapes)
    rot, folded = desc.rotary, False
    if rot is not None:  # (rotary_fold: the queries and new keys before their rotation last)
        folded, every = rot.applies(shapes[0]), strides
        shapes, strides = list(shapes[:rot.q]), list(strides[:rot.q])
        if folded:
            strides[0], strides[-2] = rot.read_strides(p.in_shapes, every)
    qb, qbs, sqm, sqd = _operand(shapes[0], strides[0], desc.ta)
    kb, kbs, skd, skn = _operand(shapes[1], strides[1], desc.tb)  # k as [d, n]
    vb, vbs, svn, svj = _operand(shapes[2], strides[2], desc.tv)
    G = desc.group  # (the kernels read k and v at head b1 / G: their strides stay)
    if G > 1:
        if len(kb) != 2 or len(vb) != 2 or len(qb) != 2:
            return None
        kb, vb = kb[:-1] + [kb[-1] * G], vb[:-1] + [vb[-1] * G]
    M, D = (shapes[0][-1], shapes[0][-2]) if desc.ta else (shapes[0][-2], shapes[0][-1])
    N = shapes[1][-2] if desc.tb else shapes[1][-1]
    DV = shapes[2][-2] if desc.tv else shapes[2][-1]
    if D > MAX_HEAD or DV > MAX_HEAD:
        return None
    walked = desc.walk(shapes, p.values or {})
    if walked is None or tuple(walked[0][-1][-2:]) != (M, N):
        if folded:  # (the host would read queries and keys the Rotary did not write)
            raise NetpassError(f"{FusedAttention.type_name} '{p.node.name}': its score inputs "
                               f"{[list(s) for s in shapes[3:]]} do not fit the decode kernel "
                               "that rotates its queries and keys")
        return None  # a score op broadcasts the rows or keys: the host runs it
    operands = ((qb, qbs, sqm, sqd), (kb, kbs, skn, skd), (vb, vbs, svn, svj))
    n_sides = desc.sides
    sides = [(shapes[3 + j], strides[3 + j]) for j in range(n_sides)]
    # the new keys and values (appended: laid out as k and v) walk the same batch dims
    xs = _append_operands(shapes, strides, len(shapes) - desc.appends, G) if desc.appends \
        else []
    decoding = M <= decode.DECODE_ROWS
    if not (decoding or N == M):
        xs = []  # (a chunk of a prompt over a past: the appends copy, the kernels read k, v)
    if desc.deps:
        viewed = regrouped(walked, operands, sides, _out_strides(desc, p, walked[2][:-2], M, DV),
                           xs)
        if viewed is None:
            if xs:
                raise NetpassError(f"{FusedAttention.type_name} '{p.node.name}': the batch of "
                                   f"its cache appends {[list(s) for s in shapes[-2:]]} is not "
                                   "one its batch views split into")
            return None
        batch, operands, side_strides, ost, xs = viewed
        (qb, qbs, _, _), (kb, kbs, _, _), (vb, vbs, _, _) = operands
        scores_shape = tuple(batch) + (M, N)
    else:
        batch = list(np.broadcast_shapes(tuple(qb), tuple(kb), tuple(vb),
                                         tuple(walked[0][-1][:-2])))
        scores_shape = tuple(batch) + (M, N)
        side_strides = [broadcast_strides(sh, scores_shape, st) for sh, st in sides]
        ost = _out_strides(desc, p, batch, M, DV)
    rank = len(batch)
    if desc.appends and decoding != (_new_rows(desc, shapes) <= decode.DECODE_ROWS):
        raise NetpassError(f"{FusedAttention.type_name} '{p.node.name}': {M} query rows for "
                           f"{_new_rows(desc, shapes)} new keys (the cache appends need both "
                           f"up to {decode.DECODE_ROWS} or both above)")
    append = bool(desc.appends) and decoding
    # a prompt over empty caches (no past: N == M) reads its new keys and values where they
    # are, and its work-groups write them into the caches (kernels.attention.fill_caches)
    fill = bool(desc.appends) and not decoding and N == M
    kv = [0, 1, 2]  # the inputs the kernels read q, k and v from
    caches: list = []
    if fill:
        caches, operands = list(operands[1:]), (operands[0], xs[0], xs[1])
        (kb, kbs, skn, skd), (vb, vbs, svn, svj) = xs
        kv = [0, len(shapes) - 2, len(shapes) - 1]
    flash_impl = None if decoding else \
        _flash_launch(p, desc, batch, operands, ost, M, N, D, DV, scores_shape, side_strides, kv,
                      caches)
    if flash_impl is not None:
        return Impl(key, *flash_impl) if M and size(batch) else Impl(key, [])
    bstr = [broadcast_strides(b, batch, s) if b else [0] * rank
            for b, s in ((qb, qbs), (kb, kbs), (vb, vbs))]
    xb = [broadcast_strides(x[0], batch, x[1]) if x[0] else [0] * rank
          for x in (xs if append else caches)]
    rots = [rot.table_strides(i, p.in_shapes, every, tuple(batch) + (M, rot.width))
            for i in (rot.cos, rot.sin)] if folded else []
    dims, coll = collapse(batch, bstr + [list(ost[:rank])] + xb + [r[:rank] for r in rots])
    if len(dims) > 2:
        if append or fill:
            raise NetpassError(f"{FusedAttention.type_name} '{p.node.name}': the batch of q, "
                               f"k and v {[list(s) for s in shapes[:3]]} does not collapse to "
                               "two dims")
        return None
    while len(dims) < 2:
        dims, coll = [1] + dims, [[0] + c for c in coll]
    q_s, k_s, v_s, o_s = coll[:4]
    if not _heads_kept(G, batch, dims, k_s, v_s, bstr):
        if append or fill:
            raise NetpassError(f"{FusedAttention.type_name} '{p.node.name}': the key/value "
                               "heads of its cache appends do not stay a dim of their own")
        return None
    nb = dims[0] * dims[1]
    edims, est = collapse(list(scores_shape), side_strides) if n_sides else ([], [])
    stages = p.cached(("attention_stages",), desc.stages)
    guard = desc.nan_guard is not None
    side_dts = [p.in_dtypes[3 + j] for j in range(n_sides)]
    spec = [("i", kv[0]), ("i", kv[1]), ("i", kv[2]), ("o", 0), M, N, D, DV, dims[1], G,
            q_s[0], q_s[1], sqm, sqd, k_s[0], k_s[1], skn, skd, v_s[0], v_s[1], svn, svj,
            o_s[0], o_s[1], ost[-2], ost[-1]]
    splits = 1
    if decoding:  # the decode kernel, which appends the new keys and values where asked
        splits = _decode_splits(p, M * nb, DV)
        ptx = getattr(p.engine, "mma", "") == "ptx"
        rw = rot.kernel() if folded else None
        # (a primitive's projection is one: its epilogue's ops are fixed, not their rank)
        src = p.cached(("attention_decode", len(edims), D, DV, guard, append, splits > 1, ptx,
                        rw, proj[2] if proj else None), lambda: decode.attention_decode(
                            stages, side_dts, len(edims), D, DV, guard, append, splits > 1, ptx,
                            rw, proj))
        if append:
            first = len(shapes) - desc.appends
            spec[4:4] = [("i", rot.k if folded else first), ("i", first + 1)]
            if folded:
                spec[0] = ("i", rot.q)
            spec += [_new_rows(desc, shapes)]
            for x, st in zip(xs, coll[4:]):
                spec += [st[0], st[1], x[2], x[3]]
        local = decode.DLS
    else:
        jt = cdiv(DV, LS)
        dmax = max(LS, 1 << max(D - 1, 0).bit_length())
        src = p.cached(("attention", len(edims), jt, dmax, guard, fill),
                       lambda: attention(stages, side_dts, len(edims), jt, dmax, guard, fill))
        local = LS
    spec += epilogue_args(n_sides, edims, est, [("i", 3 + j) for j in range(n_sides)])
    for i, r, (c0, c1) in zip((rot.cos, rot.sin), rots, coll[4 + len(xb):]) if folded else ():
        if c1:
            raise NetpassError(f"{FusedAttention.type_name} '{p.node.name}': its rotary "
                               "embedding's cos and sin differ between heads")
        spec += [("i", i), c0, r[-2], r[-1]]
    for g, nf in zip((rot.gq, rot.gk), rot.norms or ()) if folded else ():
        if g is not None:  # (the norms' scales: kernels.decode's GQ, GK)
            spec += [("i", g), nf.stride]
    if fill:
        spec += _fill_spec(caches, coll[4:])
    if M == 0 or nb == 0:
        return Impl(key, [])
    if splits > 1:  # the splits' partial rows, and the rows' arrival counts (left as found)
        return Impl(key, [Launch(src, (local * splits, M, nb), (local, 1, 1),
                                 spec + [("b", 0), ("b", 1)])],
                    [Scratch(4 * M * nb * splits * (DV + 4)), np.zeros(M * nb, np.int32)])
    return Impl(key, [Launch(src, (local, M, nb), (local, 1, 1), spec)])


def _out_strides(desc: AttentionDesc, p: Params, batch: Sequence[int], M: int,
                 DV: int) -> list[int]:
    """Strides over m2's output ``batch + (M, DV)`` of the node's output (contiguous, that
    order permuted by an absorbed Transpose)."""
    out_cs = contiguous_strides(p.out_shapes[0])
    if desc.out_perm is None:
        return out_cs
    inv = [0] * len(desc.out_perm)
    for d, e in enumerate(desc.out_perm):
        inv[e] = d
    return [out_cs[inv[e]] for e in range(len(batch) + 2)]


def _decode_splits(p: Params, rows: int, DV: int) -> int:
    """Runs the decode kernel splits each row's keys into (``kernels.decode``, "Key splits"):
    towards DECODE_SPLIT_WAVES work-groups per compute unit over ``rows`` (query row, batch)
    pairs, at most ``decode.MAX_SPLITS``; 1 (no split) where the rows fill the device or the
    value width has no float4 columns. Independent of the number of keys, so that a decode
    loop's steps keep one launch shape (their arguments move with the length)."""
    if p.engine is None or DV % 4 or DV // 4 > decode.DLS or rows <= 0:
        return 1
    cus = int(p.engine.device.max_compute_units)
    return max(1, min(decode.MAX_SPLITS, cdiv(DECODE_SPLIT_WAVES * cus, rows)))


def _heads_kept(G: int, batch: list, dims: list, k_s: list, v_s: list, bstr: list) -> bool:
    """Whether the collapsed batch keeps the query heads as its last dim, walked by k and v
    with their own head strides (the kernels divide the head index by ``G``): no grouping,
    or the heads not merged with another dim."""
    return G == 1 or (dims[-1] == batch[-1] and k_s[-1] == bstr[1][-1]
                      and v_s[-1] == bstr[2][-1])


def _new_rows(desc: AttentionDesc, shapes: Sequence[tuple]) -> int:
    """The rows the step appends: those of the new keys (the first appended input, laid out
    as the cache: [..., rows, head])."""
    return shapes[len(shapes) - desc.appends][-2]


def _append_operands(shapes: Sequence[tuple], strides: Sequence, first: int,
                     group: int) -> list[tuple]:
    """(batch dims, batch strides, row stride, column stride) of the new keys and of the new
    values (inputs ``first`` and ``first + 1``, laid out as the cache: [..., rows, head]),
    their heads counted as query heads (grouped-query attention: as k and v)."""
    out = []
    for j in (first, first + 1):
        b, bs, rs, cs = _operand(shapes[j], strides[j], False)
        out.append((b[:-1] + [b[-1] * group] if group > 1 and b else b, bs, rs, cs))
    return out


def _fill_spec(caches: list, batch_strides: list) -> list:
    """The arguments of ``kernels.attention.FILL_ARGS``: the key and value caches (inputs 1
    and 2) with their collapsed batch strides and their row and column strides."""
    (_, _, ckn, ckd), (_, _, cvn, cvj) = caches
    (ck0, ck1), (cv0, cv1) = batch_strides
    return [("i", 1), ck0, ck1, ckn, ckd, ("i", 2), cv0, cv1, cvn, cvj]


# -- the flash kernel (tensor cores) ---------------------------------------------------------------
FLASH_MIN_M = 16  # query rows from which the flash kernel replaces the row-per-work-group one
# dead key blocks are looked for from this many flash work-groups per compute unit: below it
# they are all resident at once and the time is that of the longest (the last queries of a
# causal mask visit every key anyway), so the scan only costs (H100, 12 heads x 1024 causal
# queries, 192 work-groups: 0.184 -> 0.199 ms f32; 4096 queries: 1.87 -> 1.51 ms)
FLASH_SKIP_WAVES = 2.0
# the decode kernel's key splits aim at this many work-groups per compute unit: a decode step's
# attention is a dozen work-groups (one per head) otherwise, each a chain of load latencies
DECODE_SPLIT_WAVES = 2
# below that, each row's key blocks are split (kernels.flash, "Key splits") towards this many
# work-groups per compute unit, per TF32 split (1: TF32, 3: 3xTF32), in runs of at least
# FLASH_MIN_CHUNK blocks (H200, 12 heads of 64, causal: S = 1024 f32 0.192 -> 0.139 ms, TF32
# 0.119 -> 0.096; S = 128 f32 0.030 -> 0.028; more splits cost more than they gain: 12 waves
# in runs of 2, 0.175 ms in GPT-2's prefill). GPT-2 small's 1024-token prefill, 12 layers,
# after the loop's instructions were cut (BENCHMARKS, issue 18's twenty-fourth round): TF32
# 0.79 ms at 3 waves, 0.74-0.75 at 2, 0.77-0.78 at 1.5; 3xTF32 1.13 at 3, 1.30 at 2
FLASH_SPLIT_WAVES = {1: 2.0, 3: 3.0}
FLASH_MIN_CHUNK = 1


def _compute_units(p: Params) -> int:
    return int(getattr(p.engine.device, "max_compute_units", 1)) if p.engine is not None else 1


def dead_keys(p: Params, side: int | None, dtype, groups: int, chunk: int,
              bounded: bool = False) -> tuple[int, str] | None:
    """The flash kernel's dead keys (``kernels.flash``) of side input ``side`` where there is
    one, and either the build bounds them (``bounded``), ``groups`` work-groups outnumber
    FLASH_SKIP_WAVES per compute unit or the keys are split (``chunk`` > 0: each split scans
    its own)."""
    if side is None or not (bounded or chunk or groups >= FLASH_SKIP_WAVES * _compute_units(p)):
        return None
    return side, flash.dead_predicate(dtype)


def causal_bound(p: Params, k: int) -> tuple[int | None, str | None]:
    """The diagonal past which the build proves input ``k`` (a mask) dead for every key
    (``runtime.mask_bounds``: false for a boolean mask, dead for an additive one), as the
    flash kernel's ``cofs``, and the mask's value past it as a C literal where the kernel may
    read one row of the mask for every query (``mask_bounds.row_free``); None for what the
    build does not prove."""
    dtype = np.dtype(p.in_dtypes[k])
    kind = "false" if dtype == np.bool_ else "dead"
    bound = bound_of(*p.node.inputs[k]) if p.node is not None else None
    if bound is None or bound.kind != kind:
        return None, None
    cofs = max(-(1 << 30), min(1 << 30, bound.offset))
    past = past_value(bound)
    if past is None or not row_free(*p.node.inputs[k], cofs):
        return cofs, None
    return cofs, str(int(past)) if dtype == np.bool_ else flit(past)


def key_chunk(p: Params, groups: int, blocks: int, split: int) -> int:
    """Key blocks per split of the flash kernel's rows of ``blocks`` key blocks over
    ``groups`` work-groups (``kernels.flash``, "Key splits") for TF32 split ``split``; 0: no
    split (enough work-groups, or rows too short)."""
    cus = _compute_units(p)
    if groups >= FLASH_SKIP_WAVES * cus:
        return 0
    waves = FLASH_SPLIT_WAVES[split]
    splits = min(cdiv(int(waves * cus), max(groups, 1)), blocks // FLASH_MIN_CHUNK)
    return cdiv(blocks, splits) if splits > 1 else 0


def flash_impl(src_of, cfg: flash.FlashConfig, M: int, N: int, DV: int, nb: int,
               chunk: int, spec: list) -> tuple[list, list]:
    """(launches, impl buffers) of the flash kernel ``src_of(kv_split)`` over ``nb`` batches,
    its rows' keys split in runs of ``chunk`` blocks (0: not split): the splits' partial
    rows (a Scratch) and the query blocks' arrival counts (zeros, left as found)."""
    m_blocks = cdiv(M, cfg.bq)
    gws = (m_blocks * cfg.threads, max(nb, 1), 1)
    if not chunk:
        return [Launch(src_of(False), gws, (cfg.threads, 1, 1), spec)], []
    splits = cdiv(cdiv(N, cfg.bkv), chunk)
    part = Scratch(4 * nb * m_blocks * splits * cfg.bq * (cdiv(DV, 8) * 8 + 2))
    launch = Launch(src_of(True), gws[:2] + (splits,), (cfg.threads, 1, 1),
                    spec + [chunk, ("b", 0), ("b", 1)])
    return [launch], [part, np.zeros(nb * m_blocks, np.int32)]


def _flash_launch(p: Params, desc: AttentionDesc, batch: list, operands, ost: list, M: int,
                  N: int, D: int, DV: int, scores_shape: tuple, side: list, kv: list,
                  caches: list) -> tuple[list, list] | None:
    """The tensor-core flash kernel (``kernels.flash``) for prefill-sized M on devices with
    ``engine.mma``: TF32 with INFERENCE_PRECISION_HINT "tf32", 3xTF32
    (``kernels.mma_plan.F32_SPLIT``) for float32 up to head size 64. None where it does not
    apply (the batch of q, k, v, the output and the score ops' side inputs must collapse to
    two dims). ``kv``: the inputs q, k and v are read from; ``caches``: the operands of the
    caches the kernel fills (a prompt over empty caches), or none."""
    kind = getattr(p.engine, "mma", "") if p.engine is not None else ""
    split = 1 if p.precision == "tf32" else mma_plan.F32_SPLIT
    if not kind or M < FLASH_MIN_M or split is None or D > flash.MAX_HEAD or DV > flash.MAX_HEAD \
            or (split == 3 and D > 64):
        return None
    rank = len(batch)
    n_sides = desc.sides
    bstr = [broadcast_strides(b, batch, s) if b else [0] * rank for b, s, _, _ in operands]
    cst = [broadcast_strides(b, batch, s) if b else [0] * rank for b, s, _, _ in caches]
    dims, coll = collapse(batch, bstr + [list(ost[:rank])] + [s[:rank] for s in side] + cst)
    if len(dims) > 2:
        return None
    while len(dims) < 2:
        dims, coll = [1] + dims, [[0] + c for c in coll]
    (q_s, k_s, v_s, o_s), side_b = coll[:4], coll[4:4 + n_sides]
    if not _heads_kept(desc.group, batch, dims, k_s, v_s, bstr):
        return None
    (_, _, sqm, sqd), (_, _, skn, skd), (_, _, svn, svj) = operands
    vec = sqd == 1 and skd == 1 and svj == 1 and D % 4 == 0 and DV % 4 == 0 \
        and all(x % 4 == 0 for x in [sqm, skn, svn] + q_s + k_s + v_s)
    cfg = flash.config_for(D, split)
    stages = p.cached(("attention_stages",), desc.stages)
    side_dtypes = [p.in_dtypes[3 + j] for j in range(n_sides)]
    nb = dims[0] * dims[1]
    groups = cdiv(M, cfg.bq) * max(nb, 1)
    chunk = key_chunk(p, groups, cdiv(N, cfg.bkv), split)
    dead = desc.dead_mask()
    bound, past = (None, None) if dead is None else causal_bound(p, 3 + dead)
    shared = None if past is None else (dead, past)
    skip = dead_keys(p, dead, F32 if dead is None else p.in_dtypes[3 + dead], groups, chunk,
                     bound is not None)
    empty_rows = "zero_nan" if desc.nan_guard is not None else "nan"
    fill = bool(caches)

    unit_keys = all(s[-1] == 1 for s in side[:n_sides])

    def src_of(kv_split: bool):
        return p.cached(("flash", cfg, D, DV, split, kind, vec, skip, fill, kv_split,
                         bound is not None, unit_keys, shared),
                        lambda: flash.flash_attention(cfg, D, DV, split, kind == "ptx", vec,
                                                      stages, side_dtypes, False, empty_rows,
                                                      mma_plan.HI_ROUND, skip, fill, kv_split,
                                                      bound is not None, unit_keys, shared))
    spec = [("i", kv[0]), ("i", kv[1]), ("i", kv[2]), ("o", 0), M, N, D, DV, dims[1],
            desc.group, N - M if bound is None else bound,
            q_s[0], q_s[1], sqm, sqd, k_s[0], k_s[1], skn, skd, v_s[0], v_s[1], svn, svj,
            o_s[0], o_s[1], ost[-2], ost[-1]]
    for j in range(n_sides):
        spec += [("i", 3 + j), side_b[j][0], side_b[j][1], side[j][-2], side[j][-1]]
    if fill:
        spec += _fill_spec(caches, coll[4 + n_sides:])
    return flash_impl(src_of, cfg, M, N, DV, nb, chunk, spec)


ROWS = table(OpKind(FusedAttention, impl=attention_impl, uniform=True))
