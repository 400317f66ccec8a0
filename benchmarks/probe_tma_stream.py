"""What bounds the TMA GEMM (``netpass.runtime.kernels.tma_gemm``): each tile's kernel as
built, and the same kernel with its ``wgmma`` products removed (the copies, mbarriers and
epilogue alone), at 4096^3 on the device; the bytes its copies bring per second (L2 to the
compute units) beside the TFLOP/s.

``python benchmarks/probe_tma_stream.py [--tiles 128x256x3,...]``"""
from __future__ import annotations

import argparse
import statistics

import numpy as np
import pyopencl as cl

from netpass.runtime.device import Engine, select_device
from netpass.runtime.kernels import tma_gemm
from netpass.runtime.kernels.tma_gemm import TmaConfig
from netpass.runtime.tensor_maps import templates


def time_kernel(eng, text: str, cfg: TmaConfig, m: int, reps: int) -> float:
    ctx, mf = eng.context, cl.mem_flags
    kern = cl.Kernel(eng.build(text), "gemm_tma")
    a = cl.Buffer(ctx, mf.COPY_HOST_PTR, hostbuf=np.ones((m, m), np.float32))
    c = cl.Buffer(ctx, mf.READ_WRITE, m * m * 4)
    tm = cl.Buffer(ctx, mf.COPY_HOST_PTR, hostbuf=np.array(templates("ptx", cfg.bm, cfg.bn)))
    ts = cl.Buffer(ctx, mf.READ_WRITE, tma_gemm.map_slots(cfg, m, m))
    kern.set_args(a, a, c, tm, ts, np.array([0, 0, 0, m, m, m, 1, 0, 0, m, 1, 0, 0, 1, m],
                                            np.int32))
    times = []
    for _ in range(reps + 2):
        ev = cl.enqueue_nd_range_kernel(eng.queue, kern, *tma_gemm.work_sizes(cfg, m, m, True))
        ev.wait()
        times.append((ev.profile.end - ev.profile.start) * 1e-6)
    return statistics.median(times[2:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", default="128x256x3,128x192x4,128x128x5")
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    eng = Engine.get(select_device("GPU"), profiling=True)
    m = args.m
    for tile in args.tiles.split(","):
        cfg = TmaConfig(*(int(v) for v in tile.split("x")))
        text = tma_gemm.gemm_tma(cfg, [], 0, [], 0, False, True).text
        copies = "\n".join(ln for ln in text.splitlines() if "wgmma.mma_async" not in ln)
        assert copies != text
        moved = -(-m // cfg.bm) * -(-m // cfg.bn) * -(-m // 8) * cfg.stage_bytes
        for name, src in (("products and copies", text), ("copies only", copies)):
            ms = time_kernel(eng, src, cfg, m, args.reps)
            print(f"{tile} {name}: {ms:.4f} ms, {2.0 * m ** 3 / ms / 1e9:6.1f} TFLOP/s, "
                  f"copies {moved / ms / 1e9:5.2f} TB/s", flush=True)


if __name__ == "__main__":
    main()
