"""Serialize: write a model as OpenVINO IR version 11 (``.xml`` + ``.bin``).

The layout follows OpenVINO's own serializer so that its ``read_model`` loads standard ops:
layer ids in emission order (Parameters in model order, other ops topologically, sinks, Results
in model order), IR type names (``Const``, ``ReLU``...), ``version`` = the op class's opset,
``<data>`` from the op's attributes, port ids ``0..n_in-1`` for inputs and ``n_in..`` for
outputs, edges sorted by source layer, and a ``.bin`` that is the raw concatenation of constant
blobs (identical blobs share one offset).

The IR tables the writer shares with :mod:`netpass.frontend.ir_reader` (type names, attribute
spellings ``ATTR_RULES``, name escaping) are in :mod:`netpass.frontend.ir_format`.

Where this differs from OpenVINO's serializer, on purpose: convolution and pooling pads are
written as the op holds them even under ``auto_pad`` (OpenVINO writes zeros; its reader
recomputes them either way, and keeping them makes read-back exact); a Result layer is named
by the model output name (so ``read_model`` gives back the same output names); there is no
fp16 weight compression.

Ops with bodies (If, Loop, TensorIterator) are written as OpenVINO writes them: a port map per
body (``<port_map>``; If: ``<then_port_map>``, ``<else_port_map>``) tying the node's port ids
to the layer ids of the body's Parameters and Results, ``<back_edges>`` for loop-carried
values, Loop's special ports as ``purpose`` entries, and the body itself (``<body>``,
``<then_body>``, ``<else_body>``) laid out like the model, its constants in the same ``.bin``.
"""
from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr as _quoteattr

import numpy as np

from ..core.dimension import Dimension
from ..core.model import Model
from ..core.node import Node, Output
from ..core.rt_info import RuntimeAttribute
from ..core.shape import PartialShape
from ..core.subgraph import ConcatOutput, MergedInput, MultiSubGraphOp, SliceInput
from ..core.types import ContainerType, Type, pack_elements, string
from ..errors import ModelFormatError, system_errors_as_netpass
from ..frontend.ir_format import (
    ATTR_RULES,
    IR_TYPE_NAMES,
    IR_VERSION,
    TYPE_ATTRS,
    TYPE_NAMES_FROM_IR,
    AttrRule,
    escape_names,
)
from .base import ModelPass


def _torch_ceil_pool(node: Node, data: dict[str, str]) -> str | None:
    """netpass pools round ``ceil`` as ONNX and PyTorch do: a last window that would start in
    the end padding is dropped. OpenVINO's MaxPool-8/AvgPool-1 ``ceil`` keeps it; its opset14
    ``ceil_torch`` drops it. Where the two differ (or the size is unknown), write the latter."""
    from ..ops.convolution.window import window_count
    if data.get("rounding_type", "").lower() != "ceil" or \
            str(node.auto_pad).lower() not in ("explicit", "valid"):
        return None
    ps = node.get_input_partial_shape(0)
    n = len(node.kernel)
    if not ps.rank_is_static:
        differs = True
    else:
        explicit = str(node.auto_pad).lower() == "explicit"
        dilations = list(getattr(node, "dilations", None) or [1] * n)
        differs = False
        for axis, d in enumerate(list(ps)[-n:]):
            if not d.is_static:
                differs = True
                break
            pb = node.pads_begin[axis] if explicit else 0
            pe = node.pads_end[axis] if explicit else 0
            extent = (node.kernel[axis] - 1) * dilations[axis] + 1
            span = d.min + pb + pe - extent
            keep_last = -(-span // node.strides[axis]) + 1
            if window_count(d.min, extent, node.strides[axis], pb, pe, True) != keep_last:
                differs = True
                break
    if not differs:
        return None
    data["rounding_type"] = "ceil_torch"
    return "opset14"


# Per-type hooks that may adjust a layer's <data> for OpenVINO and return the opset version to
# write instead of the op class's (None keeps it).
LAYER_RULES: dict[str, Callable[[Node, dict[str, str]], str | None]] = {
    "MaxPool": _torch_ceil_pool,
    "AvgPool": _torch_ceil_pool,
}


def format_value(value: Any) -> str | None:
    """An attribute value as IR text; None when the attribute is not written."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, Type):
        return value.name
    if isinstance(value, PartialShape):
        if not value.rank_is_static:
            return "..."
        return ",".join(str(d) for d in value)
    if isinstance(value, Dimension):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, str):
        return value
    if isinstance(value, np.ndarray):
        value = value.reshape(-1).tolist()
    if isinstance(value, (list, tuple)):
        parts = [format_value(v) for v in value]
        return ", ".join(p for p in parts if p is not None)
    return str(value)


def _attrs(values: dict[str, Any]) -> str:
    return " ".join(f'{k}="{v}"' for k, v in values.items())


def ir_attributes(node: Node) -> dict[str, str]:
    """The ``<data>`` attributes of ``node`` (names and spellings as OpenVINO reads them);
    the bodies and port maps of an op with sub-graphs are elements of their own."""
    rules = ATTR_RULES.get(node.type_name, {})
    out: dict[str, str] = {}
    skip = getattr(node, "BODY_ATTRS", ())
    for key, value in node.get_attributes().items():
        if key in skip:
            continue
        rule = rules.get(key)
        if rule is not None and rule.to_ir is not None:
            value = rule.to_ir(value)
        elif key in TYPE_ATTRS and value is not None and not isinstance(value, (list, tuple)):
            with contextlib.suppress(TypeError):  # not an element type: written as it is
                value = Type.of(value).name
        text = format_value(value)
        if text is not None:
            out[rule.ir_name if rule else key] = text
    return out


def ir_version_of(node: Node) -> str:
    opset = node.rt_info.get("opset")
    if isinstance(opset, str) and opset:
        return opset
    return getattr(type(node), "version", None) or "experimental"


_XML_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def quoteattr(value: str) -> str:
    """A quoted XML attribute value; refuses characters XML 1.0 cannot hold (a name with a
    control character would otherwise give a file no reader accepts)."""
    if _XML_INVALID.search(value):
        raise ModelFormatError(f"Serialize: {value!r} holds a character XML cannot store")
    return _quoteattr(value)


class _Writer:
    """Builds the xml text and the weights blob of one model."""

    def __init__(self, model: Model, parent: _Writer | None = None, base: int = 0) -> None:
        self.model = model
        # a body's writer adds to its parent's text and blob
        self.lines: list[str] = parent.lines if parent is not None else []
        self.blob: bytearray = parent.blob if parent is not None else bytearray()
        # digest -> offsets of blobs with it
        self.blob_offsets: dict[bytes, list[int]] = \
            parent.blob_offsets if parent is not None else {}
        self.base = base  # indentation of the graph's <layers>, minus one

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("\t" * (self.base + depth) + text)

    def layer_order(self) -> list[Node]:
        from ..ops.io import Parameter, Result
        model = self.model
        params = model.parameters
        results = model.results
        sinks = model.sinks
        fixed = {id(n) for n in (*params, *results, *sinks)}
        middle = [n for n in model.get_ordered_ops()
                  if id(n) not in fixed and not isinstance(n, Result)]
        extra_params = [n for n in middle if isinstance(n, Parameter)]
        middle = [n for n in middle if not isinstance(n, Parameter)]
        return [*params, *extra_params, *middle, *sinks, *results]

    def add_blob(self, data: bytes) -> int:
        """Offset of ``data`` in the bin, reusing an identical earlier blob."""
        key = hashlib.sha1(data).digest() + len(data).to_bytes(8, "little")
        with memoryview(self.blob) as view:
            for offset in self.blob_offsets.get(key, ()):
                if view[offset:offset + len(data)] == data:
                    return offset
        offset = len(self.blob)
        self.blob += data
        self.blob_offsets.setdefault(key, []).append(offset)
        return offset

    def constant_data(self, node: Node) -> dict[str, str]:
        et = node.get_output_element_type(0)
        if et.dtype is None or et is string:
            raise ModelFormatError(f"Serialize: Constant '{node.friendly_name}' has element type "
                                   f"{et}, which has no binary layout in netpass")
        arr = np.asarray(node.value, dtype=et.dtype)
        # An empty constant gets one zero byte, as OpenVINO writes it: its reader needs data.
        # Sub-byte types (i4, u4, f4e2m1...) are packed, as OpenVINO's IR holds them.
        data = pack_elements(arr, et) or b"\0"
        offset = self.add_blob(data)
        return {"element_type": et.name, "shape": ", ".join(str(d) for d in arr.shape),
                "offset": str(offset), "size": str(len(data))}

    def port(self, depth: int, port_id: int, out: Output, names: bool) -> None:
        ps, et = out.partial_shape, out.element_type
        attrs = f'id="{port_id}" precision="{et.ir_precision}"'
        if names and out.names:
            attrs += f" names={quoteattr(escape_names(out.names))}"
        if not ps.rank_is_static or len(ps) == 0:
            self.emit(depth, f"<port {attrs} />")
            return
        self.emit(depth, f"<port {attrs}>")
        for d in ps:
            self.emit(depth + 1, f"<dim>{d.min if d.is_static else -1}</dim>")
        self.emit(depth, "</port>")

    def layer(self, lid: int, node: Node, name: str) -> None:
        from ..ops.io import Constant, Result
        for out in node.outputs():
            if isinstance(out.element_type, ContainerType):
                raise ModelFormatError(f"Serialize: {node.type_name} '{node.friendly_name}' "
                                       f"gives a {out.element_type} value; IR v11 has no "
                                       "sequences or optionals")
        type_name = IR_TYPE_NAMES.get(node.type_name, node.type_name)
        data = self.constant_data(node) if isinstance(node, Constant) else ir_attributes(node)
        hook = LAYER_RULES.get(node.type_name)
        version = (hook(node, data) if hook else None) or ir_version_of(node)
        self.emit(2, f'<layer id="{lid}" name={quoteattr(name)} type={quoteattr(type_name)} '
                     f'version={quoteattr(version)}>')
        if data:
            self.emit(3, "<data " + " ".join(f"{k}={quoteattr(v)}" for k, v in data.items())
                      + " />")
        rt = [(k, v.visit_attributes()) for k, v in sorted(node.rt_info.items())
              if isinstance(v, RuntimeAttribute) and v.visit_attributes()]
        if rt:
            self.emit(3, "<rt_info>")
            for key, attrs in rt:
                base, _, ver = key.rpartition("_")
                if not base:
                    base, ver = key, "0"
                extra = " ".join(f"{k}={quoteattr(v)}" for k, v in attrs.items())
                self.emit(4, f"<attribute name={quoteattr(base)} version={quoteattr(ver)} "
                             f"{extra} />")
            self.emit(3, "</rt_info>")
        if isinstance(node, MultiSubGraphOp):
            bodies = [_Writer(b, self, self.base + 3) for b in node.bodies]
            orders = [w.layer_order() for w in bodies]
            for i, order in enumerate(orders):
                self.port_map(node, i, order)
        n_in = node.get_input_size()
        if n_in:
            self.emit(3, "<input>")
            for i, src in enumerate(node.input_values()):
                self.port(4, i, src, names=False)
            self.emit(3, "</input>")
        if not isinstance(node, Result) and node.get_output_size():
            self.emit(3, "<output>")
            for out in node.outputs():
                self.port(4, n_in + out.index, out, names=True)
            self.emit(3, "</output>")
        if isinstance(node, MultiSubGraphOp):
            for i, (w, order) in enumerate(zip(bodies, orders)):
                tag = node.body_name(i)
                self.emit(3, f"<{tag}>")
                w.write_graph(order)
                self.emit(4, "<rt_info />")
                self.emit(3, f"</{tag}>")
        self.emit(2, "</layer>")

    def port_map(self, node: MultiSubGraphOp, index: int, order: list[Node]) -> None:
        """A body's port map (and back edges) as OpenVINO writes them: ``internal_layer_id``
        is the body Parameter's or Result's layer id, ``external_port_id`` the node's port."""
        body = node.bodies[index]
        ids = {id(n): i for i, n in enumerate(order)}
        param_id = [ids[id(p)] for p in body.parameters]
        result_id = [ids[id(r)] for r in body.results]
        prefix = node.body_name(index)[:-len("body")]
        n_in = node.get_input_size()
        self.emit(3, f"<{prefix}port_map>")
        back_edges = []
        for d in node.body_inputs(index):
            attrs = {"external_port_id": d.input_index,
                     "internal_layer_id": param_id[d.body_parameter_index]}
            if isinstance(d, SliceInput):
                attrs = {"axis": d.axis, **attrs, "start": d.start, "end": d.end,
                         "stride": d.stride, "part_size": d.part_size}
            elif isinstance(d, MergedInput):
                back_edges.append((result_id[d.body_value_index],
                                   param_id[d.body_parameter_index]))
            self.emit(4, "<input " + _attrs(attrs) + " />")
        for o in node.body_outputs(index):
            attrs = {"external_port_id": n_in + o.output_index,
                     "internal_layer_id": result_id[o.body_value_index]}
            if isinstance(o, ConcatOutput):
                attrs = {"axis": o.axis, **attrs, "start": o.start, "end": o.end,
                         "stride": o.stride, "part_size": o.part_size}
            self.emit(4, "<output " + _attrs(attrs) + " />")
        current, condition = node.special_ports() if index == 0 else (-1, -1)
        if current >= 0:
            self.emit(4, f'<input external_port_id="-1" internal_layer_id='
                         f'"{param_id[current]}" purpose="current_iteration" />')
        if condition >= 0:
            self.emit(4, f'<output external_port_id="-1" internal_layer_id='
                         f'"{result_id[condition]}" purpose="execution_condition" />')
        self.emit(3, f"</{prefix}port_map>")
        if back_edges:
            self.emit(3, "<back_edges>")
            for src, dst in back_edges:
                self.emit(4, f'<edge from-layer="{src}" to-layer="{dst}" />')
            self.emit(3, "</back_edges>")

    def rt_entries(self, depth: int, info: dict[Any, Any]) -> None:
        """Model rt_info as nested elements; keys that are not XML names go in ``<info name>``."""
        for key, value in info.items():
            if key in ("version", "__weights_path"):
                continue
            valid = bool(_XML_NAME.match(key)) and not key.lower().startswith("xml")
            tag, named = (key, "") if valid else ("info", f" name={quoteattr(key)}")
            if isinstance(value, dict):
                self.emit(depth, f"<{tag}{named}>")
                self.rt_entries(depth + 1, value)
                self.emit(depth, f"</{tag}>")
                continue
            text = format_value(value)
            if text is not None:
                self.emit(depth, f"<{tag}{named} value={quoteattr(text)} />")

    def write(self) -> str:
        model = self.model
        self.emit(0, '<?xml version="1.0"?>')
        self.emit(0, f"<net name={quoteattr(model.friendly_name)} version=\"{IR_VERSION}\">")
        self.write_graph(self.layer_order())
        if any(k not in ("version", "__weights_path") for k in model.rt_info):
            self.emit(1, "<rt_info>")
            self.rt_entries(2, model.rt_info)
            self.emit(1, "</rt_info>")
        self.emit(0, "</net>")
        return "\n".join(self.lines) + "\n"

    def write_graph(self, order: list[Node]) -> None:
        """``<layers>`` and ``<edges>`` of the model (or body) in ``order``."""
        from ..ops.io import Parameter, Result
        model = self.model
        ids = {id(n): i for i, n in enumerate(order)}
        result_names = dict(zip(map(id, model.results), model.output_names))
        self.emit(1, "<layers>")
        for i, node in enumerate(order):
            # A Result's layer name is the model output name, so read-back keeps output names.
            name = result_names[id(node)] if isinstance(node, Result) else node.friendly_name
            self.layer(i, node, name)
        self.emit(1, "</layers>")
        edges = []
        for node in order:
            if isinstance(node, Parameter):
                continue
            for i, src in enumerate(node.input_values()):
                edges.append((ids[id(src.node)], src.node.get_input_size() + src.index,
                              ids[id(node)], i))
        edges.sort(key=lambda e: e[0])
        self.emit(1, "<edges>")
        for fl, fp, tl, tp in edges:
            self.emit(2, f'<edge from-layer="{fl}" from-port="{fp}" to-layer="{tl}" '
                         f'to-port="{tp}" />')
        self.emit(1, "</edges>")


def serialize(model: Model) -> tuple[str, bytes]:
    """The IR v11 xml text and weights of ``model`` (shape inference runs first)."""
    model.validate_nodes_and_infer_types()
    writer = _Writer(model)
    xml = writer.write()
    return xml, bytes(writer.blob)


class Serialize(ModelPass):
    """Write the model to ``xml_path`` (IR v11) and ``bin_path`` (default: same stem, ``.bin``).

    Does not change the model (returns False), so it can sit anywhere in a pipeline.
    """

    def __init__(self, xml_path: Any, bin_path: Any = None) -> None:
        super().__init__()
        self.xml_path = Path(xml_path)
        self.bin_path = (Path(bin_path) if bin_path is not None
                         else self.xml_path.with_suffix(".bin"))

    def run_on_model(self, model: Model) -> bool:
        write_ir(model, self.xml_path, self.bin_path)
        return False


def write_ir(model: Model, xml_path: Any, bin_path: Any = None) -> None:
    """Write ``model`` as IR v11 to ``xml_path`` and ``bin_path`` (default: same stem, ``.bin``);
    a file that cannot be written raises FileAccessError."""
    xml_path = Path(xml_path)
    bin_path = Path(bin_path) if bin_path is not None else xml_path.with_suffix(".bin")
    with system_errors_as_netpass(f"writing IR {xml_path}"):
        xml, blob = serialize(model)
        xml_path.parent.mkdir(parents=True, exist_ok=True)
        xml_path.write_text(xml, encoding="utf-8")
        bin_path.write_bytes(blob)


__all__ = ["Serialize", "serialize", "write_ir", "IR_TYPE_NAMES", "TYPE_NAMES_FROM_IR",
           "ATTR_RULES", "AttrRule"]
