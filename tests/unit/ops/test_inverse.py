"""OpenVINO Inverse-14 (``torch.inverse`` / ``torch.linalg.inv``): netpass's reference against
OpenVINO's CPU plugin on the IR netpass writes (one matrix, batches of several ranks, sizes 1
to 6, ``adjoint``), against numpy, on IR OpenVINO writes (its opset14 builder and
``torch.inverse`` converted), the IR round trip, the runtime (host fallback) on dynamic batch
sizes, and the errors. The random matrices are diagonally shifted to keep them
well-conditioned; tolerance rtol 1e-3, atol 1e-4 (OpenVINO inverts in float32, netpass in
float64)."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import (
    check_ir_round_trip,
    check_openvino,
    check_reads_openvino_ir,
    check_runtime,
    check_torch_ir,
)

import netpass
from netpass import Model, opset
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError
from netpass.ops.linalg import Inverse

RNG = np.random.default_rng(14)
TOL = {"rtol": 1e-3, "atol": 1e-4}


def _matrices(*shape):
    a = RNG.standard_normal(shape)
    return (a + 2 * shape[-1] ** 0.5 * np.eye(shape[-1])).astype(np.float32)


def _model(shape, adjoint=False, dynamic_batch=False):
    dims = [-1 if dynamic_batch and i < len(shape) - 2 else d for i, d in enumerate(shape)]
    x = opset.parameter(dims, "f32", "x")
    return Model([opset.inverse(x, adjoint).output(0)], [x])


SHAPES = [(1, 1), (3, 3), (6, 6), (4, 2, 2), (2, 3, 5, 5)]


@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_reference_matches_openvino(shape, adjoint, tmp_path):
    check_openvino(_model(shape, adjoint), {"x": _matrices(*shape)}, tmp_path, **TOL)


@pytest.mark.parametrize("adjoint", [False, True])
def test_reference_matches_numpy(adjoint):
    x = _matrices(3, 4, 4)
    model = _model(x.shape, adjoint)
    got = netpass.reference.infer(model, {"x": x})[model.output_names[0]]
    want = np.linalg.inv(x.astype(np.float64))
    want = np.swapaxes(want, -1, -2) if adjoint else want
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if not adjoint:
        np.testing.assert_allclose(x.astype(np.float64) @ got, np.broadcast_to(np.eye(4), x.shape),
                                   atol=1e-5)


def test_singular_matrix_gives_nan_and_leaves_the_others():
    x = _matrices(2, 3, 3)
    x[1] = [[1, 2, 3], [2, 4, 6], [1, 0, 1]]
    model = _model(x.shape)
    got = netpass.reference.infer(model, {"x": x})[model.output_names[0]]
    assert np.isnan(got[1]).all()
    np.testing.assert_allclose(got[0], np.linalg.inv(x[0].astype(np.float64)), rtol=1e-5)


@pytest.mark.parametrize("adjoint", [False, True])
def test_ir_round_trip(adjoint, tmp_path):
    back = check_ir_round_trip(_model((2, 4, 4), adjoint), {"x": _matrices(2, 4, 4)}, tmp_path)
    assert [n.adjoint for n in back.get_ordered_ops() if isinstance(n, Inverse)] == [adjoint]


def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset14
    x = opset1.parameter([3, 5, 5], ov.Type.f32, name="x")
    model = ov.Model([opset14.inverse(x, True)], [x])
    check_reads_openvino_ir(model, {"x": _matrices(3, 5, 5)}, tmp_path, **TOL)


def test_reads_torch_inverse_converted_by_openvino(tmp_path):
    torch = pytest.importorskip("torch")
    model = check_torch_ir(torch.inverse, [_matrices(2, 4, 4)], tmp_path, **TOL)
    assert any(isinstance(n, Inverse) for n in model.get_ordered_ops())


def test_runtime_over_dynamic_batches():
    model = _model((2, 3, 3), dynamic_batch=True)
    req = netpass.compile_model(model, netpass.testing.RUNTIME_DEVICE).create_infer_request()
    for batch in (2, 5):
        x = _matrices(batch, 3, 3)
        got = req.infer({"x": x})[model.output_names[0]]
        np.testing.assert_allclose(got, np.linalg.inv(x.astype(np.float64)), rtol=1e-4,
                                   atol=1e-5)


def test_runtime_matches_reference():
    check_runtime(_model((4, 3, 3), True), {"x": _matrices(4, 3, 3)})


def test_shape_inference_merges_the_square_dims():
    x = opset.parameter(PartialShape([-1, 4, -1]), "f32", "x")
    assert opset.inverse(x).get_output_partial_shape(0) == PartialShape([-1, 4, 4])
    y = opset.parameter(PartialShape(None), "f32", "y")
    assert not opset.inverse(y).get_output_partial_shape(0).rank_is_static


@pytest.mark.parametrize("shape,dtype,match", [
    ([3, 4], "f32", "must be square"),
    ([5], "f32", r"\[\*, M, M\]"),
    ([3, 3], "i32", "must be a float tensor"),
])
def test_bad_inputs_name_the_op(shape, dtype, match):
    x = opset.parameter(shape, dtype, "x")
    with pytest.raises(NetpassError, match=f"Inverse.*{match}"):
        opset.inverse(x)
