"""MVN (OpenVINO opset6; MVN2, opset2's), and the ONNX normalizations imported as MVN compositions:
MeanVarianceNormalization, InstanceNormalization, LayerNormalization, RMSNormalization."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import OP_TYPES, Node
from ..base import normalize_axis, set_name, to_output
from ..elementwise import Add, Convert, Divide, Multiply, Sqrt, Subtract, const_like
from ..onnx_types import attribute_element_type
from ..reduction import ReduceMean
from ..registry import onnx_export, onnx_rule
from .common import (
    axes_value,
    check_axes_input,
    constant_axes,
    i64,
    onnx_axis,
    per_channel,
    runtime_axes,
    static_rank,
)


class MVN(Node):
    """(x - mean) / sqrt(var + eps) over the axes input (``INSIDE_SQRT``), or
    / (sqrt(var) + eps) (``OUTSIDE_SQRT``); without ``normalize_variance`` only x - mean."""

    type_name = "MVN"
    version = "opset6"
    ATTRS = {"normalize_variance": True, "eps": 1e-9, "eps_mode": "INSIDE_SQRT"}
    eps_mode: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, axes)")
        self.eps_mode = str(self.eps_mode).upper()
        self.check(self.eps_mode in ("INSIDE_SQRT", "OUTSIDE_SQRT"),
                   "eps_mode must be INSIDE_SQRT or OUTSIDE_SQRT, got {}", self.eps_mode)
        check_axes_input(self, 1)
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x, axes = inputs
        ax = runtime_axes(axes, x.ndim)
        xf = x.astype(np.float64)
        d = xf - np.mean(xf, axis=ax, keepdims=True)
        if self.normalize_variance:
            var = np.mean(d * d, axis=ax, keepdims=True)
            with np.errstate(all="ignore"):
                if self.eps_mode == "INSIDE_SQRT":
                    d = d / np.sqrt(var + self.eps)
                else:
                    d = d / (np.sqrt(var) + self.eps)
        return [d.astype(x.dtype)]

class MVN2(MVN):
    """MVN of opset2 (OpenVINO's MVN-0): one input; the axes are ``reduction_axes`` where
    given, else 1 (``across_channels``) or 2 up to the last; eps is added to the variance
    (v6's ``INSIDE_SQRT``, as OpenVINO's CPU plugin computes it)."""

    type_name = "MVN"
    version = "opset2"
    ATTRS = {"across_channels": False, "normalize_variance": True, "eps": 1e-9,
             "reduction_axes": []}
    eps_mode = "INSIDE_SQRT"

    def axes(self, rank: int) -> list[int]:
        """The normalized axes for data of rank ``rank``."""
        if self.reduction_axes:
            return sorted({normalize_axis(self, int(a), rank) for a in self.reduction_axes})
        return list(range(1 if self.across_channels else 2, rank))

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects one input (data)")
        data = self.get_input_partial_shape(0)
        if data.rank_is_static:
            self.axes(len(data))
        self.set_output_type(0, self.get_input_element_type(0), data)

    def evaluate(self, inputs):
        x = np.asarray(inputs[0])
        return super().evaluate([x, np.array(self.axes(x.ndim), np.int64)])


# The newer version stays the class ``netpass.ops.MVN`` names; IR reading picks the exact
# version by (type, opset).
OP_TYPES["MVN"] = MVN


def mvn(data: Any, axes: Any, normalize_variance: bool, eps: float, eps_mode: str,
        name: str | None = None) -> Node:
    """MVN-6: ``data`` minus its mean over ``axes``, divided by the standard deviation when
    ``normalize_variance``; ``eps`` is added inside the square root (``eps_mode``
    "inside_sqrt") or to it ("outside_sqrt")."""
    return set_name(MVN([to_output(data), axes_value(axes)],
                        normalize_variance=bool(normalize_variance), eps=float(eps),
                        eps_mode=eps_mode.upper()), name)

@onnx_rule("MeanVarianceNormalization")
def _import_mean_variance_normalization(ctx):
    # The ONNX definition divides by (std + 1e-9).
    axes = ctx.attr("axes", [0, 2, 3])
    return MVN([ctx.inputs[0], i64(axes)], normalize_variance=True, eps=1e-9,
               eps_mode="OUTSIDE_SQRT")

@onnx_rule("InstanceNormalization")
def _import_instance_norm(ctx):
    x, scale, bias = ctx.inputs[:3]
    rank = static_rank(ctx, x, "InstanceNormalization")
    if rank < 3:
        ctx.error(f"data must have rank >= 3, got {rank}")
    norm = MVN([x, i64(np.arange(2, rank))], normalize_variance=True,
               eps=float(ctx.attr("epsilon", 1e-5)), eps_mode="INSIDE_SQRT")
    scaled = Multiply([norm, per_channel(ctx, scale, rank)])
    return Add([scaled, per_channel(ctx, bias, rank)])

@onnx_rule("RMSNormalization", since=23)
def _import_rms_norm(ctx):
    """x / sqrt(mean(x^2 over the axes from ``axis`` on) + epsilon) * scale."""
    x, scale = ctx.inputs[0], ctx.inputs[1]
    if ctx.attr("stash_type", 1) != 1 and x.element_type.name != "f32":
        ctx.error("stash_type other than float is not supported")
    rank = static_rank(ctx, x, "RMSNormalization")
    axis = onnx_axis(ctx, rank)
    mean_sq = ReduceMean([Multiply([x, x]), i64(np.arange(axis, rank))], keep_dims=True)
    rms = Sqrt([Add([mean_sq, const_like(float(ctx.attr("epsilon", 1e-5)), x)])])
    return Multiply([Divide([x, rms]), scale])


@onnx_rule("LayerNormalization", since=1)  # onnxruntime's contrib op before ONNX's (same form)
@onnx_rule("LayerNormalization", since=17)
def _import_layer_norm(ctx):
    """MVN over the axes from ``axis`` on, times Scale plus B; the optional Mean and InvStdDev
    outputs come from reductions in the stash type."""
    x, scale, bias = ctx.inputs[0], ctx.input(1), ctx.input(2)
    rank = static_rank(ctx, x, "LayerNormalization")
    axis = onnx_axis(ctx, rank)
    eps = float(ctx.attr("epsilon", 1e-5))
    axes = i64(np.arange(axis, rank))
    y = MVN([x, axes], normalize_variance=True, eps=eps, eps_mode="INSIDE_SQRT").output(0)
    y = Multiply([y, scale]).output(0)
    if bias is not None:
        y = Add([y, bias]).output(0)
    if not any(ctx.proto.output[1:]):
        return y
    stash = attribute_element_type(ctx.attr("stash_type", 1), ctx)
    xs = x if x.element_type is stash else Convert([x], destination_type=stash).output(0)
    mean = ReduceMean([xs, axes], keep_dims=True).output(0)
    centered = Subtract([xs, mean]).output(0)
    var = ReduceMean([Multiply([centered, centered]), axes], keep_dims=True)
    std = Sqrt([Add([var, const_like(eps, xs)])])
    return [y, mean, Divide([const_like(1, xs), std]).output(0)]

@onnx_export(MVN)
def _export_mvn(node, ectx):
    x = ectx.inputs(node)[0]
    axes = constant_axes(node)
    dt = node.get_output_element_type(0).dtype or np.float32
    mean, d = ectx.fresh("mean"), ectx.fresh("centered")
    ectx.add_reduce("ReduceMean", x, [mean], axes, True)
    if not node.normalize_variance:
        ectx.add_node("Sub", [x, mean], ectx.outputs(node))
        return
    sq, var, denom = ectx.fresh("sq"), ectx.fresh("var"), ectx.fresh("denom")
    eps = ectx.constant(np.asarray(node.eps, dt))
    ectx.add_node("Sub", [x, mean], [d])
    ectx.add_node("Mul", [d, d], [sq])
    ectx.add_reduce("ReduceMean", sq, [var], axes, True)
    if node.eps_mode == "INSIDE_SQRT":
        shifted = ectx.fresh("var_eps")
        ectx.add_node("Add", [var, eps], [shifted])
        ectx.add_node("Sqrt", [shifted], [denom])
    else:
        std = ectx.fresh("std")
        ectx.add_node("Sqrt", [var], [std])
        ectx.add_node("Add", [std, eps], [denom])
    ectx.add_node("Div", [d, denom], ectx.outputs(node))
