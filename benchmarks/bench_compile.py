"""Compile time against graph size: a chain of N Relus (x [?, 8]) through
``runtime.compile_program`` (the runtime's program build) and ``netpass.compile_model`` (the
whole flow, GNA pipeline by default), for N = 5000 and 20000 by default; linear growth means
the 20k/5k ratio stays near 4 (the goal: <= 5).

Each (size, entry point) runs ``--repeats`` times, each in a fresh subprocess (no warm caches,
no garbage from earlier runs), and the median is reported, with the time of
``Program._memory_dependencies`` (lifetimes and memory restrictions) in the same runs. Writes
``bench_compile.json`` to ``$OUT`` when set.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(n: int, entry: str, device: str) -> dict:
    import time

    import numpy as np
    sys.path.insert(0, str(ROOT))
    import netpass
    from netpass import Model, opset
    from netpass.runtime import Program, compile_program

    x = opset.parameter([-1, 8], np.float32, name="x")
    v = x.output(0)
    for _ in range(n):
        v = opset.relu(v).output(0)
    model = Model([opset.result(v, name="y")], [x])
    spent = [0.0]
    inner = Program._memory_dependencies

    def timed(self):
        t = time.perf_counter()
        inner(self)
        spent[0] += time.perf_counter() - t

    Program._memory_dependencies = timed
    t0 = time.perf_counter()
    if entry == "compile_program":
        compile_program(model, device)
    else:
        netpass.compile_model(model, device)
    return {"seconds": time.perf_counter() - t0, "memory_dependencies_s": spent[0]}


def measure(n: int, entry: str, device: str, repeats: int) -> dict:
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, __file__, "--child", entry, "--sizes", str(n),
                              "--device", device], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"{entry} at {n} failed:\n{out.stderr[-2000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {"n": n, "entry": entry, "seconds": statistics.median(r["seconds"] for r in runs),
            "memory_dependencies_s": statistics.median(r["memory_dependencies_s"] for r in runs),
            "all_seconds": [r["seconds"] for r in runs]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5000,20000")
    ap.add_argument("--entries", default="compile_program,compile_model")
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        print(json.dumps(child(sizes[0], args.child, args.device)))
        return
    rows = [measure(n, e, args.device, args.repeats) for e in args.entries.split(",") for n in sizes]
    print(f"chain of N Relus, median of {args.repeats} fresh processes (python {platform.python_version()})")
    print(f"  {'entry':<16} {'N':>6} {'compile s':>10} {'us/node':>8} {'memory deps s':>14}  runs")
    for r in rows:
        print(f"  {r['entry']:<16} {r['n']:>6} {r['seconds']:>10.2f} {1e6 * r['seconds'] / r['n']:>8.1f} "
              f"{r['memory_dependencies_s']:>14.3f}  {', '.join(f'{s:.2f}' for s in r['all_seconds'])}")
    for e in args.entries.split(","):
        mine = [r for r in rows if r["entry"] == e]
        if len(mine) >= 2:
            print(f"  {e}: {mine[-1]['n']}/{mine[0]['n']} nodes -> {mine[-1]['seconds'] / mine[0]['seconds']:.2f}x time")
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "bench_compile.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
