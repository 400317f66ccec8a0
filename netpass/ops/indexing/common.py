"""Checks the indexing ops share: scalar axis inputs, integer index inputs, constant axes for
export."""
from __future__ import annotations

from ...core.node import Node
from ..base import normalize_axis
from ..registry import export_error
from ..shape_inputs import check_shape_input, const_ints


def _scalar_axis(node: Node, i: int, rank: int | None) -> int | None:
    check_shape_input(node, i, "axis")
    axis = const_ints(node, i)
    if axis is None or rank is None:
        return None
    node.check(len(axis) == 1, "axis must be a scalar, got {}", axis)
    return normalize_axis(node, axis[0], rank)


def _check_indices(node: Node, i: int) -> None:
    et = node.get_input_element_type(i)
    node.check(et.is_dynamic or et.is_integral, "indices (input {}) must be integer, got {}", i, et)


def _const_axis(node: Node, i: int) -> int:
    v = const_ints(node, i)
    if v is None:
        export_error(node, f"axis (input {i}) must be constant")
    return v[0]  # type: ignore[index]
