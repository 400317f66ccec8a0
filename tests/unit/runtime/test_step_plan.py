"""Step plans (netpass.runtime.step_plan): a symbolic binding's exec loop replayed from flat
entries must leave exactly what the per-primitive path leaves: outputs, counters, memory."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import rel_l2

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.runtime.models import gpt_decoder
from netpass.runtime.step_plan import GeneralEntry, KernelEntry, ShapeEntry, StepPlan, ViewEntry
from netpass.testing import RUNTIME_DEVICE


def _ids(rng, lengths, vocab=64):
    return [{"ids": rng.integers(0, vocab, (1, s)).astype(np.int64)} for s in lengths]


@pytest.fixture(scope="module")
def decoder():
    return gpt_decoder(64, 2, 32, 2, 64)


def _plans(cm) -> list:
    return [p for p in cm.step_plans.values() if isinstance(p, StepPlan)]


def _third_request(model, feeds, plans: bool):
    """Three requests over the same feeds: the first records, the second builds the plans
    (a binding met again), the third replays them."""
    cm = compile_program(model, RUNTIME_DEVICE, {"STEP_PLANS": plans})
    for _ in range(2):
        req = cm.create_infer_request()
        for f in feeds:
            req.infer(f)
    third = cm.create_infer_request()
    outs = [third.infer(f)["logits"] for f in feeds]
    return cm, third, outs


def test_a_plan_is_built_when_a_binding_comes_back(decoder, rng):
    cm = compile_program(decoder, RUNTIME_DEVICE)
    req = cm.create_infer_request()
    feeds = _ids(rng, [2, 3, 4, 5])
    for f in feeds:
        req.infer(f)
    assert not _plans(cm)  # (a decoder with past keys meets each length once)
    req.infer(feeds[-1])
    assert len(_plans(cm)) == 1


def test_replay_leaves_the_per_primitive_counters_and_outputs(decoder, rng):
    feeds = _ids(rng, list(range(1, 10)) + [4, 2, 7])
    cm, with_plans, outs = _third_request(decoder, feeds, True)
    _, without, ref_outs = _third_request(decoder, feeds, False)
    assert len(_plans(cm)) >= 9
    skip = {"host_wait_s", "shape_updates"}  # (shape entries replay shape_of values uninferred)
    assert {k: v for k, v in with_plans.stats.items() if k not in skip} == \
        {k: v for k, v in without.stats.items() if k not in skip}
    for a, b in zip(outs, ref_outs):
        np.testing.assert_array_equal(a, b)


def test_replayed_outputs_match_the_reference(decoder, rng):
    feeds = _ids(rng, [3, 5, 8, 5, 3, 8])
    _, _, outs = _third_request(decoder, feeds, True)
    for f, out in zip(feeds, outs):
        assert rel_l2(out, netpass.reference.infer(decoder, f)["logits"]) <= 1e-4


def test_plans_and_per_primitive_steps_interleave(decoder, rng):
    """Seen lengths replay, unseen ones run per primitive, in one request; buffers grow and
    shrink (reclaim) between them."""
    cm = compile_program(decoder, RUNTIME_DEVICE)
    req = cm.create_infer_request()
    for f in _ids(rng, [2, 3, 4, 40] * 2):
        req.infer(f)
    plans_before = len(_plans(cm))
    for f in _ids(rng, [4, 6, 40, 1, 3, 12, 4, 2, 6]):
        out = req.infer(f)["logits"]
        assert rel_l2(out, netpass.reference.infer(decoder, f)["logits"]) <= 1e-4
    assert len(_plans(cm)) > plans_before


def test_entries_classify_kernels_views_and_the_rest(decoder, rng):
    cm = compile_program(decoder, RUNTIME_DEVICE)
    req = cm.create_infer_request()
    for f in _ids(rng, [2, 3, 4, 4]):
        req.infer(f)
    plan = cm.step_plans[req.network.binding_key]
    kinds = {type(e) for e in plan.entries}
    assert kinds <= {KernelEntry, ViewEntry, ShapeEntry, GeneralEntry}
    by_index = {n.index: n for n in cm.program.nodes}
    kernels = [by_index[e.index].kind for e in plan.entries if type(e) is KernelEntry]
    assert "MatMul" in kernels
    # reshapes read only by kernels are not replayed: those kernels read under them
    reshapes = [n for n in (i.node for i in req.network.active_order) if n.kind == "Reshape"]
    assert reshapes and not any(by_index[e.index].kind == "Reshape" for e in plan.entries)
    assert plan.n_views >= len(reshapes)
    launches = req.stats["kernels_enqueued"]
    req.infer(_ids(rng, [4])[0])  # replayed
    assert req.stats["kernels_enqueued"] - launches >= plan.n_launches


def test_plan_replay_uploads_host_values_its_kernels_read(rng):
    """A kernel fed by a host-evaluated primitive (Range on the host) reads its value through
    an upload in the replay too."""
    x = opset.parameter([1, -1, 4], np.float32, name="x")
    seq = opset.gather(opset.shape_of(x), np.array([1], np.int64), np.array(0, np.int64))
    pos = opset.range(np.array(0, np.int64), opset.squeeze(seq, np.array([0], np.int64)),
                      np.array(1, np.int64), np.float32)
    y = opset.add(x, opset.unsqueeze(opset.unsqueeze(pos, np.array([0], np.int64)),
                                     np.array([2], np.int64)))
    model = Model([opset.result(opset.relu(y), name="y")], [x])
    cm = compile_program(model, RUNTIME_DEVICE)
    req = cm.create_infer_request()
    feeds = [{"x": rng.standard_normal((1, n, 4)).astype(np.float32)} for n in (2, 3, 5, 7, 5, 7, 5, 7)]
    for f in feeds:
        np.testing.assert_allclose(req.infer(f)["y"], netpass.reference.infer(model, f)["y"],
                                   rtol=1e-6, atol=1e-6)


def test_profiling_replay_collects_kernel_times(decoder, rng):
    cm = compile_program(decoder, RUNTIME_DEVICE, {"PROFILING": True})
    req = cm.create_infer_request()
    feeds = _ids(rng, [2, 3, 4, 4, 4])
    for f in feeds[:4]:
        req.infer(f)
    before = req.get_profiling_info()
    req.infer(feeds[4])  # replayed
    after = req.get_profiling_info()
    assert any(after[k] > before.get(k, 0.0) for k in after)


def test_replay_rebuilds_ints_when_an_offset_differs(decoder, rng):
    """A plan keeps each launch's ints as recorded; a tensor met at another offset makes the
    replay build them from the live tensors (here: a recorded offset made wrong on purpose)."""
    cm = compile_program(decoder, RUNTIME_DEVICE)
    feeds = _ids(rng, [2, 3, 4])  # (the first two check the symbolic shapes)
    for _ in range(2):
        req = cm.create_infer_request()
        for f in feeds:
            req.infer(f)
    plan = cm.step_plans[(4,)]
    entry = next(e for e in plan.entries if type(e) is KernelEntry
                 and any(i >= 0 for _, i, _, _, _ in e.launches[0][4]))
    ints, slots = entry.launches[0][2], entry.launches[0][4]
    i = next(i for _, i, _, _, _ in slots if i >= 0)
    ints[i] += 1  # what the replay compares the live offset with
    out = cm.create_infer_request().infer(feeds[2])["logits"]
    assert rel_l2(out, netpass.reference.infer(decoder, feeds[2])["logits"]) <= 1e-4


def _live_shape_of_model():
    """Relu(x + z) reshaped to a target computed from its shape: the broadcast Add loses the
    input symbols, so the ShapeOf sub-graph runs in symbolic mode too."""
    x = opset.parameter([-1, -1, 8], np.float32, name="x")
    z = opset.parameter([-1, -1, 8], np.float32, name="z")
    h = opset.relu(opset.add(x, z))
    shape = opset.shape_of(h)
    rows = opset.multiply(opset.gather(shape, np.array([0], np.int64), np.array(0, np.int64)),
                          opset.gather(shape, np.array([1], np.int64), np.array(0, np.int64)))
    target = opset.concat([rows, np.array([2, 4], np.int64)], 0)
    y = opset.reshape(h, target, False)
    return Model([opset.result(opset.sigmoid(y), name="y")], [x, z])


def test_shape_of_sub_graphs_replay_their_recorded_values(rng):
    """The ShapeOf sub-graph and the Reshape reading its value replay as shape and view
    entries, alternating bindings; outputs and counters as without plans."""
    model = _live_shape_of_model()
    shapes = [(2, 3), (1, 5), (2, 3), (1, 5), (2, 3), (4, 1), (1, 5)]
    feeds = [{"x": rng.standard_normal((a, b, 8)).astype(np.float32),
              "z": rng.standard_normal((a, b, 8)).astype(np.float32)} for a, b in shapes]
    stats = []
    for plans in (True, False):
        cm = compile_program(model, RUNTIME_DEVICE, {"STEP_PLANS": plans})
        req = cm.create_infer_request()
        for f in feeds:
            np.testing.assert_allclose(req.infer(f)["y"], netpass.reference.infer(model, f)["y"],
                                       rtol=1e-6, atol=1e-6)
        # (shape entries infer no shapes; the second model finds its kernels built)
        skip = ("host_wait_s", "shape_updates", "kernel_builds")
        stats.append({k: v for k, v in req.stats.items() if k not in skip})
        if plans:
            plan = _plans(cm)[0]
            kinds = {(type(e), cm.program.nodes[e.index].kind) for e in plan.entries}
            assert {(ShapeEntry, "ShapeOf"), (ShapeEntry, "Concat")} <= kinds
            assert not [e for e in plan.entries if type(e) is GeneralEntry]
    assert stats[0] == stats[1]


def test_shape_values_of_data_dependent_shapes_are_recomputed(rng):
    """A Range over the count of positive elements (NonZero: a shape decided by the data):
    one binding, different data; the plan must evaluate that shape_of value every time."""
    x = opset.parameter([-1], np.float32, name="x")
    nz = opset.non_zero(opset.greater(x, np.float32(0.0)), "i64")
    count = opset.squeeze(opset.gather(opset.shape_of(nz), np.array([1], np.int64), np.array(0, np.int64)),
                          np.array([0], np.int64))
    ramp = opset.range(np.array(0, np.int64), count, np.array(1, np.int64), np.float32)
    model = Model([opset.result(opset.relu(ramp), name="y")], [x])
    cm = compile_program(model, RUNTIME_DEVICE)
    req = cm.create_infer_request()
    for positives in (3, 5, 1, 4, 6, 2):
        v = -np.ones(8, np.float32)
        v[:positives] = 1.0
        got = req.infer({"x": v})["y"]
        np.testing.assert_array_equal(got, np.arange(positives, dtype=np.float32))
    assert _plans(cm)  # (one binding throughout: its plan replays)



def test_a_split_by_lengths_the_data_gives_is_not_replayed(rng):
    """A Split whose lengths are data (a mixture of experts' tokens per expert, JetMoE's
    experts: each piece through its expert's weights, gathered from the stacked ones) cuts
    other pieces at each infer of one binding (x's shape): the plan built once the binding
    comes back must not replay the recorded pieces."""
    from onnx import TensorProto, helper, numpy_helper
    w = rng.standard_normal((4, 8, 16)).astype(np.float32)
    nodes = [helper.make_node("Split", ["x", "lengths"], [f"s{i}" for i in range(4)], axis=0)]
    for i in range(4):
        nodes += [helper.make_node("Gather", ["w", f"i{i}"], [f"g{i}"], axis=0),
                  helper.make_node("Transpose", [f"g{i}"], [f"t{i}"], perm=[1, 0]),
                  helper.make_node("MatMul", [f"s{i}", f"t{i}"], [f"m{i}"])]
    nodes.append(helper.make_node("Concat", [f"m{i}" for i in range(4)], ["y"], axis=0))
    graph = helper.make_graph(
        nodes, "experts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16]),
                           helper.make_tensor_value_info("lengths", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")]
        + [numpy_helper.from_array(np.array(i, np.int64), f"i{i}") for i in range(4)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    cm = netpass.compile_model(netpass.read_model(proto), RUNTIME_DEVICE,
                               {"TRANSFORMATIONS": "NONE"})
    req = cm.create_infer_request()
    for seed in range(8):
        sizes = np.random.default_rng(seed).multinomial(12, [0.25] * 4)
        xv = rng.standard_normal((12, 16)).astype(np.float32)
        bounds = np.cumsum([0, *sizes])
        want = np.concatenate([xv[a:b] @ w[i].T for i, (a, b) in
                               enumerate(zip(bounds, bounds[1:]))])
        got = req.infer({"x": xv, "lengths": sizes.astype(np.int64)})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(sizes))
    assert _plans(cm.runtime)
