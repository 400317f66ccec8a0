"""Host CPU time of the runtime's infer loop, robust to a shared, loaded machine.

Wall-clock host time (``bench_runtime.py``'s "host time per node") swings by 2x between runs
of the same code when other processes share the cores. This measures the main thread's own
CPU time instead (``time.thread_time``: no PoCL worker threads, no time spent waiting or
descheduled) over the GPT decoder of ``netpass.runtime.models`` (vocab 2048, 4 layers, d=256,
4 heads), sequence 1..16, a fresh infer request per pass after two warm-up passes, and
prints the median over passes per kernel primitive, with the wall time per pass beside it.
Run it alternately in two checkouts to compare them (BENCHMARKS.md, "Runtime").

    python benchmarks/bench_host_cpu.py [--passes 9] [--device CPU]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netpass.runtime import compile_program
from netpass.runtime.models import gpt_decoder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=9, help="timed passes over the sequence")
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--steps", type=int, default=16, help="sequence lengths 1..STEPS")
    args = ap.parse_args()
    cm = compile_program(gpt_decoder(2048, 4, 256, 4, 256), args.device)
    rng = np.random.default_rng(0)
    feeds = [{"ids": rng.integers(0, 2048, (1, s)).astype(np.int64)}
             for s in range(1, args.steps + 1)]
    warm = cm.create_infer_request()
    for _ in range(2):
        for f in feeds:
            warm.infer(f)
    cpu, wall = [], []
    for _ in range(args.passes):
        req = cm.create_infer_request()
        c, w = time.thread_time(), time.perf_counter()
        for f in feeds:
            req.infer(f)
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - w)
    prims = req.stats["primitives"]
    print(f"main-thread CPU per kernel primitive {1e6 * statistics.median(cpu) / prims:.2f} us "
          f"(median of {args.passes} passes, {prims} kernel primitives per pass); "
          f"wall per pass {1e3 * statistics.median(wall):.1f} ms")


if __name__ == "__main__":
    main()
