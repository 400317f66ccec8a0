"""TSBackwardRegions: the step-by-step backward members (with an unmarking TSFuse) after it
leave the graph they leave alone: same ops, wiring, shapes, constants and attributes, Result
producers' friendly names and tensor names. On small graphs of each op kind it models, on
what it leaves to the steps (Squeeze, an Unsqueeze needed, a per-channel PRelu, a cancelling
pair before a Result), and on the GNA layout blocks as TSGeneral leaves them."""
from __future__ import annotations

import gc
import re
import weakref

import numpy as np
import pytest
from tr_helpers import assert_same_graph, count, model_of, param, rand, run, run_checked

import netpass
from netpass import opset
from netpass.ngraph_passes.gna import GnaTransformationsPipeline
from netpass.ngraph_passes.transpose_sinking import TSFuse, TSUnaryBackward, mark_as_no_sinking
from netpass.ngraph_passes.transpose_sinking.general import BACKWARD
from netpass.ngraph_passes.transpose_sinking.regions import TSBackwardRegions
from netpass.passes import BackwardGraphRewrite, Manager, ModelPass, PassConfig
from netpass.synthetic import gna_blocks_onnx, random_blocks

NHWC, NCHW = [0, 2, 3, 1], [0, 3, 1, 2]


def steps() -> BackwardGraphRewrite:
    return BackwardGraphRewrite(*(TSFuse(mark_fused=False) if p is TSFuse else p()
                                  for p in BACKWARD))


def assert_regions_match_steps(model, config=None, moves=True):
    """Regions + steps on ``model`` give what the steps alone give, and the same outputs.
    Result producers keep the same friendly name, except where a step names one after a
    Transpose it built (``Transpose_<id>``, an id of that run: two step runs differ there
    too), which the sweep does not build. ``moves``: whether the regions pass changes the
    model (None: either)."""
    ref = model.clone()
    run(ref, steps(), config=config)
    manager = Manager(config)
    manager.register_pass(TSBackwardRegions())
    changed = manager.run_passes(model.clone())
    assert moves is None or changed == moves
    before = {n.friendly_name for n in model.get_ordered_ops()}
    run_checked(model, TSBackwardRegions(), steps(), config=config)
    assert_same_graph(model, ref, tensor_names=True)
    for got, want in zip(model.get_results(), ref.get_results()):
        a, b = got.input_value(0).node.friendly_name, want.input_value(0).node.friendly_name
        assert a == b or (b not in before and re.fullmatch(r"Transpose_\d+", b)), (a, b)
    return model


def test_chain_of_unary_and_binary_ops_moves_to_the_input():
    x = param([1, 8, 4, 4])
    y = opset.sigmoid(opset.add(opset.relu(x), opset.constant(rand(8, 1, 1))))
    model = assert_regions_match_steps(model_of(opset.transpose(y, NHWC), x))
    assert [n.type_name for n in model.get_ordered_ops()][:3] == ["Parameter", "Constant",
                                                                  "Transpose"]


def test_concat_split_pad_slice_reduction_region():
    x = param([1, 8, 6, 6])
    a, b = opset.variadic_split(x, 1, [3, 5]).outputs()
    cat = opset.concat([opset.relu(b), opset.sigmoid(a)], 1)
    padded = opset.pad(cat, [0, 0, 1, 1], [0, 0, 1, 1], "constant")
    cut = opset.slice(padded, [1, 1], [7, 7], [1, 1], [2, 3])
    mean = opset.reduce_mean(cut, [1], keep_dims=True)
    y = opset.add(cut, mean)
    model = assert_regions_match_steps(model_of(opset.transpose(y, NHWC), x))
    assert count(model, "Transpose") == 1


def test_reduction_without_keep_dims_changes_the_order():
    x = param([1, 8, 4, 4])
    y = opset.reduce_mean(opset.relu(x), [2], keep_dims=False)
    assert_regions_match_steps(model_of(opset.transpose(y, [0, 2, 1]), x))


def test_cancelling_pairs_and_fused_orders():
    x = param([1, 8, 4, 4])
    t = opset.transpose(opset.relu(x), NHWC)
    a = opset.transpose(opset.sigmoid(t), NCHW)  # cancels with t
    b = opset.transpose(opset.sigmoid(opset.transpose(opset.relu(a), [0, 1, 3, 2])), NHWC)
    assert_regions_match_steps(model_of(b, x))


def test_branches_with_other_consumers_stay():
    x = param([1, 8, 4, 4])
    r = opset.relu(x)
    model = assert_regions_match_steps(model_of([opset.transpose(opset.sigmoid(r), NHWC), r], x))
    assert count(model, "Transpose") == 1


def test_what_it_does_not_model_is_left_to_the_steps():
    x = param([1, 8, 1, 4])
    low = param([8, 1, 4], "low")
    sq = opset.squeeze(opset.relu(x), [2])
    y = opset.add(opset.sigmoid(x), low)  # the lower-rank input needs an Unsqueeze
    slope = opset.constant(rand(8))
    pr = opset.prelu(opset.relu(x), slope)  # per-channel slope
    outs = [opset.transpose(sq, [0, 2, 1]), opset.transpose(y, NHWC), opset.transpose(pr, NHWC)]
    assert_regions_match_steps(model_of(outs, [x, low]), moves=False)


def test_cancelling_pair_before_a_result():
    x = param([1, 8, 4, 4])
    y = opset.transpose(opset.transpose(opset.relu(x), NHWC), NCHW)
    assert_regions_match_steps(model_of(y, x))


def test_marks_and_callbacks_leave_the_model_to_the_steps():
    x = param([1, 8, 4, 4])
    t = opset.transpose(opset.relu(x), NHWC)
    model = model_of(t, x)
    mark_as_no_sinking(t)
    assert not TSBackwardRegions().run_on_model(model)
    config = PassConfig()
    config.set_callback(lambda node: True, TSUnaryBackward)
    model = model_of(opset.transpose(opset.relu(x), NHWC), x)
    manager = Manager(config)
    manager.register_pass(TSBackwardRegions())
    assert not manager.run_passes(model)


class _After(ModelPass):
    """Keeps a clone of the model as it runs (after TSGeneral)."""

    def __init__(self, seen):
        super().__init__()
        self.seen = seen

    def run_on_model(self, model):
        self.seen.append(model.clone())
        return False


@pytest.mark.parametrize("shape,count_,seed", [((1, 8, 8, 8), 60, 0), ((1, 6, 5, 7), 40, 3),
                                                ((2, 8, 8, 8), 30, 5), ((1, 16, 4, 4), 50, 11)])
def test_gna_blocks_after_tsgeneral(shape, count_, seed):
    data = gna_blocks_onnx(random_blocks(count_, seed, channels=shape[1]), shape=shape, seed=seed)
    seen: list = []
    pipeline = GnaTransformationsPipeline().insert_after("TSGeneral", _After(seen))
    run(netpass.read_model(data), pipeline)
    assert_regions_match_steps(seen[0])


def test_dropped_nodes_are_freed_at_once():
    """The sweep's reference cycles are broken when it ends: the Transposes and Slices it
    drops do not wait for the cyclic collector (paused through the GNA pipeline), which would
    leave them among their producers' consumers."""
    def build():
        x = param([1, 8, 6, 6])
        t = opset.transpose(opset.slice(opset.relu(x), [1], [5], [1], [2]), NHWC)
        return model_of(opset.sigmoid(opset.transpose(t, [0, 1, 2, 3])), x)
    model = build()
    dropped = [weakref.ref(n) for n in model.get_ordered_ops()
               if n.type_name in ("Transpose", "Slice")]
    gc.disable()
    try:
        run(model, TSBackwardRegions())
        kept = {id(n) for n in model.get_ordered_ops()}
        assert [r() for r in dropped if r() is not None and id(r()) not in kept] == []
    finally:
        gc.enable()


def test_no_transposes_no_change():
    x = param([1, 8, 4, 4])
    model = model_of(opset.relu(x), x)
    assert not TSBackwardRegions().run_on_model(model)


def random_graph(seed: int):
    """A random DAG on [2, 2, 2, 2] tensors (every permutation keeps the shape, so any two
    values add): unary and binary ops (constants of lower rank too), Transposes, split +
    concat, pad + slice, reductions with and without kept dims (an Unsqueeze back), and
    Results behind random Transposes."""
    rng = np.random.default_rng(seed)
    x = param([2, 2, 2, 2])
    values = [x]

    def pick():
        return values[int(rng.integers(len(values)))]

    def perm():
        return [int(a) for a in rng.permutation(4)]
    for _ in range(int(rng.integers(4, 24))):
        kind = int(rng.integers(8))
        a = pick()
        if kind == 0:
            v = (opset.relu if rng.random() < 0.5 else opset.sigmoid)(a)
        elif kind == 1:
            v = opset.add(a, pick())
        elif kind == 2:
            shape = [[2, 2, 2, 2], [2, 1, 1], [2], [1, 2, 1, 1]][int(rng.integers(4))]
            v = opset.multiply(a, opset.constant(rand(*shape, seed=seed)))
        elif kind in (3, 4):
            v = opset.transpose(a, perm())
        elif kind == 5:
            axis = int(rng.integers(4))
            s0, s1 = opset.variadic_split(a, axis, [1, 1]).outputs()
            v = opset.concat([opset.tanh(s1), s0], axis)
        elif kind == 6:
            axis = int(rng.integers(4))
            begin = [1 if i == axis else 0 for i in range(4)]
            v = opset.slice(opset.pad(a, begin, begin, "constant"), [1], [3], [1], [axis])
        else:
            axis = int(rng.integers(4))
            keep = bool(rng.random() < 0.5)
            mean = opset.reduce_mean(a, [axis], keep_dims=keep)
            v = opset.add(a, mean if keep else opset.unsqueeze(mean, [axis]))
        values.append(v)
    outs = [opset.transpose(v, perm()) if rng.random() < 0.7 else v
            for v in {id(v): v for v in values[1:][-3:]}.values()]
    return model_of(outs, x)


@pytest.mark.parametrize("seed", range(300))
def test_random_graphs(seed):
    assert_regions_match_steps(random_graph(seed), moves=None)
