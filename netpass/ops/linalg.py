"""Det (ONNX 11, 22): determinants of the trailing square matrices. OpenVINO has no such op;
netpass keeps it whole."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node
from ..core.shape import PartialShape
from .base import NETPASS_OPSET, set_name, to_output
from .registry import onnx_export, onnx_rule

__all__ = ["det"]


class Det(Node):
    """``[*, M, M] -> [*]``."""

    type_name = "Det"
    version = NETPASS_OPSET

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "input must be a float tensor, got {}", et)
        ps = self.get_input_partial_shape(0)
        if not ps.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        self.check(len(ps) >= 2, "input must be [*, M, M], got {}", ps)
        self.check(ps[-1].compatible(ps[-2]), "matrices must be square, got {}", ps)
        self.set_output_type(0, et, PartialShape(list(ps)[:-2]))

    def evaluate(self, inputs):
        x = inputs[0]
        return [np.asarray(np.linalg.det(x.astype(np.float64))).astype(x.dtype)]


def det(data: Any, name: str | None = None) -> Node:
    """Det (ONNX): the determinant of each square matrix in the last two dims of ``data``
    (``[*, M, M] -> [*]``)."""
    return set_name(Det([to_output(data)]), name)


onnx_rule("Det", since=11)(lambda ctx: Det(ctx.inputs[:1]))


@onnx_export(Det)
def _export_det(node, ectx):
    ectx.add_node("Det", ectx.inputs(node), ectx.outputs(node))
