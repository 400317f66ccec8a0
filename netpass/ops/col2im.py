"""Col2Im (OpenVINO opset15; ONNX 18): sums sliding blocks back into an image, the inverse
layout of an unfold. Input ``[N, C * prod(kernel), L]`` (or without N), ``output_size`` and
``kernel_size`` as 1-D integer inputs; block ``l`` (row-major over the block grid of the padded
image) adds its ``C`` x kernel values at its window; the padding is cropped. OpenVINO's op has
two spatial axes; netpass takes any number (as ONNX does), the IR then holds what OpenVINO
reads for two.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from .base import set_name, to_output
from .registry import onnx_export, onnx_rule
from .shape_inputs import const_ints

__all__ = ["col2im"]


class Col2Im(Node):
    type_name = "Col2Im"
    version = "opset15"
    ATTRS = {"strides": [], "dilations": [], "pads_begin": [], "pads_end": []}
    SHAPE_INFER_INPUTS = (1, 2)

    def _lists(self, n: int) -> tuple[list[int], list[int], list[int], list[int]]:
        def get(name: str, default: int) -> list[int]:
            v = list(getattr(self, name) or [default] * n)
            self.check(len(v) == n, "{} has {} values for {} spatial axes", name, len(v), n)
            return [int(x) for x in v]
        return get("strides", 1), get("dilations", 1), get("pads_begin", 0), get("pads_end", 0)

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 3, "expects data, output_size and kernel_size")
        ps = self.get_input_partial_shape(0)
        self.check(not ps.rank_is_static or len(ps) in (2, 3),
                   "data must be [N, C*prod(kernel), L] or [C*prod(kernel), L], got {}", ps)
        size, kernel = const_ints(self, 1), const_ints(self, 2)
        n = len(kernel) if kernel is not None else len(size) if size is not None else None
        if n is None or not ps.rank_is_static:
            self.set_output_type(0, self.get_input_element_type(0), PartialShape(None))
            return
        self._lists(n)
        batch = [ps[0]] if len(ps) == 3 else []
        channels = Dimension()
        if kernel is not None and ps[-2].is_static:
            k = int(np.prod(kernel))
            self.check(ps[-2].min % k == 0, "dim {} is not a multiple of the kernel's {} "
                       "elements", ps[-2].min, k)
            channels = Dimension(ps[-2].min // k)
        spatial = [Dimension(s) for s in size] if size is not None else [Dimension()] * n
        self.set_output_type(0, self.get_input_element_type(0),
                             PartialShape(batch + [channels] + spatial))

    def evaluate(self, inputs: Sequence[Any]) -> list[Any]:
        x = np.asarray(inputs[0])
        size = [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
        kernel = [int(v) for v in np.asarray(inputs[2]).reshape(-1)]
        n = len(kernel)
        strides, dilations, pb, pe = self._lists(n)
        batched = x.ndim == 3
        xb = x if batched else x[None]
        k = int(np.prod(kernel))
        c = xb.shape[1] // k
        padded = [s + b + e for s, b, e in zip(size, pb, pe)]
        grid = [(p - d * (kk - 1) - 1) // st + 1
                for p, d, kk, st in zip(padded, dilations, kernel, strides)]
        if int(np.prod(grid)) != xb.shape[2]:
            raise ValueError(f"{xb.shape[2]} blocks given, the padded image {padded} holds "
                             f"{grid}")
        blocks = xb.reshape(xb.shape[0], c, *kernel, *grid)
        out = np.zeros((xb.shape[0], c, *padded), dtype=np.float64)
        lead: tuple[Any, ...] = (slice(None), slice(None))
        for offset in itertools.product(*(range(kk) for kk in kernel)):
            window = tuple(slice(o * d, o * d + (g - 1) * st + 1, st)
                           for o, d, g, st in zip(offset, dilations, grid, strides))
            out[lead + window] += blocks[lead + tuple(offset)]
        crop = tuple(slice(b, b + s) for b, s in zip(pb, size))
        y = out[lead + crop].astype(x.dtype)
        return [y if batched else y[0]]


def col2im(data: Any, output_size: Any, kernel_size: Any, strides: Any = None,
           dilations: Any = None, pads_begin: Any = None, pads_end: Any = None,
           name: str | None = None) -> Node:
    """Col2Im-15 (OpenVINO's ``opset15.col2im``): the blocks of ``data`` summed back into an
    image of ``output_size`` (windows of ``kernel_size``, strides, dilations, pads)."""
    def ints(v: Any) -> list[int]:
        return [] if v is None else [int(x) for x in np.asarray(v).reshape(-1)]
    return set_name(Col2Im([to_output(data), to_output(np.asarray(output_size, np.int64)),
                            to_output(np.asarray(kernel_size, np.int64))],
                           strides=ints(strides), dilations=ints(dilations),
                           pads_begin=ints(pads_begin), pads_end=ints(pads_end)), name)


@onnx_rule("Col2Im", since=18)
def _import_col2im(ctx):
    pads = ctx.attr("pads", [])
    half = len(pads) // 2
    return Col2Im(ctx.inputs[:3], strides=ctx.attr("strides", []),
                  dilations=ctx.attr("dilations", []), pads_begin=pads[:half],
                  pads_end=pads[half:])


@onnx_export(Col2Im, opset=18)
def _export_col2im(node, ectx):
    n = len(node.pads_begin or node.strides or node.dilations or [])
    attrs: dict[str, Any] = {}
    if node.strides:
        attrs["strides"] = list(node.strides)
    if node.dilations:
        attrs["dilations"] = list(node.dilations)
    if node.pads_begin or node.pads_end:
        attrs["pads"] = list(node.pads_begin or [0] * n) + list(node.pads_end or [0] * n)
    ectx.add_node("Col2Im", ectx.inputs(node), ectx.outputs(node), **attrs)
