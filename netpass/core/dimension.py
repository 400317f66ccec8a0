"""Dimensions of partial shapes: static, dynamic, or an interval, with an optional symbol.

A symbol marks unknown dimensions proven equal (two inputs both ``batch``); it survives
merging and value propagation so that ``Reshape(x, ShapeOf(x))`` keeps ``batch``.

Sums, differences and products of symbolic dims carry a *derived* symbol, an integer
polynomial over the named ones (``past + seq``, ``total - 1``, ``batch * seq``, ``12 * batch``).
Derived symbols are interned: two dims computed the same way from the same symbols (a
decoder's cache concatenated with the new keys in every layer, and ``ShapeOf`` of it) share
one, so that they are proven equal, and an expression that simplifies back to a named symbol
(``past + seq - seq``) is that symbol.
"""
from __future__ import annotations

import itertools
import weakref
from collections.abc import Mapping
from typing import Any

INF = (1 << 63) - 1

_symbol_ids = itertools.count()


# a product of named symbols (in creation order, repeated for powers)
Monomial = tuple["Symbol", ...]


class Symbol:
    """Identity of an unknown dimension; two dims with the same Symbol are equal at run time.

    A named symbol stands for itself; a derived one (:meth:`polynomial`) for ``const +
    sum(coeff * product of named symbols)``, its ``terms`` (monomial, coefficient) pairs."""

    __slots__ = ("name", "_id", "terms", "const", "__weakref__")

    def __init__(self, name: str | None = None) -> None:
        self._id = next(_symbol_ids)
        self.name = name or f"s{self._id}"
        self.terms: tuple[tuple[Monomial, int], ...] | None = None  # None: a named symbol
        self.const = 0

    def __repr__(self) -> str:
        return self.name

    @property
    def is_derived(self) -> bool:
        return self.terms is not None

    def form(self) -> tuple[dict[Monomial, int], int]:
        """The polynomial: ({monomial: coefficient}, constant)."""
        if self.terms is None:
            return {(self,): 1}, 0
        return dict(self.terms), self.const

    def named(self) -> list[Symbol]:
        """The named symbols this one is made of (itself when named)."""
        if self.terms is None:
            return [self]
        return list(dict.fromkeys(s for mono, _ in self.terms for s in mono))

    def evaluate(self, values: Mapping[Symbol, int]) -> int:
        """The value under ``values`` (named symbol -> int)."""
        if self.terms is None:
            return values[self]
        total = self.const
        for mono, c in self.terms:
            v = c
            for s in mono:
                v *= values[s]
            total += v
        return total

    @staticmethod
    def polynomial(terms: Mapping[Monomial, int], const: int = 0) -> Symbol | None:
        """The interned symbol of ``const + sum(coeff * monomial)``; a named symbol itself
        for ``1 * s + 0``; None when no coefficient is left (a constant)."""
        merged: dict[Monomial, int] = {}
        for m, c in terms.items():
            mono = tuple(sorted(m, key=_sid))
            merged[mono] = merged.get(mono, 0) + c
        items = sorted(((m, c) for m, c in merged.items() if c),
                       key=lambda t: (len(t[0]), [_sid(x) for x in t[0]]))
        if not items:
            return None
        if len(items) == 1 and items[0][1] == 1 and const == 0 and len(items[0][0]) == 1:
            named: Symbol = items[0][0][0]
            return named
        key = (tuple((tuple(_sid(x) for x in m), c) for m, c in items), const)
        sym = _derived.get(key)
        if sym is None:
            sym = Symbol(_polynomial_name(items, const))
            sym.terms, sym.const = tuple(items), const
            _derived[key] = sym
        return sym


def _sid(s: Symbol) -> int:
    return s._id


# derived symbols by their terms' ids and constant; a symbol lives while a dim holds it
_derived: weakref.WeakValueDictionary[tuple[Any, ...], Symbol] = weakref.WeakValueDictionary()


def _polynomial_name(items: list[tuple[Monomial, int]], const: int) -> str:
    parts = []
    for mono, c in items:
        mag = f"{abs(c)}*" if abs(c) != 1 else ""
        parts.append(f"{'-' if c < 0 else '+'}{mag}{'*'.join(s.name for s in mono)}")
    if const:
        parts.append(f"{'-' if const < 0 else '+'}{abs(const)}")
    text = "".join(parts)
    return text[1:] if text.startswith("+") else text


def _form(d: Dimension) -> tuple[dict[Monomial, int], int] | None:
    """``d`` as a polynomial: its symbol's, a static length's, or None (unknown)."""
    if d.symbol is not None:
        return d.symbol.form()
    return ({}, d.min) if d.is_static else None


def _combine(a: Dimension, b: Dimension, sign: int) -> Symbol | None:
    """The symbol of ``a + sign * b`` (None unless both are symbolic or static)."""
    fa, fb = _form(a), _form(b)
    if fa is None or fb is None:
        return None
    terms = dict(fa[0])
    for mono, c in fb[0].items():
        terms[mono] = terms.get(mono, 0) + sign * c
    return Symbol.polynomial(terms, fa[1] + sign * fb[1])


def _product(a: Dimension, b: Dimension) -> Symbol | None:
    """The symbol of ``a * b`` (None unless both are symbolic or static)."""
    fa, fb = _form(a), _form(b)
    if fa is None or fb is None:
        return None
    terms: dict[Monomial, int] = {}
    ta = [*fa[0].items(), ((), fa[1])]
    tb = [*fb[0].items(), ((), fb[1])]
    const = 0
    for ma, ca in ta:
        for mb, cb in tb:
            if not ma and not mb:
                const += ca * cb
            else:
                mono = ma + mb
                terms[mono] = terms.get(mono, 0) + ca * cb
    return Symbol.polynomial(terms, const)


def symbolic_quotient(a: Dimension, b: Dimension) -> Symbol | None:
    """The symbol of ``a / b`` where ``b`` is one monomial (or a static length) that divides
    every term of ``a`` exactly (``batch * seq * 64 / 64``, ``12 * batch * seq / batch``);
    None otherwise."""
    fa, fb = _form(a), _form(b)
    if fa is None or fb is None or fa[1] != 0 and fb[0]:
        return None
    if fb[0]:
        if len(fb[0]) != 1 or fb[1] != 0:
            return None
        ((div_mono, div_c),) = fb[0].items()
    else:
        div_mono, div_c = (), fb[1]
    if div_c == 0:
        return None
    terms: dict[Monomial, int] = {}
    for mono, c in fa[0].items():
        rest = list(mono)
        for s in div_mono:
            if s not in rest:
                return None
            rest.remove(s)
        if c % div_c:
            return None
        terms[tuple(rest)] = c // div_c
    if fa[1] % div_c:
        return None
    const = fa[1] // div_c + terms.pop((), 0)
    return Symbol.polynomial(terms, const)


class Dimension:
    """One dimension: ``Dimension(5)``, ``Dimension()`` / ``Dimension(-1)`` (dynamic),
    ``Dimension(1, 10)`` (interval; ``hi=-1`` means unbounded)."""

    __slots__ = ("min", "max", "symbol")

    def __init__(self, lo: int | None = None, hi: int | None = None,
                 symbol: Symbol | None = None) -> None:
        if lo is None or (hi is None and lo == -1):
            lo, hi = 0, INF
        elif hi is None:
            if lo < 0:
                raise ValueError(f"negative dimension {lo}")
            hi = lo
        elif hi == -1:
            hi = INF
        if lo < 0 or hi < lo:
            raise ValueError(f"invalid dimension interval [{lo}, {hi}]")
        self.min = lo
        self.max = hi
        self.symbol = symbol

    # -- construction -------------------------------------------------------------------
    @staticmethod
    def dynamic(symbol: Symbol | None = None) -> Dimension:
        return Dimension(0, INF, symbol)

    @staticmethod
    def of(value: DimLike) -> Dimension:
        """Coerce an int (``-1`` = dynamic), a ``(lo, hi)`` pair, a string or a Dimension.
        Small static ints give a shared instance (dimensions are never changed in place)."""
        if type(value) is int and 0 <= value < _SMALL:
            return _STATIC[value]
        if isinstance(value, Dimension):
            return value
        if isinstance(value, str):
            return Dimension.parse(value)
        if isinstance(value, tuple):
            return Dimension(value[0], value[1])
        if value is None:
            return Dimension()
        return Dimension(int(value))

    @staticmethod
    def parse(text: str) -> Dimension:
        """Parse ``5``, ``?``, ``-1``, ``1..10``, ``1..`` or a symbol name (dynamic with symbol)."""
        t = text.strip()
        if t in ("?", "-1", ""):
            return Dimension()
        if ".." in t:
            lo, hi = t.split("..", 1)
            return Dimension(int(lo) if lo else 0, int(hi) if hi else -1)
        try:
            return Dimension(int(t))
        except ValueError:
            return Dimension(symbol=Symbol(t))

    # -- queries ------------------------------------------------------------------------
    @property
    def is_static(self) -> bool:
        return self.min == self.max

    @property
    def is_dynamic(self) -> bool:
        return self.min != self.max

    def get_length(self) -> int:
        if self.min != self.max:
            raise ValueError(f"dimension {self} is not static")
        return self.min

    @property
    def length(self) -> int:
        return self.get_length()

    def get_min_length(self) -> int:
        return self.min

    def get_max_length(self) -> int:
        """Upper bound, or -1 when unbounded."""
        return -1 if self.max == INF else self.max

    def compatible(self, other: DimLike) -> bool:
        o = Dimension.of(other)
        return max(self.min, o.min) <= min(self.max, o.max)

    def same_scheme(self, other: DimLike) -> bool:
        o = Dimension.of(other)
        if self.is_static and o.is_static:
            return self.min == o.min
        return self.is_dynamic and o.is_dynamic

    def merge(self, other: DimLike) -> Dimension | None:
        """Intersection of two dims, or None if they cannot be equal."""
        o = other if type(other) is Dimension else Dimension.of(other)
        lo, hi = max(self.min, o.min), min(self.max, o.max)
        if lo > hi:
            return None
        symbol = self.symbol or o.symbol
        if lo == self.min and hi == self.max and symbol is self.symbol:
            return self  # (dimensions are never changed in place: this one is the result)
        return Dimension(lo, hi, symbol)

    def broadcast_merge(self, other: DimLike) -> Dimension | None:
        """Numpy broadcasting of two dims, or None when they cannot broadcast."""
        o = Dimension.of(other)
        if self.is_static and self.min == 1:
            return o
        if o.is_static and o.min == 1:
            return self
        if self.symbol is not None and self.symbol is o.symbol:
            return self
        if self.min > 1 or o.min > 1:
            merged = self.merge(o)
            if merged is None:
                # (no common value: the side that may be 1 is 1, e.g. a 0..1 length of a
                # slice of one row broadcast against 6 rows)
                big, small = (self, o) if self.min > 1 else (o, self)
                if small.min <= 1 <= small.max:
                    return big
            return merged
        # Either side may be 1 at run time: the result covers both.
        lo = max(self.min, o.min)
        return Dimension(lo, max(self.max, o.max))

    # -- arithmetic (interval) ----------------------------------------------------------
    # A result that is not static takes the derived symbol of the operands' symbols (module
    # docstring): the interval says what is possible, the symbol what it equals at run time.
    def __add__(self, other: DimLike) -> Dimension:
        o = Dimension.of(other)
        out = Dimension(self.min + o.min,
                        _sat(self.max + o.max) if INF not in (self.max, o.max) else -1)
        if not out.is_static:
            out.symbol = _combine(self, o, 1)
        return out

    __radd__ = __add__

    def __sub__(self, other: DimLike) -> Dimension:
        o = Dimension.of(other)
        hi = -1 if self.max == INF else max(self.max - o.min, 0)
        lo = max(self.min - (o.max if o.max != INF else self.min), 0)
        out = Dimension(min(lo, hi) if hi != -1 else lo, hi)
        if not out.is_static:
            out.symbol = _combine(self, o, -1)
        return out

    def __mul__(self, other: DimLike) -> Dimension:
        o = Dimension.of(other)
        if INF in (self.max, o.max):
            out = Dimension(self.min * o.min, -1)
        else:
            out = Dimension(self.min * o.min, _sat(self.max * o.max))
        if not out.is_static:
            out.symbol = _product(self, o)
        return out

    __rmul__ = __mul__

    def __floordiv__(self, other: int) -> Dimension:
        if self.is_static:
            return Dimension(self.min // other)
        out = Dimension(self.min // other, -1 if self.max == INF else self.max // other)
        # (a symbol every term of which ``other`` divides is divided exactly: the heads
        # split back out of ``4 * batch`` by a bmm export's ``size(0) // 4`` keep ``batch``)
        if self.symbol is not None and other > 0:
            out.symbol = symbolic_quotient(self, Dimension(other))
        return out

    # -- comparison and printing --------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if isinstance(other, Dimension):
            return self.min == other.min and self.max == other.max
        if isinstance(other, int):
            return self.min == self.max == other or (other == -1 and self.min == 0
                                                     and self.max == INF)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.min, self.max))

    def __int__(self) -> int:
        return self.get_length()

    def __index__(self) -> int:
        return self.get_length()

    def __str__(self) -> str:
        if self.is_static:
            return str(self.min)
        if self.min == 0 and self.max == INF:
            return "?"
        return f"{self.min}..{'' if self.max == INF else self.max}"

    def __repr__(self) -> str:
        sym = f"<{self.symbol}>" if self.symbol is not None else ""
        return f"Dimension({self}){sym}"


# Shared static dimensions without a symbol, for the sizes shapes are mostly made of: every
# Constant and most shape inference build shapes from ints, and an instance per dim made
# building, comparing and freeing nodes cost one object more per axis.
_SMALL = 1 << 12
_STATIC = [Dimension(i) for i in range(_SMALL)]


def _sat(v: int) -> int:
    return min(v, INF)


DimLike = Dimension | int | tuple[Any, ...] | str | None
