"""PassConfig: which passes are disabled, and the transformation callbacks passes consult.

One PassConfig is shared by a Manager, every pass registered in it, and (through
``Manager(self.get_pass_config())`` and ``GraphRewrite.set_pass_config``) every pass nested in
those, so a target disables a pass or refuses a rewrite in one place. Passes are keyed by
their class, as OpenVINO keys them by type info.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

Callback = Callable[[Any], bool]


def _never(node: Any) -> bool:
    return False


class PassConfig:
    """Disabled / force-enabled pass classes, per-class and global transformation callbacks.

    A callback gets the node a pass is about to transform and returns True to say *do not
    transform it* (``if self.transformation_callback(node): return False``).
    """

    def __init__(self) -> None:
        self._disabled: set[type] = set()
        self._enabled: set[type] = set()
        self._callbacks: dict[type, Callback] = {}
        self._global: Callback = _never

    # -- disabling ----------------------------------------------------------------------
    def disable(self, *pass_types: type) -> None:
        """Skip these pass classes wherever they are registered (Manager or GraphRewrite)."""
        for t in pass_types:
            self._enabled.discard(t)
            self._disabled.add(t)

    def enable(self, *pass_types: type) -> None:
        """Run these pass classes, also where they were registered as disabled by default."""
        for t in pass_types:
            self._disabled.discard(t)
            self._enabled.add(t)

    def is_disabled(self, pass_type: type) -> bool:
        return pass_type in self._disabled

    def is_enabled(self, pass_type: type) -> bool:
        """Force-enabled with :meth:`enable` (not merely "not disabled")."""
        return pass_type in self._enabled

    def disable_by_default(self, pass_type: type) -> None:
        """Disable unless the user force-enabled it (registration with ``enabled=False``)."""
        if pass_type not in self._enabled:
            self._disabled.add(pass_type)

    def add_disabled_passes(self, other: PassConfig) -> None:
        """Take over ``other``'s disabled passes, except those force-enabled here."""
        for t in other._disabled:
            if t not in self._enabled:
                self._disabled.add(t)

    @property
    def disabled(self) -> frozenset[type]:
        return frozenset(self._disabled)

    # -- callbacks ----------------------------------------------------------------------
    def set_callback(self, callback: Callback, *pass_types: type) -> None:
        """No types: the global callback; else a per-type callback for each type given."""
        if not pass_types:
            self._global = callback
        for t in pass_types:
            self._callbacks[t] = callback

    def get_callback(self, pass_type: type) -> Callback:
        """The per-type callback of ``pass_type`` if set, else the global one."""
        return self._callbacks.get(pass_type, self._global)

    def has_callback(self, pass_type: type) -> bool:
        """Whether ``pass_type`` is given a callback (its own or the global one) that may
        refuse something (a pass may then skip work the callback could never refuse)."""
        return self.get_callback(pass_type) is not _never

    def copy(self) -> PassConfig:
        """An independent PassConfig with the same disabled, force-enabled passes and
        callbacks (a target derives its own from a user's without changing it)."""
        new = PassConfig()
        new._disabled = set(self._disabled)
        new._enabled = set(self._enabled)
        new._callbacks = dict(self._callbacks)
        new._global = self._global
        return new

    def __repr__(self) -> str:
        names = sorted(t.__name__ for t in self._disabled)
        return f"<PassConfig disabled={names} callbacks={len(self._callbacks)}>"
