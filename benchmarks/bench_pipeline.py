"""Cost of ``GnaTransformationsPipeline`` on static synthetic graphs of 1k, 10k and 100k nodes,
next to OpenVINO's ``read_model`` + ``compile_model("CPU")`` and onnxruntime's session creation
(``ORT_ENABLE_ALL``) on the same ONNX bytes.

    python benchmarks/bench_pipeline.py [--sizes 1000,10000,100000] [--repeats 3]
                                        [--peers openvino,onnxruntime] [--peer-sizes ...]

The graph is a chain of blocks on a static [1, 8, 4, 4] tensor; each block has an NCHW->NHWC
Transpose, elementwise ops, a Split and a Concat, the NHWC->NCHW Transpose, a Pad and a Slice,
a channel reduction added back, a Reshape, a channel-shuffle Gather and a Reshape back. The
script reports medians (wall time, and the process's CPU time, which other load on the
machine does not inflate), the CPU cost per node (flat = linear growth) and checks the result: no
Transpose GNA cannot run inside the graph, every Slice turned into a CropIE.
"""
from __future__ import annotations

import argparse
import gc
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPE = [1, 8, 4, 4]
BLOCK = [  # (op, inputs (None = previous value, "main" = block input), attributes)
    ("Transpose", [None], {"perm": [0, 2, 3, 1]}),
    ("Relu", [None], {}),
    ("Add", [None, "bias_c"], {}),
    ("Split", [None, "halves"], {"axis": 3}),
    ("Mul", ["split0", "scale"], {}),
    ("Sigmoid", ["split1"], {}),
    ("Concat", ["mul", "sigmoid"], {"axis": 3}),
    ("Transpose", [None], {"perm": [0, 3, 1, 2]}),
    ("Pad", [None, "pads"], {}),
    ("Slice", [None, "starts", "ends", "axes"], {}),
    ("ReduceMean", [None], {"axes": [1], "keepdims": 1}),
    ("Add", ["slice", None], {}),
    ("Reshape", [None, "shape3"], {}),
    ("Gather", [None, "shuffle"], {"axis": 1}),
    ("Reshape", [None, "shape4"], {}),
]


def synthetic_onnx(n_nodes: int) -> bytes:
    """``n_nodes // len(BLOCK)`` blocks, x [1, 8, 4, 4] -> y [1, 8, 4, 4] (weights shared)."""
    rng = np.random.default_rng(0)
    arrays = {
        "bias_c": rng.standard_normal(8).astype(np.float32) * 0.1,
        "scale": rng.uniform(0.5, 1.0, 4).astype(np.float32),
        "halves": np.array([4, 4], np.int64), "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
        "starts": np.array([1, 1], np.int64), "ends": np.array([5, 5], np.int64),
        "axes": np.array([2, 3], np.int64), "shape3": np.array([1, 8, 16], np.int64),
        "shuffle": np.array([0, 4, 1, 5, 2, 6, 3, 7], np.int64), "shape4": np.array(SHAPE, np.int64),
    }
    inits = [numpy_helper.from_array(v, k) for k, v in arrays.items()]
    nodes, prev = [], "x"
    for b in range(max(1, n_nodes // len(BLOCK))):
        named = {}
        for i, (op, ins, attrs) in enumerate(BLOCK):
            outs = [f"b{b}_split0", f"b{b}_split1"] if op == "Split" else [f"b{b}_{i}"]
            args = [prev if a is None else named.get(a, a) for a in ins]
            nodes.append(helper.make_node(op, args, outs, name=f"b{b}_{op}_{i}", **attrs))
            if op == "Split":
                named.update(split0=outs[0], split1=outs[1])
            named[op.lower()] = outs[0]
            prev = outs[0]
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return model.SerializeToString()


def _median(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run_netpass(data: bytes, repeats: int) -> dict:
    import netpass
    from netpass.ngraph_passes.gna import GnaTransformationsPipeline, is_transpose_supported
    from netpass.passes import Manager

    def once():
        model = netpass.read_model(data)
        # read_model pauses the cyclic collector; its first collection (over every object of
        # the imported graph) belongs to the import, not to the pipeline timed below.
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        manager = Manager()
        manager.register_pass(GnaTransformationsPipeline())
        manager.run_passes(model)
        return time.perf_counter() - t0, time.process_time() - c0, model

    runs = [once() for _ in range(repeats)]
    model = runs[-1][2]
    ops = model.get_ordered_ops()
    interior = [n for n in ops if n.type_name == "Transpose" and not is_transpose_supported(n.input_value(0).shape)
                and n.input_value(0).node.type_name != "Parameter"
                and not all(c.node.type_name == "Result" for c in n.output(0).consumers())]
    return {"pipeline": statistics.median(r[0] for r in runs), "cpu": statistics.median(r[1] for r in runs),
            "nodes": len(ops),
            "unsupported_inside": len(interior), "slices_left": sum(n.type_name in ("Slice", "StridedSlice") for n in ops),
            "crops": sum(n.type_name == "CropIE" for n in ops)}


def _openvino(data: bytes) -> None:
    import openvino as ov
    core = ov.Core()
    core.compile_model(core.read_model(data, b""), "CPU")


def _onnxruntime(data: bytes) -> None:
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


PEERS = {"openvino": _openvino, "onnxruntime": _onnxruntime}


def run_peer(name: str, size: int, timeout: float) -> str:
    """Time a peer in a child process (a crash or a hang must not take the run down)."""
    cmd = [sys.executable, __file__, "--peer", name, "--sizes", str(size)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"> {timeout:.0f} (stopped)"
    if done.returncode != 0:
        return f"crashed (exit {done.returncode})"
    return f"{float(done.stdout.strip().splitlines()[-1]):.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--peers", default="openvino,onnxruntime")
    ap.add_argument("--peer-sizes", default="1000,10000,100000")
    ap.add_argument("--peer-timeout", type=float, default=1800)
    ap.add_argument("--peer", help=argparse.SUPPRESS)  # child process: time one peer
    args = ap.parse_args()
    if args.peer:
        data = synthetic_onnx(int(args.sizes))
        t0 = time.perf_counter()
        PEERS[args.peer](data)
        print(time.perf_counter() - t0)
        return
    import onnxruntime
    import openvino

    import netpass
    print(f"machine: {platform.machine()}, {__import__('os').cpu_count()} cores, Python {platform.python_version()}, "
          f"numpy {np.__version__}, onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}, "
          f"openvino {openvino.__version__}, netpass {netpass.__version__}")
    peers = [p for p in args.peers.split(",") if p]
    peer_sizes = {int(s) for s in args.peer_sizes.split(",") if s}
    print("| nodes | netpass pipeline s (wall) | CPU s | CPU us/node | OpenVINO read+compile s | "
          "onnxruntime session s | unsupported Transposes inside | Slices left / CropIE |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in (int(s) for s in args.sizes.split(",")):
        data = synthetic_onnx(size)
        n_onnx = len(onnx.load_from_string(data).graph.node)
        res = run_netpass(data, args.repeats)
        times = {p: (run_peer(p, size, args.peer_timeout) if p in peers and size in peer_sizes else "-")
                 for p in PEERS}
        print(f"| {n_onnx} | {res['pipeline']:.2f} | {res['cpu']:.2f} | {1e6 * res['cpu'] / n_onnx:.1f} | "
              f"{times['openvino']} | {times['onnxruntime']} | {res['unsupported_inside']} | "
              f"{res['slices_left']} / {res['crops']} |", flush=True)


if __name__ == "__main__":
    main()
