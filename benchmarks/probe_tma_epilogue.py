"""What a TF32 projection costs inside a compiled model (issue 18): the TMA GEMM
(``kernels.tma_gemm``) of a projection alone with no bias, a bias, a bias and a residual add;
and eight square projections back to back, each reading the one before (the GPU kept busy):
bare, with bias and residual, and with a LayerNorm ahead as in a transformer block. Each
primitive timed by the runtime's own profiling (median over inferences), in us.

``python benchmarks/probe_tma_epilogue.py [--device GPU] [--tma-prefetch 8,16]`` (each count of
side-input elements a lane loads ahead, ``kernels.mma.EP_PREFETCH``, in turn)"""
from __future__ import annotations

import argparse
import re
import statistics

import numpy as np
from profile_prefill import tma_remade

import netpass
from netpass import Model, opset
from netpass.runtime.kernels import mma as mma_kernels

SHAPES = ((1024, 768, 768), (1024, 3072, 768), (1024, 768, 3072))


def _layer_norm(x, rng, d: int):
    h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
    return opset.add(opset.multiply(h, rng.standard_normal(d, dtype=np.float32)),
                     rng.standard_normal(d, dtype=np.float32))


def variants(m: int, k: int, n: int, rng):
    """(name, model, inputs) of each case; the projections as an exporter writes them
    (MatMul by [K, N] weights, then Add of the bias), made FullyConnected by compile_model."""
    w = rng.standard_normal((k, n), dtype=np.float32) / np.sqrt(k)
    bias = rng.standard_normal(n, dtype=np.float32)

    def proj(v):
        return opset.matmul(v, w, False, False)

    x = opset.parameter([1, m, k], np.float32, name="x")
    yield "no bias", Model([opset.result(proj(x), name="y")], [x]), ("x",)
    x = opset.parameter([1, m, k], np.float32, name="x")
    yield "bias", Model([opset.result(opset.add(proj(x), bias), name="y")], [x]), ("x",)
    x = opset.parameter([1, m, k], np.float32, name="x")
    r = opset.parameter([1, m, n], np.float32, name="r")
    y = opset.add(r, opset.add(proj(x), bias))
    yield "bias + residual", Model([opset.result(y, name="y")], [x, r]), ("x", "r")
    if k != n:
        return
    for name, step in (("8 in a chain, no bias", lambda v: proj(v)),
                       ("8 in a chain, bias + residual",
                        lambda v: opset.add(v, opset.add(proj(v), bias))),
                       ("8 in a chain, LayerNorm ahead, bias + residual",
                        lambda v: opset.add(v, opset.add(proj(_layer_norm(v, rng, k)), bias)))):
        x = opset.parameter([1, m, k], np.float32, name="x")
        y = x
        for _ in range(8):
            y = step(y)
        yield name, Model([opset.result(y, name="y")], [x]), ("x",)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="GPU")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--tma-prefetch", default="")
    args = ap.parse_args()
    for ahead in args.tma_prefetch.split(",") if args.tma_prefetch else [""]:
        if ahead:
            mma_kernels.EP_PREFETCH = int(ahead)
            tma_remade()
            print(f"TMA epilogue, side inputs loaded {ahead} ahead:", flush=True)
        run(args)


def run(args) -> None:
    rng = np.random.default_rng(0)
    for m, k, n in SHAPES:
        for name, model, inputs in variants(m, k, n, rng):
            cm = netpass.compile_model(model, args.device, {
                "TRANSFORMATIONS": "NONE", "PROFILING": True, "INFERENCE_PRECISION_HINT": "tf32"})
            req = cm.create_infer_request()
            data = {"x": rng.standard_normal((1, m, k), dtype=np.float32),
                    "r": rng.standard_normal((1, m, n), dtype=np.float32)}
            feeds = {key: data[key] for key in inputs}
            req.infer(feeds)
            rreq = req._runtime_request
            per: dict = {}
            for _ in range(args.reps):
                base = rreq.get_profiling_info()
                req.infer(feeds)
                for pid, us in rreq.get_profiling_info().items():
                    per.setdefault(pid, []).append(us - base.get(pid, 0.0))
            kinds = {node.id: node.kind for node in cm.runtime.program.nodes}
            kernels = sorted({hit.group(1) for key in rreq.network.kernel_objects
                              if (hit := re.search(r"void (\w+)\(", key[2]))})
            cells = ", ".join(f"{kinds.get(pid, '?')} {statistics.median(v):.1f}"
                              for pid, v in per.items())
            print(f"[{m}, {k}] x [{k}, {n}] {name}: {cells}; kernels {kernels}", flush=True)


if __name__ == "__main__":
    main()
