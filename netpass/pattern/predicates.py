"""Value predicates for patterns: ``consumers_count(2) & has_static_rank()``.

A :class:`Predicate` wraps a function of ``(output, matcher)``; ``matcher`` is the running
:class:`~netpass.pattern.matcher.Matcher` (None when a predicate is called on its own), which
predicates that bind symbols (``shape_matches``) use to stay consistent within one match.
Predicates combine with ``&``, ``|`` and ``~`` and carry a name, which the why-no-match report
shows; :meth:`Predicate.failure` says why one is false (which part of a combination, which
dimension of a shape and what its symbols were bound to), computed only when a report asks.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Output
from ..core.types import Type

PredicateFn = Callable[[Output, Any], bool]
# Why a predicate is false for a value, in words (None: its name says it all).
WhyFn = Callable[[Output, Any], "str | None"]


class Predicate:
    """A named test on a graph value; ``p(output)`` evaluates it outside a match.

    ``fn(output, matcher)`` decides; ``why(output, matcher)``, when given, says in words why the
    predicate is false for ``output`` (used by :meth:`failure`, never on the matching path).
    """

    __slots__ = ("fn", "name", "why")

    def __init__(self, fn: PredicateFn, name: str, why: WhyFn | None = None) -> None:
        self.fn = fn
        self.name = name
        self.why = why

    def __call__(self, output: Output) -> bool:
        return bool(self.fn(output, None))

    def failure(self, output: Output, matcher: Any = None) -> str:
        """``"<name> false"``, and why where the predicate can say (read before the matcher
        rolls its bindings back: ``shape_matches`` reports them)."""
        detail = self.why(output, matcher) if self.why is not None else None
        return f"{self.name} false" + (f": {detail}" if detail else "")

    def __and__(self, other: Any) -> Predicate:
        left, right = self, as_predicate(other)
        a, b = left.fn, right.fn

        def why(o: Output, m: Any) -> str:
            return (left if not a(o, m) else right).failure(o, m)
        return Predicate(lambda o, m: a(o, m) and b(o, m), f"({left.name} & {right.name})", why)

    def __rand__(self, other: Any) -> Predicate:
        return as_predicate(other) & self

    def __or__(self, other: Any) -> Predicate:
        left, right = self, as_predicate(other)
        a, b = left.fn, right.fn

        def why(o: Output, m: Any) -> str:
            return f"{left.failure(o, m)}; {right.failure(o, m)}"
        return Predicate(lambda o, m: a(o, m) or b(o, m), f"({left.name} | {right.name})", why)

    def __ror__(self, other: Any) -> Predicate:
        return as_predicate(other) | self

    def __invert__(self) -> Predicate:
        a = self.fn
        return Predicate(lambda o, m: not a(o, m), f"~{self.name}",
                         lambda o, m: f"{self.name} is true")

    def __repr__(self) -> str:
        return f"<Predicate {self.name}>"


def as_predicate(value: Any) -> Predicate:
    """A Predicate from a Predicate or a plain callable ``fn(output) -> bool`` (named after the
    callable)."""
    if isinstance(value, Predicate):
        return value
    if callable(value):
        name = getattr(value, "__name__", None) or type(value).__name__
        return Predicate(lambda o, m: value(o), name)
    raise TypeError(f"a pattern predicate must be callable, got {value!r}")


def _live_consumers(out: Output) -> int:
    # Counts without building Input views: this runs inside matching.
    n = 0
    for ref in out.node._outs[out.index].cons.values():
        if ref() is not None:
            n += 1
    return n


def _shape(o: Output) -> Any:
    return o.node._outs[o.index].ps


def consumers_count(n: int) -> Predicate:
    """The value feeds exactly ``n`` inputs (OpenVINO's ``consumers_count``): a rewrite that
    removes the matched node is safe only when nothing else reads it."""
    return Predicate(lambda o, m: _live_consumers(o) == n, f"consumers_count({n})",
                     lambda o, m: f"{_live_consumers(o)} consumers")


def consumers_more_than(n: int) -> Predicate:
    """The value feeds more than ``n`` inputs."""
    return Predicate(lambda o, m: _live_consumers(o) > n, f"consumers_more_than({n})",
                     lambda o, m: f"{_live_consumers(o)} consumers")


def has_static_shape() -> Predicate:
    """Every dimension of the value is known (rank and sizes)."""
    return Predicate(lambda o, m: o.node._outs[o.index].ps.is_static, "has_static_shape()",
                     lambda o, m: f"shape {_shape(o)}")


def has_static_rank() -> Predicate:
    """The value's rank is known (its dimensions may be dynamic)."""
    return Predicate(lambda o, m: o.node._outs[o.index].ps.rank_is_static, "has_static_rank()",
                     lambda o, m: f"shape {_shape(o)}")


def has_static_dim(index: int) -> Predicate:
    """Dimension ``index`` (negative counts from the end) is static; needs a static rank."""
    def fn(o: Output, m: Any) -> bool:
        ps = o.node._outs[o.index].ps
        if not ps.rank_is_static:
            return False
        dims = ps.dims
        if not -len(dims) <= index < len(dims):
            return False
        return dims[index].is_static
    return Predicate(fn, f"has_static_dim({index})", lambda o, m: f"shape {_shape(o)}")


def has_static_dims(indices: Iterable[int]) -> Predicate:
    """Every dimension in ``indices`` is static (see :func:`has_static_dim`)."""
    idx = list(indices)
    preds = [has_static_dim(i).fn for i in idx]
    return Predicate(lambda o, m: all(p(o, m) for p in preds), f"has_static_dims({idx})",
                     lambda o, m: f"shape {_shape(o)}")


def rank_equals(rank: int) -> Predicate:
    """The value's rank is known and equals ``rank``."""
    def fn(o: Output, m: Any) -> bool:
        ps = o.node._outs[o.index].ps
        return ps.rank_is_static and len(ps.dims) == rank
    return Predicate(fn, f"rank_equals({rank})", lambda o, m: f"shape {_shape(o)}")


def rank_more_than(rank: int) -> Predicate:
    """The value's rank is known and greater than ``rank``."""
    def fn(o: Output, m: Any) -> bool:
        ps = o.node._outs[o.index].ps
        return ps.rank_is_static and len(ps.dims) > rank
    return Predicate(fn, f"rank_more_than({rank})", lambda o, m: f"shape {_shape(o)}")


def type_matches(element_type: Any) -> Predicate:
    """The value's element type is ``element_type`` (a Type, a numpy dtype or a name such as
    ``"f32"``)."""
    t = Type.of(element_type)
    return Predicate(lambda o, m: o.node._outs[o.index].et is t, f"type_matches({t})",
                     lambda o, m: f"element type {o.node._outs[o.index].et}")


def type_matches_any(element_types: Iterable[Any]) -> Predicate:
    """The value's element type is one of ``element_types``."""
    ts = tuple(Type.of(t) for t in element_types)
    return Predicate(lambda o, m: o.node._outs[o.index].et in ts,
                     f"type_matches_any({[str(t) for t in ts]})",
                     lambda o, m: f"element type {o.node._outs[o.index].et}")


def all_of(predicates: Iterable[Any]) -> Predicate:
    """Every predicate holds (``p1 & p2 & ...``); a failure names the first that does not."""
    preds = [as_predicate(p) for p in predicates]
    fns = [p.fn for p in preds]

    def why(o: Output, m: Any) -> str | None:
        for p in preds:
            if not p.fn(o, m):
                return p.failure(o, m)
        return None
    return Predicate(lambda o, m: all(f(o, m) for f in fns),
                     "all_of(" + ", ".join(p.name for p in preds) + ")", why)


def binds(fn: Callable[[Output], Any], name: str | None = None) -> Predicate:
    """True where ``fn(output)`` is not None. Within a match the value is bound in the
    matcher's ``symbols`` under the predicate itself, for the callback to read
    (``m.symbols[pred]``) instead of computing it again. Like every binding it goes with its
    match (a failed match, the end of the callback): a cache of one's own (a closure, an
    instance attribute) outlives the match and keeps what the value references, a node the
    callback replaces, alive and among its producers' consumers."""
    def bind(o: Output, m: Any) -> bool:
        value = fn(o)
        if value is None:
            return False
        if m is not None:
            m._symbols[pred] = value
        return True
    pred = Predicate(bind, name or str(getattr(fn, "__name__", "binds")))
    return pred


def _attr_equal(actual: Any, expected: Any) -> bool:
    if isinstance(actual, (list, tuple, np.ndarray)) or isinstance(expected,
                                                                   (list, tuple, np.ndarray)):
        a, e = np.asarray(actual), np.asarray(expected)
        return a.shape == e.shape and bool(np.all(a == e))
    return bool(actual == expected)


def attrs_match(attrs: Mapping[str, Any]) -> Predicate:
    """The producing node's attributes equal the given ones (sequences compare elementwise);
    an attribute the op does not have fails."""
    items = list(attrs.items())

    def fn(o: Output, m: Any) -> bool:
        node = o.node
        for k, v in items:
            if k not in node.ATTRS or not _attr_equal(getattr(node, k), v):
                return False
        return True

    def why(o: Output, m: Any) -> str | None:
        node = o.node
        for k, v in items:
            if k not in node.ATTRS:
                return f"{node.type_name} has no attribute {k}"
            if not _attr_equal(getattr(node, k), v):
                return f"{k} is {getattr(node, k)!r}"
        return None
    return Predicate(fn, f"attrs_match({dict(items)})", why)


# -- shape_matches ---------------------------------------------------------------------------
_ANY, _ELLIPSIS = object(), object()
_SCALAR, _DYNAMIC_RANK = object(), object()  # whole-notation forms: "[]" and "?" / "..."


class _Group:
    """A named ellipsis ``Name...``: the dimensions it spans bind ``Name`` as one tuple."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def _parse_shape_pattern(text: str) -> Any:
    """OpenVINO's shape notation: the dimension items, or ``_SCALAR`` / ``_DYNAMIC_RANK``.

    Brackets ``[]`` or ``()`` are optional and spaces do not count; ``[]`` is a scalar, a bare
    ``?`` or ``...`` a dynamic rank."""
    t = "".join(text.split())
    if t in ("", "[]", "()"):
        return _SCALAR
    if t in ("?", "..."):
        return _DYNAMIC_RANK
    if t[:1] + t[-1:] in ("[]", "()"):
        t = t[1:-1]
    if any(c in t for c in "[]()"):
        raise ValueError(f"shape_matches: unbalanced brackets in {text!r}")
    items: list[Any] = []
    for tok in t.split(","):
        if tok in ("?", "-1"):
            items.append(_ANY)
        elif tok.endswith("..."):
            if any(i is _ELLIPSIS or isinstance(i, _Group) for i in items):
                raise ValueError(f"shape_matches: more than one '...' in {text!r}")
            name = tok[:-3]
            if name and not name.isidentifier():
                raise ValueError(f"shape_matches: bad group name {name!r} in {text!r}")
            items.append(_Group(name) if name else _ELLIPSIS)
        elif tok.lstrip("-").isdigit():
            items.append(int(tok))
        elif tok.isidentifier():
            items.append(tok)
        else:
            raise ValueError(f"shape_matches: bad dimension {tok!r} in {text!r}")
    return items


def _dim_key(d: Dimension) -> Any:
    """What a name binds a dimension to: its length when static, else its Symbol; None for
    an unknown dimension without a symbol, which no name can bind (as in OpenVINO: nothing
    proves it equal to anything)."""
    if d.min == d.max:
        return d.min
    return d.symbol


def _binding_text(key: Any) -> str:
    if isinstance(key, tuple):
        return "(" + ", ".join(map(str, key)) + ")"
    return str(key)


def _same(bound: Any, key: Any) -> bool:
    if type(bound) is tuple or type(key) is tuple:
        return type(bound) is type(key) and len(bound) == len(key) and \
            all(_same(b, k) for b, k in zip(bound, key))
    return bound is key or (type(bound) is int and bound == key)


def shape_matches(text: str) -> Predicate:
    """OpenVINO's ``shape_matches("[N,?,C]")``: ints must equal, ``?`` is any dim, ``...`` any
    number of dims (once; ``Name...`` also binds them as a group), a name binds the dim and
    must bind the same dim everywhere in one match (across all predicates of the pattern; a
    static length binds its value, a dynamic dim its Symbol; an unknown dim without a Symbol
    matches no name). ``[]`` is a scalar, a bare ``?`` or ``...`` a dynamic rank. A failure
    says which dimension did not fit and what the names were bound to."""
    parsed = _parse_shape_pattern(text)
    items: list[Any] = parsed if isinstance(parsed, list) else []
    spread = [i for i, w in enumerate(items) if w is _ELLIPSIS or isinstance(w, _Group)]
    head = items[:spread[0]] if spread else items
    tail = items[spread[0] + 1:] if spread else []
    group = items[spread[0]] if spread and isinstance(items[spread[0]], _Group) else None

    def pairs_of(ps: Any) -> list[Any] | None:
        """(wanted, dim index, key) for the dims the pattern constrains (the group: its
        name, the index of its first dim, the tuple of keys); None when the rank does not
        fit."""
        if parsed is _DYNAMIC_RANK or not ps.rank_is_static:
            return None
        dims = ps.dims
        if parsed is _SCALAR:
            return [] if not dims else None
        if not spread:
            return None if len(dims) != len(items) else \
                [(w, i, _dim_key(d)) for i, (w, d) in enumerate(zip(items, dims))]
        if len(dims) < len(head) + len(tail):
            return None
        start = len(dims) - len(tail)
        pairs = [(w, i, _dim_key(dims[i])) for i, w in enumerate(head)]
        if group is not None:
            pairs.append((group, len(head), tuple(_dim_key(d) for d in dims[len(head):start])))
        return pairs + [(w, start + j, _dim_key(dims[start + j])) for j, w in enumerate(tail)]

    def misfit(want: Any, key: Any, symbols: dict[str, Any], new: list[str]) -> str | None:
        """Why the dim (or group) with ``key`` does not fit ``want``; None when it does (a
        name met first is bound in ``symbols`` and listed in ``new``)."""
        if want is _ANY:
            return None
        if isinstance(want, int):
            return None if key == want and type(key) is int else f"expected {want}"
        name = want.name if isinstance(want, _Group) else want
        if key is None or (type(key) is tuple and None in key):
            return f"an unknown dimension without a symbol cannot bind {name}"
        bound = symbols.get(name, _ANY)
        if bound is _ANY:
            symbols[name] = key
            new.append(name)
            return None
        if _same(bound, key):
            return None
        return f"but {name} is bound to {_binding_text(bound)}"

    def fn(o: Output, m: Any) -> bool:
        ps = o.node._outs[o.index].ps
        if parsed is _DYNAMIC_RANK:
            return not ps.rank_is_static
        pairs = pairs_of(ps)
        if pairs is None:
            return False
        symbols = m._symbols if m is not None else {}
        new: list[str] = []  # bound by this call; dropped again if the shape does not match
        for want, _, key in pairs:
            if misfit(want, key, symbols, new) is not None:
                for name in new:
                    del symbols[name]
                return False
        return True

    def why(o: Output, m: Any) -> str:
        ps = o.node._outs[o.index].ps
        symbols = dict(m._symbols) if m is not None else {}
        bound = (" (bound: " + ", ".join(f"{k}={_binding_text(v)}" for k, v in symbols.items())
                 + ")") if symbols else ""
        if parsed is _DYNAMIC_RANK:
            return f"shape {ps} has a static rank, expected a dynamic one"
        pairs = pairs_of(ps)
        if pairs is None:
            if not ps.rank_is_static:
                return f"shape {ps} has a dynamic rank"
            want = f"at least {len(head) + len(tail)}" if spread else str(len(items))
            return f"shape {ps} has rank {len(ps.dims)}, expected {want}"
        for want, i, key in pairs:
            reason = misfit(want, key, symbols, [])
            if reason is not None:
                what = "dimensions" if isinstance(want, _Group) else "dimension"
                shown = ps.dims[i] if key is None else _binding_text(key)
                return f"shape {ps}: {what} {i} is {shown}, {reason}{bound}"
        return f"shape {ps}"
    return Predicate(fn, f"shape_matches({text!r})", why)
