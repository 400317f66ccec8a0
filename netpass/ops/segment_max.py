"""SegmentMax (OpenVINO opset16, TensorFlow's ``segment_max``): the maximum over runs of rows
that share a segment id. ONNX has no such op."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from .base import set_name, to_output
from .shape_inputs import as_dim, shape_values

__all__ = ["segment_max"]


class SegmentMax(Node):
    """SegmentMax-16: inputs ``(data, segment_ids[, num_segments])``; ``segment_ids`` is 1-D,
    non-decreasing, one id per row of ``data``. Output row ``s`` is the element-wise maximum
    of the rows with id ``s``; output ``[num_segments, *data.shape[1:]]`` (default: the last
    id + 1, a data-dependent shape). Segments without rows hold 0 (``fill_mode`` "zero") or
    the type's lowest value ("lowest"); ids at or past ``num_segments`` are dropped."""

    type_name = "SegmentMax"
    version = "opset16"
    ATTRS = {"fill_mode": "zero"}
    SHAPE_INFER_INPUTS = (1, 2)
    fill_mode: str

    def infer_types(self) -> None:
        n = self.get_input_size()
        self.check(n in (2, 3), "expects inputs (data, segment_ids[, num_segments]), got {}", n)
        self.fill_mode = str(self.fill_mode).lower()
        self.check(self.fill_mode in ("zero", "lowest"), "fill_mode must be zero or lowest, "
                   "got {}", self.fill_mode)
        for i, what in ((1, "segment_ids"), (2, "num_segments")):
            if i < n:
                et = self.get_input_element_type(i)
                self.check(et.is_dynamic or et.is_integral, "{} must be integer, got {}",
                           what, et)
        data, ids = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        self.check(not ids.rank_is_static or len(ids) == 1, "segment_ids must be 1-D, got shape "
                   "{}", ids)
        if data.rank_is_static:
            self.check(len(data) >= 1, "data must have rank 1 or more, got {}", data)
            self.check(not ids.rank_is_static or ids[0].compatible(data[0]), "segment_ids {} "
                       "needs one id per row of data {}", ids, data)
        segments = self._segments()
        shape = PartialShape([segments] + list(data)[1:]) if data.rank_is_static else \
            PartialShape(None)
        self.set_output_type(0, self.get_input_element_type(0), shape)

    def _segments(self) -> Dimension:
        if self.get_input_size() == 3:
            ps = self.get_input_partial_shape(2)
            self.check(not ps.rank_is_static or len(ps) == 0, "num_segments must be a scalar, "
                       "got shape {}", ps)
            value = shape_values(self, 2)
            if value and isinstance(value[0], int):
                self.check(value[0] >= 0, "num_segments must be >= 0, got {}", value[0])
            return as_dim(value[0]) if value else Dimension()
        ids = self.input_constant(1)
        if ids is None:
            return Dimension()
        flat = np.asarray(ids).reshape(-1)
        return Dimension(int(flat.max()) + 1 if flat.size else 0)

    def evaluate(self, inputs):
        data = np.asarray(inputs[0])
        ids = np.asarray(inputs[1]).reshape(-1).astype(np.int64)
        self.check(len(ids) == data.shape[0], "segment_ids has {} ids for {} rows of data",
                   len(ids), data.shape[0])
        self.check(bool((ids >= 0).all()) and bool((np.diff(ids) >= 0).all()),
                   "segment_ids must be non-negative and sorted, got {}", ids.tolist()[:10])
        num = int(inputs[2]) if len(inputs) == 3 else (int(ids.max()) + 1 if ids.size else 0)
        if self.fill_mode == "zero":
            fill = 0
        elif data.dtype.kind == "f":
            fill = np.finfo(data.dtype).min
        else:
            fill = np.iinfo(data.dtype).min
        out = np.full((num,) + data.shape[1:], fill, data.dtype)
        for s in np.unique(ids[ids < num]):
            out[s] = data[ids == s].max(axis=0)
        return [out]


def segment_max(data: Any, segment_ids: Any, num_segments: Any = None, fill_mode: str = "zero",
                name: str | None = None) -> Node:
    """SegmentMax-16: the maximum of the rows of ``data`` per sorted ``segment_ids`` into
    ``num_segments`` rows (default: the last id + 1); empty segments get 0 (``fill_mode``
    "zero") or the lowest value ("lowest")."""
    ins = [to_output(data), to_output(segment_ids)]
    if num_segments is not None:
        ins.append(to_output(num_segments))
    return set_name(SegmentMax(ins, fill_mode=str(fill_mode).lower()), name)
