"""Host cost of the OpenCL driver's clEnqueueNDRangeKernel (issue 17): by the kernel's argument
count, grid size, and whether the device is busy (a spin kernel ahead) while the host enqueues;
the same buffers as device addresses in one struct argument (the runtime's form where the
device allows it: ``runtime.addresses``); then 63 different kernel objects of 12 arguments, as
a decode step enqueued them before. Each figure
is the median over 35 rounds of 63 enqueues through ctypes, as the runtime's DirectLauncher
makes them.

    python benchmarks/probe_enqueue_cost.py      (an OpenCL GPU; BENCHMARKS.md, Stateful
                                                  decoding, thirty-sixth round)
"""
from __future__ import annotations

import ctypes
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyopencl as cl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from netpass.runtime.device import Engine
from netpass.runtime.launcher import _opencl_library

ROUNDS, PER_ROUND = 40, 63


def main() -> None:
    gpus = [p for p in cl.get_platforms() if p.get_devices(cl.device_type.GPU)]
    dev = (gpus or cl.get_platforms())[0].get_devices()[0]
    engine = Engine.get(dev)  # (its context: its address book reads these buffers)
    ctx = engine.context
    queue = cl.CommandQueue(ctx)
    lib = _opencl_library()
    enqueue = lib.clEnqueueNDRangeKernel
    enqueue.restype = ctypes.c_int32
    qp = ctypes.c_void_p(queue.int_ptr)
    bufs = [cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 1 << 20) for _ in range(32)]

    def kernel(nargs: int):
        args = ", ".join(f"__global float* a{i}" for i in range(nargs))
        k = cl.Program(ctx, f"__kernel void k({args}) {{ if (get_global_id(0) == 0) "
                            "a0[0] += 1.0f; }").build().k
        for i in range(nargs):
            k.set_arg(i, bufs[i])
        return k

    spin = cl.Program(ctx, """__kernel void spin(__global float* a, int n) {
      float x = a[get_global_id(0)];
      for (int i = 0; i < n; i++) x = x * 0.999f + 0.001f;
      a[get_global_id(0)] = x; }""").build().spin
    spin.set_arg(0, bufs[0])
    spin.set_arg(1, np.int32(200000))

    def per_enqueue(kernels: list, items: int, busy: bool) -> float:
        """Median host microseconds per enqueue of ``kernels`` (cycled), grid ``items``."""
        dims = (ctypes.c_uint32(1), (ctypes.c_size_t * 1)(items), (ctypes.c_size_t * 1)(256))
        ptrs = [ctypes.c_void_p(k.int_ptr) for k in kernels]
        times = []
        for _ in range(ROUNDS):
            if busy:
                cl.enqueue_nd_range_kernel(queue, spin, (132 * 256,), (256,))
                queue.flush()
            t0 = time.perf_counter()
            for i in range(PER_ROUND):
                enqueue(qp, ptrs[i % len(ptrs)], dims[0], None, dims[1], dims[2], 0, None, None)
            times.append((time.perf_counter() - t0) / PER_ROUND)
            queue.finish()
        return 1e6 * statistics.median(times[5:])

    print(dev.name, dev.driver_version)
    for nargs in (1, 8, 16, 32):
        k = [kernel(nargs)]
        print(f"{nargs:2d} args: grid 256 idle {per_enqueue(k, 256, False):5.2f} us, busy "
              f"{per_enqueue(k, 256, True):5.2f} us; grid 132x256 idle "
              f"{per_enqueue(k, 132 * 256, False):5.2f} us, busy "
              f"{per_enqueue(k, 132 * 256, True):5.2f} us", flush=True)
    book = engine.addresses
    if book is not None:  # (the runtime's form: kernels.address_buffers; the same buffers)
        for nargs in (1, 8, 16):
            k = cl.Program(ctx, f"typedef struct {{ ulong a[{nargs}]; int v[8]; }} S;\n"
                                "__kernel void k(const S s) { if (get_global_id(0) == 0) "
                                "((__global float*)s.a[0])[0] += 1.0f; }").build().k
            args = np.zeros(1, dtype=[("a", np.uint64, nargs), ("v", np.int32, 8)])
            args["a"][0] = book.of(bufs[:nargs])
            k.set_arg(0, args.tobytes())
            print(f"a struct of {nargs:2d} addresses and 8 ints: grid 132x256 idle "
                  f"{per_enqueue([k], 132 * 256, False):5.2f} us, busy "
                  f"{per_enqueue([k], 132 * 256, True):5.2f} us", flush=True)
    step = [kernel(12) for _ in range(PER_ROUND)]
    for busy in (False, True):
        print(f"63 kernel objects x 12 args, grid 132x256, {'busy' if busy else 'idle'}: "
              f"{per_enqueue(step, 132 * 256, busy):.2f} us per enqueue", flush=True)


if __name__ == "__main__":
    main()
