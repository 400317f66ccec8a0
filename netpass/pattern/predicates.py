"""Value predicates for patterns: ``consumers_count(2) & has_static_rank()``.

A :class:`Predicate` wraps a function of ``(output, matcher)``; ``matcher`` is the running
:class:`~netpass.pattern.matcher.Matcher` (None when a predicate is called on its own), which
predicates that bind symbols (``shape_matches``) use to stay consistent within one match.
Predicates combine with ``&`` and ``|`` and carry a name, which the why-no-match report shows.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Output
from ..core.types import Type

PredicateFn = Callable[[Output, Any], bool]


class Predicate:
    """A named test on a graph value; ``p(output)`` evaluates it outside a match."""

    __slots__ = ("fn", "name")

    def __init__(self, fn: PredicateFn, name: str) -> None:
        self.fn = fn
        self.name = name

    def __call__(self, output: Output) -> bool:
        return bool(self.fn(output, None))

    def __and__(self, other: Any) -> "Predicate":
        a, b = self.fn, as_predicate(other).fn
        return Predicate(lambda o, m: a(o, m) and b(o, m), f"({self.name} & {as_predicate(other).name})")

    def __rand__(self, other: Any) -> "Predicate":
        return as_predicate(other) & self

    def __or__(self, other: Any) -> "Predicate":
        a, b = self.fn, as_predicate(other).fn
        return Predicate(lambda o, m: a(o, m) or b(o, m), f"({self.name} | {as_predicate(other).name})")

    def __ror__(self, other: Any) -> "Predicate":
        return as_predicate(other) | self

    def __invert__(self) -> "Predicate":
        a = self.fn
        return Predicate(lambda o, m: not a(o, m), f"~{self.name}")

    def __repr__(self) -> str:
        return f"<Predicate {self.name}>"


def as_predicate(value: Any) -> Predicate:
    """A Predicate from a Predicate or a plain callable ``fn(output) -> bool``."""
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


def consumers_count(n: int) -> Predicate:
    """Exactly ``n`` consuming inputs."""
    return Predicate(lambda o, m: _live_consumers(o) == n, f"consumers_count({n})")


def consumers_more_than(n: int) -> Predicate:
    """More than ``n`` consuming inputs."""
    return Predicate(lambda o, m: _live_consumers(o) > n, f"consumers_more_than({n})")


def has_static_shape() -> Predicate:
    return Predicate(lambda o, m: o.node._outs[o.index].ps.is_static, "has_static_shape()")


def has_static_rank() -> Predicate:
    return Predicate(lambda o, m: o.node._outs[o.index].ps.rank_is_static, "has_static_rank()")


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
    return Predicate(fn, f"has_static_dim({index})")


def has_static_dims(indices: Iterable[int]) -> Predicate:
    idx = list(indices)
    preds = [has_static_dim(i).fn for i in idx]
    return Predicate(lambda o, m: all(p(o, m) for p in preds), f"has_static_dims({idx})")


def rank_equals(rank: int) -> Predicate:
    def fn(o: Output, m: Any) -> bool:
        ps = o.node._outs[o.index].ps
        return ps.rank_is_static and len(ps.dims) == rank
    return Predicate(fn, f"rank_equals({rank})")


def rank_more_than(rank: int) -> Predicate:
    def fn(o: Output, m: Any) -> bool:
        ps = o.node._outs[o.index].ps
        return ps.rank_is_static and len(ps.dims) > rank
    return Predicate(fn, f"rank_more_than({rank})")


def type_matches(element_type: Any) -> Predicate:
    t = Type.of(element_type)
    return Predicate(lambda o, m: o.node._outs[o.index].et is t, f"type_matches({t})")


def type_matches_any(element_types: Iterable[Any]) -> Predicate:
    ts = tuple(Type.of(t) for t in element_types)
    return Predicate(lambda o, m: o.node._outs[o.index].et in ts,
                     f"type_matches_any({[str(t) for t in ts]})")


def all_of(predicates: Iterable[Any]) -> Predicate:
    preds = [as_predicate(p) for p in predicates]
    fns = [p.fn for p in preds]
    return Predicate(lambda o, m: all(f(o, m) for f in fns),
                     "all_of(" + ", ".join(p.name for p in preds) + ")")


def _attr_equal(actual: Any, expected: Any) -> bool:
    if isinstance(actual, (list, tuple, np.ndarray)) or isinstance(expected, (list, tuple, np.ndarray)):
        a, e = np.asarray(actual), np.asarray(expected)
        return a.shape == e.shape and bool(np.all(a == e))
    return actual == expected


def attrs_match(attrs: Mapping[str, Any]) -> Predicate:
    """The producing node's attributes equal the given ones (sequences compare elementwise)."""
    items = list(attrs.items())

    def fn(o: Output, m: Any) -> bool:
        node = o.node
        for k, v in items:
            if k not in node.ATTRS or not _attr_equal(getattr(node, k), v):
                return False
        return True
    return Predicate(fn, f"attrs_match({dict(items)})")


# -- shape_matches ---------------------------------------------------------------------------
_ANY, _ELLIPSIS = object(), object()


def _parse_shape_pattern(text: str) -> list:
    t = text.strip()
    if not (t.startswith("[") and t.endswith("]")):
        raise ValueError(f"shape_matches: expected '[d0,d1,...]', got {text!r}")
    t = t[1:-1].strip()
    if not t:
        return []
    items: list = []
    for tok in (p.strip() for p in t.split(",")):
        if tok in ("?", "-1"):
            items.append(_ANY)
        elif tok == "...":
            if _ELLIPSIS in items:
                raise ValueError(f"shape_matches: more than one '...' in {text!r}")
            items.append(_ELLIPSIS)
        elif tok.lstrip("-").isdigit():
            items.append(int(tok))
        elif tok.isidentifier():
            items.append(tok)
        else:
            raise ValueError(f"shape_matches: bad dimension {tok!r} in {text!r}")
    return items


def _dim_key(d: Dimension) -> Any:
    # What a named symbol binds to: the length when static, else the dimension's Symbol,
    # else the Dimension object itself (two unknown dims are equal only when proven so).
    if d.min == d.max:
        return d.min
    return d.symbol if d.symbol is not None else d


def shape_matches(text: str) -> Predicate:
    """Shape pattern ``"[N,?,C]"``: ints must equal, ``?`` is any dim, ``...`` any number of
    dims, a name binds the dim and must bind the same dim everywhere in one match (across all
    predicates of the pattern)."""
    items = _parse_shape_pattern(text)
    has_ellipsis = _ELLIPSIS in items
    head = items[:items.index(_ELLIPSIS)] if has_ellipsis else items
    tail = items[items.index(_ELLIPSIS) + 1:] if has_ellipsis else []

    def fn(o: Output, m: Any) -> bool:
        ps = o.node._outs[o.index].ps
        if not ps.rank_is_static:
            return False
        dims = ps.dims
        if has_ellipsis:
            if len(dims) < len(head) + len(tail):
                return False
            pairs = list(zip(head, dims)) + list(zip(tail, dims[len(dims) - len(tail):]))
        else:
            if len(dims) != len(items):
                return False
            pairs = list(zip(items, dims))
        symbols = m._symbols if m is not None else {}
        new: list[str] = []  # bound by this call; dropped again if the shape does not match
        for want, d in pairs:
            if want is _ANY:
                continue
            if isinstance(want, int):
                if not (d.min == d.max == want):
                    break
                continue
            key = _dim_key(d)
            bound = symbols.get(want, _ANY)
            if bound is _ANY:
                symbols[want] = key
                new.append(want)
            elif bound is not key and not (type(bound) is int and bound == key):
                break
        else:
            return True
        for name in new:
            del symbols[name]
        return False
    return Predicate(fn, f"shape_matches({text!r})")
