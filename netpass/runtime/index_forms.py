"""Affine index forms: what the build proves of an integer tensor's values from the ops that make
it, without reading them (a decoder mask's ``Gather`` indices ``b * total + arange(L)``, made
by a Range, Unsqueezes, a Multiply and an Add).

A :class:`Form` says ``value[i] = base + sum_a slopes[a] * i[a]`` over the tensor's index
``i``; a coefficient the build does not know is None, and the form holds only where every axis
whose slope is unknown has size 1 (:meth:`Form.at`: the concrete base and slopes for a shape, or
None). A node's form comes from its row's ``affine`` rule (:class:`~.kinds.base.OpKind`: Range,
the reshape-likes, Add, Subtract, Multiply, integer Converts) applied to its inputs' forms; a
constant's is fitted to its values; any other tensor whose dims are all statically 1 is one
unknown value (its slopes 0), and any other tensor has none. Forms depend on shapes only, so a
decision taken from them is a function of the binding (a step plan replays it).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Form:
    """``base + sum_a slopes[a] * i[a]``; None: unknown (see the module)."""

    base: int | None
    slopes: tuple[int | None, ...]

    def at(self, shape: Sequence[int]) -> tuple[int, tuple[int, ...]] | None:
        """(base, slopes) for a tensor of ``shape`` (slopes of size-1 axes 0), or None where
        the base or the slope of an axis longer than 1 is unknown."""
        if self.base is None or len(shape) != len(self.slopes):
            return None
        slopes = []
        for d, s in zip(shape, self.slopes):
            if d == 1:
                s = 0
            elif s is None:
                return None
            slopes.append(s)
        return self.base, tuple(slopes)


def add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def mul(a: int | None, b: int | None) -> int | None:
    """A product where a proven 0 makes an unknown factor harmless."""
    if a == 0 or b == 0:
        return 0
    return None if a is None or b is None else a * b


def static_one(d: Any) -> bool:
    """Whether Dimension ``d`` is statically 1."""
    return d.min == d.max == 1


def _integer(dt: Any) -> bool:
    return np.dtype(dt).kind in "iu"


def _fitted(value: np.ndarray) -> Form | None:
    """The form of a constant integer array, where its values are affine in their index."""
    v = np.asarray(value)
    if v.dtype.kind not in "iu" or v.size == 0 or v.size > 4096:
        return None
    base = int(v.reshape(-1)[0])
    slopes = tuple(int(v[(0,) * a + (1,) + (0,) * (v.ndim - a - 1)]) - base if v.shape[a] > 1
                   else 0 for a in range(v.ndim))
    grid = np.full(v.shape, base, dtype=np.int64)
    for a, s in enumerate(slopes):
        if s:
            grid = grid + s * np.arange(v.shape[a]).reshape((-1,) + (1,) * (v.ndim - a - 1))
    return Form(base, slopes) if np.array_equal(grid, v) else None


def form_of(node: Any, k: int = 0) -> Form | None:
    """The form of output ``k`` of program node ``node`` (memoised on the node), or None."""
    memo = node.index_forms
    if k not in memo:
        memo[k] = None  # (a cycle, never met in a DAG, finds no form)
        memo[k] = _form(node, k)
    return memo[k]


def _form(node: Any, k: int) -> Form | None:
    ps = node.out_pshapes[k]
    if not ps.rank.is_static or not _integer(node.out_dtypes[k]):
        return None
    if node.is_constant:
        return _fitted(node.value)
    rule = node.row.affine
    if rule is not None and k == 0:
        form = rule(node, [form_of(s, j) for s, j in node.inputs])
        if form is not None and len(form.slopes) == len(ps):
            return form
    if all(static_one(d) for d in ps):
        return Form(None, (0,) * len(ps))
    return None


def aligned(node: Any, forms: list) -> list[Form] | None:
    """``forms`` of a numpy-broadcasting op's inputs at its output's rank (leading axes slope
    0). Where two inputs or more are not statically 1 along an axis, one of them may be
    broadcast (size 1) at runtime: their slopes there other than a proven 0 become unknown."""
    out = node.out_pshapes[0]
    if any(f is None for f in forms) or not out.rank.is_static:
        return None
    rank = len(out)
    pads = [rank - len(f.slopes) for f in forms]
    if min(pads) < 0:
        return None
    slopes = [[0] * p + list(f.slopes) for p, f in zip(pads, forms)]
    for a in range(rank):
        wide = [j for j, (s, _) in enumerate(node.inputs)
                if a >= pads[j] and not static_one(s.out_pshapes[node.inputs[j][1]][a - pads[j]])]
        if len(wide) > 1:
            for j in wide:
                if slopes[j][a] != 0:
                    slopes[j][a] = None
    return [Form(f.base, tuple(s)) for f, s in zip(forms, slopes)]


def reshaped(node: Any, form: Form | None) -> Form | None:
    """The form through a reshape-like (Reshape, Squeeze, Unsqueeze): the same values in the
    same order. Known where the input's values are all one (slopes 0), or where the input and
    the output have at most one dim each that is not statically 1 (its slope moves)."""
    out = node.out_pshapes[0]
    if form is None or not out.rank.is_static:
        return None
    if all(s == 0 for s in form.slopes):
        return Form(form.base, (0,) * len(out))
    src, k = node.inputs[0]
    wide_in = [a for a, d in enumerate(src.out_pshapes[k]) if not static_one(d)]
    wide_out = [a for a, d in enumerate(out) if not static_one(d)]
    if len(wide_in) != 1 or len(wide_out) > 1:
        return None
    slopes: list[int | None] = [0] * len(out)
    if wide_out:
        slopes[wide_out[0]] = form.slopes[wide_in[0]]
    return Form(form.base, tuple(slopes))
