"""ONNX ops that netpass has no import rule for, but whose schema defines them as a function of
other ONNX ops (LinearAttention, CausalConvWithState, RotaryEmbedding...): the reader expands
such a node into its function body, as OpenVINO's ONNX frontend does.

The body is the schema's function for the highest function version not above the model's
opset (a context-dependent one is built for the node's attributes and input types). Its nodes
are converted in a scope of their own (their names stay theirs), with the function's formal
inputs bound to the node's inputs, attribute references (``ref_attr_name``) replaced by the
node's attributes or the schema's defaults, at the function's own opset.
"""
from __future__ import annotations

import onnx
from onnx import helper

from ..core.node import Output
from ..core.types import ContainerType
from ..ops.onnx_types import onnx_type_code


def function_body(proto: onnx.NodeProto, inputs: list[Output | None], opset: int
                  ) -> tuple[onnx.FunctionProto, dict[str, onnx.AttributeProto]] | None:
    """The function ``proto``'s op is defined by at ``opset`` (of the node's domain) and the
    attributes its body may refer to (the node's, then the schema's defaults); None when the
    schema defines none (or an input is a sequence or optional, which a context-dependent
    function cannot be told)."""
    try:
        schema = onnx.defs.get_schema(proto.op_type, opset, proto.domain)
    except onnx.defs.SchemaError:
        return None
    attrs = {a.name: a for a in proto.attribute}
    for name, declared in schema.attributes.items():
        if name not in attrs and declared.default_value.name:
            attrs[name] = declared.default_value
    # (these OpSchema members are missing from onnx's type stubs)
    plain = [v for v in schema.function_opset_versions  # type: ignore[attr-defined]
             if v <= opset]
    by_context = [v for v in schema.context_dependent_function_opset_versions  # type: ignore[attr-defined]
                  if v <= opset]
    if plain:
        data = schema.get_function_with_opset_version(max(plain))  # type: ignore[attr-defined]
    elif by_context:
        if any(o is not None and isinstance(o.element_type, ContainerType) for o in inputs):
            return None
        node = onnx.NodeProto()
        node.CopyFrom(proto)
        del node.attribute[:]
        node.attribute.extend(attrs.values())
        types = [_type_proto(o) for o in inputs]
        data = schema.get_context_dependent_function_with_opset_version(  # type: ignore[attr-defined]
            max(by_context), node.SerializeToString(), [t.SerializeToString() for t in types])
    else:
        return None
    function = onnx.FunctionProto()
    function.ParseFromString(data)
    return function, attrs


def _type_proto(value: Output | None) -> onnx.TypeProto:
    if value is None:
        return onnx.TypeProto()
    ps = value.partial_shape
    dims = None
    if ps.rank_is_static:
        dims = [d.min if d.is_static else (d.symbol.name if d.symbol is not None else None)
                for d in ps]
    return helper.make_tensor_type_proto(onnx_type_code(value.element_type, "input"), dims)


def with_attributes(node: onnx.NodeProto, attrs: dict[str, onnx.AttributeProto]
                    ) -> onnx.NodeProto:
    """A copy of a function body's ``node`` whose attribute references take the calling
    node's values (an unresolved reference is dropped: the attribute keeps its default),
    inside its sub-graphs too."""
    out = onnx.NodeProto()
    out.CopyFrom(node)
    del out.attribute[:]
    for a in node.attribute:
        if a.ref_attr_name:
            given = attrs.get(a.ref_attr_name)
            if given is None:
                continue
            resolved = onnx.AttributeProto()
            resolved.CopyFrom(given)
            resolved.name = a.name
            out.attribute.append(resolved)
            continue
        copy = onnx.AttributeProto()
        copy.CopyFrom(a)
        if a.type == onnx.AttributeProto.GRAPH:
            _resolve_graph(copy.g, attrs)
        for g in copy.graphs:
            _resolve_graph(g, attrs)
        out.attribute.append(copy)
    return out


def _resolve_graph(graph: onnx.GraphProto, attrs: dict[str, onnx.AttributeProto]) -> None:
    nodes = [with_attributes(n, attrs) for n in graph.node]
    del graph.node[:]
    graph.node.extend(nodes)


def function_opset(function: onnx.FunctionProto, default: int) -> int:
    """The default-domain opset the function's body is written in."""
    for imp in function.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return default


__all__ = ["function_body", "with_attributes", "function_opset"]
