"""PartialShape: a tensor shape whose rank and dimensions may be unknown."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from .dimension import Dimension, DimLike


class PartialShape:
    """Either a dynamic rank (``PartialShape.dynamic()``) or a tuple of :class:`Dimension`.

    Immutable; operations return new shapes. ``merge`` / ``broadcast_merge`` return None
    when the shapes cannot describe the same tensor.
    """

    # ``_static``: the int tuple when every dim is static, False when not, None until first
    # asked (shape checks run many times per node in the passes; the shape never changes).
    __slots__ = ("_dims", "_static")
    _dims: tuple[Dimension, ...] | None
    _static: tuple[int, ...] | bool | None

    def __init__(self, dims: ShapeLike = None) -> None:
        self._static = None
        if isinstance(dims, PartialShape):
            self._dims = dims._dims
        elif dims is None:
            self._dims = None
        elif isinstance(dims, str):
            self._dims = PartialShape.parse(dims)._dims
        else:
            of = Dimension.of
            self._dims = tuple([d if type(d) is Dimension else of(d) for d in dims])

    @staticmethod
    def of_dims(dims: tuple[Any, ...]) -> PartialShape:
        """A shape from a tuple of Dimension objects (no coercion: shape inference fast path)."""
        ps = PartialShape.__new__(PartialShape)
        ps._dims = dims
        ps._static = None
        return ps

    @staticmethod
    def static(shape: tuple[int, ...]) -> PartialShape:
        """The shape of a tensor of numpy ``shape`` (a tuple of ints), shared among equal
        shapes: Constants (made by the thousand in rewrites) then cost no shape objects of their
        own, to build or to free. Shapes are immutable, so sharing is safe."""
        ps = _STATIC_SHAPES.get(shape)
        if ps is None:
            if len(_STATIC_SHAPES) >= _STATIC_SHAPES_MAX:
                _STATIC_SHAPES.clear()
            of = Dimension.of
            ints = tuple([int(d) for d in shape])
            ps = PartialShape.__new__(PartialShape)
            ps._dims = tuple([of(d) for d in ints])
            ps._static = ints
            _STATIC_SHAPES[ints] = ps
        return ps

    def _static_dims(self) -> tuple[int, ...] | bool:
        dims = self._dims
        if dims is None:
            static: tuple[Any, ...] | bool = False
        else:
            out = []
            for d in dims:
                if d.min != d.max:
                    static = False
                    break
                out.append(d.min)
            else:
                static = tuple(out)
        self._static = static
        return static

    @staticmethod
    def dynamic(rank: int | None = None) -> PartialShape:
        if rank is None:
            return PartialShape(None)
        return PartialShape([Dimension() for _ in range(rank)])

    @staticmethod
    def parse(text: str) -> PartialShape:
        """Parse ``[1,?,3..5,N]`` or ``[...]`` (dynamic rank)."""
        t = text.strip()
        if t.startswith("[") and t.endswith("]"):
            t = t[1:-1]
        t = t.strip()
        if t == "...":
            return PartialShape(None)
        if not t:
            return PartialShape(())
        return PartialShape([Dimension.parse(p) for p in t.split(",")])

    # -- queries ------------------------------------------------------------------------
    @property
    def rank(self) -> Dimension:
        return Dimension() if self._dims is None else Dimension(len(self._dims))

    @property
    def rank_is_static(self) -> bool:
        return self._dims is not None

    @property
    def is_static(self) -> bool:
        static = self._static
        if static is None:
            static = self._static_dims()
        return static is not False

    @property
    def is_dynamic(self) -> bool:
        return not self.is_static

    @property
    def dims(self) -> tuple[Dimension, ...]:
        if self._dims is None:
            raise ValueError("shape has dynamic rank")
        return self._dims

    def to_shape(self) -> tuple[int, ...]:
        static = self._static
        if static is None:
            static = self._static_dims()
        if static is False:
            raise ValueError(f"shape {self} is not static")
        return static  # type: ignore[return-value]

    get_shape = to_shape

    def get_max_shape(self) -> tuple[int, ...]:
        return tuple(d.get_max_length() for d in self.dims)

    def get_min_shape(self) -> tuple[int, ...]:
        return tuple(d.min for d in self.dims)

    def compatible(self, other: ShapeLike) -> bool:
        return self.merge(other) is not None

    def same_scheme(self, other: ShapeLike) -> bool:
        o = PartialShape(other)
        if self._dims is None or o._dims is None:
            return self._dims is None and o._dims is None
        return len(self._dims) == len(o._dims) and all(
            a.same_scheme(b) for a, b in zip(self._dims, o._dims))

    def refines(self, other: ShapeLike) -> bool:
        """True when every tensor of this shape also fits ``other``."""
        o = PartialShape(other)
        if o._dims is None:
            return True
        if self._dims is None or len(self._dims) != len(o._dims):
            return False
        return all(o_d.min <= d.min and d.max <= o_d.max for d, o_d in zip(self._dims, o._dims))

    def merge(self, other: ShapeLike) -> PartialShape | None:
        o = PartialShape(other)
        if self._dims is None:
            return o
        if o._dims is None:
            return self
        if len(self._dims) != len(o._dims):
            return None
        out = []
        for a, b in zip(self._dims, o._dims):
            m = a.merge(b)
            if m is None:
                return None
            out.append(m)
        return PartialShape(out)

    def broadcast_merge(self, other: ShapeLike) -> PartialShape | None:
        """Numpy broadcasting (right-aligned), or None when the shapes cannot broadcast."""
        o = other if type(other) is PartialShape else PartialShape(other)
        a, b = self._dims, o._dims
        if a is None or b is None:
            return PartialShape(None)
        # (every binary op's inference: the shorter side padded only when it is shorter, a
        # dim met on both sides taken as it is, which is what broadcasting it with itself
        # gives, and the result built from its dims without coercing them again)
        if len(a) != len(b):
            n = max(len(a), len(b))
            a = (Dimension(1),) * (n - len(a)) + a
            b = (Dimension(1),) * (n - len(b)) + b
        out = []
        for x, y in zip(a, b):
            if x is y:
                out.append(x)
                continue
            m = x.broadcast_merge(y)
            if m is None:
                return None
            out.append(m)
        return PartialShape.of_dims(tuple(out))

    # -- sequence protocol --------------------------------------------------------------
    def __len__(self) -> int:
        dims = self._dims
        if dims is None:
            raise ValueError("shape has dynamic rank")
        return len(dims)

    def __iter__(self) -> Iterator[Dimension]:
        return iter(self.dims)

    @overload
    def __getitem__(self, i: int) -> Dimension: ...
    @overload
    def __getitem__(self, i: slice) -> PartialShape: ...

    def __getitem__(self, i: int | slice) -> Dimension | PartialShape:
        dims = self._dims
        if dims is None:
            raise ValueError("shape has dynamic rank")
        if isinstance(i, slice):
            return PartialShape.of_dims(dims[i])
        return dims[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartialShape):
            return self._dims == other._dims
        if isinstance(other, (list, tuple)):
            return bool(self._dims is not None and self._dims == PartialShape(other)._dims)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._dims)

    def __str__(self) -> str:
        if self._dims is None:
            return "[...]"
        return "[" + ",".join(str(d) for d in self._dims) + "]"

    def __repr__(self) -> str:
        return f"PartialShape({self})"


ShapeLike = PartialShape | Sequence[DimLike] | Iterable[DimLike] | str | None


# PartialShape.static's shared shapes, by int tuple (emptied when full: a bound, not an LRU).
_STATIC_SHAPES: dict[tuple[int, ...], PartialShape] = {}
_STATIC_SHAPES_MAX = 4096


def as_partial_shape(value: ShapeLike) -> PartialShape:
    return value if isinstance(value, PartialShape) else PartialShape(value)
