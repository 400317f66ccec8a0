"""Legacy "IE" ops (OpenVINO's ``legacy`` opset): CropIE, PowerIE, ScaleShiftIE, FullyConnected,
Eltwise and ReLUIE.

Transformations and the legacy conversion create them (StridedSlice -> CropIE, Multiply/Add by
constants -> PowerIE or ScaleShiftIE, MatMul with constant weights -> FullyConnected); they are
never in an input model, so there is no ONNX import rule, and their export rule refuses.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from ..errors import UnsupportedOpError
from .base import merged_input_type, set_name, to_output
from .registry import onnx_export

__all__ = ["crop_ie", "power_ie", "scale_shift_ie", "fully_connected", "eltwise", "relu_ie"]


def _cast(node: Node, y: Any, like: np.ndarray) -> np.ndarray:
    return np.asarray(y).astype(node._outs[0].et.dtype or like.dtype, copy=False)


class CropIE(Node):
    """Crop: along each ``axes[i]``, keep ``dim[i]`` elements starting at ``offset[i]``."""

    type_name = "CropIE"
    version = "legacy"
    ATTRS = {"axes": [], "dim": [], "offset": []}
    axes: Any
    dim: Any
    offset: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.axes = [int(a) for a in self.axes]
        self.dim = [int(d) for d in self.dim]
        self.offset = [int(o) for o in self.offset]
        self.check(len(self.axes) == len(self.dim) == len(self.offset),
                   f"axes {self.axes}, dim {self.dim} and offset {self.offset} differ in length")
        self.check(all(d >= 0 and o >= 0 for d, o in zip(self.dim, self.offset)),
                   "dim {} and offset {} must be >= 0", self.dim, self.offset)
        data = self.get_input_partial_shape(0)
        et = self.get_input_element_type(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, data)
            return
        dims = list(data)
        for a, d, o in zip(self.axes, self.dim, self.offset):
            self.check(0 <= a < len(dims), "axis {} out of range for data {}", a, data)
            self.check(dims[a].max >= o + d,
                       "crop [{}, {}) on axis {} leaves data {}", o, o + d, a, data)
            dims[a] = Dimension(d)
        self.set_output_type(0, et, PartialShape(dims))

    def evaluate(self, inputs):
        x = inputs[0]
        sl = [slice(None)] * x.ndim
        for a, d, o in zip(self.axes, self.dim, self.offset):
            sl[a] = slice(o, o + d)
        return [x[tuple(sl)]]


class PowerIE(Node):
    """``(scale * x + shift) ** power``, elementwise."""

    type_name = "PowerIE"
    version = "legacy"
    ATTRS = {"power": 1.0, "scale": 1.0, "shift": 0.0}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        y = x * np.asarray(self.scale, x.dtype) + np.asarray(self.shift, x.dtype)
        if self.power != 1.0:
            y = np.power(y, np.asarray(self.power, x.dtype))
        return [_cast(self, y, x)]


class ScaleShiftIE(Node):
    """``data * weights + bias`` per channel (axis 1): 1-D weights and bias of length C, or
    shapes that broadcast to the data."""

    type_name = "ScaleShiftIE"
    version = "legacy"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 3, "expects inputs (data, weights, bias)")
        et = merged_input_type(self)
        data = self.get_input_partial_shape(0)
        for i, what in ((1, "weights"), (2, "bias")):
            ps = self.get_input_partial_shape(i)
            if not data.rank_is_static or not ps.rank_is_static:
                continue
            if len(ps) == 1 and len(data) > 1:
                self.check(ps[0].compatible(data[1]),
                           "{} {} do not match the {} channels of data {}", what, ps, data[1], data)
            else:
                merged = data.broadcast_merge(ps)
                self.check(merged is not None and merged.compatible(data),
                           "{} {} do not broadcast to data {}", what, ps, data)
        self.set_output_type(0, et, data)

    def evaluate(self, inputs):
        x, w, b = inputs

        def per_channel(v: np.ndarray) -> np.ndarray:
            if v.ndim == 1 and x.ndim > 1:
                return v.reshape((1, -1) + (1,) * (x.ndim - 2))
            return v
        return [_cast(self, x * per_channel(w) + per_channel(b), x)]


class FullyConnected(Node):
    """``A @ W.T + bias``: A ``[..., K]``, W ``[N, K]``, bias ``[N]``; ``out_size`` is N."""

    type_name = "FullyConnected"
    version = "legacy"
    ATTRS = {"out_size": 0}
    out_size: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 3, "expects inputs (A, W, bias)")
        et = merged_input_type(self)
        a, w, b = (self.get_input_partial_shape(i) for i in range(3))
        self.check(not w.rank_is_static or len(w) == 2, "weights must be [N, K], got {}", w)
        n = w[0] if w.rank_is_static else Dimension()
        if self.out_size:
            self.check(n.compatible(self.out_size),
                       "out_size {} but weights {} give {} outputs", self.out_size, w, n)
            n = Dimension(int(self.out_size))
        elif n.is_static:
            self.out_size = n.min
        self.check(not b.rank_is_static or (len(b) == 1 and b[0].compatible(n)) or
                   (len(b) >= 1 and b[-1].compatible(n)),
                   "bias {} must hold {} values", b, n)
        if not a.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        self.check(len(a) >= 1, "A must have rank >= 1")
        if w.rank_is_static:
            self.check(a[-1].compatible(w[1]),
                       "A {} has K={} but weights {} have K={}", a, a[-1], w, w[1])
        self.set_output_type(0, et, PartialShape(list(a)[:-1] + [n]))

    def evaluate(self, inputs):
        a, w, b = inputs
        return [_cast(self, np.matmul(a, w.T) + b.reshape(-1), a)]


ELTWISE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
    "sub": np.subtract, "div": np.divide,
}


class Eltwise(Node):
    """Binary elementwise ``operation`` (sum, prod, max, min, sub, div), numpy broadcasting."""

    type_name = "Eltwise"
    version = "legacy"
    ATTRS = {"operation": "sum"}
    operation: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects 2 inputs")
        self.operation = str(self.operation).lower()
        self.check(self.operation in ELTWISE,
                   "operation must be one of {}, got {!r}", sorted(ELTWISE), self.operation)
        et = merged_input_type(self)
        a, b = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        out = a.broadcast_merge(b)
        self.check(out is not None, "input shapes {} and {} do not broadcast", a, b)
        self.set_output_type(0, et, out)

    def evaluate(self, inputs):
        a, b = inputs
        return [_cast(self, ELTWISE[self.operation](a, b), a)]


class ReLUIE(Node):
    """Leaky ReLU: ``x`` where positive, ``negative_slope * x`` elsewhere."""

    type_name = "ReLUIE"
    version = "legacy"
    ATTRS = {"negative_slope": 0.0}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        return [_cast(self, np.where(x > 0, x, x * np.asarray(self.negative_slope, x.dtype)), x)]


# -- factories -------------------------------------------------------------------------------
def _ints(v: Any) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)]


def crop_ie(data: Any, axes: Any, dim: Any, offset: Any, name: str | None = None) -> Node:
    """CropIE (legacy, made by transformations for GNA): along each of ``axes``, ``dim[i]``
    elements of ``data`` starting at ``offset[i]``; other dims are kept."""
    return set_name(CropIE([to_output(data)], axes=_ints(axes), dim=_ints(dim),
                           offset=_ints(offset)), name)


def power_ie(data: Any, power: float = 1.0, scale: float = 1.0, shift: float = 0.0,
             name: str | None = None) -> Node:
    """PowerIE (legacy, made by transformations): ``(scale * data + shift) ** power``."""
    return set_name(PowerIE([to_output(data)], power=float(power), scale=float(scale),
                            shift=float(shift)), name)


def scale_shift_ie(data: Any, weights: Any, bias: Any, name: str | None = None) -> Node:
    """ScaleShiftIE (legacy, made by transformations): ``data * weights + bias`` with per-channel
    (dim 1) ``weights`` and ``bias``."""
    return set_name(ScaleShiftIE([to_output(data), to_output(weights), to_output(bias)]), name)


def fully_connected(data: Any, weights: Any, bias: Any, out_size: int | None = None,
                    name: str | None = None) -> Node:
    """FullyConnected (legacy, made by transformations for GNA and the runtime): ``data @
    weights.T + bias`` with ``data`` ``[..., K]``, ``weights`` ``[N, K]`` and ``bias`` ``[N]``;
    ``out_size`` is N (0: read from ``weights``)."""
    return set_name(FullyConnected([to_output(data), to_output(weights), to_output(bias)],
                                   out_size=int(out_size or 0)), name)


def eltwise(data_a: Any, data_b: Any, operation: str = "sum", name: str | None = None) -> Node:
    """Eltwise (legacy, made by transformations): ``operation`` ("sum", "sub", "prod", "div",
    "max" or "min") of ``data_a`` and ``data_b``, broadcast numpy-style."""
    return set_name(Eltwise([to_output(data_a), to_output(data_b)], operation=operation), name)


def relu_ie(data: Any, negative_slope: float = 0.0, name: str | None = None) -> Node:
    """ReLUIE (legacy, made by transformations): leaky ReLU, ``x if x > 0 else negative_slope *
    x``."""
    return set_name(ReLUIE([to_output(data)], negative_slope=float(negative_slope)), name)


@onnx_export(CropIE, PowerIE, ScaleShiftIE, FullyConnected, Eltwise, ReLUIE)
def _export_legacy(node, ectx):
    raise UnsupportedOpError(node.type_name, node_name=node.friendly_name,
                             reason="legacy op made by transformations; ONNX export covers "
                                    "standard ops only")
