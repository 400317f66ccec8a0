"""Adaptive pooling: AdaptiveAvgPool and AdaptiveMaxPool (OpenVINO opset8, what OpenVINO's
PyTorch frontend writes for ``adaptive_avg_pool*d`` / ``adaptive_max_pool*d``). ONNX has no
such ops (its GlobalAveragePool is the output size 1 case).

Data is ``[N, C, *spatial]`` (1 to 3 spatial axes), the second input the output's spatial
sizes. Output cell ``i`` of an axis of input size ``D`` and output size ``O`` pools input
positions ``[floor(i * D / O), ceil((i + 1) * D / O))``: windows that tile the axis, of sizes
that differ by at most one, overlapping where ``D`` is not a multiple of ``O``.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import Type, i32, i64
from .base import set_name, to_output
from .shape_inputs import as_dim, check_shape_input, i64_operand, shape_values, vector_length

__all__ = ["adaptive_avg_pool", "adaptive_max_pool"]


def _bins(size: int, out: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` of each of ``out`` windows over an axis of ``size``."""
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


class _AdaptivePool(Node):
    """Inputs ``(data, output_shape)``; shape inference shared by both ops."""

    SHAPE_INFER_INPUTS = (1,)

    def _out_shape(self) -> PartialShape:
        self.check(self.get_input_size() == 2, "expects inputs (data, output_shape)")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "data must be a float tensor, got {}", et)
        check_shape_input(self, 1, "output_shape")
        data = self.get_input_partial_shape(0)
        n = vector_length(self, 1)
        if data.rank_is_static:
            self.check(3 <= len(data) <= 5, "data must be [N, C, *spatial] with 1 to 3 spatial "
                       "axes, got {}", data)
            self.check(n is None or n == len(data) - 2, "output_shape has {} elements for the "
                       "{} spatial axes of data {}", n, len(data) - 2, data)
            n = len(data) - 2
        if n is None:
            return PartialShape(None)
        sizes = shape_values(self, 1)
        if sizes is None:
            spatial = [Dimension() for _ in range(n)]
        else:
            for s in sizes:
                self.check(not isinstance(s, int) or s > 0, "output_shape {} must be positive",
                           sizes)
            spatial = [as_dim(s) for s in sizes]
        lead = list(data)[:2] if data.rank_is_static else [Dimension(), Dimension()]
        return PartialShape(lead + spatial)

    def _windows(self, x: np.ndarray, sizes: np.ndarray) -> tuple[list[int], Any]:
        """The output's spatial sizes, and each output cell's index with its input window
        flattened over the spatial axes ``[N, C, window]`` plus the window's flat positions."""
        outs = [int(s) for s in np.asarray(sizes).reshape(-1)]
        self.check(len(outs) == x.ndim - 2 and all(o > 0 for o in outs),
                   "output_shape {} does not fit data of shape {}", outs, x.shape)
        spatial = x.shape[2:]
        bins = [_bins(d, o) for d, o in zip(spatial, outs)]
        flat_pos = np.arange(int(np.prod(spatial))).reshape(spatial)

        def cells():
            for idx in itertools.product(*(range(o) for o in outs)):
                region = tuple(slice(*bins[a][i]) for a, i in enumerate(idx))
                win = x[(slice(None), slice(None)) + region]
                yield idx, win.reshape(x.shape[:2] + (-1,)), flat_pos[region].reshape(-1)
        return outs, cells()


class AdaptiveAvgPool(_AdaptivePool):
    """AdaptiveAvgPool-8: the mean of each adaptive window (see the module)."""

    type_name = "AdaptiveAvgPool"
    version = "opset8"

    def infer_types(self) -> None:
        self.set_output_type(0, self.get_input_element_type(0), self._out_shape())

    def evaluate(self, inputs):
        x = inputs[0]
        outs, cells = self._windows(x, inputs[1])
        y = np.empty(x.shape[:2] + tuple(outs), x.dtype)
        for idx, win, _ in cells:
            y[(Ellipsis,) + idx] = win.astype(np.float64).mean(axis=-1)
        return [y]


class AdaptiveMaxPool(_AdaptivePool):
    """AdaptiveMaxPool-8: the max of each adaptive window, and its position counted over the
    flattened spatial axes of the input (``index_element_type``); the first one on ties."""

    type_name = "AdaptiveMaxPool"
    version = "opset8"
    ATTRS = {"index_element_type": i64}
    index_element_type: Any

    def infer_types(self) -> None:
        self.index_element_type = Type.of(self.index_element_type)
        self.check(self.index_element_type in (i32, i64),
                   "index_element_type must be i32 or i64, got {}", self.index_element_type)
        shape = self._out_shape()
        self.set_output_type(0, self.get_input_element_type(0), shape)
        self.set_output_type(1, self.index_element_type, shape)

    def evaluate(self, inputs):
        x = inputs[0]
        outs, cells = self._windows(x, inputs[1])
        y = np.empty(x.shape[:2] + tuple(outs), x.dtype)
        at = np.empty(y.shape, self.index_element_type.dtype)
        for idx, win, pos in cells:
            arg = np.argmax(win, axis=-1)
            y[(Ellipsis,) + idx] = np.take_along_axis(win, arg[..., None], -1)[..., 0]
            at[(Ellipsis,) + idx] = pos[arg]
        return [y, at]


def adaptive_avg_pool(data: Any, output_shape: Any, name: str | None = None) -> Node:
    """AdaptiveAvgPool-8: ``data`` ``[N, C, *spatial]`` averaged over adaptive windows into the
    spatial sizes ``output_shape``."""
    return set_name(AdaptiveAvgPool([to_output(data), i64_operand(output_shape)]), name)


def adaptive_max_pool(data: Any, output_shape: Any, index_element_type: Any = "i64",
                      name: str | None = None) -> Node:
    """AdaptiveMaxPool-8: the max of ``data`` ``[N, C, *spatial]`` over adaptive windows into
    the spatial sizes ``output_shape``; outputs (values, indices over the flattened spatial
    axes, of ``index_element_type``)."""
    return set_name(AdaptiveMaxPool([to_output(data), i64_operand(output_shape)],
                                    index_element_type=Type.of(index_element_type)), name)
