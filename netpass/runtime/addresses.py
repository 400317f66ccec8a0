"""Device addresses of an engine's buffers, for kernels that take their buffers as addresses
in their one struct argument (``kernels.address_buffers``): NVIDIA's driver charges every
enqueue per buffer argument, not per byte of a struct.

An address is read once per buffer (a kernel writes its pointer as an integer, eight buffers
a launch) and kept while the :class:`~netpass.runtime.memory.Allocation` that made the buffer
lives. A look-up that misses reads every live allocation's address not read yet with it, in
one wait: a new model's first inference waits once, not once per kernel (PoCL: ~40 us a
wait). What passing addresses gives up: the driver no longer knows which buffers a launch
uses, so it would free one that a queued launch still reads; launchers keep the buffers they
replace until their queue has run (``Launcher.retire``), and a request dropped with work
queued runs it out first.

``AddressBook.make`` first checks that the device reads and writes through such an address
(a kernel doubles a buffer through one); on a device where it does not, or where
``NETPASS_ADDRESS_ARGS=0``, there is no book and kernels take buffer arguments.
"""
from __future__ import annotations

import os
import threading
import weakref
from typing import Any

import numpy as np

AT_ONCE = 8  # buffers whose addresses one launch reads

_PROGRAM = ("__kernel void where("
            + ", ".join(f"__global const uchar* b{i}" for i in range(AT_ONCE))
            + ", __global ulong* out, int at) {\n"
            + "".join(f"  out[at + {i}] = (ulong)b{i};\n" for i in range(AT_ONCE)) + "}\n"
            + """typedef struct { ulong x; ulong y; int n; } Args_doubled;
__kernel void doubled(const Args_doubled a) {
  int i = get_global_id(0);
  if (i < a.n) ((__global float*)a.y)[i] = 2.0f * ((__global const float*)a.x)[i];
}
""")


class AddressBook:
    """The addresses of the buffers of an engine's live allocations (module docstring). Used
    from any thread: reading the addresses of new buffers, and forgetting, hold a lock."""

    def __init__(self, engine) -> None:
        self._engine = engine
        self._queue = engine.new_queue()
        program = engine.cl.Program(engine.context, _PROGRAM).build()
        self._where = program.where
        self._doubled = program.doubled
        self._out = engine.cl.Buffer(engine.context, engine.cl.mem_flags.READ_WRITE,
                                     8 * AT_ONCE)
        self._out_size = AT_ONCE
        # live allocations by their buffer's cl_mem handle; those not read yet; the addresses
        self._live: dict[int, weakref.ref] = {}
        self._unread: set[int] = set()
        self._known: dict[int, int] = {}
        # (reentrant: a collection inside ``of`` may run an allocation's ``forget``)
        self._lock = threading.RLock()

    @classmethod
    def make(cls, engine) -> AddressBook | None:
        """The engine's book, or None (module docstring)."""
        if os.environ.get("NETPASS_ADDRESS_ARGS", "1") == "0":
            return None
        try:
            book = cls(engine)
            return book if book._works() else None
        except Exception:  # (a compiler or driver that refuses the casts: buffer arguments)
            return None

    def _works(self) -> bool:
        """Whether a kernel reads and writes through addresses read by ``where``."""
        cl, ctx = self._engine.cl, self._engine.context
        x = np.arange(1, 65, dtype=np.float32)
        src = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
        dst = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, x.nbytes)
        ax, ay = self._read([src, dst])
        args = np.zeros(1, dtype=[("x", np.uint64), ("y", np.uint64), ("n", np.int32),
                                  ("pad", np.int32)])
        args["x"], args["y"], args["n"] = ax, ay, x.size
        self._doubled.set_arg(0, args.tobytes())
        cl.enqueue_nd_range_kernel(self._queue, self._doubled, (x.size,), None)
        y = np.empty_like(x)
        cl.enqueue_copy(self._queue, y, dst, is_blocking=True)
        return bool(np.array_equal(y, 2 * x))

    def register(self, alloc: Any) -> int:
        """Note ``alloc``'s buffer; the key ``forget`` takes when the allocation dies."""
        key = alloc.buffer.int_ptr
        with self._lock:
            self._live[key] = weakref.ref(alloc)
            self._unread.add(key)
        return key

    def forget(self, key: int) -> None:
        """The allocation of buffer ``key`` is gone (its handle may name another buffer)."""
        with self._lock:
            self._live.pop(key, None)
            self._unread.discard(key)
            self._known.pop(key, None)

    def of(self, buffers: list) -> list[int]:
        """The device addresses of ``buffers``."""
        known = self._known
        try:
            return [known[b.int_ptr] for b in buffers]
        except KeyError:
            pass
        with self._lock:
            todo = {b.int_ptr: b for b in buffers if b.int_ptr not in known}
            for key in self._unread:
                alloc = self._live[key]()
                if alloc is not None:
                    todo.setdefault(key, alloc.buffer)
            self._unread.clear()
            found = dict(zip(todo, self._read(list(todo.values()))))
            for key, address in found.items():
                if key in self._live:  # (else not kept: its handle could name another later)
                    known[key] = address
            return [found[b.int_ptr] if b.int_ptr in found else known[b.int_ptr]
                    for b in buffers]

    def _read(self, buffers: list) -> list[int]:
        """The addresses of ``buffers``: a launch per AT_ONCE of them, one read."""
        cl, n = self._engine.cl, len(buffers)
        size = -(-n // AT_ONCE) * AT_ONCE
        if size > self._out_size:
            self._out = cl.Buffer(self._engine.context, cl.mem_flags.READ_WRITE, 8 * size)
            self._out_size = size
        for at in range(0, n, AT_ONCE):
            chunk = buffers[at:at + AT_ONCE]
            for i, b in enumerate(chunk + [chunk[0]] * (AT_ONCE - len(chunk))):
                self._where.set_arg(i, b)
            self._where.set_arg(AT_ONCE, self._out)
            self._where.set_arg(AT_ONCE + 1, np.int32(at))
            cl.enqueue_nd_range_kernel(self._queue, self._where, (1,), None)
        out = np.empty(size, np.uint64)
        cl.enqueue_copy(self._queue, out, self._out, is_blocking=True)
        return [int(a) for a in out[:n]]
