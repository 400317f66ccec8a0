"""The transformers zoo on a device: correctness and latency over a shape sequence, beside
torch eager on the same modules in the same run.

For each model of ``tools/export_zoo.py`` (tiny random-weight configs): build the module,
export it (or take ``<model>.<exporter>.onnx`` from ``--zoo DIR``, written by the tool from
the same seeded weights), compile it with netpass for ``--device`` and run a shape sequence
(batch 1, every other dynamic axis growing from its smallest to its largest size over
``--steps`` steps) in one infer request:

- correct: every step's outputs within 1e-4 relative L2 of onnxruntime CPU's on the same
  file; without onnxruntime installed, of torch's outputs (float32, TF32 off) instead;
- latency: two untimed passes (kernels built, each shape met twice: the per-binding records
  and step plans a serving loop has), then ``--repeats`` passes, each with a fresh infer
  request; the median pass, in ms per step;
- torch eager on CUDA when ``torch.cuda`` is available (else on the CPU), the same sequence
  and inputs, outputs copied back to the host every step as netpass's are; the median pass.

Prints a markdown table and writes the JSON to ``--out``. Needs torch and transformers;
onnxruntime is optional. ``--quick`` (3 steps, 3 repeats) runs on PoCL in a few minutes::

    python benchmarks/bench_zoo.py --device CPU --quick --out zoo.json
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import export_zoo  # noqa: E402

import netpass  # noqa: E402

REL_L2 = 1e-4


def bench_sequence(spec: export_zoo.ZooSpec, steps: int) -> list[dict[str, int]]:
    """Batch 1 (the first axis), every other axis from its smallest to its largest size."""
    out = []
    for i in range(steps):
        frac = i / max(steps - 1, 1)
        sizes = {a.name: a.sizes()[round(frac * (len(a.sizes()) - 1))] for a in spec.axes[1:]}
        out.append({spec.axes[0].name: 1, **sizes})
    return out


def onnxruntime_outputs(path: Path, feeds: list[dict]) -> list[dict] | None:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return [dict(zip(names, sess.run(None, f))) for f in feeds]


def time_netpass(path: Path, device: str, feeds: list[dict], repeats: int,
                 transformations: str | None) -> dict:
    config = {"TRANSFORMATIONS": transformations} if transformations else None
    compiled = netpass.compile_model(path, device=device, config=config)
    req = compiled.create_infer_request()
    outputs = [req.infer(f) for f in feeds]        # checked by the caller
    for f in feeds:   # every shape met twice, as a serving loop does: records and step plans
        req.infer(f)
    runs = []
    for _ in range(repeats):
        req = compiled.create_infer_request()
        t0 = time.perf_counter()
        for f in feeds:
            req.infer(f)
        runs.append(time.perf_counter() - t0)
    return {"device": compiled.device, "outputs": outputs, "runs_s": runs}


def time_torch(module: Any, spec: export_zoo.ZooSpec, feeds: list[dict], repeats: int) -> dict:
    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    module = module.to(dev)
    args = [tuple(torch.from_numpy(np.ascontiguousarray(f[i.name])) for i in spec.inputs)
            for f in feeds]

    def one_pass() -> list[dict]:
        outs = []
        for a in args:
            got = module(*(t.to(dev) for t in a))
            outs.append({k: v.cpu().numpy() for k, v in zip(spec.outputs, got)})
        return outs

    with torch.no_grad():
        outputs = one_pass()   # warm-up (cuDNN/cuBLAS choices), checked by the caller
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            one_pass()
            runs.append(time.perf_counter() - t0)
    module.to("cpu")
    name = torch.cuda.get_device_name() if dev == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    return {"device": f"torch eager {dev} ({name})", "outputs": outputs, "runs_s": runs}


def worst_rel_l2(got: list[dict], want: list[dict], names) -> float:
    return max(export_zoo.rel_l2(g[k], w[k]) for g, w in zip(got, want) for k in names)


def bench_model(name: str, args: argparse.Namespace, tmp: Path) -> dict:
    spec = export_zoo.SPECS[name]
    row: dict[str, Any] = {"model": name, "exporter": args.exporter, "family": spec.family}
    module = export_zoo.build(spec)
    path = args.zoo / f"{name}.{args.exporter}.onnx" if args.zoo else None
    if path is None or not path.exists():
        try:
            path = export_zoo.export_module(spec, module, args.exporter,
                                            tmp / f"{name}.{args.exporter}.onnx")
        except Exception as e:   # an exporter's failure is reported, the run goes on
            row.update(correct=False, error=f"export: {type(e).__name__}: {str(e)[:200]}")
            return row
    sequence = bench_sequence(spec, args.steps)
    rng = np.random.default_rng(0)
    feeds = [export_zoo.feeds(spec.domain, sizes, rng) for sizes in sequence]
    row["sequence"] = sequence
    # a model that fails (in torch or in netpass) must not end the device run: reported
    try:
        peer = time_torch(module, spec, feeds, args.repeats)
        row["torch_device"] = peer["device"]
        row["torch_ms_per_step"] = 1e3 * float(np.median(peer["runs_s"])) / len(feeds)
        row["torch_runs_s"] = peer["runs_s"]
    except Exception as e:
        peer = None
        row["torch_error"] = f"{type(e).__name__}: {e}"
    want = onnxruntime_outputs(path, feeds)
    row["checked_against"] = "onnxruntime CPU" if want is not None else \
        peer["device"] if peer is not None else "nothing"
    want = want if want is not None else peer["outputs"] if peer is not None else None
    try:
        ours = time_netpass(path, args.device, feeds, args.repeats, args.transformations)
    except Exception as e:
        row.update(correct=False, error=f"{type(e).__name__}: {e}",
                   traceback=traceback.format_exc(limit=4))
        return row
    row["device"] = ours["device"]
    if want is not None:
        row["rel_l2"] = worst_rel_l2(ours["outputs"], want, spec.outputs)
        row["correct"] = row["rel_l2"] <= REL_L2
    row["netpass_ms_per_step"] = 1e3 * float(np.median(ours["runs_s"])) / len(feeds)
    row["netpass_runs_s"] = ours["runs_s"]
    return row


def _cell(row: dict, key: str, fmt: str) -> str:
    return format(row[key], fmt) if key in row else ""


def table(rows: list[dict]) -> str:
    lines = ["| model | exporter | correct | rel. L2 | netpass ms/step | torch ms/step | netpass/torch |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            correct = f"no: {r['error'][:80]}"
        elif "correct" not in r:
            correct = "not checked"
        else:
            correct = "yes" if r["correct"] else "NO"
        if "torch_error" in r:
            correct += f" (torch: {r['torch_error'][:60]})"
        ratio = f"{r['netpass_ms_per_step'] / r['torch_ms_per_step']:.2f}" \
            if "netpass_ms_per_step" in r and "torch_ms_per_step" in r else ""
        lines.append(f"| {r['model']} | {r['exporter']} | {correct} | {_cell(r, 'rel_l2', '.1e')} | "
                     f"{_cell(r, 'netpass_ms_per_step', '.2f')} | "
                     f"{_cell(r, 'torch_ms_per_step', '.2f')} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--device", default="AUTO", help="netpass device: AUTO, GPU or CPU")
    parser.add_argument("--models", nargs="+", choices=list(export_zoo.SPECS), help="default: all")
    parser.add_argument("--exporter", choices=export_zoo.EXPORTERS, default="torchscript")
    parser.add_argument("--zoo", type=Path, help="folder of tools/export_zoo.py exports to use")
    parser.add_argument("--transformations", choices=("NONE", "COMMON", "GNA"),
                        help="netpass's TRANSFORMATIONS (default: compile_model's)")
    parser.add_argument("--steps", type=int, default=16, help="shapes in the sequence")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes (median)")
    parser.add_argument("--quick", action="store_true", help="3 steps, 3 repeats")
    parser.add_argument("--out", type=Path, help="JSON results file")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.repeats = 3, 3
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models or list(export_zoo.SPECS):
            rows.append(bench_model(name, args, Path(tmp)))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    result = {"host": platform.node(), "python": platform.python_version(),
              "steps": args.steps, "repeats": args.repeats,
              "transformations": args.transformations or "compile_model default", "models": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 0 if all(r.get("correct") and "torch_error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
