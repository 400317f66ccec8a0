"""Dimensions of partial shapes: static, dynamic, or an interval, with an optional symbol.

A symbol marks unknown dimensions proven equal (two inputs both ``batch``); it survives
merging and value propagation so that ``Reshape(x, ShapeOf(x))`` keeps ``batch``.
"""
from __future__ import annotations

import itertools
from typing import Any

INF = (1 << 63) - 1

_symbol_ids = itertools.count()


class Symbol:
    """Identity of an unknown dimension; two dims with the same Symbol are equal at run time."""

    __slots__ = ("name", "_id")

    def __init__(self, name: str | None = None) -> None:
        self._id = next(_symbol_ids)
        self.name = name or f"s{self._id}"

    def __repr__(self) -> str:
        return self.name


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
            return self.merge(o)
        # Either side may be 1 at run time: the result covers both.
        lo = max(self.min, o.min)
        return Dimension(lo, max(self.max, o.max))

    # -- arithmetic (interval) ----------------------------------------------------------
    def __add__(self, other: DimLike) -> Dimension:
        o = Dimension.of(other)
        return Dimension(self.min + o.min,
                         _sat(self.max + o.max) if INF not in (self.max, o.max) else -1)

    __radd__ = __add__

    def __sub__(self, other: DimLike) -> Dimension:
        o = Dimension.of(other)
        hi = -1 if self.max == INF else max(self.max - o.min, 0)
        lo = max(self.min - (o.max if o.max != INF else self.min), 0)
        return Dimension(min(lo, hi) if hi != -1 else lo, hi)

    def __mul__(self, other: DimLike) -> Dimension:
        o = Dimension.of(other)
        if INF in (self.max, o.max):
            return Dimension(self.min * o.min, -1)
        return Dimension(self.min * o.min, _sat(self.max * o.max))

    __rmul__ = __mul__

    def __floordiv__(self, other: int) -> Dimension:
        if self.is_static:
            return Dimension(self.min // other)
        return Dimension(self.min // other, -1 if self.max == INF else self.max // other)

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
