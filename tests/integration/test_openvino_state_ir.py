"""Stateful IR both ways with the real OpenVINO: a model made stateful by OpenVINO's own
MakeStateful and saved by it reads in netpass and runs step by step as in OpenVINO's CPU
plugin; netpass's stateful models (its MakeStateful, ReadValue with an init sub-graph) load
in OpenVINO's read_model with the same variables and give the same outputs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.ngraph_passes.common import MakeStateful
from netpass.ops import Assign, ReadValue
from netpass.ops.state import model_variables
from netpass.passes import Manager

ov = pytest.importorskip("openvino")

RNG = np.random.default_rng(5)
STEPS = (3, 1, 2, 1)


def _rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def _ov_request(xml: Path):
    core = ov.Core()
    model = core.read_model(str(xml))
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return model, compiled.create_infer_request()


def _check_steps(np_model: Model, xml: Path) -> None:
    """netpass's reference request and OpenVINO's CPU request agree on the (only) output step
    by step, and on the variables' values at the end."""
    ov_model, ov_req = _ov_request(xml)
    assert len(ov_model.outputs) == len(np_model.results) == 1
    req = netpass.reference.create_infer_request(np_model)
    for n in STEPS:
        x = _rand(1, n, 4)
        want = np.asarray(ov_req.infer({"x": x})[0])
        got = req.infer({"x": x})[np_model.output_names[0]]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    ov_states = {s.name: np.asarray(s.state.data) for s in ov_req.query_state()}
    np_states = {s.name: s.state for s in req.query_state()}
    assert sorted(ov_states) == sorted(np_states)
    for name, value in np_states.items():
        np.testing.assert_allclose(value, ov_states[name], rtol=1e-5, atol=1e-6)


def _openvino_plain(path: Path) -> None:
    """In OpenVINO: x [1,?,4], past [1,?,4] -> present = concat(past, x @ w), y = relu(present)."""
    import openvino.opset13 as ops
    x = ops.parameter([1, -1, 4], np.float32, name="x")
    past = ops.parameter([1, -1, 4], np.float32, name="past.0.key")
    k = ops.matmul(x, ops.constant(_rand(4, 4)), False, False)
    present = ops.concat([past, k], 1)
    present.output(0).get_tensor().set_names({"present.0.key"})
    y = ops.relu(present)
    y.output(0).get_tensor().set_names({"y"})
    ov.save_model(ov.Model([ops.result(y), ops.result(present)], [x, past], "plain"),
                  str(path), compress_to_fp16=False)


def test_openvino_stateful_ir_reads_and_runs_in_netpass(tmp_path):
    from openvino._offline_transformations import apply_make_stateful_transformation
    _openvino_plain(tmp_path / "plain.xml")
    model = ov.Core().read_model(str(tmp_path / "plain.xml"))
    apply_make_stateful_transformation(model, {"past.0.key": "present.0.key"})
    ov.save_model(model, str(tmp_path / "stateful.xml"), compress_to_fp16=False)

    np_model = netpass.read_model(tmp_path / "stateful.xml")
    assert np_model.input_names == ["x"] and len(np_model.results) == 1
    assert [type(s) for s in np_model.sinks] == [Assign]
    assert list(model_variables(np_model)) == ["past.0.keypresent.0.key"]
    _check_steps(np_model, tmp_path / "stateful.xml")

    netpass.save_model(np_model, tmp_path / "again.xml")
    again = ov.Core().read_model(str(tmp_path / "again.xml"))
    assert [v.get_info().variable_id for v in again.get_variables()] == \
        ["past.0.keypresent.0.key"]
    assert len(again.get_sinks()) == 1
    _check_steps(np_model, tmp_path / "again.xml")


def test_netpass_make_stateful_equals_openvinos(tmp_path):
    """The same plain model made stateful by each: same variable ids, same outputs."""
    from openvino._offline_transformations import apply_make_stateful_transformation
    _openvino_plain(tmp_path / "plain.xml")
    ov_model = ov.Core().read_model(str(tmp_path / "plain.xml"))
    apply_make_stateful_transformation(ov_model, {"past.0.key": "present.0.key"})
    ov.save_model(ov_model, str(tmp_path / "ov.xml"), compress_to_fp16=False)

    np_model = netpass.read_model(tmp_path / "plain.xml")
    manager = Manager()
    manager.register_pass(MakeStateful({"past.0.key": "present.0.key"}))
    manager.run_passes(np_model)
    assert list(model_variables(np_model)) == \
        [v.get_info().variable_id for v in ov_model.get_variables()]
    _check_steps(np_model, tmp_path / "ov.xml")


def test_netpass_stateful_ir_with_an_init_subgraph_runs_in_openvino(tmp_path):
    """Two variables: one whose initial value is an init sub-graph (a constant times 2), one
    without (an empty past); both written by Assigns."""
    x = opset.parameter([1, -1, 4], np.float32, name="x")
    bias = opset.read_value(opset.multiply(opset.constant(_rand(1, 1, 4)),
                                           opset.constant(np.float32(2.0))),
                            "bias", "f32", [1, 1, 4])
    hist = opset.read_value("hist", "f32", [1, -1, 4])
    cat = opset.concat([hist, opset.add(x, bias)], 1)
    new_bias = opset.reduce_mean(cat, opset.constant(np.array([1])), True)
    y = opset.relu(cat)
    y.output(0).names.add("y")
    model = Model([opset.result(y, name="y")], [x], "two_vars",
                  [opset.assign(cat, "hist"), opset.assign(new_bias, "bias")])
    netpass.save_model(model, tmp_path / "np.xml")
    ov_model = ov.Core().read_model(str(tmp_path / "np.xml"))
    assert sorted(v.get_info().variable_id for v in ov_model.get_variables()) == ["bias", "hist"]
    _check_steps(model, tmp_path / "np.xml")
    back = netpass.read_model(tmp_path / "np.xml")
    kinds = [type(n) for n in back.get_ordered_ops()]
    assert kinds.count(ReadValue) == 2 and kinds.count(Assign) == 2
    assert model_variables(back) == model_variables(model)
