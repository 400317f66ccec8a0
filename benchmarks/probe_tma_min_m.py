"""Probe: float32 GEMMs of few rows with weights [N, K] (GPT-2's projections) on Hopper's TMA
kernel as 3xTF32 against ``kernels.mma``'s 3xTF32 GEMM (split-K where it takes it), which
sets ``kernels.tma_gemm.MIN_M_3X``.

    python benchmarks/probe_tma_min_m.py [--rows 64,128,256,512,1024] [--rounds 2]

Kernel time by profiling events (the runtime's own launches for the MatMul, median of 10),
each row count and shape alternated over ``--rounds``, with each kernel's largest error on
sampled entries (``bench_kernels.Gemm``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools"), str(ROOT / "benchmarks")]

from bench_kernels import Gemm  # noqa: E402

from netpass.runtime.device import Engine, select_device  # noqa: E402
from netpass.runtime.kernels import tma_gemm  # noqa: E402

SHAPES = ((2304, 768), (768, 768), (3072, 768), (768, 3072))  # (N, K)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="64,128,256,512,1024")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    eng = Engine.get(select_device("GPU"), profiling=True)
    shipped = tma_gemm.MIN_M_3X
    try:
        for _ in range(args.rounds):
            for m in (int(r) for r in args.rows.split(",")):
                for n, k in SHAPES:
                    prob = Gemm(eng, m, n, k)
                    row = []
                    for label, min_m in (("tma", 1), ("mma", 1 << 30)):
                        tma_gemm.MIN_M_3X = min_m
                        t, name = prob.runtime("f32", 10, weights_nk=True)
                        row.append(f"{label} {1e3 * t:.4f} ms ({name.split()[0]}, err "
                                   f"{prob.err():.1e})")
                    print(f"M={m:5d} N={n:5d} K={k:5d}: " + " | ".join(row), flush=True)
    finally:
        tma_gemm.MIN_M_3X = shipped


if __name__ == "__main__":
    main()
