"""Spatial sampling: GridSample (OpenVINO opset9, here over any number of spatial axes as ONNX
20+ allows) and AffineGrid (ONNX 20), the pair of PyTorch's ``grid_sample`` and
``affine_grid``.

Grid values in ``[-1, 1]`` address the input's extent: with ``align_corners`` the centers of
the corner elements, without it their outer edges. The grid's last axis lists the coordinates
innermost axis first (x = width, then y = height, then z = depth).
"""
from __future__ import annotations

from itertools import product
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from .base import NETPASS_OPSET, set_name, to_output
from .registry import export_error, onnx_export, onnx_rule
from .shape_inputs import i64_operand

__all__ = ["grid_sample", "affine_grid"]

_CUBIC_A = -0.75  # Keys' cubic convolution, as PyTorch


def _denormalize(g: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    if align_corners:
        return (g + 1) / 2 * (size - 1)
    return ((g + 1) * size - 1) / 2


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``x`` folded back into ``[lo, hi]`` by reflections at the borders."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dist = np.where(below, lo - x, np.where(above, x - hi, 0))
    folds = np.floor(dist / span)
    rest = dist - folds * span
    even = folds % 2 == 0
    return np.where(below, np.where(even, lo + rest, hi - rest),
                    np.where(above, np.where(even, hi - rest, lo + rest), x))


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


class GridSample(Node):
    """Inputs ``(data [N, C, *spatial], grid [N, *out, len(spatial)])`` -> ``[N, C, *out]``.
    ``mode``: bilinear (linear on every axis), bicubic or nearest (ties to even);
    ``padding_mode``: zeros, border or reflection."""

    type_name = "GridSample"
    version = "opset9"
    ATTRS = {"align_corners": False, "mode": "bilinear", "padding_mode": "zeros"}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, grid)")
        self.check(self.mode in ("bilinear", "bicubic", "nearest"),
                   "mode must be bilinear, bicubic or nearest, got '{}'", self.mode)
        self.check(self.padding_mode in ("zeros", "border", "reflection"),
                   "padding_mode must be zeros, border or reflection, got '{}'", self.padding_mode)
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "data must be a float tensor, got {}", et)
        x, g = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        if not (x.rank_is_static and g.rank_is_static):
            self.set_output_type(0, et, PartialShape(None) if not g.rank_is_static else
                                 PartialShape([g[0], Dimension()] + list(g)[1:-1]))
            return
        self.check(len(x) >= 3 and len(g) == len(x), "data [N, C, *spatial] and grid "
                   "[N, *out, k] must have one rank, got {} and {}", x, g)
        self.check(g[-1].compatible(len(x) - 2), "grid's last axis must be {} (one coordinate "
                   "per spatial axis), got {}", len(x) - 2, g[-1])
        self.check(x[0].compatible(g[0]), "data batch {} and grid batch {} differ", x[0], g[0])
        batch = x[0].merge(g[0]) or x[0]
        self.set_output_type(0, et, PartialShape([batch, x[1]] + list(g)[1:-1]))

    def evaluate(self, inputs):
        x, grid = inputs
        sizes = x.shape[2:]
        nd = len(sizes)
        # coordinates per spatial axis (the grid lists them innermost first)
        coords = [_denormalize(grid[..., nd - 1 - k].astype(np.float64), sizes[k],
                               self.align_corners) for k in range(nd)]
        lo = [0.0 if self.align_corners else -0.5] * nd
        hi = [s - 1.0 if self.align_corners else s - 0.5 for s in sizes]
        if self.mode == "nearest":
            coords = [np.rint(c) for c in coords]
        for k in range(nd):  # coordinates outside the borders come back in first
            c = coords[k]
            outside = (c < lo[k]) | (c > hi[k])
            if self.padding_mode == "border":
                coords[k] = np.where(outside, np.clip(c, 0, sizes[k] - 1), c)
            elif self.padding_mode == "reflection":
                coords[k] = np.where(outside, _reflect(c, lo[k], hi[k]), c)
        taps = [self._taps(c, sizes[k], lo[k], hi[k]) for k, c in enumerate(coords)]
        n_idx = np.arange(x.shape[0]).reshape((-1,) + (1,) * (grid.ndim - 2))
        out = np.zeros((x.shape[0],) + grid.shape[1:-1] + (x.shape[1],), np.float64)
        for combo in product(*[range(len(t)) for t in taps]):
            weight = np.ones(grid.shape[:-1])
            index = []
            for k, j in enumerate(combo):
                idx, w = taps[k][j]
                weight = weight * w
                index.append(idx)
            at = (n_idx, *index)
            picked = np.moveaxis(x, 1, -1)[at]  # [N, *out, C]
            out += weight[..., None] * picked
        return [np.moveaxis(out, -1, 1).astype(x.dtype)]

    def _taps(self, c: np.ndarray, size: int, lo: float, hi: float) -> list:
        """(index, weight) per tap along one axis; weights are 0 where a tap falls outside
        under zeros padding."""
        if self.mode == "nearest":
            offsets, base = [0], c.astype(np.int64)
            weights = [np.ones(c.shape)]
        else:
            base = np.floor(c).astype(np.int64)
            t = c - base
            if self.mode == "bilinear":
                offsets, weights = [0, 1], [1 - t, t]
            else:
                offsets, weights = [-1, 0, 1, 2], _cubic_weights(t)
        taps = []
        for off, w in zip(offsets, weights):
            i = base + off
            if self.padding_mode == "zeros":
                w = np.where((i >= 0) & (i < size), w, 0)
                i = np.clip(i, 0, size - 1)
            elif self.padding_mode == "border":
                i = np.clip(i, 0, size - 1)
            else:
                i = np.clip(np.trunc(_reflect(i.astype(np.float64), lo, hi)).astype(np.int64),
                            0, size - 1)
            taps.append((i, w))
        return taps


class AffineGrid(Node):
    """Inputs ``(theta [N, k, k + 1], size [N, C, *spatial])`` (k = 2 or 3 spatial axes) ->
    the sampling grid ``[N, *spatial, k]`` of the affine maps ``theta``, for GridSample."""

    type_name = "AffineGrid"
    version = NETPASS_OPSET
    ATTRS = {"align_corners": False}
    SHAPE_INFER_INPUTS = (1,)

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (theta, size)")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "theta must be a float tensor, got {}", et)
        theta = self.get_input_partial_shape(0)
        size = self.input_partial_value(1)
        if size is None:
            k = theta[1] if theta.rank_is_static else Dimension()
            spatial = PartialShape(None) if not k.is_static else \
                PartialShape([theta[0]] + [Dimension()] * k.get_length() + [k])
            self.set_output_type(0, et, spatial)
            return
        self.check(len(size) in (4, 5), "size must be [N, C, H, W] or [N, C, D, H, W], got {}",
                   list(size))
        dims = [d if isinstance(d, Dimension) else Dimension(int(d)) for d in size]
        n_spatial = len(size) - 2
        if theta.rank_is_static:
            self.check(len(theta) == 3 and theta[1].compatible(n_spatial)
                       and theta[2].compatible(n_spatial + 1),
                       "theta must be [N, {}, {}] for {}, got {}", n_spatial, n_spatial + 1,
                       list(size), theta)
        self.set_output_type(0, et, PartialShape([dims[0]] + dims[2:] + [Dimension(n_spatial)]))

    def evaluate(self, inputs):
        theta, size = inputs
        spatial = [int(s) for s in np.asarray(size).reshape(-1)[2:]]
        axes = []
        for n in spatial:
            if self.align_corners:
                axes.append(np.linspace(-1, 1, n) if n > 1 else np.zeros(1))
            else:
                axes.append((np.arange(n) * 2 + 1) / n - 1)
        mesh = np.meshgrid(*axes, indexing="ij")  # spatial order: (D,) H, W
        base = np.stack([*mesh[::-1], np.ones_like(mesh[0])], axis=-1)  # x, y, (z), 1
        grid = np.einsum("...j,nij->n...i", base, theta.astype(np.float64))
        return [grid.astype(theta.dtype)]


# -- factories ---------------------------------------------------------------------------------

def grid_sample(data: Any, grid: Any, attributes: dict | None = None,
                name: str | None = None) -> Node:
    """OpenVINO's ``opset9.grid_sample(data, grid, attributes)`` (align_corners, mode,
    padding_mode)."""
    return set_name(GridSample([to_output(data), to_output(grid)], **dict(attributes or {})),
                    name)


def affine_grid(theta: Any, size: Any, align_corners: bool = False,
                name: str | None = None) -> Node:
    """AffineGrid: the sampling grid ``[N, *spatial, k]`` of the affine maps ``theta``
    (``[N, k, k + 1]``) over an output of ``size`` ``[N, C, *spatial]``, for GridSample."""
    return set_name(AffineGrid([to_output(theta), i64_operand(size)],
                               align_corners=align_corners), name)


# -- ONNX import -------------------------------------------------------------------------------

_ONNX_MODES = {"linear": "bilinear", "bilinear": "bilinear", "cubic": "bicubic",
               "bicubic": "bicubic", "nearest": "nearest"}


def _import_grid_sample(ctx: Any, spatial_any: bool):
    mode = ctx.attr("mode", "linear" if ctx.opset >= 20 else "bilinear")
    if mode not in _ONNX_MODES:
        ctx.error(f"unknown mode '{mode}'")
    x = ctx.inputs[0]
    if not spatial_any and x.partial_shape.rank_is_static and len(x.partial_shape) != 4:
        ctx.error("GridSample before opset 20 takes 4-D data")
    return GridSample(ctx.inputs[:2], align_corners=bool(ctx.attr("align_corners", 0)),
                      mode=_ONNX_MODES[mode], padding_mode=ctx.attr("padding_mode", "zeros"))


onnx_rule("GridSample", since=16)(lambda ctx: _import_grid_sample(ctx, False))
onnx_rule("GridSample", since=20)(lambda ctx: _import_grid_sample(ctx, True))
onnx_rule("AffineGrid", since=20)(lambda ctx: AffineGrid(
    ctx.inputs[:2], align_corners=bool(ctx.attr("align_corners", 0))))


# -- ONNX export -------------------------------------------------------------------------------

def _grid_sample_opset(node: Node) -> int:
    ps = node.get_input_partial_shape(0)
    return 16 if ps.rank_is_static and len(ps) == 4 else 20


@onnx_export(GridSample, opset=_grid_sample_opset)
def _export_grid_sample(node, ectx):
    mode = node.mode
    if ectx.opset >= 20:
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    elif node.get_input_partial_shape(0).rank_is_static is False:
        export_error(node, "ONNX GridSample needs data of known rank")
    ectx.add_node("GridSample", ectx.inputs(node), ectx.outputs(node),
                  align_corners=int(node.align_corners), mode=mode,
                  padding_mode=node.padding_mode)


@onnx_export(AffineGrid, opset=20)
def _export_affine_grid(node, ectx):
    ectx.add_node("AffineGrid", ectx.inputs(node), ectx.outputs(node),
                  align_corners=int(node.align_corners))
