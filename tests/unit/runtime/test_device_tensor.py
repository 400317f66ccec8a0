"""Inputs held in device memory (netpass.runtime.device_tensor): fed without a host copy per
inference, they give what the same host arrays give."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.errors import DeviceError, InputError
from netpass.runtime import DeviceTensor, compile_program
from netpass.testing import RUNTIME_DEVICE


def _mlp() -> Model:
    """y = relu(x @ w + 1), x [?, 8]."""
    x = opset.parameter([-1, 8], np.float32, name="x")
    w = np.random.default_rng(3).standard_normal((8, 5)).astype(np.float32)
    y = opset.relu(opset.add(opset.matmul(x, w, False, False), np.float32(1.0)))
    return Model([opset.result(y, name="y")], [x], "mlp")


def _reshaped() -> Model:
    """y = tanh(reshape(x, shape)): the shape input's values are read on the host."""
    x = opset.parameter([-1], np.float32, name="x")
    shape = opset.parameter([2], np.int64, name="shape")
    y = opset.tanh(opset.reshape(x, shape, False))
    return Model([opset.result(y, name="y")], [x, shape], "reshaped")


def _feeds(rng, rows: int) -> dict:
    return {"x": rng.standard_normal((rows, 8)).astype(np.float32)}


@pytest.mark.parametrize("compile_", [compile_program, netpass.compile_model],
                         ids=["runtime", "compile_model"])
def test_device_tensor_feed_gives_the_host_arrays_outputs(compile_, rng):
    cm = compile_(_mlp(), RUNTIME_DEVICE)
    req = cm.create_infer_request()
    for rows in (3, 7, 3):
        feeds = _feeds(rng, rows)
        dt = cm.create_device_tensor(feeds["x"])
        want = netpass.reference.infer(_mlp(), feeds)["y"]
        np.testing.assert_allclose(req.infer({"x": dt})["y"], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(req.infer(feeds)["y"], want, rtol=1e-5, atol=1e-6)


def test_a_device_tensor_written_again_is_read_anew(rng):
    cm = compile_program(_mlp(), RUNTIME_DEVICE)
    req = cm.create_infer_request()
    first, second = _feeds(rng, 4), _feeds(rng, 4)
    dt = cm.create_device_tensor(first["x"])
    req.infer({"x": dt})
    dt.write(second["x"])
    want = netpass.reference.infer(_mlp(), second)["y"]
    np.testing.assert_allclose(req.infer({"x": dt})["y"], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(dt), second["x"])


def test_values_a_shape_needs_are_read_back_from_the_device(rng):
    cm = compile_program(_reshaped(), RUNTIME_DEVICE)
    req = cm.create_infer_request()
    for rows, cols in ((3, 4), (6, 2), (2, 6)):
        x = rng.standard_normal(12).astype(np.float32)
        shape = np.array([rows, cols], np.int64)
        got = req.infer({"x": cm.create_device_tensor(x),
                         "shape": cm.create_device_tensor(shape)})["y"]
        np.testing.assert_allclose(got, np.tanh(x.reshape(rows, cols)), rtol=1e-5, atol=1e-6)


def test_a_tensor_of_another_context_is_read_back(rng):
    other = compile_program(_mlp(), RUNTIME_DEVICE, {"PROFILING": True})
    cm = compile_program(_mlp(), RUNTIME_DEVICE)
    assert other.engine is not cm.engine
    feeds = _feeds(rng, 5)
    got = cm.create_infer_request().infer({"x": other.create_device_tensor(feeds["x"])})["y"]
    want = netpass.reference.infer(_mlp(), feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_reference_device_reads_a_device_tensor(rng):
    feeds = _feeds(rng, 2)
    dt = compile_program(_mlp(), RUNTIME_DEVICE).create_device_tensor(feeds["x"])
    ref = netpass.compile_model(_mlp(), "REFERENCE").create_infer_request()
    want = netpass.reference.infer(_mlp(), feeds)["y"]
    np.testing.assert_allclose(ref.infer({"x": dt})["y"], want, rtol=1e-6)


@pytest.mark.parametrize("array, what", [
    (np.zeros((3, 8), np.float64), "dtype float64"),
    (np.ones((3, 9), np.float32), "dim 1 is 9"),
    (np.ones((2, 3, 8), np.float32), "rank 3"),
])
def test_a_wrong_device_tensor_is_refused_by_name(array, what):
    cm = compile_program(_mlp(), RUNTIME_DEVICE)
    with pytest.raises(InputError, match=f"'?x'?.*{what}"):
        cm.create_infer_request().infer({"x": cm.create_device_tensor(array)})


def test_writing_another_shape_into_a_device_tensor_is_refused():
    dt = compile_program(_mlp(), RUNTIME_DEVICE).create_device_tensor(np.ones((2, 8), np.float32))
    with pytest.raises(InputError, match="device tensor"):
        dt.write(np.ones((3, 8), np.float32))


def test_the_reference_device_has_no_device_tensors():
    with pytest.raises(DeviceError, match="REFERENCE"):
        netpass.compile_model(_mlp(), "REFERENCE").create_device_tensor(np.ones(3, np.float32))



def _no_read_back(self):
    raise AssertionError("a device tensor was read back to the host")


@pytest.mark.parametrize("run", ["infer", "start_async"])
def test_a_device_tensor_is_not_read_back(run, rng, monkeypatch):
    cm = compile_program(_mlp(), RUNTIME_DEVICE)
    req = cm.create_infer_request()
    feeds = _feeds(rng, 6)
    dt = cm.create_device_tensor(feeds["x"])
    monkeypatch.setattr(DeviceTensor, "numpy", _no_read_back)
    if run == "infer":
        req.infer({"x": dt})
    else:
        req.start_async({"x": dt})
        req.wait()
    want = netpass.reference.infer(_mlp(), feeds)["y"]
    np.testing.assert_allclose(req.results["y"], want, rtol=1e-5, atol=1e-6)
