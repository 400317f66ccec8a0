"""SliceScatter (OpenVINO opset15, ``torch.slice_scatter`` and the in-place slice
assignments OpenVINO's PyTorch frontend converts): ``data`` with the region Slice-8 would read
replaced by ``updates``. ONNX has no such op."""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ...core.node import Node
from ..base import normalize_axis, set_name, to_output
from ..shape_inputs import check_shape_input, const_ints, i64_operand
from .slice import python_slice, slice_bounds

__all__ = ["slice_scatter"]

_NAMES = ("data", "updates", "start", "stop", "step", "axes")


class SliceScatter(Node):
    """SliceScatter-15: inputs ``(data, updates, start, stop, step[, axes])``; the output is
    ``data`` with ``output[slice] = updates``, the slice as Slice-8 reads it (numpy clamping,
    negative steps, axes in any order); ``updates`` has that slice's shape."""

    type_name = "SliceScatter"
    version = "opset15"

    def _index(self, shape: tuple[int, ...], start: list[int], stop: list[int],
               step: list[int], axes: list[int] | None) -> tuple[builtins.slice, ...]:
        """The numpy index of the region, after checking the parameters."""
        n = len(start)
        self.check(len(stop) == n and len(step) == n, "start, stop and step lengths differ: "
                   "{}, {}, {}", n, len(stop), len(step))
        self.check(all(s != 0 for s in step), "step must be non-zero, got {}", step)
        axes = list(range(n)) if axes is None else axes
        self.check(len(axes) == n, "axes {} must have {} elements", axes, n)
        index = [builtins.slice(None)] * len(shape)
        seen: set[int] = set()
        for b, e, s, a in zip(start, stop, step, axes):
            a = normalize_axis(self, a, len(shape))
            self.check(a not in seen, "repeated axis {} in axes {}", a, axes)
            seen.add(a)
            lo, hi, _ = slice_bounds(shape[a], b, e, s)
            index[a] = python_slice(lo, hi, s)
        return tuple(index)

    def infer_types(self) -> None:
        n = self.get_input_size()
        self.check(n in (5, 6), "expects inputs (data, updates, start, stop, step[, axes]), "
                   "got {}", n)
        for i in range(2, n):
            check_shape_input(self, i, _NAMES[i])
        et = self.get_input_element_type(0)
        ut = self.get_input_element_type(1)
        self.check(et.is_dynamic or ut.is_dynamic or et is ut, "updates type {} differs from "
                   "data's {}", ut, et)
        data, updates = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        if data.rank_is_static and updates.rank_is_static:
            self.check(len(data) == len(updates), "updates {} must have data's rank {}",
                       updates, len(data))
        params = [const_ints(self, i) for i in range(2, 5)]
        axes = const_ints(self, 5) if n == 6 else None
        if data.is_static and all(p is not None for p in params) and (n == 5 or axes):
            start, stop, step = params
            index = self._index(data.to_shape(), start, stop, step, axes)  # type: ignore[arg-type]
            region = np.empty(data.to_shape(), np.bool_)[index].shape
            self.check(updates.compatible(region), "updates shape {} differs from the slice's {}",
                       updates, list(region))
        self.set_output_type(0, et, data)

    def evaluate(self, inputs):
        data, updates = inputs[0], inputs[1]
        start, stop, step = ([int(v) for v in np.asarray(a).reshape(-1)] for a in inputs[2:5])
        axes = [int(a) for a in np.asarray(inputs[5]).reshape(-1)] if len(inputs) == 6 else None
        index = self._index(data.shape, start, stop, step, axes)
        out = data.copy()
        self.check(out[index].shape == updates.shape, "updates shape {} differs from the "
                   "slice's {}", list(updates.shape), list(out[index].shape))
        out[index] = updates
        return [out]


def slice_scatter(data: Any, updates: Any, start: Any, stop: Any, step: Any, axes: Any = None,
                  name: str | None = None) -> Node:
    """SliceScatter-15: ``data`` with the slice ``start:stop:step`` along ``axes`` (default
    the first ``len(start)`` axes) replaced by ``updates``."""
    ins = [to_output(data), to_output(updates)] + [i64_operand(v) for v in (start, stop, step)]
    if axes is not None:
        ins.append(i64_operand(axes))
    return set_name(SliceScatter(ins), name)
