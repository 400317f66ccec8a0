"""ConvertStridedSliceToCrop."""
from __future__ import annotations

import pytest
from tr_helpers import count, model_of, param, run, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import ConvertStridedSliceToCrop


@pytest.mark.parametrize("begin,end,bm,em,new,shrink", [
    ([0, 1], [0, 3], [1, 0], [1, 0], [], []),
    ([0, 1, 2], [0, 3, 5], [1, 0, 0], [1, 0, 0], [], []),
    ([0, 2], [0, 3], [1, 0], [1, 0], [], [0, 1]),
    ([0, 0, 1], [0, 0, 4], [1, 1, 0], [1, 1, 0], [0, 1, 0], []),
    ([-3], [-1], [0], [0], [], []),
])
def test_strided_slice_becomes_crop(begin, end, bm, em, new, shrink):
    x = param([2, 4, 6])
    ss = opset.strided_slice(x, begin, end, [1] * len(begin), bm, em, new, shrink, name="ss")
    m = model_of(opset.relu(ss), x)
    run_checked(m, ConvertStridedSliceToCrop())
    assert count(m, "StridedSlice") == 0 and count(m, "CropIE") == 1


def test_result_name_with_reshape_after():
    x = param([2, 4, 6])
    ss = opset.strided_slice(opset.relu(x), [0, 2], [0, 3], [1, 1], [1, 0], [1, 0], [], [0, 1], name="ss")
    m = model_of(ss, x)
    run(m, ConvertStridedSliceToCrop())
    last = m.results[0].input_value(0).node
    assert last.type_name == "Reshape" and last.friendly_name == "ss"
    assert last.input_value(0).node.friendly_name == "ss/Crop"


def test_strides_other_than_one_stay():
    x = param([2, 8])
    m = model_of(opset.strided_slice(x, [0, 0], [0, 8], [1, 2], [1, 0], [1, 0]), x)
    run(m, ConvertStridedSliceToCrop())
    assert count(m, "StridedSlice") == 1


def test_dynamic_input_stays():
    x = opset.parameter([-1, 8], "f32", "x")
    m = model_of(opset.strided_slice(x, [0, 1], [0, 3], [1, 1], [1, 0], [1, 0]), x)
    run(m, ConvertStridedSliceToCrop())
    assert count(m, "StridedSlice") == 1
