"""Reading the inputs that carry shapes, axes and indices: as constants, as partial values
(ints and Dimensions, so that dynamic dims keep their symbols) and as i64 graph values; shared by
the shape-consuming op families (movement, indexing, shape_ops...) and their ONNX export rules."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node, Output
from .base import to_output
from .registry import export_error


def shape_values(node: Node, i: int) -> list | None:
    """Elements of the 0/1-D shape-like input ``i``: ints where known, Dimensions where not."""
    v = node.input_constant(i)
    if v is not None:
        flat = np.asarray(v).reshape(-1)
        # (an integer array's elements as Python ints at C level; others one by one)
        return flat.tolist() if flat.dtype.kind in "iu" else [int(x) for x in flat]
    pv = node.input_partial_value(i)
    return list(pv) if pv is not None else None


def const_ints(node: Node, i: int) -> list[int] | None:
    """Input ``i`` as a flat list of python ints when fully known at compile time."""
    v = node.input_constant(i)
    return None if v is None else [int(x) for x in np.asarray(v).reshape(-1).tolist()]


def vector_length(node: Node, i: int) -> int | None:
    """Number of elements of a 0/1-D input when its shape says so (None when unknown)."""
    ps = node.get_input_partial_shape(i)
    if not ps.rank_is_static:
        return None
    node.check(len(ps) <= 1, "input {} must be a scalar or 1-D, got shape {}", i, ps)
    if len(ps) == 0:
        return 1
    return ps[0].min if ps[0].is_static else None


def as_dim(v: Any) -> Dimension:
    return v if isinstance(v, Dimension) else Dimension(int(v))


def check_shape_input(node: Node, i: int, what: str) -> None:
    # (the input's port read directly, messages only on failure: this runs for every input
    # carrying a shape, axes or indices of every such op inferred, ~40k times in reading the
    # 100k-node GNA graph)
    src = node._inputs[i]
    port = src.node._outs[src.index]
    et = port.et
    name = et.name
    if name != "dynamic" and name[0] not in "iu":
        node.fail("{} (input {}) must be integer, got {}", what, i, et)
    dims = port.ps._dims
    if dims is not None and len(dims) > 1:
        node.fail("{} (input {}) must be a scalar or 1-D, got shape {}", what, i, port.ps)


def pass_partial_value(node: Node, src: int = 0, out: int = 0) -> None:
    """Forward the partial value of input ``src`` when output ``out`` holds the same elements."""
    pv = node.input_partial_value(src)
    ps = node.get_output_partial_shape(out)
    if pv is not None and ps.rank_is_static and len(ps) <= 1:
        node.set_output_partial_value(out, pv)


def i64_operand(value: Any) -> Output:
    """A shape-like value: graph values pass through, python values become i64 Constants."""
    if isinstance(value, (Node, Output)):
        return to_output(value)
    return to_output(np.asarray(value, dtype=np.int64))


# ONNX's "to the end" for slice bounds.
INT64_MAX = (1 << 63) - 1


def export_const_ints(node: Node, i: int) -> list[int]:
    """Input ``i`` as ints, for an ONNX export rule that needs it constant."""
    v = const_ints(node, i)
    if v is None:
        export_error(node, f"input {i} must be constant")
    return v  # type: ignore[return-value]


def export_vector_length(node: Node, i: int) -> int:
    """Length of the 1-D input ``i``, for an ONNX export rule that needs it static."""
    n = vector_length(node, i)
    if n is None:
        export_error(node, f"input {i} must have a static shape")
    return n  # type: ignore[return-value]
