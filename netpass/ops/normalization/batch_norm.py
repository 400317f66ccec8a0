"""BatchNormInference (OpenVINO opset5) and GroupNormalization (opset12), with ONNX
BatchNormalization (inference and training mode) and GroupNormalization (opset 18 and 21)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import OP_TYPES, Node, Output
from ...core.shape import PartialShape
from ...errors import UnsupportedOpError
from ..base import merged_input_type, set_name, to_output
from ..elementwise import Add, Multiply, Subtract, const_like
from ..reduction import ReduceMean
from ..registry import onnx_export, onnx_rule
from .common import i64, merged_channels, per_channel, static_rank


class BatchNormInference(Node):
    """gamma * (x - mean) / sqrt(variance + epsilon) + beta per channel (dim 1).
    Inputs (opset5 order): data, gamma, beta, mean, variance."""

    type_name = "BatchNormInference"
    version = "opset5"
    ATTRS = {"epsilon": 1e-5}
    # The inputs (data, gamma, beta, mean, variance) are at these positions.
    ORDER = (0, 1, 2, 3, 4)
    INPUTS_TEXT = "(data, gamma, beta, mean, variance)"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 5, "expects inputs {}", self.INPUTS_TEXT)
        self.check(self.epsilon >= 0, "epsilon must be non-negative, got {}", self.epsilon)
        et = merged_input_type(self)
        d, g, b, m, v = self.ORDER
        data = self.get_input_partial_shape(d)
        channels = data[1] if data.rank_is_static and len(data) >= 2 else None
        self.check(not data.rank_is_static or len(data) >= 2,
                   "data must have rank >= 2, got {}", data)
        channels = merged_channels(self, channels, ((g, "gamma"), (b, "beta"), (m, "mean"),
                                                    (v, "variance")))
        if channels is not None:
            dims = list(data)
            dims[1] = channels
            data = PartialShape(dims)
        self.set_output_type(0, et, data)

    def evaluate(self, inputs):
        x, gamma, beta, mean, var = (inputs[i] for i in self.ORDER)
        shape = (-1,) + (1,) * (x.ndim - 2)
        c = lambda v: np.asarray(v, np.float64).reshape(shape)  # noqa: E731
        y = c(gamma) * (x - c(mean)) / np.sqrt(c(var) + self.epsilon) + c(beta)
        return [y.astype(x.dtype)]


class BatchNormInference1(BatchNormInference):
    """BatchNormInference v0 (opset1): v5's computation with the inputs in the order gamma,
    beta, data, mean, variance."""

    type_name = "BatchNormInference"
    version = "opset1"
    ORDER = (2, 0, 1, 3, 4)
    INPUTS_TEXT = "(gamma, beta, data, mean, variance)"


# The newer version stays the class ``netpass.ops.BatchNormInference`` names; IR reading picks
# the exact version by (type, opset).
OP_TYPES["BatchNormInference"] = BatchNormInference


class GroupNormalization(Node):
    """Channels (dim 1) split into ``num_groups`` groups; each group of each sample normalized
    to zero mean and unit variance (``epsilon`` inside the square root), then scaled and shifted
    per channel by the 1-D ``scale`` and ``bias`` inputs."""

    type_name = "GroupNormalization"
    version = "opset12"
    ATTRS = {"num_groups": 1, "epsilon": 1e-5}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 3, "expects inputs (data, scale, bias)")
        self.check(self.num_groups > 0, "num_groups must be positive, got {}", self.num_groups)
        et = merged_input_type(self)
        data = self.get_input_partial_shape(0)
        self.check(not data.rank_is_static or len(data) >= 2,
                   "data must have rank >= 2, got {}", data)
        channels = data[1] if data.rank_is_static else None
        channels = merged_channels(self, channels, ((1, "scale"), (2, "bias")))
        if channels is not None:
            self.check(not channels.is_static or channels.min % self.num_groups == 0,
                       "{} channels do not split into {} groups", channels, self.num_groups)
            data = PartialShape([data[0], channels, *data[2:]])
        self.set_output_type(0, et, data)

    def evaluate(self, inputs):
        x, scale, bias = inputs
        groups = x.reshape(x.shape[0], self.num_groups, -1).astype(np.float64)
        d = groups - groups.mean(axis=2, keepdims=True)
        y = (d / np.sqrt((d * d).mean(axis=2, keepdims=True) + self.epsilon)).reshape(x.shape)
        shape = (-1,) + (1,) * (x.ndim - 2)
        return [(y * scale.reshape(shape) + bias.reshape(shape)).astype(x.dtype)]

def batch_norm_inference(data: Any, gamma: Any, beta: Any, mean: Any, variance: Any,
                         epsilon: float, name: str | None = None) -> Node:
    """BatchNormInference-5: ``gamma * (data - mean) / sqrt(variance + epsilon) + beta``
    with the per-channel vectors (``[C]``, python values allowed) applied along dim 1 of
    ``data``."""
    x = to_output(data)
    rest = [to_output(v) if isinstance(v, (Node, Output)) else const_like(v, x)
            for v in (gamma, beta, mean, variance)]
    return set_name(BatchNormInference([x] + rest, epsilon=float(epsilon)), name)


def group_normalization(data: Any, scale: Any, bias: Any, num_groups: int, epsilon: float,
                        name: str | None = None) -> Node:
    """GroupNormalization-12: ``data`` ``[N, C, ...]`` normalized over each of ``num_groups``
    channel groups (mean and variance per sample and group, ``epsilon`` added to the variance),
    then ``* scale + bias`` per channel (``[C]``)."""
    x = to_output(data)
    sb = [to_output(v) if isinstance(v, (Node, Output)) else const_like(v, x)
          for v in (scale, bias)]
    return set_name(GroupNormalization([x] + sb, num_groups=int(num_groups),
                                       epsilon=float(epsilon)), name)

@onnx_rule("BatchNormalization")
def _import_batch_norm(ctx):
    if ctx.attr("training_mode", 0):
        return _batch_norm_training(ctx)
    if ctx.opset < 9 and not ctx.attr("spatial", 1):
        ctx.error("spatial=0 is not supported")
    if any(ctx.proto.output[1:]):
        ctx.error("running statistics outputs are not supported")
    x, scale, bias, mean, var = ctx.inputs[:5]
    return BatchNormInference([x, scale, bias, mean, var], epsilon=float(ctx.attr("epsilon", 1e-5)))


def _batch_norm_training(ctx: Any) -> list[Output]:
    """BatchNormalization-14+ in training mode: normalized by the batch's own mean and
    (population) variance per channel; the running statistics move towards them by
    ``1 - momentum``. Outputs Y, running_mean, running_var."""
    x, scale, bias, mean, var = ctx.inputs[:5]
    rank = static_rank(ctx, x, "BatchNormalization in training mode")
    if rank < 2:
        ctx.error(f"data must have rank >= 2, got {rank}")
    axes = i64([0, *range(2, rank)])
    batch_mean = ReduceMean([x, axes], keep_dims=False).output(0)
    centered = Subtract([x, per_channel(ctx, batch_mean, rank)])
    batch_var = ReduceMean([Multiply([centered, centered]), axes], keep_dims=False).output(0)
    y = BatchNormInference([x, scale, bias, batch_mean, batch_var],
                           epsilon=float(ctx.attr("epsilon", 1e-5))).output(0)
    momentum = float(ctx.attr("momentum", 0.9))
    keep = to_output(np.asarray(momentum, dtype=x.element_type.dtype))
    take = to_output(np.asarray(1 - momentum, dtype=x.element_type.dtype))
    running = [Add([Multiply([old, keep]), Multiply([new, take])]).output(0)
               for old, new in ((mean, batch_mean), (var, batch_var))]
    return [y, *running]

def _group_norm(ctx: Any, per_group: bool) -> Output:
    x, scale, bias = ctx.inputs[:3]
    groups = ctx.attr("num_groups", 0)
    if ctx.attr("stash_type", 1) != 1 and x.element_type.name != "f32":
        ctx.error("stash_type other than float is not supported")
    if per_group:
        # Opset 18: one scale and bias per group, repeated over the group's channels.
        channels = x.partial_shape[1] if x.partial_shape.rank_is_static else None
        if channels is None or not channels.is_static or scale.value is None or bias.value is None:
            ctx.error("per-group scale and bias need constants and a static channel count")
        reps = channels.min // groups
        scale, bias = (to_output(np.repeat(v.value, reps), element_type=v.element_type)
                       for v in (scale, bias))
    return GroupNormalization([x, scale, bias], num_groups=groups,
                              epsilon=float(ctx.attr("epsilon", 1e-5))).output(0)


@onnx_rule("GroupNormalization", since=18)
def _import_group_norm_18(ctx):
    return _group_norm(ctx, per_group=True)


@onnx_rule("GroupNormalization", since=21)
def _import_group_norm(ctx):
    return _group_norm(ctx, per_group=False)

@onnx_export(BatchNormInference)
def _export_batch_norm(node, ectx):
    ectx.add_node("BatchNormalization", ectx.inputs(node), ectx.outputs(node),
                  epsilon=float(node.epsilon))

@onnx_export(GroupNormalization)
def _export_group_norm(node, ectx):
    # ONNX GroupNormalization with per-channel scale arrives in opset 21: reshape to
    # [N, groups, -1], normalize the last axis, reshape back, scale and shift per channel.
    x, scale, bias = ectx.inputs(node)
    rank = node.get_input_partial_shape(0).rank
    if not rank.is_static:
        raise UnsupportedOpError(node.type_name, "", 17, node.friendly_name,
                                 "ONNX export needs data of known rank")
    dt = node.get_output_element_type(0).dtype
    n = [ectx.fresh(h) for h in ("shape", "grouped", "mean", "centered", "sq", "var", "var_eps",
                                 "std", "normed", "restored", "scale_c", "bias_c", "scaled")]
    ectx.add_node("Shape", [x], [n[0]])
    ectx.add_node("Reshape", [x, ectx.constant(np.array([0, node.num_groups, -1], np.int64))],
                  [n[1]])
    ectx.add_reduce("ReduceMean", n[1], [n[2]], [2], True)
    ectx.add_node("Sub", [n[1], n[2]], [n[3]])
    ectx.add_node("Mul", [n[3], n[3]], [n[4]])
    ectx.add_reduce("ReduceMean", n[4], [n[5]], [2], True)
    ectx.add_node("Add", [n[5], ectx.constant(np.asarray(node.epsilon, dt))], [n[6]])
    ectx.add_node("Sqrt", [n[6]], [n[7]])
    ectx.add_node("Div", [n[3], n[7]], [n[8]])
    ectx.add_node("Reshape", [n[8], n[0]], [n[9]])
    per_channel = ectx.constant(np.array([-1] + [1] * (rank.min - 2), np.int64))
    ectx.add_node("Reshape", [scale, per_channel], [n[10]])
    ectx.add_node("Reshape", [bias, per_channel], [n[11]])
    ectx.add_node("Mul", [n[9], n[10]], [n[12]])
    ectx.add_node("Add", [n[12], n[11]], ectx.outputs(node))
