"""Device memory: allocations, tensor views into them, the per-network memory pool, and the
fully-connected fake alignment that decides how large FC inputs/outputs are allocated."""
from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterable, Sequence

import numpy as np

RECLAIM_FACTOR = 10  # a buffer this many times larger than needed is given back


def oversized(need: int, capacity: int) -> bool:
    """A buffer of ``capacity`` elements is reclaimed when ``need`` is RECLAIM_FACTOR x
    smaller (the reference's realloc rule)."""
    return need * RECLAIM_FACTOR < capacity


def reusable(own, capacity: int, need: int) -> bool:
    """realloc_if_needed's reuse: an owned buffer that holds ``need`` elements and is not
    oversized."""
    return own is not None and need <= capacity and not oversized(need, capacity)


class Allocation:
    """One device buffer (``cl.Buffer``); ``host`` is the numpy array that is its memory when
    it was made over one (``Engine.allocate_host``), else None."""

    __slots__ = ("buffer", "nbytes", "users", "pooled", "host", "__weakref__")

    def __init__(self, buffer, nbytes: int, pooled: bool = False) -> None:
        self.buffer = buffer
        self.nbytes = nbytes
        self.users: set[int] = set()
        self.pooled = pooled
        self.host: np.ndarray | None = None


class Tensor:
    """A typed, contiguous view ``shape`` at element ``offset`` of an :class:`Allocation`.

    Views are how skipped primitives alias their input and how in-place concat inputs write
    into their slice of the concat output (the reference's reinterpret_buffer / padding)."""

    __slots__ = ("alloc", "offset", "shape", "dtype", "strides")

    def __init__(self, alloc: Allocation, offset: int, shape: tuple, dtype: np.dtype,
                 strides: tuple | None = None) -> None:
        self.alloc = alloc
        self.offset = offset
        self.shape = shape
        self.dtype = dtype
        self.strides = strides  # element strides of a permuted view; None: contiguous

    def view(self, shape: tuple, offset: int = 0) -> Tensor:
        return Tensor(self.alloc, self.offset + offset, shape, self.dtype)

    def extent(self) -> int:
        """Elements from ``offset`` to the last one this tensor covers, plus one."""
        if self.strides is None:
            return int(np.prod(self.shape, dtype=np.int64))
        if any(d == 0 for d in self.shape):
            return 0
        return 1 + sum((d - 1) * s for d, s in zip(self.shape, self.strides))


class Lifetime:
    """The ids of the nodes whose output lifetimes overlap node ``key``'s, as a container
    (``uid in lifetime``): lifetimes are (first, last) positions in exec order in ``spans``
    (id -> span), shared by the program's nodes. A set of every overlapping id per node would
    take quadratic time and memory on long programs; this answers each question in O(1)."""

    __slots__ = ("key", "first", "last", "spans")

    def __init__(self, key: int, spans: dict[int, tuple[int, int]]) -> None:
        self.key, self.spans = key, spans
        self.first, self.last = spans[key]

    def __contains__(self, uid: object) -> bool:
        span = self.spans.get(uid)  # type: ignore[call-overload]
        return span is not None and uid != self.key and span[0] <= self.last \
            and self.first <= span[1]

    def overlaps_any(self, uids: Iterable[int]) -> bool:
        """Whether one of ``uids`` is in here (``in`` for each, in one loop)."""
        spans, key, first, last = self.spans, self.key, self.first, self.last
        for uid in uids:
            span = spans.get(uid)
            if span is not None and uid != key and span[0] <= last and first <= span[1]:
                return True
        return False

    def __iter__(self):
        return (uid for uid in self.spans if uid in self)


def overlap_sets(order: list, spans: dict[int, tuple[int, int]], limit: int) -> dict | None:
    """id -> ids of the nodes whose (first, last) spans overlap its own, by a sweep over the
    start positions (the nodes still live when one starts overlap it): O(n log n + pairs);
    None once the pairs pass ``limit`` (then :class:`Lifetime` answers each question)."""
    sets: dict[int, set] = {id(n): set() for n in order}
    live: dict[int, None] = {}
    ends: list[tuple[int, int]] = []
    pairs = 0
    # (by start: an in-place concat's span starts at its first input, before its own place)
    for n in sorted(order, key=lambda n: spans[id(n)][0]):
        key = id(n)
        first, last = spans[key]
        while ends and ends[0][0] < first:
            del live[heapq.heappop(ends)[1]]
        pairs += 2 * len(live)
        if pairs > limit:
            return None
        mine = sets[key]
        for other in live:
            mine.add(other)
            sets[other].add(key)
        live[key] = None
        heapq.heappush(ends, (last, key))
    return sets


class MemoryPool:
    """Per-network pool of device buffers (OpenVINO GPU ``memory_pool``, non-padded part).

    Records are keyed by size. A request takes the smallest-keyed record at least as large that
    (a) has no current user in the requester's restriction set (outputs whose lifetimes overlap)
    and (b) for dynamic requesters, is not more than twice the request (``bytes > 0.5 *
    record``). The requester becomes a user. A record whose last user releases it stays as a
    free record while free records hold at most as many bytes as used ones (the reference
    erases it at once; keeping it saves reallocations over a growing sequence)."""

    def __init__(self, allocate) -> None:
        self._allocate = allocate  # nbytes -> Allocation
        self._keys: list[int] = []
        self._records: list[Allocation] = []
        self.hits = 0

    def __len__(self) -> int:
        return len(self._records)

    def get_memory(self, nbytes: int, user: int, restrictions: Iterable[int] = (),
                   is_dynamic: bool = False) -> tuple[Allocation, bool]:
        """An allocation of at least ``nbytes`` for ``user``; the flag says it was reused."""
        if type(restrictions) is Lifetime:
            conflicts: Callable[[set[int]], bool] = restrictions.overlaps_any
        else:
            restrict = (restrictions if isinstance(restrictions, (set, frozenset))
                        else set(restrictions))
            conflicts = lambda users: not users.isdisjoint(restrict)  # noqa: E731
        records = self._records
        for i in range(bisect.bisect_left(self._keys, nbytes), len(records)):  # smallest first
            rec = records[i]
            if is_dynamic and not nbytes > 0.5 * rec.nbytes:
                break  # (records are sorted by size: every later one is larger still)
            users = rec.users
            if users and (user in users or conflicts(users)):
                continue
            users.add(user)
            self.hits += 1
            return rec, True
        rec = self._allocate(nbytes)
        rec.pooled = True
        rec.users.add(user)
        i = bisect.bisect_right(self._keys, nbytes)
        self._keys.insert(i, nbytes)
        self._records.insert(i, rec)
        return rec, False

    def release(self, rec: Allocation, user: int) -> None:
        """``user`` stops using ``rec``. A record without users stays in the pool, free for the
        next fitting request (a growing sequence frees buffers that smaller growing outputs
        can take), while the free records hold no more bytes than the used ones; the
        smallest free records are freed first."""
        rec.users.discard(user)
        if rec.users:
            return
        used = free = 0
        for r in self._records:
            if r.users:
                used += r.nbytes
            else:
                free += r.nbytes
        i = 0
        while free > used and i < len(self._records):
            r = self._records[i]
            if r.users:
                i += 1
                continue
            free -= r.nbytes
            del self._records[i]
            del self._keys[i]


def _align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def fake_aligned_shapes(input_shape: Sequence[int], n_out: int, *, integrated: bool = False,
                        int_weights: bool = False, pad_dim1: bool = False,
                        full_tensor_fused_input: bool = False) -> tuple[tuple, tuple]:
    """(input shape, output shape) a fully connected kernel runs on: the batch (product of all
    dims but the last) is rounded up so that the GEMM tiles need no tail handling.

    Base 8; 16 on integrated GPUs, 64 there for int weights and batch >= 256. Unchanged when
    batch is 1 with K >= 1024 (GEMV), when a 3-D input is padded on dim 1, or when a fused op
    reads a full-size tensor."""
    shape = tuple(int(d) for d in input_shape)
    k = shape[-1]
    out = shape[:-1] + (int(n_out),)
    if (len(shape) == 3 and pad_dim1) or full_tensor_fused_input:
        return shape, out
    batch = 1
    for d in shape[:-1]:
        batch *= d
    if batch == 1 and k >= 1024:
        return shape, out
    base = 8
    if integrated:
        base = 64 if int_weights and batch >= 256 else 16
    ab = _align(batch, base)
    ones = (1,) * (len(shape) - 2)
    return (ab,) + ones + (k,), (ab,) + ones + (int(n_out),)
