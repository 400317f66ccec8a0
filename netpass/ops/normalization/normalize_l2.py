"""NormalizeL2 (OpenVINO opset1), with ONNX LpNormalization (p = 1 and 2) imported onto it."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Node
from ..base import set_name, to_output
from ..elementwise import Divide, Maximum, const_like
from ..reduction import ReduceL1
from ..registry import onnx_export, onnx_rule
from .common import axes_value, check_axes_input, constant_axes, i64, runtime_axes


class NormalizeL2(Node):
    """x / sqrt(sum(x^2) + eps) (``add``) or / sqrt(max(sum(x^2), eps)) (``max``) over the axes
    input; empty axes normalize every element by itself."""

    type_name = "NormalizeL2"
    ATTRS = {"eps": 1e-12, "eps_mode": "add"}
    eps_mode: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, axes)")
        self.eps_mode = str(self.eps_mode).lower()
        self.check(self.eps_mode in ("add", "max"),
                   "eps_mode must be add or max, got {}", self.eps_mode)
        check_axes_input(self, 1)
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x, axes = inputs
        ax = runtime_axes(axes, x.ndim)
        xf = x.astype(np.float64)
        ss = np.sum(xf * xf, axis=ax, keepdims=True)
        ss = ss + self.eps if self.eps_mode == "add" else np.maximum(ss, self.eps)
        with np.errstate(all="ignore"):
            return [(xf / np.sqrt(ss)).astype(x.dtype)]

def normalize_l2(data: Any, axes: Any, eps: float, eps_mode: str,
                 name: str | None = None) -> Node:
    """NormalizeL2-1: ``data`` divided by the L2 norm over ``axes``; ``eps`` is added to
    (``eps_mode`` "add") or is the lower bound of ("max") the sum of squares."""
    return set_name(NormalizeL2([to_output(data), axes_value(axes)], eps=float(eps),
                                eps_mode=eps_mode.lower()), name)

@onnx_rule("LpNormalization")
def _import_lp_normalization(ctx):
    x = ctx.inputs[0]
    axes = i64([ctx.attr("axis", -1)])
    p = ctx.attr("p", 2)
    # A zero norm gives 0, not NaN: the norm is bounded below by the smallest subnormal.
    tiny = float(np.finfo(np.float32).smallest_subnormal)
    if p == 2:
        return NormalizeL2([x, axes], eps=tiny, eps_mode="max")
    if p == 1:
        return Divide([x, Maximum([ReduceL1([x, axes], keep_dims=True), const_like(tiny, x)])])
    ctx.error(f"p={p} is not supported (only 1 and 2)")

@onnx_export(NormalizeL2)
def _export_normalize_l2(node, ectx):
    x = ectx.inputs(node)[0]
    axes = constant_axes(node)
    dt = node.get_output_element_type(0).dtype or np.float32
    ss, shifted, norm = ectx.fresh("sumsq"), ectx.fresh("sumsq_eps"), ectx.fresh("norm")
    if axes:
        ectx.add_reduce("ReduceSumSquare", x, [ss], axes, True)
    else:
        ectx.add_node("Mul", [x, x], [ss])
    eps = ectx.constant(np.asarray(node.eps, dt))
    ectx.add_node("Add" if node.eps_mode == "add" else "Max", [ss, eps], [shifted])
    ectx.add_node("Sqrt", [shifted], [norm])
    ectx.add_node("Div", [x, norm], ectx.outputs(node))
