"""The decode GEMV with its weights read from HBM, as a decode step reads them: kernel time per
launch on GPT-2 small's decode shapes, without profiling events.

    python benchmarks/bench_gemv_hbm.py [--device GPU] [--reps 48]

``bench_gemv.py`` times one weights buffer again and again, which the H200's 50 MB L2 holds;
a decode step reads every layer's weights once, from HBM. Here each launch reads another copy
of the weights (copies adding up to more than 160 MB), the launches are queued behind a spin
kernel (a loop on the GPU's ``%globaltimer``) so that they run back to back at the device's
pace, and the time per launch is (wall - the spin's own wall) / launches: a launch's whole
cost on the device, its gap to the next included.

Per shape: the runtime's kernel (``kernels.decode_gemv.gemv`` at the width ``gemv_width`` picks
on this device; the QKV, MLP-up and LM-head GEMVs with GPT-2's LayerNorm folded in, as the
runtime runs them) and a reference kernel with every load of an item issued at once and A
normalized ahead (what the weights alone cost). Errors are against numpy (largest over the
largest output). Writes ``bench_gemv_hbm.json`` to ``$OUT`` when set.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netpass.runtime.device import Engine, select_device
from netpass.runtime.kernels import decode_gemv

SPIN = r"""
__kernel void spin(__global ulong* out, const ulong ns) {
#ifdef NV
  ulong t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  t = t0;
  while (t - t0 < ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  out[0] = t;
#else
  ulong x = 0;
  for (ulong i = 0; i < ns / 1000; ++i) x += i;
  out[0] = x;
#endif
}"""
REFERENCE = r"""
#define K4 (K / 4)
#define COLS (256 / TPR)
#define L ((K4 + TPR - 1) / TPR)
__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void reference(__global const float4* W, __global const float4* x, __global float* y,
               const int N) {
  const int lid = get_local_id(0), c = lid / TPR, lane = lid - c * TPR;
  const int n = get_group_id(0) * COLS + c;
  __local float red[256];
  float4 w[L];
  __global const float4* wr = W + (size_t)min(n, N - 1) * K4;
  #pragma unroll
  for (int j = 0; j < L; ++j) w[j] = lane + j * TPR < K4 ? wr[lane + j * TPR] : (float4)(0.0f);
  float acc = 0.0f;
  #pragma unroll
  for (int j = 0; j < L; ++j) if (lane + j * TPR < K4) acc += dot(w[j], x[lane + j * TPR]);
  red[lid] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = TPR / 2; s > 0; s >>= 1) {
    if (lane < s) red[lid] += red[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lane == 0 && n < N) y[n] = red[lid];
}"""
# (name, K, N, a LayerNorm folded in)
SHAPES = [("qkv", 768, 2304, True), ("attn_out", 768, 768, False), ("mlp_up", 768, 3072, True),
          ("mlp_down", 3072, 768, False), ("lm_head", 768, 50257, True)]
NORM = (1e-5, True, True, True, True, False)  # (kernels.gemm.norm_prologue's parameters)
COPIES_BYTES = 160e6
SPIN_NS = 3_000_000  # (3 ms: longer than the host takes to enqueue what is timed behind it)


def spin_kernel(cl, ctx, device) -> tuple:
    """(the spin kernel holding a queue for SPIN_NS, its output buffer: kept alive by the
    caller, as the kernel holds no reference) on ``device``'s context ``ctx``."""
    nvidia = "NVIDIA" in device.platform.name
    spin = cl.Kernel(cl.Program(ctx, SPIN).build(options=["-DNV"] if nvidia else []), "spin")
    out = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
    spin.set_args(out, np.uint64(SPIN_NS))
    return spin, out


def behind_spin(cl, q, spin, work, reps: int) -> float:
    """Median wall of ``spin`` (a kernel holding the in-order queue ``q``) then ``work()``
    enqueued behind it, until the queue has run both."""
    walls = []
    for _ in range(reps):
        q.finish()
        t = time.perf_counter()
        cl.enqueue_nd_range_kernel(q, spin, (1,), (1,))
        work()
        q.finish()
        walls.append(time.perf_counter() - t)
    return statistics.median(walls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="GPU")
    ap.add_argument("--reps", type=int, default=48, help="launches per timing")
    ap.add_argument("--widths", default="", help="comma-separated items per column to time the "
                    "runtime's kernel at too (a sweep beside gemv_width's choice)")
    args = ap.parse_args()
    engine = Engine.get(select_device(args.device))
    cl, ctx = engine.cl, engine.context
    q = engine.new_queue()
    gpu = engine.is_gpu
    spin, _spun = spin_kernel(cl, ctx, engine.device)

    spin_s = behind_spin(cl, q, spin, lambda: None, 9)
    rng = np.random.default_rng(0)
    mf = cl.mem_flags
    rows = []
    print(f"{engine.device.name.strip()}: weights from HBM, {args.reps} launches behind a spin")
    for name, k, n, norm in SHAPES:
        w = (rng.standard_normal((n, k)) * 0.02).astype(np.float32)
        x = (rng.standard_normal(k) + 0.5).astype(np.float32)
        g = (1 + 0.1 * rng.standard_normal(k)).astype(np.float32)
        b = (0.1 * rng.standard_normal(k)).astype(np.float32)
        xn = ((x - x.mean()) / np.sqrt(x.var() + 1e-5) * g + b).astype(np.float32) if norm else x
        want = w.astype(np.float64) @ xn
        copies = min(64, max(2, int(np.ceil(COPIES_BYTES / w.nbytes))))
        wbufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=w) for _ in range(copies)]

        def const(a):
            return cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
        xb, xnb, gb, bb = const(x), const(xn), const(g), const(b)
        yb = cl.Buffer(ctx, mf.READ_WRITE, n * 4)
        tpr = decode_gemv.gemv_width(1, k, 1, n, gpu, norm)
        ints = np.array([0, 0, 0] + ([0, 0] if norm else []) + [1, n, k, 1, 0, 0, k, 1, 0, 0, 1, k],
                        np.int32)  # (gemm_args' ints, packed: kernels.pack_scalars)

        def runtime_at(width):
            src = decode_gemv.gemv([], 0, [], 0, width, NORM if norm else None,
                                   decode_gemv.gemv_run(k, width, gpu), 1,
                                   decode_gemv.gemv_staged(1, k) if norm else 0)
            prog = cl.Program(ctx, src.text).build()

            def make(wb):
                kern = cl.Kernel(prog, src.name)
                for i, buf in enumerate([xb, wb, yb] + ([gb, bb] if norm else [])):
                    kern.set_arg(i, buf)
                kern.set_arg(5 if norm else 3, ints)
                return kern
            return make
        ref_prog = cl.Program(ctx, REFERENCE).build(options=[f"-DK={k}", "-DTPR=64"])

        def reference_kernel(wb):
            kern = cl.Kernel(ref_prog, "reference")
            kern.set_args(wb, xnb, yb, np.int32(n))
            return kern
        row = {"shape": name, "K": k, "N": n, "MB": w.nbytes / 1e6, "norm": norm, "tpr": tpr}
        variants = [("runtime", runtime_at(tpr), tpr), ("reference", reference_kernel, 64)]
        variants += [(f"runtime_tpr{t}", runtime_at(t), t)
                     for t in map(int, filter(None, args.widths.split(","))) if t != tpr]
        for label, make, width in variants:
            kernels = [make(wb) for wb in wbufs]
            gws = (-(-n * width // 256) * 256,)
            cl.enqueue_nd_range_kernel(q, kernels[0], gws, (256,))
            got = np.empty(n, np.float32)
            cl.enqueue_copy(q, got, yb)
            q.finish()

            def launches(kernels=kernels, gws=gws):
                for i in range(args.reps):
                    cl.enqueue_nd_range_kernel(q, kernels[i % copies], gws, (256,))
            us = 1e6 * (behind_spin(cl, q, spin, launches, 7) - spin_s) / args.reps
            row[label] = {"us": us, "tb_per_s": w.nbytes / us / 1e6,
                          "err": float(np.abs(got - want).max() / np.abs(want).max())}
        rows.append(row)
        r, f = row["runtime"], row["reference"]
        print(f"  {name:<9} K={k:<5} N={n:<6} {row['MB']:6.1f} MB  runtime (TPR {tpr}"
              f"{', norm' if norm else ''}) {r['us']:7.2f} us {r['tb_per_s']:5.2f} TB/s err "
              f"{r['err']:.0e} | reference {f['us']:7.2f} us {f['tb_per_s']:5.2f} TB/s"
              + "".join(f" | TPR {label[11:]} {row[label]['us']:7.2f} us err "
                        f"{row[label]['err']:.0e}" for label, _, _ in variants[2:]))
    out = os.environ.get("OUT")
    if out:
        (Path(out) / "bench_gemv_hbm.json").write_text(json.dumps(
            {"device": engine.device.name.strip(), "reps": args.reps, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
