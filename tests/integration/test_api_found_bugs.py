"""What adversarial use of the public API found (threads sharing a stateful request, feeds that
are not arrays, device tensors of Python objects, malformed IR files), one regression each.

Every case ends in the right outputs (compared with onnxruntime or the reference evaluator) or
in a ``netpass.errors`` exception naming what is at fault; never in a bare Python exception, a
corrupted request or a crash.
"""
from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.core.graph_util import lint_problems
from netpass.errors import (
    DeviceError,
    InputError,
    LintError,
    ModelFormatError,
    OutOfMemoryError,
    ShapeInferenceError,
    StateError,
)
from netpass.runtime import RequestBusyError, compile_program
from netpass.testing import RUNTIME_DEVICE

ROOT = Path(__file__).resolve().parents[2]
TRANSFORMER = str(ROOT / "examples" / "transformer_block.onnx")  # x [batch, seq, 64] -> y
RNG = np.random.default_rng(21)

COMPILERS = {"compile_model": lambda m, d: netpass.compile_model(m, d, {"TRANSFORMATIONS": "NONE"}),
             "runtime": compile_program}
WAYS = [(way, dev) for way in COMPILERS for dev in ("REFERENCE", RUNTIME_DEVICE)]


# -- variables of a request shared between threads -------------------------------------------
def _history() -> Model:
    """y = sum of all x fed so far (the variable 'hist' keeps every x along axis 1)."""
    x = opset.parameter([1, -1, 4], np.float32, name="x")
    hist = opset.concat([opset.read_value("hist", "f32", [1, -1, 4]), x], 1)
    y = opset.reduce_sum(hist, opset.constant(np.array([1])), False)
    return Model([opset.result(y, name="y")], [x], "history", [opset.assign(hist, "hist")])


def _x(n: int) -> np.ndarray:
    return RNG.uniform(-1, 1, (1, n, 4)).astype(np.float32)


@pytest.mark.parametrize("way,device", WAYS, ids=[f"{w}-{d}" for w, d in WAYS])
def test_a_variable_state_is_not_touched_while_an_inference_holds_the_request(way, device):
    """A VariableState from query_state() read, assigned or reset on another thread while an
    inference of its request runs raises RequestBusyError (assigning went through: the
    variable's buffer was replaced under the running inference, which broke the request for
    good, even across reset_state)."""
    req = COMPILERS[way](_history(), device).create_infer_request()
    first, second = _x(2), _x(3)
    req.infer({"x": first})
    states = req.query_state()  # taken while the request is idle
    inside, release = threading.Event(), threading.Event()

    def hold(_):
        inside.set()
        release.wait()
    req.set_callback(hold)  # the request stays busy until released
    req.start_async({"x": second})
    inside.wait()
    try:
        with pytest.raises(RequestBusyError, match="variables are in use"):
            states[0].state = np.zeros((1, 1, 4), np.float32)
        with pytest.raises(RequestBusyError):
            states[0].state  # noqa: B018 (reading it is what is refused)
        with pytest.raises(RequestBusyError):
            states[0].reset()
        with pytest.raises(RequestBusyError):
            req.reset_state()
    finally:
        release.set()
        req.wait()
    np.testing.assert_allclose(states[0].state, np.concatenate([first, second], 1), rtol=1e-6)


@pytest.mark.parametrize("way,device", WAYS, ids=[f"{w}-{d}" for w, d in WAYS])
def test_threads_sharing_a_stateful_request_serialize_or_are_refused(way, device):
    """Two threads infer on one stateful request while a third assigns its states: each call
    either runs whole or raises RequestBusyError, and the request then works as a new one."""
    req = COMPILERS[way](_history(), device).create_infer_request()
    states = req.query_state()
    unexpected: list = []

    def infer(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(40):
            try:
                req.infer({"x": rng.uniform(-1, 1, (1, int(rng.integers(1, 4)), 4))
                           .astype(np.float32)})
            except RequestBusyError:
                pass
            except Exception as e:  # reported by the main thread
                unexpected.append(e)

    def assign() -> None:
        for n in range(40):
            try:
                states[0].state = np.full((1, n % 5, 4), 0.5, np.float32)
            except RequestBusyError:
                pass
            except Exception as e:
                unexpected.append(e)

    workers = [threading.Thread(target=infer, args=(1,)), threading.Thread(target=assign),
               threading.Thread(target=infer, args=(2,))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not unexpected, unexpected[0]
    req.reset_state()
    feeds = [_x(3), _x(1), _x(2)]
    for i, x in enumerate(feeds):
        want = np.concatenate(feeds[:i + 1], 1).sum(1)
        np.testing.assert_allclose(req.infer({"x": x})["y"], want, rtol=1e-5, atol=1e-6)


def _four_variables() -> Model:
    """Variables read in the order zeta, alpha, mid, beta (a chain: each adds its variable to
    the last sum), written by Assigns listed beta, alpha, zeta, mid: neither sorted names nor
    the sinks' order is the model's."""
    x = opset.parameter([1, 4], np.float32, name="x")
    h, assigns = x, {}
    for vid in ("zeta", "alpha", "mid", "beta"):
        h = opset.add(opset.relu(h), opset.read_value(vid, "f32", [1, 4]))
        assigns[vid] = opset.assign(h, vid)
    return Model([opset.result(h, name="y")], [x], "four",
                 [assigns[v] for v in ("beta", "alpha", "zeta", "mid")])


ORDER_WAYS = [("reference", None, "NONE")] + [
    (way, dev, tr) for dev in ("REFERENCE", RUNTIME_DEVICE)
    for way, trs in (("runtime", ("NONE",)), ("compile_model", ("NONE", "COMMON", "GNA")))
    for tr in trs]


@pytest.mark.parametrize("way,device,transformations", ORDER_WAYS,
                         ids=["-".join(map(str, w)) for w in ORDER_WAYS])
def test_query_state_lists_the_variables_in_the_models_order(way, device, transformations):
    """(The reference evaluator and compile_model on REFERENCE listed them in the sinks' order,
    beta, alpha, zeta, mid; the runtime in its program's ReadValues' order.)"""
    model = _four_variables()
    if way == "reference":
        req = netpass.reference.create_infer_request(model)
    elif way == "runtime":
        req = compile_program(model, device).create_infer_request()
    else:
        req = netpass.compile_model(model, device, {"TRANSFORMATIONS": transformations}
                                    ).create_infer_request()
    ref = netpass.reference.create_infer_request(model)
    for _ in range(2):
        x = _x(1)[:, 0]
        req.infer({"x": x})
        ref.infer({"x": x})
    states = req.query_state()
    assert [s.name for s in states] == ["zeta", "alpha", "mid", "beta"]
    want = {s.name: s.state for s in ref.query_state()}
    for s in states:
        np.testing.assert_allclose(s.state, want[s.name], rtol=1e-5, atol=1e-6, err_msg=s.name)


@pytest.mark.parametrize("way,device", WAYS, ids=[f"{w}-{d}" for w, d in WAYS])
def test_a_state_that_is_not_an_array_is_a_state_error(way, device):
    """(A ragged list was numpy's ValueError, a view too large to copy a bare MemoryError.)"""
    state = COMPILERS[way](_history(), device).create_infer_request().query_state()[0]
    with pytest.raises(StateError, match=r"variable 'hist': cannot be made an array from a "
                                         r"list"):
        state.state = [[1.0], [1.0, 2.0]]
    with pytest.raises(OutOfMemoryError, match=r"variable 'hist': out of memory copying a "
                                               r"state of shape \[1, 100000000000, 4\]"):
        state.state = np.broadcast_to(np.float32(1), (1, 10**11, 4))
    assert state.state.shape == (1, 0, 4)  # (still the initial value)


# -- zero-size inputs ----------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(0, 5, 64), (2, 0, 64)])
def test_a_zero_size_input_on_a_new_request_after_other_lengths(shape):
    """Requests of lengths 3 and 5 first, then a new request fed a zero-size input: the GNA
    pipeline's attention reads a strided view whose empty producer has no tensor in the new
    request (its strides were read from None: an AttributeError)."""
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(TRANSFORMER, providers=["CPUExecutionProvider"])
    cm = netpass.compile_model(TRANSFORMER, RUNTIME_DEVICE)
    for n in (3, 5):
        cm.create_infer_request().infer({"x": RNG.standard_normal((1, n, 64), np.float32)})
    req = cm.create_infer_request()
    assert req.infer({"x": np.zeros(shape, np.float32)})["y"].shape == shape
    x = RNG.standard_normal((2, 5, 64), np.float32)  # and it computes after that
    np.testing.assert_allclose(req.infer({"x": x})["y"], sess.run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-4)


# -- feeds that are not arrays -------------------------------------------------------------------
def _mlp() -> Model:
    x = opset.parameter([-1, 8], np.float32, name="x")
    w = np.random.default_rng(3).standard_normal((8, 5)).astype(np.float32)
    return Model([opset.result(opset.relu(opset.matmul(x, w, False, False)), name="y")], [x],
                 "mlp")


BAD_FEEDS = [
    ([np.ones((2, 8), np.float32)], InputError,
     r"input 'x': the inputs must be a mapping of input name -> array, got a list"),
    ((("x", np.ones((2, 8), np.float32)),), InputError, r"must be a mapping .* got a tuple"),
    ({"x": [[1.0], [1.0, 2.0]]}, InputError, r"input 'x': cannot be made an array from a list"),
    ({"x": np.ones((2, 8), np.float32), 0: 1, "z": 2}, InputError,
     r"input '0': not an input of the model"),
    ({"x": np.broadcast_to(np.float32(1), (10**12, 8))}, OutOfMemoryError,
     r"input 'x': out of memory making an array of shape \[1000000000000, 8\]"),
]


@pytest.mark.parametrize("way,device", WAYS, ids=[f"{w}-{d}" for w, d in WAYS])
@pytest.mark.parametrize("feeds,error,match", BAD_FEEDS,
                         ids=["list", "pairs", "ragged", "int-key", "huge-view"])
def test_feeds_that_are_not_arrays_are_input_errors(way, device, feeds, error, match):
    """(They were a raw ValueError, TypeError or AttributeError: numpy's, from the feeds.)"""
    req = COMPILERS[way](_mlp(), device).create_infer_request()
    if error is OutOfMemoryError and device == "REFERENCE" and way == "compile_model":
        pytest.skip("the reference evaluator reads a view as it is: no copy to run out of")
    with pytest.raises(error, match=match):
        req.infer(feeds)
    req.start_async(feeds)  # the same at wait(), and the request still works
    with pytest.raises(error, match=match):
        req.wait()
    x = np.ones((2, 8), np.float32)
    np.testing.assert_allclose(req.infer({"x": x})["y"], netpass.reference.infer(
        _mlp(), {"x": x})["y"], rtol=1e-5)


def test_reference_infer_refuses_feeds_that_are_not_a_mapping():
    with pytest.raises(InputError, match=r"must be a mapping .* got a list"):
        netpass.reference.infer(_mlp(), [np.ones((2, 8), np.float32)])


# -- outputs the caller owns --------------------------------------------------------------------
def _passthrough(kind: str) -> Model:
    """Outputs that are (views of) an input or a constant, or one value returned twice."""
    x = opset.parameter([2, 3], np.float32, name="x")
    c = opset.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    shape = opset.constant(np.array([3, 2]))
    outs = {"input": [x], "input-view": [opset.reshape(x, shape, False)],
            "constant": [c, opset.relu(x)], "constant-view": [opset.reshape(c, shape, False), x],
            "twice": [x, x]}[kind]
    return Model([opset.result(o, name=f"y{i}") for i, o in enumerate(outs)], [x], kind)


RUNS = {"reference.infer": lambda m, d: (lambda f: netpass.reference.infer(m, f)),
        "compile_model": lambda m, d: netpass.compile_model(m, d).create_infer_request().infer,
        "runtime": lambda m, d: compile_program(m, d).create_infer_request().infer}
RUN_CASES = [("reference.infer", "REFERENCE")] + [(w, d) for w in ("compile_model", "runtime")
                                                   for d in ("REFERENCE", RUNTIME_DEVICE)]


@pytest.mark.parametrize("run,device", RUN_CASES, ids=[f"{r}-{d}" for r, d in RUN_CASES])
@pytest.mark.parametrize("kind", ["input", "input-view", "constant", "constant-view", "twice"])
def test_writing_into_an_output_changes_no_input_model_or_other_output(run, device, kind):
    """(An output that was the caller's array or a view of it was handed out as it was, so
    writing into it changed the caller's input; one that was a Constant's value changed the
    model's constant for every later inference; one value returned twice was one array.)"""
    model = _passthrough(kind)
    infer = RUNS[run](model, device)
    x = np.ones((2, 3), np.float32)
    want = {k: v.copy() for k, v in infer({"x": x.copy()}).items()}
    outs = infer({"x": x})
    for v in outs.values():
        v[...] = 7
    np.testing.assert_array_equal(x, np.ones((2, 3), np.float32))
    again = infer({"x": np.ones((2, 3), np.float32)})
    for k, v in again.items():
        np.testing.assert_array_equal(v, want[k])
    for a in again:
        for b in again:
            assert a == b or not np.shares_memory(again[a], again[b]), (a, b)


# -- Model.reshape ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,error,match", [
    ({"x": [1, 4, 32]}, ShapeInferenceError, r"do not broadcast"),
    ({"x": [1, 4]}, ShapeInferenceError, r"out of range for rank 2"),
    ({"x": [-3, 4, 64]}, InputError, r"input 'x': new shape \[-3, 4, 64\] is not a shape: "
                                     r"negative dimension -3"),
    ({"x": [10**20, 4, 64]}, InputError, r"input 'x': new shape .* has a dim past"),
    ({3: [1, 4, 64]}, InputError, r"input '3': no input at index 3"),
    (7, InputError, r"input 'x': reshape takes a mapping of input -> shape"),
], ids=["graph-refuses", "rank", "negative", "past-int64", "index", "not-shapes"])
def test_a_failed_reshape_leaves_the_model_as_it_was(shape, error, match):
    """(The new shapes stayed set, the model unusable with the feeds it took before; a
    negative dim, one past int64 and an index past the inputs were raw ValueError,
    OverflowError and IndexError.)"""
    model = netpass.read_model(TRANSFORMER)
    x = RNG.standard_normal((2, 3, 64), np.float32)
    want = netpass.reference.infer(model, {"x": x})["y"]
    with pytest.raises(error, match=match):
        model.reshape(shape)
    assert str(model.input(0).partial_shape) == "[?,?,64]"
    assert str(model.output(0).partial_shape) == "[?,?,64]"
    np.testing.assert_allclose(netpass.reference.infer(model, {"x": x})["y"], want, rtol=1e-6)


@pytest.mark.parametrize("shape", [[1, 5, 64], "1,5,64", ["1", "5", 64], [[1, 5, 64]],
                                   {"x": [1, 5, 64]}, {0: "1,5,64"}])
def test_a_model_of_one_input_reshapes_to_a_shape_alone(shape):
    """As OpenVINO's ``model.reshape([1, 3, 224, 224])`` (a list of dims was taken for a list
    of shapes: TypeError 'int' object is not iterable)."""
    model = netpass.read_model(TRANSFORMER)
    model.reshape(shape)
    assert str(model.input(0).partial_shape) == "[1,5,64]"


# -- devices -------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", [3, ["CPU"], b"CPU"])
def test_a_device_that_is_not_a_name_is_a_device_error(device):
    """(compile_model called .upper() on it: AttributeError.)"""
    with pytest.raises(DeviceError, match=r"the device must be a name, one of AUTO, GPU, CPU, "
                                          r"REFERENCE; got"):
        netpass.compile_model(_mlp(), device)


# -- device tensors ------------------------------------------------------------------------------
@pytest.mark.parametrize("array", [np.array(["1", "22"], dtype=object), np.array(["ab"]),
                                   np.zeros(2, complex), np.zeros(2, "M8[s]")],
                         ids=["object", "str", "complex", "datetime"])
def test_a_device_tensor_holds_only_element_types(array):
    """An object array's bytes are pointers: copied to the device and read back into an
    object array they were objects of freed memory (a segfault once touched)."""
    cm = netpass.compile_model(_mlp(), RUNTIME_DEVICE)
    with pytest.raises(InputError, match=re.escape(f"dtype {array.dtype} cannot be held in "
                                                   f"device memory")):
        cm.create_device_tensor(array)


def test_a_device_tensor_of_a_ragged_list_or_a_0d_array():
    cm = netpass.compile_model(_mlp(), RUNTIME_DEVICE)
    with pytest.raises(InputError, match="cannot be made an array from a list"):
        cm.create_device_tensor([[1.0], [1.0, 2.0]])
    scalar = cm.create_device_tensor(np.float32(2.5))
    assert scalar.shape == () and scalar.numpy() == np.float32(2.5)  # (it was made [1])
    scalar.write(np.float32(4.0))
    assert scalar.numpy() == np.float32(4.0)
    with pytest.raises(InputError, match="cannot be made an array"):
        scalar.write([[1.0], [1.0, 2.0]])


# -- malformed IR files -------------------------------------------------------------------------
@pytest.fixture
def kws_ir(tmp_path) -> Path:
    netpass.save_model(netpass.read_model(ROOT / "examples" / "kws_cnn.onnx"),
                       tmp_path / "m.xml")
    return tmp_path / "m.xml"


CONST = 'element_type="f32" shape="8, 1, 3, 3" offset="0" size="288"'


@pytest.mark.parametrize("data,match", [
    ('element_type="1..3" shape="8, 1, 3, 3" offset="0" size="288"',
     r"bad Const data .*unknown element type '1\.\.3'"),
    ('element_type="-5,3" shape="8, 1, 3, 3" offset="0" size="288"',
     r"bad Const data .*unknown element type '-5,3'"),
    ('element_type="f32" shape="18446744073709551616" offset="0" size="4"',
     r"size 4 does not match shape \[18446744073709551616\]"),
    ('element_type="f32" shape="4294967296, 4294967296" offset="0" size="0"',
     r"size 0 does not match shape \[4294967296, 4294967296\]"),
    ('element_type="f32" shape="0, 1180591620717411303424" offset="0" size="0"',
     r"shape \[0, 1180591620717411303424\]"),
], ids=["interval-type", "record-type", "dim-2^64", "product-wraps-to-0", "zero-by-huge"])
def test_const_layers_with_impossible_data_are_model_format_errors(kws_ir, data, match):
    """(A TypeError from the element type read before the checked path, a ValueError from
    numpy's record syntax, an OverflowError from an int64 product, and an int64 product that
    wrapped to 0 elements.)"""
    text = kws_ir.read_text()
    assert CONST in text
    kws_ir.write_text(text.replace(CONST, data, 1))
    with pytest.raises(ModelFormatError, match=match):
        netpass.read_model(kws_ir)


def test_a_layer_reading_a_result_is_a_model_format_error(kws_ir):
    """A Result in the middle of the edges (a MaxPool layer retyped): it read, and inference
    failed in the post-processing with numpy's reshape error."""
    text = kws_ir.read_text()
    layer = 'type="MaxPool" version="opset8"'
    assert layer in text
    kws_ir.write_text(text.replace(layer, 'type="Result" version="opset1"', 1))
    with pytest.raises(ModelFormatError, match=r"reads layer \d+ .*\(Result, opset1\), a Result: "
                                               r"a Result has no outputs"):
        netpass.read_model(kws_ir)


def test_lint_reports_a_result_with_consumers():
    x = opset.parameter([2], np.float32, name="x")
    inner = opset.result(opset.relu(x), name="inner")
    model = Model([opset.result(opset.negative(inner.output(0)), name="y"), inner], [x], "m")
    assert any("Result 'inner' feeds other nodes" in p
               for p in lint_problems(model))


@pytest.mark.parametrize("transformations", ["NONE", "COMMON", "GNA"])
def test_an_output_named_after_a_producer_the_pipeline_replaces_keeps_its_name(transformations):
    """An output whose name the model does not set is named after its producer (a MaxPool's
    values: ``MaxPool_N.0``); the GNA pipeline replaces the MaxPool, and compile_model's request
    looked the output up by the new producer's name: a bare KeyError. compile_model pins the
    names on its copy; the user's model keeps its own Results as they were."""
    rng = np.random.default_rng(5)
    x = opset.parameter([1, 2, 4, 4], np.float32, name="x")
    w = rng.standard_normal((3, 2, 1, 1)).astype(np.float32)
    conv = opset.convolution(x, w, [1, 1], [0, 0], [0, 0], [1, 1])
    pool = opset.max_pool(conv, [1, 1], [1, 1], [0, 0], [0, 0], [2, 2])
    model = Model([pool.output(0)], [x])
    names, result_names = model.output_names, [r.friendly_name for r in model.results]
    feeds = {"x": rng.standard_normal((1, 2, 4, 4)).astype(np.float32)}
    out = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": transformations}) \
        .create_infer_request().infer(feeds)
    assert list(out) == names
    np.testing.assert_allclose(out[names[0]], netpass.reference.infer(model, feeds)[names[0]],
                               rtol=1e-5, atol=1e-6)
    assert model.output_names == names and [r.friendly_name for r in model.results] == result_names


@pytest.mark.parametrize("which", ["output", "input"])
def test_two_outputs_or_inputs_of_one_name_are_refused(which):
    """Two Results named 'y': the reference evaluator returned one of them and dropped the
    other, and compile_model failed inside its pre/post split, blaming that stage; two
    Parameters named 'x' were accepted (one could never be fed). Both refuse the model with a
    LintError naming the positions and nodes (found probing the names compile_model keeps)."""
    x = opset.parameter([2, 3], np.float32, name="x")
    x2 = opset.parameter([2, 3], np.float32, name="x" if which == "input" else "x2")
    ys = [opset.result(opset.relu(x), name="y"),
          opset.result(opset.abs(x2), name="y" if which == "output" else "y2")]
    model = Model(ys, [x, x2])
    feeds = {n: np.ones((2, 3), np.float32) for n in model.input_names}
    expected = f"model {which}s 0 and 1 share the name '{'y' if which == 'output' else 'x'}'"
    with pytest.raises(LintError, match=expected):
        netpass.reference.infer(model, feeds)
    with pytest.raises(LintError, match=expected):
        netpass.compile_model(model, RUNTIME_DEVICE)
