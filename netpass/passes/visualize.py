"""VisualizeTree: render a model with graphviz (svg, png, pdf or dot, by the file's suffix).

The dot text is written here, without the graphviz python package; only the ``dot`` binary is
needed, and only for rendered formats. The layout follows OpenVINO's VisualizeTree:

- each op is a box labelled with its friendly name, its unique name when different,
  ``<version>::<Type>``, and its output element types and shapes;
- Parameters and Constants are "floated": every use gets its own dashed clone next to the
  consumer (Parameters blue), so inputs and weights do not pull long edges across the graph;
  Constants show their shape and first values;
- Results are crimson;
- an edge jumping more than ``NETPASS_VISUALIZE_TREE_EDGE_JUMP_DISTANCE`` (20) ranks is cut
  into a ``SEND_k`` / ``RECV_k`` pair, which keeps large graphs readable.

Environment toggles (``1``/``0``), mirroring ``OV_VISUALIZE_TREE_*``:
``NETPASS_VISUALIZE_TREE_OUTPUT_SHAPES`` (on), ``..._OUTPUT_TYPES`` (on), ``..._IO`` (per-port
input lines), ``..._RUNTIME_INFO``, ``..._TENSORS_NAME``, ``..._EDGE_LABELS`` (port numbers on
edges), ``..._EDGE_JUMP_DISTANCE`` (int), ``..._CONST_MAX_ELEMENTS`` (int, default 7), and
``NETPASS_VISUALIZE_PARTIAL_VALUES`` (known values of shape tensors and dimension symbols, as
``OV_VISUALIZE_PARTIAL_VALUES_AND_LABELS``).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..core.boundary import Constant, Parameter, Result
from ..core.model import Model
from ..core.node import Node, Output
from ..errors import NetpassError, system_errors_as_netpass
from .base import ModelPass

NodeModifier = Callable[[Node, dict[Any, Any]], None]

_ENV = "NETPASS_VISUALIZE_TREE_"


def _flag(name: str, default: bool) -> bool:
    v = os.environ.get(_ENV + name)
    return default if v is None else v.strip().lower() not in ("0", "", "false", "no", "off")


def _int(name: str, default: int) -> int:
    v = os.environ.get(_ENV + name)
    try:
        return int(v) if v is not None else default
    except ValueError:
        raise NetpassError(f"{_ENV + name}={v!r}: expected an integer") from None


def _q(text: str) -> str:
    """A dot double-quoted string; newlines become dot's centred line breaks."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _shape_text(out: Output, symbols: bool) -> str:
    ps = out.partial_shape
    if not symbols or not ps.rank_is_static:
        return str(ps)
    return "[" + ",".join(f"{d}<{d.symbol}>" if d.symbol is not None else str(d)
                          for d in ps) + "]"


def _port(out: Output, types: bool, shapes: bool, symbols: bool = False) -> str:
    parts = []
    if types:
        parts.append("{" + out.element_type.name + "}")
    if shapes:
        parts.append(_shape_text(out, symbols))
    return "".join(parts)


def const_preview(value: np.ndarray, limit: int) -> str:
    """``[ v0, v1, ... ]``: the first ``limit`` values of a constant."""
    flat = np.asarray(value).reshape(-1)
    items = [_fmt(v) for v in flat[:limit].tolist()]
    more = ", ..." if flat.size > limit else ""
    return "[ " + ", ".join(items) + more + " ]"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


class _Dot:
    """Builds the dot text of one model."""

    def __init__(self, model: Model, modifier: NodeModifier | None) -> None:
        self.model = model
        self.modifier = modifier
        self.shapes = _flag("OUTPUT_SHAPES", True)
        self.types = _flag("OUTPUT_TYPES", True)
        self.io = _flag("IO", False)
        self.rt = _flag("RUNTIME_INFO", False)
        self.tensors = _flag("TENSORS_NAME", False)
        self.edge_labels = _flag("EDGE_LABELS", False)
        self.jump = _int("EDGE_JUMP_DISTANCE", 20)
        self.const_max = _int("CONST_MAX_ELEMENTS", 7)
        v = os.environ.get("NETPASS_VISUALIZE_PARTIAL_VALUES", "0").strip().lower()
        self.partial = v not in ("0", "", "false", "no", "off")
        self.lines: list[str] = []
        self.ids: dict[int, str] = {}
        self.clones = 0
        self.sends = 0

    def node_id(self, node: Node) -> str:
        nid = self.ids.get(id(node))
        if nid is None:
            nid = self.ids[id(node)] = _q(node.name)
        return nid

    def statement(self, nid: str, attrs: dict[str, str]) -> None:
        body = " ".join(f"{k}={v if k == 'label' else _q(v)}" for k, v in attrs.items())
        self.lines.append(f"    {nid} [{body}]")

    def label(self, node: Node) -> str:
        lines = [node.friendly_name]
        if node.name != node.friendly_name:
            lines.append(f"[{node.name}]")
        lines.append(f"{node.version}::{node.type_name}")
        if self.io:
            for i, src in enumerate(node.input_values()):
                lines.append(f"in{i}: {_port(src, True, True)}")
        if not isinstance(node, Result):
            for out in node.outputs():
                text = _port(out, self.types, self.shapes, self.partial)
                if self.tensors and out.names:
                    text += " (" + ", ".join(sorted(out.names)) + ")"
                if text:
                    lines.append(f"out{out.index}: {text}" if node.get_output_size() > 1
                                 or self.io else text)
                pv = out.partial_value if self.partial else None
                if pv is not None:
                    lines.append("value: (" + ", ".join(
                        f"{v}<{v.symbol}>" if getattr(v, "symbol", None) is not None else str(v)
                        for v in pv) + ")")
        if self.rt and node.rt_info:
            lines.extend(f"{k}: {v}" for k, v in sorted(node.rt_info.items()))
        return "\n".join(lines)

    def floated_label(self, node: Node) -> str:
        out = node.output(0)
        lines = [node.friendly_name, "{" + out.element_type.name + "}" + str(out.partial_shape)]
        if isinstance(node, Constant):
            lines.append("value: " + const_preview(node.value, self.const_max))
        if self.tensors and out.names:
            lines.append("(" + ", ".join(sorted(out.names)) + ")")
        return "\n".join(lines)

    def levels(self, ops: list[Node]) -> dict[int, int]:
        """Rank of each op (longest path from a floated node), for the jump distance."""
        level: dict[int, int] = {}
        for node in ops:
            if _floated(node):
                continue
            level[id(node)] = max((level.get(id(s.node), -1) + 1 for s in node.input_values()),
                                  default=0)
        return level

    def edge(self, src: str, dst: str, out_index: int, in_index: int) -> None:
        label = f' [label=" {out_index} -> {in_index} "]' if self.edge_labels else ""
        self.lines.append(f"    {src} -> {dst}{label}")

    def build(self) -> str:
        ops = self.model.get_ordered_ops()
        level = self.levels(ops)
        self.lines = ["digraph", "{", "    graph [rankdir=TB]",
                      '    node [fontname="Helvetica" fontsize=10]']
        for node in ops:
            if _floated(node):
                continue
            attrs = {"shape": "box", "color": "black", "label": _q(self.label(node))}
            if isinstance(node, Result):
                attrs["color"] = "crimson"
                attrs["penwidth"] = "1.5"
            if self.modifier is not None:
                self.modifier(node, attrs)
            self.statement(self.node_id(node), attrs)
        for node in ops:
            if _floated(node):
                continue
            dst = self.node_id(node)
            for i, src in enumerate(node.input_values()):
                p = src.node
                if _floated(p):
                    clone = f"CLONE_{self.clones}"
                    self.clones += 1
                    attrs = {"shape": "box", "style": "dashed",
                             "color": "blue" if isinstance(p, Parameter) else "black",
                             "label": _q(self.floated_label(p))}
                    if self.modifier is not None:
                        self.modifier(p, attrs)
                    self.statement(clone, attrs)
                    self.edge(clone, dst, src.index, i)
                elif level[id(node)] - level[id(p)] > self.jump:
                    k = self.sends
                    self.sends += 1
                    text = f"{p.friendly_name}:{src.index}"
                    self.statement(f"SEND_{k}", {"shape": "cds", "color": "gray40",
                                                 "label": _q(f"SEND {k}\n{text}")})
                    self.statement(f"RECV_{k}", {"shape": "cds", "color": "gray40",
                                                 "label": _q(f"RECV {k}\n{text}")})
                    self.edge(self.node_id(p), f"SEND_{k}", src.index, 0)
                    self.edge(f"RECV_{k}", dst, 0, i)
                else:
                    self.edge(self.node_id(p), dst, src.index, i)
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"


def _floated(node: Node) -> bool:
    return isinstance(node, (Parameter, Constant))


def to_dot(model: Model, node_modifiers: NodeModifier | None = None) -> str:
    """The graphviz dot text of ``model``."""
    return _Dot(model, node_modifiers).build()


class VisualizeTree(ModelPass):
    """Render the model to ``path``: ``.dot`` writes the dot text; ``.svg``, ``.png``,
    ``.pdf`` (any format ``dot -T`` knows) run the ``dot`` binary on it.

    ``node_modifiers(node, attrs)`` may edit each node's dot attributes (a dict such as
    ``{"shape": "box", "color": "black", "label": '"..."'}``) before it is written.
    Does not change the model (returns False).
    """

    def __init__(self, path: Any, node_modifiers: NodeModifier | None = None) -> None:
        super().__init__()
        self.path = Path(path)
        self.node_modifiers = node_modifiers

    def run_on_model(self, model: Model) -> bool:
        with system_errors_as_netpass(f"VisualizeTree to {self.path}"):
            text = to_dot(model, self.node_modifiers)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fmt = self.path.suffix.lstrip(".").lower()
            if fmt in ("dot", "gv", ""):
                self.path.write_text(text, encoding="utf-8")
                return False
            render(text, self.path, fmt)
        return False


def render(dot_text: str, path: Path, fmt: str) -> None:
    """Run ``dot -T<fmt>`` on ``dot_text`` (fed on stdin) writing ``path``."""
    exe = shutil.which("dot")
    if exe is None:
        raise NetpassError(f"VisualizeTree: cannot write {path}: the graphviz 'dot' program is not "
                           "installed (install graphviz, or use a .dot file name)")
    proc = subprocess.run([exe, f"-T{fmt}", "-o", str(path)], input=dot_text.encode("utf-8"),
                          capture_output=True, check=False)
    if proc.returncode != 0:
        raise NetpassError(f"VisualizeTree: dot -T{fmt} failed for {path}: "
                           f"{proc.stderr.decode(errors='replace').strip()}")


__all__ = ["VisualizeTree", "to_dot", "render", "const_preview"]
