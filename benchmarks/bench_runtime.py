"""Benchmark of the OpenCL dynamic-shape runtime (netpass.runtime), with peers in the same run.

1. GPT-style decoder (vocab 2048, 4 layers, d=256, 4 heads), full recompute for sequence
   1..128, one infer request per pass (logits read back every step): netpass vs torch eager
   (CUDA when available, else CPU) vs onnxruntime CPU, on the same weights (torch module ->
   ONNX).
2. Host time per primitive in that loop: wall time minus time blocked in host waits, divided
   by the primitives of the exec loop (skipped ones included; not fused ops, constants,
   inputs or results), and by the kernel launches; beside a bare pyopencl launch (enqueue
   only) timed in the same run.
3. fp32 GEMM 4096^3 (TFLOP/s, kernel time from OpenCL profiling events), beside cuBLAS
   fp32 through torch (TF32 off, CUDA events) when CUDA is there.
4. Elementwise add of two 64M-float tensors (effective TB/s = 12 bytes per element / time),
   beside torch's add on CUDA.
5. Device allocations over the 128-step loop, ShapePredictor on vs off.

``--quick`` shrinks everything for PoCL (sequence 1..16, GEMM 256^3, add 1M); ``--device``
picks AUTO/GPU/CPU. Writes ``bench_runtime.json`` to ``$OUT`` when set.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.runtime.device import Engine, resolve_device_name, select_device

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_launch import SOURCE, timed

VOCAB, LAYERS, D, HEADS, MAX_SEQ = 2048, 4, 256, 4, 256
REPEATS = 5  # timed passes over the whole sequence; the median is reported


def torch_gpt():
    """A GPT-2-style torch module and its ONNX export path; None without torch."""
    try:
        import torch
        from torch import nn
    except ImportError:
        return None

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
            self.register_buffer("mask", torch.triu(torch.full((MAX_SEQ, MAX_SEQ), -1e9), 1))

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
            q, k, v = (t.reshape(b, s, HEADS, D // HEADS).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-1, -2)) * (1.0 / (D // HEADS) ** 0.5) + self.mask[:s, :s]
            o = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, s, D)
            x = x + self.proj(o)
            return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, D), nn.Embedding(MAX_SEQ, D)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, VOCAB, bias=False)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device)
            x = self.wte(ids) + self.wpe(pos)[None]
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    torch.manual_seed(0)
    module = Gpt().eval()
    path = Path(tempfile.mkdtemp()) / "gpt.onnx"
    import warnings
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.zeros(1, 5, dtype=torch.long),), str(path), dynamo=False,
                          opset_version=17, input_names=["ids"], output_names=["logits"],
                          dynamic_axes={"ids": {1: "seq"}, "logits": {1: "seq"}})
    return module, path


def gpt_model():
    """(netpass Model, onnx path, torch module or None)."""
    made = torch_gpt()
    if made is not None:
        module, path = made
        return netpass.read_model(path), path, module
    from netpass.runtime.models import gpt_decoder
    model = gpt_decoder(VOCAB, LAYERS, D, HEADS, MAX_SEQ)
    path = Path(tempfile.mkdtemp()) / "gpt.onnx"
    netpass.save_model(model, path)
    return model, path, None


def id_feeds(steps: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, VOCAB, (1, s)).astype(np.int64) for s in range(1, steps + 1)]


def run_netpass(model, device: str, feeds, config=None) -> dict:
    cm = compile_program(model, device, config)
    req = cm.create_infer_request()
    warm = req.infer({"ids": feeds[0]})  # builds kernels of the first shape
    del warm
    req = cm.create_infer_request()
    # compile every kernel source once (a program cache hit afterwards) and meet every length
    # twice (step plans are built when a binding comes back), untimed
    for _ in range(2):
        for f in feeds:
            req.infer({"ids": f})
    # shapes never seen: a second compiled model on the same engine (programs compiled,
    # no implementations, no per-binding records)
    fresh = compile_program(model, device, config).create_infer_request()
    t0 = time.perf_counter()
    for f in feeds:
        fresh.infer({"ids": f})
    first_s = time.perf_counter() - t0
    del fresh, req
    runs = []
    gc_time = GcTime()
    for _ in range(REPEATS):
        # a fresh request each time (its own memory and predictor), released after its pass
        # (with earlier requests alive, each pass on the H200 was slower than the one before)
        req = cm.create_infer_request()
        gc_time.reset()
        t0 = time.perf_counter()
        for f in feeds:
            out = req.infer({"ids": f})
        runs.append((time.perf_counter() - t0, dict(req.stats), len(req.network.active_order),
                     gc_time.seconds))
        del req
    in_order = [(r[0], r[3]) for r in runs]
    gc_time.close()
    runs.sort(key=lambda r: r[0])
    # a serving loop's one request meeting the lengths again (its buffers already grown)
    req = cm.create_infer_request()
    for f in feeds:
        req.infer({"ids": f})
    again = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for f in feeds:
            req.infer({"ids": f})
        again.append(time.perf_counter() - t0)
    del req
    total, st, loop_nodes, _ = runs[len(runs) // 2]  # the median run
    nodes = loop_nodes * len(feeds)
    host = total - st["host_wait_s"]
    return {"device": cm.device, "total_s": total, "host_s": host, "stats": st,
            "all_s": sorted(r[0] for r in runs), "first_pass_s": first_s,
            "passes_in_order": in_order,
            "same_request_s": float(np.median(again)),
            "loop_nodes": loop_nodes,
            "host_us_per_node": 1e6 * host / nodes,
            "host_us_per_kernel_primitive": 1e6 * host / max(st["primitives"], 1),
            "logits": out["logits"]}


class GcTime:
    """Seconds Python's cyclic garbage collector ran since ``reset`` (a pass over the lengths
    runs in the benchmark's process, whose collections it may pay for)."""

    def __init__(self) -> None:
        self.seconds, self._t0 = 0.0, 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t0

    def reset(self) -> None:
        self.seconds = 0.0

    def close(self) -> None:
        gc.callbacks.remove(self._callback)


def run_torch(module, feeds) -> dict | None:
    if module is None:
        return None
    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    m = module.to(dev)
    with torch.no_grad():
        for f in feeds[:4]:
            m(torch.from_numpy(f).to(dev)).cpu()
        runs = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            for f in feeds:
                out = m(torch.from_numpy(f).to(dev)).cpu().numpy()
            runs.append(time.perf_counter() - t0)
        total = float(np.median(runs))
    name = torch.cuda.get_device_name() if dev == "cuda" else "CPU"
    return {"device": f"torch eager {dev} ({name}, {torch.get_num_threads()} threads)", "total_s": total,
            "logits": out}


def run_ort(path, feeds) -> dict | None:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for f in feeds[:4]:
        sess.run(None, {"ids": f})
    runs = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for f in feeds:
            out = sess.run(None, {"ids": f})[0]
        runs.append(time.perf_counter() - t0)
    total = float(np.median(runs))
    return {"device": f"onnxruntime CPU ({os.cpu_count()} cores)", "total_s": total, "logits": out}


def kernel_time_us(model, feeds, device: str, kind: str, reps: int) -> tuple[float, dict]:
    """Median OpenCL-profiled kernel time of the primitive of type ``kind``, and the outputs."""
    cm = compile_program(model, device, {"PROFILING": True})
    req = cm.create_infer_request()
    out = req.infer(feeds)
    times = []
    for _ in range(reps):
        before = dict(req.get_profiling_info().items())
        req.infer(feeds)
        after = req.get_profiling_info()
        times.append(sum(v - before.get(k, 0.0) for k, v in after.items() if k.startswith(kind)))
    return float(np.median(times)), out


def has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def torch_cuda_us(fn, reps: int) -> float:
    """Median CUDA-event time of ``fn()`` through torch (the same-run peer)."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    times = []
    for _ in range(reps + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return float(np.median(times[1:]))


def _cuda(*arrays):
    import torch
    return [torch.from_numpy(x).cuda() for x in arrays]


def bench_gemm(n: int, device: str, reps: int) -> dict:
    a = opset.parameter([n, n], np.float32, name="a")
    b = opset.parameter([n, n], np.float32, name="b")
    model = Model([opset.result(opset.matmul(a, b, False, False), name="c")], [a, b])
    rng = np.random.default_rng(1)
    feeds = {"a": rng.standard_normal((n, n)).astype(np.float32),
             "b": rng.standard_normal((n, n)).astype(np.float32)}
    us, out = kernel_time_us(model, feeds, device, "MatMul", reps)
    peer = None
    if has_cuda():
        ta, tb = _cuda(feeds["a"], feeds["b"])
        peer = torch_cuda_us(lambda: ta @ tb, reps)
    flop = 2 * n ** 3
    return {"n": n, "kernel_us": us, "tflops": flop / (us * 1e-6) / 1e12,
            "rel_l2": rel_l2(out["c"], feeds["a"] @ feeds["b"]),
            "cublas_us": peer, "cublas_tflops": flop / (peer * 1e-6) / 1e12 if peer else None}


def bench_add(n: int, device: str, reps: int) -> dict:
    a = opset.parameter([n], np.float32, name="a")
    b = opset.parameter([n], np.float32, name="b")
    model = Model([opset.result(opset.add(a, b), name="c")], [a, b])
    rng = np.random.default_rng(2)
    feeds = {"a": rng.standard_normal(n).astype(np.float32), "b": rng.standard_normal(n).astype(np.float32)}
    us, out = kernel_time_us(model, feeds, device, "Add", reps)
    peer = None
    if has_cuda():
        ta, tb = _cuda(feeds["a"], feeds["b"])
        peer = torch_cuda_us(lambda: ta + tb, reps)
    return {"n": n, "kernel_us": us, "tb_per_s": 12 * n / (us * 1e-6) / 1e12,
            "max_abs_err": float(np.max(np.abs(out["c"] - (feeds["a"] + feeds["b"])))),
            "torch_us": peer, "torch_tb_per_s": 12 * n / (peer * 1e-6) / 1e12 if peer else None}


def bare_launch_us(device: str, n: int = 4000, reps: int = 5) -> float:
    """Host us per bare pyopencl launch (``enqueue_nd_range_kernel`` of a 6-argument kernel
    whose arguments are set once, flushed every 64): the peer of the host time per primitive
    (bench_launch.py has the other ways)."""
    eng = Engine.get(select_device(resolve_device_name(device)))
    cl, q = eng.cl, eng.queue
    a = cl.Buffer(eng.context, cl.mem_flags.READ_WRITE, 4 * 4096)
    b = cl.Buffer(eng.context, cl.mem_flags.READ_WRITE, 4 * 4096)
    kern = cl.Kernel(eng.build(SOURCE), "tiny")
    kern.set_scalar_arg_dtypes([None, np.int32, None, np.int32, np.int32, np.int32])
    kern.set_args(a, 0, b, 0, 1024, 3)

    def run(count):
        for i in range(count):
            cl.enqueue_nd_range_kernel(q, kern, (1024,), (64,))
            if i % 64 == 63:
                q.flush()
    return 1e6 * timed(run, n, reps, q)[0]


def rel_l2(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes for PoCL")
    ap.add_argument("--device", default="AUTO")
    ap.add_argument("--steps", type=int, default=None)
    args = ap.parse_args()
    steps = args.steps or (16 if args.quick else 128)
    gemm_n = 256 if args.quick else 4096
    add_n = (1 << 20) if args.quick else (64 << 20)
    reps = 3 if args.quick else 10

    model, path, module = gpt_model()
    feeds = id_feeds(steps)
    np_on = run_netpass(model, args.device, feeds)
    np_off = run_netpass(model, args.device, feeds, {"MEM_PREALLOCATION_OPTIONS": "0 0 0 1.0"})
    peers = [p for p in (run_torch(module, feeds), run_ort(path, feeds)) if p is not None]
    ref = netpass.reference.infer(model, {"ids": feeds[-1]})["logits"]
    gemm = bench_gemm(gemm_n, args.device, reps)
    bare_us = bare_launch_us(args.device)
    add = bench_add(add_n, args.device, reps)

    st_on, st_off = np_on["stats"], np_off["stats"]
    print(f"netpass runtime on {np_on['device']}  (python {platform.python_version()}, "
          f"numpy {np.__version__})")
    print(f"\nGPT decoder (vocab {VOCAB}, {LAYERS} layers, d={D}, {HEADS} heads), "
          f"full recompute, sequence 1..{steps}:")
    print(f"  {'engine (median of ' + str(REPEATS) + ' passes)':<58} {'total ms':>10} {'rel L2 vs ref':>14}")
    for name, r in [(f"netpass {np_on['device']}", np_on)] + [(p["device"], p) for p in peers]:
        print(f"  {name[:58]:<58} {1e3 * r['total_s']:>10.1f} {rel_l2(r['logits'], ref):>14.2e}")
    print(f"  netpass, first pass over unseen shapes (kernels compiled): {1e3 * np_on['first_pass_s']:.1f} ms; "
          f"passes in order (of which garbage collection): "
          f"{', '.join(f'{1e3 * t:.1f} ({1e3 * g:.1f})' for t, g in np_on['passes_in_order'])} ms")
    print(f"  netpass, one request over the sequence again (median of {REPEATS}): "
          f"{1e3 * np_on['same_request_s']:.1f} ms")
    print(f"\n  host time per node in the loop  {np_on['host_us_per_node']:8.2f} us "
          f"({np_on['loop_nodes']} of the {len(model.get_ordered_ops())} ops run per step: no constants, "
          f"inputs, results or fused ops; {st_on['primitives'] // steps} kernel primitives/step)")
    print(f"  bare pyopencl launch, same run  {bare_us:8.2f} us (enqueue only, arguments set once)")
    print(f"  host time per kernel primitive  {np_on['host_us_per_kernel_primitive']:8.2f} us "
          f"({st_on['kernels_enqueued'] / steps:.1f} kernel launches per step)")
    print(f"  skipped {st_on['skipped']}, fused {st_on['fused']}, set_arguments {st_on['set_arguments']}, "
          f"host waits {st_on['host_waits']}, host fallbacks {st_on['host_fallbacks']}")
    print(f"\n  device allocations over the run: predictor on {st_on['allocations']} "
          f"({st_on['allocated_bytes'] / 2**20:.1f} MiB), off {st_off['allocations']} "
          f"({st_off['allocated_bytes'] / 2**20:.1f} MiB) -> "
          f"{100.0 * st_on['allocations'] / max(st_off['allocations'], 1):.1f}%")
    print(f"\nfp32 GEMM {gemm_n}^3 (MatMul model, median of {reps}): {gemm['kernel_us'] / 1e3:.3f} ms = "
          f"{gemm['tflops']:.2f} TFLOP/s, rel L2 vs numpy {gemm['rel_l2']:.1e}")
    if gemm["cublas_us"]:
        print(f"  cuBLAS fp32 through torch, same run: {gemm['cublas_us'] / 1e3:.3f} ms = "
              f"{gemm['cublas_tflops']:.2f} TFLOP/s (netpass/cuBLAS {gemm['tflops'] / gemm['cublas_tflops']:.2f})")
    print(f"elementwise add {add_n / 2**20:.0f}M floats: {add['kernel_us'] / 1e3:.3f} ms = "
          f"{add['tb_per_s']:.3f} TB/s effective, max abs err {add['max_abs_err']:.1e}")
    if add["torch_us"]:
        print(f"  torch add on CUDA, same run: {add['torch_us'] / 1e3:.3f} ms = {add['torch_tb_per_s']:.3f} TB/s "
              f"(netpass/torch {add['tb_per_s'] / add['torch_tb_per_s']:.2f})")

    report = {
        "device": np_on["device"], "steps": steps, "quick": args.quick,
        "netpass_first_pass_ms": 1e3 * np_on["first_pass_s"],
        "netpass_passes_ms": [1e3 * t for t in np_on["all_s"]],
        "netpass_passes_in_order_ms": [[1e3 * t, 1e3 * g] for t, g in np_on["passes_in_order"]],
        "netpass_same_request_ms": 1e3 * np_on["same_request_s"],
        "launches_per_step": st_on["kernels_enqueued"] / steps,
        "gpt_total_ms": {"netpass": 1e3 * np_on["total_s"],
                         **{p["device"]: 1e3 * p["total_s"] for p in peers}},
        "host_us_per_node": np_on["host_us_per_node"], "loop_nodes": np_on["loop_nodes"],
        "host_us_per_kernel_primitive": np_on["host_us_per_kernel_primitive"],
        "bare_pyopencl_launch_us": bare_us,
        "allocations": {"predictor_on": st_on["allocations"], "predictor_off": st_off["allocations"],
                        "bytes_on": st_on["allocated_bytes"], "bytes_off": st_off["allocated_bytes"]},
        "stats": {k: v for k, v in st_on.items() if isinstance(v, (int, float))},
        "gemm": gemm, "add": add,
        "rel_l2": {"netpass": rel_l2(np_on["logits"], ref),
                   **{p["device"]: rel_l2(p["logits"], ref) for p in peers}},
    }
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "bench_runtime.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
