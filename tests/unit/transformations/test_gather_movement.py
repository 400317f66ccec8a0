"""Gather sinking through data movement (gather_movement.py), ReshapeElementwiseReorder and
MergeSharedLayoutOps: each rewrite keeps the outputs (random inputs, rtol 1e-5) and leaves the
graph it should."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import against_inference, count, model_of, param, rand, run, run_checked

import netpass
from netpass import opset
from netpass.ngraph_passes.common import ReshapeElementwiseReorder, ReshapeSequenceFusion
from netpass.ngraph_passes.gna import (
    GatherConcatAbsorbBackward,
    GatherConcatAbsorbForward,
    GatherSinkingConcatBackward,
    GatherSinkingConcatForward,
    GatherSinkingReduceBackward,
    GatherSinkingReduceForward,
    GatherSinkingReshapedForward,
    GatherSinkingTransposeAxisBackward,
    GatherSinkingTransposeAxisForward,
    GatherSplitAbsorb,
    GnaTransformationsPipeline,
    MergeSharedLayoutOps,
    RemoveIdentityGather,
)
from netpass.ngraph_passes.gna.gather_movement import reordered, runs
from netpass.synthetic import gna_blocks_onnx, random_blocks

PERM = [3, 1, 5, 0, 7, 4, 6, 2]


def g(x, idx, axis):
    return opset.gather(x, opset.constant(np.asarray(idx, np.int64)), opset.constant(np.int64(axis)))


def test_runs():
    assert runs(np.array([3, 4, 5, 0, 1, 7])) == [(3, 6), (0, 2), (7, 8)]


def test_concat_absorbs_a_gather_on_its_axis():
    x, y = param([1, 3, 4], "x"), param([1, 5, 4], "y")
    m = model_of(opset.relu(g(opset.concat([opset.tanh(x), opset.sigmoid(y)], 1), PERM, 1)), [x, y])
    run_checked(m, GatherConcatAbsorbBackward())
    assert count(m, "Gather") == 0 and count(m, "Concat") == 1


def test_concat_absorbs_a_gathered_input():
    x, y = param([1, 8, 4], "x"), param([1, 2, 4], "y")
    m = model_of(opset.concat([g(opset.tanh(x), PERM, 1), y], 1), [x, y])
    run_checked(m, GatherConcatAbsorbForward())
    assert count(m, "Gather") == 0


def test_reordered_cuts_only_where_indices_jump():
    x = param([1, 8, 4])
    pieces = reordered([x.output(0)], 1, np.array([4, 5, 6, 7, 0, 1, 2, 3]), x)
    assert [p.partial_shape.to_shape()[1] for p in pieces] == [4, 4]


def test_split_absorbs_a_gather_on_its_axis():
    x = param([2, 8, 3])
    parts = opset.variadic_split(g(opset.relu(x), PERM, 1), 1, [3, 5])
    m = model_of([opset.tanh(parts.output(0)), opset.sigmoid(parts.output(1))], x)
    run_checked(m, GatherSplitAbsorb())
    assert count(m, "Gather") == 0


def test_concat_other_axis_both_ways():
    x, y = param([1, 2, 8], "x"), param([1, 3, 8], "y")
    m = model_of(opset.relu(opset.concat([g(x, PERM, 2), y], 1)), [x, y])
    run_checked(m, GatherSinkingConcatForward())
    assert m.results[0].input_value(0).node.input_value(0).node.type_name == "Gather"
    x, y = param([1, 2, 8], "x"), param([1, 3, 8], "y")
    m = model_of(g(opset.concat([opset.relu(x), opset.tanh(y)], 1), PERM, 2), [x, y])
    run_checked(m, GatherSinkingConcatBackward())
    assert m.results[0].input_value(0).node.type_name == "Concat" and count(m, "Gather") == 2


def test_gather_crosses_a_transpose_both_ways():
    x = param([1, 8, 3, 5])
    m = model_of(opset.relu(opset.transpose(g(opset.relu(x), PERM, 1), [0, 2, 3, 1])), x)
    run_checked(m, GatherSinkingTransposeAxisForward())
    last = m.results[0].input_value(0).node.input_value(0).node
    assert last.type_name == "Gather" and int(last.input_value(2).node.value) == 3
    x = param([1, 3, 5, 8])
    m = model_of(g(opset.transpose(opset.relu(x), [0, 3, 1, 2]), PERM, 1), x)
    run_checked(m, GatherSinkingTransposeAxisBackward())
    assert m.results[0].input_value(0).node.type_name == "Transpose"


@pytest.mark.parametrize("keep_dims", [True, False])
def test_reduce_forward(keep_dims):
    x = param([2, 8, 3])
    m = model_of(opset.relu(opset.reduce_mean(g(opset.relu(x), PERM, 1), [2], keep_dims)), x)
    run_checked(m, GatherSinkingReduceForward())
    assert m.results[0].input_value(0).node.input_value(0).node.type_name == "Gather"


def test_reduce_drops_a_permutation_of_a_reduced_axis():
    x = param([2, 8, 3])
    m = model_of(opset.reduce_max(g(opset.relu(x), PERM, 1), [1], False), x)
    run_checked(m, GatherSinkingReduceForward())
    assert count(m, "Gather") == 0


def test_reduce_backward():
    x = param([2, 3, 8])
    m = model_of(g(opset.reduce_sum(opset.relu(x), [1], False), PERM, 1), x)
    run_checked(m, GatherSinkingReduceBackward())
    assert m.results[0].input_value(0).node.type_name == "ReduceSum"


def test_reshaped_flat_gather_moves_past_elementwise_ops():
    x, y = param([1, 24], "x"), param([2, 3, 4], "y")
    flat = np.random.default_rng(0).permutation(24)
    r = opset.reshape(g(opset.relu(x), flat, 1), opset.constant(np.array([2, 3, 4], np.int64)), False)
    m = model_of(opset.sigmoid(opset.add(opset.tanh(r), y)), [x, y])
    run_checked(m, GatherSinkingReshapedForward())
    last = m.results[0].input_value(0).node          # every op ran before the permutation
    assert last.type_name == "Reshape" and last.input_value(0).node.type_name == "Gather"
    assert last.input_value(0).node.input_value(0).node.type_name == "Sigmoid"


def test_remove_identity_gather():
    x = param([1, 8])
    m = model_of(opset.relu(g(opset.relu(x), list(range(8)), 1)), x)
    run_checked(m, RemoveIdentityGather())
    assert count(m, "Gather") == 0


def test_reshape_pair_around_an_activation_goes():
    x = param([1, 4, 3, 2])
    r = opset.reshape(opset.relu(x), opset.constant(np.array([1, 4, 6], np.int64)), False)
    back = opset.reshape(opset.tanh(r), opset.constant(np.array([1, 4, 3, 2], np.int64)), False)
    m = model_of(opset.sigmoid(back), x)
    run_checked(m, ReshapeElementwiseReorder(), ReshapeSequenceFusion())
    assert count(m, "Reshape") == 0


def test_merge_shared_transposes_of_an_input():
    x = param([1, 8, 4, 4])
    a = opset.relu(opset.transpose(x, [0, 2, 3, 1]))
    b = opset.sigmoid(opset.transpose(x, [0, 2, 3, 1]))
    c = opset.tanh(opset.transpose(x, [0, 3, 1, 2]))
    m = model_of([a, b, opset.multiply(c, opset.constant(rand(1, 4, 8, 4)))], x)
    run_checked(m, MergeSharedLayoutOps())
    assert count(m, "Transpose") == 2


@pytest.mark.parametrize("shape", [(1, 8, 8, 8), (2, 6, 5, 7)])
def test_absorbing_ops_take_the_gather_shape_as_inference_does(shape, monkeypatch):
    """A Concat absorbing the Gather after it, and a Transpose the Gather moved above, take the
    Gather's shape instead of being inferred again: on the GNA blocks, every such shortcut
    equals the op's inference."""
    from netpass.ngraph_passes.gna import gather_movement as movement
    from netpass.ngraph_passes.gna import gather_sinking_backward as backward

    checked: list = []
    # (GatherSinkingTransposeAxisBackward's Concat that takes in the Gather it does not build
    # takes the shape in gather_movement)
    for module in (backward, movement):
        monkeypatch.setattr(module, "takes_shape", against_inference(backward.takes_shape,
                                                                     checked))
    blocks = random_blocks(40, 5, channels=shape[1])
    run(netpass.read_model(gna_blocks_onnx(blocks, shape=shape)), GnaTransformationsPipeline())
    assert len(checked) > 20 and all(ok for _, ok in checked)


@pytest.mark.parametrize("indices, axis, removed", [
    ([0, 1, 2, 3, 4, 5, 6, 7], 1, True), ([-8, -7, -6, -5, -4, -3, -2, -1], 1, True),
    ([-4, 1, -2, 3], 2, True),  # (normalized against the dim, as gather_info does: 0..3)
    ([0, 1, 2, 3], 2, True), ([1, 0], 2, False), ([4, 1, 2, 3], 2, False),
    ([[0, 1]], 2, False), ([3, 2, 1, 0], 2, False)])
def test_identity_gathers_are_told_as_gather_info_tells_them(indices, axis, removed):
    """RemoveIdentityGather's predicate passes over indices whose first one is above 0 with
    none below without gather_info: the same verdict as the full test, negative indices
    (normalized) included."""
    x = param([1, 8, 4])
    g = opset.gather(x, opset.constant(np.array(indices, np.int64)),
                     opset.constant(np.int64(axis)))
    m = model_of(opset.relu(g), x)
    run_checked(m, RemoveIdentityGather())
    assert count(m, "Gather") == (0 if removed else 1)
