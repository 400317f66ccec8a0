"""Runtime attributes kept in ``node.rt_info`` and how they travel between nodes.

A plain value in rt_info is copied by :func:`copy_runtime_info` when sources agree on it.
A :class:`RuntimeAttribute` decides for itself: it may refuse to be copied
(``is_copyable() -> False``, e.g. marks that belong to one node only) and knows how several
sources merge (``FusedNames`` takes the union).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .node import Node


class RuntimeAttribute:
    """Base of structured rt_info values. Subclasses set ``key`` (``<type>_<version>``)."""

    key = "runtime_attribute"
    # (no instance dict for the attributes netpass makes: a FusedNames per node; a subclass
    # that declares no __slots__ of its own has one as usual)
    __slots__ = ()

    def is_copyable(self) -> bool:
        return True

    def merge(self, others: list[RuntimeAttribute]) -> RuntimeAttribute | None:
        """Combine this attribute with the same key from other sources; None drops it."""
        return self if all(o == self for o in others) else None

    def visit_attributes(self) -> dict[str, str]:
        """Attributes written to IR ``<rt_info>``; empty means not serialized."""
        return {}


class FusedNames(RuntimeAttribute):
    """Friendly names of the original ops a node stands for (``fused_names_0``)."""

    key = "fused_names_0"
    __slots__ = ("names",)

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names: set[str] = set(names)

    @classmethod
    def of(cls, name: str) -> FusedNames:
        """``FusedNames([name])``, built directly (InitNodeInfo makes one per node)."""
        attr = cls.__new__(cls)
        attr.names = {name}
        return attr

    def merge(self, others: list[RuntimeAttribute]) -> FusedNames:
        merged = set(self.names)
        for o in others:
            if isinstance(o, FusedNames):
                merged |= o.names
        return FusedNames(merged)

    def get_names(self) -> str:
        return ",".join(sorted(self.names))

    def visit_attributes(self) -> dict[str, str]:
        return {"value": self.get_names()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FusedNames) and other.names == self.names

    def __hash__(self) -> int:
        return hash(frozenset(self.names))

    def __repr__(self) -> str:
        return f"FusedNames({self.get_names()})"


class NonCopyable(RuntimeAttribute):
    """A mark that stays on the node it was put on (e.g. ``no_transpose_sinking``)."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def is_copyable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NonCopyable) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"NonCopyable({self.key})"


def get_fused_names(node: Node) -> str:
    attr = node.rt_info.get(FusedNames.key)
    return attr.get_names() if isinstance(attr, FusedNames) else ""
