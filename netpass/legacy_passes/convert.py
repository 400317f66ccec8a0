"""ngraph Model -> LegacyNetwork (OpenVINO's convertFunctionToICNNNetwork, for netpass)."""
from __future__ import annotations

from ..core.boundary import Constant, Parameter, Result
from ..core.gc_pause import gc_paused
from ..core.model import Model, parameter_name, result_name
from ..core.node import Node
from ..ops.convolution import (
    ConvolutionBackpropData,
    GroupConvolution,
    GroupConvolutionBackpropData,
)
from ..ops.elementwise import (
    Add,
    Divide,
    Elu,
    Maximum,
    Minimum,
    Multiply,
    PRelu,
    Relu,
    SquaredDifference,
    Subtract,
    Tanh,
)
from ..ops.gna import GNAMaxPool
from ..ops.legacy import CropIE, PowerIE, ReLUIE, ScaleShiftIE
from ..ops.matmul import MatMul
from ..ops.movement import Squeeze, Transpose, Unsqueeze, VariadicSplit
from ..ops.normalization import LogSoftmax, Softmax
from ..ops.pooling import AvgPool, MaxPool
from .layer_graph import Layer, LegacyNetwork

# The legacy layer type of each op class whose layer type is not its own type name. The
# runtime's op table shows it (``OpKind.legacy_type``) but cannot be imported here (the
# runtime sits above the legacy stage), so the table is this stage's own, by class.
LEGACY_TYPES: dict[type[Node], str] = {
    Parameter: "Input", Result: "Output",
    GroupConvolution: "Convolution", ConvolutionBackpropData: "Deconvolution",
    GroupConvolutionBackpropData: "Deconvolution", GNAMaxPool: "GNAPooling",
    MaxPool: "Pooling", AvgPool: "Pooling", MatMul: "Gemm",
    Add: "Eltwise", Subtract: "Eltwise", Multiply: "Eltwise", Divide: "Eltwise",
    Maximum: "Eltwise", Minimum: "Eltwise", SquaredDifference: "Eltwise",
    Relu: "ReLU", ReLUIE: "ReLU", Tanh: "TanH", Elu: "ELU", PRelu: "PReLU",
    Softmax: "SoftMax", LogSoftmax: "LogSoftMax",
    VariadicSplit: "Split", CropIE: "Crop", Squeeze: "Reshape", Unsqueeze: "Reshape",
    Transpose: "Permute", PowerIE: "Power", ScaleShiftIE: "ScaleShift",
}

# Eltwise layers: the ``operation`` of each arithmetic op
ELTWISE_OPERATIONS: dict[type[Node], str] = {Add: "sum", Subtract: "sub", Multiply: "prod",
                                             Divide: "div", Maximum: "max", Minimum: "min",
                                             SquaredDifference: "squared_diff"}
POOLS: dict[type[Node], str] = {MaxPool: "max", AvgPool: "avg", GNAMaxPool: "max"}  # pool-method


def _versioned(table: dict[type[Node], str], cls: type[Node]) -> str | None:
    """``table``'s entry for ``cls`` or the op version it refines (a subclass with the same
    type name)."""
    for c in cls.__mro__:
        if getattr(c, "type_name", None) != cls.type_name:
            break
        if c in table:
            return table[c]
    return None


def legacy_type(cls: type[Node]) -> str:
    """The legacy layer type op class ``cls`` becomes (its own type name unless listed)."""
    return _versioned(LEGACY_TYPES, cls) or cls.type_name


# Layers whose constant inputs 1 and 2 are weights and biases.
WEIGHTABLE = {"Convolution", "Deconvolution", "GNAConvolution", "FullyConnected", "ScaleShift"}


def _blob_key(legacy_type: str, port: int) -> str:
    if legacy_type in WEIGHTABLE and port in (1, 2):
        return "weights" if port == 1 else "biases"
    return f"input{port}"


def _unique(name: str, taken: set[str]) -> str:
    base, k = name, 1
    while name in taken:
        name = f"{base}_{k}"
        k += 1
    taken.add(name)
    return name


def convert_to_legacy(model: Model) -> LegacyNetwork:
    """Build the layer graph of ``model``: one layer per op, constants as blobs of consumers.

    A Constant that feeds a Result directly becomes a ``Const`` layer (someone must produce the
    output). Input and Output layers carry the model's input/output names in ``params["name"]``.
    The cyclic collector is paused meanwhile (``core.gc_pause``: after a GNA pipeline at 100k
    nodes, its rescans were 4 of the conversion's 5.6 s).
    """
    with gc_paused():
        return _convert(model)


def _convert(model: Model) -> LegacyNetwork:
    net = LegacyNetwork(model.friendly_name)
    taken: set[str] = set()
    names: dict[Node, str] = {}
    for node in model.get_ordered_ops():
        if isinstance(node, Constant) and not any(
                isinstance(c.node, Result) for c in node.output(0).consumers()):
            continue
        op_type = node.type_name
        ltype = "Const" if isinstance(node, Constant) else legacy_type(type(node))
        params = {} if isinstance(node, Constant) else dict(node.get_attributes())
        if isinstance(node, Parameter):
            params = {"name": parameter_name(node)}
        elif isinstance(node, Result):
            params = {"name": result_name(node)}
        operation = _versioned(ELTWISE_OPERATIONS, type(node))
        if operation is not None:
            params["operation"] = operation
        pool = _versioned(POOLS, type(node))
        if pool is not None:
            params["pool-method"] = pool
        label = params["name"] if isinstance(node, (Parameter, Result)) else node.friendly_name
        layer = Layer(name=_unique(label, taken), type=ltype, op_type=op_type, params=params,
                      out_shapes=[o.partial_shape for o in node.outputs()],
                      out_types=[o.element_type for o in node.outputs()],
                      op_class=None if isinstance(node, Constant) else type(node))
        if isinstance(node, Constant):
            layer.blobs["custom"] = node.value
        for port, src in enumerate(node.input_values()):
            if isinstance(src.node, Constant) and src.node not in names:
                key = _blob_key(ltype, port)
                layer.blobs[key] = src.node.value
                layer.inputs.append(("blob", key))
            else:
                layer.inputs.append(("layer", names[src.node], src.index))
        names[node] = layer.name
        net.add_layer(layer)
    net.input_names = [names[p] for p in model.parameters]
    net.output_names = [names[r] for r in model.results]
    net.sink_names = [names[s] for s in model.sinks]
    return net
