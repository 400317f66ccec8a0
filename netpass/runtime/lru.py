"""LRU cache with the semantics of OpenVINO GPU's ``LruCache`` (implementations cache,
reordered-weights cache): ``get`` touches, ``has`` does not, ``add`` of an existing key updates
and touches, a full cache evicts the least recently used entry, capacity 0 is unbounded."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class LruCache:
    def __init__(self, capacity: int,
                 on_evict: Callable[[Hashable, Any], None] | None = None) -> None:
        self.capacity = int(capacity)
        self._data: OrderedDict = OrderedDict()
        self._on_evict = on_evict

    def __len__(self) -> int:
        return len(self._data)

    def has(self, key: Hashable) -> bool:
        return key in self._data

    def get(self, key: Hashable, default: Any = None) -> Any:
        data = self._data
        if key not in data:
            return default
        data.move_to_end(key, last=False)
        return data[key]

    def add(self, key: Hashable, value: Any) -> None:
        data = self._data
        if key in data:
            data[key] = value
            data.move_to_end(key, last=False)
            return
        if self.capacity and len(data) >= self.capacity:
            old_key, old_value = data.popitem(last=True)
            if self._on_evict is not None:
                self._on_evict(old_key, old_value)
        data[key] = value
        data.move_to_end(key, last=False)

    def is_full(self) -> bool:
        return bool(self.capacity) and len(self._data) >= self.capacity

    def get_lru_element(self) -> tuple[Hashable, Any]:
        """The least recently used (key, value)."""
        key = next(reversed(self._data))
        return key, self._data[key]

    def keys(self) -> list:
        """Keys, most recently used first."""
        return list(self._data)

    def clear(self) -> None:
        self._data.clear()
