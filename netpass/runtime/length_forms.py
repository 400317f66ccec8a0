"""Forms: values whose ints move affinely with a decoding loop's length ``t`` (the fields of
a length family's entries, :mod:`~netpass.runtime.length_plan`).

A :class:`Form` is a nested int structure (shapes, argument lists, offsets) whose ints are
``base + slope * t``, fitted through two samples and checked against a third; a
:class:`GrowForm` a host array that grows along one axis as ``a + b * t + c * i``; work sizes
(:func:`fit_work`) are affine too, or the work-group multiple covering a moving count.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .impls import Cover


def _flatten(x: Any, out: list) -> Any:
    """The structure of ``x`` (ints in tuples, lists, int arrays, dicts of them), its ints
    appended to ``out``; None when ``x`` holds something else."""
    if type(x) is int or isinstance(x, np.integer):
        out.append(int(x))
        return "i"
    if type(x) in (tuple, list):
        specs = []
        for v in x:
            s = _flatten(v, out)
            if s is None:
                return None
            specs.append(s)
        return (type(x), tuple(specs))
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "iub":
            return None
        out.extend(int(v) for v in x.reshape(-1))
        return ("a", x.shape, x.dtype)
    if isinstance(x, dict):
        keys = sorted(x)
        specs = []
        for k in keys:
            s = _flatten(x[k], out)
            if s is None:
                return None
            specs.append(s)
        return ("d", tuple(keys), tuple(specs))
    if x is None:
        return "n"
    return None


def _build(spec: Any, it) -> Any:
    if spec == "i":
        return next(it)
    if spec == "n":
        return None
    tag = spec[0]
    if tag == "a":
        shape, dtype = spec[1], spec[2]
        n = 1
        for d in shape:
            n *= d
        return np.array([next(it) for _ in range(n)], dtype=dtype).reshape(shape)
    if tag == "d":
        return {k: _build(s, it) for k, s in zip(spec[1], spec[2])}
    return tag(_build(s, it) for s in spec[1])


def _expr(spec: Any, items, arrays: list) -> str:
    """Python source of ``spec``'s value with its ints ``base + slope * t`` (``items``: their
    (base, slope) in order, with their position). An array is ``A[j](t)``: ``arrays`` gets
    its (base, slope, shape, dtype), numpy arrays computed in one operation per step."""
    if spec == "i":
        _, (b, sl) = next(items)
        return str(b) if not sl else f"({b} + {sl} * t)"
    if spec == "n":
        return "None"
    tag = spec[0]
    if tag == "a":
        shape, dtype = spec[1], spec[2]
        n = 1
        for d in shape:
            n *= d
        run = [next(items) for _ in range(n)]
        arrays.append((np.array([b for _, (b, _) in run], np.int64),
                       np.array([sl for _, (_, sl) in run], np.int64), shape, dtype))
        return f"A[{len(arrays) - 1}](t)"
    parts = [_expr(sub, items, arrays) for sub in spec[-1]]
    if tag == "d":
        return "{" + ", ".join(f"{k!r}: {e}" for k, e in zip(spec[1], parts)) + "}"
    if tag is list:
        return "[" + ", ".join(parts) + "]"
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


# arrays up to this size (int64 or bool: a Python int converts to them as ``astype`` would)
# are made from a list literal of their values: one numpy call, and a reshape where they have
# more than one dim (a decode step's host values are shapes, positions and single lengths;
# numpy reads a nested literal more slowly than it reshapes a flat one).
LITERAL_MAX = 16


def _array_at(base: np.ndarray, slope: np.ndarray, shape: tuple, dtype: Any):
    """``base + slope * t`` as an array of ``shape`` and ``dtype``, as a function of t."""
    if not slope.any():
        fixed = base.astype(dtype).reshape(shape)
        return lambda t: fixed.copy()
    if np.dtype(dtype) in (np.int64, np.bool_) and 0 < base.size <= LITERAL_MAX:
        items = [f"({int(b)} + {int(s)} * t)" if s else str(int(b)) for b, s in zip(base, slope)]
        shape = tuple(shape)
        if not shape:
            text = f"array({items[0]}, dtype)"
        elif len(shape) == 1:
            text = f"array([{', '.join(items)}], dtype)"
        elif len(items) == 1:
            text = f"array({items[0]}, dtype).reshape({shape})"
        else:
            text = f"array([{', '.join(items)}], dtype).reshape({shape})"
        return eval(f"lambda t: {text}", {"array": np.array, "dtype": np.dtype(dtype)})
    return lambda t: (base + slope * t).astype(dtype).reshape(shape)


def _compile(spec: Any, base: list[int], slope: list[int]):
    """``spec``'s value at t as one generated function (shapes, argument lists, host arrays:
    evaluated on every replayed step), or None for a structure it cannot write (a key
    Python's repr does not read back)."""
    arrays: list = []
    text = _expr(spec, enumerate(zip(base, slope)), arrays)
    scope = {"A": [_array_at(*a) for a in arrays]}
    try:
        return eval(f"lambda t: {text}", scope)
    except SyntaxError:
        return None


class Form:
    """A value whose ints are ``base + slope * t`` (``const``: the value itself when nothing
    moves)."""

    __slots__ = ("spec", "base", "slope", "const", "fn")

    def __init__(self, spec: Any, base: list[int], slope: list[int], const: Any) -> None:
        self.spec, self.base, self.slope, self.const = spec, base, slope, const
        self.fn = _compile(spec, base, slope) if const is None else None

    @staticmethod
    def fit(a: Any, b: Any, ta: int, tb: int) -> Form | None:
        """The form through ``a`` at ``ta`` and ``b`` at ``tb`` (integer slopes only)."""
        fa: list[int] = []
        fb: list[int] = []
        sa, sb = _flatten(a, fa), _flatten(b, fb)
        if sa is None or sa != sb or len(fa) != len(fb):
            return None
        if fa == fb:
            return Form(sa, fa, [0] * len(fa), a)
        dt = tb - ta
        slope, base = [], []
        for x, y in zip(fa, fb):
            d = y - x
            if d % dt:
                return None
            s = d // dt
            slope.append(s)
            base.append(x - s * ta)
        return Form(sa, base, slope, None)

    @property
    def fixed(self) -> bool:
        return self.const is not None or not any(self.slope)

    def at(self, t: int) -> Any:
        if self.const is not None:
            return self.const
        if self.fn is not None:
            return self.fn(t)
        return _build(self.spec, iter([b + s * t for b, s in zip(self.base, self.slope)]))

    def agrees(self, value: Any, t: int) -> bool:
        flat: list[int] = []
        spec = _flatten(value, flat)
        if spec != self.spec:
            return False
        return flat == [b + s * t for b, s in zip(self.base, self.slope)]


class Work:
    """Work sizes of one launch at one ``t`` (what ``Launcher.launch`` reads of a Launch)."""

    __slots__ = ("gws", "lws", "cdims")

    def __init__(self, gws: tuple, lws: tuple | None) -> None:
        self.gws, self.lws, self.cdims = gws, lws, None


def fit_work(launches: list, ints_at: list, ta: int, tb: int):
    """Per global work size dim: ("c", value), ("a", base, slope), ("r", candidates, local
    size): the work-group size's multiple covering the largest ``ceil(ints[pos] / div)`` of
    the candidates (``impls.work_1d`` over an element count, or the float4 count of
    eltwise_vec4: ``impls.Cover`` sizes, whose kernels bound-check their work-items, so
    covering more is safe and covering less never happens), or ("k", value, candidates,
    local size) where a dim of another kernel did not move while moving candidates cover it
    at both samples: a fixed size a moving int's cover meets by chance (a decode attention's
    two batch rows and ``ceil(keys / 4)`` for 5 to 8 keys; covering 3 rows at 9 keys wrote
    past its output), or a count not declared a cover. It reads ``value`` while the
    candidates' cover stays ``value``: the family replays only those lengths
    (``length_guards.work_range``), and its next samples tell the two apart. None
    otherwise."""
    la, lb = launches
    ia, ib = ints_at
    if la.lws != lb.lws or len(la.gws) != len(lb.gws):
        return None
    out = []
    for d, (ga, gb) in enumerate(zip(la.gws, lb.gws)):
        local = la.lws[d] if la.lws is not None else 1
        # moving counts whose rounding gives the work size (which may not have moved yet:
        # 64 work-items cover 2 and 3 elements alike)
        cands = tuple((pos, div) for pos, (xa, xb) in enumerate(zip(ia, ib)) if xa != xb
                      for div in (1, 4)
                      if _cover(xa, div, local) == ga and _cover(xb, div, local) == gb)
        found: tuple | None = None
        if cands:
            covers = type(la.gws) is Cover  # (work_1d's: over-covering is safe)
            found = ("k", ga, cands, local) if ga == gb and not covers else ("r", cands, local)
        elif ga == gb:
            found = ("c", ga)
        if found is None:
            dg = gb - ga
            if dg % (tb - ta):
                return None
            s = dg // (tb - ta)
            found = ("a", ga - s * ta, s)
        out.append(found)
    return out


def work_holds(work: list, ints: Any) -> bool:
    """Whether the fixed dims ("k") of ``fit_work``'s result are still what their candidate
    counts cover, for the launch's integer arguments ``ints`` at some ``t``."""
    return all(w[0] != "k" or all(_cover(int(ints[pos]), div, w[3]) == w[1]
                                  for pos, div in w[2]) for w in work)


def _cover(n: int, div: int, local: int) -> int:
    items = max((n + div - 1) // div, 1)
    return (items + local - 1) // local * local


def work_at(work: list, ints: Any, t: int) -> tuple:
    """The global work sizes of ``fit_work``'s dims at ``t`` (``ints``: the launch's integer
    arguments at ``t``)."""
    out = []
    for w in work:
        tag = w[0]
        if tag in ("c", "k"):
            out.append(w[1])
        elif tag == "a":
            out.append(w[1] + w[2] * t)
        else:
            local = w[2]
            best = 0
            for pos, div in w[1]:
                items = (int(ints[pos]) + div - 1) // div
                cover = (max(items, 1) + local - 1) // local * local
                if cover > best:
                    best = cover
            out.append(best)
    return tuple(out)


def work_fn(work: list, base: list[int], slope: list[int]) -> Callable[[int], tuple]:
    """``work_at(work, ints, t)`` as one generated function of ``t`` where the launch's ints
    are ``base + slope * t`` (a moving kernel's fast step). The largest cover of the
    candidates is the cover of their largest count (covering is monotonic)."""
    dims = []
    for w in work:
        if w[0] in ("c", "k"):
            dims.append(str(w[1]))
        elif w[0] == "a":
            dims.append(f"({w[1]} + {w[2]} * t)")
        else:
            local = w[2]
            counts = ", ".join(f"({base[pos]} + {slope[pos]} * t + {div - 1}) // {div}"
                               for pos, div in w[1])
            dims.append(f"(max({counts}, 1) + {local - 1}) // {local} * {local}")
    return eval(f"lambda t: ({', '.join(dims)},)")


class GrowForm:
    """A host value whose one output grows with ``t`` along one axis (the others of length 1)
    and whose elements along it are ``a + b * t + c * i`` (``arange`` over the grown length,
    position offsets, an all-true causal row): (output shapes, arrays) at ``t``."""

    __slots__ = ("shapes", "a", "b", "c", "dtype")

    def __init__(self, shapes: Form, a: int, b: int, c: int, dtype: np.dtype) -> None:
        self.shapes, self.a, self.b, self.c, self.dtype = shapes, a, b, c, dtype

    @staticmethod
    def fit(ha: tuple, hb: tuple, ta: int, tb: int) -> GrowForm | None:
        if len(ha[1]) != 1 or len(hb[1]) != 1:
            return None
        (sa, (va,)), (sb, (vb,)) = ha, hb
        if va.dtype != vb.dtype or va.dtype.kind not in "iub":
            return None
        shapes = Form.fit(sa, sb, ta, tb)
        if shapes is None or va.ndim != vb.ndim or va.size < 2 or \
                sum(d > 1 for d in va.shape) != 1 or sum(d > 1 for d in vb.shape) != 1:
            return None
        x, y = va.reshape(-1).astype(np.int64), vb.reshape(-1).astype(np.int64)
        c = int(x[1] - x[0])
        if (y[0] - x[0]) % (tb - ta):
            return None
        b = int(y[0] - x[0]) // (tb - ta)
        form = GrowForm(shapes, int(x[0]) - b * ta, b, c, va.dtype)
        return form if form.agrees(ha, ta) and form.agrees(hb, tb) else None

    def at(self, t: int) -> tuple:
        shapes = self.shapes.at(t)
        n = 1
        for d in shapes[0]:
            n *= d
        return shapes, (self.flat(t, n).reshape(shapes[0]),)

    def flat(self, t: int, n: int) -> np.ndarray:
        """The first ``n`` elements along the axis at ``t`` (more than the value holds: a
        buffer filled ahead where ``b`` is 0, for the lengths to come)."""
        # (the values of a + b t + c * arange(n) in int64, cast: one arange, or one fill of
        # an array of the dtype where a Python int converts to it as astype does)
        start, c = self.a + self.b * t, self.c
        if c:
            values = np.arange(start, start + c * n, c, dtype=np.int64)
            if self.dtype != np.int64:
                values = values.astype(self.dtype)
        elif self.dtype == np.int64 or self.dtype == np.bool_:
            values = np.empty(n, self.dtype)
            values.fill(start)
        else:
            values = np.full(n, start, np.int64).astype(self.dtype)
        return values

    def agrees(self, value: tuple, t: int) -> bool:
        shapes, arrays = self.at(t)
        return value[0] == shapes and len(value[1]) == 1 and \
            value[1][0].dtype == arrays[0].dtype and np.array_equal(value[1][0], arrays[0])
