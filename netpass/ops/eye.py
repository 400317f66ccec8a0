"""Eye (OpenVINO opset9, ``torch.eye``): identity-like matrices, ones on one diagonal.

ONNX's EyeLike takes its shape from a tensor and is imported as a constant or a comparison of
index grids (``ops/shape_ops.py``); Eye takes the sizes as values."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import Type
from .base import set_name
from .shape_inputs import as_dim, i64_operand, shape_values

__all__ = ["eye"]

_NAMES = ("num_rows", "num_columns", "diagonal_index", "batch_shape")


class Eye(Node):
    """Eye-9: inputs ``(num_rows, num_columns, diagonal_index[, batch_shape])``, integer
    scalars (or 1-element 1-D) and a 1-D batch shape; output ``[*batch_shape, num_rows,
    num_columns]`` of ``output_type``, one where ``column - row == diagonal_index`` (above
    the main diagonal when positive), zero elsewhere."""

    type_name = "Eye"
    version = "opset9"
    ATTRS = {"output_type": "f32"}
    SHAPE_INFER_INPUTS = (0, 1, 3)
    output_type: Any

    def infer_types(self) -> None:
        n = self.get_input_size()
        self.check(n in (3, 4), "expects inputs (num_rows, num_columns, diagonal_index"
                   "[, batch_shape]), got {}", n)
        self.output_type = Type.of(self.output_type)
        for i in range(n):
            et, ps = self.get_input_element_type(i), self.get_input_partial_shape(i)
            self.check(et.is_dynamic or et.is_integral, "{} (input {}) must be integer, got {}",
                       _NAMES[i], i, et)
            if i < 3:
                self.check(not ps.rank_is_static or len(ps) == 0 or
                           (len(ps) == 1 and ps[0].compatible(1)),
                           "{} must be a scalar or 1 element, got shape {}", _NAMES[i], ps)
            else:
                self.check(not ps.rank_is_static or len(ps) == 1,
                           "batch_shape must be 1-D, got shape {}", ps)
        dims = []
        for i in (0, 1):
            v = shape_values(self, i)
            if v and isinstance(v[0], int):
                self.check(v[0] >= 0, "{} must be >= 0, got {}", _NAMES[i], v[0])
            dims.append(as_dim(v[0]) if v else Dimension())
        batch = self._batch()
        self.set_output_type(0, self.output_type,
                             PartialShape(None) if batch is None else PartialShape(batch + dims))

    def _batch(self) -> list | None:
        """The batch dims: known values, dynamic dims of a known count, or None (any rank)."""
        if self.get_input_size() < 4:
            return []
        values = shape_values(self, 3)
        if values is not None:
            return [as_dim(v) for v in values]
        ps = self.get_input_partial_shape(3)
        if ps.rank_is_static and ps[0].is_static:
            return [Dimension() for _ in range(ps[0].min)]
        return None

    def evaluate(self, inputs):
        rows, cols, k = (int(np.asarray(v).reshape(-1)[0]) for v in inputs[:3])
        batch = [int(b) for b in np.asarray(inputs[3]).reshape(-1)] if len(inputs) > 3 else []
        self.check(rows >= 0 and cols >= 0 and all(b >= 0 for b in batch),
                   "sizes must be >= 0, got rows {}, columns {}, batch {}", rows, cols, batch)
        m = np.eye(rows, cols, k, dtype=self.output_type.dtype)
        return [np.broadcast_to(m, tuple(batch) + m.shape).copy()]


def eye(num_rows: Any, num_columns: Any, diagonal_index: Any, output_type: Any,
        batch_shape: Any = None, name: str | None = None) -> Node:
    """Eye-9: ``[*batch_shape, num_rows, num_columns]`` of ``output_type`` with ones where
    ``column - row == diagonal_index``; python values become i64 Constants."""
    ins = [i64_operand(v) for v in (num_rows, num_columns, diagonal_index)]
    if batch_shape is not None:
        ins.append(i64_operand(batch_shape))
    return set_name(Eye(ins, output_type=Type.of(output_type)), name)
