"""Causal bounds of attention masks: where the build proves, from the ops that make a mask, that
it kills every key past a diagonal (a decoder's ``kv_idx <= q_idx`` of two Ranges, ANDed with a
padding mask, then ``Where(mask, 0, min)``), the flash kernel visits only the key blocks up to
that diagonal instead of scanning the mask for them (``kernels.flash``, "Causal bounds").

A :class:`Bound` says that a tensor's value is ``kind`` wherever the indices of its last two
axes, query row ``m`` and key ``n``, have ``n - m > offset``: "false" or "true" for booleans,
"dead" for floats at most ``-DEAD_SCORE`` (an additive mask's -inf or dtype minimum). A
comparison of two integer tensors whose index forms (:mod:`.index_forms`) differ by ``n - m``
plus a constant has one; the logical ops and Select carry them (their rows' ``mask_bound``,
:class:`~.kinds.base.OpKind`); a constant that is false, true or dead everywhere has one at
every offset. Like index forms, bounds depend on shapes only.

A mask that, inside its bound, is the same for every query row (:func:`row_free`: a decoder's
causal comparison, true everywhere there, ANDed with a padding mask of one row) and whose value
past the bound is known (``Bound.value``) is read by the flash kernel one row for all queries,
the bound applied by the kernel itself (``kernels.flash``, "Shared mask rows").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .index_forms import aligned, form_of
from .kernels.flash import DEAD_SCORE

EVERYWHERE = -(1 << 62)  # the offset of a bound that holds on every element


@dataclass(frozen=True)
class Bound:
    """The value is ``kind`` ("false", "true", "dead") wherever n - m > ``offset``; ``value``:
    a dead value's exact number there, where the build knows it; ``exact``: the value is a
    function of n - m alone (a comparison: the opposite of ``kind`` wherever n - m <= offset)."""

    kind: str
    offset: int
    value: float | None = None
    exact: bool = False


def bound_of(node: Any, k: int = 0, memo: dict | None = None) -> Bound | None:
    """The bound of output ``k`` of program node ``node``, or None."""
    memo = {} if memo is None else memo
    key = (id(node), k)
    if key not in memo:
        memo[key] = None  # (a cycle, never met in a DAG, finds no bound)
        memo[key] = _bound(node, k, memo)
    return memo[key]


def _bound(node: Any, k: int, memo: dict) -> Bound | None:
    if node.is_constant:
        return _constant(node.value)
    rule = node.row.mask_bound
    if rule is None or k != 0:
        return None
    return rule(node, [bound_of(s, j, memo) for s, j in node.inputs])


def _constant(value: Any) -> Bound | None:
    v = np.asarray(value) if value is not None else None
    if v is None or v.size == 0:
        return None
    if v.dtype == np.bool_:
        return Bound("false", EVERYWHERE) if not v.any() else \
            Bound("true", EVERYWHERE) if v.all() else None
    if v.dtype.kind == "f" and bool(np.all(v <= -DEAD_SCORE)):
        return Bound("dead", EVERYWHERE, float(v.reshape(-1)[0]) if _uniform(v) else None)
    return None


def _uniform(v: np.ndarray) -> bool:
    """Whether every element of non-empty ``v`` equals its first."""
    return v.size > 0 and bool(np.all(v == v.reshape(-1)[0]))


def compare(op: str):
    """The rule of ``a op b`` (op one of <, <=, >, >=) over integer index forms:
    ``a - b = K + w (n - m)`` with ``w`` = +-1 and no other axis, so the comparison is false
    (or true) past a diagonal."""
    def rule(node: Any, _bounds: list) -> Bound | None:
        al = aligned(node, [form_of(s, j) for s, j in node.inputs])
        if al is None or len(al) != 2 or len(al[0].slopes) < 2:
            return None
        a, b = al if op in ("<", "<=") else al[::-1]  # now a < b or a <= b
        if a.base is None or b.base is None:
            return None
        diff = [None if x is None or y is None else x - y for x, y in zip(a.slopes, b.slopes)]
        if any(d != 0 for d in diff[:-2]) or diff[-1] not in (1, -1) or diff[-2] != -diff[-1]:
            return None
        strict, K = int(op in ("<", ">")), a.base - b.base
        if diff[-1] == 1:  # n - m <= -K (strict: < -K): false past that
            return Bound("false", -K - strict, exact=True)
        return Bound("true", K - 1 + strict, exact=True)  # n - m >= K (strict: > K)
    return rule


def conjunction(_node: Any, bounds: list) -> Bound | None:
    """LogicalAnd: false wherever an input is; true where all are."""
    falses = [b.offset for b in bounds if b is not None and b.kind == "false"]
    if falses:
        return Bound("false", min(falses))
    if bounds and all(b is not None and b.kind == "true" for b in bounds):
        return Bound("true", max(b.offset for b in bounds))
    return None


def disjunction(_node: Any, bounds: list) -> Bound | None:
    """LogicalOr: true wherever an input is; false where all are."""
    flipped = conjunction(_node, [negation(_node, [b]) for b in bounds])
    return negation(_node, [flipped])


def negation(_node: Any, bounds: list) -> Bound | None:
    """LogicalNot: true and false swapped."""
    b = bounds[0]
    if b is None or b.kind == "dead":
        return None
    return Bound("true" if b.kind == "false" else "false", b.offset, exact=b.exact)


def selection(_node: Any, bounds: list) -> Bound | None:
    """Select(cond, a, b): past the condition's diagonal, the bound of the branch it picks."""
    cond = bounds[0]
    if cond is None or cond.kind == "dead":
        return None
    branch = bounds[1] if cond.kind == "true" else bounds[2]
    return None if branch is None else \
        Bound(branch.kind, max(cond.offset, branch.offset), branch.value)


def past_value(bound: Bound) -> float | None:
    """The exact value of a mask past ``bound``'s diagonal (booleans as 0 or 1), or None."""
    return {"false": 0.0, "true": 1.0}.get(bound.kind, bound.value)


def row_free(node: Any, k: int, offset: int, memo: dict | None = None) -> bool:
    """Whether output ``k`` of program node ``node`` has, wherever n - m <= ``offset``, the
    same value in every query row m (axis -2): a tensor of one row (or of rank below 2), a
    comparison with an exact bound at or past ``offset`` (true or false there whole), and
    elementwise ops of such inputs (they broadcast from the right, so axis -2 is the same axis
    in each). The region has no lower edge: a sliding window's moves with the row, and a
    window longer than the prompt is one row only up to a length a decoding loop's length
    family would replay past (``runtime.length_plan``)."""
    memo = {} if memo is None else memo
    key = (id(node), k)
    if key not in memo:
        memo[key] = False
        memo[key] = _row_free(node, k, offset, memo)
    return memo[key]


def _row_free(node: Any, k: int, offset: int, memo: dict) -> bool:
    ps = node.out_pshapes[k]
    if ps.rank_is_static and (len(ps) < 2 or ps[-2].min == ps[-2].max == 1):
        return True
    if node.is_constant:
        return _uniform(np.asarray(node.value))
    bound = bound_of(node, k)
    if bound is not None and bound.exact and bound.offset >= offset:
        return True
    return node.row.expr is not None and k == 0 and \
        all(row_free(s, j, offset, memo) for s, j in node.inputs)
