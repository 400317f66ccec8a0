"""CenterCropPad (ONNX 18): crop or zero-pad chosen axes to target lengths around the center.
A crop starts at ``(length - target) // 2``; a pad puts ``(target - length) // 2`` zeros first
and the rest after. OpenVINO has no such op; netpass keeps it whole."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node
from ...core.shape import PartialShape
from ..base import NETPASS_OPSET, normalize_axis, set_name, to_output
from ..registry import onnx_export, onnx_rule
from ..shape_inputs import i64_operand

__all__ = ["center_crop_pad"]


class CenterCropPad(Node):
    """Inputs ``(data, shape)``: ``shape[i]`` is the target length of axis ``axes[i]`` (all
    axes in order when ``axes`` is empty)."""

    type_name = "CenterCropPad"
    version = NETPASS_OPSET
    ATTRS = {"axes": []}
    SHAPE_INFER_INPUTS = (1,)  # the target shape

    def _axes(self, rank: int) -> list[int]:
        return [normalize_axis(self, a, rank) for a in self.axes] if self.axes else \
            list(range(rank))

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, shape)")
        ps = self.get_input_partial_shape(0)
        et = self.get_input_element_type(0)
        if not ps.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        axes = self._axes(len(ps))
        self.check(len(set(axes)) == len(axes), "axes {} repeat an axis", self.axes)
        target = self.input_partial_value(1)
        dims = list(ps)
        for i, a in enumerate(axes):
            if target is not None:
                self.check(len(target) == len(axes), "shape has {} values for {} axes",
                           len(target), len(axes))
                t = target[i]
                dims[a] = t if isinstance(t, Dimension) else Dimension(int(t))
            else:
                dims[a] = Dimension()
        self.set_output_type(0, et, PartialShape(dims))

    def evaluate(self, inputs):
        x, shape = inputs
        axes = self._axes(x.ndim)
        out = x
        for a, t in zip(axes, np.asarray(shape).reshape(-1).tolist()):
            n = out.shape[a]
            if t < n:
                start = (n - t) // 2
                out = np.take(out, np.arange(start, start + t), axis=a)
            elif t > n:
                pad = [(0, 0)] * out.ndim
                pad[a] = ((t - n) // 2, t - n - (t - n) // 2)
                out = np.pad(out, pad)
        return [np.ascontiguousarray(out)]


def center_crop_pad(data: Any, shape: Any, axes: list[int] | None = None,
                    name: str | None = None) -> Node:
    """CenterCropPad (ONNX 18): each axis in ``axes`` (default: all, in order) cropped or
    zero-padded about its centre to the length in ``shape`` (a list or a graph value)."""
    return set_name(CenterCropPad([to_output(data), i64_operand(shape)], axes=list(axes or [])),
                    name)


@onnx_rule("CenterCropPad", since=18)
def _import_center_crop_pad(ctx):
    return CenterCropPad(ctx.inputs[:2], axes=ctx.attr("axes", []))


@onnx_export(CenterCropPad, opset=18)
def _export_center_crop_pad(node, ectx):
    attrs = {"axes": list(node.axes)} if node.axes else {}
    ectx.add_node("CenterCropPad", ectx.inputs(node), ectx.outputs(node), **attrs)
