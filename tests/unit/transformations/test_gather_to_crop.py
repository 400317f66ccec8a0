"""ConvertGatherToCrop: contiguous constant Gathers (``y[:, -1]``, ``y[:, 2:5]`` as indices)."""
from __future__ import annotations

import numpy as np

from netpass import opset
from netpass.ngraph_passes.gna import ConvertGatherToCrop, GnaTransformationsPipeline, interior_layout_ops
from netpass.ngraph_passes.utils import make
from netpass.testing import TransformationTest
from tr_helpers import count, model_of, param, rand, run, run_checked


def g(x, idx, axis):
    return opset.gather(x, opset.constant(np.asarray(idx, np.int64)), opset.constant(np.int64(axis)))


class TestGatherToCrop(TransformationTest):
    def test_index_list_becomes_a_crop(self):
        x = param([2, 7, 4])
        self.model = model_of(opset.relu(g(x, [2, 3, 4], 1)), x)
        x2 = param([2, 7, 4])
        crop = opset.relu(_crop(x2, [2, 3, 4], [0, 2, 0]))
        self.model_ref = model_of(crop, x2)
        self.manager.register_pass(ConvertGatherToCrop())
        self.enable_accuracy_check(1e-6, 1e-7)


def _crop(x, dim, offset):
    return make("CropIE", [x], axes=list(range(len(dim))), dim=dim, offset=offset)


def test_negative_scalar_index_crops_then_reshapes():
    """``y[:, -1]``: the last step; the Reshape takes the Gather's name."""
    x = param([1, 5, 16])
    m = model_of(opset.gather(x, opset.constant(np.int64(-1)), opset.constant(np.int64(1)), name="last"), x)
    run_checked(m, ConvertGatherToCrop())
    last = m.results[0].input_value(0).node
    assert last.type_name == "Reshape" and last.friendly_name == "last"
    assert last.input_value(0).node.type_name == "CropIE" and count(m, "Gather") == 0


def test_permuting_gather_stays():
    x = param([1, 6])
    m = model_of(g(x, [1, 0, 2], 1), x)
    run(m, ConvertGatherToCrop())
    assert count(m, "Gather") == 1


def test_out_of_range_index_stays():
    """Gather-8 gives zeros for it; a crop cannot."""
    x = param([2, 4])
    m = model_of(g(x, [3, 4], 1), x)
    run(m, ConvertGatherToCrop())
    assert count(m, "Gather") == 1


def test_runtime_indices_stay():
    x, i = param([2, 4], "x"), opset.parameter([1], np.int64, "i")
    m = model_of(opset.gather(x, i, opset.constant(np.int64(1))), [x, i])
    run(m, ConvertGatherToCrop())
    assert count(m, "Gather") == 1


def test_pipeline_crops_the_last_step_of_a_recurrent_stack():
    """[1, T, H] -> y[:, -1] -> Linear: no Gather is left inside the graph."""
    x = param([1, 5, 8])
    h = opset.tanh(opset.matmul(x, opset.constant(rand(8, 8)), False, False))
    last = opset.gather(h, opset.constant(np.int64(-1)), opset.constant(np.int64(1)))
    m = model_of(opset.matmul(last, opset.constant(rand(8, 3, seed=1)), False, False), x)
    run_checked(m, GnaTransformationsPipeline())
    assert count(m, "Gather") == 0 and not interior_layout_ops(m)
