"""ONNX -> netpass Model.

Each ONNX node is converted by the import rule its op registered in
``netpass.ops.registry`` for its domain (the rule for the highest ``since`` <= the version the
model imports of that domain: the default one, ``ai.onnx.ml``, ``ai.onnx.preview.training``),
or, for an op without a rule that the ONNX schema defines as a function, expanded into that
function's body (``frontend.onnx_functions``). A model may import other domains only (an
``ai.onnx.ml`` pipeline): its default-domain opset is then 0, and a default-domain node in it
is refused.
Initializers and Constant nodes become Constants; ``dim_param`` becomes a symbolic dimension
(one Symbol per name); graph input and output names become parameter and result names.
"""
from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ..core.dimension import Symbol
from ..core.gc_pause import gc_paused
from ..core.model import Model
from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..core.types import Type, packed_size, string
from ..errors import (
    ModelFormatError,
    NetpassError,
    OutOfMemoryError,
    UnsupportedOpError,
    UnsupportedTypeError,
)
from ..ops.io import Constant, Parameter, Result
from ..ops.onnx_types import onnx_element_type, onnx_value_type
from ..ops.registry import ONNX_IMPORT_DOMAINS, find_onnx_rule
from .files import MAX_ONNX_BYTES, RegularFile, contained_path, read_model_file
from .onnx_checks import DEFAULT_DOMAINS, NodeFields, check_graph
from .onnx_functions import function_body, function_opset, with_attributes


class Scope:
    """The tensor names one graph sees: its own values, then those of the graphs around it.

    A name found only further out is *captured*: it becomes a new Parameter of this graph
    (recorded in ``captured`` with the outer value), and the op holding the graph takes the
    outer value as an input. An outer Constant is copied into the graph instead, so that the
    body's shape inference and folding see its value.
    """

    def __init__(self, parent: Scope | None = None, inline: bool = False) -> None:
        self.values: dict[str, Output] = {}
        self.parent = parent
        self.captured: list[tuple[Parameter, Output]] = []
        # an inlined graph (a branch chosen at import) reads outer values directly
        self.inline = inline
        self.omitted: set[str] = set()
        # opset versions the graph imports for domains other than the default one
        self.domains: dict[str, int] = dict(parent.domains) if parent is not None else {}

    def __contains__(self, name: object) -> bool:
        return name in self.values or (self.parent is not None and name in self.parent)

    def __getitem__(self, name: str) -> Output:
        value = self.lookup(name)
        if value is None:
            raise KeyError(name)
        return value

    def lookup(self, name: str) -> Output | None:
        """The value of ``name``; None for a function's formal input the node leaves out."""
        value = self.values.get(name)
        if value is not None:
            return value
        if name in self.omitted:
            return None
        if self.parent is None:
            raise KeyError(name)
        outer = self.parent[name]
        if self.inline:
            return outer
        if isinstance(outer.node, Constant):
            node: Node = Constant([], value=outer.node.value, element_type=outer.element_type)
        else:
            node = Parameter([], shape=outer.partial_shape, element_type=outer.element_type)
            self.captured.append((node, outer))
        node.friendly_name = name
        node.output(0).names.add(name)
        self.values[name] = node.output(0)
        return node.output(0)

    def __setitem__(self, name: str, value: Output) -> None:
        self.values[name] = value


class OnnxNodeContext:
    """What an import rule sees of one ONNX node (see ``netpass.ops.registry``)."""

    def __init__(self, proto: onnx.NodeProto, inputs: list[Output | None], opset: int,
                 scope: Scope | None = None, fields: NodeFields | None = None,
                 version: int | None = None) -> None:
        """``fields``: ``proto``'s, when already read (the reader's own calls); ``version``:
        the version the model imports of the node's domain (default: ``opset``)."""
        f = fields if fields is not None else NodeFields(proto)
        self.proto = proto
        self.inputs = inputs
        self.opset = opset
        self.domain = "" if f.domain in DEFAULT_DOMAINS else f.domain
        self.version = opset if version is None else version
        self.scope = scope if scope is not None else Scope()
        self.op_type = f.op_type
        self.name = f.label
        self.num_outputs = len(f.output)
        self._attrs = {a.name: a for a in f.attribute} if f.attribute else {}

    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute's python value; its kind must agree with ``default``'s when given."""
        a = self._attrs.get(name)
        if a is None:
            return default
        value = _attribute_value(a, self)
        if default is not None and not _kind_matches(value, default):
            raise ModelFormatError(
                f"ONNX node '{self.name}' ({self.op_type}): attribute '{name}' has type "
                f"{onnx.AttributeProto.AttributeType.Name(a.type)}, expected "
                f"{type(default).__name__}")
        return value

    def input(self, i: int) -> Output | None:
        return self.inputs[i] if i < len(self.inputs) else None

    def error(self, message: str) -> None:
        raise UnsupportedOpError(self.op_type, self.domain, self.version, self.name, message)

    def subgraph(self, attr: str, inputs: list[tuple[Type, PartialShape] | None]
                 ) -> tuple[Model, list[Output]]:
        """The graph attribute ``attr`` as a body Model and the outer values it captures.

        ``inputs`` gives the element type and shape of each graph input as the op feeds it
        (None: as the graph declares it). The body's Parameters are its graph inputs, then
        one per captured outer value, in the order of the returned list.
        """
        graph = self._attrs.get(attr)
        if graph is None or graph.type != onnx.AttributeProto.GRAPH:
            raise ModelFormatError(f"ONNX node '{self.name}' ({self.op_type}): graph attribute "
                                   f"'{attr}' is missing")
        where = f"{self.op_type} '{self.name}' {attr}"
        return convert_subgraph(graph.g, self.opset, self.scope, inputs, where)

    def inline_subgraph(self, attr: str) -> list[Output]:
        """The outputs of the input-less graph attribute ``attr`` converted into the
        enclosing graph (its nodes read outer values directly; its own names stay its own):
        for a branch chosen at import time."""
        graph = self._attrs.get(attr)
        if graph is None or graph.type != onnx.AttributeProto.GRAPH:
            raise ModelFormatError(f"ONNX node '{self.name}' ({self.op_type}): graph attribute "
                                   f"'{attr}' is missing")
        nodes = check_graph(graph.g, self.opset, self.scope, self.scope.domains)
        scope = Scope(self.scope, inline=True)
        _convert_body(graph.g, nodes, self.opset, scope, {}, [])
        return [scope[vo.name] for vo in graph.g.output]


def _kind_matches(value: Any, default: Any) -> bool:
    if isinstance(default, int):  # bools included
        return isinstance(value, (int, np.integer)) and not isinstance(value, (list, str))
    if isinstance(default, float):
        return isinstance(value, (float, int))
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (list, tuple)):
        return isinstance(value, list)
    return True


def _attribute_value(a: onnx.AttributeProto, ctx: OnnxNodeContext) -> Any:
    t = a.type
    A = onnx.AttributeProto
    if t == A.INT:
        return int(a.i)
    if t == A.FLOAT:
        return float(a.f)
    if t == A.STRING:
        return a.s.decode("utf-8")
    if t == A.INTS:
        return [int(v) for v in a.ints]
    if t == A.FLOATS:
        return [float(v) for v in a.floats]
    if t == A.STRINGS:
        return [s.decode("utf-8") for s in a.strings]
    if t == A.TENSOR:
        return _tensor_to_array(a.t, f"attribute '{a.name}' of node '{ctx.name}'")
    if t == A.GRAPH:
        return a.g
    raise ModelFormatError(f"ONNX node '{ctx.name}': attribute '{a.name}' has unsupported type "
                           f"{A.AttributeType.Name(t) if t in A.AttributeType.values() else t}")


# Data types whose raw_data numpy reads as it is stored (little-endian, one item per element):
# the common encoding, read here without numpy_helper's tests of every special type first
# (~5% of reading a 100k-node graph, a third of its nodes initializers).
_T = onnx.TensorProto
_RAW_DTYPES: dict[int, np.dtype] = {int(code): np.dtype(dt) for code, dt in (
    (_T.FLOAT, np.float32), (_T.DOUBLE, np.float64), (_T.FLOAT16, np.float16),
    (_T.INT64, np.int64), (_T.INT32, np.int32), (_T.INT16, np.int16), (_T.INT8, np.int8),
    (_T.UINT64, np.uint64), (_T.UINT32, np.uint32), (_T.UINT16, np.uint16),
    (_T.UINT8, np.uint8), (_T.BOOL, np.bool_))} if sys.byteorder == "little" else {}


def _tensor_to_array(t: onnx.TensorProto, where: str) -> np.ndarray:
    # A model read from a file has its external data loaded (``_load_external_data``) before
    # any tensor is converted; a tensor still pointing elsewhere came from bytes or a proto,
    # and numpy_helper would read its location relative to the working directory.
    if t.data_location == onnx.TensorProto.EXTERNAL:
        raise ModelFormatError(f"{where}: tensor '{t.name}' uses external data but the model "
                               "was not read from a file")
    dtype = _RAW_DTYPES.get(t.data_type)
    if dtype is not None and t.HasField("raw_data"):
        raw = t.raw_data
        dims = t.dims[:]
        if len(raw) % dtype.itemsize == 0:
            arr = np.frombuffer(raw, dtype)
            if arr.size == math.prod(dims):
                return arr.reshape(dims)
        # (a size that does not fit: numpy_helper's error below)
    onnx_element_type(t.data_type, where)
    try:
        arr = numpy_helper.to_array(t)
    except Exception as e:
        raise ModelFormatError(f"{where}: cannot decode tensor '{t.name}': {e}") from e
    return arr


def _external_bytes(tensor: onnx.TensorProto, where: str) -> int:
    """The size a tensor's data must have, from its element type and dims."""
    et = onnx_element_type(tensor.data_type, where)
    if et.dtype is None or et is string:
        raise UnsupportedTypeError(f"{where}: element type {et} has no external storage "
                                   "netpass reads")
    count = 1
    for d in tensor.dims:
        if d < 0:
            raise ModelFormatError(f"{where}: negative dimension in {list(tensor.dims)}")
        count *= d
    return packed_size(et, count)


def _load_external_data(model: onnx.ModelProto, model_path: Path) -> None:
    """Read every tensor's external data from the model's folder (see ``frontend.files``): a
    location must stay inside the folder, name a regular file and hold the declared range; only
    that range is read."""
    from onnx.external_data_helper import _get_all_tensors, uses_external_data
    files: dict[Path, RegularFile] = {}
    try:
        for tensor in _get_all_tensors(model):
            if not uses_external_data(tensor):
                continue
            where = f"tensor '{tensor.name}'"
            info = {e.key: e.value for e in tensor.external_data}
            location = info.get("location", "")
            what = f"{where} external data"
            target = contained_path(model_path.parent, location, what, str(model_path))
            if target not in files:
                files[target] = RegularFile(target, what, str(model_path),
                                            named=model_path.parent / location)
            try:
                offset = int(info.get("offset", 0))
                length = int(info["length"]) if "length" in info else None
            except ValueError:
                raise ModelFormatError(f"{where}: external data offset/length are not "
                                       f"integers: {info}") from None
            expected = _external_bytes(tensor, where)
            if length is not None and length != expected:
                raise ModelFormatError(f"{where}: external data length {length} does not match "
                                       f"its dims {list(tensor.dims)} ({expected} bytes)")
            tensor.raw_data = files[target].read_range(offset, expected, where)
            del tensor.external_data[:]
            tensor.data_location = onnx.TensorProto.DEFAULT
    finally:
        for f in files.values():
            f.close()


def load_onnx_proto(source: Any) -> tuple[onnx.ModelProto, Path | None]:
    """The model's proto and, when read from a file, that file's path."""
    if isinstance(source, onnx.ModelProto):
        return source, None
    fmt = "protobuf"
    if isinstance(source, (bytes, bytearray)):
        data, path = bytes(source), None
        what = "ONNX bytes"
    else:
        path = Path(source)
        data = read_model_file(path, "model file", MAX_ONNX_BYTES)
        what = f"ONNX file {path}"
        # The format onnx.load would pick from the suffix (.onnxtxt, .textproto, .json).
        fmt = onnx.serialization.registry.get_format_from_file_extension(path.suffix) or fmt
    try:
        proto = onnx.load_model_from_string(data, fmt)
    except Exception as e:
        raise ModelFormatError(f"cannot parse {what}: {type(e).__name__}: {e}") from e
    if path is not None and not proto.graph.node and not proto.graph.output:
        raise ModelFormatError(f"{path} holds no ONNX graph (truncated or not an ONNX file)")
    return proto, path


def _value_info_shape(vi: onnx.ValueInfoProto, symbols: dict[str, Symbol]
                      ) -> tuple[Type, PartialShape]:
    return onnx_value_type(vi.type, f"graph input '{vi.name}'", symbols)


def convert_graph(graph: onnx.GraphProto, opset: int, name: str = "Model",
                  domains: dict[str, int] | None = None) -> Model:
    """The graph as a Model, after ``check_graph``; a graph output listed several times (as
    TorchScript exports a module that returns one tensor twice) becomes one Result.
    ``domains``: the versions the model imports of other domains."""
    nodes = check_graph(graph, opset, (), domains)  # every name below is in ``values``
    values = Scope()
    values.domains.update(domains or {})
    params = _convert_body(graph, nodes, opset, values, {}, [])
    _keep_input_names(params, {vo.name for vo in graph.output})
    results: list[Result] = []
    for vo in graph.output:
        if any(r.friendly_name == vo.name for r in results):
            continue
        r = Result([values[vo.name]])
        r.friendly_name = vo.name
        results.append(r)
    return Model(results, params, name)


def _keep_input_names(params: list[Parameter], outputs: set[str]) -> None:
    """Each input's tensor names back to its own, and graph outputs it is: an op handed
    through (a Cast to the input's own type) left its output's name on the input (Bloom's
    attention mask would be named by its Cast), which OpenVINO's reader does not do."""
    for p in params:
        port = p._outs[0]
        if port.names is not None and len(port.names) > 1:
            port.names = {n for n in port.names if n == p.friendly_name or n in outputs}


def convert_subgraph(graph: onnx.GraphProto, opset: int, parent: Scope,
                     inputs: list[tuple[Type, PartialShape] | None], where: str
                     ) -> tuple[Model, list[Output]]:
    """A graph attribute as a body Model (see ``OnnxNodeContext.subgraph``)."""
    nodes = check_graph(graph, opset, parent, parent.domains)
    if len(inputs) != len(graph.input):
        raise ModelFormatError(f"{where}: the graph has {len(graph.input)} inputs, the op "
                               f"feeds {len(inputs)}")
    scope = Scope(parent)
    params = _convert_body(graph, nodes, opset, scope, {}, inputs)
    # one Result per graph output, in order (an output listed twice is read twice)
    results = []
    for vo in graph.output:
        r = Result([scope[vo.name]])
        r.friendly_name = vo.name
        results.append(r)
    captured = [p for p, _ in scope.captured]
    model = Model(results, [*params, *captured], graph.name or where)
    return model, [outer for _, outer in scope.captured]


def _convert_body(graph: onnx.GraphProto, nodes: list[NodeFields], opset: int, values: Scope,
                  symbols: dict[str, Symbol], inputs: list[tuple[Type, PartialShape] | None]
                  ) -> list[Parameter]:
    """Convert initializers, graph inputs (typed by ``inputs`` where given) and ``nodes`` (the
    graph's, as ``check_graph`` read them) into ``values``; returns the Parameters of the
    graph inputs."""
    known = values.values
    for init in graph.initializer:
        name = init.name
        arr = _tensor_to_array(init, f"initializer '{name}'")
        c = Constant.of(arr, onnx_element_type(init.data_type, name))
        c.friendly_name = name
        c._outs[0].names = {name}  # (a new Constant: no names yet)
        known[name] = Output(c, 0)
    for init in graph.sparse_initializer:
        raise ModelFormatError(f"sparse initializer '{init.values.name}' is not supported")
    params = []
    for i, vi in enumerate(graph.input):
        if vi.name in values.values:
            continue  # an initializer listed as input (IR < 4 style) stays a Constant
        given = inputs[i] if i < len(inputs) else None
        et, ps = given if given is not None else _value_info_shape(vi, symbols)
        p = Parameter([], shape=ps, element_type=et)
        p.friendly_name = vi.name
        p.output(0).names.add(vi.name)
        values[vi.name] = p.output(0)
        params.append(p)
    rules: dict[tuple[str, int, str], Callable | None] = {}  # one registry look-up per op kind
    for fields in nodes:
        _convert_node(fields, values, opset, rules)
    return params


def _convert_node(fields: NodeFields, values: Scope, opset: int,
                  rules: dict[tuple[str, int, str], Callable | None]) -> None:
    """Convert one node into ``values``; ``rules`` caches the import rule per (op type,
    version, domain) over a graph's nodes."""
    proto = fields.proto
    label = fields.label
    default = fields.domain in DEFAULT_DOMAINS
    domain = "" if default else fields.domain
    if default and opset == 0:
        raise ModelFormatError(f"ONNX node '{label}' ({proto.op_type}): the model imports no "
                               "default-domain ONNX opset")
    version = opset if default else values.domains.get(domain)
    rule = None
    if version is not None:
        key = (fields.op_type, version, domain)
        rule = rules[key] if key in rules else rules.setdefault(key, find_onnx_rule(*key))
    known = values.values
    inputs: list[Output | None] = []
    for name in fields.input:  # (a plain loop, the graph's own values first: once per input)
        value = known.get(name) if name else None
        inputs.append(value if value is not None or not name else values.lookup(name))
    convert: Callable[[OnnxNodeContext], Any]
    if rule is not None:
        convert = rule
    else:
        function = function_body(proto, inputs, version) if version is not None else None
        if function is None:
            if version is None:
                raise UnsupportedOpError(proto.op_type, domain, None, label,
                                         f"the model imports no opset of domain '{domain}'")
            if not default and not ONNX_IMPORT_DOMAINS.get(domain):
                raise UnsupportedOpError(proto.op_type, domain, version, label,
                                         "netpass imports no ops of this domain (only ops it "
                                         "has rules for, or that ONNX defines as functions)")
            raise UnsupportedOpError(proto.op_type, domain, version, label)
        body, attrs = function

        def convert(ctx: OnnxNodeContext) -> list[Output]:
            return _expand_function(proto, inputs, body, attrs, opset)
    try:
        outs = convert(OnnxNodeContext(proto, inputs, opset, values, fields, version))
    except NetpassError as e:
        prefix = f"ONNX node '{label}' ({proto.op_type}): "
        if not str(e).startswith("ONNX node"):
            e.args = (prefix + str(e),)
        raise
    except MemoryError as e:  # the model may be valid, only too large to import here
        raise OutOfMemoryError(f"ONNX node '{label}' ({proto.op_type}): out of memory while "
                               f"importing it") from e
    except Exception as e:
        raise ModelFormatError(f"ONNX node '{label}' ({proto.op_type}): "
                               f"{type(e).__name__}: {e}") from e
    if type(outs) is Output:  # (most rules: one output, already an Output)
        outs = [outs]
    elif isinstance(outs, Node):
        outs = [outs.output(0)]
    elif isinstance(outs, Output):
        outs = [outs]
    else:
        outs = [o.output(0) if isinstance(o, Node) else o for o in outs]
    for i, name in enumerate(fields.output):
        if not name:
            continue
        if i >= len(outs) or outs[i] is None:
            raise ModelFormatError(f"ONNX node '{label}' ({proto.op_type}): output {i} "
                                   "is not produced by its import rule")
        out = outs[i]
        node = out.node
        if isinstance(node, Constant):
            named = node._friendly is None
        elif isinstance(node, Parameter):
            named = False
        else:  # a node the rule built (not one of the node's inputs, handed through)
            named = True
            for o in inputs:
                if o is not None and o.node is node:
                    named = False
                    break
        if named:
            if len(node._outs) == 1:
                node.friendly_name = fields.name or name
            elif node._friendly is None:
                node.friendly_name = label
        port = node._outs[out.index]
        if port.names is None:
            port.names = {name}
        else:
            port.names.add(name)
        known[name] = out


def _expand_function(proto: onnx.NodeProto, inputs: list[Output | None],
                     function: onnx.FunctionProto, attrs: dict, opset: int) -> list[Output]:
    """The outputs of ``proto`` converted from its op's function body (see
    :mod:`netpass.frontend.onnx_functions`), in a scope of the body's own."""
    scope = Scope()
    scope.domains.update({imp.domain: imp.version for imp in function.opset_import
                          if imp.domain not in DEFAULT_DOMAINS})
    for formal, actual in zip(function.input, inputs):
        if actual is None:
            scope.omitted.add(formal)
        else:
            scope[formal] = actual
    for formal in function.input[len(inputs):]:
        scope.omitted.add(formal)
    body_opset = function_opset(function, opset)
    rules: dict[tuple[str, int, str], Callable | None] = {}
    for node in function.node:
        _convert_node(NodeFields(with_attributes(node, attrs)), scope, body_opset, rules)
    return [scope[name] for name in function.output[:len(proto.output)]]


def read_onnx(source: Any) -> Model:
    """An ONNX model (path, bytes or ModelProto) as a Model."""
    proto, path = load_onnx_proto(source)
    if path is not None:
        _load_external_data(proto, path)
    # (else a tensor with external data is refused where it is converted, _tensor_to_array: a
    # walk over every tensor up front was ~8% of reading a 100k-node graph)
    opset = 0  # none imported: only nodes of other domains may appear
    domains = {}
    for imp in proto.opset_import:
        if imp.domain in DEFAULT_DOMAINS:
            opset = imp.version
        else:
            domains[imp.domain] = imp.version
    if opset == 0 and not domains:
        raise ModelFormatError("the model imports no ONNX opset")
    name = proto.graph.name or "Model"
    # The cyclic GC would rescan the ever-growing graph (millions of young objects, none of
    # them garbage: nodes hold producers strongly and consumers weakly, so refcounting frees
    # them), which made import time per node grow with graph size; pause it while converting,
    # and hand the new graph to the oldest generation (else the first allocation after the
    # import scans all of it: ~10% of reading 100k nodes).
    with gc_paused():
        return convert_graph(proto.graph, opset, name, domains)
