"""ConvertGlobalAvgPoolToReduceMean (zoo finding F3)."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.common import ConvertGlobalAvgPoolToReduceMean
from netpass.ngraph_passes.gna import GnaTransformationsPipeline, interior_layout_ops
from netpass.testing import TransformationTest


class TestGlobalAvgPool(TransformationTest):
    def test_whole_map_window_becomes_reduce_mean(self):
        x = param([1, 3, 5, 4])
        self.model = model_of(opset.avg_pool(x, [1, 1], [0, 0], [0, 0], [5, 4], True), x)
        x2 = param([1, 3, 5, 4])
        self.model_ref = model_of(opset.reduce_mean(x2, opset.constant(np.array([2, 3], np.int64)), True), x2)
        self.manager.register_pass(ConvertGlobalAvgPoolToReduceMean())
        self.enable_accuracy_check(1e-5, 1e-6)


def test_3d_pool_and_result_name():
    x = param([2, 4, 7])
    m = model_of(opset.avg_pool(x, [3], [0], [0], [7], False, rounding_type="ceil", name="gap"), x)
    run_checked(m, ConvertGlobalAvgPoolToReduceMean())
    mean = m.results[0].input_value(0).node
    assert mean.type_name == "ReduceMean" and mean.friendly_name == "gap" and mean.keep_dims


def test_partial_window_stays():
    x = param([1, 3, 6, 6])
    m = model_of(opset.avg_pool(x, [2, 2], [0, 0], [0, 0], [2, 2], True), x)
    run(m, ConvertGlobalAvgPoolToReduceMean())
    assert count(m, "AvgPool") == 1


def test_padded_window_stays():
    """With padding the divisor depends on exclude-pad; it is not a plain mean."""
    x = param([1, 3, 4, 4])
    m = model_of(opset.avg_pool(x, [1, 1], [1, 1], [1, 1], [4, 4], False), x)
    run(m, ConvertGlobalAvgPoolToReduceMean())
    assert count(m, "AvgPool") == 1


def test_dynamic_spatial_dims_stay():
    x = opset.parameter([1, 3, -1, 4], np.float32, "x")
    m = model_of(opset.avg_pool(x, [1, 1], [0, 0], [0, 0], [5, 4], True), x)
    run(m, ConvertGlobalAvgPoolToReduceMean())
    assert count(m, "AvgPool") == 1


def test_pipeline_leaves_no_transpose_before_a_global_avg_pool():
    """Conv -> ReLU -> global AvgPool: the NHWC Transpose sinks through the ReduceMean."""
    x = param([1, 1, 8, 6])
    conv = opset.relu(opset.convolution(x, opset.constant(rand(16, 1, 3, 3)), [1, 1], [0, 0], [0, 0], [1, 1]))
    m = model_of(opset.avg_pool(conv, [1, 1], [0, 0], [0, 0], [6, 4], True), x)
    run_checked(m, GnaTransformationsPipeline(), rtol=1e-4, atol=1e-5)
    assert count(m, "AvgPool") == 0 and not interior_layout_ops(m)
