"""A structural hash of the GNA flow's result on a synthetic block graph, blind to made-up names.

    PYTHONPATH=TREE python tools/gna_graph_hash.py SIZE static|dynamic SEED [--offset N]

Runs ``read_model`` + ``GnaTransformationsPipeline`` + ``split_pre_post_processing`` on
``gna_blocks_onnx(random_blocks(SIZE // 9, SEED), seed=SEED)`` and prints one hash per model
(the main one, then each pre/post model) with its op counts. Two trees whose lines are equal
leave graphs that differ at most in the names netpass makes up (``<Type>_<id>`` from the global
node counter, also inside ``<name>.<i>`` and fused names; the counter is moved to
``FIRST_ID`` first, so that no such name equals one of the ONNX model's): every op's type, version,
attributes, constant values, wiring (a hash of each op over the hashes of its producers),
output element types, shapes, partial values and tensor names, friendly names, node, input and
output rt_info, and the order of parameters and results are hashed, made-up names as ``#``.
The consumer order is not.

``--offset N`` advances the node counter by ``N`` first: the hash must not move (the check that
made-up names are really left out). Why: the transpose sinking steps name the op they cross
after a Transpose they build (OpenVINO's rule), so a rewrite that builds fewer nodes changes
those names and nothing else that counts (BENCHMARKS.md, issue 16, tenth round).
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
import sys

import numpy as np

MADE_UP = re.compile(r"[A-Za-z][A-Za-z0-9]*_(\d+)")
FIRST_ID = 10**12


def flow(size: int, shape: str, seed: int, offset: int = 0) -> list[str]:
    """Hash lines of the flow's models (main first)."""
    import netpass
    from netpass.core import node as core_node
    from netpass.ngraph_passes.gna import GnaTransformationsPipeline
    from netpass.passes import Manager
    from netpass.prepost import split_pre_post_processing
    from netpass.synthetic import gna_blocks_onnx, random_blocks

    sys.setrecursionlimit(100_000)
    dims = (1, 8, 8, 8) if shape == "static" else ("N", 8, 8, 8)
    data = gna_blocks_onnx(random_blocks(max(1, size // 9), seed), shape=dims, seed=seed)
    # Made-up names from here on carry ids of at least FIRST_ID: none equals a name of the
    # ONNX model (the builder's ``Transpose_12``), so the two kinds are told apart.
    core_node._ids = itertools.count(max(next(core_node._ids), FIRST_ID) + offset)
    model = netpass.read_model(data)
    manager = Manager()
    manager.register_pass(GnaTransformationsPipeline())
    manager.run_passes(model)
    split = split_pre_post_processing(model)
    lines = [graph_hash(model)]
    for kind in ("inputs", "outputs"):
        for name, part in sorted(getattr(split, kind).items()):
            lines.append(f"{kind}:{name}: {graph_hash(part)}")
    return lines


def _name(text: str) -> str:
    """``text`` with the made-up names in it (``<Type>_<id>``, id >= FIRST_ID) as ``#``."""
    return MADE_UP.sub(lambda m: "#" if int(m.group(1)) >= FIRST_ID else m.group(0), text)


def _text(value: object) -> str:
    """A canonical text of an attribute or rt_info value (made-up names as ``#``)."""
    if isinstance(value, np.ndarray):
        data = hashlib.md5(np.ascontiguousarray(value).tobytes()).hexdigest()
        return f"nd{value.dtype}{value.shape}{data}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_text(x) for x in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(sorted(f"{_text(k)}:{_text(x)}"
                                     for k, x in value.items())) + "}"
    if isinstance(value, (set, frozenset)):
        return "{" + ",".join(sorted(_text(x) for x in value)) + "}"
    return _name(repr(value))


def graph_hash(model) -> str:
    """``<hash> <op counts>`` of ``model`` (see the module doc)."""
    hashes: dict[int, str] = {}
    counts: dict[str, int] = {}
    for n in model.get_ordered_ops():
        parts = [n.type_name, n.version, _name(n.friendly_name),
                 _text({k: n.__dict__.get(k) for k in n.ATTRS}),
                 _text(dict(n._rt or {})), _text(dict(n._in_rt or {}))]
        if n.type_name == "Constant":
            parts.append(_text(n.output(0).value))
        for port in n._outs:
            parts.append(f"{port.et}|{port.ps}|{_text(port.pval)}|"
                         f"{sorted(port.names or ())}|{_text(dict(port.rt or {}))}")
        for src in n._inputs:
            parts.append(f"<{hashes[id(src.node)]}:{src.index}")
        hashes[id(n)] = hashlib.md5("\x00".join(parts).encode()).hexdigest()
        counts[n.type_name] = counts.get(n.type_name, 0) + 1
    whole = "".join(sorted(hashes.values()))
    whole += "".join(hashes[id(r)] for r in model.get_results())
    whole += "".join(hashes[id(p)] for p in model.get_parameters())
    digest = hashlib.md5(whole.encode()).hexdigest()[:16]
    return f"{digest} {json.dumps(dict(sorted(counts.items())))}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("size", type=int)
    ap.add_argument("shape", choices=("static", "dynamic"))
    ap.add_argument("seed", type=int)
    ap.add_argument("--offset", type=int, default=0, help="advance the node counter first")
    args = ap.parse_args()
    for line in flow(args.size, args.shape, args.seed, args.offset):
        print(line)


if __name__ == "__main__":
    main()
