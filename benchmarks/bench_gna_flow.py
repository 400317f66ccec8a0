"""The GNA flow at scale: ``read_model`` + ``GnaTransformationsPipeline`` + pre/post split (and,
reported apart, the legacy conversion and passes) on the layout blocks of
``netpass.synthetic`` (the graphs issue 16 measured), static and dynamic batch.

    python benchmarks/bench_gna_flow.py [--sizes 10000,100000] [--shapes static,dynamic]
                                        [--repeats 3] [--baseline DIR] [--groups]

Every measurement runs in a child process (a fresh interpreter, nothing left over from the
previous one). ``--baseline DIR`` names another netpass tree (e.g. ``git archive main netpass
| tar -x -C DIR``): its runs alternate with this tree's, so that both see the same load on a
shared machine. Reported per size and shape: the median of the repeats of each stage (wall
and the process's CPU time), the flow's total (read + pipeline + split), the growth of the total
between the smallest and the largest size, and checks of the result (Gathers and Transposes
GNA cannot run left inside the main model). ``--groups`` adds the pipeline's stages
(``NETPASS_PROFILE_PASS``) of the last run at each size.

The graph of ``n`` nodes is ``gna_blocks_onnx(random_blocks(n // 9, seed=0))`` on ``[1, 8, 8,
8]`` (static) or ``[N, 8, 8, 8]`` (dynamic); its size is counted as ONNX nodes plus
initializers (``block_graph_nodes``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("read", "pipeline", "split", "legacy_convert", "legacy_passes")
FLOW = ("read", "pipeline", "split")
NODES_PER_BLOCK = 9


def child(size: int, shape: str) -> dict:
    """One run in this process: stage times and checks, as a dict."""
    import gc

    import netpass
    from netpass.legacy_passes import convert_to_legacy, run_legacy_passes
    from netpass.ngraph_passes.gna import GnaTransformationsPipeline, is_transpose_supported
    from netpass.passes import Manager
    from netpass.prepost import split_pre_post_processing
    from netpass.synthetic import block_graph_nodes, gna_blocks_onnx, random_blocks

    sys.setrecursionlimit(100_000)
    dims = (1, 8, 8, 8) if shape == "static" else ("N", 8, 8, 8)
    data = gna_blocks_onnx(random_blocks(max(1, size // NODES_PER_BLOCK), 0), shape=dims)
    out: dict = {"nodes": block_graph_nodes(data)}
    gc.collect()

    def timed(name, fn):
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        out[name] = (time.perf_counter() - t0, time.process_time() - c0)
        return result

    model = timed("read", lambda: netpass.read_model(data))

    def pipeline():
        manager = Manager()
        manager.register_pass(GnaTransformationsPipeline())
        manager.run_passes(model)
    timed("pipeline", pipeline)
    timed("split", lambda: split_pre_post_processing(model))
    ops = model.get_ordered_ops()
    out["gathers_inside"] = sum(n.type_name == "Gather" for n in ops)
    out["transposes_inside"] = sum(
        n.type_name == "Transpose" and (not n.input_value(0).partial_shape.is_static
                                        or not is_transpose_supported(n.input_value(0).shape))
        for n in ops)
    network = timed("legacy_convert", lambda: convert_to_legacy(model))
    timed("legacy_passes", lambda: run_legacy_passes(network))
    return out


def run_child(tree: Path, size: int, shape: str, groups: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    profile = None
    if groups:
        fd, profile = tempfile.mkstemp(suffix=".txt")
        os.close(fd)
        env["NETPASS_PROFILE_PASS"] = profile
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(size), shape]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(tree))
    if done.returncode != 0:
        raise SystemExit(f"child failed ({tree}, {size}, {shape}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if profile is not None:
        result["groups"] = Path(profile).read_text()
        os.unlink(profile)
    return result


def versions() -> str:
    import numpy as np
    import onnx
    return (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"numpy {np.__version__}, onnx {onnx.__version__}")


def print_groups(text: str) -> None:
    """The GNA pipeline's members (NETPASS_PROFILE_PASS lines of its nested managers)."""
    for line in text.splitlines():
        parts = line.split(";")
        if parts[0] == "t" and parts[2] in ("GnaTransformationsPipeline", "GnaSliceToCrop"):
            print(f"    {parts[1]:<32} {int(parts[3]) / 1e9:7.3f} s {'+' if parts[4] == '1' else '-'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--shapes", default="static,dynamic")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="another netpass tree, run alternately")
    ap.add_argument("--groups", action="store_true", help="the pipeline's stages, last run")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1])))
        return
    trees = [("this", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"machine: {versions()}; load average at start {os.getloadavg()[0]:.1f}")
    sizes = [int(s) for s in args.sizes.split(",")]
    for shape in args.shapes.split(","):
        totals: dict[str, dict[int, tuple[float, float]]] = {name: {} for name, _ in trees}
        print(f"\n{shape} shapes; median of {args.repeats} (wall s / CPU s)")
        print("| tree | nodes | read | pipeline | split | **read+pipeline+split** | legacy convert "
              "| legacy passes | Gathers / bad Transposes inside |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for size in sizes:
            runs: dict[str, list[dict]] = {name: [] for name, _ in trees}
            for r in range(args.repeats):
                order = trees if r % 2 == 0 else list(reversed(trees))
                for name, tree in order:
                    runs[name].append(run_child(tree, size, shape, args.groups and r == args.repeats - 1))
            for name, _ in trees:
                rs = runs[name]

                def med(stage: str, k: int) -> float:
                    return statistics.median(x[stage][k] for x in rs)
                flow_wall = statistics.median(sum(x[s][0] for s in FLOW) for x in rs)
                flow_cpu = statistics.median(sum(x[s][1] for s in FLOW) for x in rs)
                totals[name][size] = (flow_wall, flow_cpu)
                cells = " | ".join(f"{med(s, 0):.2f} / {med(s, 1):.2f}" for s in STAGES[:3])
                legacy = " | ".join(f"{med(s, 0):.2f} / {med(s, 1):.2f}" for s in STAGES[3:])
                print(f"| {name} | {rs[0]['nodes']} | {cells} | **{flow_wall:.2f}** / {flow_cpu:.2f} "
                      f"| {legacy} | {rs[0]['gathers_inside']} / {rs[0]['transposes_inside']} |",
                      flush=True)
                if args.groups and "groups" in rs[-1]:
                    print_groups(rs[-1]["groups"])
        if len(sizes) > 1:
            lo, hi = min(sizes), max(sizes)
            for name, _ in trees:
                (w1, c1), (w2, c2) = totals[name][lo], totals[name][hi]
                print(f"growth of read+pipeline+split {hi}/{lo} ({name}): wall {w2 / w1:.1f}, "
                      f"CPU {c2 / c1:.1f}")
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
