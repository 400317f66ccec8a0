"""GRN (OpenVINO opset1, Global Response Normalization): each element divided by the L2 norm
of its position across channels. ONNX has no such op."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Node
from ..base import set_name, to_output

__all__ = ["grn"]


class GRN(Node):
    """GRN-1: ``data`` ``[N, C, ...]`` (rank 2 to 4) divided by ``sqrt(sum over C of data^2 +
    bias)``; same shape out."""

    type_name = "GRN"
    version = "opset1"
    ATTRS = {"bias": 0.0}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "data must be a float tensor, got {}", et)
        data = self.get_input_partial_shape(0)
        self.check(not data.rank_is_static or 2 <= len(data) <= 4, "data must have rank 2 to 4, "
                   "got {}", data)
        self.set_output_type(0, et, data)

    def evaluate(self, inputs):
        x = inputs[0]
        wide = x.astype(np.float64)
        norm = np.sqrt((wide * wide).sum(axis=1, keepdims=True) + float(self.bias))
        with np.errstate(divide="ignore", invalid="ignore"):
            return [(wide / norm).astype(x.dtype)]


def grn(data: Any, bias: float, name: str | None = None) -> Node:
    """GRN-1: ``data`` divided by ``sqrt(sum over channels of data^2 + bias)``."""
    return set_name(GRN([to_output(data)], bias=float(bias)), name)
