"""Where a GPT-2 prefill's kernel time goes (issue 18): per-node kernel times of a 1024-token
prompt (profiling events, median of 5 inferences) with each node's launches (kernel, work
sizes, tile and loop of a tensor-core GEMM), the kernels' registers and spills (NVIDIA's
verbose build log), and how a projection's time follows M with the runtime's own choice.

    python benchmarks/profile_prefill.py [--device GPU] [--layers 2] [--seq 1024] [--top 16]
        [--sources DIR] [--m-scaling] [--tma-unroll 4,8,16]

``--tma-unroll 4,8,16`` profiles the TF32 prefill again with each unroll of the TMA GEMM's
epilogue stores (``kernels.tma_gemm.EP_UNROLL``). ``--sources DIR`` writes each distinct kernel source there; ``--m-scaling`` times the runtime's
GEMM for GPT-2's projection shapes over M = 256..2048 and fixed tiles over M (whether a
projection's time follows its work or its rounds of tiles over the compute units).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_kernels as bk

import netpass
from netpass.runtime.device import Engine, resolve_device_name, select_device
from netpass.runtime.kernels import mma, tma_gemm
from netpass.runtime.kernels.common import memoized


def tma_remade(**constants: int) -> None:
    """The TMA GEMM's module ``constants`` (EP_UNROLL=8, ...) set and its sources made again
    from now on."""
    for name, value in constants.items():
        setattr(tma_gemm, name, value)
    tma_gemm.gemm_tma = memoized(tma_gemm.gemm_tma.__wrapped__)


def profile_nodes(device: str, model, feeds, precision: str, top: int, seen: dict) -> None:
    cm = netpass.compile_model(model, device, {"TRANSFORMATIONS": "NONE", "PROFILING": True,
                                              "INFERENCE_PRECISION_HINT": precision})
    req = cm.create_infer_request()
    req.infer(feeds)
    rreq = req._runtime_request
    times: dict = {}
    for _ in range(5):
        base = dict(rreq.get_profiling_info())
        req.infer(feeds)
        for pid, us in rreq.get_profiling_info().items():
            times.setdefault(pid, []).append((us - base.get(pid, 0.0)) / 1e3)
    kinds = {n.id: n.kind for n in cm.runtime.program.nodes}
    insts = {inst.node.id: inst for inst in rreq.network.insts}
    rows = sorted(((float(np.median(v)), pid) for pid, v in times.items()), reverse=True)
    print(f"== {precision}: kernels {sum(r[0] for r in rows):.3f} ms", flush=True)
    for ms, pid in rows[:top]:
        inst = insts.get(pid)
        launches = []
        for ln in (inst.impl.launches if inst is not None and inst.impl is not None else ()):
            name = seen.setdefault(ln.source.text, f"{ln.source.name}_{len(seen)}")
            if ln.source.name == "gemm_mma":
                text = ln.source.text
                name += " " + bk._mma_name(text) + (" pipe" if "cs = cs + 1" in text else "")
            launches.append(f"{name} gws={ln.gws} lws={ln.lws}")
        shapes = [list(s) for s in (inst.in_shapes or ())] if inst is not None else []
        print(f"  {ms:7.3f} ms {kinds.get(pid)} {shapes} {launches}", flush=True)


def m_scaling(eng) -> None:
    for n, k in ((3072, 768), (768, 768), (2304, 768)):
        for precision in ("tf32", "f32"):
            cells = []
            for m in (256, 512, 640, 768, 896, 1024, 1152, 1280, 2048):
                t, name = bk.Gemm(eng, m, n, k).runtime(precision, 10)
                cells.append(f"M={m}:{1e3 * t:.3f}({name.split()[1]})")
            print(f"N={n} K={k} {precision}: " + "  ".join(cells), flush=True)
    for cfg in (mma.MmaConfig(128, 128, 64, 64, 16, 3), mma.MmaConfig(64, 64, 32, 32, 16, 4)):
        for split in (1, 3):
            cells = [f"M={m}:{1e3 * bk.mma_variant(bk.Gemm(eng, m, 3072, 768), cfg, split, 10)[0]:.3f}"
                     for m in (512, 768, 1024, 1280)]
            print(f"{cfg.bm}x{cfg.bn} tiles, split {split}, N=3072 K=768: " + "  ".join(cells),
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="GPU")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--top", type=int, default=16)
    ap.add_argument("--sources", type=Path, help="write each distinct kernel source here")
    ap.add_argument("--m-scaling", action="store_true")
    ap.add_argument("--tma-unroll", default="")
    args = ap.parse_args()
    eng = Engine.get(select_device(resolve_device_name(args.device)), profiling=True)
    print(eng.describe(), flush=True)
    vocab = 50257
    model = netpass.read_model(bk.export_last_logits(bk.gpt2_torch(args.layers, 768, 12, vocab,
                                                                   "sdpa"), vocab))
    prompt = np.random.default_rng(0).integers(0, vocab, (1, args.seq))
    feeds = {"input_ids": prompt, "attention_mask": np.ones_like(prompt)}
    seen: dict = {}
    for precision in ("f32", "tf32"):
        profile_nodes(args.device, model, feeds, precision, args.top, seen)
    for text, name in seen.items():
        if args.sources:
            args.sources.mkdir(parents=True, exist_ok=True)
            (args.sources / f"{name}.cl").write_text(text)
        if eng.mma == "ptx" and ("gemm" in name or "flash" in name):
            print(name, bk.ptxas_info(eng, SimpleNamespace(text=text)), flush=True)
    for unroll in filter(None, args.tma_unroll.split(",")):
        tma_remade(EP_UNROLL=int(unroll))
        print(f"TMA epilogue unrolled {unroll}:", flush=True)
        profile_nodes(args.device, model, feeds, "tf32", args.top, seen)
    if args.m_scaling and eng.mma == "ptx":
        m_scaling(eng)


if __name__ == "__main__":
    main()
