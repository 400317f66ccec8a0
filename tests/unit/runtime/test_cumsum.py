"""CumSum on the device (``kernels.scan``): numpy's cumulative sums bit for bit (the same
order of additions) for every axis, dtype, ``exclusive`` and ``reverse``, over changing
shapes in one request, with no host fallback; an ONNX CumSum against onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.testing import RUNTIME_DEVICE


def _data(rng, shape, dtype):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-1000, 1000, shape).astype(dtype)


def _model(dtype, axis, exclusive, reverse, rank=3):
    x = opset.parameter([-1] * rank, dtype, name="x")
    y = opset.cumsum(x, np.array(axis, np.int64), exclusive, reverse)
    return Model([opset.result(y, name="y")], [x])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive, reverse", [(False, False), (True, False), (False, True),
                                                (True, True)])
def test_cumsum_equals_numpy(rng, dtype, axis, exclusive, reverse):
    model = _model(dtype, axis, exclusive, reverse)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for shape in ((2, 5, 3), (1, 1, 1), (3, 70, 2), (2, 0, 4)):
        feeds = {"x": _data(rng, shape, dtype)}
        got = req.infer(feeds)["y"]
        want = netpass.reference.infer(model, feeds)["y"]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert req.stats["host_fallbacks"] == 0


def test_a_long_row(rng):
    """One row of 5000 floats: the same sums as numpy's, in order."""
    model = _model(np.float32, -1, False, False, rank=1)
    feeds = {"x": _data(rng, (5000,), np.float32)}
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    np.testing.assert_array_equal(req.infer(feeds)["y"], np.cumsum(feeds["x"]))
    assert req.stats["host_fallbacks"] == 0


def test_an_onnx_cumsum_equals_onnxruntime(rng):
    ort = pytest.importorskip("onnxruntime")
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=1, reverse=1)
    graph = helper.make_graph(
        [node], "cumsum", [helper.make_tensor_value_info("x", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor("axis", TensorProto.INT64, [], [1])])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    data.ir_version = 8
    blob = data.SerializeToString()
    onnx.checker.check_model(data)
    feeds = {"x": _data(rng, (3, 17), np.int64)}
    want = ort.InferenceSession(blob, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    req = netpass.compile_model(netpass.read_model(blob), RUNTIME_DEVICE).create_infer_request()
    np.testing.assert_array_equal(req.infer(feeds)["y"], want)
    assert req.stats["host_fallbacks"] == 0
