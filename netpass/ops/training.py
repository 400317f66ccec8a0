"""The optimizer steps of ONNX's ``ai.onnx.preview.training`` domain: Adagrad, Adam and Momentum
(version 1). Each updates n tensors at once: inputs ``R`` (learning rate, float scalar), ``T``
(iteration count, i64 scalar), then the n tensors ``X``, their gradients ``G`` and their
accumulators, each group in order; outputs the updated tensors and accumulators, each group in
order, typed and shaped as their inputs. OpenVINO has no counterpart: netpass keeps them whole
and the runtime runs them on the host. The steps are computed in float64 and written in the
tensors' type, as onnx's reference does.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node
from ..core.types import i64
from .base import NETPASS_OPSET, set_name, to_output
from .registry import onnx_export, onnx_rule

__all__ = ["adagrad", "adam", "momentum"]

DOMAIN = "ai.onnx.preview.training"


class _OptimizerStep(Node):
    """Inputs ``R, T`` then ``GROUPS`` groups of n tensors; outputs ``GROUPS - 1`` groups (the
    gradients are read, not written)."""

    GROUPS = 3

    def _count(self) -> int:
        rest = self.get_input_size() - 2
        self.check(rest > 0 and rest % self.GROUPS == 0,
                   "expects R, T and {} groups of tensors, got {} inputs", self.GROUPS,
                   self.get_input_size())
        return rest // self.GROUPS

    def infer_types(self) -> None:
        n = self._count()
        r, t = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        self.check(not r.rank_is_static or len(r) == 0, "R must be a scalar, got {}", r)
        self.check(not t.rank_is_static or len(t) == 0, "T must be a scalar, got {}", t)
        r_et, t_et = self.get_input_element_type(0), self.get_input_element_type(1)
        self.check(r_et.is_dynamic or r_et.is_real, "R must be a float, got {}", r_et)
        self.check(t_et.is_dynamic or t_et is i64, "T must be i64, got {}", t_et)
        for k in range(n):
            x = 2 + k
            et = self.get_input_element_type(x)
            self.check(et.is_dynamic or et.is_real, "X{} must be a float, got {}", k + 1, et)
            ps = self.get_input_partial_shape(x)
            for g in range(1, self.GROUPS):
                i = x + g * n
                merged = ps.merge(self.get_input_partial_shape(i))
                if merged is None:
                    self.fail("input {} has shape {}, X{} has {}", i,
                              self.get_input_partial_shape(i), k + 1, ps)
                ps = merged
                merged_et = et.merge(self.get_input_element_type(i))
                if merged_et is None:
                    self.fail("input {} has type {}, X{} has {}", i,
                              self.get_input_element_type(i), k + 1, et)
                et = merged_et
            for j in range(self.GROUPS - 1):  # X', then the accumulators'
                self.set_output_type(j * n + k, et, ps)

    def evaluate(self, inputs):
        n = self._count()
        r = float(np.asarray(inputs[0]))
        t = int(np.asarray(inputs[1]))
        outs: list[list[np.ndarray]] = [[] for _ in range(self.GROUPS - 1)]
        for k in range(n):
            group = [inputs[2 + g * n + k] for g in range(self.GROUPS)]
            self.check(all(a.shape == group[0].shape for a in group),
                       "tensor {}'s inputs have shapes {}", k + 1, [a.shape for a in group])
            new = self._step(r, t, *(a.astype(np.float64) for a in group))
            for j, a in enumerate(new):
                outs[j].append(a.astype(group[0].dtype))
        return [a for group in outs for a in group]

    def _step(self, r: float, t: int, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        raise NotImplementedError


class Adagrad(_OptimizerStep):
    """ADAGRAD: ``r = R / (1 + T decay_factor)``, ``g = norm_coefficient X + G``,
    ``H' = H + g^2``, ``X' = X - r g / (sqrt(H') + epsilon)``; outputs ``X'..., H'...``."""

    type_name = "Adagrad"
    version = NETPASS_OPSET
    ATTRS = {"decay_factor": 0.0, "epsilon": 0.0, "norm_coefficient": 0.0}

    def _step(self, r, t, x, g, h):
        rate = r / (1 + t * self.decay_factor)
        g = self.norm_coefficient * x + g
        h_new = h + g * g
        return x - rate * g / (np.sqrt(h_new) + self.epsilon), h_new


class Adam(_OptimizerStep):
    """Adam: ``g = norm_coefficient X + G``, ``V' = alpha V + (1 - alpha) g``,
    ``H' = beta H + (1 - beta) g^2``, the rate bias-corrected when ``T > 0``,
    ``X' = (1 - norm_coefficient_post) (X - r V' / (sqrt(H') + epsilon))``; outputs
    ``X'..., V'..., H'...``."""

    type_name = "Adam"
    version = NETPASS_OPSET
    ATTRS = {"alpha": 0.9, "beta": 0.999, "epsilon": 1e-6, "norm_coefficient": 0.0,
             "norm_coefficient_post": 0.0}
    GROUPS = 4

    def _step(self, r, t, x, g, v, h):
        a, b = self.alpha, self.beta
        g = self.norm_coefficient * x + g
        v_new = a * v + (1 - a) * g
        h_new = b * h + (1 - b) * g * g
        rate = r * np.sqrt(1 - b ** t) / (1 - a ** t) if t > 0 else r
        x_new = x - rate * (v_new / (np.sqrt(h_new) + self.epsilon))
        return (1 - self.norm_coefficient_post) * x_new, v_new, h_new


class Momentum(_OptimizerStep):
    """SGD with momentum: ``g = norm_coefficient X + G``, ``V' = alpha V + beta' g`` (``beta'``
    is 1 at ``T == 0``), ``X' = X - R V'`` (``mode`` "standard") or
    ``X' = X - R (g + alpha V')`` ("nesterov"); outputs ``X'..., V'...``."""

    type_name = "Momentum"
    version = NETPASS_OPSET
    ATTRS = {"alpha": 0.0, "beta": 0.0, "mode": "standard", "norm_coefficient": 0.0}

    def infer_types(self) -> None:
        self.check(self.mode in ("standard", "nesterov"),
                   "mode must be 'standard' or 'nesterov', got '{}'", self.mode)
        super().infer_types()

    def _step(self, r, t, x, g, v):
        g = self.norm_coefficient * x + g
        v_new = self.alpha * v + (self.beta if t > 0 else 1.0) * g
        if self.mode == "nesterov":
            return x - r * (g + self.alpha * v_new), v_new
        return x - r * v_new, v_new


# -- factories ---------------------------------------------------------------------------------

def _inputs(r: Any, t: Any, *groups: list[Any]) -> list:
    return [to_output(r), to_output(t), *(to_output(v) for group in groups for v in group)]


def adagrad(r: Any, t: Any, xs: list[Any], gs: list[Any], hs: list[Any],
            decay_factor: float = 0.0, epsilon: float = 0.0, norm_coefficient: float = 0.0,
            name: str | None = None) -> Node:
    """Adagrad: one ADAGRAD step of the tensors ``xs`` with gradients ``gs`` and accumulated
    squared gradients ``hs``; outputs the new ``xs`` then the new ``hs``."""
    return set_name(Adagrad(_inputs(r, t, xs, gs, hs), decay_factor=float(decay_factor),
                            epsilon=float(epsilon), norm_coefficient=float(norm_coefficient)),
                    name)


def adam(r: Any, t: Any, xs: list[Any], gs: list[Any], vs: list[Any], hs: list[Any],
         alpha: float = 0.9, beta: float = 0.999, epsilon: float = 1e-6,
         norm_coefficient: float = 0.0, norm_coefficient_post: float = 0.0,
         name: str | None = None) -> Node:
    """Adam: one Adam step of ``xs`` (gradients ``gs``, momentums ``vs``, second momentums
    ``hs``); outputs the new ``xs``, ``vs`` then ``hs``."""
    return set_name(Adam(_inputs(r, t, xs, gs, vs, hs), alpha=float(alpha), beta=float(beta),
                         epsilon=float(epsilon), norm_coefficient=float(norm_coefficient),
                         norm_coefficient_post=float(norm_coefficient_post)), name)


def momentum(r: Any, t: Any, xs: list[Any], gs: list[Any], vs: list[Any], alpha: float,
             beta: float, norm_coefficient: float, mode: str = "standard",
             name: str | None = None) -> Node:
    """Momentum: one SGD-with-momentum step (``mode`` "standard" or "nesterov") of ``xs``
    (gradients ``gs``, momentums ``vs``); outputs the new ``xs`` then ``vs``."""
    return set_name(Momentum(_inputs(r, t, xs, gs, vs), alpha=float(alpha), beta=float(beta),
                             norm_coefficient=float(norm_coefficient), mode=mode), name)


# -- ONNX import and export ----------------------------------------------------------------------

def _attrs(ctx, cls: type[_OptimizerStep]) -> dict[str, Any]:
    return {k: (ctx.attr(k, d) if isinstance(d, str) else float(ctx.attr(k, float(d))))
            for k, d in cls.ATTRS.items()}


for _cls in (Adagrad, Adam, Momentum):
    onnx_rule(_cls.type_name, since=1, domain=DOMAIN)(
        lambda ctx, cls=_cls: cls(ctx.inputs, **_attrs(ctx, cls)).outputs())


@onnx_export(Adagrad, Adam, Momentum)
def _export_optimizer_step(node, ectx):
    ectx.add_node(node.type_name, ectx.inputs(node), ectx.outputs(node), domain=DOMAIN,
                  **node.get_attributes())
