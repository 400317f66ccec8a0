"""The decode GEMV (``kernels.decode_gemv.gemv``) on GPT-2 small's decode shapes: kernel time per
items-per-column (TPR) beside cuBLAS (torch) in the same run, and the profiling floor.

    python benchmarks/bench_gemv.py [--device GPU] [--reps 20] [--tpr 16,32,64,128]

One row of A against the weights [N, K] as a Linear holds them (``MatMul(x, W, transpose_b)``,
what the decode GEMV reads without a reorder): the QKV projection (768 -> 2304), the output
projection (768 -> 768), the MLP (768 -> 3072, 3072 -> 768) and the LM head (768 -> 50257).
Each TPR is forced through ``kernels.decode_gemv.gemv_width`` on a model compiled for it alone;
the runtime's own choice is marked. Kernel times are OpenCL profiling events (the median of
``--reps`` infers after a warm-up), torch's CUDA events around ``x @ W.T``; the floor is a
4-element Add under the same events (what a launch costs the event timestamps by itself).
Writes ``bench_gemv.json`` to ``$OUT`` when set. The weights are one buffer read again and
again, which a large L2 holds (the H200's 50 MB: all but the LM head); a decode step reads its
weights from HBM, as ``bench_gemv_hbm.py`` does.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.runtime.kernels import decode_gemv

SHAPES = [("qkv", 768, 2304), ("attn_out", 768, 768), ("mlp_up", 768, 3072),
          ("mlp_down", 3072, 768), ("lm_head", 768, 50257)]


def kernel_us(model: Model, feeds: dict, device: str, reps: int) -> float:
    """Median kernel time per infer (all primitives) of ``model`` under profiling events."""
    req = compile_program(model, device, {"PROFILING": True}).create_infer_request()
    for _ in range(3):
        req.infer(feeds)
    times = []
    for _ in range(reps):
        before = sum(req.stats["primitive_times_us"].values())
        req.infer(feeds)
        times.append(sum(req.stats["primitive_times_us"].values()) - before)
    return statistics.median(times)


def gemv_model(k: int, n: int, rng: np.random.Generator) -> tuple[Model, dict]:
    x = opset.parameter([1, k], np.float32, name="x")
    w = (rng.standard_normal((n, k)) * 0.02).astype(np.float32)
    y = opset.matmul(x, w, False, True)
    return Model([opset.result(y, name="y")], [x]), {"x": rng.standard_normal((1, k)).astype(np.float32)}


def torch_us(k: int, n: int, reps: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.randn(1, k, device="cuda")
    w = torch.randn(n, k, device="cuda")
    for _ in range(3):
        x @ w.T
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        x @ w.T
        b.record()
        torch.cuda.synchronize()
        times.append(1e3 * a.elapsed_time(b))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="GPU")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--tpr", default="16,32,64,128")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    own = decode_gemv.gemv_width
    a = opset.parameter([4], np.float32, name="a")
    floor = kernel_us(Model([opset.result(opset.add(a, a), name="y")], [a]),
                      {"a": np.ones(4, np.float32)}, args.device, args.reps)
    print(f"profiling floor (a 4-element Add): {floor:.1f} us")
    report: dict = {"floor_us": floor, "shapes": {}}
    tprs = [int(t) for t in args.tpr.split(",")]
    print(f"{'shape':<10}{'K':>6}{'N':>7}{'MB':>7}  " + "".join(f"{'TPR ' + str(t):>14}" for t in tprs)
          + f"{'cuBLAS':>14}")
    for name, k, n in SHAPES:
        model, feeds = gemv_model(k, n, rng)
        chosen = own(1, k, 1, n)
        row = {}
        for tpr in tprs:
            decode_gemv.gemv_width = lambda m, kk, sbk, nn, tpr=tpr: tpr if own(m, kk, sbk, nn) else None
            try:
                row[tpr] = kernel_us(model, feeds, args.device, args.reps)
            finally:
                decode_gemv.gemv_width = own
        peer = torch_us(k, n, args.reps)
        mb = 4 * k * n / 1e6
        cells = "".join(f"{row[t]:>9.1f} us{'*' if t == chosen else ' '} " for t in tprs)
        print(f"{name:<10}{k:>6}{n:>7}{mb:>7.1f}  {cells}"
              + (f"{peer:>11.1f} us" if peer is not None else f"{'-':>14}"))
        report["shapes"][name] = {"k": k, "n": n, "mb": mb, "chosen_tpr": chosen,
                                  "netpass_us": row, "cublas_us": peer}
    print("(* the runtime's own choice; times include the profiling floor)")
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "bench_gemv.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
