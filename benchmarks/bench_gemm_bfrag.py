"""The tensor-core GEMM's "bfrag" main loop (issue 18: B constant weights in mma.sync fragment
order, from global memory into registers; A alone through local memory) against the pipelined
loop and cuBLAS TF32, at 4096^3 and GPT-2's prefill shapes, one process:

- cuBLAS TF32 (torch, ``allow_tf32``);
- the runtime's own TF32 MatMul (``kinds.matmul``: its tile / split-K / loop choice);
- ``gemm_mma`` alone on 128x128 tiles of 64x64 warps: the pipelined loop ("pipe") and each
  bfrag variant (``VARIANTS``: K per stage, stages, B's prefetch distance in 8-wide steps,
  A's fragments read a step ahead or not), and bfrag on the narrow 128x96 tiles;
- 3xTF32 (float32 precision): the runtime's f32 MatMul against bfrag with split operands.

Each time is the median of ``REPS`` OpenCL profiling events after a warm-up (CUDA events for
torch); each kernel's error is the largest on 256 sampled entries against float64, relative
to the row-column norm product (``bench_kernels.Gemm.err``; TF32 ~1e-3, 3xTF32 ~1e-6); on an
NVIDIA device ptxas's registers and spills per kernel are printed once.

    python benchmarks/bench_gemm_bfrag.py          (NVIDIA GPU with inline PTX, torch with CUDA)
    python benchmarks/bench_gemm_bfrag.py --quick  (PoCL, tiny sizes, emulated: the plumbing)

Writes ``bfrag.{txt,json}`` to ``$OUT``; stops starting shapes ``DEADLINE`` seconds (default
200) after its start."""
from __future__ import annotations

import argparse
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
from netpass.runtime.kernels import mma, mma_bfrag, mma_plan  # noqa: E402

C = mma.MmaConfig
# (label, config): 128x128 tiles of 64x64 warps; registers a lane: 128 accumulators, A 16 a
# set (2 sets "early", 1 "late"), B 16 a set (bdist + 1 sets)
VARIANTS = [
    ("bfrag k16 s6 d1", C(128, 128, 64, 64, 16, 6, "bfrag", 1)),
    ("bfrag k16 s6 d2", C(128, 128, 64, 64, 16, 6, "bfrag", 2)),
    ("bfrag k16 s6 d3", C(128, 128, 64, 64, 16, 6, "bfrag", 3)),
    ("bfrag k16 s6 d1 late-A", C(128, 128, 64, 64, 16, 6, "bfrag", 1, False)),
    ("bfrag k16 s4 d2", C(128, 128, 64, 64, 16, 4, "bfrag", 2)),
    ("bfrag k32 s3 d2", C(128, 128, 64, 64, 32, 3, "bfrag", 2)),
    ("bfrag k32 s3 d4", C(128, 128, 64, 64, 32, 3, "bfrag", 4)),
    ("bfrag k8 s8 d1", C(128, 128, 64, 64, 8, 8, "bfrag", 1)),
]
PIPE = C(128, 128, 64, 64, 16, 3, "pipe")
NARROW = ("bfrag 128x96 k16 s6 d2", C(128, 96, 64, 48, 16, 6, "bfrag", 2))
F32 = [("3xTF32 bfrag k16 s6 d1", C(128, 128, 64, 64, 16, 6, "bfrag", 1)),
       ("3xTF32 bfrag k16 s6 d1 late-A", C(128, 128, 64, 64, 16, 6, "bfrag", 1, False))]
SHAPES = [(4096, 4096, 4096), (1024, 768, 2304), (1024, 768, 3072), (1024, 3072, 768),
          (1024, 768, 768), (4096, 768, 2304), (4096, 768, 3072), (4096, 3072, 768),
          (4096, 768, 768)]  # (M, K, N)
# --quick: PoCL, tiles and warp tiles a quarter as wide (emulated MMA compiles slowly)
QUICK_VARIANTS = [("bfrag k16 s4 d2", C(32, 64, 16, 32, 16, 4, "bfrag", 2)),
                  ("bfrag k8 s4 d1 late-A", C(64, 32, 32, 16, 8, 4, "bfrag", 1, False))]
QUICK_PIPE = C(32, 64, 16, 32, 16, 3, "pipe")
QUICK_NARROW = ("bfrag 32x96 k16 s2 d1", C(32, 96, 16, 48, 16, 2, "bfrag", 1))
QUICK_F32 = [("3xTF32 bfrag k16 s4 d2", C(32, 64, 16, 32, 16, 4, "bfrag", 2))]
QUICK_SHAPES = [(130, 72, 100), (64, 40, 64)]


class Bench:
    """Kernels built once per source (ptxas's report kept), timed per problem."""

    def __init__(self, eng, reps: int, out: Path) -> None:
        self.eng, self.cl, self.reps, self.out = eng, eng.cl, reps, out
        self.ptx = eng.mma == "ptx"
        self.progs: dict = {}
        self.lines: list[str] = []
        self.res: dict = {}

    def say(self, *a) -> None:
        s = " ".join(str(x) for x in a)
        print(s, flush=True)
        self.lines.append(s)
        (self.out / "bfrag.txt").write_text("\n".join(self.lines) + "\n")

    def kernel(self, src):
        """(kernel, ptxas's registers and spills or "") of ``src``, built once."""
        got = self.progs.get(src.text)
        if got is None:
            if self.ptx:
                prg = self.cl.Program(self.eng.context, src.text).build(
                    options=["-cl-mad-enable", "-cl-nv-verbose"])
                log = prg.get_build_info(self.eng.device, self.cl.program_build_info.LOG)
                info = " ".join(ln.strip().replace("ptxas info    : ", "")
                                for ln in log.splitlines()
                                if "ptxas" in ln and ("Used" in ln or "spill" in ln))
            else:
                prg, info = self.eng.build(src.text), ""
            got = self.progs[src.text] = (prg, info)
        return self.cl.Kernel(got[0], src.name), got[1]

    def time(self, kern, gws, lws) -> float:
        times = []
        for _ in range(self.reps + 1):
            ev = self.cl.enqueue_nd_range_kernel(self.eng.queue, kern, gws, lws)
            ev.wait()
            times.append((ev.profile.end - ev.profile.start) * 1e-9)
        return float(np.median(times[1:]))

    def gemm(self, prob, cfg: mma.MmaConfig, split: int, frags: dict) -> tuple[float, float, str]:
        """(seconds, error, ptxas) of ``gemm_mma`` on ``cfg`` for ``prob`` (B swizzled for
        bfrag, once per panel width)."""
        src = mma.gemm_mma(cfg, True, split, self.ptx, "cp_async", "rings", [], 0, [], 0)
        kern, info = self.kernel(src)
        ints = prob.ints(True)
        b_buf = prob.bb
        if cfg.loop == "bfrag":
            if cfg.wn not in frags:
                mf = self.cl.mem_flags
                frags[cfg.wn] = self.cl.Buffer(self.eng.context, mf.READ_ONLY | mf.COPY_HOST_PTR,
                                               hostbuf=mma_bfrag.swizzle(prob.b, cfg.wn))
            b_buf = frags[cfg.wn]
        kern.set_args(prob.ab, b_buf, prob.cb, np.array(ints, np.int32))
        t = self.time(kern, *mma_plan.work_sizes(cfg, prob.m, prob.n, 1))
        return t, prob.err(), info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="PoCL, tiny sizes (emulated MMA)")
    args = ap.parse_args()
    t0 = time.time()
    deadline = float(os.environ.get("DEADLINE", "200"))
    out = Path(os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)
    eng = Engine.get(select_device("CPU" if args.quick else resolve_device_name("GPU")),
                     profiling=True)
    if args.quick:
        eng.mma = "emulated"
        variants, pipe, narrow, f32 = QUICK_VARIANTS, QUICK_PIPE, QUICK_NARROW, QUICK_F32
        shapes, reps = QUICK_SHAPES, 2
    else:
        variants, pipe, narrow, f32, shapes, reps = VARIANTS, PIPE, NARROW, F32, SHAPES, 10
    torch = bk.torch_cuda()
    b = Bench(eng, reps, out)
    b.say("netpass from", netpass.__file__)
    b.say(eng.describe(), "driver", eng.device.driver_version, "mma", eng.mma,
          "| torch", torch.__version__ if torch else None,
          torch.cuda.get_device_name() if torch else "")
    b.say("ms (TFLOP/s, x cuBLAS TF32, max sampled err) per kernel; ptxas once per kernel")
    seen: set = set()
    for (m, kk, n) in shapes:
        if deadline - (time.time() - t0) < 20:
            b.say("  (deadline) stop shapes")
            break
        prob = bk.Gemm(eng, m, n, kk)
        peer = bk.cublas(torch, m, n, kk, reps, True) if torch else None
        row: dict = {"cublas_tf32": peer}
        b.say(f"M {m} K {kk} N {n}: cuBLAS TF32 "
              + (f"{peer * 1e3:.3f} ms ({prob.flops(peer):.0f} TF/s)" if peer else "-"))

        def report(label: str, t: float, err: float, info: str = "", **extra) -> None:
            ratio = f", {peer / t:.2f}x" if peer else ""
            b.say(f"  {label:32s} {t * 1e3:8.3f} ms ({prob.flops(t):5.1f} TF/s{ratio}, "
                  f"e{err:.0e})" + (f" | {info}" if info and label not in seen else ""))
            seen.add(label)
            row[label] = {"ms": t * 1e3, "tflops": prob.flops(t), "err": err, "ptxas": info,
                          **extra}

        for precision in ("tf32", "f32"):
            mma_plan._choices = {}
            t, name = prob.runtime(precision, reps)
            report(f"runtime {precision}", t, prob.err(), kernel=name)
        for label, cfg in [("pipe", pipe), *variants, narrow]:
            report(label, *b.gemm(prob, cfg, 1, row.setdefault("_frags", {})))
        for label, cfg in f32:
            report(label, *b.gemm(prob, cfg, 3, row["_frags"]))
        del row["_frags"]
        b.res[f"{m} {kk} {n}"] = row
    (out / "bfrag.json").write_text(json.dumps(b.res, indent=1))
    b.say(f"[{time.time() - t0:.1f} s]")


if __name__ == "__main__":
    main()
