"""Reads back through pinned host memory.

A device read into pageable memory (a fresh numpy array) is staged by NVIDIA's driver through
its own pinned buffers, chunk by chunk, the host copying each one while the device waits; a
read into memory the driver pinned (a mapped ``CL_MEM_ALLOC_HOST_PTR`` buffer) is one DMA. On
the H200, in the same call, a GPT-2 decode step (201 KB of logits read each step) took 0.80 ms
on the device with the read pinned against 0.83-0.89 ms without (BENCHMARKS.md, Stateful
decoding, twentieth round).

So an infer request reads its outputs of PINNED_MIN_BYTES to PINNED_MAX_BYTES into its own
pinned region and copies them into the arrays it returns once the queue has run: the arrays
stay the caller's (a region reused by the next infer could not be handed out). Smaller reads
(a shape, a token) go straight to their arrays, one copy fewer; so do larger ones (the host's
copy out of the region would grow with them, and the request would hold as much pinned
memory). A device whose memory is the host's (``Engine.host_memory``) writes most outputs in
place and stages nothing.

An inference that returns without waiting (``enqueue``, :mod:`~netpass.runtime.pending`)
reads its small outputs (a token) into pinned slots of SLOT_BYTES: a read into pageable
memory is staged by the host's driver, which then waits for the device there, so the host
could not enqueue the next inference while the device runs this one.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import AllocationError

PINNED_MIN_BYTES = 64 * 1024  # smaller reads go straight to their arrays
PINNED_MAX_BYTES = 4 << 20    # and larger ones
ALIGN = 256  # bytes between two staged reads of one wait
SLOT_BYTES = 256  # a pinned slot of an inference not waited for (PinnedStaging.take_slot)
SLOTS = 16


class PinnedStaging:
    """One request's pinned host region, grown to the largest wait's staged reads and kept
    mapped for the request's life."""

    def __init__(self, engine: Any, queue: Any) -> None:
        self._engine = engine
        self._queue = queue
        self._buffer: Any = None
        self.region: np.ndarray | None = None  # uint8, mapped (pinned) memory
        self._slots_buffer: Any = None
        self._slots: np.ndarray | None = None  # SLOTS x SLOT_BYTES, mapped
        self._free: list[int] = []  # free slot indices (list pop/append: one thread each)

    @staticmethod
    def wanted(nbytes: int) -> bool:
        """Whether a read of ``nbytes`` goes through the pinned region."""
        return PINNED_MIN_BYTES <= nbytes <= PINNED_MAX_BYTES

    @staticmethod
    def span(nbytes: int) -> int:
        """Bytes a staged read of ``nbytes`` takes in the region."""
        return -(-nbytes // ALIGN) * ALIGN

    def reserve(self, nbytes: int) -> np.ndarray:
        """The region, at least ``nbytes`` long (grown to a new mapping if shorter)."""
        if self.region is None or self.region.nbytes < nbytes:
            self.region = None  # (the old mapping is unmapped when its array goes)
            self._buffer, self.region = self._map(nbytes)
        return self.region

    def _map(self, nbytes: int) -> tuple[Any, np.ndarray]:
        cl = self._engine.cl
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR
        try:
            buffer = cl.Buffer(self._engine.context, flags, nbytes)
            region, _ = cl.enqueue_map_buffer(
                self._queue, buffer, cl.map_flags.READ | cl.map_flags.WRITE, 0, (nbytes,),
                np.uint8, is_blocking=True)
        except (cl.Error, MemoryError) as e:
            raise AllocationError(f"allocating {nbytes} bytes of pinned host memory for "
                                  f"reading outputs failed: {e}") from e
        return buffer, region

    def take_slot(self, nbytes: int) -> tuple[int, np.ndarray] | None:
        """A free pinned slot for a read of ``nbytes`` not waited for (its index and its
        first ``nbytes``), or None (too large, or every slot held: read into pageable
        memory then, correct but waited for)."""
        if nbytes > SLOT_BYTES:
            return None
        if self._slots is None:
            self._slots_buffer, self._slots = self._map(SLOTS * SLOT_BYTES)
            self._free = list(range(SLOTS))
        try:
            i = self._free.pop()
        except IndexError:
            return None
        return i, self._slots[i * SLOT_BYTES:i * SLOT_BYTES + nbytes]

    def give_slot(self, index: int) -> None:
        """Slot ``index`` free again (its read has run and been copied, or is dropped: a
        later read into it runs after it on the in-order queue)."""
        self._free.append(index)


def enqueue_reads(launcher: Any, staging: PinnedStaging | None,
                  reads: list[tuple[np.ndarray, Any, int]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Enqueue ``reads`` ((array, buffer, byte offset) each) without waiting: straight into
    the arrays, or through ``staging``'s region for the sizes it takes (None: none). The
    (array, region slice) pairs whose bytes go into the arrays once the queue has run."""
    spans = [staging.span(a.nbytes) if staging is not None and staging.wanted(a.nbytes) else 0
             for a, _, _ in reads]
    region = staging.reserve(sum(spans)) if staging is not None and any(spans) else None
    start, staged = 0, []
    for (arr, buffer, offset), span in zip(reads, spans):
        if region is not None and span:
            into = region[start:start + arr.nbytes]
            launcher.read(into, buffer, offset)
            staged.append((arr, into))
            start += span
        elif arr.size:
            launcher.read(arr, buffer, offset)
    return staged


def new_host_array(t: Any, inst: Any, k: int) -> np.ndarray:
    """A new array to read tensor ``t`` (output ``k`` of primitive ``inst``) into: its shape,
    or its extent where it is a strided view."""
    shape = (t.extent(),) if t.strides is not None else t.shape
    try:
        return np.empty(shape, dtype=t.dtype)
    except MemoryError as e:
        n = int(np.prod(shape, dtype=np.int64)) * t.dtype.itemsize
        raise AllocationError(f"allocating {n} bytes on the host for output {k} of "
                              f"{inst.node.kind} '{inst.node.name}' {list(t.shape)} "
                              "failed") from e
