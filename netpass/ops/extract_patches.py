"""ExtractImagePatches (OpenVINO opset3, TensorFlow's ``extract_image_patches``): every
sliding window of an image laid out along the channels. ONNX has no such op."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from .base import set_name, to_output

__all__ = ["extract_image_patches"]


def _geometry(size: int, k: int, stride: int, rate: int, auto_pad: str
              ) -> tuple[int, tuple[int, int]]:
    """(output length, (padding before, padding after)) along one axis."""
    extent = (k - 1) * rate + 1
    if auto_pad == "valid":
        return max((size - extent) // stride + 1, 0), (0, 0)
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + extent - size, 0)
    before = total // 2 if auto_pad == "same_upper" else total - total // 2
    return out, (before, total - before)


class ExtractImagePatches(Node):
    """ExtractImagePatches-3: ``[N, C, H, W] -> [N, C * sizes[0] * sizes[1], out_h, out_w]``.
    Patch ``(i, j)`` reads rows ``i * strides[0] + r * rates[0]`` and columns alike (``r <
    sizes[0]``); output channel ``(r * sizes[1] + s) * C + c`` holds its element ``(r, s)`` of
    channel ``c``. ``auto_pad`` "valid" keeps whole windows only; "same_upper"/"same_lower"
    pad with zeros to ``ceil(H / stride)`` windows, the extra padding after/before."""

    type_name = "ExtractImagePatches"
    version = "opset3"
    ATTRS = {"sizes": [1, 1], "strides": [1, 1], "rates": [1, 1], "auto_pad": "valid"}

    def _attrs(self) -> tuple[list[int], list[int], list[int], str]:
        sizes, strides, rates = ([int(v) for v in a] for a in (self.sizes, self.strides,
                                                                   self.rates))
        pad = str(self.auto_pad).lower()
        for what, v in (("sizes", sizes), ("strides", strides), ("rates", rates)):
            self.check(len(v) == 2 and min(v) >= 1, "{} must be two positive values, got {}",
                       what, v)
        self.check(pad in ("valid", "same_upper", "same_lower"), "auto_pad must be valid, "
                   "same_upper or same_lower, got {}", self.auto_pad)
        return sizes, strides, rates, pad

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        sizes, strides, rates, pad = self._attrs()
        data = self.get_input_partial_shape(0)
        et = self.get_input_element_type(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape.dynamic(4))
            return
        self.check(len(data) == 4, "data must be [N, C, H, W], got {}", data)
        spatial = [Dimension(_geometry(d.min, k, s, r, pad)[0]) if d.is_static else Dimension()
                   for d, k, s, r in zip(list(data)[2:], sizes, strides, rates)]
        self.set_output_type(0, et, PartialShape([data[0], data[1] * (sizes[0] * sizes[1])]
                                                 + spatial))

    def evaluate(self, inputs):
        x = inputs[0]
        sizes, strides, rates, pad = self._attrs()
        geo = [_geometry(d, k, s, r, pad) for d, k, s, r in zip(x.shape[2:], sizes, strides,
                                                                 rates)]
        (oh, pads_h), (ow, pads_w) = geo
        padded = np.pad(x, [(0, 0), (0, 0), pads_h, pads_w])
        n, c = x.shape[:2]
        out = np.empty((n, sizes[0], sizes[1], c, oh, ow), x.dtype)
        for r in range(sizes[0]):
            for s in range(sizes[1]):
                rows = slice(r * rates[0], r * rates[0] + (oh - 1) * strides[0] + 1, strides[0])
                cols = slice(s * rates[1], s * rates[1] + (ow - 1) * strides[1] + 1, strides[1])
                out[:, r, s] = padded[:, :, rows, cols]
        return [out.reshape(n, sizes[0] * sizes[1] * c, oh, ow)]


def extract_image_patches(image: Any, sizes: Any, strides: Any, rates: Any, auto_pad: str,
                          name: str | None = None) -> Node:
    """ExtractImagePatches-3: the ``sizes`` windows of ``image`` ``[N, C, H, W]`` every
    ``strides``, their taps ``rates`` apart, as channels; ``auto_pad`` valid, same_upper or
    same_lower."""
    return set_name(ExtractImagePatches([to_output(image)], sizes=[int(v) for v in sizes],
                                        strides=[int(v) for v in strides],
                                        rates=[int(v) for v in rates],
                                        auto_pad=str(auto_pad).lower()), name)
