"""Peak host memory (RSS) of an infer whose output is large, beside onnxruntime in the same run.

The model is ONNX ``Expand(x [1, 1], shape)`` (or ``Tile``) whose output size comes from an
input at run time: a ``--gib`` GiB float32 output [16384 * gib, 16384]. Each engine runs in a
fresh subprocess: it compiles the model and infers a small shape first (kernels built), then
reads its resident memory, infers the large output once and reads its peak RSS
(``ru_maxrss``). Reported: the peak, the peak above the warm process, both over the output's
size, and the infer time. ``--device`` picks the netpass device (CPU = PoCL, where device
memory is host memory). Writes ``bench_memory.json`` to ``$OUT`` when set.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIDE = 16384


def model_bytes(op: str) -> bytes:
    from onnx import TensorProto as T
    from onnx import helper as h
    if op == "expand":
        node = h.make_node("Expand", ["x", "shape"], ["y"])
        ins = [h.make_tensor_value_info("x", T.FLOAT, [1, 1])]
    else:
        node = h.make_node("Tile", ["x", "shape"], ["y"])
        ins = [h.make_tensor_value_info("x", T.FLOAT, [1, 4])]
    ins.append(h.make_tensor_value_info("shape", T.INT64, [2]))
    graph = h.make_graph([node], op, ins, [h.make_tensor_value_info("y", T.FLOAT, None)])
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def child(engine: str, op: str, gib: int, device: str) -> dict:
    """Runs in the subprocess: compile, warm up, one large infer; memory and time."""
    import resource
    import time

    import numpy as np

    def rss() -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    data = model_bytes(op)
    x = np.full((1, 1), 1.5, np.float32) if op == "expand" else np.arange(4, dtype=np.float32).reshape(1, 4)
    rows = SIDE * gib
    big = np.array([rows, SIDE] if op == "expand" else [rows, SIDE // 4], np.int64)
    small = np.array([4, 4] if op == "expand" else [4, 1], np.int64)
    if engine == "onnxruntime":
        import onnxruntime as ort
        sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        run = lambda shape: sess.run(None, {"x": x, "shape": shape})[0]  # noqa: E731
    else:
        sys.path.insert(0, str(ROOT))
        import netpass
        req = netpass.compile_model(data, device, {"TRANSFORMATIONS": "NONE"}).create_infer_request()
        run = lambda shape: req.infer({"x": x, "shape": shape})["y"]  # noqa: E731
    run(small)
    warm = rss()
    t0 = time.perf_counter()
    y = run(big)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert y.shape == (rows, SIDE) and float(y[-1, -1]) == float(x.reshape(-1)[-1])
    return {"engine": engine, "output_bytes": int(y.nbytes), "warm_rss": warm, "peak_rss": peak,
            "seconds": seconds}


def measure(engine: str, op: str, gib: int, device: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", engine, "--op", op, "--gib", str(gib),
                          "--device", device], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{engine} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=int, default=1)
    ap.add_argument("--op", choices=["expand", "tile"], default="expand")
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.op, args.gib, args.device)))
        return
    rows = [measure(e, args.op, args.gib, args.device) for e in (f"netpass-{args.device}", "onnxruntime")]
    print(f"{args.op} to a {args.gib} GiB float32 output ({platform.python_version()}, {platform.machine()})")
    print(f"  {'engine':<16} {'peak RSS GiB':>12} {'peak/output':>11} {'(peak-warm)/output':>19} {'infer s':>8}")
    for r in rows:
        n = r["output_bytes"]
        print(f"  {r['engine']:<16} {r['peak_rss'] / 2**30:>12.3f} {r['peak_rss'] / n:>11.2f} "
              f"{(r['peak_rss'] - r['warm_rss']) / n:>19.2f} {r['seconds']:>8.2f}")
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "bench_memory.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
