"""CumProd (ONNX 26): the cumulative product, CumSum's twin (``exclusive`` starts from 1).
OpenVINO has no such op; netpass keeps it whole."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node
from .base import NETPASS_OPSET, set_name, to_output
from .reduction import CumSum
from .registry import onnx_export, onnx_rule
from .shape_inputs import i64_operand

__all__ = ["cumprod"]


class CumProd(CumSum):
    """Cumulative product along the axis input; ``exclusive`` leaves out the current element,
    ``reverse`` multiplies from the end."""

    type_name = "CumProd"
    version = NETPASS_OPSET
    accumulate = staticmethod(np.cumprod)
    identity = 1


def cumprod(arg: Any, axis: Any, exclusive: bool = False, reverse: bool = False,
            name: str | None = None) -> Node:
    """CumProd (ONNX CumProd): running product of ``arg`` along ``axis`` (an int or a scalar graph
    value); ``exclusive`` leaves each element out of its own product (the first is 1),
    ``reverse`` runs from the end."""
    axis = to_output(axis) if not isinstance(axis, int) else i64_operand(axis)
    return set_name(CumProd([to_output(arg), axis], exclusive=exclusive, reverse=reverse), name)


@onnx_rule("CumProd", since=26)
def _import_cumprod(ctx):
    return CumProd(ctx.inputs[:2], exclusive=bool(ctx.attr("exclusive", 0)),
                   reverse=bool(ctx.attr("reverse", 0)))


@onnx_export(CumProd, opset=26)
def _export_cumprod(node, ectx):
    ectx.add_node("CumProd", ectx.inputs(node), ectx.outputs(node),
                  exclusive=int(node.exclusive), reverse=int(node.reverse))
