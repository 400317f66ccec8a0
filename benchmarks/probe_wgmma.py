"""Probe: can NVIDIA's OpenCL reach Hopper's own instructions through a patched PTX binary?

NVIDIA's OpenCL C compiler emits PTX for ``sm_90``, so ``wgmma`` (``sm_90a`` only) fails in
inline assembly. A program can also be made from PTX text (``clCreateProgramWithBinary``): this
probe compiles OpenCL C whose Hopper instructions are written as PTX comments (``//@@``),
reads the PTX back, uncomments them, retargets it to ``sm_90a`` and builds it again. Each test
prints what happened; none stops the others. Also: dynamic local memory past 48 KB through a
``__local`` argument, and ``cp.async.bulk`` (sm_90) with an ``mbarrier``.

Run on the GPU: ``python benchmarks/probe_wgmma.py [--json OUT.json]``."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import pyopencl as cl

from netpass.runtime.kernels.wgmma import MARK, retarget

SHARED_ADDR = "(uint)(size_t)"


def ptx_of(ctx: cl.Context, src: str, options: list[str] | None = None) -> str:
    prg = cl.Program(ctx, src).build(options=options or [])
    return prg.get_info(cl.program_info.BINARIES)[0].decode()


def from_ptx(ctx: cl.Context, ptx: str) -> cl.Program:
    prg = cl.Program(ctx, ctx.devices, [ptx.encode() + b"\0"])
    return prg.build()


COPY_SRC = r"""
__kernel void twice(__global const float* x, __global float* y) {
  const int i = get_global_id(0);
  y[i] = 2.0f * x[i];
}
"""

# one warpgroup: D[64, 8] = A[64, 8] B[8, 8], A and B K-major in local memory, no swizzle
WGMMA_SRC = r"""
inline ulong desc(uint addr, uint lbo, uint sbo) {
  return (ulong)((addr & 0x3FFFFu) >> 4) | ((ulong)(lbo >> 4) << 16) | ((ulong)(sbo >> 4) << 32);
}

__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void wg_m64n8k8(__global const float* a, __global const float* b, __global float* d,
                const int ak, const int am, const int bk, const int bn,
                const uint alb, const uint asb, const uint blb, const uint bsb) {
  /* room for every layout tried, read with either meaning of the descriptor's offsets */
  __local float sa[2048] __attribute__((aligned(128)));
  __local float sb[512] __attribute__((aligned(128)));
  const int t = get_local_id(0);
  for (int e = t; e < 2048; e += 128) sa[e] = 0.0f;
  for (int e = t; e < 512; e += 128) sb[e] = 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  /* core matrix (i, j): rows 8i..8i+7, k 4j..4j+3, 128 bytes, at i * am + j * ak */
  for (int e = t; e < 64 * 8; e += 128) {
    const int r = e / 8, k = e % 8;
    const int off = (r / 8) * am + (k / 4) * ak + (r % 8) * 16 + (k % 4) * 4;
    sa[off / 4] = a[r * 8 + k];
  }
  if (t < 64) {
    const int n = t / 8, k = t % 8;  /* B given as [N, K] (K-major) */
    const int off = (n / 8) * bn + (k / 4) * bk + (n % 8) * 16 + (k % 4) * 4;
    sb[off / 4] = b[n * 8 + k];
  }
  asm volatile("//@@ fence.proxy.async.shared::cta;" ::: "memory");
  barrier(CLK_LOCAL_MEM_FENCE);
  const ulong da = desc(SHARED_ADDR sa, alb, asb), db = desc(SHARED_ADDR sb, blb, bsb);
  const int w = t / 32, l = t % 32;
  float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
  asm volatile("//@@ wgmma.fence.sync.aligned;" ::: "memory");
#if VARIANT == 1
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
               "//@@ wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(da), "l"(db), "r"(0));
#elif VARIANT == 2
  /* A's fragment as m16n8k8's, warp w on rows 16w.. */
  const int gr = 16 * w + l / 4, gk = l % 4;
  const uint a0 = as_uint(a[gr * 8 + gk]), a1 = as_uint(a[(gr + 8) * 8 + gk]);
  const uint a2 = as_uint(a[gr * 8 + gk + 4]), a3 = as_uint(a[(gr + 8) * 8 + gk + 4]);
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
               "//@@ wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db), "r"(0));
#endif
  asm volatile("//@@ wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("//@@ wgmma.wait_group.sync.aligned 0;" ::: "memory");
  /* accumulator layout of m64nN: warp w rows 16w.., lane l row l/4 (+8), columns 2(l%4)+{0,1} */
  const int r0 = 16 * w + l / 4, c0 = 2 * (l % 4);
  d[r0 * 8 + c0] = d0; d[r0 * 8 + c0 + 1] = d1;
  d[(r0 + 8) * 8 + c0] = d2; d[(r0 + 8) * 8 + c0 + 1] = d3;
}
""".replace("SHARED_ADDR ", SHARED_ADDR)


def peak_src(n: int) -> str:
    """Two warpgroups, each ``iters`` x 8 chained m64nNk8 products from local memory."""
    regs = n // 2
    outs = ", ".join(f'"+f"(c[{i}])' for i in range(regs))
    dlist = ", ".join(f"%{i}" for i in range(regs))
    return (r"""
inline ulong desc(uint addr, uint lbo, uint sbo) {
  return (ulong)((addr & 0x3FFFFu) >> 4) | ((ulong)(lbo >> 4) << 16) | ((ulong)(sbo >> 4) << 32);
}
__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void wg_peak(__global float* out, const int iters) {
  __local float sa[2 * 64 * 8] __attribute__((aligned(128)));
  __local float sb[NN * 8] __attribute__((aligned(128)));
  const int t = get_local_id(0), g = t / 128;
  for (int e = t; e < 2 * 64 * 8; e += 256) sa[e] = (float)(e % 7) * 0.125f;
  for (int e = t; e < NN * 8; e += 256) sb[e] = (float)(e % 5) * 0.25f;
  asm volatile("//@@ fence.proxy.async.shared::cta;" ::: "memory");
  barrier(CLK_LOCAL_MEM_FENCE);
  const ulong da = desc(SHARED_ADDR (sa + g * 512), 128, 256), db = desc(SHARED_ADDR sb, 128, 256);
  float c[REGS];
  for (int i = 0; i < REGS; ++i) c[i] = 0.0f;
  for (int it = 0; it < iters; ++it) {
    asm volatile("//@@ wgmma.fence.sync.aligned;" ::: "memory");
    for (int s = 0; s < 8; ++s)
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %ONE, 0;\n"
                   "//@@ wgmma.mma_async.sync.aligned.m64nNNk8.f32.tf32.tf32 "
                   "{DLIST}, %AD, %BD, p, 1, 1;\n}\n" : OUTS : "l"(da), "l"(db), "r"(1));
    asm volatile("//@@ wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("//@@ wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  float s = 0.0f;
  for (int i = 0; i < REGS; ++i) s += c[i];
  out[get_global_id(0)] = s;
}
""".replace("SHARED_ADDR ", SHARED_ADDR).replace("REGS", str(regs)).replace("NN", str(n))
            .replace("DLIST", dlist).replace("OUTS", outs)
            .replace("%AD", f"%{regs}").replace("%BD", f"%{regs + 1}")
            .replace("%ONE", f"%{regs + 2}"))


DYN_LOCAL_SRC = r"""
__kernel void dyn(__global float* out, __local float* buf, const int n) {
  const int t = get_local_id(0), ls = get_local_size(0);
  for (int i = t; i < n; i += ls) buf[i] = (float)i;
  barrier(CLK_LOCAL_MEM_FENCE);
  float s = 0.0f;
  for (int i = t; i < n; i += ls) s += buf[n - 1 - i];
  out[get_global_id(0)] = s;
}
"""

BULK_SRC = r"""
__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void bulk(__global const float* x, __global float* y) {
  __local float buf[1024] __attribute__((aligned(128)));
  __local ulong mbar;
  const int t = get_local_id(0);
  const uint ba = SHARED_ADDR buf, ma = SHARED_ADDR &mbar;
  if (t == 0) {
    asm volatile("PFX mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(ma) : "memory");
    asm volatile("PFX fence.proxy.async.shared::cta;" ::: "memory");
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (t == 0) {
    asm volatile("PFX mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(ma), "r"(4096) : "memory");
    asm volatile("PFX cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1], %2, [%3];" :: "r"(ba), "l"(x + get_group_id(0) * 1024), "r"(4096),
                 "r"(ma) : "memory");
  }
  asm volatile("{\n.reg .pred P1;\nBULK_WAIT:\n"
               "PFX mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], 0;\n"
               "@!P1 bra BULK_WAIT;\n}\n" :: "r"(ma) : "memory");
  for (int i = t; i < 1024; i += 128) y[get_group_id(0) * 1024 + i] = buf[i] + 1.0f;
}
""".replace("SHARED_ADDR ", SHARED_ADDR)


def tf32(x: np.ndarray) -> np.ndarray:
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def run_step(name: str, fn, result: dict) -> None:
    try:
        value = fn()
        result[name] = value
        print(f"{name}: {value}")
    except Exception as exc:  # a probe: every failure is a finding, printed in full
        msg = f"{type(exc).__name__}: {exc}"
        result[name] = {"error": msg[:4000]}
        print(f"{name}: FAILED {msg[:4000]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="")
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--only", default="")
    ap.add_argument("--filter", default="", help="run the steps whose names contain this")
    ap.add_argument("--dump", default="", help="folder for the patched PTX")
    args = ap.parse_args()

    def dump(name: str, text: str) -> None:
        if args.dump:
            with open(os.path.join(args.dump, name), "w") as f:
                f.write(text)

    ctx = cl.create_some_context(interactive=False)
    dev = ctx.devices[0]
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    result: dict = {"device": dev.name, "driver": dev.driver_version,
                    "local_mem_size": dev.local_mem_size}
    if not args.only:
        print(result)
    mf = cl.mem_flags
    rng = np.random.default_rng(0)

    def header() -> dict:
        ptx = ptx_of(ctx, COPY_SRC)
        heads = [ln for ln in ptx.splitlines() if ln.startswith((".version", ".target",
                                                                 ".address_size"))]
        return {"lines": heads}

    def roundtrip(target: str) -> dict:
        ptx = retarget(ptx_of(ctx, COPY_SRC), target)
        prg = from_ptx(ctx, ptx)
        x = rng.standard_normal(256).astype(np.float32)
        xb = cl.Buffer(ctx, mf.COPY_HOST_PTR, hostbuf=x)
        yb = cl.Buffer(ctx, mf.READ_WRITE, x.nbytes)
        prg.twice(queue, (256,), None, xb, yb)
        y = np.empty_like(x)
        cl.enqueue_copy(queue, y, yb)
        return {"equal": bool(np.array_equal(y, 2 * x))}

    def wgmma_small(variant: int, layout: int, lead_is_k: bool) -> float:
        ptx = retarget(ptx_of(ctx, WGMMA_SRC, [f"-DVARIANT={variant}"]))
        prg = from_ptx(ctx, ptx)
        a = rng.standard_normal((64, 8)).astype(np.float32)
        b = rng.standard_normal((8, 8)).astype(np.float32)  # [N, K]
        want = tf32(a).astype(np.float64) @ tf32(b).astype(np.float64).T
        ab = cl.Buffer(ctx, mf.COPY_HOST_PTR, hostbuf=a)
        bb = cl.Buffer(ctx, mf.COPY_HOST_PTR, hostbuf=b)
        db = cl.Buffer(ctx, mf.READ_WRITE, 64 * 8 * 4)
        # layouts (A's k and m strides, B's k and n strides), read with the descriptor's
        # leading offset as the k stride or as the m / n stride
        ak, am, bk, bn = ((128, 256, 128, 256), (1024, 128, 128, 128))[layout]
        al, as_ = (ak, am) if lead_is_k else (am, ak)
        bl, bs = (bk, bn) if lead_is_k else (bn, bk)
        prg.wg_m64n8k8(queue, (128,), (128,), ab, bb, db,
                       *(np.int32(v) for v in (ak, am, bk, bn)),
                       *(np.uint32(v) for v in (al, as_, bl, bs)))
        d = np.empty((64, 8), np.float32)
        cl.enqueue_copy(queue, d, db)
        return float(np.abs(d - want).max() / np.abs(want).max())

    def wgmma_peak(n: int) -> dict:
        ptx = retarget(ptx_of(ctx, peak_src(n)))
        dump(f"wgmma_peak_n{n}.ptx", ptx)
        prg = from_ptx(ctx, ptx)
        groups = dev.max_compute_units * 2
        ob = cl.Buffer(ctx, mf.READ_WRITE, groups * 256 * 4)
        times = []
        for _ in range(5):
            ev = prg.wg_peak(queue, (groups * 256,), (256,), ob, np.int32(args.iters))
            ev.wait()
            times.append((ev.profile.end - ev.profile.start) * 1e-9)
        sec = sorted(times)[2]
        flops = 2.0 * 64 * n * 8 * 8 * args.iters * 2 * groups
        return {"ms": sec * 1e3, "tflops": flops / sec / 1e12}

    def dyn_local(kb: int) -> dict:
        prg = cl.Program(ctx, DYN_LOCAL_SRC).build()
        n = kb * 256
        ob = cl.Buffer(ctx, mf.READ_WRITE, 256 * 4)
        prg.dyn(queue, (256,), (256,), ob, cl.LocalMemory(kb * 1024), np.int32(n)).wait()
        o = np.empty(256, np.float32)
        cl.enqueue_copy(queue, o, ob)
        want = np.array([sum(float(n - 1 - i) for i in range(t, n, 256)) for t in range(256)])
        return {"ok": bool(np.allclose(o, want, rtol=1e-5))}

    def bulk(patch: bool) -> dict:
        src = BULK_SRC.replace("PFX", MARK if patch else "")
        prg = from_ptx(ctx, retarget(ptx_of(ctx, src))) if patch else cl.Program(ctx, src).build()
        x = rng.standard_normal(4 * 1024).astype(np.float32)
        xb = cl.Buffer(ctx, mf.COPY_HOST_PTR, hostbuf=x)
        yb = cl.Buffer(ctx, mf.READ_WRITE, x.nbytes)
        prg.bulk(queue, (4 * 128,), (128,), xb, yb)
        y = np.empty_like(x)
        cl.enqueue_copy(queue, y, yb)
        return {"equal": bool(np.array_equal(y, x + 1))}

    steps = {"ptx_header": header,
             "roundtrip_sm_90": lambda: roundtrip("sm_90"),
             "roundtrip_sm_90a": lambda: roundtrip("sm_90a")}
    for v in (0, 1, 2):
        for layout in (0, 1):
            for lead in (True, False):
                steps[f"wgmma_m64n8k8_v{v}_layout{layout}_lead_{'k' if lead else 'mn'}"] = \
                    lambda v=v, layout=layout, lead=lead: wgmma_small(v, layout, lead)
    for n in (64, 128, 256):
        steps[f"wgmma_peak_n{n}"] = lambda n=n: wgmma_peak(n)
    for kb in (48, 64, 100, 160, 227):
        steps[f"dyn_local_{kb}kb"] = lambda kb=kb: dyn_local(kb)
    steps["bulk_copy_plain"] = lambda: bulk(False)
    steps["bulk_copy_patched"] = lambda: bulk(True)
    if args.only:
        run_step(args.only, steps[args.only], result)
        print("RESULT", json.dumps({args.only: result[args.only]}))
        return
    # a failed kernel leaves the context unusable: each step runs in a process of its own
    for name in [n for n in steps if args.filter in n]:
        proc = subprocess.run([sys.executable, __file__, "--only", name] +
                              (["--dump", args.dump] if args.dump else []),
                              capture_output=True, text=True, timeout=120)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        result.update(json.loads(lines[-1][7:]) if lines else
                      {name: {"error": (proc.stdout + proc.stderr)[-3000:]}})
        print(name, "->", result[name], flush=True)
    result["when"] = time.strftime("%Y-%m-%d %H:%M:%S")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
