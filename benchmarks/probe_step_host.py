"""Where a decode step's host time goes (issue 17): every clEnqueueNDRangeKernel, moving-int
clSetKernelArg and input write of a GPT-2 small decode step (prompt 128, 32 steps) timed alone
(the C call only), grouped by what came just before it; per step counts and totals beside the
step's per-token latency. The launcher's methods are replaced by timed copies for the run.

    python benchmarks/probe_step_host.py         (an OpenCL GPU; QUICK=1: a small GPT-2 on PoCL)
"""
from __future__ import annotations

import collections
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))
from bench_decode import load_or_export  # noqa: E402

import netpass  # noqa: E402
from netpass.generation import GreedyDecoder, stateful_decoder  # noqa: E402
from netpass.runtime import launcher as L  # noqa: E402

STEPS = 32
log: list[tuple[str, str, float]] = []  # (call, the call before it, seconds)
previous = ["start"]


def _timed(name: str, t0: float) -> None:
    log.append((name, previous[0], time.perf_counter() - t0))
    previous[0] = name


def launch(self, h, ln):
    dims = ln.cdims
    if dims is None:
        dims = ln.cdims = L.c_work_sizes(ln.gws, ln.lws)
    t0 = time.perf_counter()
    self._cl_enqueue(self._queue, h.ptr, dims[0], None, dims[1], dims[2], 0, None, None)
    _timed("launch", t0)


def main() -> None:
    set_struct, write = L.DirectLauncher._set_struct, L.DirectLauncher.write

    def timed_struct(self, h, pos, cints):
        t0 = time.perf_counter()
        set_struct(self, h, pos, cints)
        _timed("set_struct", t0)

    def timed_write(self, *args):
        t0 = time.perf_counter()
        write(self, *args)
        _timed("write", t0)

    L.DirectLauncher.launch = launch
    L.DirectLauncher._set_struct = timed_struct
    L.DirectLauncher.write = timed_write
    quick = bool(os.environ.get("QUICK"))
    dec = load_or_export(None, quick, "gpt2")
    model = stateful_decoder(netpass.read_model(dec.onnx), last_logits=True)
    cm = netpass.compile_model(model, "CPU" if quick else "GPU", {"TRANSFORMATIONS": "NONE"})
    decoder = GreedyDecoder(cm)
    req = cm.create_infer_request()
    prompt = np.random.default_rng(0).integers(0, dec.vocab, (1, 16 if quick else 128))
    decoder.generate(prompt, 16, req)
    log.clear()
    decoder.generate(prompt, 1, req)  # the prompt alone: its calls are taken off below
    prompt_calls = collections.Counter((name, before) for name, before, _ in log)
    prompt_time = collections.Counter()
    for name, before, dt in log:
        prompt_time[(name, before)] += dt
    log.clear()
    g = decoder.generate(prompt, STEPS + 1, req)
    print(f"per token {1e3 * g.per_token_s:.3f} ms; steady steps "
          f"{g.decode_stats.get('steady_steps')} of {STEPS}")
    groups = collections.defaultdict(list)
    for name, before, dt in log:
        groups[(name, before)].append(dt)
    for key, v in sorted(groups.items()):
        n = (len(v) - prompt_calls[key]) / STEPS
        total = (sum(v) - prompt_time[key]) / STEPS
        print(f"{key[0]:10s} after {key[1]:10s} per step {n:5.1f}  median "
              f"{1e6 * statistics.median(v):6.2f} us  per step {1e3 * total:.3f} ms")


if __name__ == "__main__":
    main()
