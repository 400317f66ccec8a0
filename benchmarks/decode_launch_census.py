"""Launches of one decode step per model type and exporter: the test zoo's decoders
(``tests/models/hf_decoders.py``: transformers model types at 2 layers, random weights),
exported by TorchScript and by dynamo, made stateful, compiled; after an 8-token prompt and
one warm step, the kernels one decode step enqueues, by kernel, with its host waits and host
fallbacks. A model type whose dynamo export takes many more launches than its TorchScript one
is a pattern the runtime does not take yet (the fourteenth session found the dynamo exports'
keys transposed by way of 3-D, their unflatten reshapes and the mask's GatherND this way).

    python benchmarks/decode_launch_census.py [--exporters torchscript,dynamo] [--device CPU]
                                              [ARCH ...]
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import io
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests" / "models"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_decode import step_feeds  # noqa: E402

import netpass  # noqa: E402
from netpass.generation import stateful_decoder  # noqa: E402
from netpass.runtime import launcher  # noqa: E402

DEFAULT_ARCHS = ("gpt2", "llama", "qwen3", "mistral", "phi3", "gemma", "gemma2", "granite",
                 "olmo2", "stablelm", "gpt_neox", "falcon", "gptj", "opt", "phi", "starcoder2")


def _count_launches(counts: collections.Counter) -> None:
    """Count every launch by kernel name (both launch paths of both launchers)."""
    for cls in (launcher.Launcher, launcher.DirectLauncher):
        for name in ("launch", "launch_ordered"):
            if name not in cls.__dict__:
                continue
            original = cls.__dict__[name]

            def counted(self, h, ln, *rest, _original=original):
                counts[h.kernel.function_name] += 1
                return _original(self, h, ln, *rest)
            setattr(cls, name, counted)


def census(arch: str, exporter: str, device: str, counts: collections.Counter) -> dict:
    """One decode step's launches (total and by kernel), host waits and fallbacks."""
    from hf_decoders import export_arch
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        dec = export_arch(arch, exporter)
    model = stateful_decoder(netpass.read_model(dec.onnx))
    req = netpass.compile_model(model, device, {"TRANSFORMATIONS": "NONE"}).create_infer_request()
    names = {n for i in model.inputs for n in i.get_names()}
    req.infer(step_feeds(np.arange(1, 9, dtype=np.int64)[None], 0, names))
    req.infer(step_feeds(np.array([[3]], np.int64), 8, names))
    before = dict(req.stats)
    counts.clear()
    req.infer(step_feeds(np.array([[4]], np.int64), 9, names))
    return {"launches": req.stats["kernels_enqueued"] - before["kernels_enqueued"],
            "host_waits": req.stats["host_waits"] - before["host_waits"],
            "host_fallbacks": req.stats["host_fallbacks"] - before["host_fallbacks"],
            "by_kernel": dict(sorted(counts.items()))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archs", nargs="*", default=list(DEFAULT_ARCHS))
    ap.add_argument("--exporters", default="torchscript,dynamo")
    ap.add_argument("--device", default="CPU")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    counts: collections.Counter = collections.Counter()
    _count_launches(counts)
    print(f"{'model type':14s} {'exporter':11s} launches waits fallbacks  by kernel")
    for arch in args.archs:
        for exporter in args.exporters.split(","):
            try:
                r = census(arch, exporter, args.device, counts)
            except Exception as e:  # (an export or a model type this runtime cannot take)
                print(f"{arch:14s} {exporter:11s} {type(e).__name__}: {str(e)[:100]}", flush=True)
                continue
            print(f"{arch:14s} {exporter:11s} {r['launches']:8d} {r['host_waits']:5d} "
                  f"{r['host_fallbacks']:9d}  {r['by_kernel']}", flush=True)


if __name__ == "__main__":
    main()
