"""What an ONNX graph must satisfy before netpass converts it, as onnx.checker and onnxruntime
require it.

- Single static assignment: every tensor name is defined once, by a graph input, an
  initializer or one output of one node. A node that writes a name already defined (by another
  node, a graph input or an initializer), two graph inputs or two initializers of one name are
  refused (onnx.checker: "Graph must be in single static assignment (SSA) form"; onnxruntime:
  "Duplicate definition of name"). An initializer may also be listed as a graph input once
  (the IR < 4 style).
- Every node input is defined by a graph input, an initializer or an earlier node (nodes are
  topologically sorted, as onnx.checker requires); a sub-graph (a body of If, Loop, Scan) may
  also read the values of the graphs around it.
- Every graph output is defined. An output listed twice is the same tensor twice, which
  onnx.checker and onnxruntime accept and TorchScript's exporter writes (for a module that
  returns one tensor twice, without ``output_names``); the reader lists it once, since netpass
  returns outputs as a dict keyed by name.
- Every attribute of a node is one its op's schema (at the version the model imports of the
  node's domain: the default one, ``ai.onnx.ml``, ``ai.onnx.preview.training``) declares,
  with the schema's type (a FLOAT given where an INT is declared, or INTS for INT, is
  refused, as onnx.checker does); required attributes are present.

Each violation raises :class:`InvalidModelError` naming the node (name and op type) and the
tensor or attribute.
"""
from __future__ import annotations

import functools
from collections.abc import Container, Mapping
from dataclasses import dataclass

import onnx

from ..errors import InvalidModelError

DEFAULT_DOMAINS = ("", "ai.onnx")
_A = onnx.AttributeProto


class NodeFields:
    """The fields of a NodeProto that the check and the import read, read once. (upb builds a
    new container per access of a repeated field and a new str per item: iterating a node's
    two inputs took ~4 us, and the check and the import read inputs, outputs and attributes
    several times each, a third of the ~60 us a node took to read.) It answers ``name``,
    ``op_type``, ``domain``, ``input``, ``output`` and ``attribute`` as the proto does."""

    __slots__ = ("proto", "name", "op_type", "domain", "input", "output", "attribute", "label")

    def __init__(self, proto: onnx.NodeProto) -> None:
        self.proto = proto
        self.name = proto.name
        self.op_type = proto.op_type
        self.domain = proto.domain
        self.input: list[str] = proto.input[:]
        self.output: list[str] = proto.output[:]
        self.attribute: list[onnx.AttributeProto] = proto.attribute[:]
        self.label = self.name or next((o for o in self.output if o), self.op_type)


def node_label(proto: onnx.NodeProto | NodeFields) -> str:
    """How errors and friendly names call an ONNX node: its name, else its first named output
    (optional outputs may be omitted as ""), else its op type."""
    return proto.name or next((o for o in proto.output if o), proto.op_type)


def _where(proto: onnx.NodeProto | NodeFields) -> str:
    return f"ONNX node '{node_label(proto)}' ({proto.op_type})"


def _attr_type_name(t: int) -> str:
    return _A.AttributeType.Name(t) if t in _A.AttributeType.values() else str(t)


@dataclass(frozen=True)
class _Schema:
    """What the attribute check reads of an op's schema at one opset."""

    since_version: int
    attributes: dict[str, tuple[int, str, bool]]  # name -> (type, type name, required)
    inputs: tuple[tuple[str, str, int], ...] = ()  # (name, "single" / "optional" /
    # "variadic", least count) per formal input, in order
    # What the checks of a well-formed node read, made once per schema (they run per node):
    # the required attributes, the positions of the single inputs, (position, least count)
    # of the variadic one if any ((-1, 0): one that is not the last input)
    required: tuple[str, ...] = ()
    singles: tuple[int, ...] = ()
    variadic: tuple[int, int] | None = None


@functools.cache
def _schema(op_type: str, opset: int, domain: str = "") -> _Schema | None:
    """The schema of ``op_type`` in ``domain`` at version ``opset`` (None: no schema there).
    Cached: ``onnx.defs.get_schema`` builds a new schema object per call (~6 us, 0.4 s of
    reading a 65k-node graph)."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None
    option = onnx.defs.OpSchema.FormalParameterOption
    kinds = {option.Single: "single", option.Optional: "optional", option.Variadic: "variadic"}
    attributes = {name: (int(a.type), a.type.name, bool(a.required))
                  for name, a in schema.attributes.items()}
    inputs = tuple((f.name, kinds[f.option], int(f.min_arity)) for f in schema.inputs)
    # (a variadic input is the last one; were one elsewhere, every node would take the loop)
    variadic = [(i, least) if i == len(inputs) - 1 else (-1, 0)
                for i, (_, kind, least) in enumerate(inputs) if kind == "variadic"]
    return _Schema(schema.since_version, attributes, inputs,
                   tuple(name for name, (_, _, required) in attributes.items() if required),
                   tuple(i for i, (_, kind, _) in enumerate(inputs) if kind == "single"),
                   variadic[0] if variadic else None)


def _node_schema(proto: onnx.NodeProto | NodeFields, opset: int,
                 domains: Mapping[str, int] | None) -> _Schema | None:
    """The schema of the node's op at the version the model imports of its domain (``opset``
    for the default one, ``domains`` for the others); None where there is none to check."""
    if proto.domain in DEFAULT_DOMAINS:
        return _schema(proto.op_type, opset)
    version = (domains or {}).get(proto.domain)
    if version is None or not isinstance(proto.domain, str):
        return None
    return _schema(proto.op_type, version, proto.domain)


def check_inputs(proto: NodeFields, opset: int, domains: Mapping[str, int] | None = None
                 ) -> None:
    """A node's inputs against its op's schema at ``opset`` (other domains: at the version
    ``domains`` gives): every required input given (an empty name is an absent optional
    input), a variadic one at least its least count of times, no more inputs than the op
    declares (onnx.checker and onnxruntime refuse these; import rules would read None where a
    tensor must be)."""
    if not isinstance(proto.op_type, str):
        return
    _check_inputs(proto, _node_schema(proto, opset, domains))


def _inputs_fit(given: list[str], schema: _Schema) -> bool:
    """Whether ``_check_inputs`` passes, told from what the schema precomputed (it runs per
    node; the loop below then runs only to name what is wrong)."""
    formal = schema.inputs
    if schema.variadic is None:
        if len(given) > len(formal):
            return False
    else:
        at, least = schema.variadic
        if at < 0 or least and sum(1 for n in given[at:] if n) < least:
            return False
    n = len(given)
    for i in schema.singles:  # noqa: SIM110 (a loop: no generator, once per node)
        if i >= n or not given[i]:
            return False
    return True


def _check_inputs(proto: NodeFields, schema: _Schema | None) -> None:
    if schema is None or not schema.inputs:
        return
    given = proto.input
    if _inputs_fit(given, schema):
        return
    formal = schema.inputs
    variadic = formal[-1][1] == "variadic"
    if not variadic and len(given) > len(formal):
        raise InvalidModelError(
            f"{_where(proto)}: {len(given)} inputs, but {proto.op_type} (opset "
            f"{schema.since_version}) takes at most {len(formal)} (the first extra one: "
            f"'{given[len(formal)]}')", node_label(proto), proto.op_type, given[len(formal)])
    for i, (name, kind, least) in enumerate(formal):
        if kind == "variadic":
            count = sum(1 for n in given[i:] if n)
            if count < least:
                raise InvalidModelError(
                    f"{_where(proto)}: input '{name}' needs at least {least} tensor(s), "
                    f"{count} given", node_label(proto), proto.op_type, name)
        elif kind == "single" and (i >= len(given) or not given[i]):
            raise InvalidModelError(
                f"{_where(proto)}: required input {i} ('{name}') is missing",
                node_label(proto), proto.op_type, name)


def check_attributes(proto: onnx.NodeProto | NodeFields, opset: int,
                     domains: Mapping[str, int] | None = None) -> None:
    """A node's attributes against its op's schema at ``opset`` (other domains: at the version
    ``domains`` gives; an op without a schema there is left to its import rule, which refuses
    it)."""
    _check_op_type(proto)
    _check_attributes(proto, _node_schema(proto, opset, domains))


def _check_op_type(proto: onnx.NodeProto | NodeFields) -> None:
    if not isinstance(proto.op_type, str):  # protobuf hands back bytes that are not UTF-8
        raise InvalidModelError(f"ONNX node '{node_label(proto)!r}': op type "
                                f"{proto.op_type!r} is not UTF-8 text")


def _check_attributes(proto: onnx.NodeProto | NodeFields, schema: _Schema | None) -> None:
    if schema is None:
        return
    attributes = schema.attributes
    seen: set[str] = set()
    for a in proto.attribute:
        if a.ref_attr_name:  # a reference inside a function body, typed by its caller
            continue
        name = a.name
        if name in seen:
            raise InvalidModelError(f"{_where(proto)}: attribute '{name}' is given twice",
                                    node_label(proto), proto.op_type, name)
        seen.add(name)
        declared = attributes.get(name)
        if declared is None:
            raise InvalidModelError(
                f"{_where(proto)}: unknown attribute '{name}' ({proto.op_type} at opset "
                f"{schema.since_version} has {sorted(attributes) or 'none'})",
                node_label(proto), proto.op_type, name)
        if a.type != declared[0]:
            raise InvalidModelError(
                f"{_where(proto)}: attribute '{name}' has type {_attr_type_name(a.type)}, "
                f"but {proto.op_type} (opset {schema.since_version}) declares "
                f"{declared[1]}", node_label(proto), proto.op_type, name)
    for name in schema.required:
        if name not in seen:
            raise InvalidModelError(f"{_where(proto)}: required attribute '{name}' is missing",
                                    node_label(proto), proto.op_type, name)


def check_graph(graph: onnx.GraphProto, opset: int, outer: Container[str] = (),
                domains: Mapping[str, int] | None = None) -> list[NodeFields]:
    """Raise InvalidModelError unless ``graph`` is in SSA form, topologically sorted, with
    defined outputs and schema-conforming attributes (see the module doc). ``outer``: the
    names a sub-graph may read from the graphs around it; ``domains``: the versions the model
    imports of domains other than the default one. Returns the nodes' fields, in order, for
    the import to read."""
    # tensor name -> what defines it, for errors (a node's description is made only then)
    defined: dict[str, str | NodeFields] = {}
    for init in graph.initializer:
        if init.name in defined:
            raise InvalidModelError(f"initializer '{init.name}' is defined twice",
                                    tensor=init.name)
        defined[init.name] = "an initializer"
    inputs: set[str] = set()
    for vi in graph.input:
        if vi.name in inputs:
            raise InvalidModelError(f"graph input '{vi.name}' is listed twice", tensor=vi.name)
        inputs.add(vi.name)
        defined.setdefault(vi.name, "a graph input")
    nodes = []
    # each op's schema looked up once per graph (the checks run per node)
    schemas: dict[tuple[str, str], _Schema | None] = {}
    for node in graph.node:
        proto = NodeFields(node)
        nodes.append(proto)
        for name in proto.input:
            if name and name not in defined and name not in outer:
                later = next((w for w in graph.node if name in w.output), None)
                why = (f"only the later {_where(later)} writes it (nodes must be topologically "
                       "sorted)") if later is not None else \
                    "which no graph input, initializer or node defines"
                raise InvalidModelError(f"{_where(proto)} reads '{name}', {why}",
                                        node_label(proto), proto.op_type, name)
        _check_op_type(proto)
        key = (proto.op_type, proto.domain)
        schema = schemas[key] if key in schemas else \
            schemas.setdefault(key, _node_schema(proto, opset, domains))
        _check_attributes(proto, schema)
        _check_inputs(proto, schema)
        for name in proto.output:
            if not name:
                continue
            if name in defined:
                first = defined[name]
                raise InvalidModelError(
                    f"{_where(proto)} writes '{name}', which "
                    f"{first if isinstance(first, str) else _where(first)} already "
                    "defines: the graph is not in single static assignment form",
                    node_label(proto), proto.op_type, name)
            defined[name] = proto
    for vo in graph.output:
        if vo.name not in defined and vo.name not in outer:
            raise InvalidModelError(f"graph output '{vo.name}' is not produced by any node, "
                                    "initializer or graph input", tensor=vo.name)
    return nodes


__all__ = ["DEFAULT_DOMAINS", "NodeFields", "check_attributes", "check_graph", "check_inputs",
           "node_label"]
