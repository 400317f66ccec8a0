"""Probe: does asking the next GEMVs' weights into L2 while a kernel runs shorten a decode step?

    python benchmarks/probe_l2_prefetch.py        (env LAYERS=12, KEYS=32; OUT=dir for JSON)

A GPT-2-small step's chain of launches, 12 layers x [QKV 768->2304, an attention-like kernel
(a chain of work-group reductions over KEYS keys a head), O 768->768, UP 768->3072, DOWN
3072->768], each layer's weights in buffers of their own (340 MB: read from HBM), queued behind
a spin kernel; device time = wall(spin + chain) - wall(spin) (as ``probe_device_step.py``).
Variants: each kernel issues PTX ``prefetch.global.L2`` (or ``::evict_last``) over the weights
of the launch 1, 2 or 3 ahead, before (or after) its own loads; and, as the ceiling, one
layer's weights for all 12 (L2-resident). On other devices the prefetch compiles to nothing.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pyopencl as cl
from bench_gemv_hbm import behind_spin, spin_kernel

SRC = r"""
#define WG 256
#ifdef NV
#define PF(p) asm volatile("prefetch.global.L2PFQ [%0];" :: "l"(p))
#else
#define PF(p)
#endif
inline void prefetch_lines(__global const float* pf, const int lines) {
  const int gsz = get_num_groups(0) * WG, gid = get_group_id(0) * WG + get_local_id(0);
  for (int i = gid; i < lines; i += gsz) PF(pf + (long)i * 32);
}
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void gemv(__global const float* A, __global const float* B, __global float* C,
          const int N, const int K, const int TPR, __global const float* pf, const int lines) {
  if (PF_FIRST) prefetch_lines(pf, lines);
  __local float red[WG];
  const int lid = get_local_id(0), cols = WG / TPR;
  const int c = lid / TPR, lane = lid - c * TPR;
  const int n = get_group_id(0) * cols + c;
  const int K4 = K >> 2;
  __global const float4* br4 = (__global const float4*)(B + min(n, N - 1) * K);
  __global const float4* a4 = (__global const float4*)A;
  float4 w[12];
  #pragma unroll
  for (int j = 0; j < 12; ++j) { const int q = lane + j * TPR; w[j] = q < K4 ? br4[q] : (float4)(0.0f); }
  float part = 0.0f;
  #pragma unroll
  for (int j = 0; j < 12; ++j) { const int q = lane + j * TPR; if (q < K4) part += dot(w[j], a4[q]); }
  if (!PF_FIRST) prefetch_lines(pf, lines);
  red[lid] = part;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = TPR / 2; s > 0; s >>= 1) {
    if (lane < s) red[lid] += red[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lane == 0 && n < N) C[n] = red[c * TPR];
}
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void attn(__global const float* kv, __global float* out, const int keys,
          __global const float* pf, const int lines) {
  prefetch_lines(pf, lines);
  __local float red[WG];
  const int lid = get_local_id(0), g = get_group_id(0);
  float s = 0.0f;
  for (int k = lid; k < keys * 64; k += WG) s += exp(kv[g * keys * 64 + k] * 0.01f);
  red[lid] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = WG / 2; h > 0; h >>= 1) { if (lid < h) red[lid] += red[lid + h]; barrier(CLK_LOCAL_MEM_FENCE); }
  for (int r = 0; r < 6; ++r) {  // (a chain of reductions, as the split attention's)
    red[lid] = red[lid] * 0.5f + 1.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = WG / 2; h > 0; h >>= 1) { if (lid < h) red[lid] += red[lid + h]; barrier(CLK_LOCAL_MEM_FENCE); }
  }
  if (lid == 0) out[g] = red[0];
}
"""


def main() -> None:
    plat = [p for p in cl.get_platforms() if p.get_devices()]
    dev = plat[0].get_devices()[0]
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx)
    nv = "NVIDIA" in dev.platform.name
    spin, _keep = spin_kernel(cl, ctx, dev)
    mf = cl.mem_flags
    rng = np.random.default_rng(0)
    layers = int(os.environ.get("LAYERS", "12"))
    shapes = {"qkv": (2304, 768), "o": (768, 768), "up": (3072, 768), "down": (768, 3072)}

    def buf(n):
        return cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR,
                         hostbuf=rng.standard_normal(n).astype(np.float32))
    ws = [{k: buf(a * b) for k, (a, b) in shapes.items()} for _ in range(layers)]
    x = buf(3072)
    y = cl.Buffer(ctx, mf.READ_WRITE, 4 * 4096)
    kv = buf(96 * 256 * 64)
    aout = cl.Buffer(ctx, mf.READ_WRITE, 4 * 96)
    dummy = buf(32)
    variants = {}
    for name, (qual, first) in {"plain": ("", 1), "L2": ("", 1), "L2_last": ("::evict_last", 1),
                                "L2_after": ("", 0)}.items():
        prg = cl.Program(ctx, SRC.replace("PFQ", qual)).build(
            options=[f"-DPF_FIRST={first}"] + (["-DNV"] if nv else []))
        variants[name] = prg
    results = {}

    def chain(prg, ahead: int, use: bool, same: bool):
        seq = []
        for li in range(layers):
            w = ws[0] if same else ws[li]
            seq += [("g", w["qkv"], 2304, 768), ("a",), ("g", w["o"], 768, 768),
                    ("g", w["up"], 3072, 768), ("g", w["down"], 768, 3072)]
        kernels = []
        for i, s in enumerate(seq):
            target = i + ahead
            pf, lines = dummy, 0
            if use and target < len(seq) and seq[target][0] == "g":
                pf, lines = seq[target][1], seq[target][2] * seq[target][3] // 32
            if s[0] == "g":
                k = cl.Kernel(prg, "gemv")
                tpr = 64 if s[3] >= 512 else 16
                k.set_args(x, s[1], y, np.int32(s[2]), np.int32(s[3]), np.int32(tpr), pf,
                           np.int32(lines))
                gws = -(-s[2] // (256 // tpr)) * 256
            else:
                k = cl.Kernel(prg, "attn")
                k.set_args(kv, aout, np.int32(int(os.environ.get("KEYS", "32"))), pf,
                           np.int32(lines))
                gws = 96 * 256
            kernels.append((k, gws))

        def run():
            for k, g in kernels:
                cl.enqueue_nd_range_kernel(q, k, (g,), (256,))
        return run

    spin_s = behind_spin(cl, q, spin, lambda: None, 9)
    plan = [("plain", "plain", 0, False, False), ("plain_L2resident", "plain", 0, False, True)]
    for v in ("L2", "L2_last", "L2_after"):
        for ahead in (1, 2, 3):
            plan.append((f"{v}_ahead{ahead}", v, ahead, True, False))
    for _ in range(3):
        for label, v, ahead, use, same in plan:
            run = chain(variants[v], ahead, use, same)
            behind_spin(cl, q, spin, run, 2)
            t = behind_spin(cl, q, spin, run, 15) - spin_s
            results.setdefault(label, []).append(t * 1e6)
    for label, ts in results.items():
        print(f"{label:24s} device us per chain: {' '.join(f'{t:8.1f}' for t in ts)}  "
              f"median {statistics.median(ts):8.1f}", flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out, "l2_prefetch.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"took {time.time() - t0:.1f} s")
