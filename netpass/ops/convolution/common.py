"""What the forward and backprop convolutions share: the base class (attributes, pads, element
types) and the ONNX weight and bias handling."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.boundary import Constant
from ...core.dimension import Dimension
from ...core.node import Node, Output
from ...errors import UnsupportedOpError
from ..base import to_output
from ..elementwise import Add
from ..movement import Reshape
from .window import normalize_auto_pad, spatial_list


class _ConvBase(Node):
    """Attributes and spatial geometry common to the four convolution ops."""

    ATTRS = {"strides": [], "pads_begin": [], "pads_end": [], "dilations": [],
             "auto_pad": "explicit"}
    auto_pad: Any
    # Leading filter dims before the kernel: 2 ([O, I]) or 3 ([G, O/G, I/G]).
    FILTER_LEAD = 2

    def _spatial_rank(self) -> int | None:
        data = self.get_input_partial_shape(0)
        filt = self.get_input_partial_shape(1)
        ranks = []
        if data.rank_is_static:
            ranks.append(("data", len(data) - 2))
        if filt.rank_is_static:
            ranks.append(("filters", len(filt) - self.FILTER_LEAD))
        for name in ("strides", "dilations", "pads_begin", "pads_end"):
            if getattr(self, name):
                ranks.append((name, len(getattr(self, name))))
        if not ranks:
            return None
        n = ranks[0][1]
        for what, r in ranks:
            self.check(r == n, f"{what} implies {r} spatial axes but {ranks[0][0]} implies {n}")
        self.check(1 <= n <= 3, "expected 1 to 3 spatial axes, got {} (data rank {})", n, data)
        return n

    def _geometry(self, n: int) -> None:
        """Normalize the attributes to ``n`` spatial axes (OpenVINO writes them all to IR)."""
        self.auto_pad = normalize_auto_pad(self, self.auto_pad)
        self.strides = spatial_list(self, "strides", n, 1)
        self.dilations = spatial_list(self, "dilations", n, 1)
        self.pads_begin = spatial_list(self, "pads_begin", n, 0)
        self.pads_end = spatial_list(self, "pads_end", n, 0)
        self.check(all(s >= 1 for s in self.strides), "strides {} must be >= 1", self.strides)
        self.check(all(d >= 1 for d in self.dilations), "dilations {} must be >= 1", self.dilations)

    def _kernel_dims(self, n: int) -> list[Dimension]:
        filt = self.get_input_partial_shape(1)
        if not filt.rank_is_static:
            return [Dimension() for _ in range(n)]
        return list(filt)[self.FILTER_LEAD:]

    def _extents(self, n: int) -> list[Dimension]:
        kernel = self._kernel_dims(n)
        self.check(all(k.max >= 1 for k in kernel), "kernel {} has an empty axis", kernel)
        return [Dimension((k.min - 1) * d + 1) if k.is_static else Dimension()
                for k, d in zip(kernel, self.dilations)]


def _ints(v: Any) -> list[int]:
    return [] if v is None else [int(x) for x in np.asarray(v).reshape(-1)]


def _conv_attrs(strides, pads_begin, pads_end, dilations, auto_pad) -> dict[str, Any]:
    return {"strides": _ints(strides), "pads_begin": _ints(pads_begin),
            "pads_end": _ints(pads_end), "dilations": _ints(dilations),
            "auto_pad": (auto_pad or "explicit").lower()}


def reshape_to(ctx, value: Output, shape: Sequence[int]) -> Output:
    """``value`` reshaped to ``shape`` (``-1`` allowed): folded for Constants, a Reshape
    otherwise."""
    const = value.value
    if const is not None:
        return Constant([], value=np.asarray(const).reshape(shape),
                        element_type=value.element_type).output(0)
    return Reshape([value, to_output(np.asarray(shape, dtype=np.int64))],
                   special_zero=False).output(0)


def add_channel_bias(ctx, y: Output, bias: Output, n: int) -> Output:
    """``y + bias`` with a 1-D bias over axis 1 of ``[N, C, *spatial]``."""
    return Add([y, reshape_to(ctx, bias, [1, -1] + [1] * n)]).output(0)


def _group_filters(ctx, w: Output, groups: int) -> Output:
    """ONNX grouped weights to OpenVINO's ``[G, ...]`` form.

    Conv weights ``[O, I/G, *k]`` become ``[G, O/G, I/G, *k]``; ConvTranspose weights
    ``[I, O/G, *k]`` become ``[G, I/G, O/G, *k]``: both split the leading axis by G.
    """
    ps = w.partial_shape
    if not ps.rank_is_static or not all(d.is_static for d in list(ps)[1:]):
        ctx.error(f"grouped weights need a static shape beyond the first axis, got {ps}")
    rest = [d.min for d in list(ps)[1:]]
    if ps[0].is_static and ps[0].min % groups:
        ctx.error(f"weights' first axis {ps[0].min} is not divisible by group={groups}")
    return reshape_to(ctx, w, [groups, -1] + rest)


def _export_filters(node: Node, ectx, name: str, shape: list[int]) -> str:
    """The filters input reshaped to ONNX's ungrouped layout."""
    w = node.input_value(1)
    if w.value is not None:
        return ectx.constant(np.asarray(w.value).reshape(shape))
    out = ectx.fresh(f"{node.friendly_name}/weights")
    ectx.add_node("Reshape", [name, ectx.constant(np.asarray(shape, dtype=np.int64))], [out])
    return out


def _static_filter_shape(node: Node) -> list[int]:
    ps = node.get_input_partial_shape(1)
    if not ps.is_static:
        raise UnsupportedOpError(node.type_name, node_name=node.friendly_name,
                                 reason=f"ONNX export needs static filters, got {ps}")
    return list(ps.to_shape())
