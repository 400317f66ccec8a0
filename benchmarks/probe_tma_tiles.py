"""Probe: a GPT-2 small 1024-token prefill on Hopper's TMA kernel per set of tiles and rates
(``kernels.tma_gemm.CONFIGS_3X`` for float32 as 3xTF32, ``CONFIGS`` for TF32), which decide
each projection's tile.

    python benchmarks/probe_tma_tiles.py [--precision f32|tf32] [--device GPU] [--rounds 2]

For each set, alternated over ``--rounds``: the prefill's wall time (median of 8), its
FullyConnected kernel time (profiling events) and the logits' relative L2 against the first
set's. The model is ``bench_kernels``' (random weights); torch is not run.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools"), str(ROOT / "benchmarks")]

from bench_kernels import gpt2_torch, kernel_ms_by_kind  # noqa: E402
from export_decoder import export_last_logits  # noqa: E402

import netpass  # noqa: E402
from netpass.runtime.kernels import tma_gemm  # noqa: E402
from netpass.runtime.kernels.tma_gemm import TmaConfig  # noqa: E402

SETS = {"f32": {
    "shipped": tma_gemm.CONFIGS_3X,
    "128x192 first": ((TmaConfig(128, 192, 2, 3), 80.0), (TmaConfig(128, 128, 3, 3), 75.0),
                      (TmaConfig(64, 128, 5, 3), 50.0)),
    "64-row tiles": ((TmaConfig(128, 128, 3, 3), 105.0), (TmaConfig(64, 128, 5, 3), 94.0)),
}, "tf32": {
    "shipped": tma_gemm.CONFIGS,
    "128-row tiles": tma_gemm.CONFIGS[:3],
    "no 128x192": tma_gemm.CONFIGS[:1] + tma_gemm.CONFIGS[2:],
}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precision", default="f32", choices=sorted(SETS))
    ap.add_argument("--device", default="GPU")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    onnx_model = netpass.read_model(export_last_logits(gpt2_torch(12, 768, 12, 50257, "sdpa"),
                                                       50257))
    prompt = np.random.default_rng(0).integers(0, 50257, (1, 1024))
    feeds = {"input_ids": prompt, "attention_mask": np.ones_like(prompt)}
    attr = "CONFIGS_3X" if args.precision == "f32" else "CONFIGS"
    shipped, first = getattr(tma_gemm, attr), None
    try:
        for _ in range(args.rounds):
            for name, configs in SETS[args.precision].items():
                setattr(tma_gemm, attr, configs)
                cm = netpass.compile_model(onnx_model, args.device, {
                    "TRANSFORMATIONS": "NONE", "INFERENCE_PRECISION_HINT": args.precision})
                req = cm.create_infer_request()
                out = req.infer(feeds)["logits"]
                first = out if first is None else first
                walls = []
                for _ in range(8):
                    t0 = time.perf_counter()
                    req.infer(feeds)
                    walls.append(time.perf_counter() - t0)
                by_kind = kernel_ms_by_kind(onnx_model, feeds, args.device, args.precision)
                err = float(np.linalg.norm(out - first) / np.linalg.norm(first))
                print(f"{name}: wall {1e3 * statistics.median(walls):.3f} ms, kernels "
                      f"{sum(by_kind.values()):.3f}, FullyConnected "
                      f"{by_kind.get('FullyConnected', 0.0):.3f} ms, vs the first {err:.1e}",
                      flush=True)
    finally:
        setattr(tma_gemm, attr, shipped)


if __name__ == "__main__":
    main()
