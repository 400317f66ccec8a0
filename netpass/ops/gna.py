"""GNA-specific channels-last ops (OpenVINO's ``intel_gna`` opset): GNAConvolution and GNAMaxPool.

GNA runs convolutions and pooling only in NHWC (``[N, W, C]`` in 1-D). ``ReplaceGnaNHWCLayers``
swaps Convolution/MaxPool for these ops between Transposes; later fusions fold a bias Add and an
activation into GNAConvolution. They never come from an input model, so there is no ONNX import
rule, and ONNX cannot express them. The references reuse Convolution's and MaxPool's through a
transpose to channels-first and back.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from ..errors import UnsupportedOpError
from .base import merged_input_type, set_name, to_output
from .convolution.window import (
    conv_nd,
    normalize_auto_pad,
    resolve_pads,
    spatial_list,
    window_output_dims,
)
from .pooling import max_pool_nd
from .registry import onnx_export

__all__ = ["gna_convolution", "gna_max_pool"]

# Activations GNAConvolution can apply after its bias (OpenVINO's GNA ActivationKind names).
ACTIVATIONS = {
    "NO_ACTIVATION": lambda y: y,
    "RELU": lambda y: np.maximum(y, 0),
    "SIGMOID": lambda y: 1.0 / (1.0 + np.exp(-y)),
    "TANH": np.tanh,
    "ABS": np.abs,
    "LOG": np.log,
    "EXP": np.exp,
    "SIGN": np.sign,
}


def _to_channels_first(x: np.ndarray) -> np.ndarray:
    return np.moveaxis(x, -1, 1)


def _to_channels_last(x: np.ndarray) -> np.ndarray:
    return np.moveaxis(x, 1, -1)


class GNAConvolution(Node):
    """Convolution of NHWC data with OHWI filters, plus an optional bias (input 2, broadcast
    over the output) and a fused activation. ``has_bias`` follows the number of inputs."""

    type_name = "GNAConvolution"
    version = "intel_gna"
    ATTRS = {"strides": [], "dilations": [], "pads_begin": [], "pads_end": [],
             "auto_pad": "explicit", "activation": "NO_ACTIVATION", "has_bias": False}
    activation: Any
    auto_pad: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() in (2, 3), "expects inputs (data, filters[, bias])")
        self.has_bias = self.get_input_size() == 3
        self.activation = str(self.activation).upper()
        self.check(self.activation in ACTIVATIONS,
                   "activation must be one of {}, got {!r}", sorted(ACTIVATIONS), self.activation)
        et = merged_input_type(self)
        data = self.get_input_partial_shape(0)
        filt = self.get_input_partial_shape(1)
        ranks = {len(ps) for ps in (data, filt) if ps.rank_is_static}
        self.check(len(ranks) <= 1, "data {} and filters {} differ in rank", data, filt)
        if not ranks:
            self.set_output_type(0, et, PartialShape(None))
            return
        rank = ranks.pop()
        self.check(3 <= rank <= 5, "expected NWC, NHWC or NDHWC data, got rank {}", rank)
        n = rank - 2
        self.auto_pad = normalize_auto_pad(self, self.auto_pad)
        self.strides = spatial_list(self, "strides", n, 1)
        self.dilations = spatial_list(self, "dilations", n, 1)
        self.pads_begin = spatial_list(self, "pads_begin", n, 0)
        self.pads_end = spatial_list(self, "pads_end", n, 0)
        out_c = filt[0] if filt.rank_is_static else Dimension()
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape.dynamic(rank))
            return
        if filt.rank_is_static:
            self.check(data[-1].compatible(filt[-1]),
                       f"data has {data[-1]} channels (last axis) but the filters expect "
                       f"{filt[-1]}")
            kernel = list(filt)[1:-1]
        else:
            kernel = [Dimension() for _ in range(n)]
        extents = [Dimension((k.min - 1) * d + 1) if k.is_static else Dimension()
                   for k, d in zip(kernel, self.dilations)]
        spatial = window_output_dims(self, list(data)[1:-1], extents, self.strides,
                                     self.pads_begin, self.pads_end, self.auto_pad)
        shape = PartialShape([data[0]] + spatial + [out_c])
        if self.has_bias:
            bias = self.get_input_partial_shape(2)
            merged = shape.broadcast_merge(bias)
            self.check(merged is not None and merged.compatible(shape),
                       "bias of shape {} does not broadcast to the output {}", bias, shape)
        self.set_output_type(0, et, shape)

    def evaluate(self, inputs):
        x, w = _to_channels_first(inputs[0]), _to_channels_first(inputs[1])
        kernel = w.shape[2:]
        extents = [(k - 1) * d + 1 for k, d in zip(kernel, self.dilations)]
        pb, pe = resolve_pads(self.auto_pad, x.shape[2:], extents, self.strides,
                              self.pads_begin, self.pads_end)
        y = _to_channels_last(conv_nd(x, w, self.strides, self.dilations, pb, pe))
        if self.has_bias:
            y = y + inputs[2]
        y = ACTIVATIONS[self.activation](y)
        return [np.asarray(y).astype(self._outs[0].et.dtype or inputs[0].dtype, copy=False)]


class GNAMaxPool(Node):
    """Max pooling of NHWC data (values only)."""

    type_name = "GNAMaxPool"
    version = "intel_gna"
    ATTRS = {"strides": [], "pads_begin": [], "pads_end": [], "kernel": [],
             "rounding_type": "floor", "auto_pad": "explicit"}
    auto_pad: Any
    kernel: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.kernel = [int(k) for k in self.kernel]
        n = len(self.kernel)
        self.check(1 <= n <= 3, "kernel {} must have 1 to 3 axes", self.kernel)
        self.check(all(k >= 1 for k in self.kernel), "kernel {} must be >= 1", self.kernel)
        self.check(self.rounding_type in ("floor", "ceil"),
                   "rounding_type must be 'floor' or 'ceil', got {!r}", self.rounding_type)
        self.auto_pad = normalize_auto_pad(self, self.auto_pad)
        self.strides = spatial_list(self, "strides", n, 1)
        self.pads_begin = spatial_list(self, "pads_begin", n, 0)
        self.pads_end = spatial_list(self, "pads_end", n, 0)
        data = self.get_input_partial_shape(0)
        et = self.get_input_element_type(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape.dynamic(n + 2))
            return
        self.check(len(data) == n + 2, "data {} does not match kernel {}", data, self.kernel)
        spatial = window_output_dims(self, list(data)[1:-1], self.kernel, self.strides,
                                     self.pads_begin, self.pads_end, self.auto_pad,
                                     self.rounding_type == "ceil")
        self.set_output_type(0, et, PartialShape([data[0]] + spatial + [data[-1]]))

    def evaluate(self, inputs):
        values, _ = max_pool_nd(_to_channels_first(inputs[0]), self.kernel, self.strides,
                                [1] * len(self.kernel), self.pads_begin, self.pads_end,
                                self.auto_pad, self.rounding_type == "ceil", index_axis=None)
        return [_to_channels_last(values)]


# -- factories -------------------------------------------------------------------------------
def _ints(v: Any) -> list[int]:
    return [] if v is None else [int(x) for x in np.asarray(v).reshape(-1)]


def gna_convolution(data: Any, filters: Any, strides: Any, pads_begin: Any, pads_end: Any,
                    dilations: Any, auto_pad: str = "explicit", bias: Any = None,
                    activation: str = "NO_ACTIVATION", name: str | None = None) -> Node:
    """GNAConvolution (GNA-specific, made by ReplaceGnaNHWCLayers): a convolution on NHWC ``data``
    ``[N, *spatial, C]`` with ``filters`` ``[C_out, *kernel, C_in]``, optional ``bias`` and a fused
    ``activation``; attributes as :func:`convolution`."""
    inputs = [to_output(data), to_output(filters)]
    if bias is not None:
        inputs.append(to_output(bias))
    return set_name(GNAConvolution(inputs, strides=_ints(strides), pads_begin=_ints(pads_begin),
                                   pads_end=_ints(pads_end), dilations=_ints(dilations),
                                   auto_pad=(auto_pad or "explicit").lower(),
                                   activation=activation), name)


def gna_max_pool(data: Any, strides: Any, pads_begin: Any, pads_end: Any, kernel_shape: Any,
                 rounding_type: str = "floor", auto_pad: str | None = None,
                 name: str | None = None) -> Node:
    """GNAMaxPool (GNA-specific, made by ReplaceGnaNHWCLayers): max pooling on NHWC ``data``;
    attributes as :func:`max_pool` without dilations."""
    return set_name(GNAMaxPool([to_output(data)], strides=_ints(strides),
                               pads_begin=_ints(pads_begin), pads_end=_ints(pads_end),
                               kernel=_ints(kernel_shape), rounding_type=rounding_type.lower(),
                               auto_pad=(auto_pad or "explicit").lower()), name)


@onnx_export(GNAConvolution, GNAMaxPool)
def _export_gna(node, ectx):
    raise UnsupportedOpError(node.type_name, node_name=node.friendly_name,
                             reason="GNA-specific op; ONNX has no channels-last convolution or "
                                    "pooling (save the model as IR instead)")
