"""Per-pass validation cost: three rewrites at 30k nodes, validation on vs off, beside OpenVINO.

Each pass runs in a ``Manager`` once with per-pass validation on and once with it off, each
time on a freshly built graph; only ``run_passes`` is timed (CPU time of the process: the
machine is shared, and everything here runs on one thread). The ratio on/off is the cost of
validation; the goal is <= 1.25. The timed calls run with the cyclic garbage collector paused
(see ``timed``). In the same run, OpenVINO's Python ``Manager`` runs the
equivalent rewrite (an ``openvino.passes.MatcherPass`` written the same way, graph built with
``openvino.opset13``), also with its per-pass validation on and off.

The passes (graph sizes rounded to whole links):

- ``matmul_add``: ``Relu(Add(MatMul(x, W), b))`` links (5 nodes each) -> netpass fuses
  MatMul+Add into ``FullyConnected(x, W.T, b)``. OpenVINO's Python opsets have no
  FullyConnected, so its pass builds ``Add(MatMul(x, W.T, transpose_b=True), b)`` instead (one
  node more per match).
- ``transposes``: ``Relu(Transpose(Transpose(x, a), b))`` links with ``a[b]`` the identity (5
  nodes each) -> the pair is removed (the pass of ``bench_passes.py``).
- ``divide``: ``Relu(Divide(x, c))`` links, ``c`` a Constant (3 nodes each) -> netpass's own
  ``ConvertDivide`` (``x * (1/c)``); OpenVINO: the same rewrite as a Python MatcherPass.

Run: ``python benchmarks/bench_validation.py [--nodes 30000] [--repeats 7] [--no-openvino]``;
``--profile PASS`` prints a cProfile of netpass's validated run of one pass instead.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netpass import Model, ops, opset
from netpass.ngraph_passes.common import ConvertDivide
from netpass.passes import Manager, MatcherPass
from netpass.pattern import Matcher, any_input, consumers_count, wrap_type

CLOCK = time.process_time
DIM = 8
ORDER_IN, ORDER_OUT = [0, 2, 3, 1], [0, 3, 1, 2]


def timed(run: Callable[[], object]) -> tuple[float, object]:
    """CPU seconds of ``run()`` with the cyclic collector paused. A rewrite leaves tens of
    thousands of new objects in the collector's young generation, and the first allocation after
    it scans them; netpass's GraphRewrite moves them to the oldest generation instead, but only
    where the program froze nothing (``gc.get_freeze_count() == 0``; the device machine's Python
    freezes objects at start). Paused, that scan falls in neither the pass's time nor its
    validation's, whoever allocates next."""
    gc.collect()
    gc.disable()
    try:
        t0 = CLOCK()
        out = run()
        return CLOCK() - t0, out
    finally:
        gc.enable()


# -- graphs (the same structure is built with either library's opset) -----------------------
def build(kind: str, links: int, lib) -> tuple:
    """(results, parameter) of graph ``kind`` built with ``lib`` (netpass.opset or
    openvino.opset13)."""
    rng = np.random.default_rng(0)
    if kind == "transposes":
        x = lib.parameter([1, 2, 3, 4], np.float32, name="x")
        y = x
        for _ in range(links):
            t1 = lib.transpose(y, lib.constant(np.array(ORDER_IN, dtype=np.int64)))
            y = lib.relu(lib.transpose(t1, lib.constant(np.array(ORDER_OUT, dtype=np.int64))))
        return y, x
    x = lib.parameter([4, DIM], np.float32, name="x")
    y = x
    for _ in range(links):
        if kind == "matmul_add":
            w = lib.constant(rng.standard_normal((DIM, DIM)).astype(np.float32) * 0.3)
            b = lib.constant(rng.standard_normal(DIM).astype(np.float32))
            y = lib.relu(lib.add(lib.matmul(y, w, False, False), b))
        else:
            c = lib.constant(np.full([1, DIM], 2.0, np.float32))
            y = lib.relu(lib.divide(y, c))
    return y, x


NODES_PER_LINK = {"matmul_add": 5, "transposes": 5, "divide": 3}


# -- netpass passes --------------------------------------------------------------------------
class FuseMatMulAdd(MatcherPass):
    """Add(MatMul(x, W), b) with constant W [K, N] and b [N] -> FullyConnected(x, W.T, b)."""

    def __init__(self) -> None:
        super().__init__()
        weights = wrap_type(ops.Constant)
        matmul = wrap_type(ops.MatMul, [any_input(), weights], consumers_count(1))
        bias = wrap_type(ops.Constant)
        add = wrap_type(ops.Add, [matmul, bias])

        def callback(m: Matcher) -> bool:
            mm = m.pattern_value_map[matmul].node
            if mm.transpose_a or mm.transpose_b:
                return False
            w = m.pattern_value_map[weights].node.value
            b = m.pattern_value_map[bias].node.value
            if w.ndim != 2 or b.shape != (w.shape[1],):
                return False
            root = m.match_root
            fc = opset.fully_connected(mm.input_value(0), np.ascontiguousarray(w.T), b,
                                       w.shape[1], name=root.friendly_name)
            root.output(0).replace(fc.output(0))
            return True

        self.register_matcher(Matcher(add, "FuseMatMulAdd"), callback)


class RemoveCancellingTransposes(MatcherPass):
    """Transpose(Transpose(x, a), b) with a[b] == identity -> x."""

    def __init__(self) -> None:
        super().__init__()
        first = wrap_type(ops.Transpose, [any_input(), wrap_type(ops.Constant)])
        second = wrap_type(ops.Transpose, [first, wrap_type(ops.Constant)])

        def callback(m: Matcher) -> bool:
            root = m.match_root
            inner = m.pattern_value_map[first].node
            a = inner.input_value(1).node.value.tolist()
            b = root.input_value(1).node.value.tolist()
            if [a[i] for i in b] != list(range(len(a))):
                return False
            root.output(0).replace(inner.input_value(0))
            return True

        self.register_matcher(Matcher(second, "RemoveCancellingTransposes"), callback)


NETPASS_PASSES = {"matmul_add": FuseMatMulAdd, "transposes": RemoveCancellingTransposes,
                  "divide": ConvertDivide}


def run_netpass(kind: str, links: int, validate: bool) -> tuple[float, int]:
    y, x = build(kind, links, opset)
    model = Model([y], [x], kind)
    manager = Manager()
    manager.set_per_pass_validation(validate)
    manager.register_pass(NETPASS_PASSES[kind]())
    dt, changed = timed(lambda: manager.run_passes(model))
    assert changed
    return dt, len(model.get_ordered_ops())


# -- OpenVINO --------------------------------------------------------------------------------
def openvino_runner() -> Callable[[str, int, bool], tuple[float, int]] | None:
    try:
        import openvino as ov
        from openvino import opset13 as ovops
        from openvino.passes import AnyInput, WrapType
        from openvino.passes import Manager as OVManager
        from openvino.passes import Matcher as OVMatcher
        from openvino.passes import MatcherPass as OVMatcherPass
    except ImportError:
        return None

    def fuse_matmul_add() -> OVMatcherPass:
        weights = WrapType("opset1.Constant")
        matmul = WrapType("opset1.MatMul", [AnyInput(), weights])
        bias = WrapType("opset1.Constant")
        add = WrapType("opset1.Add", [matmul, bias])

        def callback(m) -> bool:
            pvm = m.get_pattern_value_map()
            mm = pvm[matmul].get_node()
            if len(mm.output(0).get_target_inputs()) != 1:
                return False
            attrs = mm.get_attributes()
            if attrs["transpose_a"] or attrs["transpose_b"]:
                return False
            w = pvm[weights].get_node().get_data()
            b = pvm[bias].get_node().get_data()
            if w.ndim != 2 or b.shape != (w.shape[1],):
                return False
            root = m.get_match_root()
            fused = ovops.add(ovops.matmul(mm.input_value(0), np.ascontiguousarray(w.T),
                                           False, True), b)
            root.output(0).replace(fused.output(0))
            return True

        p = OVMatcherPass()
        p.register_matcher(OVMatcher(add, "FuseMatMulAdd"), callback)
        return p

    def remove_transposes() -> OVMatcherPass:
        first = WrapType("opset1.Transpose", [AnyInput(), WrapType("opset1.Constant")])
        second = WrapType("opset1.Transpose", [first, WrapType("opset1.Constant")])

        def callback(m) -> bool:
            root = m.get_match_root()
            inner = m.get_pattern_value_map()[first].get_node()
            a = inner.input_value(1).get_node().get_data().tolist()
            b = root.input_value(1).get_node().get_data().tolist()
            if [a[i] for i in b] != list(range(len(a))):
                return False
            root.output(0).replace(inner.input_value(0))
            return True

        p = OVMatcherPass()
        p.register_matcher(OVMatcher(second, "RemoveCancellingTransposes"), callback)
        return p

    def convert_divide() -> OVMatcherPass:
        divisor = WrapType("opset1.Constant")
        div = WrapType("opset1.Divide", [AnyInput(), divisor])

        def callback(m) -> bool:
            root = m.get_match_root()
            c = m.get_pattern_value_map()[divisor].get_node().get_data()
            if c.dtype.kind != "f":
                return False
            mul = ovops.multiply(root.input_value(0),
                                 np.reciprocal(c.astype(np.float64)).astype(c.dtype))
            mul.set_friendly_name(root.get_friendly_name())
            root.output(0).replace(mul.output(0))
            return True

        p = OVMatcherPass()
        p.register_matcher(OVMatcher(div, "ConvertDivide"), callback)
        return p

    passes = {"matmul_add": fuse_matmul_add, "transposes": remove_transposes,
              "divide": convert_divide}

    def run(kind: str, links: int, validate: bool) -> tuple[float, int]:
        y, x = build(kind, links, ovops)
        model = ov.Model([y], [x], kind)
        manager = OVManager()
        manager.set_per_pass_validation(validate)
        manager.register_pass(passes[kind]())
        dt, _ = timed(lambda: manager.run_passes(model))
        return dt, len(model.get_ordered_ops())

    return run


def profile(kind: str, links: int) -> None:
    y, x = build(kind, links, opset)
    model = Model([y], [x], kind)
    manager = Manager()
    manager.register_pass(NETPASS_PASSES[kind]())
    gc.collect()
    prof = cProfile.Profile()
    prof.enable()
    manager.run_passes(model)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=30_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--passes", default="matmul_add,transposes,divide")
    ap.add_argument("--no-openvino", action="store_true")
    ap.add_argument("--profile", metavar="PASS", help="cProfile netpass's validated run")
    args = ap.parse_args()
    sys.setrecursionlimit(20000)
    if args.profile:
        profile(args.profile, args.nodes // NODES_PER_LINK[args.profile])
        return
    ov_run = None if args.no_openvino else openvino_runner()
    try:
        import openvino
        ov_version = openvino.__version__
    except ImportError:
        ov_version = "not installed"
    print(f"machine: {platform.processor() or platform.machine()}, {platform.system()} "
          f"{platform.release()}; python {platform.python_version()}; numpy {np.__version__}; "
          f"openvino {ov_version}")
    print(f"CPU s, median of {args.repeats}; on/off = ratio of the medians; pairs = median "
          "[min, max] of the on/off ratios of runs made back to back")
    print(f"{'pass':<12} {'nodes':>7} {'netpass off':>12} {'netpass on':>11} {'on/off':>7} "
          f"{'pairs':>20} {'OV off':>8} {'OV on':>8} {'OV on/off':>9}")
    for kind in args.passes.split(","):
        links = max(1, args.nodes // NODES_PER_LINK[kind])
        nodes = links * NODES_PER_LINK[kind] + 2
        times: dict[str, list[float]] = {"off": [], "on": [], "ov_off": [], "ov_on": []}
        for repeat in range(args.repeats):
            # Interleaved, each pair in alternating order, so that the machine's load moves
            # both columns alike.
            order = (False, True) if repeat % 2 == 0 else (True, False)
            got = {validate: run_netpass(kind, links, validate) for validate in order}
            assert got[True][1] == got[False][1], (got[True][1], got[False][1])
            times["off"].append(got[False][0])
            times["on"].append(got[True][0])
            if ov_run is not None:
                times["ov_off"].append(ov_run(kind, links, False)[0])
                times["ov_on"].append(ov_run(kind, links, True)[0])
        med = {k: statistics.median(v) for k, v in times.items() if v}
        pairs = [a / b for a, b in zip(times["on"], times["off"])]
        spread = f"{statistics.median(pairs):.3f} [{min(pairs):.2f}, {max(pairs):.2f}]"
        line = (f"{kind:<12} {nodes:>7} {med['off']:>12.4f} {med['on']:>11.4f} "
                f"{med['on'] / med['off']:>7.3f} {spread:>20}")
        if "ov_on" in med:
            line += (f" {med['ov_off']:>8.4f} {med['ov_on']:>8.4f} "
                     f"{med['ov_on'] / med['ov_off']:>9.3f}")
        print(line, flush=True)

if __name__ == "__main__":
    main()
