"""ConvertSteppedSliceToMatMul (zoo finding F6)."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import GnaTransformationsPipeline, interior_layout_ops
from netpass.ngraph_passes.gna import stepped_slice_to_matmul as ssm
from netpass.ngraph_passes.gna.stepped_slice_to_matmul import ConvertSteppedSliceToMatMul
from netpass.testing import TransformationTest


def _i64(*v: int):
    return opset.constant(np.array(v, np.int64))


def _stepped(x, name=None):
    """x[:, :, ::2, 1::2] as StridedSlice."""
    return opset.strided_slice(x, _i64(0, 0, 0, 1), _i64(0, 0, 0, 0), _i64(1, 1, 2, 2),
                               [1, 1, 1, 0], [1, 1, 1, 1], name=name)


class TestSteppedSlice(TransformationTest):
    def test_stepped_strided_slice_becomes_a_selection_matmul(self):
        x = param([1, 2, 4, 4])
        self.model = model_of(_stepped(x), x)
        sel = np.zeros((32, 8), np.float32)
        kept = np.arange(32).reshape(1, 2, 4, 4)[:, :, ::2, 1::2].reshape(-1)
        sel[kept, np.arange(8)] = 1
        x2 = param([1, 2, 4, 4])
        flat = opset.reshape(x2, _i64(1, 32), False)
        mm = opset.matmul(flat, opset.constant(sel), False, False)
        self.model_ref = model_of(opset.reshape(mm, _i64(1, 2, 2, 2), False), x2)
        self.manager.register_pass(ConvertSteppedSliceToMatMul())
        self.enable_accuracy_check(1e-6, 1e-7)


def test_reversed_slice_keeps_outputs_and_result_name():
    """torch.flip exports as Slice with step -1."""
    x = param([1, 3, 10])
    flip = opset.slice(x, _i64(-1), _i64(-(2 ** 62)), _i64(-1), _i64(2), name="flip")
    m = model_of(flip, x)
    run_checked(m, ConvertSteppedSliceToMatMul(), rtol=1e-6, atol=1e-7)
    assert count(m, "Slice") == 0 and count(m, "MatMul") == 1
    assert m.results[0].input_value(0).node.friendly_name == "flip"


def test_chain_of_slices_becomes_one_matmul():
    x = param([1, 4, 8, 8])
    first = opset.slice(x, _i64(1), _i64(7), _i64(2), _i64(2))
    second = opset.slice(first, _i64(0), _i64(8), _i64(2), _i64(3))
    m = model_of(opset.relu(second), x)
    run_checked(m, ConvertSteppedSliceToMatMul(), rtol=1e-6, atol=1e-7)
    assert count(m, "Slice") == 0 and count(m, "MatMul") == 1


def test_slice_with_two_consumers_is_converted_on_its_own():
    x = param([1, 2, 6])
    first = opset.slice(x, _i64(0), _i64(6), _i64(2), _i64(2))
    second = opset.slice(first, _i64(2), _i64(-4), _i64(-1), _i64(2))
    m = model_of([second, opset.relu(first)], x)
    run_checked(m, ConvertSteppedSliceToMatMul(), rtol=1e-6, atol=1e-7)
    assert count(m, "Slice") == 0 and count(m, "MatMul") == 2


def test_batch_rows_stay_rows():
    """A batch > 1 kept whole becomes the MatMul rows; the selection covers one sample."""
    x = param([3, 4, 6])
    m = model_of(opset.slice(x, _i64(5), _i64(-100), _i64(-2), _i64(2)), x)
    run_checked(m, ConvertSteppedSliceToMatMul(), rtol=1e-6, atol=1e-7)
    mm = next(n for n in m.get_ordered_ops() if n.type_name == "MatMul")
    assert tuple(mm.input_value(1).shape) == (24, 12)


def test_large_map_keeps_more_leading_axes(monkeypatch):
    """Past MAX_SELECTION_ELEMENTS the rows take more leading axes (a smaller selection)."""
    monkeypatch.setattr(ssm, "MAX_SELECTION_ELEMENTS", 500)
    x = param([1, 4, 6, 6])
    m = model_of(opset.slice(x, _i64(0), _i64(6), _i64(3), _i64(3)), x)
    run_checked(m, ConvertSteppedSliceToMatMul(), rtol=1e-6, atol=1e-7)
    mm = next(n for n in m.get_ordered_ops() if n.type_name == "MatMul")
    assert tuple(mm.input_value(1).shape) == (36, 12)


def test_too_large_a_selection_becomes_gathers(monkeypatch):
    """No selection matrix fits: one Gather per sliced axis (reversed axis included)."""
    monkeypatch.setattr(ssm, "MAX_SELECTION_ELEMENTS", 4)
    x = param([1, 4, 6, 6])
    first = opset.slice(x, _i64(0), _i64(6), _i64(2), _i64(2))
    m = model_of(opset.slice(first, _i64(-1), _i64(-100), _i64(-1), _i64(3), name="s"), x)
    run_checked(m, ConvertSteppedSliceToMatMul(), rtol=1e-6, atol=1e-7)
    assert count(m, "Slice", "MatMul") == 0 and count(m, "Gather") == 2
    assert m.results[0].input_value(0).node.friendly_name == "s"


def test_shrinking_strided_slice_gathers_then_reshapes(monkeypatch):
    monkeypatch.setattr(ssm, "MAX_SELECTION_ELEMENTS", 4)
    x = param([2, 5, 6])
    ss = opset.strided_slice(x, _i64(0, 1, 0), _i64(0, 0, 6), _i64(1, 1, 3), [1, 0, 0], [1, 1, 0],
                             shrink_axis_mask=[0, 1, 0])
    m = model_of(ss, x)
    run_checked(m, ConvertSteppedSliceToMatMul(), rtol=1e-6, atol=1e-7)
    assert count(m, "StridedSlice") == 0 and tuple(m.results[0].input_value(0).shape) == (2, 2)


def test_contiguous_slice_stays():
    x = param([1, 4, 8])
    m = model_of(opset.slice(x, _i64(1), _i64(5), _i64(1), _i64(2)), x)
    run(m, ConvertSteppedSliceToMatMul())
    assert count(m, "Slice") == 1 and count(m, "MatMul") == 0


def test_dynamic_shape_stays():
    x = opset.parameter([-1, 4, 8], np.float32, "x")
    m = model_of(opset.slice(x, _i64(0), _i64(8), _i64(2), _i64(2)), x)
    run(m, ConvertSteppedSliceToMatMul())
    assert count(m, "Slice") == 1


def test_integer_slice_stays():
    x = opset.parameter([2, 8], np.int32, "x")
    m = model_of(opset.slice(x, _i64(0), _i64(8), _i64(2), _i64(1)), x)
    run(m, ConvertSteppedSliceToMatMul())
    assert count(m, "Slice") == 1


def test_pipeline_lowers_a_stepped_slice_after_a_convolution():
    x = param([1, 3, 8, 8])
    conv = opset.relu(opset.convolution(x, opset.constant(rand(8, 3, 3, 3)), [1, 1], [1, 1], [1, 1], [1, 1]))
    m = model_of(opset.add(opset.relu(_stepped(conv)), opset.constant(np.float32(1.0))), x)
    run_checked(m, GnaTransformationsPipeline(), rtol=1e-4, atol=1e-5)
    assert count(m, "StridedSlice", "Slice", "Convolution") == 0
    assert not interior_layout_ops(m)
