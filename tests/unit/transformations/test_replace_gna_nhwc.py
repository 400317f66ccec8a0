"""ReplaceGnaNHWCLayers (SubstituteGNAConvolution, SubstituteGNAMaxPool)."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import (
    GnaTransformationsPipeline,
    ReplaceGnaNHWCLayers,
    interior_layout_ops,
    replace_nhwc,
)
from netpass.ngraph_passes.gna.replace_nhwc import dense_group_filters
from netpass.testing import TransformationTest


class TestConvolution(TransformationTest):
    def test_4d_convolution_wrapped_in_i32_transposes(self):
        w = rand(8, 3, 3, 3)
        x = param([1, 3, 16, 16])
        self.model = model_of(opset.convolution(x, opset.constant(w), [1, 1], [0, 0], [0, 0], [1, 1]), x)
        x2 = param([1, 3, 16, 16])
        order = opset.constant(np.array([0, 2, 3, 1], np.int32))
        conv = opset.gna_convolution(opset.transpose(x2, order), opset.transpose(opset.constant(w), order),
                                     [1, 1], [0, 0], [0, 0], [1, 1])
        self.model_ref = model_of(opset.transpose(conv, opset.constant(np.array([0, 3, 1, 2], np.int32))), x2)
        self.manager.register_pass(ReplaceGnaNHWCLayers())
        self.enable_accuracy_check(1e-4, 1e-5)


def test_3d_convolution_and_result_name():
    x = param([1, 4, 10])
    conv = opset.convolution(x, opset.constant(rand(6, 4, 3)), [1], [1], [1], [1], name="conv")
    m = model_of(conv, x)
    run_checked(m, ReplaceGnaNHWCLayers(), rtol=1e-4, atol=1e-5)
    t = m.results[0].input_value(0).node
    assert t.type_name == "Transpose" and t.friendly_name == "conv"
    assert t.input_value(1).element_type.name == "i32"
    assert count(m, "Convolution") == 0 and count(m, "GNAConvolution") == 1


def test_maxpool_replaced():
    x = param([1, 3, 8, 8])
    mp = opset.max_pool(x, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2], name="pool")
    m = model_of(opset.relu(mp.output(0)), x)
    run_checked(m, ReplaceGnaNHWCLayers())
    assert count(m, "MaxPool") == 0 and count(m, "GNAMaxPool") == 1


def test_maxpool_with_used_indices_stays():
    x = param([1, 3, 8, 8])
    mp = opset.max_pool(x, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2])
    m = model_of([mp.output(0), mp.output(1)], x)
    run(m, ReplaceGnaNHWCLayers())
    assert count(m, "MaxPool") == 1


def test_dynamic_rank_convolution_stays():
    x = opset.parameter(None, np.float32, "x")
    m = model_of(opset.convolution(x, opset.constant(rand(2, 3, 1, 1)), [1, 1], [0, 0], [0, 0], [1, 1]), x)
    run(m, ReplaceGnaNHWCLayers())
    assert count(m, "Convolution") == 1


class TestGroupConvolution(TransformationTest):
    """Zoo finding F2: a GroupConvolution with constant filters becomes one GNAConvolution with
    dense block-diagonal filters."""

    def test_depthwise_2d_becomes_dense_gna_convolution(self):
        w = rand(4, 1, 1, 3, 3)
        x = param([1, 4, 6, 6])
        self.model = model_of(opset.group_convolution(x, opset.constant(w), [1, 1], [1, 1], [1, 1], [1, 1]), x)
        dense = np.zeros((4, 4, 3, 3), np.float32)
        for g in range(4):
            dense[g, g] = w[g, 0, 0]
        x2 = param([1, 4, 6, 6])
        order = opset.constant(np.array([0, 2, 3, 1], np.int32))
        conv = opset.gna_convolution(opset.transpose(x2, order), opset.transpose(opset.constant(dense), order),
                                     [1, 1], [1, 1], [1, 1], [1, 1])
        self.model_ref = model_of(opset.transpose(conv, opset.constant(np.array([0, 3, 1, 2], np.int32))), x2)
        self.manager.register_pass(ReplaceGnaNHWCLayers())
        self.enable_accuracy_check(1e-4, 1e-5)


def test_dense_group_filters_are_block_diagonal():
    w = rand(2, 3, 2, 1, 1)
    dense = dense_group_filters(w)
    assert dense.shape == (6, 4, 1, 1)
    np.testing.assert_array_equal(dense[:3, :2], w[0])
    np.testing.assert_array_equal(dense[3:, 2:], w[1])
    assert not dense[:3, 2:].any() and not dense[3:, :2].any()


def test_grouped_1d_strided_dilated_convolution_keeps_outputs():
    x = param([1, 6, 20])
    conv = opset.group_convolution(x, opset.constant(rand(3, 4, 2, 3)), [2], [2], [1], [2], name="gconv")
    m = model_of(opset.relu(conv), x)
    run_checked(m, ReplaceGnaNHWCLayers(), rtol=1e-4, atol=1e-5)
    assert count(m, "GroupConvolution") == 0 and count(m, "GNAConvolution") == 1


def test_group_convolution_result_keeps_its_name():
    x = param([1, 4, 5, 5])
    conv = opset.group_convolution(x, opset.constant(rand(4, 1, 1, 3, 3)), [1, 1], [0, 0], [0, 0], [1, 1],
                                   name="dw")
    m = model_of(conv, x)
    run_checked(m, ReplaceGnaNHWCLayers(), rtol=1e-4, atol=1e-5)
    t = m.results[0].input_value(0).node
    assert t.type_name == "Transpose" and t.friendly_name == "dw"


def test_group_convolution_too_large_when_dense_stays(monkeypatch):
    monkeypatch.setattr(replace_nhwc, "MAX_DENSE_FILTER_ELEMENTS", 100)
    x = param([1, 4, 5, 5])
    m = model_of(opset.group_convolution(x, opset.constant(rand(4, 1, 1, 3, 3)), [1, 1], [0, 0], [0, 0], [1, 1]), x)
    run(m, ReplaceGnaNHWCLayers())
    assert count(m, "GroupConvolution") == 1 and count(m, "GNAConvolution") == 0


def test_group_convolution_with_runtime_filters_stays():
    x, w = param([1, 4, 5, 5], "x"), param([2, 2, 2, 3, 3], "w")
    m = model_of(opset.group_convolution(x, w, [1, 1], [0, 0], [0, 0], [1, 1]), [x, w])
    run(m, ReplaceGnaNHWCLayers())
    assert count(m, "GroupConvolution") == 1 and count(m, "GNAConvolution") == 0


def test_group_convolution_lowered_by_the_pipeline():
    """Between two convolutions (a depthwise-separable block) no layout op is left inside."""
    x = param([1, 3, 10, 10])
    c1 = opset.relu(opset.convolution(x, opset.constant(rand(8, 3, 3, 3)), [1, 1], [1, 1], [1, 1], [1, 1]))
    dw = opset.relu(opset.group_convolution(c1, opset.constant(rand(8, 1, 1, 3, 3, seed=1)), [1, 1], [1, 1],
                                            [1, 1], [1, 1]))
    pw = opset.convolution(dw, opset.constant(rand(16, 8, 1, 1, seed=2)), [1, 1], [0, 0], [0, 0], [1, 1])
    m = model_of(pw, x)
    run_checked(m, GnaTransformationsPipeline(), rtol=1e-4, atol=1e-5)
    assert count(m, "GroupConvolution", "Convolution") == 0 and count(m, "GNAConvolution") == 3
    assert not interior_layout_ops(m)


def test_f16_avg_pool_becomes_an_f16_window_sum():
    """An f16 AvgPool: the window-sum filters and the divisor map were f32, and the
    GNAConvolution's shape inference refused f16 data with f32 filters, so compile_model
    (GNA, the default) failed on any f16 model with an AvgPool (found by the legacy-stage
    fuzz, tests/property/test_legacy_fuzz.py, drawing f16 models)."""
    x = opset.parameter([1, 3, 6, 7], np.float16, "x")
    m = model_of(opset.avg_pool(x, [2, 2], [1, 0], [1, 1], [3, 3], False), x)
    run_checked(m, ReplaceGnaNHWCLayers(), rtol=1e-2, atol=1e-3)
    assert count(m, "AvgPool") == 0 and count(m, "GNAConvolution") == 1
    assert m.results[0].get_output_element_type(0).name == "f16"
