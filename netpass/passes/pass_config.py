"""PassConfig: which passes are disabled, and the transformation callbacks passes consult."""
from __future__ import annotations

from typing import Any, Callable


def _never(node: Any) -> bool:
    return False


class PassConfig:
    """Shared by a Manager and every pass registered in it (and nested in those)."""

    def __init__(self) -> None:
        self._disabled: set[type] = set()
        self._enabled: set[type] = set()
        self._callbacks: dict[type, Callable[[Any], bool]] = {}
        self._global: Callable[[Any], bool] = _never

    def disable(self, pass_type: type) -> None:
        self._enabled.discard(pass_type)
        self._disabled.add(pass_type)

    def enable(self, pass_type: type) -> None:
        self._disabled.discard(pass_type)
        self._enabled.add(pass_type)

    def is_disabled(self, pass_type: type) -> bool:
        return pass_type in self._disabled

    def is_enabled(self, pass_type: type) -> bool:
        return pass_type in self._enabled

    def set_callback(self, callback: Callable[[Any], bool], *pass_types: type) -> None:
        """No types: the global callback; else a per-type callback for each type given."""
        if not pass_types:
            self._global = callback
        for t in pass_types:
            self._callbacks[t] = callback

    def get_callback(self, pass_type: type) -> Callable[[Any], bool]:
        return self._callbacks.get(pass_type, self._global)

    def add_disabled_passes(self, other: "PassConfig") -> None:
        for t in other._disabled:
            if t not in self._enabled:
                self._disabled.add(t)
