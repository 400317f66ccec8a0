"""Compare two per-pass dump folders: op counts after every pass side by side, the first pass
where the two differ, and which pass first changed which node.

A dump folder is what netpass writes while it transforms a model:

- ``NETPASS_SERIALIZE_TRACING=DIR``: ``<model>_<NNN>_<pass>.xml`` (IR v11) after every pass;
- ``CompiledModel.dump(DIR)``: ``0_original.xml``, ``1_transformed.xml``, ``2_legacy.xml`` (the
  legacy layer graph), ``3_executable.xml`` (and ``2_prepost_<i>.xml``, other models, skipped);
- ``netpass convert MODEL --dump-dir DIR``: both, the per-pass ones in ``DIR/tracing``;
- the legacy pass manager's ``dump_dir``: ``legacy_<NN>_<pass>.xml``.

The steps of a folder are put in run order (original, every traced pass, transformed, legacy
passes, legacy, executable). A node is a layer, known by its name; it changes when its type,
attributes, output shapes or inputs (producer name and output index) do. Names a pass makes up
(``Constant_184``) come from process-wide counters, so they pair up between two folders only
where both runs created the same nodes in the same order.

    python tools/dump_diff.py A B            # two folders, side by side
    python tools/dump_diff.py A              # one folder: its timeline
    python tools/dump_diff.py A B --node conv1   # the history of one node in both
"""
from __future__ import annotations

import argparse
import difflib
import itertools
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

TRACE = re.compile(r"^(?P<model>.+)_(?P<n>\d{3,})_(?P<pass>.+)$")
STAGE = re.compile(r"^(?P<n>\d)_(?P<stage>original|transformed|legacy|executable)$")
LEGACY_PASS = re.compile(r"^legacy_(?P<n>\d+)_(?P<pass>.+)$")


@dataclass(frozen=True)
class Layer:
    """One node of a dump: what a change is measured on."""

    type: str
    attrs: tuple[tuple[str, str], ...]
    shapes: tuple[str, ...]
    inputs: tuple[tuple[str, str], ...]  # (producer name, producer port) per input port


@dataclass
class Step:
    """One dump: its label (the pass or stage), file and layers by name."""

    label: str
    path: Path
    layers: dict[str, Layer] = field(default_factory=dict)

    def counts(self) -> Counter:
        return Counter(layer.type for layer in self.layers.values())


def _unique(names: list[str]) -> list[str]:
    """Layer names, a repeated one numbered (``name#2``) so each stays a key."""
    seen: Counter = Counter()
    out = []
    for n in names:
        seen[n] += 1
        out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
    return out


def _read_ir(root: ElementTree.Element) -> dict[str, Layer]:
    elements = root.findall("./layers/layer")
    names = _unique([el.get("name", el.get("id", "")) for el in elements])
    by_id = {el.get("id"): name for el, name in zip(elements, names)}
    # IR numbers output ports after the input ports; an output's index is its port id less those
    n_inputs = {el.get("id"): len(el.findall("./input/port")) for el in elements}
    inputs: dict[str, dict[str, tuple[str, str]]] = {n: {} for n in names}
    for edge in root.findall("./edges/edge"):
        src_id = edge.get("from-layer")
        src, dst = by_id.get(src_id), by_id.get(edge.get("to-layer"))
        if src is not None and dst is not None:
            port = edge.get("from-port", "")
            if port.isdigit():
                port = str(int(port) - n_inputs[src_id])
            inputs[dst][edge.get("to-port", "")] = (src, port)
    layers = {}
    for el, name in zip(elements, names):
        data = el.find("data")
        attrs = tuple(sorted(data.attrib.items())) if data is not None else ()
        if el.get("type") == "Const":  # where a constant's bytes sit says nothing of its value
            attrs = tuple((k, v) for k, v in attrs if k not in ("offset", "size"))
        shapes = tuple(",".join(d.text or "" for d in port.findall("dim"))
                       for port in el.findall("./output/port"))
        ports = inputs[name]
        layers[name] = Layer(el.get("type", ""), attrs, shapes,
                             tuple(ports[p] for p in sorted(ports, key=_port_key)))
    return layers


def _read_legacy(root: ElementTree.Element) -> dict[str, Layer]:
    elements = root.findall("./layers/layer")
    names = _unique([el.get("name", "") for el in elements])
    inputs: dict[str, dict[str, tuple[str, str]]] = {n: {} for n in names}
    for edge in root.findall("./edges/edge"):
        dst = edge.get("to", "")
        if dst in inputs:
            inputs[dst][edge.get("to-port", "")] = (edge.get("from", ""), edge.get("from-port", ""))
    layers = {}
    for el, name in zip(elements, names):
        attrs = tuple(sorted((p.get("name", ""), p.get("value", "")) for p in el.findall("param")))
        shapes = tuple(o.get("shape", "") for o in el.findall("output"))
        ports = inputs[name]
        layers[name] = Layer(el.get("type", ""), attrs, shapes,
                             tuple(ports[p] for p in sorted(ports, key=_port_key)))
    return layers


def _port_key(port: str) -> tuple[int, str]:
    return (int(port), "") if port.isdigit() else (1 << 30, port)


def read_dump(path: Path) -> dict[str, Layer]:
    """The layers of one dump file (IR v11 or the legacy layer graph's XML)."""
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as e:
        raise SystemExit(f"error: {path} is not a dump netpass wrote ({e})") from e
    if root.get("version") is not None:
        return _read_ir(root)
    return _read_legacy(root)


def find_steps(folder: Path, model: str | None = None) -> list[Step]:
    """The dumps of ``folder`` (and of its ``tracing/`` subfolder) in run order."""
    if not folder.is_dir():
        raise SystemExit(f"error: {folder} is not a folder")
    stages: dict[int, list[Step]] = {}
    traces: dict[str, list[tuple[int, Step]]] = {}
    legacy: list[tuple[int, Step]] = []
    files = sorted(folder.glob("*.xml"))
    if (folder / "tracing").is_dir():
        files += sorted((folder / "tracing").glob("*.xml"))
    for path in files:
        stem = path.stem
        if m := STAGE.match(stem):
            stages.setdefault(int(m["n"]), []).append(Step(m["stage"], path))
        elif m := LEGACY_PASS.match(stem):
            legacy.append((int(m["n"]), Step(f"legacy {m['pass']}", path)))
        elif m := TRACE.match(stem):
            traces.setdefault(m["model"], []).append((int(m["n"]), Step(m["pass"], path)))
    if model is None and traces:
        model = max(traces, key=lambda k: len(traces[k]))  # the main model has the most
    traced = [s for _, s in sorted(traces.get(model or "", []), key=lambda t: t[0])]
    steps = stages.get(0, []) + traced + stages.get(1, []) + \
        [s for _, s in sorted(legacy, key=lambda t: t[0])] + stages.get(2, []) + stages.get(3, [])
    if not steps:
        raise SystemExit(f"error: {folder} holds no netpass dumps (see --help for the names)")
    for step in steps:
        step.layers = read_dump(step.path)
    return steps


@dataclass
class Change:
    """What one step did to the layers of the step before."""

    added: list[str]
    removed: list[str]
    changed: list[str]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def diff_layers(before: dict[str, Layer], after: dict[str, Layer]) -> Change:
    return Change(added=sorted(set(after) - set(before)),
                  removed=sorted(set(before) - set(after)),
                  changed=sorted(n for n in set(before) & set(after) if before[n] != after[n]))


def first_changes(steps: list[Step]) -> dict[str, tuple[str, str]]:
    """For each node, the first step that added, removed or changed it, and how."""
    first: dict[str, tuple[str, str]] = {}
    for prev, step in itertools.pairwise(steps):
        change = diff_layers(prev.layers, step.layers)
        for how, names in (("added", change.added), ("removed", change.removed),
                           ("changed", change.changed)):
            for n in names:
                first.setdefault(n, (step.label, how))
    return first


def describe(layer: Layer | None) -> str:
    if layer is None:
        return "-"
    ins = ", ".join(f"{n}:{p}" for n, p in layer.inputs)
    return f"{layer.type} [{'; '.join(layer.shapes)}] <- ({ins})"


def align(a: list[Step], b: list[Step]) -> list[tuple[Step | None, Step | None]]:
    """The steps of both folders paired by label (difflib over the label sequences)."""
    pairs: list[tuple[Step | None, Step | None]] = []
    matcher = difflib.SequenceMatcher(a=[s.label for s in a], b=[s.label for s in b],
                                      autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs += list(zip(a[i1:i2], b[j1:j2]))
        else:
            pairs += [(s, None) for s in a[i1:i2]] + [(None, s) for s in b[j1:j2]]
    return pairs


def count_difference(a: Step, b: Step) -> str:
    ca, cb = a.counts(), b.counts()
    parts = [f"{t} {cb[t] - ca[t]:+d}" for t in sorted(set(ca) | set(cb)) if ca[t] != cb[t]]
    return ", ".join(parts)


def timeline(steps: list[Step]) -> list[str]:
    """One folder: op count after each step and what the step did."""
    lines = [f"{'#':>3}  {'step':<40} {'ops':>5}  added/removed/changed"]
    prev: Step | None = None
    for i, step in enumerate(steps):
        change = diff_layers(prev.layers, step.layers) if prev else None
        what = f"{len(change.added)}/{len(change.removed)}/{len(change.changed)}" \
            if change else ""
        lines.append(f"{i:>3}  {step.label:<40} {len(step.layers):>5}  {what}")
        prev = step
    return lines


def side_by_side(a: list[Step], b: list[Step]) -> list[str]:
    """Op counts per step of both folders, and what differs between the paired steps."""
    lines = [f"{'step':<40} {'A ops':>6} {'B ops':>6}  B - A by type"]
    for sa, sb in align(a, b):
        label = (sa or sb).label  # type: ignore[union-attr]
        na = str(len(sa.layers)) if sa else "-"
        nb = str(len(sb.layers)) if sb else "-"
        extra = count_difference(sa, sb) if sa and sb else ("only in A" if sa else "only in B")
        lines.append(f"{label:<40} {na:>6} {nb:>6}  {extra}")
    return lines


def first_divergence(a: list[Step], b: list[Step]) -> list[str]:
    """The first paired step whose graphs differ, and how."""
    for sa, sb in align(a, b):
        if sa is None or sb is None:
            continue
        change = diff_layers(sa.layers, sb.layers)
        if change:
            lines = [f"first difference after '{sa.label}':"]
            for how, names in (("only in A", change.removed), ("only in B", change.added)):
                if names:
                    lines.append(f"  {how}: {', '.join(names)}")
            for n in change.changed:
                lines.append(f"  {n}: A {describe(sa.layers[n])}")
                lines.append(f"  {' ' * len(n)}  B {describe(sb.layers[n])}")
            return lines
    return ["no difference between the paired steps"]


def first_change_table(a: list[Step], b: list[Step] | None) -> list[str]:
    """Each node and the step that first changed it, in A (and B)."""
    fa = first_changes(a)
    fb = first_changes(b) if b is not None else {}
    names = sorted(set(fa) | set(fb))
    if not names:
        return ["no step changed any node"]
    head = f"{'node':<36} {'first changed in A':<40}"
    lines = [head + (" first changed in B" if b is not None else "")]
    for n in names:
        ca = " ".join(fa[n][::-1]) if n in fa else "-"
        row = f"{n:<36} {ca:<40}"
        if b is not None:
            row += " " + (" ".join(fb[n][::-1]) if n in fb else "-")
        lines.append(row.rstrip())
    return lines


def node_history(steps: list[Step], node: str) -> list[str]:
    lines = []
    prev: Layer | None = None
    for step in steps:
        now = step.layers.get(node)
        if now != prev:
            lines.append(f"  {step.label}: {describe(now)}")
        prev = now
    return lines or ["  (never present)"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Compare two per-pass dump folders of netpass (NETPASS_SERIALIZE_TRACING, "
                    "CompiledModel.dump, netpass convert --dump-dir): op counts per pass side by "
                    "side, the first differing pass, and which pass first changed which node.")
    parser.add_argument("a", type=Path, help="a dump folder")
    parser.add_argument("b", type=Path, nargs="?", help="another dump folder to compare with")
    parser.add_argument("--model", help="the traced model's name when a folder traces several "
                                        "(default: the one with most dumps)")
    parser.add_argument("--node", action="append", default=[],
                        help="print the history of this node (repeatable)")
    args = parser.parse_args(argv)
    a = find_steps(args.a, args.model)
    b = find_steps(args.b, args.model) if args.b else None
    print(f"A: {args.a} ({len(a)} dumps)" + (f"   B: {args.b} ({len(b)} dumps)" if b else ""))
    print()
    print("\n".join(side_by_side(a, b) if b is not None else timeline(a)))
    if b is not None:
        print()
        print("\n".join(first_divergence(a, b)))
    print()
    print("\n".join(first_change_table(a, b)))
    for node in args.node:
        print()
        print(f"history of {node} in A:")
        print("\n".join(node_history(a, node)))
        if b is not None:
            print(f"history of {node} in B:")
            print("\n".join(node_history(b, node)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
