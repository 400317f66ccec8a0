"""Pass framework speed: netpass vs OpenVINO's Python MatcherPass, and type dispatch.

(a) The chain (Transpose[0,2,3,1] -> Transpose[0,3,1,2] -> Relu) x N (5 nodes per link: two
    Transposes, their two order Constants, a Relu), rewritten by a MatcherPass that removes
    cancelling Transpose pairs, once with netpass and once with OpenVINO's Python API
    (``openvino.passes.MatcherPass`` with ``WrapType``/``AnyInput``) on the same graph built
    with ``openvino.opset13``. ``Manager.run_passes`` is timed, per-pass validation off in
    both; each repeat rewrites a freshly built graph. Reports the median time, the ratio and
    the cost per graph node; and beside it the model's construction plus the rewrite
    (``Model(...)`` then ``run_passes``): OpenVINO's ``ov.Model`` constructor sorts the graph
    and caches the order its rewrite then walks, netpass's ``Model`` sorts in the rewrite, so
    that column counts each library's sort once.
(b) A GraphRewrite of 20 matchers whose root types do not occur in a 100k-node graph, against
    one such matcher: with dispatch by root type both cost one traversal.

Run: ``python benchmarks/bench_passes.py [--sizes 3000,...] [--repeats 5] [--no-openvino]``.
"""
from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netpass import Model, ops, opset
from netpass.passes import GraphRewrite, Manager, MatcherPass
from netpass.pattern import Matcher, any_input, wrap_type

# CPU time of this process: the machines this runs on are shared, and both libraries run
# the rewrite on one thread, so CPU time compares them without other processes' load.
CLOCK = time.process_time
ORDER_IN, ORDER_OUT = [0, 2, 3, 1], [0, 3, 1, 2]
NODES_PER_LINK = 5


def build_chain(links: int, shared: bool = False) -> Model:
    return Model(*chain_nodes(links, shared), "chain")


def chain_nodes(links: int, shared: bool = False) -> tuple[list, list]:
    """The chain's (results, parameters), not yet a model."""
    x = opset.parameter([1, 2, 3, 4], np.float32, name="x")
    y = x
    c_in = opset.constant(np.array(ORDER_IN, dtype=np.int64))
    c_out = opset.constant(np.array(ORDER_OUT, dtype=np.int64))
    for _ in range(links):
        if not shared:
            c_in = opset.constant(np.array(ORDER_IN, dtype=np.int64))
            c_out = opset.constant(np.array(ORDER_OUT, dtype=np.int64))
        t1 = opset.transpose(y, c_in)
        t2 = opset.transpose(t1, c_out)
        y = opset.relu(t2)
    return [y], [x]


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


def run_netpass(links: int, shared: bool) -> tuple[float, float, int]:
    """(the rewrite's CPU s, the model's construction's, nodes left)."""
    results, params = chain_nodes(links, shared)
    manager = Manager()
    manager.set_per_pass_validation(False)
    manager.register_pass(RemoveCancellingTransposes())
    gc.collect()
    t0 = CLOCK()
    model = Model(results, params, "chain")
    t1 = CLOCK()
    manager.run_passes(model)
    dt = CLOCK() - t1
    left = len(model.get_ordered_ops())
    return dt, t1 - t0, left


def _openvino_runner() -> Callable[[int, bool], tuple[float, float, int]] | None:
    try:
        import openvino as ov
        from openvino import opset13 as ovops
        from openvino.passes import AnyInput, WrapType
        from openvino.passes import Manager as OVManager
        from openvino.passes import Matcher as OVMatcher
        from openvino.passes import MatcherPass as OVMatcherPass
    except ImportError:
        return None

    def build(links: int, shared: bool):
        """The chain's (results, parameters), not yet a model."""
        x = ovops.parameter([1, 2, 3, 4], np.float32, name="x")
        y = x
        c_in = ovops.constant(np.array(ORDER_IN, dtype=np.int64))
        c_out = ovops.constant(np.array(ORDER_OUT, dtype=np.int64))
        for _ in range(links):
            if not shared:
                c_in = ovops.constant(np.array(ORDER_IN, dtype=np.int64))
                c_out = ovops.constant(np.array(ORDER_OUT, dtype=np.int64))
            t1 = ovops.transpose(y, c_in)
            t2 = ovops.transpose(t1, c_out)
            y = ovops.relu(t2)
        return [y], [x]

    class OVRemove(OVMatcherPass):
        def __init__(self) -> None:
            super().__init__()
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

            self.register_matcher(OVMatcher(second, "RemoveCancellingTransposes"), callback)

    def run(links: int, shared: bool) -> tuple[float, float, int]:
        results, params = build(links, shared)
        manager = OVManager()
        manager.set_per_pass_validation(False)
        manager.register_pass(OVRemove())
        gc.collect()
        t0 = CLOCK()
        model = ov.Model(results, params, "chain")
        t1 = CLOCK()
        manager.run_passes(model)
        dt = CLOCK() - t1
        return dt, t1 - t0, len(model.get_ordered_ops())

    return run


def _absent_matcher(i: int) -> MatcherPass:
    # Root types absent from the chain graph: Convolution, MaxPool, Concat, ... cycled.
    kinds = [ops.Convolution, ops.MaxPool, ops.Concat, ops.Split, ops.MatMul, ops.Add,
             ops.Multiply, ops.Reshape, ops.Gather if hasattr(ops, "Gather") else ops.Squeeze,
             ops.Squeeze]
    pattern = wrap_type(kinds[i % len(kinds)], [any_input(), any_input()])
    return MatcherPass(Matcher(pattern, f"Absent{i}"), lambda m: True)


def run_dispatch(n_matchers: int, links: int) -> float:
    model = build_chain(links)
    rewrite = GraphRewrite(*[_absent_matcher(i) for i in range(n_matchers)])
    gc.collect()
    t0 = CLOCK()
    rewrite.run_on_model(model)
    return CLOCK() - t0


def breakdown(links: int, repeats: int) -> None:
    """Where netpass's time goes on one size: the topological order alone, the pass with the
    order already cached, and freeing as many nodes as the rewrite drops."""
    from netpass.core.node import _Topology
    topo, rest, free = [], [], []
    for _ in range(repeats):
        model = build_chain(links)
        gc.collect()
        t0 = CLOCK()
        model.get_ordered_ops()
        topo.append(CLOCK() - t0)
        manager = Manager()
        manager.set_per_pass_validation(False)
        manager.register_pass(RemoveCancellingTransposes())
        t0 = CLOCK()
        manager.run_passes(model)
        rest.append(CLOCK() - t0)
        doomed = build_chain(links)  # free a whole chain: 4 of its 5 nodes per link are dropped
        doomed.get_ordered_ops()
        doomed.drop_cached_order()
        _Topology.caches.clear()
        gc.collect()
        t0 = CLOCK()
        del doomed
        free.append((CLOCK() - t0) * 4 / 5)
    med = statistics.median
    print(f"  {links * NODES_PER_LINK + 2} nodes: topological order {med(topo):.4f} s, pass with "
          f"the order cached {med(rest):.4f} s, of which freeing the dropped nodes ~{med(free):.4f} s")


def median_of(fn: Callable[[], float], repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="3000,12000,60000,150000,300000",
                    help="graph sizes in nodes (rounded to whole links)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-openvino", action="store_true")
    ap.add_argument("--breakdown", type=int, metavar="NODES",
                    help="only print where netpass's time goes at this size")
    args = ap.parse_args()
    sys.setrecursionlimit(10000)
    if args.breakdown:
        breakdown(args.breakdown // NODES_PER_LINK, args.repeats)
        return

    ov_run = None if args.no_openvino else _openvino_runner()
    try:
        import openvino
        ov_version = openvino.__version__
    except ImportError:
        ov_version = "not installed"
    print(f"machine: {platform.processor() or platform.machine()}, {platform.system()} "
          f"{platform.release()}; python {platform.python_version()}; numpy {np.__version__}; "
          f"openvino {ov_version}")
    for shared in (False, True):
        per_link = 3 if shared else NODES_PER_LINK
        what = "order Constants shared by all links (3 nodes per link)" if shared else \
            "one order Constant per Transpose (5 nodes per link)"
        print(f"\n(a) cancelling Transpose pairs, {what}; CPU s, median of {args.repeats}")
        print(f"{'nodes':>8} {'netpass s':>10} {'us/node':>8} {'openvino s':>11} {'us/node':>8} "
              f"{'np/ov':>6} | with Model(): {'netpass s':>10} {'openvino s':>11} {'np/ov':>6}")
        for size in (int(s) for s in args.sizes.split(",")):
            links = max(1, size // per_link)
            nodes = links * per_link + (4 if shared else 2)
            np_times, ov_times, np_both, ov_both = [], [], [], []
            for _ in range(args.repeats):
                dt, dm, left = run_netpass(links, shared)
                assert left == links + 2, f"netpass left {left} nodes, expected {links + 2}"
                np_times.append(dt)
                np_both.append(dt + dm)
                if ov_run is not None:
                    dt, dm, left_ov = ov_run(links, shared)
                    assert left_ov == left, f"openvino left {left_ov} nodes, netpass {left}"
                    ov_times.append(dt)
                    ov_both.append(dt + dm)
            t_np = statistics.median(np_times)
            line = f"{nodes:>8} {t_np:>10.4f} {t_np / nodes * 1e6:>8.2f}"
            if ov_times:
                t_ov, b_np, b_ov = (statistics.median(v) for v in (ov_times, np_both, ov_both))
                line += (f" {t_ov:>11.4f} {t_ov / nodes * 1e6:>8.2f} {t_np / t_ov:>6.2f} |"
                         f"{'':>14} {b_np:>10.4f} {b_ov:>11.4f} {b_np / b_ov:>6.2f}")
            print(line, flush=True)

    print("\n(b) GraphRewrite over a 100k-node graph, root types absent, median of",
          args.repeats, "repeats")
    links = 100_000 // NODES_PER_LINK
    one = median_of(lambda: run_dispatch(1, links), args.repeats)
    twenty = median_of(lambda: run_dispatch(20, links), args.repeats)
    print(f"  1 matcher: {one:.4f} s   20 matchers: {twenty:.4f} s   ratio {twenty / one:.2f}")


if __name__ == "__main__":
    main()
