"""Probe: a GPT-2 small 1024-token prefill's flash attention per ``kernels.flash.FlashConfig``
(warps, keys a block) for head size 64, TF32 and float32 (3xTF32).

    python benchmarks/probe_flash_configs.py [--precisions tf32,f32] [--device GPU]

For each configuration: the prefill's wall time (median of 8), its kernel time and the flash
attention's (profiling events), and the logits' relative L2 against the first configuration's
(the one ``config_for`` ships for TF32). The model is ``bench_kernels``' (random weights).
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
from netpass.runtime.kernels import flash  # noqa: E402

CONFIGS = [(4, 32), (4, 16), (2, 32), (8, 32), (2, 16), (8, 16)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precisions", default="tf32,f32")
    ap.add_argument("--device", default="GPU")
    args = ap.parse_args()
    onnx_model = netpass.read_model(export_last_logits(gpt2_torch(12, 768, 12, 50257, "sdpa"),
                                                       50257))
    prompt = np.random.default_rng(0).integers(0, 50257, (1, 1024))
    feeds = {"input_ids": prompt, "attention_mask": np.ones_like(prompt)}
    shipped = flash.config_for
    try:
        for precision in args.precisions.split(","):
            first = None
            for warps, bkv in CONFIGS:
                flash.config_for = (lambda d, split=1, w=warps, b=bkv:
                                    flash.FlashConfig(w, b) if d <= 64 else shipped(d, split))
                cm = netpass.compile_model(onnx_model, args.device, {
                    "TRANSFORMATIONS": "NONE", "INFERENCE_PRECISION_HINT": precision})
                req = cm.create_infer_request()
                out = req.infer(feeds)["logits"]
                first = out if first is None else first
                walls = []
                for _ in range(8):
                    t0 = time.perf_counter()
                    req.infer(feeds)
                    walls.append(time.perf_counter() - t0)
                by_kind = kernel_ms_by_kind(onnx_model, feeds, args.device, precision)
                err = float(np.linalg.norm(out - first) / np.linalg.norm(first))
                print(f"{precision} FlashConfig({warps}, {bkv}): wall "
                      f"{1e3 * statistics.median(walls):.3f} ms, kernels "
                      f"{sum(by_kind.values()):.3f}, attention "
                      f"{by_kind.get('FusedAttention', 0.0):.3f} ms, vs the first {err:.1e}",
                      flush=True)
    finally:
        flash.config_for = shipped


if __name__ == "__main__":
    main()
