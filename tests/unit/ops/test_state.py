"""ReadValue / Assign: shape inference, the model's variables, and the reference evaluator's
requests holding them (OpenVINO's VariableState semantics)."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Dimension, Model, PartialShape, opset
from netpass.errors import NetpassError, ShapeInferenceError, StateError, UnsupportedOpError
from netpass.frontend.onnx_writer import to_onnx
from netpass.ops import Assign, ReadValue
from netpass.ops.state import VariableInfo, model_variables

RNG = np.random.default_rng(3)


def _rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def _accumulator(init=None) -> Model:
    """y = concat(state, x) along axis 1, written back to the state; z = relu(y) * 2."""
    x = opset.parameter([1, -1, 4], np.float32, name="x")
    if init is None:
        state = opset.read_value("cache", "f32", [1, -1, 4])
    else:
        state = opset.read_value(init, "cache", "f32", [1, -1, 4])
    y = opset.concat([state, x], 1)
    z = opset.multiply(opset.relu(y), opset.constant(np.float32(2.0)))
    return Model([opset.result(z, name="z")], [x], "acc", [opset.assign(y, "cache")])


def test_read_value_without_init_has_the_variable_type_and_shape():
    rv = opset.read_value("v", "f32", [2, -1, Dimension(3, 8)])
    assert rv.output(0).element_type.name == "f32"
    assert rv.output(0).partial_shape == PartialShape([2, -1, Dimension(3, 8)])
    assert rv.variable_info == VariableInfo("v", rv.output(0).element_type,
                                            PartialShape([2, -1, Dimension(3, 8)]))
    assert rv.variable_info.initial_value().shape == (2, 0, 3)


def test_read_value_with_init_checks_it_and_keeps_the_variable_shape():
    init = opset.constant(np.zeros((1, 0, 4), np.float32))
    rv = opset.read_value(init, "v", "f32", [1, -1, 4])
    assert rv.output(0).partial_shape == PartialShape([1, -1, 4])
    with pytest.raises(ShapeInferenceError, match="does not include"):
        opset.read_value(opset.constant(np.zeros((2, 0, 4), np.float32)), "v", "f32", [1, -1, 4])
    with pytest.raises(ShapeInferenceError, match="f32, its initial value i64"):
        opset.read_value(opset.constant(np.zeros((1, 0, 4), np.int64)), "v", "f32", [1, -1, 4])


def test_read_value_with_dynamic_variable_info_takes_the_init_type_and_shape():
    """OpenVINO's opset3 ReadValue: only a variable id; the init value decides."""
    init = opset.parameter([3, -1], np.int32, name="i")
    rv = ReadValue([init], variable_id="v")
    assert rv.output(0).element_type.name == "i32"
    assert rv.output(0).partial_shape == PartialShape([3, -1])


def test_factories_need_what_openvino_needs():
    with pytest.raises(NetpassError, match="variable_type and variable_shape"):
        opset.read_value("v")
    with pytest.raises(NetpassError, match="variable_id"):
        opset.read_value(opset.constant(np.zeros(2, np.float32)))
    a = opset.assign(opset.parameter([2, 3], np.float32), "v")
    assert isinstance(a, Assign) and a.output(0).partial_shape == PartialShape([2, 3])


def test_state_ops_are_never_folded():
    from netpass.ngraph_passes.common import ConstantFolding
    model = _accumulator(init=opset.constant(np.zeros((1, 0, 4), np.float32)))
    ConstantFolding().run_on_model(model)
    kinds = [type(n) for n in model.get_ordered_ops()]
    assert ReadValue in kinds and Assign in kinds
    req = netpass.reference.create_infer_request(model)
    req.infer({"x": _rand(1, 2, 4)})
    assert req.infer({"x": _rand(1, 3, 4)})["z"].shape == (1, 5, 4)


def test_model_variables_checks_the_pairs():
    assert list(model_variables(_accumulator())) == ["cache"]
    x = opset.parameter([2], np.float32, name="x")
    lone = Model([opset.result(opset.relu(x))], [x], "m", [opset.assign(x, "nowhere")])
    with pytest.raises(NetpassError, match="no ReadValue of the model reads"):
        model_variables(lone)
    rv = opset.read_value("v", "f32", [2])
    two = Model([opset.result(opset.add(rv, x))], [x], "m",
                [opset.assign(x, "v"), opset.assign(opset.relu(x), "v")])
    with pytest.raises(NetpassError, match="both write variable 'v'"):
        model_variables(two)
    rv3 = opset.read_value("v", "f32", [3])
    bad = Model([opset.result(opset.add(rv3, rv3))], [x], "m", [opset.assign(x, "v")])
    with pytest.raises(NetpassError, match=r"writes f32\[2\] into variable 'v' of f32\[3\]"):
        model_variables(bad)


def test_reference_request_accumulates_resets_and_queries():
    model = _accumulator()
    req = netpass.reference.create_infer_request(model)
    xs = [_rand(1, n, 4) for n in (2, 1, 3)]
    for k in range(3):
        z = req.infer({"x": xs[k]})["z"]
        expected = np.concatenate(xs[:k + 1], axis=1)
        np.testing.assert_allclose(z, np.maximum(expected, 0) * 2, rtol=1e-6)
    (state,) = req.query_state()
    assert state.name == "cache"
    np.testing.assert_array_equal(state.state, np.concatenate(xs, axis=1))
    req.reset_state()
    assert req.query_state()[0].state.shape == (1, 0, 4)
    np.testing.assert_allclose(req.infer({"x": xs[0]})["z"], np.maximum(xs[0], 0) * 2)


def test_every_read_value_sees_the_state_from_before_the_inference():
    """Two ReadValues of one variable, one read after its Assign in op order: both read the
    old value; the Assign's value is the next inference's."""
    x = opset.parameter([3], np.float32, name="x")
    early = opset.read_value("v", "f32", [3])
    new = opset.add(early, x)
    assign = opset.assign(new, "v")
    late = opset.read_value("v", "f32", [3])
    model = Model([opset.result(new, name="new"), opset.result(opset.relu(late), name="late")],
                  [x], "m", [assign])
    req = netpass.reference.create_infer_request(model)
    a, b = _rand(3), _rand(3)
    first = req.infer({"x": a})
    np.testing.assert_array_equal(first["late"], np.zeros(3, np.float32))
    second = req.infer({"x": b})
    np.testing.assert_allclose(second["new"], a + b, rtol=1e-6)
    np.testing.assert_allclose(second["late"], np.maximum(a, 0), rtol=1e-6)


def test_state_set_by_the_user_is_checked_and_copied():
    req = netpass.reference.create_infer_request(_accumulator())
    (state,) = req.query_state()
    value = _rand(1, 2, 4)
    state.state = value
    value[:] = 9.0  # the request keeps its own copy
    x = _rand(1, 1, 4)
    z = req.infer({"x": x})["z"]
    assert z.shape == (1, 3, 4) and np.all(z[:, :2] < 9.0)
    with pytest.raises(StateError, match="variable 'cache': dtype float64"):
        state.state = np.zeros((1, 2, 4))
    with pytest.raises(StateError, match="variable 'cache': dim 2 is 5"):
        state.state = np.zeros((1, 2, 5), np.float32)
    state.reset()
    assert state.state.shape == (1, 0, 4)


def test_outputs_changed_by_the_caller_leave_the_state_alone():
    x = opset.parameter([2], np.float32, name="x")
    rv = opset.read_value("v", "f32", [2])
    s = opset.add(rv, x)
    model = Model([opset.result(s, name="s")], [x], "m", [opset.assign(s, "v")])
    req = netpass.reference.create_infer_request(model)
    out = req.infer({"x": np.ones(2, np.float32)})["s"]
    out[:] = 100.0
    np.testing.assert_array_equal(req.infer({"x": np.ones(2, np.float32)})["s"], [2.0, 2.0])


def test_init_subgraph_gives_the_value_of_a_variable_never_set():
    base = _rand(1, 1, 4)
    init = opset.multiply(opset.constant(base), opset.constant(np.float32(3.0)))
    req = netpass.reference.create_infer_request(_accumulator(init=init))
    a = _rand(1, 2, 4)
    z = req.infer({"x": a})["z"]
    expected = np.concatenate([base * 3.0, a], 1)
    np.testing.assert_allclose(z, np.maximum(expected, 0) * 2, rtol=1e-6)
    assert req.infer({"x": a})["z"].shape == (1, 5, 4)


def test_stateless_reference_infer_reads_initial_values():
    model = _accumulator()
    a = _rand(1, 2, 4)
    for _ in range(2):
        np.testing.assert_allclose(netpass.reference.infer(model, {"x": a})["z"],
                                   np.maximum(a, 0) * 2)


def test_variable_of_dynamic_rank_without_init_has_no_initial_value():
    rv = opset.read_value("v", "f32", PartialShape(None))
    with pytest.raises(NetpassError, match="dynamic rank and no init"):
        rv.evaluate([])


def test_onnx_export_refuses_state():
    with pytest.raises(UnsupportedOpError, match="ONNX has no model state"):
        to_onnx(_accumulator())


def test_clone_keeps_sinks_and_variables():
    model = _accumulator()
    copy = model.clone()
    assert len(copy.sinks) == 1 and copy.sinks[0] is not model.sinks[0]
    assert model_variables(copy) == model_variables(model)
