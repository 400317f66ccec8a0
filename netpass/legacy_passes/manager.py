"""The legacy pass manager (OpenVINO GNA's ``PassManager`` over a CNNNetwork).

No pattern matching: each pass walks the layers in topological order and edits the graph by
hand. The manager re-sorts before every pass, runs only the passes of the current phase
(before-copy or after-copy), logs ``PASS: i/n: name`` and can dump the network after each
pass (graphviz ``.dot`` and an XML listing).
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from xml.sax.saxutils import quoteattr

from ..core.gc_pause import gc_paused
from .layer_graph import LegacyNetwork
from .legacy_pass import LegacyPass
from .passes import DEFAULT_PASSES

log = logging.getLogger("netpass.legacy")


class PassManager:
    """Runs registered legacy passes of one phase; ``index`` continues across phases."""

    def __init__(self, net: LegacyNetwork, run_before_copy: bool = False,
                 dump_dir: str | Path | None = None) -> None:
        self.net = net
        self.run_before_copy = run_before_copy
        self.dump_dir = Path(dump_dir) if dump_dir else None
        self.passes: list[LegacyPass] = []
        self.log: list[str] = []

    def register_pass(self, p: LegacyPass | type) -> LegacyPass:
        inst = p() if isinstance(p, type) else p
        self.passes.append(inst)
        return inst

    def run(self, index: int = 0) -> int:
        """Run this phase's passes; returns the next pass index (for the other phase)."""
        chosen = [p for p in self.passes if p.run_before_copy == self.run_before_copy]
        with gc_paused():  # (core.gc_pause: the layer graph holds no reference cycles)
            for p in chosen:
                self.net.sorted_layers()  # re-sort before every pass (raises on a cycle)
                changed = p.run(self.net)
                index += 1
                mark = " (changed)" if changed else ""
                line = f"PASS: {index}/{len(self.passes)}: {p.name}{mark}"
                self.log.append(line)
                log.info(line)
                if self.dump_dir is not None:
                    dump_network(self.net, self.dump_dir / f"legacy_{index:02d}_{p.name}")
        return index


def network_to_dot(net: LegacyNetwork) -> str:
    lines = ["digraph legacy {", "  rankdir=TB;", "  node [shape=box fontsize=10];"]
    for layer in net.sorted_layers():
        shapes = ", ".join(str(s) for s in layer.out_shapes)
        blobs = "".join(f"\\n{k}: {list(v.shape)}" for k, v in layer.blobs.items())
        label = f"{layer.name}\\n{layer.type} ({layer.op_type})\\n{shapes}{blobs}"
        color = {"Input": "blue", "Output": "crimson"}.get(layer.type, "black")
        lines.append(f'  "{layer.name}" [label="{label}" color={color}];')
    for src, dst, data in net.graph.edges(data=True):
        label = f'{data["out_port"]}->{data["in_port"]}'
        lines.append(f'  "{src}" -> "{dst}" [label="{label}" fontsize=8];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def network_to_xml(net: LegacyNetwork) -> str:
    out = [f"<net name={quoteattr(net.name)}>", "  <layers>"]
    for layer in net.sorted_layers():
        out.append(f"    <layer name={quoteattr(layer.name)} type={quoteattr(layer.type)} "
                   f"op={quoteattr(layer.op_type)} precision={quoteattr(layer.precision)}>")
        for k, v in sorted(layer.params.items()):
            out.append(f"      <param name={quoteattr(str(k))} value={quoteattr(str(v))}/>")
        for k, b in layer.blobs.items():
            out.append(f"      <blob name={quoteattr(k)} shape={quoteattr(str(list(b.shape)))}/>")
        for shape in layer.out_shapes:
            out.append(f"      <output shape={quoteattr(str(shape))}/>")
        out.append("    </layer>")
    out.append("  </layers>\n  <edges>")
    for src, dst, data in net.graph.edges(data=True):
        out.append(f"    <edge from={quoteattr(src)} from-port=\"{data['out_port']}\" "
                   f"to={quoteattr(dst)} to-port=\"{data['in_port']}\"/>")
    out.append("  </edges>\n</net>")
    return "\n".join(out) + "\n"


def dump_network(net: LegacyNetwork, stem: Path) -> None:
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".dot").write_text(network_to_dot(net))
    stem.with_suffix(".xml").write_text(network_to_xml(net))


def run_legacy_passes(net: LegacyNetwork, passes: Iterable[LegacyPass | type] | None = None,
                      dump_dir: str | Path | None = None) -> list[str]:
    """Run the default (or given) legacy passes, before-copy phase then after-copy phase."""
    chosen = list(passes) if passes is not None else list(DEFAULT_PASSES)
    log_lines: list[str] = []
    index = 0
    for phase in (True, False):
        pm = PassManager(net, run_before_copy=phase, dump_dir=dump_dir)
        for p in chosen:
            pm.register_pass(p)
        index = pm.run(index)
        log_lines += pm.log
    return log_lines
