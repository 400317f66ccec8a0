"""MaxUnpool (ONNX 9, 11, 22): the partial inverse of MaxPool. Every value of ``X`` goes to the
position its index names in the output (indices flat over the whole output, as MaxPool's
second output gives them), zeros elsewhere. The output shape is ``output_shape`` when given,
else ``(in - 1) * stride + kernel - pads`` per spatial axis. OpenVINO has no such op; netpass
keeps it whole. With an ``output_shape`` larger than that, the indices still count over the
inferred shape, whose block lands in the output's first corner (onnx's reference, which the
backend suite follows; onnxruntime counts them over ``output_shape``).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from .base import NETPASS_OPSET, set_name, to_output
from .registry import onnx_export, onnx_rule
from .shape_inputs import const_ints

__all__ = ["max_unpool"]


class MaxUnpool(Node):
    type_name = "MaxUnpool"
    version = NETPASS_OPSET
    ATTRS = {"kernel": [], "strides": [], "pads_begin": [], "pads_end": []}
    SHAPE_INFER_INPUTS = (2,)

    def infer_types(self) -> None:
        self.check(self.get_input_size() in (2, 3), "expects X, I and an optional output_shape")
        self.check(self.get_input_element_type(1).is_integral or
                   self.get_input_element_type(1).is_dynamic, "indices must be integers")
        et = self.get_input_element_type(0)
        if self.get_input_size() == 3:
            shape = const_ints(self, 2)
            ps = PartialShape(shape) if shape is not None else PartialShape(None)
            self.set_output_type(0, et, ps)
            return
        ps = self.get_input_partial_shape(0)
        n = len(self.kernel)
        if not ps.rank_is_static:
            self.set_output_type(0, et, PartialShape.dynamic(n + 2))
            return
        self.check(len(ps) == n + 2, "X rank {} does not fit kernel {}", len(ps), self.kernel)
        spatial = []
        for d, k, s, b, e in zip(list(ps)[2:], self.kernel, self._strides(n), *self._pads(n)):
            spatial.append(Dimension((d.min - 1) * s + k - b - e) if d.is_static
                           else Dimension())
        self.set_output_type(0, et, PartialShape([ps[0], ps[1], *spatial]))

    def _strides(self, n: int) -> list[int]:
        return list(self.strides) or [1] * n

    def _pads(self, n: int) -> tuple[list[int], list[int]]:
        return list(self.pads_begin) or [0] * n, list(self.pads_end) or [0] * n

    def evaluate(self, inputs: Sequence[Any]) -> list[Any]:
        x, idx = np.asarray(inputs[0]), np.asarray(inputs[1]).astype(np.int64)
        n = len(self.kernel)
        pb, pe = self._pads(n)
        inferred = list(x.shape[:2]) + [(d - 1) * s + k - b - e for d, k, s, b, e in zip(
            x.shape[2:], self.kernel, self._strides(n), pb, pe)]
        y = np.zeros(int(np.prod(inferred)), dtype=x.dtype)
        y[idx.reshape(-1)] = x.reshape(-1)
        y = y.reshape(inferred)
        if len(inputs) < 3:
            return [y]
        # a larger output_shape: the unpooled values keep the inferred layout, in its corner
        shape = [int(v) for v in np.asarray(inputs[2]).reshape(-1)]
        out = np.zeros(shape, dtype=x.dtype)
        out[tuple(slice(0, d) for d in inferred)] = y
        return [out]


def max_unpool(data: Any, indices: Any, kernel_shape: Any, strides: Any = None,
               pads_begin: Any = None, pads_end: Any = None, output_shape: Any = None,
               name: str | None = None) -> Node:
    """MaxUnpool (ONNX): ``data`` placed at ``indices`` in a zero tensor."""
    def ints(v: Any) -> list[int]:
        return [] if v is None else [int(x) for x in np.asarray(v).reshape(-1)]
    args = [to_output(data), to_output(indices)]
    if output_shape is not None:
        args.append(to_output(np.asarray(output_shape, np.int64)))
    return set_name(MaxUnpool(args, kernel=ints(kernel_shape), strides=ints(strides),
                              pads_begin=ints(pads_begin), pads_end=ints(pads_end)), name)


@onnx_rule("MaxUnpool", since=9)
def _import_max_unpool(ctx):
    pads = ctx.attr("pads", [])
    half = len(pads) // 2
    inputs = [v for v in ctx.inputs[:3] if v is not None]
    return MaxUnpool(inputs, kernel=ctx.attr("kernel_shape", []), strides=ctx.attr("strides", []),
                     pads_begin=pads[:half], pads_end=pads[half:])


@onnx_export(MaxUnpool)
def _export_max_unpool(node, ectx):
    attrs: dict[str, Any] = {"kernel_shape": list(node.kernel)}
    if node.strides:
        attrs["strides"] = list(node.strides)
    if node.pads_begin or node.pads_end:
        n = len(node.kernel)
        attrs["pads"] = list(node.pads_begin or [0] * n) + list(node.pads_end or [0] * n)
    ectx.add_node("MaxUnpool", ectx.inputs(node), ectx.outputs(node), **attrs)
