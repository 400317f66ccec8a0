"""The large aligned float32 GEMM kernels alone, timed with profiling events on one device
(no host copies between runs, unlike bench_runtime's MatMul model), beside cuBLAS through
torch (TF32 off) in the same run where CUDA is there. Every output is checked on sampled
entries against float64 dot products.

    python benchmarks/bench_gemm_large.py --device GPU --n 4096

Rows: ``gemm_aligned`` (register-staged double buffer, every GPU), ``gemm_pipelined`` (the
cp.async stage ring, NVIDIA compute capability 8.0+, what the runtime picks there), the same
with A starting at an odd offset (its plain-copy path), and ``cuBLAS``. Prints the median
kernel time over ``--reps`` runs and TFLOP/s.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netpass.runtime import kernels
from netpass.runtime.device import Engine, resolve_device_name, select_device


def _cublas(a: np.ndarray, b: np.ndarray, reps: int) -> tuple[float, np.ndarray] | None:
    """Median cuBLAS fp32 time (CUDA events) and the product, or None without CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    times = []
    for _ in range(reps + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        c = ta @ tb
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return float(np.median(times[1:])), c.cpu().numpy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="AUTO")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    eng = Engine.get(select_device(resolve_device_name(args.device)), profiling=True)
    cl, q = eng.cl, eng.queue
    n = args.n
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    mf = cl.mem_flags
    ab = cl.Buffer(eng.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
    # A at element 1 of a second buffer: the odd offset takes the pipelined kernel's plain path
    ab1 = cl.Buffer(eng.context, mf.READ_ONLY | mf.COPY_HOST_PTR,
                    hostbuf=np.concatenate([np.zeros(1, np.float32), a.ravel()]))
    bb = cl.Buffer(eng.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
    cb = cl.Buffer(eng.context, mf.READ_WRITE, a.nbytes)
    rows, cols = rng.integers(0, n, 64), rng.integers(0, n, 64)
    want = np.einsum("ij,ji->i", a[rows].astype(np.float64), b[:, cols].astype(np.float64))

    def err(c: np.ndarray) -> float:
        return float(np.max(np.abs(c[rows, cols] - want) / (np.abs(want) + np.sqrt(n))))

    def row(name: str, t: float, c: np.ndarray) -> None:
        print(f"{name:<26} {1e3 * t:>8.3f} {2 * n ** 3 / t / 1e12:>9.2f} {err(c):>12.2e}", flush=True)

    print(f"{eng.describe()}: fp32 GEMM {n}^3, median of {args.reps}; cp.async: {eng.cp_async}")
    print(f"{'kernel':<26} {'ms':>8} {'TFLOP/s':>9} {'max rel err':>12}")
    candidates = [("gemm_aligned", kernels.gemm_aligned([], 0, [], 0), 0)]
    if eng.cp_async:
        src = kernels.gemm_pipelined([], 0, [], 0, True)
        candidates += [("gemm_pipelined", src, 0), ("gemm_pipelined, A offset 1", src, 1)]
    for name, src, aoff in candidates:
        kern = cl.Kernel(eng.build(src.text), src.name)
        # buffers, then the packed ints: offsets, M, N, K, B1, A and B strides
        kern.set_args(ab1 if aoff else ab, bb, cb, np.array([aoff, 0, 0, n, n, n, 1, 0, 0, n, 1, 0, 0, n, 1], np.int32))
        times = []
        for _ in range(args.reps + 1):
            ev = cl.enqueue_nd_range_kernel(q, kern, (n // 8, n // 8, 1), (16, 16, 1))
            ev.wait()
            times.append((ev.profile.end - ev.profile.start) * 1e-9)
        c = np.empty_like(a)
        cl.enqueue_copy(q, c, cb)
        row(name, float(np.median(times[1:])), c)
    peer = _cublas(a, b, args.reps)
    if peer is not None:
        row("cuBLAS fp32 (torch)", *peer)


if __name__ == "__main__":
    main()
