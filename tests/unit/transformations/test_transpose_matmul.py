"""TransposeMatMulForward (zoo finding F5, batch-first heads with a batch > 1)."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import GnaTransformationsPipeline, interior_layout_ops
from netpass.ngraph_passes.gna.transpose_matmul import TransposeMatMulForward
from netpass.testing import TransformationTest

W = rand(10, 3, seed=4)


class TestTransposeMatMulForward(TransformationTest):
    def test_row_reorder_moves_after_the_matmul(self):
        x = param([5, 2, 10])
        self.model = model_of(opset.relu(opset.matmul(opset.transpose(x, [1, 0, 2]), opset.constant(W),
                                                      False, False)), x)
        x2 = param([5, 2, 10])
        mm = opset.matmul(x2, opset.constant(W), False, False)
        self.model_ref = model_of(opset.relu(opset.transpose(mm, opset.constant(np.array([1, 0, 2], np.int64)))), x2)
        self.manager.register_pass(TransposeMatMulForward())
        self.enable_accuracy_check(1e-5, 1e-6)


def test_result_name_moves_to_the_transpose():
    x = param([4, 3, 2, 10])
    mm = opset.matmul(opset.transpose(x, [2, 0, 1, 3]), opset.constant(W), False, False, name="head")
    m = model_of(mm, x)
    run_checked(m, TransposeMatMulForward())
    last = m.results[0].input_value(0).node
    assert last.type_name == "Transpose" and last.friendly_name == "head"


def test_order_moving_the_contracted_axis_stays():
    x = param([10, 5, 2])
    m = model_of(opset.matmul(opset.transpose(x, [1, 2, 0]), opset.constant(W), False, False), x)
    run(m, TransposeMatMulForward())
    assert m.results[0].input_value(0).node.type_name == "MatMul"


def test_supported_transpose_stays():
    x = param([8, 1, 16])
    m = model_of(opset.matmul(opset.transpose(x, [1, 0, 2]), opset.constant(rand(16, 3)), False, False), x)
    run(m, TransposeMatMulForward())
    assert m.results[0].input_value(0).node.type_name == "MatMul"


def test_batched_weights_stay():
    x = param([5, 2, 10])
    w = opset.constant(rand(2, 10, 3))
    m = model_of(opset.matmul(opset.transpose(x, [1, 0, 2]), w, False, False), x)
    run(m, TransposeMatMulForward())
    assert m.results[0].input_value(0).node.type_name == "MatMul"


def test_pipeline_moves_a_batch_first_head_transpose_to_the_result():
    """[T, B, F] -> Transpose -> [B, T, F] -> Linear: no layout op is left inside."""
    x = param([4, 3, 10])
    h = opset.tanh(opset.add(x, opset.constant(rand(10, seed=5))))
    head = opset.add(opset.matmul(opset.transpose(h, [1, 0, 2]), opset.constant(W), False, False),
                     opset.constant(rand(3, seed=6)))
    m = model_of(head, x)
    run_checked(m, GnaTransformationsPipeline())
    assert count(m, "Gather") == 0 and not interior_layout_ops(m)
