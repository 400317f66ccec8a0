"""Compute-bound kernels beside their peers in one run (issue 18): GEMM (fp32 SIMT, TF32 and
3xTF32 tensor cores) against cuBLAS, fused attention against torch's SDPA, and a GPT-2-small
prefill against torch eager, every figure checked against a float64 (or torch fp32)
reference.

    python benchmarks/bench_kernels.py [--quick] [--sections gemm,tiles,shapes,splitk,attention,gpt2,models,probe]

- ``gemm``: 4096^3 with the runtime's kernels and tile variants of the tensor-core kernel
  (``kernels.mma``), beside cuBLAS fp32 (TF32 off) and cuBLAS TF32 (torch, CUDA events);
- ``tiles``: the tensor-core tile shapes per GPT-2 shape (what ``kernels.mma_plan.CONFIGS`` picks
  from);
- ``shapes``: the runtime's own choice (``kinds.matmul.matmul_impl``) for M in 1..4096 and K, N in
  768..3072 (B [K, N] constant, as a Linear's weights), per precision, beside cuBLAS;
- ``splitk``: the GPT-2 shapes with 1..8 K slices forced (``kernels.mma_plan.k_splits``) and the
  runtime's own choice, beside cuBLAS;
- ``probe``: whether a ``__local`` kernel argument may exceed the static local-memory limit;
- ``attention``: a fused attention of 12 heads of 64 (additive causal mask, as exports give
  it) for S = 1024 and 4096, flash kernel and the row kernel, beside torch SDPA (causal);
- ``gpt2``: transformers GPT-2 small (random weights, 12 layers, d = 768) on 1024 tokens,
  exported to ONNX (logits of the last position only), netpass wall time per infer and
  kernel time (PROFILING) beside torch eager with SDPA and with eager attention;
- ``models``: torchvision models (``--models``: ResNet-50, ViT-B/16, and the depthwise
  convolutions of MobileNetV2 and ConvNeXt-T; batch 8) beside torch eager, with the 12
  slowest primitives (kind, input shapes, kernels); models with depthwise convolutions also
  with those on the direct kernel (``kinds.convolution.DW_LOCAL`` = 0).

Kernel times are OpenCL profiling events (netpass) and CUDA events (torch), the median of
``--reps`` runs after a warm-up; TFLOP/s count 2 M N K. Writes ``bench_kernels.json`` to
``$OUT`` when set.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from export_decoder import export_last_logits, last_logits  # noqa: E402

from netpass.ops.matmul import MatMul  # noqa: E402
from netpass.runtime import kernels  # noqa: E402
from netpass.runtime.device import Engine, resolve_device_name, select_device  # noqa: E402
from netpass.runtime.impls import Params  # noqa: E402
from netpass.runtime.kernels import mma, mma_plan, tma_gemm  # noqa: E402
from netpass.runtime.kinds import row_of  # noqa: E402
from netpass.runtime.kinds.matmul import matmul_impl  # noqa: E402

F32 = np.dtype(np.float32)
REPORT: dict = {}


def torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def cuda_time(torch, fn, reps: int) -> float:
    """Median seconds of ``fn()`` over ``reps`` runs (CUDA events), after one warm-up."""
    fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return float(np.median(times))


class Gemm:
    """Device buffers of one GEMM problem and a float64 check on sampled entries."""

    def __init__(self, eng, m: int, n: int, k: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.m, self.n, self.k = m, n, k
        self.a = rng.standard_normal((m, k)).astype(np.float32)
        self.b = rng.standard_normal((k, n)).astype(np.float32)
        cl, mf = eng.cl, eng.cl.mem_flags
        self.eng = eng
        self.ab = cl.Buffer(eng.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=self.a)
        self.bb = cl.Buffer(eng.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=self.b)
        self.bt = None
        self.cb = cl.Buffer(eng.context, mf.READ_WRITE, max(m * n * 4, 64))
        self.rows, self.cols = rng.integers(0, m, 256), rng.integers(0, n, 256)
        self.want = np.einsum("ij,ji->i", self.a[self.rows].astype(np.float64),
                              self.b[:, self.cols].astype(np.float64))

    def err(self) -> float:
        """Largest error on the sampled entries relative to the row-column norm product."""
        c = np.full((self.m, self.n), np.nan, np.float32)
        self.eng.cl.enqueue_copy(self.eng.queue, c, self.cb)
        self.eng.queue.finish()
        scale = np.linalg.norm(self.a[self.rows], axis=1) * np.linalg.norm(self.b[:, self.cols], axis=0)
        return float(np.max(np.abs(c[self.rows, self.cols] - self.want) / scale))

    def run(self, src: kernels.Source, gws, lws, ints: list[int], reps: int, b_buf=None) -> float:
        cl = self.eng.cl
        kern = cl.Kernel(self.eng.build(src.text), src.name)
        kern.set_args(self.ab, b_buf or self.bb, self.cb, np.array(ints, np.int32))
        times = []
        for _ in range(reps + 1):
            ev = cl.enqueue_nd_range_kernel(self.eng.queue, kern, gws, lws)
            ev.wait()
            times.append((ev.profile.end - ev.profile.start) * 1e-9)
        return float(np.median(times[1:]))

    def ints(self, b_kmajor: bool = True) -> list[int]:
        m, n, k = self.m, self.n, self.k
        return [0, 0, 0, m, n, k, 1, 0, 0, k, 1, 0, 0] + ([n, 1] if b_kmajor else [1, k])

    def flops(self, t: float) -> float:
        return 2.0 * self.m * self.n * self.k / t / 1e12

    def runtime(self, precision: str, reps: int, weights_nk: bool = False) -> tuple[float, str]:
        """The runtime's own kernels for this MatMul (kinds.matmul.matmul_impl): the time of its
        launches and their name; ``weights_nk``: B given as [N, K] (a FullyConnected's
        weights, ``transpose_b``)."""
        b_shape = (self.n, self.k) if weights_nk else (self.k, self.n)
        if weights_nk and self.bt is None:
            self.bt = self.eng.cl.Buffer(self.eng.context, self.eng.cl.mem_flags.COPY_HOST_PTR,
                                         hostbuf=np.ascontiguousarray(self.b.T))
        b_buf = self.bt if weights_nk else self.bb
        p = Params(row=row_of(MatMul), attrs={"transpose_b": weights_nk},
                   in_shapes=[(self.m, self.k), b_shape],
                     in_dtypes=[F32, F32], out_shapes=[(self.m, self.n)], out_dtypes=[F32], values={},
                     fused=None, extra_shapes=[], extra_dtypes=[], node=None, engine=self.eng, memo={},
                     in_strides=None, precision=precision)
        impl = matmul_impl(p, None)
        cl = self.eng.cl
        t = SimpleNamespace
        mf = cl.mem_flags
        scratch = [cl.Buffer(self.eng.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=b)
                   if isinstance(b, np.ndarray) else cl.Buffer(self.eng.context, mf.READ_WRITE, b.nbytes)
                   for b in impl.buffers]  # (a split-K GEMM's counters start at 0)
        kernels = []
        for ln in impl.launches:
            bufs, ints = ln.args([t(alloc=t(buffer=self.ab), offset=0), t(alloc=t(buffer=b_buf), offset=0)],
                                 [t(alloc=t(buffer=self.cb), offset=0)], [], [t(buffer=b) for b in scratch])
            kern = cl.Kernel(self.eng.build(ln.source.text), ln.source.name)
            kern.set_args(*bufs, np.array(ints, np.int32))
            kernels.append((kern, ln))
        times = []
        for _ in range(reps + 1):
            evs = [cl.enqueue_nd_range_kernel(self.eng.queue, kern, ln.gws, ln.lws) for kern, ln in kernels]
            evs[-1].wait()
            times.append(sum((ev.profile.end - ev.profile.start) * 1e-9 for ev in evs))
        ln = impl.launches[0]
        name = ln.source.name + (f" {ln.lws[0]}x{ln.lws[1]}" if ln.source.name != "gemm_mma" else
                                 " " + _mma_name(ln.source.text))
        if "sk_count" in ln.source.text or len(impl.launches) > 1:
            name += f" split-K {ln.gws[2]}"
        return float(np.median(times[1:])), name


def _mma_name(text: str) -> str:
    d = {ln.split()[1]: ln.split()[2] for ln in text.splitlines() if ln.startswith("#define ") and len(ln.split()) == 3}
    return f"{d.get('BM')}x{d.get('BN')}x{d.get('BK')}/{d.get('STAGES')}st/{d.get('NT')}t"


def ptxas_info(eng, src: kernels.Source) -> str:
    """Registers, spills and local memory of ``src`` from NVIDIA's verbose build log."""
    cl = eng.cl
    try:
        prg = cl.Program(eng.context, src.text).build(options=["-cl-mad-enable", "-cl-nv-verbose"])
        log = prg.get_build_info(eng.device, cl.program_build_info.LOG)
    except Exception as e:
        return f"build failed: {str(e)[:1500]}"
    return " | ".join(ln.strip() for ln in log.splitlines() if "ptxas" in ln and ("Used" in ln or "spill" in ln))


def cublas(torch, m: int, n: int, k: int, reps: int, tf32: bool, seed: int = 0) -> float:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g)
    b = torch.randn(k, n, device="cuda", generator=g)
    try:
        return cuda_time(torch, lambda: a @ b, reps)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def mma_variant(prob: Gemm, cfg, split: int, reps: int, align: str = "rings", b_kmajor: bool = True,
                hi_round: str = "rn"):
    src = mma.gemm_mma(cfg, b_kmajor, split, True, "cp_async", align, [], 0, [], 0, None, hi_round)
    gws, lws = mma_plan.work_sizes(cfg, prob.m, prob.n, 1)
    b_buf = None
    if not b_kmajor:
        if prob.bt is None:
            cl, mf = prob.eng.cl, prob.eng.cl.mem_flags
            prob.bt = cl.Buffer(prob.eng.context, mf.READ_ONLY | mf.COPY_HOST_PTR,
                                hostbuf=np.ascontiguousarray(prob.b.T))
        b_buf = prob.bt
    t = prob.run(src, gws, lws, prob.ints(b_kmajor), reps, b_buf)
    return t, prob.err()


def section_gemm(eng, torch, args) -> None:
    n = 1024 if args.quick else 4096
    prob = Gemm(eng, n, n, n)
    rows = []

    def row(name, t, err, peer=None):
        rows.append({"kernel": name, "ms": 1e3 * t, "tflops": prob.flops(t), "err": err,
                     "vs_peer": peer / t if peer else None})
        ratio = f"{peer / t:6.2f}x" if peer else ""
        print(f"  {name:<46} {1e3 * t:8.3f} ms {prob.flops(t):8.1f} TFLOP/s  err {err:.1e} {ratio}", flush=True)

    print(f"GEMM {n}^3 on {eng.describe()}")
    fp32 = cublas(torch, n, n, n, args.reps, False) if torch else None
    tf32 = cublas(torch, n, n, n, args.reps, True) if torch else None
    if torch:
        rows.append({"kernel": "cuBLAS fp32", "ms": 1e3 * fp32, "tflops": prob.flops(fp32)})
        rows.append({"kernel": "cuBLAS TF32", "ms": 1e3 * tf32, "tflops": prob.flops(tf32)})
        print(f"  cuBLAS fp32 {1e3 * fp32:.3f} ms {prob.flops(fp32):.1f} TFLOP/s; "
              f"cuBLAS TF32 {1e3 * tf32:.3f} ms {prob.flops(tf32):.1f} TFLOP/s")
    src = kernels.gemm_pipelined([], 0, [], 0, True)
    row("gemm_pipelined (fp32 SIMT, cp.async)", prob.run(src, (n // 8, n // 8, 1), (16, 16, 1), prob.ints(), args.reps),
        prob.err(), fp32)
    for precision, peer in (("f32", fp32), ("tf32", tf32)):
        t, name = prob.runtime(precision, args.reps)
        row(f"runtime {precision}: {name}", t, prob.err(), peer)
        t, name = prob.runtime(precision, args.reps, weights_nk=True)
        row(f"runtime {precision}, B [N, K]: {name}", t, prob.err(), peer)
    c128, c64 = mma.MmaConfig(128, 128, 64, 64, 16, 3), mma.MmaConfig(64, 64, 32, 32, 16, 4)
    variants = [  # (config, split, align, B read along n, 3xTF32 head rounding)
        (c128, 1, "rings", True, "rn"),
        (c128, 1, "rings", False, "rn"),
        (mma.MmaConfig(128, 256, 64, 64, 16, 2), 1, "rings", True, "rn"),
        (mma.MmaConfig(128, 64, 64, 32, 16, 4), 1, "rings", True, "rn"),
        (mma.MmaConfig(128, 128, 64, 32, 16, 3), 1, "rings", True, "rn"),
        (c64, 1, "rings", True, "rn"),
        (c128, 3, "rings", True, "rn"),
        (c128, 3, "rings", True, "trunc"),
        (c128, 3, "none", True, "rn"),
        (mma.MmaConfig(128, 256, 64, 64, 16, 2), 3, "rings", True, "rn"),
        (mma.MmaConfig(128, 128, 64, 32, 16, 3), 3, "rings", True, "rn"),
    ]
    if eng.mma != "ptx":
        print("  (no tensor-core kernels on this device)")
        variants = []
    else:
        for cfg, split in ((c128, 1), (c128, 3), (c64, 3)):
            info = ptxas_info(eng, mma.gemm_mma(cfg, True, split, True, "cp_async", "rings", [], 0, [], 0))
            print(f"  ptxas {cfg} split {split}: {info}", flush=True)
            REPORT.setdefault("ptxas", {})[f"{cfg} split {split}"] = info
    for cfg, split, align, bk, hi in variants:
        name = f"mma {'tf32' if split == 1 else '3xtf32 ' + hi} {cfg.bm}x{cfg.bn} w{cfg.wm}x{cfg.wn} " \
            f"st{cfg.stages} {align}" + ("" if bk else " Bt")
        try:
            t, err = mma_variant(prob, cfg, split, args.reps, align, bk, hi)
            row(name, t, err, tf32 if split == 1 else fp32)
        except Exception as e:  # a variant that does not build or run is reported, not fatal
            print(f"  {name}: FAILED {str(e)[:1500]}", flush=True)
            rows.append({"kernel": name, "error": str(e)[:2000]})
    REPORT["gemm"] = {"n": n, "rows": rows}


GPT2_SHAPES = [(768, 2304), (768, 768), (768, 3072), (3072, 768)]  # (K, N) of GPT-2 small's GEMMs


def section_tiles(eng, torch, args) -> None:
    """Tensor-core tile shapes per GPT-2 GEMM shape (M = 128..4096)."""
    cfgs = [mma.MmaConfig(128, 128, 64, 64, 16, 3), mma.MmaConfig(128, 64, 64, 32, 16, 4),
            mma.MmaConfig(64, 128, 32, 64, 16, 4), mma.MmaConfig(64, 64, 32, 32, 16, 4)]
    rows = []
    if eng.mma != "ptx":
        return
    print("tensor-core tile shapes per shape (ms; best marked)")
    for m in ([256] if args.quick else [128, 512, 1024, 4096]):
        for k, n in GPT2_SHAPES:
            prob = Gemm(eng, m, n, k)
            for split in (1, 3):
                times = []
                for cfg in cfgs:
                    try:
                        t, err = mma_variant(prob, cfg, split, args.reps)
                        times.append((t, cfg, err))
                    except Exception as e:
                        print(f"  {cfg}: FAILED {str(e)[:200]}")
                best = min(times, key=lambda x: x[0])
                txt = "  ".join(f"{c.bm}x{c.bn}w{c.wm}x{c.wn}:{1e3 * t:.3f}{'*' if c == best[1] else ''}"
                                for t, c, _ in times)
                print(f"  M={m:<5} K={k:<5} N={n:<5} split {split}: {txt}", flush=True)
                rows.append({"m": m, "k": k, "n": n, "split": split,
                             "times_ms": {f"{c.bm}x{c.bn}w{c.wm}x{c.wn}st{c.stages}": 1e3 * t for t, c, _ in times},
                             "max_err": max(e for _, _, e in times)})
    REPORT["tiles"] = rows


def section_shapes(eng, torch, args) -> None:
    """The runtime's choice per shape and precision, beside cuBLAS."""
    rows = []
    print("runtime GEMM per shape (ms; ratio = cuBLAS time / netpass time)")
    for m in ([1, 16, 256] if args.quick else [1, 16, 128, 512, 1024, 4096]):
        for k, n in GPT2_SHAPES:
            prob = Gemm(eng, m, n, k)
            r = {"m": m, "k": k, "n": n}
            line = f"  M={m:<5} K={k:<5} N={n:<5}"
            for precision, tf32 in (("f32", False), ("tf32", True)):
                t, name = prob.runtime(precision, args.reps)
                err = prob.err()
                peer = cublas(torch, m, n, k, args.reps, tf32) if torch else None
                r[precision] = {"ms": 1e3 * t, "kernel": name, "err": err,
                                "cublas_ms": 1e3 * peer if peer else None}
                line += f" | {precision}: {1e3 * t:7.3f} ({name}, err {err:.0e})"
                if peer:
                    line += f" cuBLAS {1e3 * peer:7.3f} = {peer / t:4.2f}x"
            print(line, flush=True)
            rows.append(r)
    REPORT["shapes"] = rows


def section_splitk(eng, torch, args) -> None:
    """Split-K slices per GPT-2 shape: the runtime's kernels with 1..8 K slices forced
    (kernels.mma_plan.k_splits), and the runtime's own choice, beside cuBLAS."""
    if eng.mma != "ptx" and not args.quick:
        return
    rows = []
    saved = mma_plan.k_splits
    print("split-K per shape (ms, GEMM + reduction; * = fastest; cuBLAS beside)")
    shapes = [(3072, 768), (768, 768), (768, 2304), (768, 3072)]
    for m in ([256] if args.quick else [128, 512, 1024, 4096]):
        for k, n in shapes:
            prob = Gemm(eng, m, n, k)
            for precision, tf32 in (("f32", False), ("tf32", True)):
                times = {}
                for s in (1, 2, 3, 4, 6, 8):
                    def forced(cfg, M, N, K_, nb, cus, s=s):
                        length = mma_plan._cdiv(mma_plan._cdiv(K_, s), cfg.bk) * cfg.bk
                        n_ = mma_plan._cdiv(K_, length)
                        return (n_, length) if n_ > 1 else (1, K_)
                    mma_plan.k_splits = forced
                    try:
                        times[s] = prob.runtime(precision, args.reps)[0]
                    finally:
                        mma_plan.k_splits = saved
                own, name = prob.runtime(precision, args.reps)
                err = prob.err()
                peer = cublas(torch, m, n, k, args.reps, tf32) if torch else None
                best = min(times, key=times.get)
                txt = " ".join(f"{s}:{1e3 * t:.3f}{'*' if s == best else ''}" for s, t in times.items())
                line = f"  M={m:<5} K={k:<5} N={n:<5} {precision:<4} {txt} | runtime {1e3 * own:.3f} ({name})"
                if peer:
                    line += f" cuBLAS {1e3 * peer:.3f} = {peer / own:.2f}x"
                print(line, flush=True)
                rows.append({"m": m, "k": k, "n": n, "precision": precision, "err": err,
                             "ms_by_slices": {s: 1e3 * t for s, t in times.items()}, "runtime_ms": 1e3 * own,
                             "runtime_kernel": name, "cublas_ms": 1e3 * peer if peer else None})
    REPORT["splitk"] = rows


def section_probe(eng, torch, args) -> None:
    """Whether a ``__local`` kernel argument may exceed the device's static local memory
    (48 KB on NVIDIA's OpenCL): a kernel filling and summing a dynamic local buffer."""
    cl = eng.cl
    limit = int(eng.device.local_mem_size)
    src = """__kernel void probe(__global float* out, __local float* buf, int n) {
      const int t = get_local_id(0);
      for (int i = t; i < n; i += get_local_size(0)) buf[i] = (float)i;
      barrier(CLK_LOCAL_MEM_FENCE);
      if (t == 0) { float s = 0.0f; for (int i = 0; i < n; ++i) s += buf[i]; out[0] = s; } }"""
    prg = cl.Program(eng.context, src).build()
    out = cl.Buffer(eng.context, cl.mem_flags.READ_WRITE, 4)
    r = {"local_mem_size": limit}
    for kb in (32, 47, 48, 64, 96, 160, 224):
        n = kb * 256
        kern = cl.Kernel(prg, "probe")
        try:
            kern.set_args(out, cl.LocalMemory(4 * n), np.int32(n))
            cl.enqueue_nd_range_kernel(eng.queue, kern, (128,), (128,)).wait()
            got = np.zeros(1, np.float32)
            cl.enqueue_copy(eng.queue, got, out)
            eng.queue.finish()
            ok = abs(float(got[0]) - n * (n - 1) / 2) <= 1e-3 * n * n
            r[f"{kb}KB"] = "ran" if ok else f"wrong sum {got[0]}"
        except Exception as e:
            r[f"{kb}KB"] = f"{type(e).__name__}: {str(e)[:120]}"
    print(f"dynamic local memory (device local_mem_size {limit}): " +
          ", ".join(f"{k} {v}" for k, v in r.items() if k != "local_mem_size"), flush=True)
    REPORT["probe"] = r


def attention_model(heads: int, d: int):
    """q, k, v [1, heads, S, d] and an additive mask [1, 1, S, S]: (q k^T) * d^-0.5 + mask,
    softmax, @ v (what exports of scaled_dot_product_attention give)."""
    from netpass import Model, opset
    q, k, v = (opset.parameter([1, heads, -1, d], np.float32, name=n) for n in "qkv")
    mask = opset.parameter([1, 1, -1, -1], np.float32, name="mask")
    s = opset.add(opset.multiply(opset.matmul(q, k, False, True), np.float32(d ** -0.5)), mask)
    y = opset.matmul(opset.softmax(s, -1), v, False, False)
    return Model([opset.result(y, name="y")], [q, k, v, mask])


def kernel_us(req, kind_ids) -> float:
    info = req.get_profiling_info()
    return sum(us for pid, us in info.items() if pid in kind_ids)


def section_attention(eng, torch, args) -> None:
    from netpass.runtime import compile_program
    from netpass.runtime.kinds import attention as attention_kind
    heads, d = 12, 64
    model = attention_model(heads, d)
    if eng.mma == "ptx":
        from netpass.runtime.kernels import Stage, flash
        ops = [Stage("({0} * 0.125f)", [("x", None)], "float"), Stage("({0} + {1})", [("x", None), ("in", 0)], "float")]
        for split in (1, 3):
            info = ptxas_info(eng, flash.flash_attention(flash.config_for(d, split), d, d, split, True, True, ops, [F32], False))
            print(f"  ptxas flash split {split}: {info}", flush=True)
            REPORT.setdefault("ptxas", {})[f"flash split {split}"] = info
    rows = []
    print("fused attention, 12 heads of 64, causal additive mask (ms)")
    for s in ([256] if args.quick else [1024, 4096]):
        rng = np.random.default_rng(0)
        q, k, v = (rng.standard_normal((1, heads, s, d)).astype(np.float32) for _ in range(3))
        mask = np.triu(np.full((s, s), -np.inf, np.float32), 1)[None, None]
        feeds = {"q": q, "k": k, "v": v, "mask": mask}
        r = {"s": s}
        sc = q[0, :2].astype(np.float64) @ k[0, :2].astype(np.float64).transpose(0, 2, 1) * d ** -0.5 + mask[0]
        e = np.exp(sc - sc.max(-1, keepdims=True))
        ref = e / e.sum(-1, keepdims=True) @ v[0, :2].astype(np.float64)  # the first two heads
        del sc, e
        if torch:
            tq, tk, tv = (torch.from_numpy(x).cuda() for x in (q, k, v))
            f = torch.nn.functional.scaled_dot_product_attention
            r["torch_sdpa_causal_ms"] = 1e3 * cuda_time(torch, lambda: f(tq, tk, tv, is_causal=True), args.reps)
            tm = torch.from_numpy(mask).cuda()
            r["torch_sdpa_mask_ms"] = 1e3 * cuda_time(torch, lambda: f(tq, tk, tv, attn_mask=tm), args.reps)
        for label, precision, min_m in (("flash f32", "f32", attention_kind.FLASH_MIN_M), ("flash tf32", "tf32", attention_kind.FLASH_MIN_M),
                                        ("row kernel", "f32", 1 << 30)):
            saved = attention_kind.FLASH_MIN_M
            attention_kind.FLASH_MIN_M = min_m
            try:
                cm = compile_program(model, args.device, {"PROFILING": True, "INFERENCE_PRECISION_HINT": precision})
                req = cm.create_infer_request()
                ids = {n.id for n in cm.program.nodes if n.kind == "FusedAttention"}
                out = req.infer(feeds)["y"]
                base = kernel_us(req, ids)
                per = []
                for _ in range(args.reps):
                    req.infer(feeds)
                    now = kernel_us(req, ids)
                    per.append(now - base)
                    base = now
                ms = statistics.median(per) / 1e3
                err = float(np.linalg.norm(out[0, :2] - ref) / np.linalg.norm(ref))
                r[label] = {"ms": ms, "rel_l2": err}
                print(f"  S={s}: {label:<11} {ms:8.3f} ms  rel L2 {err:.1e}", flush=True)
            except Exception as e:
                print(f"  S={s}: {label} FAILED {str(e)[:300]}", flush=True)
                r[label] = {"error": str(e)[:2000]}
            finally:
                attention_kind.FLASH_MIN_M = saved
        if torch:
            print(f"  S={s}: torch SDPA causal {r['torch_sdpa_causal_ms']:.3f} ms, with the mask "
                  f"{r['torch_sdpa_mask_ms']:.3f} ms", flush=True)
        rows.append(r)
    REPORT["attention"] = rows


def kernel_ms_by_kind(onnx_model, feeds, device: str, precision: str, nodes: list | None = None) -> dict:
    """Kernel milliseconds per primitive kind of one warm inference (PROFILING); with
    ``nodes`` a list, also (ms, kind, input shapes, launches) per primitive appended to it."""
    import netpass
    cm = netpass.compile_model(onnx_model, device, {"TRANSFORMATIONS": "NONE", "PROFILING": True,
                                                   "INFERENCE_PRECISION_HINT": precision})
    req = cm.create_infer_request()
    req.infer(feeds)
    rreq = req._runtime_request
    base = dict(rreq.get_profiling_info())
    req.infer(feeds)
    kinds = {n.id: n.kind for n in cm.runtime.program.nodes}
    insts = {inst.node.id: inst for inst in rreq.network.insts}
    by_kind: dict = {}
    for pid, us in rreq.get_profiling_info().items():
        k = kinds.get(pid, "?")
        ms = (us - base.get(pid, 0.0)) / 1e3
        by_kind[k] = by_kind.get(k, 0.0) + ms
        inst = insts.get(pid)
        if nodes is not None and inst is not None:
            names = [ln.source.name for ln in inst.impl.launches] if inst.impl is not None else []
            nodes.append((ms, k, [list(s) for s in inst.in_shapes or ()], names))
    if nodes is not None:
        nodes.sort(key=lambda x: -x[0])
    return dict(sorted(by_kind.items(), key=lambda x: -x[1]))


def gpt2_torch(layers: int, d: int, heads: int, vocab: int, attn: str):
    """transformers' GPT2LMHeadModel (random weights) with ``attn`` attention, or None."""
    import torch
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return None
    cfg = GPT2Config(vocab_size=vocab, n_positions=1024, n_embd=d, n_layer=layers, n_head=heads,
                     bos_token_id=0, eos_token_id=0, attn_implementation=attn)
    torch.manual_seed(0)
    return GPT2LMHeadModel(cfg).eval()


def section_gpt2(eng, torch_cuda_mod, args) -> None:
    import torch

    import netpass
    layers, d, heads, vocab, seq = (2, 128, 4, 1000, 128) if args.quick else (12, 768, 12, 50257, 1024)
    model = gpt2_torch(layers, d, heads, vocab, "sdpa")
    if model is None:
        print("gpt2: transformers is not installed")
        return

    t0 = time.perf_counter()
    exported = export_last_logits(model, vocab)
    export_s = time.perf_counter() - t0
    onnx_model = netpass.read_model(exported)
    prompt = np.random.default_rng(0).integers(0, vocab, (1, seq))
    feeds = {"input_ids": prompt, "attention_mask": np.ones_like(prompt)}
    r = {"layers": layers, "d": d, "seq": seq, "export_s": export_s}
    dev = "cuda" if torch_cuda_mod else "cpu"
    tm = last_logits(model).eval().to(dev)  # (the exporter restores the wrapper's train mode)
    tids = torch.from_numpy(prompt).to(dev)
    tmask = torch.ones_like(tids)
    with torch.no_grad():
        want = tm(tids, tmask).double().cpu().numpy()
    # (label, precision, mma_plan.F32_SPLIT, tma_gemm.F32_SPLIT)
    variants = [("netpass f32 (3xTF32)", "f32", 3, 3), ("netpass tf32", "tf32", 3, 3),
                ("netpass f32 (3xTF32, no TMA)", "f32", 3, None)]
    if args.simt:
        variants.append(("netpass f32 SIMT", "f32", None, None))
    for label, precision, f32_split, tma_split in variants:
        mma_plan.F32_SPLIT, tma_gemm.F32_SPLIT = f32_split, tma_split
        try:
            t0 = time.perf_counter()
            cm = netpass.compile_model(onnx_model, args.device, {"TRANSFORMATIONS": "NONE",
                                                           "INFERENCE_PRECISION_HINT": precision})
            compile_s = time.perf_counter() - t0
            req = cm.create_infer_request()
            out = req.infer(feeds)["logits"]
            walls = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                req.infer(feeds)
                walls.append(time.perf_counter() - t0)
            err = float(np.linalg.norm(out - want) / np.linalg.norm(want))
            stats = req._runtime_request.stats
            launches = stats["kernels_enqueued"] / stats["infers"]
            nodes: list = []
            by_kind = kernel_ms_by_kind(onnx_model, feeds, args.device, precision, nodes)
            total = sum(by_kind.values())
            r[label] = {"wall_ms": 1e3 * statistics.median(walls), "kernel_ms": total,
                        "rel_l2_vs_torch_fp32": err, "compile_s": compile_s,
                        "kernel_ms_by_kind": by_kind, "launches_per_infer": launches,
                        "top_primitives": nodes[:40]}
            for ms, kind, shapes, names in nodes[:14]:
                print(f"    {ms:7.3f} ms {kind} {shapes} {names}", flush=True)
            top = ", ".join(f"{k} {v:.2f}" for k, v in list(by_kind.items())[:7])
            print(f"  {label}: wall {r[label]['wall_ms']:.2f} ms, kernels {total:.2f} ms ({top}), "
                  f"{launches:.0f} launches, rel L2 {err:.1e}, compiled in {compile_s:.1f} s",
                  flush=True)
        except Exception:
            print(f"  {label} FAILED\n{traceback.format_exc()[-1500:]}", flush=True)
            r[label] = {"error": traceback.format_exc()[-2000:]}
        finally:
            mma_plan.F32_SPLIT = tma_gemm.F32_SPLIT = 3
    if torch_cuda_mod:
        for label, attn, tf32 in (("torch sdpa fp32", "sdpa", False), ("torch eager-attn fp32", "eager", False),
                                  ("torch sdpa tf32", "sdpa", True)):
            m = last_logits(gpt2_torch(layers, d, heads, vocab, attn)).eval().cuda()
            torch.backends.cuda.matmul.allow_tf32 = tf32
            with torch.no_grad():
                ms = 1e3 * cuda_time(torch, lambda: m(tids, tmask), args.reps)
            torch.backends.cuda.matmul.allow_tf32 = False
            r[label] = {"ms": ms}
            print(f"  {label}: {ms:.2f} ms", flush=True)
    REPORT["gpt2"] = r


def section_models(eng, torch_cuda_mod, args) -> None:
    """torchvision models (random weights, batch 8, 224x224) beside torch eager."""
    import onnx
    import torch

    import netpass
    from netpass.runtime.kinds import convolution as conv_kind
    try:
        import torchvision
    except ImportError:
        print("models: torchvision is not installed")
        return
    batch = 2 if args.quick else 8
    out = {}
    for name in args.models.split(","):
        torch.manual_seed(0)
        torch.backends.mha.set_fastpath_enabled(False)  # exportable MultiheadAttention
        m = getattr(torchvision.models, name)(weights=None).eval()
        if name == "vit_b_16":  # torchvision zeroes the head: the outputs would all be its bias
            torch.nn.init.normal_(m.heads.head.weight, std=0.02)
        x = torch.randn(batch, 3, 224, 224)
        buf = io.BytesIO()
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(m, (x,), buf, dynamo=False, opset_version=17, input_names=["x"], output_names=["y"])
        m.eval()
        feeds = {"x": x.numpy()}
        r = {}
        dev = "cuda" if torch_cuda_mod else "cpu"
        tm, tx = m.to(dev), x.to(dev)
        torch.backends.cudnn.allow_tf32 = False  # a float32 reference (cuDNN's default is TF32)
        with torch.no_grad():
            want = tm(tx).double().cpu().numpy()
        onnx_model = netpass.read_model(buf.getvalue())
        dw = conv_kind.DW_LOCAL
        variants = [("netpass f32", "f32", dw), ("netpass tf32", "tf32", dw)]
        if any(n.op_type == "Conv" and any(a.name == "group" and a.i > 1 for a in n.attribute)
               for n in onnx.load_from_string(buf.getvalue()).graph.node):
            variants.append(("netpass f32, direct depthwise", "f32", 0))
        for label, precision, dw_local in variants:
            conv_kind.DW_LOCAL = dw_local
            try:
                cm = netpass.compile_model(onnx_model, args.device, {"TRANSFORMATIONS": "NONE",
                                                                     "INFERENCE_PRECISION_HINT": precision})
                req = cm.create_infer_request()
                got = req.infer(feeds)["y"]
                walls = []
                for _ in range(args.reps):
                    t0 = time.perf_counter()
                    req.infer(feeds)
                    walls.append(time.perf_counter() - t0)
                # the input already on the device, as torch's is (no host copy per infer)
                on_device = {"x": cm.create_device_tensor(feeds["x"])}
                dev_walls = []
                for _ in range(args.reps):
                    t0 = time.perf_counter()
                    req.infer(on_device)
                    dev_walls.append(time.perf_counter() - t0)
                err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
                nodes: list = []
                by_kind = kernel_ms_by_kind(onnx_model, feeds, args.device, precision, nodes)
                r[label] = {"wall_ms": 1e3 * statistics.median(walls),
                            "wall_ms_device_input": 1e3 * statistics.median(dev_walls),
                            "rel_l2": err,
                            "kernel_ms": sum(by_kind.values()), "kernel_ms_by_kind": by_kind,
                            "top_primitives": nodes[:40]}
                for ms, kind, shapes, names in nodes[:12]:
                    print(f"    {ms:7.3f} ms {kind} {shapes} {names}", flush=True)
                top = ", ".join(f"{k} {v:.2f}" for k, v in list(by_kind.items())[:6])
                print(f"  {name} {label}: {r[label]['wall_ms']:.2f} ms, input on the device "
                      f"{r[label]['wall_ms_device_input']:.2f} ms (kernels {sum(by_kind.values()):.2f}: {top}), "
                      f"rel L2 {err:.1e}", flush=True)
            except Exception:
                print(f"  {name} {label} FAILED\n{traceback.format_exc()[-1500:]}", flush=True)
                r[label] = {"error": traceback.format_exc()[-2000:]}
            finally:
                conv_kind.DW_LOCAL = variants[0][2]
        if torch_cuda_mod:
            for label, tf32 in (("torch fp32", False), ("torch tf32", True)):
                torch.backends.cuda.matmul.allow_tf32 = tf32
                torch.backends.cudnn.allow_tf32 = tf32
                with torch.no_grad():
                    ms = 1e3 * cuda_time(torch, lambda: tm(tx), args.reps)
                r[label] = {"ms": ms}
                print(f"  {name} {label}: {ms:.2f} ms", flush=True)
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = True
        out[name] = r
    REPORT["models"] = out


SECTIONS = {"gemm": section_gemm, "gpt2": section_gpt2, "attention": section_attention,
            "models": section_models, "shapes": section_shapes, "tiles": section_tiles,
            "splitk": section_splitk, "probe": section_probe}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="GPU")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--simt", action="store_true", help="gpt2: also without tensor cores for float32")
    ap.add_argument("--models", default="resnet50,vit_b_16,mobilenet_v2,convnext_tiny")
    args = ap.parse_args()
    eng = Engine.get(select_device(resolve_device_name(args.device)), profiling=True)
    torch = torch_cuda()
    REPORT["device"] = eng.describe()
    REPORT["mma"], REPORT["cp_async"] = eng.mma, eng.cp_async
    if torch:
        REPORT["torch"] = f"{torch.__version__} {torch.cuda.get_device_name()}"
    print(f"{eng.describe()}; mma {eng.mma!r}, cp.async {eng.cp_async}; torch {REPORT.get('torch')}", flush=True)
    for name in args.sections.split(","):
        t0 = time.perf_counter()
        try:
            SECTIONS[name](eng, torch, args)
        except Exception:
            print(f"section {name} FAILED\n{traceback.format_exc()[-3000:]}", flush=True)
        print(f"[{name}: {time.perf_counter() - t0:.1f} s]", flush=True)
        out = os.environ.get("OUT")
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / "bench_kernels.json").write_text(json.dumps(REPORT, indent=1, default=str))


if __name__ == "__main__":
    main()
