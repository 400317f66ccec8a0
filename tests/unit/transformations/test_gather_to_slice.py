"""ConvertGatherToSlice: contiguous constant Gathers (``y[:, -1]``, ``y[:, [2, 3, 4]]``)."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import (
    ConvertGatherToSlice,
    GnaTransformationsPipeline,
    interior_layout_ops,
)
from netpass.testing import TransformationTest


def _i64(*v: int):
    return opset.constant(np.array(v, np.int64))


def g(x, idx, axis):
    return opset.gather(x, opset.constant(np.asarray(idx, np.int64)), opset.constant(np.int64(axis)))


class TestGatherToSlice(TransformationTest):
    def test_index_list_becomes_a_slice(self):
        x = param([2, 7, 4])
        self.model = model_of(opset.relu(g(x, [2, 3, 4], 1)), x)
        x2 = param([2, 7, 4])
        self.model_ref = model_of(opset.relu(opset.slice(x2, _i64(2), _i64(5), _i64(1), _i64(1))), x2)
        self.manager.register_pass(ConvertGatherToSlice())
        self.enable_accuracy_check(1e-6, 1e-7)


def test_negative_scalar_index_slices_then_squeezes():
    """``y[:, -1]``: the last step; the Squeeze takes the Gather's name."""
    x = param([1, 5, 16])
    m = model_of(opset.gather(x, opset.constant(np.int64(-1)), opset.constant(np.int64(1)), name="last"), x)
    run_checked(m, ConvertGatherToSlice())
    last = m.results[0].input_value(0).node
    assert last.type_name == "Squeeze" and last.friendly_name == "last"
    assert last.input_value(0).node.type_name == "Slice" and count(m, "Gather") == 0


def test_permuting_gather_stays():
    x = param([1, 6])
    m = model_of(g(x, [1, 0, 2], 1), x)
    run(m, ConvertGatherToSlice())
    assert count(m, "Gather") == 1


def test_out_of_range_index_stays():
    """Gather-8 gives zeros for it; a slice cannot."""
    x = param([2, 4])
    m = model_of(g(x, [3, 4], 1), x)
    run(m, ConvertGatherToSlice())
    assert count(m, "Gather") == 1


def test_runtime_indices_and_1d_data_stay():
    x, i = param([2, 4], "x"), opset.parameter([1], np.int64, "i")
    v = param([6], "v")
    m = model_of([opset.gather(x, i, opset.constant(np.int64(1))), g(v, [1, 2], 0)], [x, i, v])
    run(m, ConvertGatherToSlice())
    assert count(m, "Gather") == 2


def test_pipeline_sinks_a_batch_first_reorder_through_the_last_step():
    """[T, B, H] -> Transpose -> [B, T, H] -> y[:, -1] -> Linear (a batch-first recurrent
    classifier with a batch > 1): the reorder and the Gather both leave the graph."""
    x = param([5, 2, 8])
    h = opset.tanh(opset.matmul(x, opset.constant(rand(8, 8)), False, False))
    bt = opset.transpose(h, _i64(1, 0, 2))
    last = opset.gather(bt, opset.constant(np.int64(-1)), opset.constant(np.int64(1)))
    m = model_of(opset.matmul(last, opset.constant(rand(8, 3, seed=1)), False, False), x)
    run_checked(m, GnaTransformationsPipeline())
    assert count(m, "Gather", "Slice", "StridedSlice") == 0 and count(m, "CropIE") == 1
    assert not interior_layout_ops(m)
