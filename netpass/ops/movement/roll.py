"""Roll (OpenVINO opset7, what OpenVINO's PyTorch frontend writes for ``torch.roll``): elements
shifted cyclically along axes. ONNX has no such op."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Node
from ..base import normalize_axis, set_name, to_output
from ..shape_inputs import check_shape_input, const_ints, i64_operand, vector_length

__all__ = ["roll"]


class Roll(Node):
    """Roll-7: inputs ``(data, shift, axes)``, both integer scalars or 1-D. Element ``i`` of
    ``data`` moves to ``(i + shift) mod dim`` along each axis; a scalar ``shift`` applies to
    every axis, a 1-D one pairs with ``axes`` element by element; an axis named twice shifts
    by the sum; negative axes count from the end."""

    type_name = "Roll"
    version = "opset7"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 3, "expects inputs (data, shift, axes)")
        check_shape_input(self, 1, "shift")
        check_shape_input(self, 2, "axes")
        shift_ps = self.get_input_partial_shape(1)
        n_shift, n_axes = vector_length(self, 1), vector_length(self, 2)
        if shift_ps.rank_is_static and len(shift_ps) == 1 and n_shift is not None \
                and n_axes is not None:
            self.check(n_shift == n_axes, "shift has {} elements and axes {}: a 1-D shift needs "
                       "one per axis", n_shift, n_axes)
        data = self.get_input_partial_shape(0)
        axes = const_ints(self, 2)
        if axes is not None and data.rank_is_static:
            for a in axes:
                normalize_axis(self, a, len(data))
        self.set_output_type(0, self.get_input_element_type(0), data)

    def evaluate(self, inputs):
        x, shift, axes = (np.asarray(a) for a in inputs)
        axes_list = [int(a) for a in axes.reshape(-1)]
        if not axes_list or x.ndim == 0:
            return [x]
        shifts = shift.reshape(-1)
        if shift.ndim == 0:  # one shift for every axis
            shifts = np.repeat(shifts, len(axes_list))
        self.check(len(shifts) == len(axes_list), "shift has {} elements and axes {}",
                   len(shifts), len(axes_list))
        return [np.roll(x, [int(s) for s in shifts],
                        [normalize_axis(self, a, x.ndim) for a in axes_list])]


def roll(data: Any, shift: Any, axes: Any, name: str | None = None) -> Node:
    """Roll-7: ``data`` shifted cyclically by ``shift`` (a scalar for every axis, or one per
    axis) along ``axes``; python values become i64 Constants."""
    return set_name(Roll([to_output(data), i64_operand(shift), i64_operand(axes)]), name)
