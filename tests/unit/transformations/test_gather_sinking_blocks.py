"""Forward Gather sinking through a Reshape that splits a flat Gather's axis into blocks
(``block_axis``) and through Split along another axis (zoo finding F4)."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import (
    GatherSinkingGeneral,
    GatherSinkingReshapeForward,
    GatherSinkingSplitForward,
    GnaTransformationsPipeline,
    interior_layout_ops,
)
from netpass.ngraph_passes.gna.gather_sinking import block_axis
from netpass.testing import TransformationTest

P = np.array([2, 0, 3, 1], np.int64)
BLOCKS = (np.arange(6)[:, None] * 4 + P[None, :]).reshape(-1)   # [1, 24] viewed as [6, 4]


def g(x, idx, axis):
    return opset.gather(x, opset.constant(np.asarray(idx, np.int64)), opset.constant(np.int64(axis)))


def _i64(*v: int):
    return opset.constant(np.array(v, np.int64))


def test_block_axis_finds_the_reordered_axis():
    flat = np.arange(2 * 3 * 5).reshape(2, 3, 5)[:, [2, 0, 1], :].reshape(-1)
    k, q = block_axis(flat, (2, 3, 5))
    assert k == 1 and q.tolist() == [2, 0, 1]


def test_block_axis_refuses_a_mixing_permutation():
    flat = np.arange(24).reshape(6, 4).T.reshape(-1)      # time and features swapped
    assert block_axis(flat, (1, 6, 4)) is None


class TestReshapeForwardBlocks(TransformationTest):
    def test_block_periodic_gather_moves_onto_the_inner_axis(self):
        x = param([1, 24])
        self.model = model_of(opset.relu(opset.reshape(g(x, BLOCKS, 1), _i64(1, 6, 4), False)), x)
        x2 = param([1, 24])
        self.model_ref = model_of(opset.relu(g(opset.reshape(x2, _i64(1, 6, 4), False), P, 2)), x2)
        self.manager.register_pass(GatherSinkingReshapeForward())
        self.enable_accuracy_check(1e-6, 1e-7)


def test_per_sample_gather_moves_through_a_splitting_reshape():
    """A batch > 1 kept in front: Gather [B, T*4] (axis 1) -> Reshape [B, T, 4] becomes a
    Gather on axis 2."""
    x = param([3, 24])
    m = model_of(opset.reshape(g(x, BLOCKS, 1), _i64(3, 6, 4), False), x)
    run_checked(m, GatherSinkingReshapeForward())
    last = m.results[0].input_value(0).node
    assert last.type_name == "Gather" and int(last.input_value(2).node.value) == 2


def test_gather_moves_through_a_squeeze_next_to_other_axes():
    """[2, 1, 4] -> Squeeze(1) -> [2, 4]: the gathered axis 2 becomes axis 1."""
    x = param([2, 1, 4])
    m = model_of(opset.relu(opset.squeeze(g(x, P, 2), _i64(1))), x)
    run_checked(m, GatherSinkingReshapeForward())
    gather = m.results[0].input_value(0).node.input_value(0).node
    assert gather.type_name == "Gather" and int(gather.input_value(2).node.value) == 1


def test_mixing_permutation_stays_before_the_reshape():
    x = param([1, 24])
    flat = np.arange(24).reshape(6, 4).T.reshape(-1)
    m = model_of(opset.reshape(g(x, flat, 1), _i64(1, 6, 4), False), x)
    run(m, GatherSinkingReshapeForward())
    assert m.results[0].input_value(0).node.type_name == "Reshape"


def test_split_forward_gives_every_output_the_gather():
    x = param([1, 6, 4])
    split = opset.split(g(x, P, 2), _i64(1), 3, name="sp")
    m = model_of([opset.relu(split.output(0)), split.output(1), split.output(2)], x)
    run_checked(m, GatherSinkingSplitForward())
    assert m.results[1].input_value(0).node.type_name == "Gather"
    assert m.results[0].input_value(0).node.input_value(0).node.friendly_name == "sp.0"
    assert count(m, "Gather") == 3 and count(m, "Split") == 1


def test_split_forward_unused_output_gets_no_gather():
    x = param([1, 6, 4])
    split = opset.variadic_split(g(x, P, 2), _i64(1), _i64(2, 4))
    m = model_of(split.output(1), x)
    run_checked(m, GatherSinkingSplitForward())
    assert count(m, "Gather") == 1 and m.results[0].input_value(0).node.type_name == "Gather"


def test_split_along_the_gathered_axis_stays():
    x = param([1, 6, 4])
    split = opset.split(g(x, P, 2), _i64(2), 2)
    m = model_of([split.output(0), split.output(1)], x)
    run(m, GatherSinkingSplitForward())
    assert m.results[0].input_value(0).node.type_name == "Split"


def test_general_folds_a_time_major_permute_into_per_step_matmuls():
    """Gather [1, T*32] -> Reshape [1, T, 32] -> Split(time) -> Squeeze -> MatMul: the Gather
    ends in the MatMul weights."""
    x = param([1, 6 * 32])
    perm = np.random.default_rng(1).permutation(32)
    idx = (np.arange(6)[:, None] * 32 + perm[None, :]).reshape(-1)
    steps = opset.split(opset.reshape(g(x, idx, 1), _i64(1, 6, 32), False), _i64(1), 6)
    w = opset.constant(rand(5, 32))
    outs = [opset.matmul(opset.squeeze(s, _i64(1)), w, False, True) for s in steps.outputs()]
    m = model_of(opset.concat(outs, 0), x)
    run_checked(m, GatherSinkingGeneral())
    assert count(m, "Gather") == 0


@pytest.mark.parametrize("batch", [1, 2])
def test_pipeline_conv_to_recurrent_permute_leaves_no_layout_op(batch):
    """The CRNN pattern: conv [N, C, T, F] -> permute(0, 2, 1, 3) -> Reshape [N, T, C*F] ->
    per-step MatMuls."""
    x = param([batch, 1, 6, 8])
    conv = opset.relu(opset.convolution(x, opset.constant(rand(4, 1, 3, 3)), [1, 1], [1, 1], [1, 1], [1, 1]))
    seq = opset.reshape(opset.transpose(conv, _i64(0, 2, 1, 3)), _i64(batch, 6, 32), False)
    steps = opset.split(seq, _i64(1), 6)
    w = opset.constant(rand(12, 32, seed=2))
    outs = [opset.tanh(opset.matmul(opset.squeeze(s, _i64(1)), w, False, True)) for s in steps.outputs()]
    m = model_of(opset.concat(outs, 0), x)
    run_checked(m, GnaTransformationsPipeline(), rtol=1e-4, atol=1e-5)
    assert not interior_layout_ops(m) and count(m, "Gather") == 0


def test_split_forward_moves_tensor_names_to_the_gathers():
    x = param([1, 6, 4])
    split = opset.split(g(x, P, 2), _i64(1), 2)
    split.output(0).names.add("first")
    m = model_of([split.output(0), split.output(1)], x)
    run_checked(m, GatherSinkingSplitForward())
    named = [o for n in m.get_ordered_ops() for o in n.outputs() if "first" in o.names]
    assert len(named) == 1 and named[0].node.type_name == "Gather"
