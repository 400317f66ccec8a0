"""Hardmax (ONNX 1, 11, 13): 1 at the first maximum along an axis, 0 elsewhere. Up to opset 11
the input is viewed as 2-D ``[prod(dims before axis), prod(dims from axis)]`` first (as the old
Softmax did); from 13 the axis alone counts. OpenVINO has no such op; netpass keeps it whole."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node
from .base import NETPASS_OPSET, normalize_axis, set_name, to_output
from .registry import onnx_export, onnx_rule

__all__ = ["hardmax"]


class Hardmax(Node):
    """``axis``: where the maximum is taken; ``coerce_2d``: the opset <= 11 view (the maximum
    over all dims from ``axis`` on, per leading index)."""

    type_name = "Hardmax"
    version = NETPASS_OPSET
    ATTRS = {"axis": -1, "coerce_2d": False}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "input must be a float tensor, got {}", et)
        ps = self.get_input_partial_shape(0)
        if ps.rank_is_static:
            normalize_axis(self, self.axis, len(ps))
        self.set_output_type(0, et, ps)

    def evaluate(self, inputs):
        x = inputs[0]
        axis = self.axis % max(x.ndim, 1)
        if self.coerce_2d:
            flat = x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)
            return [_hardmax_last(flat).reshape(x.shape)]
        moved = np.moveaxis(x, axis, -1)
        return [np.moveaxis(_hardmax_last(moved), -1, axis)]


def _hardmax_last(x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    if x.size:
        first = np.argmax(x, axis=-1)[..., None]  # argmax: the first of equal maxima
        np.put_along_axis(out, first, 1, axis=-1)
    return out


def hardmax(data: Any, axis: int = -1, name: str | None = None) -> Node:
    """Hardmax (ONNX): 1 at the first maximum along ``axis``, 0 elsewhere."""
    return set_name(Hardmax([to_output(data)], axis=int(axis)), name)


@onnx_rule("Hardmax")
def _import_hardmax_2d(ctx):
    return Hardmax(ctx.inputs[:1], axis=ctx.attr("axis", 1), coerce_2d=True)


@onnx_rule("Hardmax", since=13)
def _import_hardmax(ctx):
    return Hardmax(ctx.inputs[:1], axis=ctx.attr("axis", -1))


@onnx_export(Hardmax)
def _export_hardmax(node, ectx):
    if node.coerce_2d:
        x, out = ectx.inputs(node)[0], ectx.outputs(node)[0]
        ps = node.get_input_partial_shape(0)
        axis = node.axis % len(ps) if ps.rank_is_static else node.axis
        shape, flat, hard = ectx.fresh("shape"), ectx.fresh("flat"), ectx.fresh("hard")
        ectx.add_node("Shape", [x], [shape])
        ectx.add_node("Flatten", [x], [flat], axis=int(axis))
        ectx.add_node("Hardmax", [flat], [hard], axis=1)
        ectx.add_node("Reshape", [hard, shape], [out])
        return
    ectx.add_node("Hardmax", ectx.inputs(node), ectx.outputs(node), axis=int(node.axis))
