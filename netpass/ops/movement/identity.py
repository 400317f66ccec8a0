"""Identity (OpenVINO opset16): the input, unchanged. ONNX's Identity is imported as the
input itself (``ops/io.py``), so this class comes from IR; it is written to ONNX as
Identity."""
from __future__ import annotations

from typing import Any

from ...core.node import Node
from ..base import set_name, to_output
from ..registry import onnx_export

__all__ = ["identity"]


class Identity(Node):
    """Identity-16: output equal to the input (a copy), any type and shape."""

    type_name = "Identity"
    version = "opset16"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def infer_values(self) -> None:
        pv = self.input_partial_value(0)
        if pv is not None:
            self.set_output_partial_value(0, list(pv))

    def evaluate(self, inputs):
        return [inputs[0].copy()]


def identity(data: Any, name: str | None = None) -> Node:
    """Identity-16: a node whose output is ``data`` unchanged (a copy), of any element type and
    shape."""
    return set_name(Identity([to_output(data)]), name)


@onnx_export(Identity)
def _export_identity(node, ectx):
    ectx.add_node("Identity", ectx.inputs(node), ectx.outputs(node))
