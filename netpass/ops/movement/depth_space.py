"""DepthToSpace and SpaceToDepth: move blocks between channels and space."""
from __future__ import annotations

from typing import Any

from ...core.node import Node
from ...core.shape import PartialShape
from ..base import set_name, to_output
from ..registry import onnx_export, onnx_rule
from ..shape_inputs import export_error

__all__ = ["depth_to_space", "space_to_depth"]


class DepthToSpace(Node):
    """DepthToSpace v0: channels into ``block_size`` blocks of every spatial axis;
    ``blocks_first`` (ONNX DCR) or ``depth_first`` (ONNX CRD)."""

    type_name = "DepthToSpace"
    version = "opset1"
    ATTRS = {"block_size": 1, "mode": "blocks_first"}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.check(self.mode in ("blocks_first", "depth_first"), "unknown mode '{}'", self.mode)
        bs = int(self.block_size)
        self.check(bs > 0, "block_size must be positive, got {}", bs)
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        self.check(len(data) >= 3, "input rank must be >= 3, got {}", data)
        k = len(data) - 2
        div = bs ** k
        c = data[1]
        if c.is_static:
            self.check(c.min % div == 0, f"channels {c.min} not divisible by block_size^{k}={div}")
        self.set_output_type(0, et, PartialShape(
            [data[0], c // div] + [d * bs for d in data.dims[2:]]))

    def evaluate(self, inputs):
        x = inputs[0]
        bs, k = int(self.block_size), x.ndim - 2
        n, c, sp = x.shape[0], x.shape[1], list(x.shape[2:])
        c2 = c // bs ** k
        if self.mode == "blocks_first":
            y = x.reshape([n] + [bs] * k + [c2] + sp)
            order = [0, k + 1] + [a for i in range(k) for a in (k + 2 + i, 1 + i)]
        else:
            y = x.reshape([n, c2] + [bs] * k + sp)
            order = [0, 1] + [a for i in range(k) for a in (k + 2 + i, 2 + i)]
        return [y.transpose(order).reshape([n, c2] + [d * bs for d in sp])]


class SpaceToDepth(Node):
    """SpaceToDepth v0: ``block_size`` blocks of every spatial axis into channels."""

    type_name = "SpaceToDepth"
    version = "opset1"
    ATTRS = {"block_size": 1, "mode": "blocks_first"}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.check(self.mode in ("blocks_first", "depth_first"), "unknown mode '{}'", self.mode)
        bs = int(self.block_size)
        self.check(bs > 0, "block_size must be positive, got {}", bs)
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        self.check(len(data) >= 3, "input rank must be >= 3, got {}", data)
        k = len(data) - 2
        for i, d in enumerate(data.dims[2:]):
            if d.is_static:
                self.check(d.min % bs == 0, f"spatial dim {i + 2} ({d.min}) not divisible by {bs}")
        self.set_output_type(0, et, PartialShape(
            [data[0], data[1] * bs ** k] + [d // bs for d in data.dims[2:]]))

    def evaluate(self, inputs):
        x = inputs[0]
        bs, k = int(self.block_size), x.ndim - 2
        n, c, sp = x.shape[0], x.shape[1], list(x.shape[2:])
        y = x.reshape([n, c] + [v for d in sp for v in (d // bs, bs)])
        blocks = [3 + 2 * i for i in range(k)]
        spatial = [2 + 2 * i for i in range(k)]
        order = [0] + blocks + [1] + spatial if self.mode == "blocks_first" else \
            [0, 1] + blocks + spatial
        return [y.transpose(order).reshape([n, c * bs ** k] + [d // bs for d in sp])]


def depth_to_space(node: Any, mode: str, block_size: int = 1, name: str | None = None) -> Node:
    """DepthToSpace-1: moves blocks of ``block_size`` x ``block_size`` (per spatial dim) from the
    channel dim of ``node`` (``[N, C, *spatial]``) into space; ``mode`` "blocks_first" or
    "depth_first" says how the channel index splits."""
    return set_name(DepthToSpace([to_output(node)], mode=str(mode).lower(),
                                 block_size=int(block_size)), name)


def space_to_depth(data: Any, mode: str, block_size: int = 1, name: str | None = None) -> Node:
    """SpaceToDepth-1: the inverse of :func:`depth_to_space`: blocks of ``block_size`` per spatial
    dim move into the channel dim, ``mode`` "blocks_first" or "depth_first"."""
    return set_name(SpaceToDepth([to_output(data)], mode=str(mode).lower(),
                                 block_size=int(block_size)), name)


@onnx_rule("DepthToSpace")
def _import_depth_to_space(ctx):
    mode = ctx.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        ctx.error(f"unknown mode '{mode}'")
    return DepthToSpace([ctx.inputs[0]], block_size=ctx.attr("blocksize", 1),
                        mode="blocks_first" if mode == "DCR" else "depth_first").output(0)


@onnx_rule("SpaceToDepth")
def _import_space_to_depth(ctx):
    mode = ctx.attr("mode", "DCR")  # the attribute exists from opset 28 on
    if mode not in ("DCR", "CRD"):
        ctx.error(f"unknown mode '{mode}'")
    return SpaceToDepth([ctx.inputs[0]], block_size=ctx.attr("blocksize", 1),
                        mode="blocks_first" if mode == "DCR" else "depth_first").output(0)


@onnx_export(DepthToSpace)
def _export_depth_to_space(node, ectx):
    ectx.add_node("DepthToSpace", ectx.inputs(node), ectx.outputs(node),
                  blocksize=int(node.block_size),
                  mode="DCR" if node.mode == "blocks_first" else "CRD")


@onnx_export(SpaceToDepth)
def _export_space_to_depth(node, ectx):
    if node.mode != "blocks_first":
        export_error(node, "ONNX SpaceToDepth has only the blocks_first order before opset 28")
    ectx.add_node("SpaceToDepth", ectx.inputs(node), ectx.outputs(node),
                  blocksize=int(node.block_size))
