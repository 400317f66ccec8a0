"""Matrices in the last two dims: Det (ONNX 11, 22: determinants; OpenVINO has no such op,
netpass keeps it whole) and Inverse (OpenVINO opset14, what its PyTorch frontend writes for
``torch.inverse`` / ``torch.linalg.inv``; ONNX has no such op)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node
from ..core.shape import PartialShape
from .base import NETPASS_OPSET, set_name, to_output
from .registry import onnx_export, onnx_rule

__all__ = ["det", "inverse"]


class Det(Node):
    """``[*, M, M] -> [*]``."""

    type_name = "Det"
    version = NETPASS_OPSET

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "input must be a float tensor, got {}", et)
        ps = self.get_input_partial_shape(0)
        if not ps.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        self.check(len(ps) >= 2, "input must be [*, M, M], got {}", ps)
        self.check(ps[-1].compatible(ps[-2]), "matrices must be square, got {}", ps)
        self.set_output_type(0, et, PartialShape(list(ps)[:-2]))

    def evaluate(self, inputs):
        x = inputs[0]
        return [np.asarray(np.linalg.det(x.astype(np.float64))).astype(x.dtype)]


class Inverse(Node):
    """Inverse-14: ``[*, M, M] -> [*, M, M]``, the inverse of each matrix, or with ``adjoint``
    the inverse's adjoint (its conjugate transpose: the transpose, for real matrices; checked
    against OpenVINO's CPU plugin). Computed in float64; a singular matrix has no inverse and
    gives NaN (OpenVINO's values there are not defined either)."""

    type_name = "Inverse"
    version = "opset14"
    ATTRS = {"adjoint": False}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "input must be a float tensor, got {}", et)
        ps = self.get_input_partial_shape(0)
        if ps.rank_is_static:
            self.check(len(ps) >= 2, "input must be [*, M, M], got {}", ps)
            self.check(ps[-1].compatible(ps[-2]), "matrices must be square, got {}", ps)
            side = ps[-1].merge(ps[-2])
            ps = PartialShape(list(ps)[:-2] + [side, side])
        self.set_output_type(0, et, ps)

    def evaluate(self, inputs):
        x = inputs[0]
        a = x.astype(np.float64)
        with np.errstate(all="ignore"):
            try:
                inv = np.linalg.inv(a)
            except np.linalg.LinAlgError:  # a singular matrix in the batch: inverse by pieces
                inv = _inverse_each(a)
        if self.adjoint:
            inv = np.swapaxes(inv, -1, -2)
        return [inv.astype(x.dtype)]


def _inverse_each(a: np.ndarray) -> np.ndarray:
    """Inverses one matrix at a time, a singular one filled with NaN."""
    flat = a.reshape((-1,) + a.shape[-2:])
    out = np.empty_like(flat)
    for i, m in enumerate(flat):
        try:
            out[i] = np.linalg.inv(m)
        except np.linalg.LinAlgError:
            out[i] = np.nan
    return out.reshape(a.shape)


def det(data: Any, name: str | None = None) -> Node:
    """Det (ONNX): the determinant of each square matrix in the last two dims of ``data``
    (``[*, M, M] -> [*]``)."""
    return set_name(Det([to_output(data)]), name)


onnx_rule("Det", since=11)(lambda ctx: Det(ctx.inputs[:1]))


@onnx_export(Det)
def _export_det(node, ectx):
    ectx.add_node("Det", ectx.inputs(node), ectx.outputs(node))


def inverse(data: Any, adjoint: bool = False, name: str | None = None) -> Node:
    """Inverse-14: the inverse of each square matrix in the last two dims of ``data`` (its
    transpose with ``adjoint``)."""
    return set_name(Inverse([to_output(data)], adjoint=bool(adjoint)), name)
