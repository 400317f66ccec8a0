"""Probe: a grid-wide barrier inside one OpenCL kernel (all work-groups resident, a counter and
a generation word in global memory), its cost per barrier and whether data written by one
work-group before a barrier is seen by another after it (with plain loads).

    python benchmarks/probe_grid_barrier.py [--phases 1,64,256] [--groups-per-cu 1,2]

Each phase p reads the previous phase's vector at a permuted index (another work-group's
element) and writes ``x * 1.0001 + p``; the host checks the final vector against numpy. The
time per barrier is the slope of the kernel time over the phase count (profiling events). On
NVIDIA the PTX the compiler wrote is scanned for the fence and atomic instructions.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl

SRC = r"""
#ifdef NV
#define FENCE() asm volatile("fence.acq_rel.gpu;" ::: "memory")
#else
#define FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#endif
void grid_sync(volatile __global int* bar, const int ngroups) {
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  if (get_local_id(0) == 0) {
    const int gen = atomic_add(&bar[1], 0);
    FENCE();
    if (atomic_inc(&bar[0]) == ngroups - 1) {
      atomic_xchg(&bar[0], 0);
      FENCE();
      atomic_inc(&bar[1]);
    } else {
      while (atomic_add(&bar[1], 0) == gen) {}
    }
    FENCE();
  }
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
}

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void persist(__global float* buf, volatile __global int* bar, const int phases, const int n,
             const int stride)
{
  const int ng = get_num_groups(0);
  for (int p = 0; p < phases; ++p) {
    __global const float* src = buf + (p & 1) * n;
    __global float* dst = buf + ((p + 1) & 1) * n;
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) {
      const int j = (int)(((long)i * stride + 7) % n);
      dst[i] = src[j] * 1.0001f + (float)p;
    }
    grid_sync(bar, ng);
  }
}

__kernel void one_phase(__global float* buf, const int p, const int n, const int stride)
{
  __global const float* src = buf + (p & 1) * n;
  __global float* dst = buf + ((p + 1) & 1) * n;
  const int i = get_global_id(0);
  if (i < n) {
    const int j = (int)(((long)i * stride + 7) % n);
    dst[i] = src[j] * 1.0001f + (float)p;
  }
}
"""


def reference(x: np.ndarray, phases: int, stride: int) -> np.ndarray:
    n = x.size
    j = ((np.arange(n, dtype=np.int64) * stride + 7) % n)
    for p in range(phases):
        x = (x[j] * np.float32(1.0001) + np.float32(p)).astype(np.float32)
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phases", default="1,16,64,256")
    ap.add_argument("--groups-per-cu", default="1,2")
    ap.add_argument("--n", type=int, default=1 << 16)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    ctx = cl.create_some_context(interactive=False)
    dev = ctx.devices[0]
    nv = "NVIDIA" in dev.vendor
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    prg = cl.Program(ctx, SRC).build(options=["-DNV"] if nv else [])
    result: dict = {"device": dev.name, "compute_units": dev.max_compute_units, "runs": []}
    if nv:
        ptx = prg.get_info(cl.program_info.BINARIES)[0].decode(errors="replace")
        words = ["fence", "membar", "atom", "ld.volatile", "ld.global.nc", "bar.sync"]
        result["ptx_counts"] = {w: ptx.count(w) for w in words}
        print("PTX:", result["ptx_counts"])
    n, stride = args.n, 40503
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal(n).astype(np.float32)
    mf = cl.mem_flags
    buf = cl.Buffer(ctx, mf.READ_WRITE, 8 * n)
    bar = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.zeros(2, np.int32))
    k = prg.persist
    for gpc in [int(v) for v in args.groups_per_cu.split(",")]:
        groups = dev.max_compute_units * gpc
        for phases in [int(v) for v in args.phases.split(",")]:
            times, ok = [], True
            for r in range(args.reps):
                cl.enqueue_copy(queue, buf, np.concatenate([x0, x0]))
                ev = k(queue, (groups * 256,), (256,), buf, bar, np.int32(phases), np.int32(n),
                       np.int32(stride))
                ev.wait()
                times.append((ev.profile.end - ev.profile.start) * 1e-3)
                if r == 0:
                    out = np.empty(2 * n, np.float32)
                    cl.enqueue_copy(queue, out, buf)
                    got = out[(phases & 1) * n:(phases & 1) * n + n]
                    want = reference(x0, phases, stride)
                    ok = bool(np.allclose(got, want, rtol=1e-5, atol=1e-4))
            med = statistics.median(times)
            result["runs"].append({"groups": groups, "phases": phases, "us": med, "ok": ok})
            print(f"groups {groups:4d} phases {phases:4d}: {med:9.1f} us  correct={ok}")
    # the same work as separate launches (one kernel per phase) for comparison
    phases = 64
    ph = prg.one_phase
    for _ in range(3):
        cl.enqueue_copy(queue, buf, np.concatenate([x0, x0]))
        queue.finish()
        evs = [ph(queue, (-(-n // 256) * 256,), (256,), buf, np.int32(p), np.int32(n),
                  np.int32(stride)) for p in range(phases)]
        evs[-1].wait()
        span = (evs[-1].profile.end - evs[0].profile.start) * 1e-3
    out = np.empty(2 * n, np.float32)
    cl.enqueue_copy(queue, out, buf)
    ok = bool(np.allclose(out[:n], reference(x0, phases, stride), rtol=1e-5, atol=1e-4))
    result["separate_launches_64_us"] = span
    print(f"64 separate launches: {span:.1f} us (first start to last end) correct={ok}")
    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir, "probe_grid_barrier.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    sys.exit(main())
