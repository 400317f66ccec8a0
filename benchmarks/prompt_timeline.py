"""Whether a stateful GPT-2's prompt is bound by the host or the device: for a prompt after
``reset_state`` (the time to first token of a generation after another), its wall and host
time without profiling, then the timeline of one such prompt from its profiling events (each
kernel's queued, start and end times): the device's busy time, its idle gaps and how much of
them it spent waiting for the host to enqueue the next kernel.

    python benchmarks/prompt_timeline.py [--quick] [--arch gpt2|llama] [--device AUTO]

The model is bench_decode's (``tools/export_decoder.py``; ``/tmp/<arch>.onnx``, exported when
absent). Prints the figures and the timeline, one line per kernel.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_decode import load_or_export, step_feeds  # noqa: E402

import netpass  # noqa: E402
from netpass.generation import stateful_decoder  # noqa: E402


class _Events(list):
    """A primitive's event list that also records (primitive, event) into ``log``."""

    def __init__(self, inst, log: list) -> None:
        super().__init__()
        self.inst, self.log = inst, log

    def append(self, ev) -> None:
        self.log.append((self.inst, ev))
        super().append(ev)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--arch", default="gpt2")
    ap.add_argument("--device", default="AUTO")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    dec = load_or_export(Path(f"/tmp/{args.arch}{'_quick' if args.quick else ''}.onnx"),
                         args.quick, args.arch)
    model = stateful_decoder(netpass.read_model(dec.onnx), last_logits=True)
    n = 16 if args.quick else 128
    prompt = np.random.default_rng(0).integers(0, dec.vocab, (1, n))

    def generate(req, steps):
        req.reset_state()
        out = req.infer(step_feeds(prompt, 0))
        for past in range(n, n + steps):
            out = req.infer(step_feeds(out["logits"][:, -1].argmax(-1)[:, None], past))

    req = netpass.compile_model(model, args.device, {"TRANSFORMATIONS": "NONE"}) \
        .create_infer_request()
    for _ in range(3):
        generate(req, 8)
    walls, hosts = [], []
    for _ in range(args.repeats):
        generate(req, 4)
        req.reset_state()
        f = step_feeds(prompt, 0)
        w0 = req.stats["host_wait_s"]
        t0 = time.perf_counter()
        req.infer(f)
        walls.append(time.perf_counter() - t0)
        hosts.append(walls[-1] - (req.stats["host_wait_s"] - w0))
    print(f"[{args.arch}] prompt of {n} after reset_state: wall {1e3 * statistics.median(walls):.3f}"
          f" ms, host {1e3 * statistics.median(hosts):.3f} ms (median of {args.repeats})")

    cm = netpass.compile_model(model, args.device, {"TRANSFORMATIONS": "NONE", "PROFILING": True})
    kinds = {node.id: node.kind for node in cm.runtime.program.nodes}
    req = cm.create_infer_request()
    for _ in range(3):
        generate(req, 8)
    req.reset_state()
    log: list = []
    for inst in req._runtime_request.network.order:
        inst.events = _Events(inst, log)
    req.infer(step_feeds(prompt, 0))
    rows = sorted(((ev.profile.queued, ev.profile.start, ev.profile.end,
                    kinds.get(inst.node.id, "?"), inst.node.id) for inst, ev in log),
                  key=lambda r: r[1])
    if not rows:
        return
    base = rows[0][0]
    busy = starved = gaps = 0.0
    prev_end = None
    print("   #  queued   start     end    gap (us from the first enqueue)")
    for i, (q, st, en, kind, nid) in enumerate(rows):
        gap = (st - prev_end) / 1e3 if prev_end is not None else 0.0
        if prev_end is not None:
            gaps += max(gap, 0.0)
            if q > prev_end:  # (the kernel was enqueued after the device went idle)
                starved += max(gap, 0.0)
        busy += (en - st) / 1e3
        print(f" {i:3d} {(q - base) / 1e3:7.1f} {(st - base) / 1e3:7.1f} {(en - base) / 1e3:7.1f} "
              f"{gap:6.1f}  {kind:<15} {nid}")
        prev_end = en
    by_kind: dict = defaultdict(float)
    for _, st, en, kind, _ in rows:
        by_kind[kind] += (en - st) / 1e3
    print(f"{len(rows)} kernels: busy {busy:.1f} us, span {(rows[-1][2] - rows[0][1]) / 1e3:.1f} "
          f"us, idle gaps {gaps:.1f} us, of them waiting for the host {starved:.1f} us")
    print("by kind (us): " + ", ".join(f"{k} {v:.1f}" for k, v in
                                        sorted(by_kind.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
