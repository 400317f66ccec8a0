"""ONNX ArgMax and ArgMin as TopK compositions (OpenVINO has no ArgMax op; its ONNX frontend
does the same)."""
from __future__ import annotations

from ..core.types import i64
from .elementwise import Subtract
from .indexing import Gather
from .movement import reverse, squeeze
from .reduction import TopK
from .registry import onnx_rule
from .shape_inputs import i64_operand
from .shape_ops import shape_of


def _register_arg(onnx_op: str, mode: str) -> None:
    """ArgMax/ArgMin: TopK with k=1 (equal values: the first index). select_last_index (opset
    12 on) reverses the axis first and maps the index back, ``length - 1 - index``."""
    def rule(ctx):
        axis = ctx.attr("axis", 0)
        x = ctx.inputs[0]
        last = bool(ctx.attr("select_last_index", 0))
        if last:
            x = reverse(x, [axis], "index").output(0)
        node = TopK([x, i64_operand(1)], axis=axis, mode=mode, sort="none", index_element_type=i64)
        idx = node.output(1)
        if last:
            dims = shape_of(x, "i64").output(0)
            length = Gather([dims, i64_operand([axis]), i64_operand(0)]).output(0)
            idx = Subtract([Subtract([length, i64_operand([1])]).output(0), idx]).output(0)
        if ctx.attr("keepdims", 1):
            return idx
        return squeeze(idx, [axis]).output(0)
    onnx_rule(onnx_op)(rule)


_register_arg("ArgMax", "max")
_register_arg("ArgMin", "min")

