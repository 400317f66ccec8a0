"""Activations: Relu, Sigmoid, Tanh, SoftSign, HSwish, HSigmoid, Mish, Gelu, Clamp, Elu, SoftPlus,
Swish, HardSigmoid, Selu, PRelu (ONNX's LeakyRelu, Celu, ThresholdedRelu, Shrink and Clip with
tensor bounds are imported as compositions)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.node import Node, Output
from ...core.shape import PartialShape
from ...errors import UnsupportedOpError
from ..base import UnaryElementwiseArithmetic, merged_input_type, set_name, to_output
from ..movement import unsqueeze
from ..registry import onnx_export, onnx_rule
from .arithmetic import Add, Divide, Maximum, Minimum, Multiply, Subtract
from .common import (
    _erf,
    _export_simple,
    _is_int,
    _like,
    _register_unary,
    _unary,
    _unary_factory,
    const_like,
)
from .logical import Greater, Less, Select

__all__ = ["relu", "prelu", "sigmoid", "tanh", "gelu", "clamp", "elu", "softplus", "swish",
           "hswish", "hsigmoid", "hard_sigmoid", "selu", "softsign", "mish"]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


Relu = _unary("Relu", lambda x: np.maximum(x, 0), "max(x, 0).")
Sigmoid = _unary("Sigmoid", _sigmoid, "1 / (1 + exp(-x)), computed without overflow.")
Tanh = _unary("Tanh", np.tanh)
SoftSign = _unary("SoftSign", lambda x: x / (1 + np.abs(x)), "x / (1 + |x|).")
HSwish = _unary("HSwish", lambda x: x * np.clip(x + 3, 0, 6) / 6, "x * relu6(x + 3) / 6.")
HSigmoid = _unary("HSigmoid", lambda x: np.clip(x + 3, 0, 6) / 6, "relu6(x + 3) / 6.")
Mish = _unary("Mish", lambda x: x * np.tanh(np.logaddexp(np.zeros((), x.dtype), x)),
              "x * tanh(softplus(x)).")


_cls: type[Node]  # (the registration loops below share it)
for _cls, _ver in ((SoftSign, "opset9"), (HSwish, "opset4"), (HSigmoid, "opset5"),
                   (Mish, "opset4")):
    _cls.version = _ver


class Gelu(UnaryElementwiseArithmetic):
    """x * Phi(x), exactly (``ERF``) or by the tanh approximation (``TANH``)."""

    type_name = "Gelu"
    version = "opset7"
    IR_VERSIONS = ("opset2", "opset7")  # v2: no attribute, the erf form (v7's default)
    ATTRS = {"approximation_mode": "ERF"}
    approximation_mode: Any

    def infer_types(self) -> None:
        self.approximation_mode = str(self.approximation_mode).upper()
        self.check(self.approximation_mode in ("ERF", "TANH"),
                   "approximation_mode must be ERF or TANH, got {}", self.approximation_mode)
        super().infer_types()

    def evaluate(self, inputs):
        x = inputs[0]
        xf = x.astype(np.float64)
        if self.approximation_mode == "TANH":
            y = 0.5 * xf * (1 + np.tanh(math.sqrt(2 / math.pi) * (xf + 0.044715 * xf ** 3)))
        else:
            y = 0.5 * xf * (1 + _erf(xf / math.sqrt(2)))
        return [y.astype(x.dtype)]


class _SameTypeUnary(Node):
    """Data (input 0) plus ``INPUTS`` - 1 scalar parameters; output has the data's type and
    shape."""

    INPUTS: tuple[str, ...] = ("data",)
    OPTIONAL = 0  # trailing inputs that may be left out

    def infer_types(self) -> None:
        n, full = self.get_input_size(), len(self.INPUTS)
        self.check(full - self.OPTIONAL <= n <= full, "expects inputs ({})", ', '.join(self.INPUTS))
        for i in range(1, n):
            ps = self.get_input_partial_shape(i)
            self.check(not ps.rank_is_static or all(d.max == 1 for d in ps),
                       "{} (input {}) must hold one element, got shape {}", self.INPUTS[i], i, ps)
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))


class Clamp(_SameTypeUnary):
    """Clip to [min, max]; for integer data min rounds up and max rounds down."""

    type_name = "Clamp"
    ATTRS = {"min": 0.0, "max": 0.0}

    def infer_types(self) -> None:
        self.check(self.min <= self.max, "min {} must not exceed max {}", self.min, self.max)
        super().infer_types()

    def evaluate(self, inputs):
        x = inputs[0]
        lo, hi = float(self.min), float(self.max)
        if _is_int(x):
            info = np.iinfo(x.dtype)
            lo = info.min if lo < info.min else int(math.ceil(lo))
            hi = info.max if hi > info.max else int(math.floor(hi))
            return [np.clip(x, lo, hi).astype(x.dtype)]
        return [np.clip(x, np.asarray(lo, x.dtype), np.asarray(hi, x.dtype))]


class Elu(_SameTypeUnary):
    """x if x > 0 else alpha * (exp(x) - 1)."""

    type_name = "Elu"
    ATTRS = {"alpha": 1.0}

    def evaluate(self, inputs):
        x = inputs[0]
        with np.errstate(all="ignore"):
            return [np.where(x > 0, x, self.alpha * np.expm1(x)).astype(x.dtype)]


class SoftPlus(_SameTypeUnary):
    """log(1 + exp(x)), computed without overflow."""

    type_name = "SoftPlus"
    version = "opset4"

    def evaluate(self, inputs):
        x = inputs[0]
        return [np.logaddexp(np.zeros((), x.dtype), x).astype(x.dtype)]


class Swish(_SameTypeUnary):
    """x * sigmoid(beta * x); optional scalar input beta (default 1)."""

    type_name = "Swish"
    version = "opset4"
    INPUTS = ("data", "beta")
    OPTIONAL = 1

    def evaluate(self, inputs):
        x = inputs[0]
        beta = np.asarray(inputs[1]).reshape(()) if len(inputs) > 1 else 1.0
        with np.errstate(all="ignore"):
            return [(x * _sigmoid(beta * x)).astype(x.dtype)]


class HardSigmoid(_SameTypeUnary):
    """max(0, min(1, alpha * x + beta)); alpha and beta are scalar inputs."""

    type_name = "HardSigmoid"
    INPUTS = ("data", "alpha", "beta")

    def evaluate(self, inputs):
        x, alpha, beta = inputs
        y = np.clip(np.asarray(alpha).reshape(()) * x + np.asarray(beta).reshape(()), 0, 1)
        return [y.astype(x.dtype)]


class Selu(_SameTypeUnary):
    """lambda * (x if x > 0 else alpha * (exp(x) - 1)); alpha and lambda are scalar inputs."""

    type_name = "Selu"
    INPUTS = ("data", "alpha", "lambda")

    def evaluate(self, inputs):
        x, alpha, lam = (np.asarray(v) for v in inputs)
        alpha, lam = alpha.reshape(()), lam.reshape(())
        with np.errstate(all="ignore"):
            return [(lam * np.where(x > 0, x, alpha * np.expm1(x))).astype(x.dtype)]


class PRelu(Node):
    """x if x >= 0 else slope * x. A 1-D slope as long as the channel dim (dim 1) of data of rank
    >= 2 applies per channel (OpenVINO's rule); any other slope broadcasts numpy-style."""

    type_name = "PRelu"

    @staticmethod
    def per_channel(data: tuple, slope: tuple) -> bool:
        """Whether a slope of shape ``slope`` applies per channel to data of shape ``data``
        (concrete shapes; the runtime's rule too)."""
        return len(slope) == 1 and len(data) >= 2 and slope[0] == data[1] and slope[0] != 1

    @staticmethod
    def _per_channel(data: PartialShape, slope: PartialShape) -> bool:
        if not (data.rank_is_static and slope.rank_is_static) or len(slope) != 1 or len(data) < 2:
            return False
        n = slope[0]
        return n.is_static and n.min != 1 and data[1].is_static and data[1].min == n.min

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, slope)")
        et = merged_input_type(self)
        data, slope = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        if self._per_channel(data, slope):
            out = data
        else:
            merged = data.broadcast_merge(slope)
            if merged is None or (data.rank_is_static and merged.rank_is_static
                                  and len(merged) != len(data)):
                self.fail("slope shape {} does not broadcast to data shape {}", slope, data)
            out = merged
        self.set_output_type(0, et, out)

    def evaluate(self, inputs):
        x, slope = inputs
        if self.per_channel(x.shape, slope.shape):
            slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))
        return [np.where(x >= 0, x, slope * x).astype(x.dtype, copy=False)]


relu = _unary_factory(Relu)
sigmoid = _unary_factory(Sigmoid)
tanh = _unary_factory(Tanh)
softplus = _unary_factory(SoftPlus)
hswish = _unary_factory(HSwish)
hsigmoid = _unary_factory(HSigmoid)
softsign = _unary_factory(SoftSign)
mish = _unary_factory(Mish)


def prelu(data: Any, slope: Any, name: str | None = None) -> Node:
    """PRelu-1: ``x if x >= 0 else slope * x``. A 1-D ``slope`` as long as dim 1 of ``data`` (rank
    >= 2) applies per channel, as OpenVINO does; any other slope broadcasts numpy-style."""
    x = to_output(data)
    return set_name(PRelu([x, _like(slope, x)]), name)


def gelu(data: Any, approximation_mode: str = "erf", name: str | None = None) -> Node:
    """Gelu-7: ``x * Phi(x)`` for every element of ``data``, exactly with the error function
    (``approximation_mode`` "erf") or by the tanh approximation ("tanh")."""
    return set_name(Gelu([to_output(data)], approximation_mode=approximation_mode.upper()), name)


def clamp(data: Any, min_value: float, max_value: float, name: str | None = None) -> Node:
    """Clamp-1: every element of ``data`` clipped to ``[min_value, max_value]`` (for integer data
    the bounds round inwards)."""
    return set_name(Clamp([to_output(data)], min=float(min_value), max=float(max_value)), name)


def elu(data: Any, alpha: float, name: str | None = None) -> Node:
    """Elu-1: ``x if x > 0 else alpha * (exp(x) - 1)`` for every element of ``data``."""
    return set_name(Elu([to_output(data)], alpha=float(alpha)), name)


def swish(data: Any, beta: Any = None, name: str | None = None) -> Node:
    """Swish-4: ``x * sigmoid(beta * x)`` for every element of ``data``; ``beta`` (a scalar or
    scalar graph value) defaults to 1."""
    x = to_output(data)
    inputs = [x] if beta is None else [x, _like(beta, x)]
    return set_name(Swish(inputs), name)


def hard_sigmoid(data: Any, alpha: Any, beta: Any, name: str | None = None) -> Node:
    """HardSigmoid-1: ``max(0, min(1, alpha * x + beta))`` for every element of ``data``
    (``alpha``, ``beta``: scalars or scalar graph values)."""
    x = to_output(data)
    return set_name(HardSigmoid([x, _like(alpha, x), _like(beta, x)]), name)


def selu(data: Any, alpha: Any, lambda_value: Any, name: str | None = None) -> Node:
    """Selu-1: ``lambda * (x if x > 0 else alpha * (exp(x) - 1))`` for every element of ``data``
    (``alpha``, ``lambda_value``: scalars or scalar graph values)."""
    x = to_output(data)
    return set_name(Selu([x, _like(alpha, x), _like(lambda_value, x)]), name)


for _op, _cls in (("Relu", Relu), ("Sigmoid", Sigmoid), ("Tanh", Tanh), ("Softplus", SoftPlus),
                  ("Softsign", SoftSign), ("HardSwish", HSwish)):
    _register_unary(_op, _cls)


@onnx_rule("Mish", since=18)
def _import_mish(ctx):
    return Mish([ctx.inputs[0]])


@onnx_rule("PRelu")
def _import_prelu(ctx):
    x, slope = ctx.inputs[0], ctx.inputs[1]
    if ctx.opset < 7:
        # PRelu-1 and -6 apply a 1-D slope per channel (dim 1), as netpass's PRelu does.
        return PRelu([x, slope])
    xs, ss = x.partial_shape, slope.partial_shape
    if ss.rank_is_static and len(ss) == 1 and not (ss[0].is_static and ss[0].min == 1):
        # ONNX aligns a 1-D slope with the last axis; OpenVINO's PRelu would read a slope as long
        # as dim 1 per channel. Give the slope data's rank so both agree on numpy broadcasting.
        if not xs.rank_is_static:
            ctx.error("a 1-D slope needs data of known rank")
        if len(xs) > 2:
            lead = len(xs) - 1
            if slope.value is not None:
                slope = to_output(slope.value.reshape((1,) * lead + slope.value.shape),
                                  element_type=slope.element_type)
            else:
                slope = unsqueeze(slope, list(range(lead))).output(0)
    return PRelu([x, slope])


@onnx_rule("LeakyRelu")
def _import_leaky_relu(ctx):
    x = ctx.inputs[0]
    return PRelu([x, const_like(ctx.attr("alpha", 0.01), x)])


@onnx_rule("Elu")
def _import_elu(ctx):
    return Elu([ctx.inputs[0]], alpha=float(ctx.attr("alpha", 1.0)))


@onnx_rule("Selu")
def _import_selu(ctx):
    x = ctx.inputs[0]
    return Selu([x, const_like(ctx.attr("alpha", 1.67326319217681884765625), x),
                 const_like(ctx.attr("gamma", 1.05070102214813232421875), x)])


@onnx_rule("HardSigmoid")
def _import_hard_sigmoid(ctx):
    x = ctx.inputs[0]
    return HardSigmoid([x, const_like(ctx.attr("alpha", 0.2), x),
                        const_like(ctx.attr("beta", 0.5), x)])


@onnx_rule("SwiGLU", since=28)
def _import_swiglu(ctx):
    """``Swish_alpha(A) * B``: the gated activation of Llama-style MLPs."""
    a, b = ctx.inputs[:2]
    alpha = ctx.attr("alpha", 1.0)
    gate = Swish([a]) if alpha == 1.0 else Swish([a, const_like(alpha, a)])
    return Multiply([gate.output(0), b])


@onnx_rule("Swish")
def _import_swish(ctx):
    x = ctx.inputs[0]
    alpha = float(ctx.attr("alpha", 1.0))
    return Swish([x]) if alpha == 1.0 else Swish([x, const_like(alpha, x)])


@onnx_rule("Celu", since=12)
def _import_celu(ctx):
    # alpha * Elu(x / alpha) with Elu's alpha 1 is max(0, x) + min(0, alpha * (exp(x/alpha) - 1)).
    x = ctx.inputs[0]
    alpha = const_like(ctx.attr("alpha", 1.0), x)
    return Multiply([Elu([Divide([x, alpha], m_pythondiv=False)], alpha=1.0), alpha])


@onnx_rule("ThresholdedRelu", since=10)
def _import_thresholded_relu(ctx):
    x = ctx.inputs[0]
    return Select([Greater([x, const_like(ctx.attr("alpha", 1.0), x)]), x, const_like(0, x)])


@onnx_rule("Shrink", since=9)
def _import_shrink(ctx):
    x = ctx.inputs[0]
    lambd, bias = float(ctx.attr("lambd", 0.5)), float(ctx.attr("bias", 0.0))
    above = Select([Greater([x, const_like(lambd, x)]), Subtract([x, const_like(bias, x)]),
                    const_like(0, x)])
    return Select([Less([x, const_like(-lambd, x)]), Add([x, const_like(bias, x)]), above])


@onnx_rule("Gelu", since=20)
def _import_gelu(ctx):
    mode = ctx.attr("approximate", "none")
    if mode not in ("none", "tanh"):
        ctx.error(f"approximate={mode!r} is not supported")
    return Gelu([ctx.inputs[0]], approximation_mode="TANH" if mode == "tanh" else "ERF")


def _clip(x: Output, lo: Any, hi: Any) -> Output:
    """Clamp when both bounds (Outputs, numbers or None) are known, else Maximum/Minimum."""
    def number(v: Any, missing: float) -> float | None:
        if v is None:
            return missing
        value = v.value if isinstance(v, Output) else np.asarray(v)
        return None if value is None or value.size != 1 else float(value.reshape(()))
    lo_f, hi_f = number(lo, -math.inf), number(hi, math.inf)
    if lo_f is not None and hi_f is not None and lo_f <= hi_f:
        return Clamp([x], min=lo_f, max=hi_f).output(0)
    out = x
    if lo is not None:
        out = Maximum([out, lo if isinstance(lo, Output) else const_like(lo, x)]).output(0)
    if hi is not None:
        out = Minimum([out, hi if isinstance(hi, Output) else const_like(hi, x)]).output(0)
    return out


@onnx_rule("Clip")
def _import_clip_attrs(ctx):
    return _clip(ctx.inputs[0], ctx.attr("min", -3.4028234663852886e38),
                 ctx.attr("max", 3.4028234663852886e38))


@onnx_rule("Clip", since=11)
def _import_clip(ctx):
    return _clip(ctx.inputs[0], ctx.input(1), ctx.input(2))


for _cls, _op in ((Relu, "Relu"), (Sigmoid, "Sigmoid"), (Tanh, "Tanh"), (SoftPlus, "Softplus"),
                  (SoftSign, "Softsign"), (HSwish, "HardSwish")):
    onnx_export(_cls)(_export_simple(_op))


@onnx_export(PRelu)
def _export_prelu(node, ectx):
    x, slope = ectx.inputs(node)
    data, sps = node.get_input_partial_shape(0), node.get_input_partial_shape(1)
    if node._per_channel(data, sps) and len(data) > 2:
        # OpenVINO reads this slope per channel; ONNX would align it with the last axis.
        shape = ectx.constant(np.array([-1] + [1] * (len(data) - 2), np.int64))
        reshaped = ectx.fresh("slope")
        ectx.add_node("Reshape", [slope, shape], [reshaped])
        slope = reshaped
    ectx.add_node("PRelu", [x, slope], ectx.outputs(node))


@onnx_export(Gelu)
def _export_gelu(node, ectx):
    # ONNX Gelu arrives in opset 20; opset 17 spells it out.
    (x,) = ectx.inputs(node)
    dt = node.get_output_element_type(0).dtype
    c = lambda v: ectx.constant(np.asarray(v, dt))  # noqa: E731
    half_x, inner, t, onep = (ectx.fresh(h) for h in ("half_x", "inner", "t", "onep"))
    ectx.add_node("Mul", [x, c(0.5)], [half_x])
    if node.approximation_mode == "TANH":
        x2, x3, k, s, sc = (ectx.fresh(h) for h in ("x2", "x3", "k", "s", "sc"))
        ectx.add_node("Mul", [x, x], [x2])
        ectx.add_node("Mul", [x2, x], [x3])
        ectx.add_node("Mul", [x3, c(0.044715)], [k])
        ectx.add_node("Add", [x, k], [s])
        ectx.add_node("Mul", [s, c(math.sqrt(2 / math.pi))], [sc])
        ectx.add_node("Tanh", [sc], [t])
    else:
        ectx.add_node("Mul", [x, c(1 / math.sqrt(2))], [inner])
        ectx.add_node("Erf", [inner], [t])
    ectx.add_node("Add", [t, c(1)], [onep])
    ectx.add_node("Mul", [half_x, onep], ectx.outputs(node))


@onnx_export(Clamp)
def _export_clamp(node, ectx):
    (x,) = ectx.inputs(node)
    et = node.get_output_element_type(0)
    if et.is_integral:
        info = np.iinfo(et.dtype)
        lo = max(info.min, math.ceil(node.min)) if math.isfinite(node.min) else info.min
        hi = min(info.max, math.floor(node.max)) if math.isfinite(node.max) else info.max
    else:
        lo, hi = node.min, node.max
    ectx.add_node("Clip", [x, ectx.constant(np.asarray(lo, et.dtype)),
                           ectx.constant(np.asarray(hi, et.dtype))], ectx.outputs(node))


@onnx_export(Elu)
def _export_elu(node, ectx):
    ectx.add_node("Elu", ectx.inputs(node), ectx.outputs(node), alpha=float(node.alpha))


def _scalar_attr(node: Node, i: int) -> float:
    value = node.input_constant(i)
    if value is None:
        raise UnsupportedOpError(node.type_name, "", 17, node.friendly_name,
                                 f"input {i} must be constant to export to ONNX")
    return float(np.asarray(value).reshape(()))


@onnx_export(Selu)
def _export_selu(node, ectx):
    ectx.add_node("Selu", ectx.inputs(node)[:1], ectx.outputs(node),
                  alpha=_scalar_attr(node, 1), gamma=_scalar_attr(node, 2))


@onnx_export(HardSigmoid)
def _export_hard_sigmoid(node, ectx):
    ectx.add_node("HardSigmoid", ectx.inputs(node)[:1], ectx.outputs(node),
                  alpha=_scalar_attr(node, 1), beta=_scalar_attr(node, 2))


@onnx_export(HSigmoid)
def _export_hsigmoid(node, ectx):
    ectx.add_node("HardSigmoid", ectx.inputs(node), ectx.outputs(node), alpha=1 / 6, beta=0.5)


@onnx_export(Swish)
def _export_swish(node, ectx):
    # ONNX Swish arrives in opset 24: x * Sigmoid(beta * x).
    names = ectx.inputs(node)
    x = names[0]
    arg = x
    if len(names) > 1:
        arg = ectx.fresh("beta_x")
        ectx.add_node("Mul", [x, names[1]], [arg])
    sig = ectx.fresh("sigmoid")
    ectx.add_node("Sigmoid", [arg], [sig])
    ectx.add_node("Mul", [x, sig], ectx.outputs(node))


@onnx_export(Mish)
def _export_mish(node, ectx):
    # ONNX Mish arrives in opset 18: x * Tanh(Softplus(x)).
    (x,) = ectx.inputs(node)
    sp, t = ectx.fresh("softplus"), ectx.fresh("tanh")
    ectx.add_node("Softplus", [x], [sp])
    ectx.add_node("Tanh", [sp], [t])
    ectx.add_node("Mul", [x, t], ectx.outputs(node))
