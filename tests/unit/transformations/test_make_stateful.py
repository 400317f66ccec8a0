"""MakeStateful, find_kv_cache_pairs and BuildStateInitializer; the passes and pipelines keep
a stateful model's ReadValue/Assign working (folding, pre/post split, legacy conversion, all
three TRANSFORMATIONS settings)."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import run

import netpass
from netpass import Model, opset
from netpass.errors import NetpassError
from netpass.ngraph_passes.common import BuildStateInitializer, MakeStateful, find_kv_cache_pairs
from netpass.ops import Assign, Parameter, ReadValue, Result
from netpass.prepost import split_pre_post_processing
from netpass.testing import RUNTIME_DEVICE

RNG = np.random.default_rng(11)


def _rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def _tiny_decoder(batch=1) -> Model:
    """x [b, s, 4] -> k = x @ w; present = concat(past, k) on axis 1; y = mean over the
    sequence of present, plus x: the shape of a cache that grows by the new tokens."""
    x = opset.parameter([batch, -1, 4], np.float32, name="x")
    past = opset.parameter([batch, -1, 4], np.float32, name="past_key_values.0.key")
    k = opset.matmul(x, opset.constant(_rand(4, 4)), False, False)
    present = opset.concat([past, k], 1)
    present.output(0).names.add("present.0.key")
    y = opset.add(opset.reduce_mean(present, opset.constant(np.array([1])), True), x)
    return Model([opset.result(y, name="y"), opset.result(present, name="present.0.key")],
                 [x, past], "tiny")


def _run_plain(model: Model, xs: list[np.ndarray]) -> list[np.ndarray]:
    batch = xs[0].shape[0]
    past = np.zeros((batch, 0, 4), np.float32)
    out = []
    for x in xs:
        res = netpass.reference.infer(model, {"x": x, "past_key_values.0.key": past})
        past = res["present.0.key"]
        out.append(res["y"])
    return out


def test_make_stateful_replaces_the_pair_by_one_variable():
    model = _tiny_decoder()
    plain = model.clone()
    run(model, MakeStateful({"past_key_values.0.key": "present.0.key"}))
    assert model.input_names == ["x"] and model.output_names == ["y"]
    (assign,) = model.sinks
    (read,) = [n for n in model.get_ordered_ops() if isinstance(n, ReadValue)]
    assert isinstance(assign, Assign) and not read.get_input_size()
    assert read.variable_id == assign.variable_id == "past_key_values.0.keypresent.0.key"
    assert "past_key_values.0.key" in read.output(0).names
    assert read.output(0).partial_shape == plain.input("past_key_values.0.key").partial_shape
    xs = [_rand(1, n, 4) for n in (3, 1, 1, 2)]
    req = netpass.reference.create_infer_request(model)
    for got, want in zip((req.infer({"x": x})["y"] for x in xs), _run_plain(plain, xs)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert req.query_state()[0].state.shape == (1, 7, 4)


def test_make_stateful_takes_node_pairs():
    model = _tiny_decoder()
    past = model.parameters[1]
    present = model.results[1]
    run(model, MakeStateful([(past, present)]))
    assert model.input_names == ["x"]
    assert model.sinks[0].variable_id == past.friendly_name + present.friendly_name


def test_make_stateful_errors_name_what_is_wrong():
    with pytest.raises(NetpassError, match="'past' is not the name of a model input"):
        run(_tiny_decoder(), MakeStateful({"past": "present.0.key"}))
    with pytest.raises(NetpassError, match="'present' is not the name of a model output"):
        run(_tiny_decoder(), MakeStateful({"past_key_values.0.key": "present"}))
    p = opset.parameter([2, 3], np.float32, name="p")
    rows = Model([opset.result(opset.reduce_sum(p, opset.constant(np.array([1])), False),
                               name="r")], [p], "m")
    with pytest.raises(NetpassError, match=r"input 'p' is f32\[2,3\] but output 'r' is "
                                           r"f32\[2\]: they cannot be one variable"):
        run(rows, MakeStateful({"p": "r"}))
    with pytest.raises(NetpassError, match="must be \\(Parameter, Result\\)"):
        model = _tiny_decoder()
        run(model, MakeStateful([(model.results[0], model.parameters[0])]))


@pytest.mark.parametrize("past, present", [
    ("past_key_values.3.key", "present.3.key"),
    ("past_key_values.3.value", "present.3.value"),
    ("past_key_3", "present_key_3"),
    ("past_value_3", "present_value_3"),
    ("past.3.key", "present.3.key"),
    ("past_key_values.3.key", "present_key_values.3.key"),
])
def test_find_kv_cache_pairs_knows_the_exporters_names(past, present):
    x = opset.parameter([1, -1, 4], np.float32, name="input_ids")
    p = opset.parameter([1, 1, -1, 4], np.float32, name=past)
    other = opset.parameter([1, 2, -1, 4], np.float32, name="past_key_values.4.key")
    cat = opset.concat([p, opset.unsqueeze(x, opset.constant(np.array([1])))], 2)
    model = Model([opset.result(opset.relu(x), name="logits"), opset.result(cat, name=present),
                   opset.result(opset.relu(other), name="unrelated")], [x, p, other], "m")
    assert find_kv_cache_pairs(model) == {past: present}


def test_find_kv_cache_pairs_needs_matching_types_and_ranks():
    p = opset.parameter([1, -1, 4], np.float32, name="past_key_0")
    q = opset.parameter([1, -1], np.float32, name="past_value_0")
    model = Model([opset.result(opset.relu(p), name="present_key_0"),
                   opset.result(opset.relu(opset.unsqueeze(q, opset.constant(np.array([2])))),
                                name="present_value_0")], [p, q], "m")
    assert find_kv_cache_pairs(model) == {"past_key_0": "present_key_0"}


def test_build_state_initializer_gives_the_cache_the_batch_of_the_input():
    model = _tiny_decoder(batch=-1)
    plain = model.clone()
    run(model, MakeStateful(find_kv_cache_pairs(model)), BuildStateInitializer("x"))
    (read,) = [n for n in model.get_ordered_ops() if isinstance(n, ReadValue)]
    assert read.get_input_size() == 1
    for batch in (1, 3):
        xs = [_rand(batch, n, 4) for n in (2, 1, 1)]
        req = netpass.reference.create_infer_request(model)
        for got, want in zip((req.infer({"x": x})["y"] for x in xs), _run_plain(plain, xs)):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_build_state_initializer_leaves_static_batches_alone():
    model = _tiny_decoder(batch=1)
    run(model, MakeStateful(find_kv_cache_pairs(model)))
    assert not run(model, BuildStateInitializer("x")).run_passes(model)


def _stateful_transpose_output(with_assign: bool) -> Model:
    """t = Transpose(relu(x)) (a Transpose GNA cannot run) is an output; with_assign: t is also
    the variable v and ``prev`` returns v's previous value."""
    x = opset.parameter([1, 16, 3, 8], np.float32, name="x")
    t = opset.transpose(opset.relu(x), opset.constant(np.array([0, 2, 3, 1])))
    results = [opset.result(t, name="t")]
    sinks = []
    if with_assign:
        prev = opset.read_value("v", "f32", [1, 3, 8, 16])
        results.append(opset.result(opset.multiply(prev, opset.constant(np.float32(2))),
                                    name="prev"))
        sinks.append(opset.assign(t, "v"))
    return Model(results, [x], "m", sinks)


def test_prepost_split_does_not_cut_a_value_an_assign_reads():
    assert list(split_pre_post_processing(_stateful_transpose_output(False)).outputs) == ["t"]
    model = _stateful_transpose_output(True)
    reference = netpass.reference.create_infer_request(model.clone())
    pp = split_pre_post_processing(model)
    assert not pp.outputs and any(n.type_name == "Transpose" for n in model.get_ordered_ops())
    req = netpass.reference.create_infer_request(model)
    for _ in range(2):
        x = _rand(1, 16, 3, 8)
        want, got = reference.infer({"x": x}), req.infer({"x": x})
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])


def _conv_with_history() -> Model:
    """A 1-D convolution whose outputs accumulate in a variable along time (the GNA pipeline
    wraps the convolution in Transposes and sinks them) and a mean over the history."""
    x = opset.parameter([1, 4, 6], np.float32, name="x")
    conv = opset.convolution(x, opset.constant(_rand(8, 4, 3)), [1], [0], [0], [1])
    hist = opset.read_value("hist", "f32", [1, 8, -1])
    cat = opset.concat([hist, conv], 2)
    mean = opset.reduce_mean(cat, opset.constant(np.array([2])), False)
    y = opset.add(opset.matmul(mean, opset.constant(_rand(8, 5)), False, False),
                  opset.constant(_rand(5)))
    return Model([opset.result(y, name="y")], [x], "conv_hist", [opset.assign(cat, "hist")])


@pytest.mark.parametrize("device", ["REFERENCE", RUNTIME_DEVICE])
@pytest.mark.parametrize("transformations", ["NONE", "COMMON", "GNA"])
def test_pipelines_keep_the_state(transformations, device):
    model = _conv_with_history()
    cm = netpass.compile_model(model, device, {"TRANSFORMATIONS": transformations})
    for stage in (cm.transformed, cm.executable):
        assert [type(s) for s in stage.sinks] == [Assign]
        assert not any(isinstance(n, (Parameter, Result)) and n not in
                       (*stage.parameters, *stage.results) for n in stage.get_ordered_ops())
    reference = netpass.reference.create_infer_request(model)
    requests = [cm.create_infer_request() for _ in range(2)]
    xs = [_rand(1, 4, 6) for _ in range(3)]
    for x in xs:
        want = reference.infer({"x": x})["y"]
        np.testing.assert_allclose(requests[0].infer({"x": x})["y"], want, rtol=1e-5, atol=1e-6)
    assert requests[0].query_state()[0].state.shape == (1, 8, 12)
    assert requests[1].query_state()[0].state.shape == (1, 8, 0)
    first = netpass.reference.infer(model, {"x": xs[0]})["y"]
    np.testing.assert_allclose(requests[1].infer({"x": xs[0]})["y"], first, rtol=1e-5, atol=1e-6)
    requests[0].reset_state()
    np.testing.assert_allclose(requests[0].infer({"x": xs[0]})["y"], first, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", ["REFERENCE", RUNTIME_DEVICE])
def test_state_is_not_touched_while_an_asynchronous_inference_runs(device):
    import threading

    from netpass.runtime.async_queue import RequestBusyError
    cm = netpass.compile_model(_conv_with_history(), device, {"TRANSFORMATIONS": "NONE"})
    req = cm.create_infer_request()
    release = threading.Event()
    req.set_callback(lambda _: release.wait())  # holds the request busy until released
    req.start_async({"x": _rand(1, 4, 6)})
    try:
        with pytest.raises(RequestBusyError, match="variables are in use"):
            req.reset_state()
        with pytest.raises(RequestBusyError):
            req.query_state()
    finally:
        release.set()
        req.wait()
    assert req.query_state()[0].state.shape == (1, 8, 4)
