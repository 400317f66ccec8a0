"""Buffer preallocation by shape prediction (OpenVINO GPU ``ShapePredictor``).

One predictor lives in each infer request. Every realloc check of a dynamic primitive records
the output shape (history of 3 per id). When the last three shapes grow by the same small
non-zero step, the buffer is sized for ``iterations`` more steps ("iterations-ahead" mode);
otherwise, when ``ratio > 1``, the flattened size grows by ``ratio`` ("percentage" mode, computed
in float32 as the reference's ``size_t * float``).
"""
from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Sequence

import numpy as np

from ..errors import NetpassError

ENV_OPTIONS = "NETPASS_MEM_PREALLOCATION_OPTIONS"
HISTORY = 3


def parse_options(text: str) -> tuple[int, int, int, float]:
    """``"iters max_size max_dim_diff ratio"`` -> a tuple; raises a NetpassError when malformed."""
    parts = text.split()
    if len(parts) != 4:
        raise NetpassError(f"{ENV_OPTIONS}={text!r}: expected 4 values "
                           "'iterations max_per_iter_size max_per_dim_diff ratio'")
    try:
        return int(parts[0]), int(parts[1]), int(parts[2]), float(parts[3])
    except ValueError:
        raise NetpassError(f"{ENV_OPTIONS}={text!r}: the first three values must be integers "
                           "and the last a float") from None


class ShapePredictor:
    """Predicts preallocation shapes from each primitive's recent output shapes."""

    def __init__(self, iterations: int = 10, max_per_iter_size: int = 16384,
                 max_per_dim_diff: int = 2, ratio: float = 1.1,
                 max_global_mem_size: int | None = None, max_alloc_mem_size: int | None = None,
                 used_device_memory=None) -> None:
        self.iterations = int(iterations)
        self.max_per_iter_size = int(max_per_iter_size)
        self.max_per_dim_diff = int(max_per_dim_diff)
        self.ratio = float(ratio)
        self.max_global_mem_size = max_global_mem_size
        self.max_alloc_mem_size = max_alloc_mem_size
        # callable returning the bytes currently allocated on the device (engine-tracked)
        self._used = used_device_memory
        self._shapes: dict[str, deque] = {}

    @classmethod
    def from_env(cls, **device_limits) -> ShapePredictor:
        """Defaults, overridden by ``NETPASS_MEM_PREALLOCATION_OPTIONS`` when set."""
        text = os.environ.get(ENV_OPTIONS)
        if text:
            it, size, diff, ratio = parse_options(text)
            return cls(it, size, diff, ratio, **device_limits)
        return cls(**device_limits)

    @property
    def disabled(self) -> bool:
        return self.iterations <= 0 and self.ratio <= 1.0

    def reset(self) -> None:
        self._shapes.clear()

    @staticmethod
    def key(id: str, out_idx: int) -> str:
        """The history key of output ``out_idx`` of primitive ``id``."""
        return id if out_idx == 0 else f"{id}_out{out_idx}"

    def record(self, id: str, shape: tuple) -> None:
        """``predict_preallocation_shape(id, shape, ..., can_reuse_buffer=True)`` of output 0:
        the shape joins the history; nothing is predicted."""
        hist = self._shapes.get(id)
        if hist is None:
            hist = self._shapes[id] = deque(maxlen=HISTORY)
        hist.append(shape)

    def predict_preallocation_shape(self, id: str, shape: Sequence[int], dt_bitwidth: int,
                                    can_reuse_buffer: bool, out_idx: int = 0,
                                    custom_count: int = -1,
                                    custom_dim: int = -1) -> tuple[bool, tuple]:
        """Record ``shape`` for ``id`` and return ``(predicted, shape)``; ``()`` when not."""
        key = self.key(id, out_idx)
        hist = self._shapes.get(key)
        if hist is None:
            hist = self._shapes[key] = deque(maxlen=HISTORY)
        cur = shape if type(shape) is tuple else tuple(int(d) for d in shape)
        hist.append(cur)
        if can_reuse_buffer:
            return False, ()
        n = custom_count if custom_count > 0 else self.iterations
        if custom_dim >= 0 and custom_count > 0:
            out = list(cur)
            out[custom_dim] += custom_count
            return True, tuple(out)
        if len(hist) < HISTORY:
            return False, ()
        diffs = []
        for newer, older in ((hist[2], hist[1]), (hist[1], hist[0])):
            if len(newer) != len(older) or any(a < b for a, b in zip(newer, older)):
                break
            diffs.append(tuple(a - b for a, b in zip(newer, older)))
        if len(diffs) == 2 and diffs[0] == diffs[1] and any(diffs[0]) \
                and all(d <= self.max_per_dim_diff for d in diffs[0]):
            single = 1
            for c, d in zip(cur, diffs[0]):
                single *= c if d == 0 else 1
            if math.ceil(single * dt_bitwidth / 8) <= self.max_per_iter_size:
                return True, tuple(c + d * n for c, d in zip(cur, diffs[0]))
        if self.ratio > 1.0:
            size = int(np.prod(cur, dtype=np.int64)) if cur else 1
            grown = int(np.float32(size) * np.float32(self.ratio))
            return True, (grown,) + (1,) * (len(cur) - 1)
        return False, ()

    def can_preallocate(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more fit: below the max single allocation and below 90% of the
        device's global memory together with what is already allocated."""
        if self.max_alloc_mem_size is not None and nbytes > self.max_alloc_mem_size:
            return False
        if self.max_global_mem_size is None:
            return True
        used = self._used() if self._used is not None else 0
        return used + nbytes < self.max_global_mem_size * 0.90
