"""Host cost of one kernel launch from Python, by the ways the runtime could launch.

A trivial kernel (two buffers with offsets, two int sizes) is enqueued ``--n`` times in a row
on the engine's in-order queue, flushed every 64 launches, then the queue is drained. Reported
per launch, median of ``--reps`` rounds:

- host: the time the Python loop took (what the launching thread pays);
- drain: the time ``finish`` took after the loop (device work not yet done when the host was);
- device: (host + drain) / n, the rate the device retires such launches back to back.

Ways: pyopencl's ``enqueue_nd_range_kernel`` (returns an event) and ``set_args`` + enqueue
(all arguments set again each time) on kernels of 6 and 24 arguments (a GEMM has about 24
ints and buffers); then the runtime's launchers (``netpass.runtime.launcher``) on the
24-argument kernel as the runtime compiles it (its ints packed in one struct,
``kernels.pack_scalars``), enqueue only and with one int changed each time; then the last two
again with ``--live`` more buffers allocated in the context. Also prints the device's OpenCL
version and extensions.

    python benchmarks/bench_launch.py --device GPU
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netpass.errors import DeviceError
from netpass.runtime import kernels
from netpass.runtime.device import Engine, resolve_device_name, select_device
from netpass.runtime.launcher import DirectLauncher, KernelHandle, Launcher

SOURCE = """
__kernel void tiny(__global float* a, int ao, __global const float* b, int bo, int n, int m) {
    int i = get_global_id(0);
    if (i < n) a[ao + i] = b[bo + i] * 2.0f + (float)m;
}
"""
WIDE = """
__kernel void wide(__global float* a, int ao, __global const float* b, int bo, int n, int m,
                   int s0, int s1, int s2, int s3, int s4, int s5, int s6, int s7, int s8, int s9,
                   int s10, int s11, int s12, int s13, int s14, int s15, int s16, int s17) {
    int i = get_global_id(0);
    if (i < n) a[ao + i] = b[bo + i] * 2.0f + (float)(m + s0 + s17);
}
"""


class _Launch:
    """The part of ``impls.Launch`` a launcher reads."""

    def __init__(self, gws: tuple, lws: tuple) -> None:
        self.gws, self.lws, self.cdims = gws, lws, None


def timed(fn, n: int, reps: int, queue) -> tuple[float, float]:
    hosts, drains = [], []
    for _ in range(reps):
        queue.finish()
        t0 = time.perf_counter()
        fn(n)
        t1 = time.perf_counter()
        queue.finish()
        t2 = time.perf_counter()
        hosts.append((t1 - t0) / n)
        drains.append((t2 - t1) / n)
    return float(np.median(hosts)), float(np.median(drains))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="AUTO")
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--live", type=int, default=4000, help="extra live buffers in the last rows")
    args = ap.parse_args()
    eng = Engine.get(select_device(resolve_device_name(args.device)))
    cl, q = eng.cl, eng.queue
    dev = eng.device
    print(f"device: {dev.name.strip()} ({dev.platform.name.strip()}), {dev.version}, driver {dev.driver_version}")
    print("extensions:", " ".join(sorted(dev.extensions.split())))
    a = cl.Buffer(eng.context, cl.mem_flags.READ_WRITE, 4 * 4096)
    b = cl.Buffer(eng.context, cl.mem_flags.READ_WRITE, 4 * 4096)
    gws, lws = (1024,), (64,)
    ln = _Launch(gws, lws)
    enqueue = cl.enqueue_nd_range_kernel
    rows = []
    # pyopencl's own calls on kernels with their ints as separate arguments
    for src, name, n_extra in ((SOURCE, "tiny", 0), (WIDE, "wide", 18)):
        kern = cl.Kernel(eng.build(src), name)
        kern.set_scalar_arg_dtypes([None, np.int32, None, np.int32] + [np.int32] * (2 + n_extra))
        rest = [0] * n_extra

        def enqueue_only(n, kern=kern, rest=rest):
            kern.set_args(a, 0, b, 0, 1024, 3, *rest)
            for i in range(n):
                enqueue(q, kern, gws, lws)
                if i % 64 == 63:
                    q.flush()

        def set_and_enqueue(n, kern=kern, rest=rest):
            for i in range(n):
                kern.set_args(a, 0, b, 0, 1024, i & 7, *rest)
                enqueue(q, kern, gws, lws)
                if i % 64 == 63:
                    q.flush()
        rows.append((f"pyopencl enqueue, {6 + n_extra} args", enqueue_only))
        rows.append((f"pyopencl set_args + enqueue, {6 + n_extra} args", set_and_enqueue))
    # the runtime's launchers on the 24-argument kernel with its ints packed in one struct
    packed = kernels.pack_scalars(kernels.Source(WIDE, "wide"))
    launchers = [("runtime pyopencl launcher", Launcher(eng))]
    try:
        launchers.append(("runtime direct launcher", DirectLauncher(eng)))
    except DeviceError as e:
        print(f"direct launches unavailable: {e}")
    for lname, launcher in launchers:
        h = KernelHandle(cl.Kernel(eng.build(packed.text), "wide"))

        def enqueue_only(n, launcher=launcher, h=h):
            launcher.set_args(h, [a, b], [0, 0, 1024, 3] + [0] * 18)
            launch = launcher.launch
            for i in range(n):
                launch(h, ln)
                if i % 64 == 63:
                    q.flush()

        def set_and_enqueue(n, launcher=launcher, h=h):
            launch, set_args = launcher.launch, launcher.set_args
            bufs, rest = [a, b], [0] * 18
            for i in range(n):
                set_args(h, bufs, [0, 0, 1024, i & 7] + rest)
                launch(h, ln)
                if i % 64 == 63:
                    q.flush()
        rows.append((f"{lname} enqueue, 2 buffers + 22-int struct", enqueue_only))
        rows.append((f"{lname} one int changed + enqueue, same", set_and_enqueue))
    print(f"\n{'per launch (median of ' + str(args.reps) + ')':<64} {'host us':>9} {'drain us':>9} {'device us':>10}")

    def show(name, fn):
        fn(200)
        h_, d_ = timed(fn, args.n, args.reps, q)
        print(f"{name:<64} {1e6 * h_:>9.2f} {1e6 * d_:>9.2f} {1e6 * (h_ + d_):>10.2f}")
    for name, fn in rows:
        show(name, fn)
    # the direct launches again while many more buffers are alive (the buffers of requests
    # nothing freed: NVIDIA's driver gets slower per enqueue)
    live = [cl.Buffer(eng.context, cl.mem_flags.READ_WRITE, 4096) for _ in range(args.live)]
    for name, fn in rows[-2:]:
        show(f"{name} (+{len(live)} buffers)", fn)

if __name__ == "__main__":
    main()
