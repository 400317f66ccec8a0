"""ngraph Model -> LegacyNetwork (OpenVINO's convertFunctionToICNNNetwork, for netpass)."""
from __future__ import annotations

from ..core.model import Model, parameter_name, result_name
from ..core.node import Node
from ..ops.io import Constant, Parameter, Result
from .layer_graph import Layer, LegacyNetwork

# ngraph op type -> legacy layer type; ops not listed keep their own type name.
LEGACY_TYPES: dict[str, str] = {
    "Parameter": "Input", "Result": "Output",
    "Convolution": "Convolution", "GroupConvolution": "Convolution",
    "ConvolutionBackpropData": "Deconvolution", "GroupConvolutionBackpropData": "Deconvolution",
    "GNAConvolution": "GNAConvolution", "GNAMaxPool": "GNAPooling",
    "MaxPool": "Pooling", "AvgPool": "Pooling",
    "MatMul": "Gemm", "FullyConnected": "FullyConnected",
    "Add": "Eltwise", "Subtract": "Eltwise", "Multiply": "Eltwise", "Divide": "Eltwise",
    "Maximum": "Eltwise", "Minimum": "Eltwise", "SquaredDifference": "Eltwise",
    "Eltwise": "Eltwise",
    "Relu": "ReLU", "ReLUIE": "ReLU", "Sigmoid": "Sigmoid", "Tanh": "TanH", "Clamp": "Clamp",
    "Elu": "ELU", "Exp": "Exp", "Log": "Log", "Abs": "Abs", "Sqrt": "Sqrt", "Negative": "Negative",
    "SoftPlus": "SoftPlus", "Erf": "Erf", "Gelu": "Gelu", "Swish": "Swish", "HSwish": "HSwish",
    "PRelu": "PReLU", "Softmax": "SoftMax", "LogSoftmax": "LogSoftMax", "MVN": "MVN",
    "Concat": "Concat", "Split": "Split", "VariadicSplit": "Split", "CropIE": "Crop",
    "Reshape": "Reshape", "Squeeze": "Reshape", "Unsqueeze": "Reshape",
    "Transpose": "Permute", "Gather": "Gather", "PowerIE": "Power", "ScaleShiftIE": "ScaleShift",
}

ELTWISE_OPERATIONS = {"Add": "sum", "Subtract": "sub", "Multiply": "prod", "Divide": "div",
                      "Maximum": "max", "Minimum": "min", "SquaredDifference": "squared_diff"}

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
    """
    net = LegacyNetwork(model.friendly_name)
    taken: set[str] = set()
    names: dict[Node, str] = {}
    for node in model.get_ordered_ops():
        if isinstance(node, Constant) and not any(
                isinstance(c.node, Result) for c in node.output(0).consumers()):
            continue
        op_type = node.type_name
        ltype = "Const" if isinstance(node, Constant) else LEGACY_TYPES.get(op_type, op_type)
        params = {} if isinstance(node, Constant) else dict(node.get_attributes())
        if isinstance(node, Parameter):
            params = {"name": parameter_name(node)}
        elif isinstance(node, Result):
            params = {"name": result_name(node)}
        if ltype == "Eltwise" and op_type in ELTWISE_OPERATIONS:
            params["operation"] = ELTWISE_OPERATIONS[op_type]
        if op_type in ("MaxPool", "AvgPool", "GNAMaxPool"):
            params["pool-method"] = "avg" if op_type == "AvgPool" else "max"
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
