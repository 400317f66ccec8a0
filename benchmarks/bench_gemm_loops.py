"""The tensor-core GEMM's two main loops (issue 18, round 6): the runtime's MatMul with TF32 on
the pipelined loop (``kernels.mma_plan.PIPE_WARP``) and on the slab loop (PIPE_WARP off), and
with 3xTF32, beside cuBLAS TF32 and fp32, on GPT-2's prefill shapes and 4096^3; then 4096^3 TF32
through ``gemm_mma`` alone with ptxas's registers and spills, the pipelined loop also without
its refills past the prologue and without its barrier (diagnostics: the timings are valid, the
products are not).

    python benchmarks/bench_gemm_loops.py      (NVIDIA GPU with inline PTX, torch with CUDA)

Kernel times are OpenCL profiling events (netpass; a split-K GEMM with its reduction) and CUDA
events (torch), the median of 10 after a warm-up. Writes ``exp_final.{txt,json}`` to ``$OUT``;
stops starting shapes ``DEADLINE`` seconds (default 185) after its start."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_kernels as bk  # noqa: E402

import netpass  # noqa: E402
from netpass.runtime.device import Engine, resolve_device_name, select_device  # noqa: E402
from netpass.runtime.kernels import mma, mma_plan  # noqa: E402

T0 = time.time()
DEADLINE = float(os.environ.get("DEADLINE", "185"))
REPS = 10
OUT = Path(os.environ.get("OUT", "/tmp/out"))
OUT.mkdir(parents=True, exist_ok=True)
LINES: list[str] = []
RES: dict = {}


def say(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    LINES.append(s)
    (OUT / "exp_final.txt").write_text("\n".join(LINES) + "\n")


def left():
    return DEADLINE - (time.time() - T0)


eng = Engine.get(select_device(resolve_device_name("GPU")), profiling=True)
torch = bk.torch_cuda()
cl = eng.cl
say("netpass from", netpass.__file__)
say(eng.describe(), "driver", eng.device.driver_version, "mma", eng.mma, "| torch", torch.__version__,
    torch.cuda.get_device_name(), "CUDA", torch.version.cuda)
RES["machine"] = {"device": eng.describe(), "driver": eng.device.driver_version, "torch": torch.__version__}

SHAPES = [(4096, 4096, 4096), (1024, 768, 2304), (1024, 768, 3072), (1024, 3072, 768), (1024, 768, 768),
          (4096, 768, 2304), (4096, 768, 3072), (4096, 3072, 768), (1024, 768, 50257), (4096, 768, 50257)]
say("runtime MatMul (B [K, N]): ms (cuBLAS / netpass), kernel, err; 'slab' = PIPE_WARP off (main's choice)")
for (m, kk, n) in SHAPES:
    if left() < 50:
        say("  (deadline) stop shapes")
        break
    prob = bk.Gemm(eng, m, n, kk)
    row: dict = {}
    for precision, tf in (("tf32", True), ("f32", False)):
        peer = bk.cublas(torch, m, n, kk, REPS, tf)
        row[f"cublas_{precision}"] = peer
        parts = [f"cuBLAS {peer*1e3:.3f} ({prob.flops(peer):.0f} TF/s)"]
        for label, warp in (("branch", (64, 64)), ("slab", None)):
            if precision == "f32" and warp is None:
                continue  # (3xTF32 runs the slab loop either way)
            mma_plan.PIPE_WARP, mma_plan._choices = warp, {}
            t, name = prob.runtime(precision, REPS)
            err = prob.err()
            row[f"{label}_{precision}"] = {"ms": t * 1e3, "name": name, "err": err}
            parts.append(f"{label} {t*1e3:.3f} ({prob.flops(t):.0f} TF/s, {peer/t:.2f}x, "
                         f"{name.replace('gemm_mma ', '')}, e{err:.0e})")
        say(f"  {m} {kk} {n} {precision}: " + " | ".join(parts))
    mma_plan.PIPE_WARP = (64, 64)
    RES[f"{m} {kk} {n}"] = row
    del prob

say("4096^3 TF32, gemm_mma alone, 128x128 tiles (ptxas: registers, spills)")
p = bk.Gemm(eng, 4096, 4096, 4096)
C = mma.MmaConfig
for label, cfg, edit in (
        ("pipe", C(128, 128, 64, 64, 16, 3, "pipe"), None),
        ("pipe, no refill past the prologue", C(128, 128, 64, 64, 16, 3, "pipe"),
         lambda s: s.replace("+ STAGES < nta)", "+ STAGES < 0)")),
        ("pipe, no refill, no barrier in the loop", C(128, 128, 64, 64, 16, 3, "pipe"),
         lambda s: s.replace("+ STAGES < nta)", "+ STAGES < 0)").replace(
             "CP_WAIT_N(1); barrier(CLK_LOCAL_MEM_FENCE);", "")),
        ("slab", C(128, 128, 64, 64, 16, 3), None)):
    if left() < 10:
        break
    src = mma.gemm_mma(cfg, True, 1, True, "cp_async", "rings", [], 0, [], 0)
    text = edit(src.text) if edit else src.text
    prg = cl.Program(eng.context, text).build(options=["-cl-mad-enable", "-cl-nv-verbose"])
    log = prg.get_build_info(eng.device, cl.program_build_info.LOG)
    info = " ".join(ln.strip().replace("ptxas info    : ", "") for ln in log.splitlines()
                    if "ptxas" in ln and ("Used" in ln or "spill" in ln))
    kern = cl.Kernel(prg, src.name)
    kern.set_args(p.ab, p.bb, p.cb, np.array(p.ints(True), np.int32))
    gws, lws = mma_plan.work_sizes(cfg, 4096, 4096, 1)
    ts = []
    for _ in range(REPS + 1):
        ev = cl.enqueue_nd_range_kernel(eng.queue, kern, gws, lws)
        ev.wait()
        ts.append((ev.profile.end - ev.profile.start) * 1e-9)
    t = float(np.median(ts[1:]))
    say(f"  {label:42s} {t*1e3:.3f} ms {p.flops(t):6.1f} TF/s | {info}")
    RES[f"4096 {label}"] = {"ms": t * 1e3, "tflops": p.flops(t), "ptxas": info}
(OUT / "exp_final.json").write_text(json.dumps(RES, indent=1))
say(f"[{time.time() - T0:.1f} s]")
