"""The layout ops the GNA flow leaves inside the conv nets of ``conv_net_onnx``, per seed.

    PYTHONPATH=TREE python tools/gna_conv_leftovers.py FIRST LAST [--json FILE]

Runs ``read_model`` + ``GnaTransformationsPipeline`` + ``split_pre_post_processing`` on
``conv_net_onnx(seed)`` (tests/property/gna_conv_nets.py) for each seed in ``FIRST..LAST``
and prints, for each seed that leaves a Gather or a Transpose GNA cannot run inside the main
model (what the property test's strict mode refuses), each such op with its neighbourhood: the
ops above it (two levels) and below it (two levels), with shapes. The last line counts the
seeds. A measuring tool, not a test (it runs no reference): the property test checks the
outputs.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys


def _describe(node, up: int = 2, down: int = 2) -> dict:
    """``node``'s type, input shape, order/indices and the op types around it."""
    from netpass.core.boundary import Constant

    def above(n, depth):
        if depth == 0:
            return []
        out = []
        for v in n.input_values():
            if isinstance(v.node, Constant):
                continue
            out.append(f"{v.node.type_name}{v.partial_shape}")
            out.extend("  " + s for s in above(v.node, depth - 1))
        return out

    def below(n, depth):
        if depth == 0:
            return []
        out = []
        for o in n.outputs():
            for c in o.consumers():
                out.append(f"{c.node.type_name}{c.node.output(0).partial_shape}"
                           if c.node.get_output_size() else c.node.type_name)
                out.extend("  " + s for s in below(c.node, depth - 1))
        return out

    extra = None
    if len(node.input_values()) > 1 and isinstance(node.input_value(1).node, Constant):
        extra = [int(i) for i in node.input_value(1).node.value.reshape(-1)][:24]
    return {"op": node.type_name, "shape": str(node.input_value(0).partial_shape),
            "order": extra, "up": above(node, up), "down": below(node, down)}


def leftovers(seed: int) -> list[dict]:
    """The layout ops left inside after the GNA flow on ``conv_net_onnx(seed)``."""
    from gna_conv_nets import conv_net_onnx

    import netpass
    from netpass.ngraph_passes.gna import GnaTransformationsPipeline, is_transpose_supported
    from netpass.passes import Manager
    from netpass.prepost import split_pre_post_processing

    model = netpass.read_model(conv_net_onnx(seed))
    manager = Manager()
    manager.register_pass(GnaTransformationsPipeline())
    manager.run_passes(model)
    split_pre_post_processing(model)
    return [_describe(n) for n in model.get_ordered_ops() if n.type_name == "Gather" or
            n.type_name == "Transpose" and
            not is_transpose_supported(n.input_value(0).partial_shape.to_shape())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=int)
    parser.add_argument("last", type=int)
    parser.add_argument("--json", help="write {seed: leftovers} here")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "property"))
    logging.getLogger("netpass").setLevel(logging.ERROR)
    found = {}
    for seed in range(args.first, args.last + 1):
        left = leftovers(seed)
        if left:
            found[seed] = left
            print(f"seed {seed}:")
            for op in left:
                print(f"  {op['op']} {op['shape']} {op['order']}")
                print("    up:   " + " | ".join(op["up"]))
                print("    down: " + " | ".join(op["down"]))
    print(f"{len(found)} of {args.last - args.first + 1} seeds leave layout ops inside")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(found, f, indent=1)


if __name__ == "__main__":
    main()
