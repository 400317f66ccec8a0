"""An LM head over every position: FullyConnected [M, 768] x [50257, 768]^T + bias, alone and
behind a LayerNorm (GPT-2's ln_f), on the tensor cores (TF32 and float32 as 3xTF32), beside
torch's ``F.linear`` (cuBLAS through addmm, TF32 allowed or not) in the same run.

    python benchmarks/bench_lm_head.py [--rows 1024,4096] [--device GPU] [--quick]

netpass: kernel time per inference from profiling events (mean of 8 after a warm-up); torch:
CUDA events around ``F.linear(x, w, b)`` (``bench_kernels.cuda_time``: median of 20 after a
warm-up). Errors: rel. L2 against the reference evaluator. ``--quick``: N = 37, 64 rows on the
CPU device (a smoke run). Run it in two trees to compare them.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path.cwd()))

import netpass  # (the working directory's tree: run it in two trees to compare them)
from netpass import opset
from netpass.core.model import Model

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_kernels import cuda_time, torch_cuda


def model(rng, n: int, rows: int, norm: bool) -> Model:
    x = opset.parameter([rows, 768], np.float32, name="x")
    h = x
    if norm:
        h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
        h = opset.add(opset.multiply(h, (1 + 0.1 * rng.standard_normal(768)).astype(np.float32)),
                      (0.1 * rng.standard_normal(768)).astype(np.float32))
    w = (rng.standard_normal((n, 768)) * 0.02).astype(np.float32)
    b = (rng.standard_normal(n) * 0.02).astype(np.float32)
    return Model([opset.result(opset.fully_connected(h, w, b), name="y")], [x])


def netpass_ms(m: Model, device: str, precision: str, xv: np.ndarray) -> tuple[float, float, int]:
    cm = netpass.compile_model(m, device, {"INFERENCE_PRECISION_HINT": precision,
                                           "PROFILING": True})
    req = cm.create_infer_request()
    req.infer({"x": xv})
    t0 = sum(req.stats.get("primitive_times_us", {}).values())
    for _ in range(8):
        out = req.infer({"x": xv})["y"]
    per = (sum(req.stats.get("primitive_times_us", {}).values()) - t0) / 8 / 1000
    want = netpass.reference.infer(m, {"x": xv})["y"]
    err = float(np.linalg.norm(out - want) / np.linalg.norm(want))
    return per, err, int(req.stats.get("weight_reorders", 0))


def torch_ms(n: int, rows: int, tf32: bool) -> float | None:
    torch = torch_cuda()
    if torch is None:
        return None
    torch.backends.cuda.matmul.allow_tf32 = tf32
    x = torch.randn(rows, 768, device="cuda")
    w = torch.randn(n, 768, device="cuda") * 0.02
    b = torch.randn(n, device="cuda") * 0.02
    return 1e3 * cuda_time(torch, lambda: torch.nn.functional.linear(x, w, b), 20)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1024,4096")
    ap.add_argument("--device", default="GPU")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n, rows_list, device = (37, [64], "CPU") if args.quick else \
        (50257, [int(r) for r in args.rows.split(",")], args.device)
    rng = np.random.default_rng(0)
    for rows in rows_list:
        xv = (3 + rng.standard_normal((rows, 768))).astype(np.float32)
        for norm in (False, True):
            m = model(rng, n, rows, norm)
            for precision in ("tf32", "f32"):
                ms, err, reorders = netpass_ms(m, device, precision, xv)
                peer = torch_ms(n, rows, precision == "tf32") if not norm else None
                vs = f", torch {peer:.3f} ms (netpass at {peer / ms:.2f}x its speed)" if peer else ""
                print(f"{'LayerNorm + ' if norm else ''}FC [{rows}, 768] x [{n}, 768]^T "
                      f"{precision}: {ms:.3f} ms, weight reorders {reorders}, rel. L2 {err:.1e}"
                      f"{vs}", flush=True)


if __name__ == "__main__":
    main()
