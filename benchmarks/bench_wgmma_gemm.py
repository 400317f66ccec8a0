"""The TMA + wgmma GEMM (``netpass.runtime.kernels.tma_gemm``) per tile against cuBLAS: TF32
tiles against cuBLAS TF32, 3xTF32 tiles (a fourth number 3: ``128x192x2x3``) against cuBLAS
float32.

One process: cuBLAS TF32 and float32 through torch (CUDA events), then each tile of
``--tiles`` on each shape: the kernel built by the engine (patched PTX), checked against
float64 products of the TF32-truncated operands (TF32) or of the operands (3xTF32) on 64
sampled rows, timed with OpenCL profiling events (median of
``--reps`` after two). B is a FullyConnected's weights [N, K]. ``--cold``: the L2 flushed
(a 512 MB fill) before each launch, so that the operands come from HBM as inside a model. Prints ptxas's register and
spill counts where ``ptxas`` is on the PATH.

``python benchmarks/bench_wgmma_gemm.py [--tiles 128x256x3,...] [--json OUT]``"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

import numpy as np
import pyopencl as cl

from netpass.runtime.device import Engine, select_device
from netpass.runtime.kernels import tma_gemm
from netpass.runtime.kernels.tma_gemm import TmaConfig
from netpass.runtime.kernels.wgmma import retarget
from netpass.runtime.tensor_maps import templates

SHAPES = [(4096, 4096, 4096), (4096, 768, 3072), (4096, 768, 2304), (4096, 3072, 768),
          (1024, 768, 3072), (1024, 768, 2304), (1024, 3072, 768), (1024, 768, 768)]
TILES = "128x256x3,128x192x4,128x128x5,64x128x7,64x256x4,64x192x5,128x192x2x3,128x128x3x3," \
    "64x128x5x3,64x256x2x3"


def tf32(x: np.ndarray) -> np.ndarray:
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def ptxas_info(eng: Engine, src: str) -> str:
    exe = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    if not os.path.exists(exe):
        return ""
    prg = eng.cl.Program(eng.context, src).build(options=["-cl-mad-enable"])
    ptx = retarget(prg.get_info(eng.cl.program_info.BINARIES)[0].decode().rstrip("\0"))
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    out = subprocess.run([exe, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                         capture_output=True, text=True)
    return " ".join(ln.split(":", 1)[-1].strip() for ln in (out.stdout + out.stderr).splitlines()
                    if "registers" in ln or "spill" in ln or "rror" in ln)


def cublas(shapes: list, reps: int, cold: bool, allow_tf32: bool) -> dict:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    flush = torch.empty(128 << 20, device="cuda") if cold else None
    out = {}
    for m, k, n in shapes:
        a, w = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
        for _ in range(3):
            a @ w.T
        times = []
        for _ in range(reps):
            if flush is not None:
                flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            a @ w.T
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        out[f"{m}x{k}x{n}"] = statistics.median(times)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", default=TILES)
    ap.add_argument("--shapes", default="", help="indices into SHAPES (all by default)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default="")
    ap.add_argument("--cold", action="store_true")
    args = ap.parse_args()
    eng = Engine.get(select_device("GPU"), profiling=True)
    if eng.tma != "ptx":
        raise SystemExit(f"no TMA / wgmma on {eng.describe()}")
    shapes = [SHAPES[int(i)] for i in args.shapes.split(",")] if args.shapes else SHAPES
    result: dict = {"device": eng.describe(), "runs": {}}
    try:
        for name, allow in (("cublas_tf32_ms", True), ("cublas_fp32_ms", False)):
            result[name] = cublas(shapes, args.reps, args.cold, allow)
            print(name, {k: round(v, 4) for k, v in result[name].items()}, flush=True)
    except Exception as exc:  # (measured without the peer too)
        print("no torch:", exc)
    rng = np.random.default_rng(0)
    mf, ctx, queue = cl.mem_flags, eng.context, eng.queue
    data = {}
    flush = cl.Buffer(ctx, mf.READ_WRITE, 512 << 20) if args.cold else None
    for m, k, n in shapes:
        a, w = rng.standard_normal((m, k), dtype=np.float32), \
            rng.standard_normal((n, k), dtype=np.float32)
        data[(m, k, n)] = (a, w, cl.Buffer(ctx, mf.COPY_HOST_PTR, hostbuf=a),
                           cl.Buffer(ctx, mf.COPY_HOST_PTR, hostbuf=w),
                           cl.Buffer(ctx, mf.READ_WRITE, m * n * 4))
    for tile in args.tiles.split(","):
        cfg = TmaConfig(*(int(v) for v in tile.split("x")))
        src = tma_gemm.gemm_tma(cfg, [], 0, [], 0, False, True)
        print(tile, ptxas_info(eng, src.text), flush=True)
        kern = cl.Kernel(eng.build(src.text), src.name)
        tm = cl.Buffer(ctx, mf.COPY_HOST_PTR, hostbuf=np.array(templates("ptx", cfg.bm, cfg.bn)))
        row = {}
        for m, k, n in shapes:
            a, w, ab, wb, cb = data[(m, k, n)]
            ts = cl.Buffer(ctx, mf.READ_WRITE, tma_gemm.map_slots(cfg, m, n))
            ints = [0, 0, 0, m, n, k, 1, 0, 0, k, 1, 0, 0, 1, k]
            kern.set_args(ab, wb, cb, tm, ts, np.array(ints, np.int32))
            cl.enqueue_fill_buffer(queue, cb, np.float32(0), 0, m * n * 4)
            times = []
            for _ in range(args.reps + 2):
                if flush is not None:
                    cl.enqueue_fill_buffer(queue, flush, np.float32(0), 0, 512 << 20)
                ev = cl.enqueue_nd_range_kernel(queue, kern,
                                                *tma_gemm.work_sizes(cfg, m, n, True))
                ev.wait()
                times.append((ev.profile.end - ev.profile.start) * 1e-6)
            ms = statistics.median(times[2:])
            c = np.empty((m, n), np.float32)
            cl.enqueue_copy(queue, c, cb)
            rows = rng.choice(m, 64, replace=False)
            cut = tf32 if cfg.split == 1 else np.asarray
            want = cut(a[rows]).astype(np.float64) @ cut(w).astype(np.float64).T
            err = float(np.abs(c[rows] - want).max() / np.abs(want).max())
            key = f"{m}x{k}x{n}"
            peer = "cublas_tf32_ms" if cfg.split == 1 else "cublas_fp32_ms"
            ratio = result.get(peer, {}).get(key, float("nan")) / ms
            row[key] = {"ms": ms, "tflops": 2.0 * m * n * k / ms / 1e9, "err": err,
                        "x_cublas": ratio}
            print(f"  {key}: {ms:.4f} ms {row[key]['tflops']:6.1f} TFLOP/s  {ratio:.2f}x cuBLAS"
                  f"  err {err:.1e}", flush=True)
        result["runs"][tile] = row
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
