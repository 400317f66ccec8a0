"""The large aligned float32 GEMM (kernels.gemm_aligned) alone, timed with profiling events
on one device (no host copies between runs, unlike bench_runtime's MatMul model); the output
is checked on sampled entries against float64 dot products. A harness for trying kernel
variants.

    python benchmarks/bench_gemm_large.py --device GPU --n 4096

Prints the median kernel time over ``--reps`` runs and TFLOP/s.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netpass.runtime import kernels as K  # noqa: E402
from netpass.runtime.device import Engine, resolve_device_name, select_device  # noqa: E402

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="AUTO")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    eng = Engine.get(select_device(resolve_device_name(args.device)), profiling=True)
    cl, q = eng.cl, eng.queue
    n = args.n
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    mf = cl.mem_flags
    ab = cl.Buffer(eng.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
    bb = cl.Buffer(eng.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
    cb = cl.Buffer(eng.context, mf.READ_WRITE, a.nbytes)
    rows, cols = rng.integers(0, n, 64), rng.integers(0, n, 64)
    want = np.einsum("ij,ji->i", a[rows].astype(np.float64), b[:, cols].astype(np.float64))
    print(f"{eng.describe()}: fp32 GEMM {n}^3, median of {args.reps}")
    print(f"{'kernel':<12} {'ms':>8} {'TFLOP/s':>9} {'max rel err':>12}")
    src = K.gemm_aligned([], 0, [], 0)
    kern = cl.Kernel(eng.build(src.text), src.name)
    # buffers, then the packed ints: offsets, M, N, K, B1, A and B strides
    kern.set_args(ab, bb, cb, np.array([0, 0, 0, n, n, n, 1, 0, 0, n, 1, 0, 0, n, 1], np.int32))
    times = []
    for _ in range(args.reps + 1):
        ev = cl.enqueue_nd_range_kernel(q, kern, (n // 8, n // 8, 1), (16, 16, 1))
        ev.wait()
        times.append((ev.profile.end - ev.profile.start) * 1e-9)
    t = float(np.median(times[1:]))
    c = np.empty_like(a)
    cl.enqueue_copy(q, c, cb)
    err = float(np.max(np.abs(c[rows, cols] - want) / (np.abs(want) + np.sqrt(n))))
    print(f"{'gemm_aligned':<12} {1e3 * t:>8.3f} {2 * n ** 3 / t / 1e12:>9.2f} {err:>12.2e}")


if __name__ == "__main__":
    main()
