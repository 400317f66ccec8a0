"""OneHot: indices to one-hot vectors."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import OP_TYPES, Node, Output
from ...core.shape import PartialShape
from ..base import normalize_axis, set_name, to_output
from ..elementwise import convert
from ..movement import Reshape
from ..registry import export_error, onnx_export, onnx_rule
from ..shape_inputs import const_ints, i64_operand
from .common import _check_indices
from .gather import Gather

__all__ = ["one_hot"]


class OneHot(Node):
    """OneHot v1: a new ``axis`` of length ``depth``, ``on_value`` where it equals the index
    and ``off_value`` elsewhere; negative indices give all off values."""

    type_name = "OneHot"
    version = "opset1"
    ATTRS = {"axis": -1}
    negative_indices_mode: str = "ignore_negative"  # an attribute from opset 16 on (OneHot16)

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 4,
                   "expects inputs (indices, depth, on_value, off_value)")
        self.check(self.negative_indices_mode in ("ignore_negative", "normalize"),
                   "unknown negative_indices_mode '{}'", self.negative_indices_mode)
        _check_indices(self, 0)
        et = self.get_input_element_type(2)
        self.check(et.merge(self.get_input_element_type(3)) is not None,
                   f"on_value type {et} differs from off_value type "
                   f"{self.get_input_element_type(3)}")
        idx = self.get_input_partial_shape(0)
        depth = const_ints(self, 1)
        if not idx.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        rank = len(idx) + 1
        axis = normalize_axis(self, self.axis, rank)
        if depth is not None:
            self.check(len(depth) == 1 and depth[0] >= 0, f"depth must be a non-negative scalar, "
                       f"got {depth}")
        d = Dimension(depth[0]) if depth is not None else Dimension()
        dims = list(idx.dims)
        dims.insert(axis, d)
        self.set_output_type(0, et, PartialShape(dims))

    def evaluate(self, inputs):
        idx, depth, on, off = inputs
        depth = int(np.asarray(depth).reshape(-1)[0])
        idx = idx.astype(np.int64)
        if self.negative_indices_mode == "normalize":
            idx = np.where(idx < 0, idx + depth, idx)
        axis = self.axis % (idx.ndim + 1)
        hot = np.expand_dims(idx, axis) == np.arange(depth).reshape(
            (1,) * axis + (depth,) + (1,) * (idx.ndim - axis))
        dt = self._outs[0].et.dtype or np.asarray(on).dtype
        return [np.where(hot, np.asarray(on).reshape(()), np.asarray(off).reshape(())).astype(dt)]


class OneHot16(OneHot):
    """OneHot v16: ``negative_indices_mode`` "normalize" counts negative indices from
    ``depth`` (as ONNX does); "ignore_negative" behaves as v1."""

    type_name = "OneHot"
    version = "opset16"
    ATTRS = {"axis": -1, "negative_indices_mode": "ignore_negative"}


# The older version stays the class ``netpass.ops.OneHot`` names; IR reading picks the exact
# version by (type, opset).
OP_TYPES["OneHot"] = OneHot


def one_hot(indices: Any, depth: Any, on_value: Any, off_value: Any, axis: int,
            negative_indices_mode: str | None = None, name: str | None = None) -> Node:
    """OneHot: a new dim of length ``depth`` at ``axis`` holding ``on_value`` at each of ``indices``
    and ``off_value`` elsewhere. Without ``negative_indices_mode`` this is OneHot-1 (a negative
    index gives an all-off row); with it OneHot-16 ("ignore_negative" the same, "normalize" counts
    negative indices from ``depth``)."""
    inputs = [i64_operand(indices), i64_operand(depth), to_output(on_value), to_output(off_value)]
    if negative_indices_mode is None:
        return set_name(OneHot(inputs, axis=int(axis)), name)
    return set_name(OneHot16(inputs, axis=int(axis),
                             negative_indices_mode=str(negative_indices_mode).lower()), name)


def _as_i64(ctx, x: Output, what: str) -> Output:
    """ONNX allows float indices and depth; OpenVINO's OneHot wants integers."""
    if x.element_type.is_integral:
        return x
    return to_output(convert(x, "i64"))


@onnx_rule("OneHot", since=9)
def _import_one_hot(ctx):
    indices, depth, values = ctx.inputs
    indices = _as_i64(ctx, indices, "indices")
    if depth.value is not None:
        depth = i64_operand(np.asarray(depth.value).reshape(()).astype(np.int64))
    else:
        depth = Reshape([_as_i64(ctx, depth, "depth"), i64_operand([])],
                        special_zero=False).output(0)
    off = Gather([values, i64_operand(0), i64_operand(0)]).output(0)
    on = Gather([values, i64_operand(1), i64_operand(0)]).output(0)
    return OneHot16([indices, depth, on, off], axis=ctx.attr("axis", -1),
                    negative_indices_mode="normalize").output(0)


@onnx_export(OneHot)
def _export_one_hot(node, ectx):
    if node.negative_indices_mode != "normalize":
        export_error(node, "ONNX OneHot always counts negative indices from depth")
    ins = ectx.inputs(node)
    values = ectx.fresh("values")
    off, on = ectx.fresh("off"), ectx.fresh("on")
    one = ectx.constant(np.asarray([0], dtype=np.int64))
    ectx.add_node("Unsqueeze", [ins[3], one], [off])
    ectx.add_node("Unsqueeze", [ins[2], one], [on])
    ectx.add_node("Concat", [off, on], [values], axis=0)
    ectx.add_node("OneHot", [ins[0], ins[1], values], ectx.outputs(node), axis=node.axis)
