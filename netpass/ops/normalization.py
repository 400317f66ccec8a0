"""Normalizations: Softmax, LogSoftmax, MVN, BatchNormInference, GroupNormalization,
NormalizeL2; ONNX LayerNormalization, InstanceNormalization, MeanVarianceNormalization,
LpNormalization and RMSNormalization are imported as compositions of these (as OpenVINO's ONNX
frontend does)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..errors import UnsupportedOpError
from .base import merged_input_type, normalize_axis, set_name, to_output
from .elementwise import (
    Add,
    Convert,
    Divide,
    Exp,
    Log,
    Maximum,
    Multiply,
    Sqrt,
    Subtract,
    const_like,
)
from .movement import reshape, unsqueeze
from .onnx_types import attribute_element_type
from .reduction import ReduceL1, ReduceMax, ReduceMean, ReduceSum
from .registry import onnx_export, onnx_rule
from .shape_ops import shape_of

__all__ = ["softmax", "log_softmax", "mvn", "batch_norm_inference", "normalize_l2",
           "group_normalization"]


def _axes_of(node: Node, i: int, rank: int) -> tuple[int, ...] | None:
    value = node.input_constant(i)
    if value is None:
        return None
    flat = np.asarray(value).reshape(-1)
    return tuple(sorted({normalize_axis(node, int(a), rank) for a in flat}))


def _runtime_axes(axes: np.ndarray, rank: int) -> tuple[int, ...]:
    return tuple(sorted({int(a) % max(rank, 1) for a in np.asarray(axes).reshape(-1)}))


def _check_axes_input(node: Node, i: int) -> None:
    ps = node.get_input_partial_shape(i)
    et = node.get_input_element_type(i)
    node.check(not ps.rank_is_static or len(ps) <= 1, "axes (input {}) must be 1-D, got {}", i, ps)
    node.check(et.is_dynamic or et.is_integral, "axes (input {}) must be integers, got {}", i, et)
    rank = node.get_input_partial_shape(0)
    if rank.rank_is_static:
        _axes_of(node, i, len(rank))  # range check


class _AxisOp(Node):
    """One data input, an ``axis`` attribute, same type and shape out."""

    ATTRS = {"axis": 1}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        ps = self.get_input_partial_shape(0)
        if ps.rank_is_static:
            normalize_axis(self, self.axis, len(ps))
        self.set_output_type(0, self.get_input_element_type(0), ps)


def _shifted(x: np.ndarray, axis: int) -> np.ndarray:
    # Computed in the data's own type, as OpenVINO's reference does (f16 results then match).
    return x - np.max(x, axis=axis, keepdims=True, initial=-np.inf)


class Softmax(_AxisOp):
    """exp(x) / sum(exp(x)) along ``axis`` (negative counts from the end)."""

    type_name = "Softmax"
    version = "opset8"

    def evaluate(self, inputs):
        x = inputs[0]
        axis = self.axis % max(x.ndim, 1)
        e = np.exp(_shifted(x, axis))
        return [(e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype)]


class LogSoftmax(_AxisOp):
    """x - log(sum(exp(x))) along ``axis``."""

    type_name = "LogSoftmax"
    version = "opset5"

    def evaluate(self, inputs):
        x = inputs[0]
        axis = self.axis % max(x.ndim, 1)
        shifted = _shifted(x, axis)
        with np.errstate(divide="ignore"):
            out = shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
        return [out.astype(x.dtype)]


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
        _check_axes_input(self, 1)
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x, axes = inputs
        ax = _runtime_axes(axes, x.ndim)
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


class BatchNormInference(Node):
    """gamma * (x - mean) / sqrt(variance + epsilon) + beta per channel (dim 1).
    Inputs (opset5 order): data, gamma, beta, mean, variance."""

    type_name = "BatchNormInference"
    version = "opset5"
    ATTRS = {"epsilon": 1e-5}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 5, "expects inputs (data, gamma, beta, mean, variance)")
        self.check(self.epsilon >= 0, "epsilon must be non-negative, got {}", self.epsilon)
        et = merged_input_type(self)
        data = self.get_input_partial_shape(0)
        channels = data[1] if data.rank_is_static and len(data) >= 2 else None
        self.check(not data.rank_is_static or len(data) >= 2,
                   "data must have rank >= 2, got {}", data)
        names = ("gamma", "beta", "mean", "variance")
        for i, what in enumerate(names, start=1):
            ps = self.get_input_partial_shape(i)
            if not ps.rank_is_static:
                continue
            self.check(len(ps) == 1, "{} (input {}) must be 1-D, got {}", what, i, ps)
            if channels is not None:
                merged = channels.merge(ps[0])
                self.check(merged is not None,
                           "{} (input {}) has {} channels, data has {}", what, i, ps[0], channels)
                channels = merged
        if channels is not None:
            dims = list(data)
            dims[1] = channels
            data = PartialShape(dims)
        self.set_output_type(0, et, data)

    def evaluate(self, inputs):
        x, gamma, beta, mean, var = inputs
        shape = (-1,) + (1,) * (x.ndim - 2)
        c = lambda v: np.asarray(v, np.float64).reshape(shape)  # noqa: E731
        y = c(gamma) * (x - c(mean)) / np.sqrt(c(var) + self.epsilon) + c(beta)
        return [y.astype(x.dtype)]


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
        for i, what in ((1, "scale"), (2, "bias")):
            ps = self.get_input_partial_shape(i)
            if not ps.rank_is_static:
                continue
            self.check(len(ps) == 1, "{} (input {}) must be 1-D, got {}", what, i, ps)
            if channels is not None:
                merged = channels.merge(ps[0])
                self.check(merged is not None,
                           "{} (input {}) has {} channels, data has {}", what, i, ps[0], channels)
                channels = merged
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
        _check_axes_input(self, 1)
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x, axes = inputs
        ax = _runtime_axes(axes, x.ndim)
        xf = x.astype(np.float64)
        ss = np.sum(xf * xf, axis=ax, keepdims=True)
        ss = ss + self.eps if self.eps_mode == "add" else np.maximum(ss, self.eps)
        with np.errstate(all="ignore"):
            return [(xf / np.sqrt(ss)).astype(x.dtype)]


# -- factories ---------------------------------------------------------------------------------

def _axes_value(axes: Any) -> Output:
    if isinstance(axes, (Node, Output)):
        return to_output(axes)
    return to_output(np.asarray(axes, dtype=np.int64).reshape(-1))


def softmax(data: Any, axis: int, name: str | None = None) -> Node:
    """Softmax-8: ``exp(x) / sum(exp(x))`` along ``axis`` (negative from the end), computed
    stably."""
    return set_name(Softmax([to_output(data)], axis=int(axis)), name)


def log_softmax(data: Any, axis: int, name: str | None = None) -> Node:
    """LogSoftmax-5: ``x - log(sum(exp(x)))`` along ``axis``, computed stably."""
    return set_name(LogSoftmax([to_output(data)], axis=int(axis)), name)


def mvn(data: Any, axes: Any, normalize_variance: bool, eps: float, eps_mode: str,
        name: str | None = None) -> Node:
    """MVN-6: ``data`` minus its mean over ``axes``, divided by the standard deviation when
    ``normalize_variance``; ``eps`` is added inside the square root (``eps_mode``
    "inside_sqrt") or to it ("outside_sqrt")."""
    return set_name(MVN([to_output(data), _axes_value(axes)],
                        normalize_variance=bool(normalize_variance), eps=float(eps),
                        eps_mode=eps_mode.upper()), name)


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


def normalize_l2(data: Any, axes: Any, eps: float, eps_mode: str,
                 name: str | None = None) -> Node:
    """NormalizeL2-1: ``data`` divided by the L2 norm over ``axes``; ``eps`` is added to
    (``eps_mode`` "add") or is the lower bound of ("max") the sum of squares."""
    return set_name(NormalizeL2([to_output(data), _axes_value(axes)], eps=float(eps),
                                eps_mode=eps_mode.lower()), name)


# -- ONNX import ------------------------------------------------------------------------------

def _i64(values: Any) -> Output:
    return to_output(np.asarray(values, dtype=np.int64))


def _static_rank(ctx: Any, x: Output, what: str) -> int:
    ps = x.partial_shape
    if not ps.rank_is_static:
        ctx.error(f"{what} needs data of known rank")
    return len(ps)


def _coerced(ctx: Any, cls: type) -> Output:
    """ONNX Softmax/LogSoftmax before opset 13: flatten to 2-D at ``axis``, normalize each row."""
    x = ctx.inputs[0]
    rank = _static_rank(ctx, x, ctx.op_type)
    axis = ctx.attr("axis", 1)
    axis = axis + rank if axis < 0 else axis
    if axis >= rank - 1:
        return cls([x], axis=max(rank - 1, 0)).output(0)
    tail = x.partial_shape[axis:]
    n = int(np.prod(tail.to_shape())) if tail.is_static else 0
    if n > 0:
        rows = reshape(x, [-1, n], special_zero=False)
        return reshape(cls([rows], axis=1), shape_of(x), special_zero=False).output(0)
    # Same values without reshaping: normalize over all axes from ``axis`` on at once.
    axes = _i64(np.arange(axis, rank))
    shifted = Subtract([x, ReduceMax([x, axes], keep_dims=True)]).output(0)
    total = ReduceSum([Exp([shifted]), axes], keep_dims=True).output(0)
    if cls is Softmax:
        return Divide([Exp([shifted]), total]).output(0)
    return Subtract([shifted, Log([total])]).output(0)


@onnx_rule("Softmax")
def _import_softmax_2d(ctx):
    return _coerced(ctx, Softmax)


@onnx_rule("Softmax", since=13)
def _import_softmax(ctx):
    return Softmax([ctx.inputs[0]], axis=ctx.attr("axis", -1))


@onnx_rule("LogSoftmax")
def _import_log_softmax_2d(ctx):
    return _coerced(ctx, LogSoftmax)


@onnx_rule("LogSoftmax", since=13)
def _import_log_softmax(ctx):
    return LogSoftmax([ctx.inputs[0]], axis=ctx.attr("axis", -1))


@onnx_rule("MeanVarianceNormalization")
def _import_mean_variance_normalization(ctx):
    # The ONNX definition divides by (std + 1e-9).
    axes = ctx.attr("axes", [0, 2, 3])
    return MVN([ctx.inputs[0], _i64(axes)], normalize_variance=True, eps=1e-9,
               eps_mode="OUTSIDE_SQRT")


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
    rank = _static_rank(ctx, x, "BatchNormalization in training mode")
    if rank < 2:
        ctx.error(f"data must have rank >= 2, got {rank}")
    axes = _i64([0, *range(2, rank)])
    batch_mean = ReduceMean([x, axes], keep_dims=False).output(0)
    centered = Subtract([x, _per_channel(ctx, batch_mean, rank)])
    batch_var = ReduceMean([Multiply([centered, centered]), axes], keep_dims=False).output(0)
    y = BatchNormInference([x, scale, bias, batch_mean, batch_var],
                           epsilon=float(ctx.attr("epsilon", 1e-5))).output(0)
    momentum = float(ctx.attr("momentum", 0.9))
    keep = to_output(np.asarray(momentum, dtype=x.element_type.dtype))
    take = to_output(np.asarray(1 - momentum, dtype=x.element_type.dtype))
    running = [Add([Multiply([old, keep]), Multiply([new, take])]).output(0)
               for old, new in ((mean, batch_mean), (var, batch_var))]
    return [y, *running]


def _per_channel(ctx: Any, v: Output, rank: int) -> Output:
    """A [C] tensor shaped [C, 1, ..., 1] to broadcast over data of ``rank`` (N, C, ...)."""
    shape = (-1,) + (1,) * (rank - 2)
    if v.value is not None:
        return to_output(v.value.reshape(shape), element_type=v.element_type)
    return unsqueeze(v, list(range(1, rank - 1))).output(0)


@onnx_rule("InstanceNormalization")
def _import_instance_norm(ctx):
    x, scale, bias = ctx.inputs[:3]
    rank = _static_rank(ctx, x, "InstanceNormalization")
    if rank < 3:
        ctx.error(f"data must have rank >= 3, got {rank}")
    norm = MVN([x, _i64(np.arange(2, rank))], normalize_variance=True,
               eps=float(ctx.attr("epsilon", 1e-5)), eps_mode="INSIDE_SQRT")
    scaled = Multiply([norm, _per_channel(ctx, scale, rank)])
    return Add([scaled, _per_channel(ctx, bias, rank)])


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


@onnx_rule("RMSNormalization", since=23)
def _import_rms_norm(ctx):
    """x / sqrt(mean(x^2 over the axes from ``axis`` on) + epsilon) * scale."""
    x, scale = ctx.inputs[0], ctx.inputs[1]
    if ctx.attr("stash_type", 1) != 1 and x.element_type.name != "f32":
        ctx.error("stash_type other than float is not supported")
    rank = _static_rank(ctx, x, "RMSNormalization")
    axis = ctx.attr("axis", -1)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        ctx.error(f"axis {ctx.attr('axis', -1)} out of range for rank {rank}")
    mean_sq = ReduceMean([Multiply([x, x]), _i64(np.arange(axis, rank))], keep_dims=True)
    rms = Sqrt([Add([mean_sq, const_like(float(ctx.attr("epsilon", 1e-5)), x)])])
    return Multiply([Divide([x, rms]), scale])


@onnx_rule("LayerNormalization", since=17)
def _import_layer_norm(ctx):
    """MVN over the axes from ``axis`` on, times Scale plus B; the optional Mean and InvStdDev
    outputs come from reductions in the stash type."""
    x, scale, bias = ctx.inputs[0], ctx.input(1), ctx.input(2)
    rank = _static_rank(ctx, x, "LayerNormalization")
    axis = ctx.attr("axis", -1)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        ctx.error(f"axis {ctx.attr('axis', -1)} out of range for rank {rank}")
    eps = float(ctx.attr("epsilon", 1e-5))
    axes = _i64(np.arange(axis, rank))
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


@onnx_rule("LpNormalization")
def _import_lp_normalization(ctx):
    x = ctx.inputs[0]
    axes = _i64([ctx.attr("axis", -1)])
    p = ctx.attr("p", 2)
    # A zero norm gives 0, not NaN: the norm is bounded below by the smallest subnormal.
    tiny = float(np.finfo(np.float32).smallest_subnormal)
    if p == 2:
        return NormalizeL2([x, axes], eps=tiny, eps_mode="max")
    if p == 1:
        return Divide([x, Maximum([ReduceL1([x, axes], keep_dims=True), const_like(tiny, x)])])
    ctx.error(f"p={p} is not supported (only 1 and 2)")


# -- ONNX export (opset 17) -------------------------------------------------------------------

def _export_axis(onnx_op: str):
    def rule(node, ectx):
        ectx.add_node(onnx_op, ectx.inputs(node), ectx.outputs(node), axis=int(node.axis))
    return rule


onnx_export(Softmax)(_export_axis("Softmax"))
onnx_export(LogSoftmax)(_export_axis("LogSoftmax"))


@onnx_export(BatchNormInference)
def _export_batch_norm(node, ectx):
    ectx.add_node("BatchNormalization", ectx.inputs(node), ectx.outputs(node),
                  epsilon=float(node.epsilon))


def _constant_axes(node: Node) -> list[int]:
    axes = node.input_constant(1)
    if axes is None:
        raise UnsupportedOpError(node.type_name, "", 17, node.friendly_name,
                                 "ONNX opset 17 needs constant axes")
    return [int(a) for a in np.asarray(axes).reshape(-1)]


@onnx_export(MVN)
def _export_mvn(node, ectx):
    x = ectx.inputs(node)[0]
    axes = _constant_axes(node)
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


@onnx_export(NormalizeL2)
def _export_normalize_l2(node, ectx):
    x = ectx.inputs(node)[0]
    axes = _constant_axes(node)
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
