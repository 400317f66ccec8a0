"""What an infer request hands back: the output size limit (config ``MAX_OUTPUT_BYTES``) and
output arrays that the device writes in place.

Limit: an output whose shape (known after shape inference, before anything of its size is
allocated) would take more than ``MAX_OUTPUT_BYTES`` raises
:class:`~netpass.errors.OutputTooLargeError` naming it. The default is half the host's
physical memory: an output the host could not hold twice over (the device's copy and the
returned array on a GPU) is refused before the allocations that would fail or swap.

Zero copy: on a device whose memory is the host's (PoCL on the CPU), a primitive that
produces a network output of at least ZERO_COPY_MIN_BYTES gets, per infer, a new numpy array of
the output's shape as its buffer (``CL_MEM_USE_HOST_PTR``); the kernel writes the array the
request returns, and the output read-back is a read onto itself. Elsewhere the output is read
from the device buffer straight into a new array: one copy, the least a reused device buffer
allows.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import NetpassError, OutputTooLargeError

FALLBACK_LIMIT = 16 << 30  # where the host's memory size cannot be read
# Outputs this large or larger are written in place: below it, copying from a reused device
# buffer costs less than making a buffer over a new array per infer (pyopencl: ~20 us)
ZERO_COPY_MIN_BYTES = 1 << 20


def default_max_output_bytes() -> int:
    """Half the host's physical memory (16 GiB where it cannot be read)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return FALLBACK_LIMIT


def max_output_bytes(config: Mapping[str, Any]) -> int:
    """``config["MAX_OUTPUT_BYTES"]`` (a positive int), else the default."""
    v = config.get("MAX_OUTPUT_BYTES")
    if v is None:
        return default_max_output_bytes()
    try:
        n = int(v)
    except (TypeError, ValueError):
        n = 0
    if n <= 0 or isinstance(v, bool):
        raise NetpassError(f"MAX_OUTPUT_BYTES must be a positive number of bytes, got {v!r}")
    return n


def check_output_sizes(names: Mapping[int, str], shapes: Sequence[tuple], dtypes: Sequence[Any],
                       limit: int) -> None:
    """Raise :class:`OutputTooLargeError` for the first named output over ``limit`` bytes."""
    for k, name in names.items():
        shape = shapes[k]
        n = np.dtype(dtypes[k]).itemsize
        for d in shape:
            n *= int(d)
        if n > limit:
            raise OutputTooLargeError(name, shape, np.dtype(dtypes[k]), n, limit)
