"""BitCast (ONNX 26): the same bits read as another element type of the same width (little
endian). OpenVINO has no such op; netpass keeps it whole."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Node
from ...core.types import Type, string
from ..base import NETPASS_OPSET, set_name, to_output
from ..onnx_types import onnx_element_type, onnx_type_code
from ..registry import onnx_export, onnx_rule

__all__ = ["bitcast"]


class BitCast(Node):
    type_name = "BitCast"
    version = NETPASS_OPSET
    ATTRS = {"destination_type": None}
    destination_type: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.destination_type = Type.of(self.destination_type)
        src, dst = self.get_input_element_type(0), self.destination_type
        self.check(dst is not string and src is not string, "strings have no bit pattern")
        self.check(src.is_dynamic or src.bitwidth == dst.bitwidth,
                   "{} ({} bits) cannot be reinterpreted as {} ({} bits)", src, src.bitwidth,
                   dst, dst.bitwidth)
        self.set_output_type(0, dst, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = np.array(inputs[0], copy=True, order="C")  # (keeps a 0-d shape)
        dst = self.destination_type
        if dst.bitwidth < 8:  # one element per byte in memory: keep the low bits
            mask = np.uint8((1 << dst.bitwidth) - 1)
            codes = x.view(np.uint8) & mask
            if dst.is_signed and dst.is_integral:
                sign = np.uint8(1 << (dst.bitwidth - 1))
                codes = np.where(codes & sign, codes | np.uint8(0xFF ^ mask), codes)
            return [codes.astype(np.uint8).view(dst.dtype)]
        return [x.view(dst.dtype)]


def bitcast(data: Any, destination_type: Any, name: str | None = None) -> Node:
    """BitCast (ONNX 26): the bits of ``data`` read as ``destination_type``, which must
    have the same width; the shape is kept."""
    return set_name(BitCast([to_output(data)], destination_type=Type.of(destination_type)), name)


@onnx_rule("BitCast", since=26)
def _import_bitcast(ctx):
    return BitCast(ctx.inputs[:1], destination_type=onnx_element_type(ctx.attr("to", 0),
                                                                      ctx.name))


@onnx_export(BitCast, opset=26)
def _export_bitcast(node, ectx):
    ectx.add_node("BitCast", ectx.inputs(node), ectx.outputs(node),
                  to=onnx_type_code(node.destination_type, node.friendly_name))
