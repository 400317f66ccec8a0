"""Device addresses of an engine's buffers, for kernels that take their buffers as addresses
in their one struct argument (``kernels.address_buffers``): NVIDIA's driver charges every
enqueue per buffer argument, not per byte of a struct.

An address is read once per buffer (a kernel writes its pointer as an integer; eight buffers
a launch and one read) and kept while the :class:`~netpass.runtime.memory.Allocation` that
made the buffer lives. What passing addresses gives up: the driver no longer knows which
buffers a launch uses, so it would free one that a queued launch still reads; launchers keep
the buffers they replace until their queue has run (``Launcher.retire``).

``AddressBook.make`` first checks that the device reads and writes through such an address
(a kernel doubles a buffer through one); on a device where it does not, or where
``NETPASS_ADDRESS_ARGS=0``, there is no book and kernels take buffer arguments.
"""
from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

AT_ONCE = 8  # buffers whose addresses one launch reads

_WHERE = ("__kernel void where("
          + ", ".join(f"__global const uchar* b{i}" for i in range(AT_ONCE))
          + ", __global ulong* out) {\n"
          + "".join(f"  out[{i}] = (ulong)b{i};\n" for i in range(AT_ONCE)) + "}\n"
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
        program = engine.cl.Program(engine.context, _WHERE).build()
        self._where = program.where
        self._doubled = program.doubled
        self._out = engine.cl.Buffer(engine.context, engine.cl.mem_flags.READ_WRITE,
                                     8 * AT_ONCE)
        self._live: set[int] = set()       # buffers of live allocations (cl_mem handles)
        self._known: dict[int, int] = {}   # their addresses, once read
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

    def register(self, buffer: Any) -> int:
        """Note ``buffer`` as an allocation's; the key ``forget`` takes when it dies."""
        key = buffer.int_ptr
        self._live.add(key)
        return key

    def forget(self, key: int) -> None:
        """The allocation of buffer ``key`` is gone (its handle may name another buffer)."""
        with self._lock:
            self._live.discard(key)
            self._known.pop(key, None)

    def of(self, buffers: list) -> list[int]:
        """The device addresses of ``buffers``."""
        known = self._known
        try:
            return [known[b.int_ptr] for b in buffers]
        except KeyError:
            pass
        with self._lock:
            todo = list({b.int_ptr: b for b in buffers if b.int_ptr not in known}.values())
            found = dict(known)
            for i in range(0, len(todo), AT_ONCE):
                chunk = todo[i:i + AT_ONCE]
                for b, a in zip(chunk, self._read(chunk)):
                    found[b.int_ptr] = a
                    if b.int_ptr in self._live:  # (else not kept: its handle could be reused)
                        known[b.int_ptr] = a
            return [found[b.int_ptr] for b in buffers]

    def _read(self, buffers: list) -> list[int]:
        """The addresses of up to AT_ONCE buffers: one launch, one read."""
        cl = self._engine.cl
        args = buffers + [buffers[0]] * (AT_ONCE - len(buffers))
        for i, b in enumerate(args):
            self._where.set_arg(i, b)
        self._where.set_arg(AT_ONCE, self._out)
        cl.enqueue_nd_range_kernel(self._queue, self._where, (1,), None)
        out = np.empty(AT_ONCE, np.uint64)
        cl.enqueue_copy(self._queue, out, self._out, is_blocking=True)
        return [int(a) for a in out[:len(buffers)]]
