"""netpass Model -> ONNX (opset 17, IR version 8; a later opset where the model holds an op
that ONNX added later, e.g. Attention: opset 23).

Each op family registers an export rule in ``netpass.ops.registry.ONNX_EXPORT``; a rule writes
ONNX nodes through the :class:`ExportContext` it is given. Graph inputs and outputs keep the
model's input and output names, so a model read from ONNX and written back is fed and read
by the same names; symbolic dimensions become ``dim_param``.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..core.gc_pause import gc_paused
from ..core.model import Model
from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..core.types import Type
from ..errors import UnsupportedOpError
from ..ops.io import Parameter, Result
from ..ops.onnx_types import onnx_type_code, type_opset
from ..ops.registry import ONNX_EXPORT, ONNX_EXPORT_OPSET
from ..version import __version__

OPSET = 17
IR_VERSION = 8
# Above this many bytes of weights, they are written as external data (protobuf's limit is 2 GiB).
EXTERNAL_DATA_THRESHOLD = 1 << 30


def onnx_elem_type(et: Type, where: str) -> int:
    return onnx_type_code(et, where)


def _dims(ps: PartialShape) -> list[int | str | None] | None:
    """ONNX dims: ints when static, the symbol's name (dim_param) when it has one, else None."""
    if not ps.rank_is_static:
        return None
    return [d.get_length() if d.is_static else (d.symbol.name if d.symbol is not None else None)
            for d in ps]


class ExportContext:
    """Names of tensors and the growing list of ONNX nodes and initializers.

    Every netpass Output gets one ONNX tensor name: a model input's or output's name where it
    is one, else one of its own tensor names not used yet, else a fresh name.
    """

    def __init__(self, model: Model, opset: int = OPSET) -> None:
        self.opset = opset
        # versions to import of the other domains the rules wrote nodes of (ai.onnx.ml...)
        self.domains: dict[str, int] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._names: dict[tuple[int, int], str] = {}
        self._used: set[str] = set()
        # Names a fresh name must avoid: every tensor name in the model, taken or not yet.
        self._reserved: set[str] = set()
        self._counter = 0
        for node in model.get_ordered_ops():
            for names in (port.names or () for port in node._outs):
                self._reserved.update(names)
        self._reserved.update(model.input_names)
        self._reserved.update(model.output_names)

    # -- names --------------------------------------------------------------------------
    def bind(self, output: Output, name: str) -> None:
        self._names[(id(output.node), output.index)] = name
        self._used.add(name)

    def reserve(self, name: str) -> None:
        """Keep ``name`` from being handed out (it is written later)."""
        self._used.add(name)

    def is_bound(self, output: Output) -> bool:
        return (id(output.node), output.index) in self._names

    def name_of(self, output: Output) -> str:
        key = (id(output.node), output.index)
        name = self._names.get(key)
        if name is None:
            free = sorted(n for n in output.names if n not in self._used)
            name = free[0] if free else self.fresh(output.node.friendly_name)
            self.bind(output, name)
        return name

    def fresh(self, hint: str = "t") -> str:
        """A tensor (or node) name used nowhere in the model or the ONNX graph so far."""
        base = hint or "t"
        name = base
        while name in self._used or name in self._reserved:
            self._counter += 1
            name = f"{base}__{self._counter}"
        self._used.add(name)
        return name

    # -- what export rules call ---------------------------------------------------------
    def inputs(self, node: Node) -> list[str]:
        return [self.name_of(v) for v in node.input_values()]

    def outputs(self, node: Node) -> list[str]:
        return [self.name_of(o) for o in node.outputs()]

    def add_node(self, op_type: str, inputs: list[str], outputs: list[str], domain: str = "",
                 version: int = 1, **attrs: Any) -> None:
        """Append an ONNX node; numpy array attributes become tensor attributes. An op of
        another ``domain`` makes the model import it at ``version`` at least."""
        conv = {k: (numpy_helper.from_array(np.asarray(v)) if isinstance(v, np.ndarray) else v)
                for k, v in attrs.items() if v is not None}
        name = self.fresh(f"{op_type}_{outputs[0]}" if outputs else op_type)
        if domain:
            self.domains[domain] = max(self.domains.get(domain, version), version)
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=name,
                                           domain=domain or None, **conv))

    def add_reduce(self, op_type: str, data: str, outputs: list[str], axes: list[int],
                   keepdims: bool) -> None:
        """An ONNX reduction (ReduceMean, ReduceMax...) over constant ``axes``: an attribute up
        to opset 17, an input from opset 18 on (ReduceSum: from 13)."""
        if self.opset >= 18 or op_type == "ReduceSum":
            axes_name = self.constant(np.asarray(axes, np.int64), "axes")
            self.add_node(op_type, [data, axes_name], outputs, keepdims=int(keepdims))
        else:
            self.add_node(op_type, [data], outputs, axes=list(axes), keepdims=int(keepdims))

    def constant(self, array: Any, hint: str = "const") -> str:
        """Add ``array`` as an initializer; returns its tensor name."""
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name


def _rule_for(node: Node) -> Callable | None:
    for cls in type(node).__mro__:
        rule = ONNX_EXPORT.get(cls)
        if rule is not None:
            return rule
    return None


def _finish(nodes: list[onnx.NodeProto], initializers: list[onnx.TensorProto],
           outputs: list[str]) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """Drop nodes and initializers no graph output depends on (e.g. weights an export rule
    replaced by a re-laid-out copy), and turn tensor Constant nodes into initializers."""
    needed = set(outputs)
    kept = []
    for n in reversed(nodes):
        if any(o in needed for o in n.output):
            kept.append(n)
            needed.update(i for i in n.input if i)
    kept.reverse()
    inits = [t for t in initializers if t.name in needed]
    # Constant nodes holding a tensor become initializers, as in models exporters write.
    nodes_out = []
    for n in kept:
        if n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value":
            t = onnx.TensorProto()
            t.CopyFrom(n.attribute[0].t)
            t.name = n.output[0]
            inits.append(t)
        else:
            nodes_out.append(n)
    return nodes_out, inits


def to_onnx(model: Model) -> onnx.ModelProto:
    """Build the ONNX ModelProto of ``model``."""
    # As in the reader: the cyclic GC would rescan the growing graph and protos (none of it
    # garbage) and make the cost per node grow with the model's size.
    with gc_paused():
        return _to_onnx(model)


def export_opset(model: Model) -> int:
    """The ONNX opset ``model`` is written at: 17, or the highest opset its ops' rules need."""
    need = OPSET
    for node in model.get_ordered_ops():
        for out in node.outputs():
            need = max(need, type_opset(out.element_type))
        for cls in type(node).__mro__:
            if cls in ONNX_EXPORT:
                rule_opset = ONNX_EXPORT_OPSET.get(cls, OPSET)
                need = max(need, rule_opset(node) if callable(rule_opset) else rule_opset)
                break
    return need


def _ir_version(opset: int, domains: dict[str, int] | None = None) -> int:
    """The lowest IR version that carries ``opset`` and the ``ai.onnx.ml`` /
    ``ai.onnx.preview.training`` versions in ``domains`` (onnx's version table); 8 for opset
    17 alone."""
    domains = domains or {}
    ml = domains.get("ai.onnx.ml", 0)
    training = domains.get("ai.onnx.preview.training", 0)
    for _release, ir, ai_onnx, *rest in helper.VERSION_TABLE:  # (ml, training) from 1.x
        ai_ml, ai_training = (list(rest) + [0, 0])[:2]
        if ai_onnx >= opset and ai_ml >= ml and ai_training >= training:
            return max(ir, IR_VERSION)
    return onnx.IR_VERSION


def _to_onnx(model: Model) -> onnx.ModelProto:
    opset = export_opset(model)
    ectx = ExportContext(model, opset)
    inputs = []
    for p, name in zip(model.parameters, model.input_names):
        ectx.bind(p.output(0), name)
        out = p.output(0)
        inputs.append(helper.make_tensor_value_info(
            name, onnx_elem_type(out.element_type, f"input '{name}'"), _dims(out.partial_shape)))
    # A result's value takes the output's name unless it already has one (a model input, or
    # another result's value); those get an Identity after all nodes are written.
    identities: list[tuple[Output, str]] = []
    for r, name in zip(model.results, model.output_names):
        src = r.input_value(0)
        if ectx.is_bound(src):
            if ectx.name_of(src) == name:
                continue  # the same tensor listed twice as an output: nothing to define
            identities.append((src, name))
            ectx.reserve(name)
        else:
            ectx.bind(src, name)
    for node in model.get_ordered_ops():
        if isinstance(node, (Parameter, Result)):
            continue
        rule = _rule_for(node)
        if rule is None:
            raise UnsupportedOpError(node.type_name, "", opset, node.friendly_name,
                                     "no ONNX export rule")
        rule(node, ectx)
    for src, name in identities:
        ectx.add_node("Identity", [ectx.name_of(src)], [name])
    nodes, initializers = _finish(ectx.nodes, ectx.initializers, model.output_names)
    outputs = []
    for r, name in zip(model.results, model.output_names):
        src = r.input_value(0)
        outputs.append(helper.make_tensor_value_info(
            name, onnx_elem_type(src.element_type, f"output '{name}'"), _dims(src.partial_shape)))
    graph = helper.make_graph(nodes, model.friendly_name or "netpass", inputs, outputs,
                              initializers)
    imports = [helper.make_opsetid("", opset)]
    imports += [helper.make_opsetid(d, v) for d, v in sorted(ectx.domains.items())]
    proto = helper.make_model(graph, producer_name="netpass", producer_version=__version__,
                              opset_imports=imports)
    proto.ir_version = _ir_version(opset, ectx.domains)
    return proto


def _tensor_bytes(proto: onnx.ModelProto) -> int:
    """Bytes of tensor data in initializers and Constant-node attributes."""
    from onnx.external_data_helper import _get_all_tensors
    return sum(len(t.raw_data) for t in _get_all_tensors(proto))


def write_onnx(model: Model, path: str | Path) -> None:
    """Write ``model`` to ``path`` as ONNX (opset 17, IR version 8).

    A protobuf file cannot exceed 2 GiB; when the weights come near that, they go to
    ``<file name>.data`` next to the model (ONNX external data, which ``read_model`` accepts
    from the model's own directory).
    """
    proto = to_onnx(model)
    path = Path(path)
    if _tensor_bytes(proto) > EXTERNAL_DATA_THRESHOLD:
        onnx.save_model(proto, str(path), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=f"{path.name}.data",
                        size_threshold=1024, convert_attribute=True)
    else:
        onnx.save_model(proto, str(path))


__all__ = ["ExportContext", "to_onnx", "write_onnx"]
