"""ReplaceGnaNHWCLayers (SubstituteGNAConvolution, SubstituteGNAMaxPool)."""
from __future__ import annotations

import numpy as np

from netpass import opset
from netpass.ngraph_passes.gna import ReplaceGnaNHWCLayers
from netpass.testing import TransformationTest
from tr_helpers import count, model_of, param, rand, run, run_checked


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
