"""Random ops of ONNX: Dropout (1-22), Bernoulli (15, 22), RandomUniformLike (1, 22).

ONNX leaves the generator to the implementation. netpass draws from numpy's Mersenne Twister,
``numpy.random.RandomState(seed)``, in C order of the output: with a ``seed`` attribute the
draws repeat run after run (and equal onnx's reference evaluator's), without one they come from
a fresh generator each time. Dropout outside training mode, or with ratio 0, is the identity
and its mask all True.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node, Output
from ..core.types import Type, boolean
from .base import NETPASS_OPSET, set_name, to_output
from .onnx_types import onnx_element_type, onnx_type_code
from .registry import onnx_export, onnx_rule

__all__ = ["dropout", "bernoulli", "random_uniform_like"]


def _generator(seed: float | None) -> np.random.RandomState:
    return np.random.RandomState() if seed is None else np.random.RandomState(int(seed))


class Dropout(Node):
    """Inputs ``(data[, ratio[, training_mode]])``; outputs ``(output, mask)``. In training mode
    each element is kept with probability ``1 - ratio`` (a uniform draw >= ratio) and scaled
    by ``1 / (1 - ratio)``. ``ratio`` attribute: the ratio when no input gives it."""

    type_name = "Dropout"
    version = NETPASS_OPSET
    ATTRS = {"seed": None, "ratio": 0.5}
    FOLDABLE = False  # in training mode a draw, not a value known at compile time

    def infer_types(self) -> None:
        self.check(1 <= self.get_input_size() <= 3, "expects inputs (data[, ratio[, "
                   "training_mode]])")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "data must be a float tensor, got {}", et)
        if self.get_input_size() == 3:
            t = self.get_input_element_type(2)
            self.check(t.is_dynamic or t is boolean, "training_mode must be boolean, got {}", t)
        ps = self.get_input_partial_shape(0)
        self.set_output_type(0, et, ps)
        self.set_output_type(1, boolean, ps)

    def evaluate(self, inputs):
        x = inputs[0]
        ratio = float(np.asarray(inputs[1]).reshape(())) if len(inputs) > 1 else self.ratio
        training = bool(np.asarray(inputs[2]).reshape(())) if len(inputs) > 2 else False
        if ratio == 0 or not training:
            return [x, np.ones(x.shape, bool)]
        self.check(0 <= ratio < 1, "ratio must be in [0, 1), got {}", ratio)
        keep = _generator(self.seed).uniform(0, 1.0, x.shape) >= ratio
        return [(keep * x * (1.0 / (1.0 - ratio))).astype(x.dtype), keep]


class Bernoulli(Node):
    """1 with probability ``x``, else 0, per element, in ``element_type`` (x's by default)."""

    type_name = "Bernoulli"
    version = NETPASS_OPSET
    ATTRS = {"element_type": None, "seed": None}
    FOLDABLE = False  # a draw, not a value known at compile time

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "probabilities must be floats, got {}", et)
        out = Type.of(self.element_type) if self.element_type is not None else et
        self.set_output_type(0, out, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        p = inputs[0]
        dt = self.get_output_element_type(0).dtype or p.dtype
        return [_generator(self.seed).binomial(1, p=p).astype(dt)]


class RandomUniformLike(Node):
    """Uniform draws in ``[low, high)`` shaped like the input, in ``element_type`` (the
    input's by default)."""

    type_name = "RandomUniformLike"
    version = NETPASS_OPSET
    ATTRS = {"element_type": None, "low": 0.0, "high": 1.0, "seed": None}
    FOLDABLE = False

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = Type.of(self.element_type) if self.element_type is not None else \
            self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "output must be a float type, got {}", et)
        self.set_output_type(0, et, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        dt = self.get_output_element_type(0).dtype or x.dtype
        r = _generator(self.seed).rand(*x.shape).astype(dt)
        return [(r * dt.type(self.high - self.low) + dt.type(self.low)).astype(dt)]


# -- factories ---------------------------------------------------------------------------------

def dropout(data: Any, ratio: Any = None, training_mode: Any = None, seed: int | None = None,
            name: str | None = None) -> Node:
    """Dropout (ONNX). At inference (``training_mode`` absent or false) the identity, with an
    all-true mask as second output; in training mode elements are zeroed with probability
    ``ratio`` (default 0.5) drawn with numpy's ``RandomState(seed)`` and the rest scaled by
    ``1 / (1 - ratio)``."""
    inputs = [to_output(data)]
    if ratio is not None:
        inputs.append(to_output(ratio, data.element_type if isinstance(data, Output) else None))
    if training_mode is not None:
        inputs.append(to_output(training_mode, "boolean"))
    return set_name(Dropout(inputs, seed=seed), name)


def bernoulli(data: Any, element_type: Any = None, seed: float | None = None,
              name: str | None = None) -> Node:
    """Bernoulli (ONNX): 1 with probability ``data`` (elementwise, in [0, 1]), else 0, drawn with
    numpy's ``RandomState(seed)`` in C order; ``element_type`` of the result (default: that of
    ``data``)."""
    return set_name(Bernoulli([to_output(data)], element_type=element_type, seed=seed), name)


def random_uniform_like(data: Any, low: float = 0.0, high: float = 1.0, element_type: Any = None,
                        seed: float | None = None, name: str | None = None) -> Node:
    """RandomUniformLike (ONNX): values uniform in ``[low, high)`` with the shape of ``data``,
    drawn with numpy's ``RandomState(seed)`` in C order, of ``element_type`` (default: that of
    ``data``)."""
    return set_name(RandomUniformLike([to_output(data)], element_type=element_type, low=low,
                                      high=high, seed=seed), name)


# -- ONNX import ------------------------------------------------------------------------------

def _seed(ctx: Any, kind: Any) -> Any:
    return ctx.attr("seed", kind) if ctx.has_attr("seed") else None


@onnx_rule("Dropout")
def _import_dropout_old(ctx):
    # Before opset 12 Dropout only runs in inference: the identity (and an all-True mask)
    node = Dropout(ctx.inputs[:1], ratio=ctx.attr("ratio", 0.5))
    return [ctx.inputs[0], node.output(1)]


@onnx_rule("Dropout", since=12)
def _import_dropout(ctx):
    ins = [ctx.input(i) for i in range(3)]
    training = ins[2]
    inference = training is None or (training.value is not None and
                                     not bool(np.asarray(training.value).reshape(())))
    if inference and ctx.num_outputs < 2:
        return ctx.inputs[0]
    if ins[1] is None and ins[2] is not None:  # training_mode without a ratio: the default
        ins[1] = to_output(np.asarray(0.5, ctx.inputs[0].element_type.dtype or np.float32),
                           ctx.inputs[0].element_type)
    while ins and ins[-1] is None:
        ins.pop()
    return Dropout(ins, seed=_seed(ctx, 0)).outputs()


@onnx_rule("Bernoulli", since=15)
def _import_bernoulli(ctx):
    dtype = ctx.attr("dtype", 0)
    et = onnx_element_type(dtype, ctx.name) if dtype else None
    return Bernoulli(ctx.inputs[:1], element_type=et, seed=_seed(ctx, 0.0))


@onnx_rule("RandomUniformLike")
def _import_random_uniform_like(ctx):
    dtype = ctx.attr("dtype", 0)
    et = onnx_element_type(dtype, ctx.name) if dtype else None
    return RandomUniformLike(ctx.inputs[:1], element_type=et, low=ctx.attr("low", 0.0),
                             high=ctx.attr("high", 1.0), seed=_seed(ctx, 0.0))


# -- ONNX export -------------------------------------------------------------------------------

def _seed_attr(node: Node, kind: type) -> dict[str, Any]:
    return {} if node.seed is None else {"seed": kind(node.seed)}


@onnx_export(Dropout)
def _export_dropout(node, ectx):
    ins = ectx.inputs(node)
    if len(ins) == 1 and node.ratio != 0.5:
        ins.append(ectx.constant(np.asarray(node.ratio, node.get_input_element_type(0).dtype)))
    outs = ectx.outputs(node)
    if not node.output(1).consumers():
        outs = outs[:1]
    ectx.add_node("Dropout", ins, outs, **_seed_attr(node, int))


@onnx_export(Bernoulli)
def _export_bernoulli(node, ectx):
    ectx.add_node("Bernoulli", ectx.inputs(node), ectx.outputs(node), **_seed_attr(node, float),
                  dtype=onnx_type_code(node.get_output_element_type(0), node.friendly_name))


@onnx_export(RandomUniformLike)
def _export_random_uniform_like(node, ectx):
    ectx.add_node("RandomUniformLike", ectx.inputs(node), ectx.outputs(node),
                  **_seed_attr(node, float), low=float(node.low), high=float(node.high),
                  dtype=onnx_type_code(node.get_output_element_type(0), node.friendly_name))
