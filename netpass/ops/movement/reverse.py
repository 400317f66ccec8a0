"""Reverse: flip along axes."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Node, Output
from ..base import normalize_axis, set_name, to_output
from ..registry import onnx_export
from ..shape_inputs import INT64_MAX, check_shape_input, export_error, i64_operand

__all__ = ["reverse"]


class Reverse(Node):
    """Reverse v1: flip ``data`` along ``reverse_axes`` (``mode`` "index": axis numbers;
    "mask": one boolean per axis)."""

    type_name = "Reverse"
    version = "opset1"
    ATTRS = {"mode": "index"}

    def axes(self) -> list[int] | None:
        v = self.input_constant(1)
        data = self.get_input_partial_shape(0)
        if v is None or not data.rank_is_static:
            return None
        flat = np.asarray(v).reshape(-1)
        if self.mode == "mask":
            self.check(flat.size == len(data), f"mask {flat.tolist()} must have {len(data)} "
                       "elements (the input rank)")
            return [i for i, m in enumerate(flat) if m]
        return sorted({normalize_axis(self, int(a), len(data)) for a in flat})

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, reverse_axes)")
        self.check(self.mode in ("index", "mask"), "unknown mode '{}'", self.mode)
        et = self.get_input_element_type(1)
        if self.mode == "mask":
            self.check(et.is_dynamic or et.name == "boolean", "mask must be boolean, got {}", et)
        else:
            check_shape_input(self, 1, "reverse_axes")
        self.axes()
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x, axes = inputs
        flat = np.asarray(axes).reshape(-1)
        ax = [i for i, m in enumerate(flat) if m] if self.mode == "mask" else \
            [int(a) % x.ndim for a in flat]
        return [np.flip(x, tuple(ax)) if ax else x]


def reverse(data: Any, reverse_axes: Any, mode: str, name: str | None = None) -> Node:
    """Reverse-1: ``data`` reversed along ``reverse_axes``: a list of axes (``mode`` "index") or a
    boolean mask over the dims (``mode`` "mask")."""
    axes = reverse_axes if isinstance(reverse_axes, (Node, Output)) else (
        to_output(np.asarray(reverse_axes, dtype=bool)) if mode == "mask"
        else i64_operand(reverse_axes))
    return set_name(Reverse([to_output(data), axes], mode=str(mode).lower()), name)


@onnx_export(Reverse)
def _export_reverse(node, ectx):
    axes = node.axes()
    if axes is None:
        export_error(node, "reverse_axes must be constant")
    if not axes:
        ectx.add_node("Identity", ectx.inputs(node)[:1], ectx.outputs(node))
        return
    n = len(axes)
    consts = [ectx.constant(np.asarray(v, dtype=np.int64))
              for v in ([-1] * n, [-INT64_MAX - 1] * n, axes, [-1] * n)]
    ectx.add_node("Slice", ectx.inputs(node)[:1] + consts, ectx.outputs(node))
