"""A GPT-2 prompt's device and host time for one source tree, to set two trees side by side in
one device call (an A/B of a change: run it once per tree, alternated).

    python benchmarks/ab_prompt.py TREE [--prompt 128] [--repeats 15]

TREE is a netpass checkout (``git archive`` of another commit, or this one). The model is
bench_decode's GPT-2 small (``/tmp/gpt2.onnx``, exported when absent), stateful, last-position
logits, ``NONE`` pipeline. Printed: the kernel time of a prompt after decode steps by kind
(OpenCL profiling events), and without profiling the prompt's wall and host time (wall minus
the wait for the outputs), the median of ``--repeats`` prompts each after 8 decode steps (the
time to first token a generation after another sees).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    root = args.tree.resolve()
    for sub in ("", "tools", "benchmarks"):
        sys.path.insert(0, str(root / sub))
    from bench_decode import load_or_export

    import netpass
    from netpass.generation import stateful_decoder
    if not netpass.__file__.startswith(str(root)):
        raise SystemExit(f"netpass came from {netpass.__file__}, not {root}")
    dec = load_or_export(Path("/tmp/gpt2.onnx"), False)
    model = stateful_decoder(netpass.read_model(dec.onnx), last_logits=True)
    n = args.prompt
    prompt = np.random.default_rng(0).integers(0, dec.vocab, (1, n))

    def feeds(ids, past):
        k = ids.shape[1]
        return {"input_ids": ids, "attention_mask": np.ones((1, past + k), np.int64),
                "position_ids": np.arange(past, past + k)[None]}

    def generate(req, steps):
        req.reset_state()
        out = req.infer(feeds(prompt, 0))
        past = n
        for _ in range(steps):
            out = req.infer(feeds(out["logits"][:, -1].argmax(-1)[:, None], past))
            past += 1

    tag = root.name
    for profiling in (True, False):
        cm = netpass.compile_model(model, "GPU", {"TRANSFORMATIONS": "NONE",
                                                 "PROFILING": profiling})
        kinds = {node.id: node.kind for node in cm.runtime.program.nodes}
        req = cm.create_infer_request()
        generate(req, 16)
        generate(req, 16)
        if profiling:
            before = dict(req.stats.get("primitive_times_us", {}))
            req.reset_state()
            req.infer(feeds(prompt, 0))
            by_kind: dict = defaultdict(float)
            for pid, us in req.stats.get("primitive_times_us", {}).items():
                if us > before.get(pid, 0.0):
                    by_kind[kinds.get(pid, "?")] += us - before.get(pid, 0.0)
            parts = ", ".join(f"{k} {v / 1e3:.3f}"
                              for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]))
            print(f"[{tag}] prompt kernel time {sum(by_kind.values()) / 1e3:.3f} ms: {parts}")
            continue
        walls, hosts = [], []
        for _ in range(args.repeats):
            generate(req, 8)
            w0 = req.stats["host_wait_s"]
            t0 = time.perf_counter()
            req.reset_state()
            req.infer(feeds(prompt, 0))
            walls.append(time.perf_counter() - t0)
            hosts.append(walls[-1] - (req.stats["host_wait_s"] - w0))
        print(f"[{tag}] prompt after decode: wall {1e3 * statistics.median(walls):.3f} ms, host "
              f"{1e3 * statistics.median(hosts):.3f} ms (median of {args.repeats})")


if __name__ == "__main__":
    main()
