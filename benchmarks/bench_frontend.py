"""Frontend cost: ``netpass.read_model`` (parse, convert, shape inference) on synthetic ONNX
graphs of 1k, 10k and 100k nodes, next to onnxruntime's InferenceSession creation on the
same bytes, and the way back (``to_onnx``, what ``save_model`` writes).

    python benchmarks/bench_frontend.py [--sizes 1000,10000,100000] [--repeats 5]

The graph is a chain of identical blocks of mixed ops (Add, Mul, MatMul, Relu, Transpose,
Reshape, Concat, Sigmoid) on a dynamic batch; blocks share their weights so the file stays
small and the time is graph work, not tensor decoding. Reports the median of the repeats and
the cost per node: a flat per-node cost means linear growth.
"""
from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WIDTH = 16
BLOCK_NODES = 12


def synthetic_model(n_nodes: int) -> bytes:
    """A chain of ``n_nodes // BLOCK_NODES`` blocks, x [N, 16] -> y [N, 16]."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal(WIDTH).astype(np.float32), "bias"),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, WIDTH).astype(np.float32), "scale"),
        numpy_helper.from_array((rng.standard_normal((WIDTH, WIDTH)) / 4).astype(np.float32), "w1"),
        numpy_helper.from_array((rng.standard_normal((2 * WIDTH, WIDTH)) / 6).astype(np.float32),
                                "w2"),
        numpy_helper.from_array(np.array([-1, 4, 4], np.int64), "shape3"),
        numpy_helper.from_array(np.array([-1, WIDTH], np.int64), "shape2"),
    ]
    nodes = []
    prev = "x"
    for b in range(max(n_nodes // BLOCK_NODES, 1)):
        def t(name: str) -> str:
            return f"b{b}_{name}"
        nodes += [
            helper.make_node("Add", [prev, "bias"], [t("add")]),
            helper.make_node("Mul", [t("add"), "scale"], [t("mul")]),
            helper.make_node("MatMul", [t("mul"), "w1"], [t("mm")]),
            helper.make_node("Relu", [t("mm")], [t("relu")]),
            helper.make_node("Transpose", [t("relu")], [t("tr")], perm=[1, 0]),
            helper.make_node("Transpose", [t("tr")], [t("tr2")], perm=[1, 0]),
            helper.make_node("Reshape", [t("tr2"), "shape3"], [t("r3")]),
            helper.make_node("Reshape", [t("r3"), "shape2"], [t("r2")]),
            helper.make_node("Concat", [t("r2"), prev], [t("cat")], axis=1),
            helper.make_node("MatMul", [t("cat"), "w2"], [t("mm2")]),
            helper.make_node("Sigmoid", [t("mm2")], [t("sig")]),
            helper.make_node("Add", [t("sig"), prev], [t("out")]),
        ]
        prev = t("out")
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    graph = helper.make_graph(
        nodes, "synthetic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", WIDTH])], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return proto.SerializeToString()


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
        del result
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-ort", action="store_true", help="skip the onnxruntime peer")
    args = parser.parse_args()

    import netpass
    from netpass.frontend.onnx_writer import to_onnx
    ort = None
    if not args.no_ort:
        import onnxruntime as ort

    print(f"machine: {platform.machine()} {platform.processor() or ''} "
          f"python {platform.python_version()} numpy {np.__version__} onnx {onnx.__version__}"
          + (f" onnxruntime {ort.__version__}" if ort else "") + f" netpass {netpass.__version__}")
    header = f"{'nodes':>8} {'read_model s':>13} {'us/node':>8} {'to_onnx s':>10} {'us/node':>8}"
    if ort:
        header += f" {'ort session s':>14} {'us/node':>8}"
    print(header)
    for size in (int(s) for s in args.sizes.split(",")):
        data = synthetic_model(size)
        n = len(onnx.load_model_from_string(data).graph.node)
        # fewer repeats for the largest graphs keep the run short; the median stays robust
        repeats = max(1, min(args.repeats, 2_000_000 // max(n, 1)))
        model = netpass.read_model(data)  # warm-up, and a check that shapes resolved
        assert str(model.outputs[0].partial_shape) == f"[?,{WIDTH}]"
        t_np = _median_time(lambda: netpass.read_model(data), repeats)
        t_out = _median_time(lambda: to_onnx(model), repeats)
        model = None  # frees the graph before the next size
        line = (f"{n:>8} {t_np:>13.3f} {t_np / n * 1e6:>8.1f} {t_out:>10.3f} "
                f"{t_out / n * 1e6:>8.1f}")
        if ort:
            opts = ort.SessionOptions()
            t_ort = _median_time(lambda: ort.InferenceSession(
                data, opts, providers=["CPUExecutionProvider"]), repeats)
            line += f" {t_ort:>14.3f} {t_ort / n * 1e6:>8.1f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
