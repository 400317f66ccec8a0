"""Training losses of ONNX: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12,
13, 22). OpenVINO has no such ops (its ONNX frontend decomposes them); netpass keeps them whole,
evaluated as the ONNX specification says, so that a model exported with its loss runs as is.

``loss[n, d...] = -w[t] * input[n, t, d...]`` with ``t = target[n, d...]`` and ``w`` the class
weights (1 without a weight input); where ``t == ignore_index`` the loss and its weight are 0
(``ignore_index`` may lie outside ``[0, C)``). ``reduction``: ``none`` keeps the per-element
losses, ``sum`` adds them, ``mean`` divides their sum by the sum of the weights applied.
SoftmaxCrossEntropyLoss is that loss over ``log_softmax(scores, axis=1)``, which is its second
output.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node, Output
from ..core.shape import PartialShape
from .base import NETPASS_OPSET, set_name, to_output
from .registry import onnx_export, onnx_rule

__all__ = ["negative_log_likelihood_loss", "softmax_cross_entropy_loss"]

REDUCTIONS = ("none", "sum", "mean")


class _Loss(Node):
    """Inputs ``(input or scores [N, C, d...], target [N, d...][, weight [C]])``."""

    version = NETPASS_OPSET
    ATTRS = {"reduction": "mean", "ignore_index": None}

    def _check_and_loss_shape(self) -> PartialShape:
        self.check(self.get_input_size() in (2, 3), "expects inputs (input, target[, weight])")
        self.check(self.reduction in REDUCTIONS, "reduction must be one of {}, got '{}'",
                   REDUCTIONS, self.reduction)
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "input must be a float tensor, got {}", et)
        tet = self.get_input_element_type(1)
        self.check(tet.is_dynamic or tet.is_integral, "target must be integers, got {}", tet)
        if self.get_input_size() == 3:
            w = self.get_input_element_type(2)
            self.check(w.merge(et) is not None, "weight type {} differs from input type {}",
                       w, et)
            wps = self.get_input_partial_shape(2)
            self.check(not wps.rank_is_static or len(wps) == 1, "weight must be 1-D, got {}", wps)
        x, t = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        if x.rank_is_static:
            self.check(len(x) >= 2, "input must be [N, C, d...], got {}", x)
        if x.rank_is_static and t.rank_is_static:
            self.check(len(t) == len(x) - 1, "target {} must be input {} without C", t, x)
            merged = PartialShape([x[0], *x[2:]]).merge(t)
            if merged is None:
                self.fail("target {} does not match input {}", t, x)
            t = merged
        elif x.rank_is_static:
            t = PartialShape([x[0], *x[2:]])
        return t if self.reduction == "none" else PartialShape([])

    def _nll(self, logp: np.ndarray, target: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
        n_classes = logp.shape[1]
        t = target.astype(np.int64)
        ignored = t == self.ignore_index if self.ignore_index is not None else \
            np.zeros(t.shape, bool)
        safe = np.where(ignored, 0, t)
        self.check(bool(((safe >= 0) & (safe < n_classes)).all()),
                   "target holds a class outside [0, {})", n_classes)
        picked = np.take_along_axis(logp, safe[:, None], axis=1)[:, 0]
        w = weight[safe] if weight is not None else np.ones(t.shape, logp.dtype)
        w = np.where(ignored, 0, w).astype(logp.dtype)
        loss = -picked * w
        if self.reduction == "none":
            return loss.astype(logp.dtype)
        if self.reduction == "sum":
            return np.asarray(loss.sum(), logp.dtype)
        with np.errstate(all="ignore"):
            return np.asarray(loss.sum() / w.sum(), logp.dtype)


class NegativeLogLikelihoodLoss(_Loss):
    """ONNX NegativeLogLikelihoodLoss: ``input`` holds log-probabilities."""

    type_name = "NegativeLogLikelihoodLoss"

    def infer_types(self) -> None:
        self.set_output_type(0, self.get_input_element_type(0), self._check_and_loss_shape())

    def evaluate(self, inputs):
        weight = inputs[2] if len(inputs) > 2 else None
        return [self._nll(inputs[0], inputs[1], weight)]


class SoftmaxCrossEntropyLoss(_Loss):
    """ONNX SoftmaxCrossEntropyLoss: outputs ``(loss, log_prob)``."""

    type_name = "SoftmaxCrossEntropyLoss"

    def infer_types(self) -> None:
        et = self.get_input_element_type(0)
        self.set_output_type(0, et, self._check_and_loss_shape())
        self.set_output_type(1, et, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        weight = inputs[2] if len(inputs) > 2 else None
        with np.errstate(all="ignore"):
            shifted = x - np.max(x, axis=1, keepdims=True)
            logp = (shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))).astype(
                x.dtype)
        return [self._nll(logp, inputs[1], weight), logp]


# -- factories ---------------------------------------------------------------------------------

def _inputs(data: Any, target: Any, weight: Any) -> list[Output]:
    ins = [to_output(data), to_output(target)]
    if weight is not None:
        ins.append(to_output(weight))
    return ins


def negative_log_likelihood_loss(data: Any, target: Any, weight: Any = None,
                                 reduction: str = "mean", ignore_index: int | None = None,
                                 name: str | None = None) -> Node:
    """NegativeLogLikelihoodLoss (ONNX): ``-data[n, target[n], ...]`` (times ``weight[target]``
    when given), entries equal to ``ignore_index`` left out, reduced by ``reduction`` ("mean",
    "sum" or "none")."""
    return set_name(NegativeLogLikelihoodLoss(_inputs(data, target, weight),
                                              reduction=reduction, ignore_index=ignore_index),
                    name)


def softmax_cross_entropy_loss(scores: Any, labels: Any, weight: Any = None,
                               reduction: str = "mean", ignore_index: int | None = None,
                               name: str | None = None) -> Node:
    """SoftmaxCrossEntropyLoss (ONNX): the negative log-likelihood of ``labels`` under
    ``softmax(scores)`` along dim 1, weighted by ``weight``, ``ignore_index`` left out, reduced by
    ``reduction``; second output: the log-probabilities."""
    return set_name(SoftmaxCrossEntropyLoss(_inputs(scores, labels, weight),
                                            reduction=reduction, ignore_index=ignore_index),
                    name)


# -- ONNX import (one semantics since opset 12; later versions only add element types) ---------

def _attrs(ctx: Any) -> dict[str, Any]:
    ignore = ctx.attr("ignore_index", 0) if ctx.has_attr("ignore_index") else None
    return {"reduction": ctx.attr("reduction", "mean"), "ignore_index": ignore}


@onnx_rule("NegativeLogLikelihoodLoss", since=12)
def _import_nll(ctx):
    return NegativeLogLikelihoodLoss([i for i in ctx.inputs if i is not None], **_attrs(ctx))


@onnx_rule("SoftmaxCrossEntropyLoss", since=12)
def _import_sce(ctx):
    node = SoftmaxCrossEntropyLoss([i for i in ctx.inputs if i is not None], **_attrs(ctx))
    return node.outputs()


# -- ONNX export -------------------------------------------------------------------------------

def _export_loss(op_type: str):
    def rule(node, ectx):
        attrs: dict[str, Any] = {"reduction": node.reduction}
        if node.ignore_index is not None:
            attrs["ignore_index"] = int(node.ignore_index)
        outs = ectx.outputs(node)
        if len(outs) > 1 and not node.output(1).consumers():
            outs = outs[:1]
        ectx.add_node(op_type, ectx.inputs(node), outs, **attrs)
    return rule


onnx_export(NegativeLogLikelihoodLoss)(_export_loss("NegativeLogLikelihoodLoss"))
onnx_export(SoftmaxCrossEntropyLoss)(_export_loss("SoftmaxCrossEntropyLoss"))
