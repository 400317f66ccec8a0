"""Read OpenVINO IR (version 10/11 ``.xml`` + ``.bin``) into a netpass Model.

The xml is parsed with defusedxml: a DTD or an entity declaration is refused, so a hostile
file cannot expand entities or reach outside files. Layers become op classes by their type
name (IR spellings such as ``Const`` translated back) and version: the class that declares
that opset in its ``ir_versions()``, never one of another version (whose rules could misread
the layer); a version no class declares is refused. Attributes are converted to python
values using each op class's ``ATTRS`` defaults as the type guide, constants are read from the
weights with their offsets and sizes checked against the file. The bodies of If, Loop and
TensorIterator are read like the model, their port maps become the op's descriptions.
"""
from __future__ import annotations

import math
import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import Element, ParseError

import numpy as np

from ..core.boundary import Parameter, Result, Sink
from ..core.model import Model
from ..core.node import Node
from ..core.rt_info import FusedNames
from ..core.shape import PartialShape
from ..core.subgraph import (
    BodyOutput,
    ConcatOutput,
    InvariantInput,
    MergedInput,
    MultiSubGraphOp,
    SliceInput,
)
from ..core.types import Type, packed_size, string, unpack_elements
from ..errors import ModelFormatError, NetpassError, OutOfMemoryError, UnsupportedOpError
from .files import MAX_XML_BYTES, RegularFile, inside_folder, read_model_file
from .ir_format import TYPE_ATTRS, TYPE_NAMES_FROM_IR, attr_from_ir_name, split_names

# Where Const blobs come from: bytes the caller gave, or the weights file read per blob.
Weights = bytes | RegularFile | None

# Runtime attributes restored from a layer's <rt_info>: "<name>_<version>" -> factory(attrs).
RT_ATTRIBUTES = {
    FusedNames.key: lambda a: FusedNames(n for n in a.get("value", "").split(",") if n),
}


def _parse(xml: bytes) -> Element:
    import defusedxml
    from defusedxml.ElementTree import fromstring
    try:
        return fromstring(xml, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except defusedxml.DefusedXmlException as e:
        raise ModelFormatError(f"IR xml refused: {e} (DTDs and entities are not allowed)") from e
    except ParseError as e:
        raise ModelFormatError(f"IR xml is not well-formed: {e}") from e


def _all_subclasses(cls: type) -> list[type]:
    out, stack = [], [cls]
    while stack:
        for sub in stack.pop().__subclasses__():
            out.append(sub)
            stack.append(sub)
    return out


def op_classes(type_name: str) -> list[type]:
    """Every op class of an IR type (each declares the IR versions it reads)."""
    return [cls for cls in _all_subclasses(Node) if cls.__dict__.get("type_name") == type_name]


def op_class(type_name: str, version: str) -> type | None:
    """The op class that reads IR layers of ``type_name`` of opset ``version`` with that
    version's semantics (it lists the version in ``ir_versions()``); None when there is none.
    There is no fallback to a class of another version: its rules could read the layer's inputs
    and attributes with another meaning (GatherND-5 as v8 gave another shape)."""
    for cls in op_classes(type_name):
        if version in cls.ir_versions():
            return cls
    return None


def _scalar(text: str) -> Any:
    """A value of unknown type: bool, int, float, or the string itself."""
    t = text.strip()
    if t in ("true", "false"):
        return t == "true"
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    return text


def _list(text: str, like: Any = None) -> list:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if like is not None and not isinstance(like, str):
        return [type(like)(_scalar(p)) if not isinstance(like, bool) else p == "true"
                for p in parts]
    return [_scalar(p) for p in parts]


# List attributes whose op default is None (no type guide): a single item must stay a list.
LIST_ATTRS = {"activations", "activations_alpha", "activations_beta"}


def convert_attr(key: str, text: str, default: Any) -> Any:
    """An IR attribute string as the python value for attribute ``key`` whose op default is
    ``default`` (the type guide; None means unknown, so the text decides)."""
    if isinstance(default, Type) or (default is None and key in TYPE_ATTRS):
        return Type.of(text)
    if isinstance(default, PartialShape) or (default is None and key == "shape"):
        return PartialShape.parse(text)
    if isinstance(default, bool):
        return text.strip().lower() in ("true", "1")
    if isinstance(default, int):
        return int(text)
    if isinstance(default, float):
        return float(text)
    if isinstance(default, (list, tuple)):
        value = _list(text, default[0] if default else None)
        return tuple(value) if isinstance(default, tuple) else value
    if default is None and ("," in text or key in LIST_ATTRS):
        return _list(text)
    return _scalar(text) if default is None else text


class _Layer:
    """One ``<layer>`` element with its ports."""

    def __init__(self, el: Element) -> None:
        self.el = el
        try:
            self.id = el.attrib["id"]
            self.type = el.attrib["type"]
        except KeyError as e:
            raise ModelFormatError(f"IR layer without {e.args[0]!r} attribute: "
                                   f"{el.attrib}") from None
        self.name = el.attrib.get("name", self.id)
        self.version = el.attrib.get("version", "")
        ins = el.find("input")
        outs = el.find("output")
        self.in_ports = [p.attrib.get("id") for p in (ins if ins is not None else [])]
        self.out_ports = list(outs if outs is not None else [])

    def where(self) -> str:
        return f"layer {self.id} '{self.name}' ({self.type}, {self.version})"


class _Reader:
    def __init__(self, root: Element, weights: Weights) -> None:
        self.root = root
        self.weights = weights
        self.classes: dict[tuple[str, str], type | None] = {}

    def blob(self, layer: _Layer, data: dict[str, str]) -> tuple[np.ndarray, Type]:
        """A Const layer's value and element type, read from the weights."""
        try:
            et = Type.of(data["element_type"])
            shape = PartialShape.parse(data.get("shape", "")).to_shape()
            offset, size = int(data["offset"]), int(data["size"])
        except (KeyError, ValueError, TypeError) as e:
            raise ModelFormatError(f"{layer.where()}: bad Const data {data}: {e}") from e
        if et.dtype is None or et is string:
            raise ModelFormatError(f"{layer.where()}: element type {et} is not supported")
        count = math.prod(shape)  # (Python ints: an int64 product of huge dims wraps, to 0)
        # Empty constants carry a placeholder byte (OpenVINO writes size 1 for them).
        if size != packed_size(et, count) and not (count == 0 and size <= 1):
            raise ModelFormatError(f"{layer.where()}: size {size} does not match shape "
                                   f"{list(shape)} of {et} ({packed_size(et, count)} bytes)")
        if self.weights is None:
            raise ModelFormatError(f"{layer.where()}: needs a weights file (.bin), none given")
        if count == 0:
            try:
                return np.zeros(shape, et.dtype), et
            except ValueError as e:  # a dim past numpy's largest beside the zero one
                raise ModelFormatError(f"{layer.where()}: shape {list(shape)}: {e}") from e
        if isinstance(self.weights, RegularFile):
            data = self.weights.read_range(offset, size, layer.where())
        elif offset < 0 or offset + size > len(self.weights):
            raise ModelFormatError(f"{layer.where()}: blob [{offset}, {offset + size}) lies "
                                   f"outside the weights of {len(self.weights)} bytes "
                                   "(truncated?)")
        else:
            data = self.weights[offset:offset + size]
        return unpack_elements(data, et, count).reshape(shape), et

    def build(self, layer: _Layer, inputs: list) -> Node:
        type_name = TYPE_NAMES_FROM_IR.get(layer.type, layer.type)
        key = (type_name, layer.version)
        if key not in self.classes:
            self.classes[key] = op_class(type_name, layer.version)
        cls = self.classes[key]
        if cls is None:
            known = sorted({v for c in op_classes(type_name) for v in c.ir_versions()})
            reason = (f"netpass reads {layer.type} of {', '.join(known)}, not of "
                      f"{layer.version or 'no version'} (IR {layer.where()})" if known
                      else f"no netpass op for IR {layer.where()}")
            raise UnsupportedOpError(layer.type, node_name=layer.name, reason=reason)
        data_el = layer.el.find("data")
        data = dict(data_el.attrib) if data_el is not None else {}
        structure = self.bodies(layer, cls) if issubclass(cls, MultiSubGraphOp) else {}
        if type_name == "Constant":
            value, et = self.blob(layer, data)
            attrs: dict[str, Any] = {"value": value, "element_type": et}
        else:
            attrs = {}
            for ir_key, text in data.items():
                key, rule = attr_from_ir_name(type_name, ir_key)
                if key in cls.ATTRS:
                    try:
                        attrs[key] = rule.from_ir(text) if rule and rule.from_ir else \
                            convert_attr(key, text, cls.ATTRS[key])
                    except (ValueError, TypeError) as e:
                        raise ModelFormatError(f"{layer.where()}: attribute {ir_key}={text!r}: "
                                               f"{e}") from e
            attrs.update(structure)
        try:
            node = cls(inputs, **attrs)
        except NetpassError as e:
            raise ModelFormatError(f"{layer.where()}: {e}") from e
        except MemoryError as e:  # the model may be valid, only too large to build here
            raise OutOfMemoryError(f"{layer.where()}: out of memory while building it") from e
        except Exception as e:
            raise ModelFormatError(f"{layer.where()}: cannot build the op: "
                                   f"{type(e).__name__}: {e}") from e
        node.friendly_name = layer.name
        self.restore_names_and_rt(layer, node)
        return node

    def restore_names_and_rt(self, layer: _Layer, node: Node) -> None:
        for i, port in enumerate(layer.out_ports):
            names = port.attrib.get("names")
            if names and i < node.get_output_size():
                node.output(i).names.update(split_names(names))
        rt = layer.el.find("rt_info")
        if rt is None:
            return
        for attr in rt.findall("attribute"):
            key = f"{attr.attrib.get('name', '')}_{attr.attrib.get('version', '0')}"
            factory = RT_ATTRIBUTES.get(key)
            if factory is not None:
                node.rt_info[key] = factory(attr.attrib)

    def read(self) -> Model:
        root = self.root
        if root.tag != "net":
            raise ModelFormatError(f"not an IR file: root element is <{root.tag}>, expected <net>")
        model, _ = self.read_graph(root, root.attrib.get("name", "Model"))
        rt = root.find("rt_info")
        if rt is not None:
            model.rt_info = _rt_dict(rt)
        return model

    def read_graph(self, root: Element, name: str) -> tuple[Model, dict[str, Node]]:
        """The Model of a ``<net>`` or a body element, and its nodes by layer id."""
        layers_el = root.find("layers")
        if layers_el is None:
            raise ModelFormatError(f"IR {name!r} has no <layers>")
        layers = [_Layer(el) for el in layers_el.findall("layer")]
        by_id = {layer.id: layer for layer in layers}
        if len(by_id) != len(layers):
            raise ModelFormatError("IR file has duplicate layer ids")
        sources: dict[tuple[str, str], tuple[str, str]] = {}
        edges_el = root.find("edges")
        for e in (edges_el.findall("edge") if edges_el is not None else []):
            try:
                key = (e.attrib["to-layer"], e.attrib["to-port"])
                src = (e.attrib["from-layer"], e.attrib["from-port"])
            except KeyError as err:
                raise ModelFormatError(f"IR edge without {err.args[0]!r}: {e.attrib}") from None
            if src[0] not in by_id or key[0] not in by_id:
                raise ModelFormatError(f"IR edge refers to a missing layer: {e.attrib}")
            sources[key] = src
        nodes: dict[str, Node] = {}
        for layer in self.topological(layers, by_id, sources):
            inputs = []
            for port in layer.in_ports:
                src = sources.get((layer.id, port))
                if src is None:
                    raise ModelFormatError(f"{layer.where()}: input port {port} has no edge")
                src_layer = by_id[src[0]]
                out_ids = [p.attrib.get("id") for p in src_layer.out_ports]
                if src[1] not in out_ids:
                    raise ModelFormatError(f"{layer.where()}: edge from port {src[1]} of "
                                           f"{src_layer.where()}, which has no such output")
                index = out_ids.index(src[1])
                producer = nodes[src_layer.id]
                if isinstance(producer, Result):  # (its value would be read as no tensor)
                    raise ModelFormatError(f"{layer.where()}: reads {src_layer.where()}, a "
                                           f"Result: a Result has no outputs to read")
                if index >= producer.get_output_size():
                    raise ModelFormatError(f"{layer.where()}: reads output {index} of "
                                           f"{src_layer.where()}, which produces "
                                           f"{producer.get_output_size()}")
                inputs.append(producer.output(index))
            nodes[layer.id] = self.build(layer, inputs)
        params = [nodes[lay.id] for lay in layers if isinstance(nodes[lay.id], Parameter)]
        results = [nodes[lay.id] for lay in layers if isinstance(nodes[lay.id], Result)]
        sinks = [nodes[lay.id] for lay in layers if isinstance(nodes[lay.id], Sink)]
        return Model(results, params, name, sinks), nodes

    def bodies(self, layer: _Layer, cls: type) -> dict[str, Any]:
        """The bodies and port maps of an op with sub-graphs (OpenVINO's layout: see
        :mod:`netpass.passes.serialize`) as the op's attributes."""
        bodies, inputs, outputs = [], [], []
        special = [-1, -1]
        n_in = len(layer.in_ports)
        for index, tag in enumerate(cls.BODY_NAMES):
            el = layer.el.find(tag)
            port_map = layer.el.find(tag[:-len("body")] + "port_map")
            if el is None or port_map is None:
                raise ModelFormatError(f"{layer.where()}: no <{tag}> with its port map")
            body, nodes = self.read_graph(el, f"{layer.name} {tag}")
            params = {lid: body.get_parameter_index(n) for lid, n in nodes.items()
                      if isinstance(n, Parameter)}
            results = {lid: body.results.index(n) for lid, n in nodes.items()
                       if isinstance(n, Result)}
            edges_el = layer.el.find("back_edges") if index == 0 else None
            back = {e.attrib.get("to-layer"): e.attrib.get("from-layer")
                    for e in (edges_el if edges_el is not None else [])}
            ins, outs = [], []
            for entry in port_map:
                ins_or_outs = _port_entry(layer, tag, entry, params, results, back, n_in)
                if entry.attrib.get("purpose") in ("current_iteration", "execution_condition"):
                    special[entry.attrib["purpose"] == "execution_condition"] = ins_or_outs
                elif entry.tag == "input":
                    ins.append(ins_or_outs)
                else:
                    outs.append(ins_or_outs)
            bodies.append(body)
            inputs.append(ins)
            outputs.append(outs)
        attrs: dict[str, Any] = {"bodies": bodies, "input_descriptions": inputs,
                                 "output_descriptions": outputs}
        if "special_body_ports" in cls.ATTRS:
            attrs["special_body_ports"] = special
        return attrs

    @staticmethod
    def topological(layers: list[_Layer], by_id: dict[str, _Layer],
                    sources: dict[tuple[str, str], tuple[str, str]]) -> list[_Layer]:
        """Layers with producers first, keeping file order among ready layers."""
        deps = {lay.id: {sources[(lay.id, p)][0] for p in lay.in_ports if (lay.id, p) in sources}
                for lay in layers}
        done: set[str] = set()
        on_path: set[str] = set()  # expanded, not finished: the current DFS path
        order: list[_Layer] = []
        for start in layers:
            stack = [(start.id, False)]
            while stack:
                lid, expanded = stack.pop()
                if lid in done:
                    continue
                if expanded:
                    on_path.discard(lid)
                    done.add(lid)
                    order.append(by_id[lid])
                    continue
                if lid in on_path:
                    raise ModelFormatError(f"IR graph has a cycle through {by_id[lid].where()}")
                on_path.add(lid)
                stack.append((lid, True))
                for dep in sorted(deps[lid], reverse=True):
                    if dep not in done:
                        stack.append((dep, False))
        return order


def _port_entry(layer: _Layer, tag: str, entry: Element, params: dict[str, int],
                results: dict[str, int], back: dict[str, str], n_in: int) -> Any:
    """One ``<input>`` / ``<output>`` of a port map as a description (a special port: the
    body Parameter's or Result's index)."""
    a = entry.attrib
    where = f"{layer.where()} {tag} port map"
    try:
        internal = a["internal_layer_id"]
        external = int(a.get("external_port_id", "-1"))
        window = {k: int(a[k]) for k in ("axis", "start", "end", "stride", "part_size") if k in a}
    except (KeyError, ValueError) as e:
        raise ModelFormatError(f"{where}: bad entry {a}: {e}") from None
    sliced = "axis" in window
    if sliced:
        window = {"start": 0, "stride": 1, "part_size": 1, "end": -1, **window}
    if entry.tag == "input":
        if internal not in params:
            raise ModelFormatError(f"{where}: {internal} is not a body Parameter layer")
        p = params[internal]
        if a.get("purpose") == "current_iteration":
            return p
        if not 0 <= external < n_in:
            raise ModelFormatError(f"{where}: input port {external} of a layer with {n_in}")
        if sliced:
            return SliceInput(external, p, window["start"], window["stride"],
                              window["part_size"], window["end"], window["axis"])
        if internal in back:
            if back[internal] not in results:
                raise ModelFormatError(f"{where}: back edge from {back[internal]}, which is "
                                       "not a body Result layer")
            return MergedInput(external, p, results[back[internal]])
        return InvariantInput(external, p)
    if entry.tag != "output" or internal not in results:
        raise ModelFormatError(f"{where}: {entry.tag} {internal} is not a body Result layer")
    r = results[internal]
    if a.get("purpose") == "execution_condition":
        return r
    if external < n_in:
        raise ModelFormatError(f"{where}: output port {external} is an input port")
    if sliced:
        return ConcatOutput(r, external - n_in, window["start"], window["stride"],
                            window["part_size"], window["end"], window["axis"])
    return BodyOutput(r, external - n_in)


# OpenVINO writes model rt_info a few levels deep; deeper nesting is refused, so that code
# walking it later (copy.deepcopy in Model.clone, the serializer) cannot exhaust the stack.
MAX_RT_INFO_DEPTH = 64


def _rt_dict(el: Element) -> dict:
    """Model rt_info: ``<key value=.../>``, ``<info name=key value=.../>``, nested elements
    (walked with a stack, at most MAX_RT_INFO_DEPTH levels)."""
    root: dict = {}
    stack = [(el, root, 1)]
    while stack:
        parent, out, depth = stack.pop()
        for child in parent:
            key = child.attrib["name"] if child.tag == "info" and "name" in child.attrib \
                else child.tag
            if not len(child):
                out[key] = child.attrib.get("value", "")
                continue
            if depth >= MAX_RT_INFO_DEPTH:
                raise ModelFormatError(f"model <rt_info> nests deeper than {MAX_RT_INFO_DEPTH} "
                                       f"levels (at <{child.tag}>)")
            out[key] = {}
            stack.append((child, out[key], depth + 1))
    return root


def read_ir(source: Any, weights: Any = None) -> Model:
    """Read IR xml (a path or bytes) with its weights (a path or bytes; default: the ``.bin``
    next to the xml, which must resolve inside the xml's folder; see ``frontend.files``).
    Raises ModelFormatError for hostile or broken files (ModelFileError for a file refused),
    UnsupportedOpError for layer types netpass does not know."""
    if isinstance(source, (bytes, bytearray)):
        xml, path = bytes(source), None
    else:
        path = Path(source)
        xml = read_model_file(path, "model file", MAX_XML_BYTES)
    model_name = str(path) if path is not None else "<IR xml bytes>"
    with ExitStack() as stack:
        blob: Weights = None
        if isinstance(weights, (bytes, bytearray)):
            blob = bytes(weights)
        elif weights is not None:  # a path the caller chose: anywhere, but a regular file
            blob = stack.enter_context(RegularFile(Path(weights), "IR weights", model_name))
        elif path is not None:
            bin_path = path.with_suffix(".bin")
            if os.path.lexists(bin_path):  # a dangling symlink is refused, not ignored
                target = inside_folder(path.parent, bin_path, "IR weights", model_name)
                blob = stack.enter_context(RegularFile(target, "IR weights", model_name,
                                                       named=bin_path))
        return _Reader(_parse(xml), blob).read()


__all__ = ["read_ir", "op_class", "op_classes", "convert_attr"]
