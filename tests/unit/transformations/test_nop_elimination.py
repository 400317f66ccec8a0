"""NopElimination."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import count, model_of, param, run, run_checked

from netpass import opset
from netpass.ngraph_passes.common import NopElimination
from netpass.testing import TransformationTest

NOPS = {
    "Reshape": lambda x: opset.reshape(x, [2, 3, 4], False),
    "Transpose": lambda x: opset.transpose(x, [0, 1, 2]),
    "Convert": lambda x: opset.convert(x, np.float32),
    "Squeeze": lambda x: opset.squeeze(x, opset.constant(np.array([], np.int64))),
    "Concat": lambda x: opset.concat([x], 1),
    "Broadcast": lambda x: opset.broadcast(x, [2, 3, 4]),
    "Tile": lambda x: opset.tile(x, [1, 1, 1]),
    "Pad": lambda x: opset.pad(x, [0, 0, 0], [0, 0, 0], "constant"),
}


@pytest.mark.parametrize("kind", sorted(NOPS))
def test_nop_removed(kind):
    x = param([2, 3, 4])
    m = model_of(opset.relu(NOPS[kind](x)), x)
    run_checked(m, NopElimination())
    assert count(m, kind) == 0


class TestNames(TransformationTest):
    def test_result_keeps_name(self):
        x = param([2, 3, 4])
        r = opset.reshape(opset.relu(x), [2, 3, 4], False)
        self.model = model_of(r, x)
        x2 = param([2, 3, 4])
        self.model_ref = model_of(opset.relu(x2), x2)
        self.manager.register_pass(NopElimination())


def test_nop_between_parameter_and_result_stays():
    x = param([2, 3])
    m = model_of(opset.reshape(x, [2, 3], False), x)
    run(m, NopElimination())
    assert count(m, "Reshape") == 1


def test_real_reshape_stays_and_dynamic_same_shape_goes():
    """[?, 3] -> [-1, 3] keeps the shape (one dynamic dim, fixed by the element count), as
    OpenVINO's NopElimination finds; [?, 3] -> [3, -1] does not."""
    x = opset.parameter([-1, 3], np.float32, "x")
    m = model_of([opset.relu(opset.reshape(x, [-1, 3], False)), opset.reshape(opset.relu(x), [3, -1], False)], x)
    run(m, NopElimination())
    assert count(m, "Reshape") == 1


@pytest.mark.parametrize("shape,kept", [([4, 3], 1), ([2, 3, 4], 1), ([5], 0)])
def test_empty_transpose_order_reverses_the_axes(shape, kept):
    """An empty order is the reversed axes (ONNX Transpose without perm): a no-op only up to
    rank 1 (affine_grid's ONNX expansion holds one on a 2-D grid)."""
    x = param(shape)
    t = opset.transpose(opset.relu(x), opset.constant(np.array([], np.int64)))
    m = model_of(opset.relu(t), x)
    run_checked(m, NopElimination())  # the same outputs as before the pass
    assert count(m, "Transpose") == kept
