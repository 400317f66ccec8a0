"""The range of ``t`` over which a length family's host values hold.

A family (:mod:`~netpass.runtime.length_plan`) fits its host values on three steps and then
sets them from their forms at any ``t``. A value cut by a threshold in ``t`` is affine on
one side of it only: a sliding window's mask (``kv_idx > q_idx - window``) is all true while
the sequence is shorter than the window, so three steps before the window fit an all-true row
that is wrong from the window on (and a ``t > limit`` flag is one constant on each side).

For every host value of the family whose inputs are values of the family too (host forms,
fixed shape values, constants) :func:`valid_range` evaluates the node's op on its inputs'
forms at other lengths and finds how far from the samples its own form still gives the op's
value: doubling the distance, then bisecting. A threshold on affine values flips each element
once at most, so the lengths where a form holds are an interval; the family's range is the
intersection. The per-primitive path runs a step outside it (and samples a family of that
range); ShapeOf values, taken from the binding, values of the per-primitive path or of
kernels, and nodes only ShapeOfs read (shapes alone) need no check.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..ops.shape_ops import ShapeOf
from .length_forms import work_holds
from .length_steps import LinHost, LinKernel
from .shape_infer import infer_host
from .step_plan import ShapeEntry

REACH = 1 << 16  # how far past the samples a range reaches (a step beyond starts another one)


def _value(e: Any, t: int) -> tuple:
    """(output shapes, arrays) a LinHost or a ShapeEntry gives at ``t``."""
    if type(e) is LinHost:
        return e.form.at(t)
    return tuple(tuple(o) for o in e.out or ()), tuple(e.host)


def _checker(node: Any, entry: Any, inputs: list) -> Callable[[int], bool]:
    """Whether ``entry``'s value at ``t`` is ``node``'s op on its inputs' values there
    (``inputs``: per input, its entry and output, or its constant value)."""
    dtypes = node.out_dtypes

    def ok(t: int) -> bool:
        try:
            arrays = [src if type(src) is np.ndarray else _value(src, t)[1][k]
                      for src, k in inputs]
            want = infer_host(node, arrays)
            shapes, got = _value(entry, t)
        except Exception:  # (a length the values cannot take: a negative size)
            return False
        return len(want) == len(got) and all(
            tuple(w.shape) == tuple(s) and np.array_equal(np.asarray(w, dtype=d), g)
            for w, g, s, d in zip(want, got, shapes, dtypes))
    return ok


def _reach(ok: Callable[[int], bool], t0: int, sign: int, limit: int) -> int:
    """The furthest distance ``d <= limit`` from ``t0`` (towards ``sign``) such that ``ok``
    holds from ``t0`` to ``t0 + sign * d``, ``ok`` holding on an interval around ``t0``."""
    good, d = 0, 1
    while d < limit and ok(t0 + sign * d):
        good, d = d, 2 * d
    bad = min(d, limit)
    if bad == limit and ok(t0 + sign * limit):
        return limit
    while bad - good > 1:
        mid = (good + bad) // 2
        if ok(t0 + sign * mid):
            good = mid
        else:
            bad = mid
    return good


def _narrow(ok: Callable[[int], bool], t0: int, lo: int, hi: int) -> tuple[int, int]:
    """``(lo, hi)`` narrowed to the interval around ``t0`` where ``ok`` holds."""
    return max(lo, t0 - _reach(ok, t0, -1, t0 - lo)), min(hi, t0 + _reach(ok, t0, 1, hi - t0))


def valid_range(nodes: list, entries: list, t0: int) -> tuple[int, int]:
    """The lengths ``(lo, hi)`` around ``t0`` (a sampled one) where every host value among
    ``entries`` that can be checked equals its node's op on its inputs' values."""
    by_index = {e.index: e for e in entries if type(e) in (LinHost, ShapeEntry)}
    lo, hi = 0, t0 + REACH
    for index, e in by_index.items():
        node = nodes[index]
        if node.is_a(ShapeOf) or not node.inputs or node.shape_only:
            continue
        inputs: list = []
        for src, k in node.inputs:
            if src.is_constant:
                inputs.append((np.asarray(src.value), 0))
            elif src.index in by_index and not src.shape_only:
                inputs.append((by_index[src.index], k))
            else:
                break  # (an input the family does not set: nothing to check it against)
        else:
            lo, hi = _narrow(_checker(node, e, inputs), t0, lo, hi)
    return lo, hi


def work_range(entries: list, t0: int, lo: int, hi: int) -> tuple[int, int]:
    """``(lo, hi)`` narrowed to the lengths around ``t0`` where every launch's fixed work dims
    that moving counts covered at the samples (``fit_work``'s "k") are still what those
    counts cover: beyond, the dim is either a count or a fixed size, which the samples there
    tell apart."""
    for e in entries:
        if type(e) is not LinKernel:
            continue
        for _, _, ints, _, work in e.launches:
            if all(w[0] != "k" for w in work):
                continue

            def ok(t: int, ints=ints, work=work) -> bool:
                return work_holds(work, ints.at(t))
            lo, hi = _narrow(ok, t0, lo, hi)
    return lo, hi


__all__ = ["REACH", "valid_range", "work_range"]
