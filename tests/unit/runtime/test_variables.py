"""Variables in the runtime (netpass.runtime.state): in-place append into a buffer with room
along the sequence axis, the copy path, growth past the preallocation, query/set/reset of the
state on the device, step-plan replay, and the REFERENCE runtime path. Every step is compared
with the reference evaluator's request (rel. L2 1e-5)."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.errors import StateError
from netpass.runtime import compile_program
from netpass.runtime import state as runtime_state
from netpass.runtime.shape_predictor import ShapePredictor
from netpass.runtime.step_plan import StepPlan
from netpass.testing import RUNTIME_DEVICE

RNG = np.random.default_rng(4)
HEADS, HD, D = 2, 4, 8


def _w(*shape: int) -> np.ndarray:
    return RNG.uniform(-0.5, 0.5, size=shape).astype(np.float32)


def _heads(x, w):
    """[1, s, D] @ w -> [1, HEADS, s, HD]."""
    y = opset.reshape(opset.matmul(x, opset.constant(w), False, False),
                      opset.constant(np.array([0, 0, HEADS, HD])), True)
    return opset.transpose(y, opset.constant(np.array([0, 2, 1, 3])))


def _attention_with_cache(reader: str = "matmul") -> Model:
    """One attention layer whose keys/values are variable ``kv`` (concatenated on axis 2).
    ``reader``: how the scores read the cache: a MatMul (``transpose_b``), a Transpose then a
    scale (the Transpose copies it), or a grouped-query repeat (Unsqueeze, Broadcast,
    Reshape)."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    q, k = _heads(x, _w(D, D)), _heads(x, _w(D, D))
    cache = opset.concat([opset.read_value("kv", "f32", [1, HEADS, -1, HD]), k], 2)
    keys = cache
    if reader == "broadcast":
        rep = opset.broadcast(opset.unsqueeze(cache, opset.constant(np.array([2]))),
                              opset.constant(np.array([1, 1, 2, 1, 1])), mode="bidirectional")
        keys = opset.reshape(rep, opset.constant(np.array([0, 2 * HEADS, -1, HD])), True)
        q = opset.concat([q, q], 1)
    if reader == "transpose":
        kt = opset.multiply(opset.transpose(keys, opset.constant(np.array([0, 1, 3, 2]))),
                            opset.constant(np.float32(0.5)))
        scores = opset.matmul(q, kt, False, False)
    else:
        scores = opset.matmul(q, keys, False, True)
    out = opset.matmul(opset.softmax(scores, -1), keys, False, False)
    return Model([opset.result(out, name="y")], [x], f"cache_{reader}",
                 [opset.assign(cache, "kv")])


def _history_mean() -> Model:
    """The variable is read by a ReduceMean (no strided reader): the copy path."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    hist = opset.concat([opset.read_value("h", "f32", [1, -1, D]), opset.relu(x)], 1)
    y = opset.reduce_mean(hist, opset.constant(np.array([1])), True)
    return Model([opset.result(opset.add(y, x), name="y")], [x], "hist", [opset.assign(hist, "h")])


def _check_steps(model: Model, lengths, config=None, requests=1):
    cm = compile_program(model, RUNTIME_DEVICE, config)
    reqs = [cm.create_infer_request() for _ in range(requests)]
    ref = netpass.reference.create_infer_request(model)
    for n in lengths:
        x = RNG.standard_normal((1, n, D)).astype(np.float32)
        want = ref.infer({"x": x})["y"]
        for req in reqs:
            got = req.infer({"x": x})["y"]
            assert got.shape == want.shape
            assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want)
    return cm, reqs, ref


def _roles(cm) -> dict:
    return {(n.kind, n.state_role): n.state_axis for n in cm.program.nodes if n.state_role}


@pytest.mark.parametrize("reader", ["matmul", "transpose", "broadcast"])
def test_cache_grows_in_place(reader):
    cm, (req,), ref = _check_steps(_attention_with_cache(reader), [1, 1, 3, 1, 1, 2])
    assert _roles(cm) == {("ReadValue", "read"): 2, ("Concat", "append"): 2,
                          ("Assign", "assign"): 2}
    assert req.stats["state_allocations"] == 1 and req.stats["state_appends"] == 6
    (state,) = req.query_state()
    np.testing.assert_allclose(state.state, ref.query_state()[0].state, rtol=1e-5, atol=1e-6)


def test_growth_past_the_preallocation_copies_the_state_once(monkeypatch):
    monkeypatch.setattr(runtime_state, "PREALLOC_STEPS", 3)
    _, (req,), _ = _check_steps(_attention_with_cache(), [2, 1, 1, 1, 1, 1, 1, 1])
    # capacity 2+3, then 6+3: one reallocation (and copy) after the first buffer
    assert req.stats["state_allocations"] == 2


def test_copy_path_double_buffers():
    cm, (req,), ref = _check_steps(_history_mean(), [3, 1, 1, 2, 1])
    assert _roles(cm) == {("ReadValue", "read"): None, ("Assign", "assign"): None}
    assert req.stats["state_appends"] == 0
    # the prefill's buffer, then both buffers sized ahead once the growth axis is seen
    assert req.stats["state_allocations"] == 3
    np.testing.assert_allclose(req.query_state()[0].state, ref.query_state()[0].state, rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("make", [_attention_with_cache, _history_mean])
def test_state_set_reset_and_two_requests_on_the_device(make):
    model = make()
    cm, reqs, _ = _check_steps(model, [2, 1, 1], requests=2)
    a, b = reqs
    (sa,), (sb,) = a.query_state(), b.query_state()
    value = sa.state
    assert value.shape[-2 if make is _history_mean else 2] == 4
    sb.reset()
    assert b.query_state()[0].state.size == 0
    sb.state = value  # the state of a, into b
    x = RNG.standard_normal((1, 1, D)).astype(np.float32)
    np.testing.assert_allclose(b.infer({"x": x})["y"], a.infer({"x": x})["y"], rtol=1e-6)
    with pytest.raises(StateError, match="dtype float64"):
        sb.state = value.astype(np.float64)
    a.reset_state()
    ref = netpass.reference.create_infer_request(model)
    np.testing.assert_allclose(a.infer({"x": x})["y"], ref.infer({"x": x})["y"], rtol=1e-5,
                               atol=1e-6)  # (float32 sums in another order; outputs ~1)
    assert b.query_state()[0].state.shape != a.query_state()[0].state.shape


def test_a_sequence_met_again_replays_its_step_plan():
    """The same lengths from a reset state: the bindings (input and variable shapes) come back
    and their step plans replay; every step equals the first run."""
    cm = compile_program(_attention_with_cache("transpose"), RUNTIME_DEVICE)
    req = cm.create_infer_request()
    xs = [RNG.standard_normal((1, n, D)).astype(np.float32) for n in (3, 1, 1)]
    runs = []
    for _ in range(3):
        req.reset_state()
        runs.append([req.infer({"x": x})["y"] for x in xs])
    assert any(isinstance(p, StepPlan) for p in cm.step_plans.values())
    for run in runs[1:]:
        for got, want in zip(run, runs[0]):
            np.testing.assert_array_equal(got, want)
    assert req.stats["state_allocations"] == 1  # the buffer outlives the resets



@pytest.mark.parametrize("squeeze", ["prealloc_steps", "no_room"])
def test_a_new_request_replays_a_plan_only_on_caches_laid_out_as_its(monkeypatch, squeeze):
    """A step plan made by a new request's first prompt serves the prompts of the next new
    requests (their variables have no buffer: layout None) and reads the cache through the
    strides of the buffer that first request got. A new request that would size its buffer
    otherwise (another PREALLOC_STEPS; no room to preallocate: the exact size) takes the
    plan's layout where it may, else runs without the plan: before, its prompt read and wrote
    a cache of 3 + 5 rows as one of 3 + 128 (wrong outputs, writes past the buffer)."""
    model = _attention_with_cache("transpose")
    cm = compile_program(model, RUNTIME_DEVICE)

    def sequence() -> int:
        req, ref = cm.create_infer_request(), netpass.reference.create_infer_request(model)
        for n in (3, 1, 1, 2, 1):
            x = RNG.standard_normal((1, n, D)).astype(np.float32)
            got, want = req.infer({"x": x})["y"], ref.infer({"x": x})["y"]
            assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want)
        return req.network.state.vars["kv"].capacity[2]

    assert sequence() == sequence() == 3 + runtime_state.PREALLOC_STEPS
    assert any(isinstance(p, StepPlan) for p in cm.step_plans.values())
    if squeeze == "prealloc_steps":
        monkeypatch.setattr(runtime_state, "PREALLOC_STEPS", 5)
    else:
        monkeypatch.setattr(ShapePredictor, "can_preallocate", lambda self, nbytes: False)
    rows = 3 + 128 if squeeze == "prealloc_steps" else 3 + 1 + 1 + 2 + 1
    assert sequence() == sequence() == rows  # (the plan's layout; else exact sizes)

@pytest.mark.parametrize("config", [{"SYMBOLIC_SHAPES": False}, {"FUSION": False},
                                    {"STEP_PLANS": False}])
def test_state_without_runtime_options(config):
    _check_steps(_attention_with_cache("broadcast"), [2, 1, 1, 3], config)


def test_reference_runtime_device_holds_state_too():
    model = _history_mean()
    cm = compile_program(model, "REFERENCE")
    req = cm.create_infer_request()
    ref = netpass.reference.create_infer_request(model)
    for n in (2, 1, 1):
        x = RNG.standard_normal((1, n, D)).astype(np.float32)
        np.testing.assert_allclose(req.infer({"x": x})["y"], ref.infer({"x": x})["y"], rtol=1e-6)
    assert req.query_state()[0].state.shape == (1, 4, D)
    req.reset_state()
    assert req.query_state()[0].state.shape == (1, 0, D)


def test_a_prompt_on_an_empty_cache_with_an_init_subgraph_replays_its_step_plan():
    """A variable whose initial value an init sub-graph computes (a stateful decoder's empty
    cache [batch, heads, 0, head], its batch taken from the input) binds its shape from the
    init value's partial shape: the prompt of every new sequence is a symbolic inference whose
    step plan replays, equal to the reference's."""
    x = opset.parameter([-1, -1, D], np.float32, name="x")
    batch = opset.gather(opset.shape_of(x), opset.constant(np.array([0])), opset.constant(0))
    shape = opset.concat([batch, opset.constant(np.array([HEADS, 0, HD]))], 0)
    init = opset.broadcast(opset.constant(np.float32(0)), shape)
    q, k = _heads(x, _w(D, D)), _heads(x, _w(D, D))
    cache = opset.concat([opset.read_value(init, "kv", "f32", [-1, HEADS, -1, HD]), k], 2)
    out = opset.matmul(opset.softmax(opset.matmul(q, cache, False, True), -1), cache, False, False)
    model = Model([opset.result(out, name="y")], [x], "init_cache", [opset.assign(cache, "kv")])
    cm = compile_program(model, RUNTIME_DEVICE)
    req = cm.create_infer_request()
    ref = netpass.reference.create_infer_request(model)
    prompt = RNG.standard_normal((2, 5, D)).astype(np.float32)
    for _ in range(4):
        req.reset_state()
        ref.reset_state()
        before = req.stats["symbolic_infers"]
        got, want = req.infer({"x": prompt})["y"], ref.infer({"x": prompt})["y"]
        assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want)
    assert req.stats["symbolic_infers"] == before + 1  # (the last prompt: symbolic)
    assert any(isinstance(p, StepPlan) for p in cm.step_plans.values())


def _dim(x, axis: int):
    return opset.gather(opset.shape_of(x), opset.constant(np.array([axis])),
                        opset.constant(np.array(0)))


def _merged_heads_attention() -> Model:
    """Dynamic batch; the scores read the cache ``[batch, HEADS, past, HD]`` through a Reshape
    that merges batch and heads (``[batch * HEADS, past, HD]``, its target from the shape: as
    the dynamo exporter writes GPT-2's batched matmuls)."""
    x = opset.parameter([-1, -1, D], np.float32, name="x")
    q, k = _heads(x, _w(D, D)), _heads(x, _w(D, D))
    empty = opset.broadcast(opset.constant(np.float32(0)), opset.concat(
        [_dim(x, 0), opset.constant(np.array([HEADS, 0, HD]))], 0))
    cache = opset.concat([opset.read_value(empty, "kv", "f32", [-1, HEADS, -1, HD]), k], 2)

    def merged(t):
        return opset.reshape(t, opset.concat([opset.constant(np.array([-1])), _dim(t, 2),
                                              opset.constant(np.array([HD]))], 0), False)
    keys = merged(cache)
    scores = opset.matmul(merged(q), keys, False, True)
    out = opset.matmul(opset.softmax(scores, -1), keys, False, False)
    return Model([opset.result(out, name="y")], [x], "cache_merged_heads",
                 [opset.assign(cache, "kv")])


def test_a_cache_read_through_a_reshape_merging_batch_and_heads_grows_in_place():
    """In a capacity layout the dims before the sequence axis are contiguous among themselves:
    a Reshape merging them is a strided view, so the cache is appended in place, not copied,
    and decode steps replay their length plan."""
    cm, (req,), ref = _check_steps(_merged_heads_attention(), [3] + [1] * 14 + [2, 1])
    assert _roles(cm) == {("ReadValue", "read"): 2, ("Concat", "append"): 2,
                          ("Assign", "assign"): 2}
    assert req.stats["state_allocations"] == 1 and req.stats["state_appends"] == 17
    assert req.stats["length_replays"] > 0
    (state,) = req.query_state()
    np.testing.assert_allclose(state.state, ref.query_state()[0].state, rtol=1e-5, atol=1e-6)
