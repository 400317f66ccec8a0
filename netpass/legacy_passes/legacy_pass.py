"""The base class of a legacy pass (a module of its own: the passes and the manager both need
it)."""
from __future__ import annotations

from .layer_graph import LegacyNetwork


class LegacyPass:
    """A pass over a LegacyNetwork. ``run_before_copy`` picks its phase."""

    run_before_copy = False

    @property
    def name(self) -> str:
        return type(self).__name__

    def run(self, net: LegacyNetwork) -> bool:
        """Edit ``net``; return True when it changed."""
        raise NotImplementedError
