"""Helpers the normalization ops share: axes inputs and ONNX attributes, per-channel
vectors."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node, Output
from ...errors import UnsupportedOpError
from ..base import normalize_axis, to_output
from ..movement import unsqueeze


def axes_of(node: Node, i: int, rank: int) -> tuple[int, ...] | None:
    value = node.input_constant(i)
    if value is None:
        return None
    flat = np.asarray(value).reshape(-1)
    return tuple(sorted({normalize_axis(node, int(a), rank) for a in flat}))


def runtime_axes(axes: np.ndarray, rank: int) -> tuple[int, ...]:
    return tuple(sorted({int(a) % max(rank, 1) for a in np.asarray(axes).reshape(-1)}))


def check_axes_input(node: Node, i: int) -> None:
    ps = node.get_input_partial_shape(i)
    et = node.get_input_element_type(i)
    node.check(not ps.rank_is_static or len(ps) <= 1, "axes (input {}) must be 1-D, got {}", i, ps)
    node.check(et.is_dynamic or et.is_integral, "axes (input {}) must be integers, got {}", i, et)
    rank = node.get_input_partial_shape(0)
    if rank.rank_is_static:
        axes_of(node, i, len(rank))  # range check


def axes_value(axes: Any) -> Output:
    if isinstance(axes, (Node, Output)):
        return to_output(axes)
    return to_output(np.asarray(axes, dtype=np.int64).reshape(-1))


def i64(values: Any) -> Output:
    return to_output(np.asarray(values, dtype=np.int64))


def static_rank(ctx: Any, x: Output, what: str) -> int:
    ps = x.partial_shape
    if not ps.rank_is_static:
        ctx.error(f"{what} needs data of known rank")
    return len(ps)


def per_channel(ctx: Any, v: Output, rank: int) -> Output:
    """A [C] tensor shaped [C, 1, ..., 1] to broadcast over data of ``rank`` (N, C, ...)."""
    shape = (-1,) + (1,) * (rank - 2)
    if v.value is not None:
        return to_output(v.value.reshape(shape), element_type=v.element_type)
    return unsqueeze(v, list(range(1, rank - 1))).output(0)


def constant_axes(node: Node) -> list[int]:
    axes = node.input_constant(1)
    if axes is None:
        raise UnsupportedOpError(node.type_name, "", 17, node.friendly_name,
                                 "ONNX opset 17 needs constant axes")
    return [int(a) for a in np.asarray(axes).reshape(-1)]


def onnx_axis(ctx: Any, rank: int) -> int:
    """The ONNX ``axis`` attribute (default -1) as a non-negative axis of data of ``rank``."""
    axis = ctx.attr("axis", -1)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        ctx.error(f"axis {ctx.attr('axis', -1)} out of range for rank {rank}")
    return axis


def merged_channels(node: Node, channels: Dimension | None,
                    vectors: tuple[tuple[int, str], ...]) -> Dimension | None:
    """``channels`` (dim 1 of the data, None when unknown) merged with the length of each 1-D
    per-channel input ``(index, name)``; a wrong rank or length is the node's error."""
    for i, what in vectors:
        ps = node.get_input_partial_shape(i)
        if not ps.rank_is_static:
            continue
        node.check(len(ps) == 1, "{} (input {}) must be 1-D, got {}", what, i, ps)
        if channels is not None:
            merged = channels.merge(ps[0])
            node.check(merged is not None,
                       "{} (input {}) has {} channels, data has {}", what, i, ps[0], channels)
            channels = merged
    return channels
