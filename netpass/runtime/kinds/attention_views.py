"""Batch views of a fused attention (``AttentionDesc.views``): Reshapes of the scores or the
probabilities that regroup their batch dims and keep the last two (``[b * h, m, n]`` to
``[b, h, m, n]`` and back). The kernels read every tensor of such an attention over one batch
layout that each view's splits into: what a view gives a shape for its target
(:func:`view_shape`), that layout (:func:`refinement`) and the strides over it
(:func:`regrouped`)."""
from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import accumulate

import numpy as np

from ..impls import broadcast_strides, reshape_strides, size


def view_shape(r, shape: tuple, target: np.ndarray | None, strict: bool) -> tuple | None:
    """The shape Reshape ``r`` gives ``shape`` for ``target``; when ``strict``, only where it
    keeps the last two dims (a batch view), else None."""
    out = r.row.shape(r.attrs, [shape, np.shape(target)], {1: target}) \
        if target is not None else None
    if out is None:
        return None
    new = tuple(out[0])
    if strict and (len(new) < 2 or new[-2:] != tuple(shape[-2:]) or size(new) != size(shape)):
        return None
    return new


def refinement(batches: list[list[int]]) -> list[int] | None:
    """The batch shape that each of ``batches`` (as many elements each) is, neighbours
    merged: their running products together, each dividing the next; None where there is
    none (``[2, 3]`` and ``[3, 2]``)."""
    if len({size(b) for b in batches}) != 1:
        return None
    out, prev = [], 1
    for c in sorted({c for b in batches for c in accumulate(b, operator.mul)}):
        if prev == 0 or c % prev:
            return None
        out.append(c // prev)
        prev = c
    return out


def regrouped(walked: tuple, operands: tuple, sides: list, ost: list[int],
              appends: Sequence[tuple] = ()) -> tuple[list, tuple, list, list, list] | None:
    """(batch, operands, side input strides over the scores, output strides, ``appends``) of
    an attention with batch views (``AttentionDesc.walk``), every tensor read over the one
    batch layout that each view's splits into (:func:`refinement`); None where there is none,
    or where v broadcasts the probabilities. ``appends``: the new keys and values of cache
    appends (kv_append: operands as q's, laid out as the caches, ``[b, h, rows, head]`` where
    k may be ``[b * h, n, head]``), their batch in the layout too."""
    layouts, at, probs = walked
    pb = list(probs[:-2])
    (qb, qbs, sqm, sqd), (kb, kbs, skn, skd), (vb, vbs, svn, svj) = operands
    if list(np.broadcast_shapes(tuple(vb), tuple(pb))) != pb:
        return None
    batch = refinement([list(s[:-2]) for s in layouts] + [pb]
                       + [list(x[0]) for x in appends if x[0]])
    if batch is None:
        return None

    def split(b: Sequence[int], bs: Sequence[int], layout: Sequence[int]) -> list[int] | None:
        st = broadcast_strides(b, layout, bs) if b else [0] * len(layout)
        return reshape_strides(layout, st, batch)

    first = layouts[0][:-2]
    q_s, k_s, v_s, o_s = split(qb, qbs, first), split(kb, kbs, first), split(vb, vbs, pb), \
        split(pb, ost[:-2], pb)
    side_st = []
    for (shape, st), i in zip(sides, at):
        full = broadcast_strides(shape, layouts[i], st)
        b_st = split(layouts[i][:-2], full[:-2], layouts[i][:-2])
        if b_st is None:
            return None
        side_st.append(b_st + full[-2:])
    xs = [(b, split(b, bs, b), rs, cs) for b, bs, rs, cs in appends]
    if q_s is None or k_s is None or v_s is None or o_s is None or \
            any(x[1] is None for x in xs):
        return None
    return batch, ((batch, q_s, sqm, sqd), (batch, k_s, skn, skd), (batch, v_s, svn, svj)), \
        side_st, o_s + list(ost[-2:]), [(batch, st, rs, cs) for _, st, rs, cs in xs]
