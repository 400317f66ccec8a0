"""SliceToStridedSlice."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import count, model_of, param, run, run_checked

from netpass import opset
from netpass.ngraph_passes.common import SliceToStridedSlice


@pytest.mark.parametrize("start,stop,step,axes", [
    ([1], [3], [1], [1]),
    ([0, 4], [2, 0], [1, -1], [0, 2]),
    ([-3], [100], [2], [-1]),
    ([1, 1], [2, -1], [1, 1], None),
])
def test_slice_becomes_strided_slice(start, stop, step, axes):
    x = param([3, 4, 6])
    m = model_of(opset.relu(opset.slice(x, start, stop, step, axes)), x)
    run_checked(m, SliceToStridedSlice())
    assert count(m, "Slice") == 0 and count(m, "StridedSlice") == 1


def test_result_keeps_slice_name():
    x = param([3, 4])
    m = model_of(opset.slice(opset.relu(x), [1], [3], [1], [0], name="sl"), x)
    run(m, SliceToStridedSlice())
    assert m.results[0].input_value(0).node.friendly_name == "sl"


def test_non_constant_bounds_stay():
    x, s = param([3, 4]), opset.parameter([1], np.int64, "s")
    m = model_of(opset.slice(x, s, [3], [1], [0]), [x, s])
    run(m, SliceToStridedSlice())
    assert count(m, "Slice") == 1


def test_negative_axis_needs_static_rank():
    x = opset.parameter(None, np.float32, "x")
    m = model_of(opset.slice(x, [1], [3], [1], [-1]), x)
    run(m, SliceToStridedSlice(use_shapes=False))
    assert count(m, "Slice") == 1
