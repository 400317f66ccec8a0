"""Graph compiler: LegacyNetwork -> the executable op graph the runtime builds its program from.

Each layer becomes the primitive it stands for (layers remember the op they were made from);
blobs become constant inputs again. Two legacy layer kinds get their own lowering:

- ``Crop`` marked as a view by the alignment pass becomes a ``CropIE`` whose rt_info holds
  ``crop_view`` (the element offset): the runtime aliases the input buffer at that offset
  instead of copying;
- ``Affine`` (an unaligned crop) becomes ``Reshape -> FullyConnected -> Reshape`` with the
  layer's selection weights.
"""
from __future__ import annotations

import numpy as np

from ..core.boundary import Constant, Parameter, Result
from ..core.model import Model
from ..core.node import OP_TYPES, Node, Output
from ..errors import UnsupportedOpError
from ..legacy_passes.layer_graph import Layer, LegacyNetwork
from ..ops.elementwise import Convert
from ..ops.legacy import FullyConnected
from ..ops.movement import Reshape


def _const(value: np.ndarray) -> Output:
    return Constant([], value=np.asarray(value)).output(0)


def _reshape(x: Output, shape: list[int]) -> Output:
    return Reshape([x, _const(np.array(shape, dtype=np.int64))], special_zero=False).output(0)


def _lower_layer(layer: Layer, args: list[Output]) -> Node:
    if layer.type == "Affine":
        w = layer.blobs["weights"]
        flat = _reshape(args[0], [layer.params["rows"], layer.params["in_size"]])
        fc = FullyConnected([flat, _const(w), _const(np.zeros(w.shape[0], w.dtype))],
                                        out_size=int(w.shape[0]))
        return _reshape(fc.output(0), layer.params["out_shape"]).node
    if layer.type == "Reshape" and "dims" in layer.params:
        return _reshape(args[0], layer.params["dims"]).node
    if layer.type == "Identity":
        return Convert([args[0]], destination_type=layer.out_types[0])
    if layer.type == "FullyConnected" and len(args) == 2:
        w = layer.blobs["weights"]
        args = [*args, _const(np.zeros(w.shape[0], w.dtype))]
    cls = layer.op_class if layer.op_class is not None and layer.op_class.type_name == \
        layer.op_type else OP_TYPES.get(layer.op_type)
    if cls is None:
        raise UnsupportedOpError(layer.op_type, node_name=layer.name,
                                 reason=f"no primitive for legacy layer type {layer.type}")
    attrs = {k: v for k, v in layer.params.items() if k in cls.ATTRS}
    node = cls(args, **attrs)
    if layer.type == "Crop" and layer.params.get("view"):
        node.rt_info["crop_view"] = int(layer.params["offset_elements"])
    return node


def legacy_to_model(net: LegacyNetwork) -> Model:
    """The executable graph of ``net``: one primitive per layer, same input/output names and
    sinks."""
    outs: dict[str, Node] = {}
    params: dict[str, Parameter] = {}
    results: dict[str, Result] = {}
    for layer in net.sorted_layers():
        args = []
        for src in layer.inputs:
            if src[0] == "layer":
                args.append(outs[src[1]].output(src[2]))
            else:
                args.append(_const(layer.blobs[src[1]]))
        node: Node
        if layer.type == "Input":
            param = Parameter([], shape=layer.out_shapes[0], element_type=layer.out_types[0])
            param.friendly_name = layer.params["name"]
            param.output(0).names.add(layer.params["name"])
            params[layer.name] = node = param
        elif layer.type == "Output":
            result = Result(args)
            result.friendly_name = layer.params["name"]
            results[layer.name] = node = result
        elif layer.type == "Const":
            node = Constant([], value=layer.blobs["custom"])
        else:
            node = _lower_layer(layer, args)
            if node.get_output_size() == 1 or node._friendly is None:
                node.friendly_name = layer.name
        outs[layer.name] = node
    return Model([results[n] for n in net.output_names], [params[n] for n in net.input_names],
                 net.name, [outs[n] for n in net.sink_names])
