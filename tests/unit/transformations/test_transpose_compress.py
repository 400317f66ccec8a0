"""TransposeCompress."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, run, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import TransposeCompress
from netpass.ngraph_passes.gna.transpose_compress import compress
from netpass.testing import TransformationTest


class TestCompress(TransformationTest):
    def test_nchw_to_nhwc_becomes_2d(self):
        x = param([1, 3, 4, 8])
        self.model = model_of(opset.relu(opset.transpose(x, [0, 2, 3, 1])), x)
        x2 = param([1, 3, 4, 8])
        r1 = opset.reshape(x2, opset.constant(np.array([1, 3, 32], np.int32)), False)
        t = opset.transpose(r1, opset.constant(np.array([0, 2, 1], np.int8)))
        r2 = opset.reshape(t, opset.constant(np.array([1, 4, 8, 3], np.int32)), False)
        self.model_ref = model_of(opset.relu(r2), x2)
        self.manager.register_pass(TransposeCompress())
        self.enable_accuracy_check(1e-5, 1e-6)


def test_compress_groups():
    assert compress((2, 3, 4, 5), [0, 2, 3, 1]) == ([2, 3, 20], [0, 2, 1])
    assert compress((2, 3, 4, 5), [2, 3, 0, 1]) == ([6, 20], [1, 0])


def test_uncompressible_or_still_unsupported_stays():
    x, y = param([2, 3, 4], "x"), param([1, 9, 4, 5], "y")
    m = model_of([opset.transpose(x, [2, 0, 1]), opset.transpose(y, [0, 2, 3, 1])], [x, y])
    run(m, TransposeCompress())
    assert count(m, "Reshape") == 0


def test_result_keeps_name():
    x = param([1, 3, 4, 8])
    m = model_of(opset.transpose(opset.relu(x), [0, 2, 3, 1], name="t"), x)
    run_checked(m, TransposeCompress())
    assert m.results[0].input_value(0).node.friendly_name == "t"
