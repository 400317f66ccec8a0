"""Where a stateful GPT-2's decode step spends its time on a device: kernel time per primitive
(OpenCL profiling events) for the prefill and for one decode step, launches per token by kind,
and the host time of a decode step beside the device time it enqueues.

    python benchmarks/profile_decode.py [--quick] [--arch gpt2|llama|...] [--device GPU]
                                        [--prompt 128] [--steps 16] [--cprofile 32]
                                        [--next-token]

``--cprofile N``: N decode steps under cProfile, their host time by function (own time per
step), the OpenCL calls (launch, write, read) apart from the Python around them.

The model is bench_decode's (``tools/export_decoder.py``, GPT-2 small's config unless
``--quick``; ``--arch llama``: bench_decode's LLaMA). Prints the tables and writes ``profile_decode.json`` to ``$OUT`` when set.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_decode import load_or_export, step_feeds  # noqa: E402

import netpass  # noqa: E402
from netpass.generation import stateful_decoder, with_next_token  # noqa: E402


def _times(req) -> dict[str, float]:
    return dict(req.stats.get("primitive_times_us", {}))


def _delta(after: dict, before: dict) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}


def _cprofile(run, n: int, what: str) -> list:
    """cProfile of ``n`` calls of ``run(profile)`` (which enables ``profile`` around the part to
    measure): the functions by own time per call (the OpenCL calls, launches, writes, flushes
    and waits apart from the Python around them). Prints the top 25; returns (function, calls,
    own ms per call)."""
    import cProfile
    import pstats
    prof = cProfile.Profile()
    for _ in range(n):
        run(prof)
    rows = []
    for (path, line, name), (_, calls, own, _, _) in pstats.Stats(prof).stats.items():
        rows.append((f"{Path(path).name}:{line}({name})", calls / n, 1e3 * own / n))
    rows.sort(key=lambda r: -r[2])
    total = sum(r[2] for r in rows)
    print(f"host time of {what} under cProfile: {total:.3f} ms; by own time:")
    for name, calls, ms in rows[:25]:
        print(f"    {ms:8.3f} ms  {calls:7.1f} calls  {name}")
    return rows[:60]


def _host_profile(req, prompt: np.ndarray, steps: int, names: set) -> list:
    """cProfile of ``steps`` decode steps after a prompt (:func:`_cprofile`)."""
    req.reset_state()
    out = req.infer(step_feeds(prompt, 0, names))
    state = [prompt.shape[1], out["logits"][:, -1].argmax(-1)[:, None]]

    def step(prof) -> None:
        feeds = step_feeds(state[1], state[0], names)
        prof.enable()
        out = req.infer(feeds)
        prof.disable()
        state[0] += 1
        state[1] = out["logits"][:, -1].argmax(-1)[:, None]
    return _cprofile(step, steps, "a decode step")


def _prefill_profile(req, prompt: np.ndarray, n: int, names: set) -> tuple[float, list]:
    """Time to first token as a generation sees it (``reset_state`` then the prompt, outputs
    read): the median wall of ``n`` and cProfile of ``n`` more (:func:`_cprofile`)."""
    walls = []
    for _ in range(n):
        t0 = time.perf_counter()
        req.reset_state()
        req.infer(step_feeds(prompt, 0, names))
        walls.append(time.perf_counter() - t0)
    wall = statistics.median(walls)
    print(f"prefill {prompt.shape[1]} tokens after reset_state: wall {1e3 * wall:.3f} ms (median "
          f"of {n})")

    def prefill(prof) -> None:
        prof.enable()
        req.reset_state()
        req.infer(step_feeds(prompt, 0, names))
        prof.disable()
    return wall, _cprofile(prefill, n, "a prefill")


def _kinds(cm) -> dict[str, str]:
    return {n.id: n.kind for n in cm.runtime.program.nodes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--arch", default="gpt2", help="transformers model type (as bench_decode)")
    ap.add_argument("--exporter", choices=("torchscript", "dynamo"), default="torchscript")
    ap.add_argument("--device", default="AUTO")
    ap.add_argument("--transformations", default="NONE")
    ap.add_argument("--prompt", type=int)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--onnx", type=Path, help="read the export from this file (written when absent)")
    ap.add_argument("--next-token", action="store_true",
                    help="the model with_next_token makes (the device-token loop's)")
    ap.add_argument("--cprofile", type=int, default=32,
                    help="decode steps whose host time cProfile breaks down by function (0: none)")
    args = ap.parse_args()
    prompt_len = args.prompt or (16 if args.quick else 128)
    dec = load_or_export(args.onnx, args.quick, args.arch, args.exporter)
    t0 = time.perf_counter()
    model = stateful_decoder(netpass.read_model(dec.onnx), last_logits=True)
    if args.next_token:
        model = with_next_token(model)
    names = {n for i in model.inputs for n in i.get_names()}
    print(f"read and made stateful in {time.perf_counter() - t0:.1f} s")
    report: dict = {}
    prompt = np.random.default_rng(0).integers(0, dec.vocab, (1, prompt_len))

    # kernel times (profiling events; pyopencl's launcher)
    t0 = time.perf_counter()
    cm = netpass.compile_model(model, args.device, {"TRANSFORMATIONS": args.transformations,
                                                    "PROFILING": True})
    print(f"compiled in {time.perf_counter() - t0:.1f} s")
    eng = cm.runtime.engine
    exts = sorted(eng.device.extensions.split())
    print(f"device: {cm.runtime.device}")
    print(f"  extensions with 'command' or 'subgroup': "
          f"{[e for e in exts if 'command' in e or 'subgroup' in e]}")
    kinds = _kinds(cm)
    for _ in range(2):  # the second pass runs with kernels built and plans made
        req = cm.create_infer_request()
        before = _times(req)
        out = req.infer(step_feeds(prompt, 0, names))
        prefill = _delta(_times(req), before)
        past, ids = prompt_len, out["logits"][:, -1].argmax(-1)[:, None]
        steps = []
        for _ in range(args.steps):
            before = _times(req)
            k0 = req.stats["kernels_enqueued"]
            out = req.infer(step_feeds(ids, past, names))
            steps.append((_delta(_times(req), before), req.stats["kernels_enqueued"] - k0))
            past += 1
            ids = out["logits"][:, -1].argmax(-1)[:, None]
    last, launches = steps[-1]
    by_kind: dict[str, float] = defaultdict(float)
    count: Counter = Counter()
    for pid, us in last.items():
        by_kind[kinds.get(pid, "?")] += us
        count[kinds.get(pid, "?")] += 1
    decode_us = sum(last.values())
    prefill_us = sum(prefill.values())
    print(f"prefill {prompt_len} tokens: kernel time {prefill_us / 1e3:.3f} ms")
    for pid, us in sorted(prefill.items(), key=lambda kv: -kv[1])[:12]:
        print(f"    {us:9.1f} us  {kinds.get(pid, '?'):<16} {pid}")
    print(f"decode step (past {past - 1}): kernel time {decode_us:.1f} us, {launches} launches")
    for kind, us in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"    {us:9.1f} us  {count[kind]:4d} x {kind}")
    for pid, us in sorted(last.items(), key=lambda kv: -kv[1])[:16]:
        print(f"    {us:9.1f} us  {kinds.get(pid, '?'):<16} {pid}")
    report["prefill_kernel_us"] = prefill_us
    report["decode_kernel_us"] = decode_us
    report["decode_launches"] = launches
    report["decode_by_kind_us"] = dict(by_kind)
    report["decode_top"] = sorted(last.items(), key=lambda kv: -kv[1])[:40]
    report["prefill_top"] = sorted(prefill.items(), key=lambda kv: -kv[1])[:40]

    # host time of a decode step (direct launches, no profiling)
    cm = netpass.compile_model(model, args.device, {"TRANSFORMATIONS": args.transformations})
    req = cm.create_infer_request()
    walls, hosts = [], []
    for _ in range(2):
        req.reset_state()
        out = req.infer(step_feeds(prompt, 0, names))
        past, ids = prompt_len, out["logits"][:, -1].argmax(-1)[:, None]
        for _ in range(args.steps):
            feeds = step_feeds(ids, past, names)
            w0 = req.stats["host_wait_s"]
            t0 = time.perf_counter()
            out = req.infer(feeds)
            walls.append(time.perf_counter() - t0)
            hosts.append(walls[-1] - (req.stats["host_wait_s"] - w0))
            past += 1
            ids = out["logits"][:, -1].argmax(-1)[:, None]
    wall = statistics.median(walls[args.steps:])
    host = statistics.median(hosts[args.steps:])
    print(f"decode step wall {1e3 * wall:.3f} ms (median): host {1e3 * host:.3f} ms (wall minus "
          f"the wait for the outputs), kernel time {decode_us / 1e3:.3f} ms")
    report["decode_wall_ms"] = 1e3 * wall
    report["decode_host_ms"] = 1e3 * host
    report["stats"] = {k: v for k, v in req.stats.items() if isinstance(v, (int, float))}
    if args.cprofile:
        report["decode_host_functions"] = _host_profile(req, prompt, args.cprofile, names)
        wall, rows = _prefill_profile(req, prompt, max(3, args.cprofile // 4), names)
        report["prefill_wall_ms"] = 1e3 * wall
        report["prefill_host_functions"] = rows
    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "profile_decode.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
