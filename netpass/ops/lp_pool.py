"""LpPool (ONNX 1, 2, 11, 18, 22): the p-norm of every window, ``(sum |x|^p)^(1/p)``, with
zero padding (which adds nothing to the sum). OpenVINO has no such op; netpass keeps it whole,
with the window attributes of MaxPool (kernel, strides, dilations from 18, pads, auto_pad,
rounding_type from ONNX's ceil_mode at 18). ``p`` is a float attribute at ONNX 1 and an int
from 2.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node
from .base import NETPASS_OPSET, set_name, to_output
from .convolution.window import accumulation_dtype, pad_spatial, spatial_list, windows
from .pooling import (
    _crop_windows,
    _ints,
    _onnx_pool_attrs,
    _onnx_pool_export_attrs,
    _PoolBase,
    pool_geometry,
)
from .registry import export_error, onnx_export, onnx_rule

__all__ = ["lp_pool"]


class LpPool(_PoolBase):
    type_name = "LpPool"
    version = NETPASS_OPSET
    ATTRS = {"strides": [], "dilations": [], "pads_begin": [], "pads_end": [], "kernel": [],
             "rounding_type": "floor", "auto_pad": "explicit", "p": 2.0}
    p: float

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "input must be floats, got {}", et)
        n = self._spatial_rank()
        self._geometry(n)
        self.dilations = spatial_list(self, "dilations", n, 1)
        self.check(all(d >= 1 for d in self.dilations), "dilations {} must be >= 1",
                   self.dilations)
        self.p = float(self.p)
        self.check(self.p > 0, "p must be positive, got {}", self.p)
        self.set_output_type(0, et, self._output_shape(n, self.dilations))

    def evaluate(self, inputs):
        x = inputs[0]
        n = len(self.kernel)
        lead = x.ndim - n
        pb, pe, extra, outs = pool_geometry(x.shape[lead:], self.kernel, self.strides,
                                            self.dilations, self.pads_begin, self.pads_end,
                                            self.auto_pad, self.rounding_type == "ceil")
        end = [p + e for p, e in zip(pe, extra)]
        powered = np.abs(x.astype(accumulation_dtype(x.dtype))) ** self.p
        win = windows(pad_spatial(powered, pb, end), self.kernel, self.strides, self.dilations)
        total = _crop_windows(win, lead, outs).sum(axis=tuple(range(lead + n, lead + 2 * n)))
        return [(total ** (1.0 / self.p)).astype(x.dtype)]


def lp_pool(data: Any, p: float, strides: Any, dilations: Any, pads_begin: Any, pads_end: Any,
            kernel_shape: Any, rounding_type: str = "floor", auto_pad: str | None = None,
            name: str | None = None) -> Node:
    """LpPool over the spatial dims of ``data`` (``[N, C, *spatial]``): the ``p``-norm of each
    window (windows and padding as :func:`max_pool`)."""
    return set_name(LpPool([to_output(data)], p=float(p), strides=_ints(strides),
                           dilations=_ints(dilations), pads_begin=_ints(pads_begin),
                           pads_end=_ints(pads_end), kernel=_ints(kernel_shape),
                           rounding_type=rounding_type.lower(),
                           auto_pad=(auto_pad or "explicit").lower()), name)


def _import(ctx, p: float):
    attrs = _onnx_pool_attrs(ctx)
    attrs["dilations"] = ctx.attr("dilations", [1] * len(attrs["kernel"]))
    return LpPool(ctx.inputs[:1], p=p, **attrs)


@onnx_rule("LpPool", since=1)
def _import_lp_pool_1(ctx):
    return _import(ctx, ctx.attr("p", 2.0))


@onnx_rule("LpPool", since=2)
def _import_lp_pool(ctx):
    return _import(ctx, float(ctx.attr("p", 2)))


@onnx_export(LpPool, opset=18)
def _export_lp_pool(node, ectx):
    if node.p != int(node.p):
        export_error(node, f"ONNX LpPool from opset 2 takes an integer p, not {node.p}")
    attrs = _onnx_pool_export_attrs(node, node.dilations)
    attrs["dilations"] = list(node.dilations)
    ectx.add_node("LpPool", ectx.inputs(node), ectx.outputs(node), p=int(node.p), **attrs)
