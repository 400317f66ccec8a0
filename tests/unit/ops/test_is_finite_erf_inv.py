"""OpenVINO IsFinite-10 (``torch.isfinite``) and ErfInv-17 (``torch.erfinv``): netpass's
reference against OpenVINO's CPU plugin on the IR netpass writes and on IR OpenVINO writes (its
builders and the torch functions converted), the IR round trip, the runtime (IsFinite's
elementwise kernel, ErfInv's host fallback), and the errors.

IsFinite is exact. netpass's ErfInv is the float64 inverse (``erf(erf_inv(y)) == y`` to
1e-12); OpenVINO's CPU plugin evaluates a float32 approximation whose relative error grows
towards +-1 (2e-3 at 0.999), so its comparisons use rtol 5e-3 and atol 1e-5 and keep to
|y| <= 0.999."""
from __future__ import annotations

import math

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
from netpass.ops.elementwise import ErfInv, IsFinite

RNG = np.random.default_rng(10)
ERF_INV_TOL = {"rtol": 5e-3, "atol": 1e-5}


def _specials(shape, dtype=np.float32):
    """Random values with inf, -inf and NaN scattered in."""
    x = RNG.standard_normal(shape).astype(dtype) * 100
    flat = x.reshape(-1)
    picks = RNG.choice(flat.size, size=min(flat.size, 9), replace=False)
    flat[picks] = np.array([np.inf, -np.inf, np.nan] * 3, dtype)[:len(picks)]
    return x


def _unit(shape, lo=-0.999, hi=0.999):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def _model(factory, shape, dtype="f32"):
    x = opset.parameter(list(shape), dtype, "x")
    return Model([factory(x).output(0)], [x])


@pytest.mark.parametrize("shape", [(7,), (3, 5, 2), (2, 1, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_is_finite_matches_openvino(shape, dtype, tmp_path):
    model = _model(opset.is_finite, shape, np.dtype(dtype).name)
    check_openvino(model, {"x": _specials(shape, dtype)}, tmp_path, rtol=0, atol=0)


def test_is_finite_values():
    x = np.array([0, -1e30, np.inf, -np.inf, np.nan, 3.5], np.float32)
    model = _model(opset.is_finite, x.shape)
    got = netpass.reference.infer(model, {"x": x})[model.output_names[0]]
    np.testing.assert_array_equal(got, [True, True, False, False, False, True])


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 4)])
def test_erf_inv_matches_openvino(shape, tmp_path):
    check_openvino(_model(opset.erf_inv, shape), {"x": _unit(shape)}, tmp_path, **ERF_INV_TOL)


def test_erf_inv_inverts_erf():
    y = np.concatenate([RNG.uniform(-1, 1, 500), [0.0, 1e-9, -0.9999999, 0.99999]])
    model = _model(opset.erf_inv, y.shape, "f64")
    got = netpass.reference.infer(model, {"x": y})[model.output_names[0]]
    np.testing.assert_allclose([math.erf(v) for v in got], y, rtol=0, atol=1e-12)


def test_erf_inv_bounds():
    y = np.array([1, -1, 1.5, -3, np.nan, 0], np.float32)
    model = _model(opset.erf_inv, y.shape)
    got = netpass.reference.infer(model, {"x": y})[model.output_names[0]]
    np.testing.assert_array_equal(got, np.array([np.inf, -np.inf, np.nan, np.nan, np.nan, 0],
                                                np.float32))


@pytest.mark.parametrize("factory,cls,make", [(opset.is_finite, IsFinite, _specials),
                                              (opset.erf_inv, ErfInv, _unit)])
def test_ir_round_trip(factory, cls, make, tmp_path):
    back = check_ir_round_trip(_model(factory, (4, 6)), {"x": make((4, 6))}, tmp_path)
    assert sum(isinstance(n, cls) for n in back.get_ordered_ops()) == 1


def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset10, opset17
    x = opset1.parameter([3, 8], ov.Type.f32, name="x")
    model = ov.Model([opset10.is_finite(x), opset17.erfinv(opset1.tanh(x))], [x])
    check_reads_openvino_ir(model, {"x": _unit((3, 8), -3, 3)}, tmp_path, **ERF_INV_TOL)
    x = opset1.parameter([3, 8], ov.Type.f32, name="x")
    check_reads_openvino_ir(ov.Model([opset10.is_finite(x)], [x]), {"x": _specials((3, 8))},
                            tmp_path, 0, 0)


def test_reads_torch_functions_converted_by_openvino(tmp_path):
    torch = pytest.importorskip("torch")
    model = check_torch_ir(torch.isfinite, [_specials((4, 5))], tmp_path, 0, 0)
    assert any(isinstance(n, IsFinite) for n in model.get_ordered_ops())
    model = check_torch_ir(torch.erfinv, [_unit((4, 5))], tmp_path, **ERF_INV_TOL)
    assert any(isinstance(n, ErfInv) for n in model.get_ordered_ops())


def test_is_finite_runs_as_a_kernel():
    stats = check_runtime(_model(opset.is_finite, (6, 7)), {"x": _specials((6, 7))})
    assert stats["host_fallbacks"] == 0


def test_erf_inv_runtime_matches_reference():
    check_runtime(_model(opset.erf_inv, (6, 7)), {"x": _unit((6, 7))})


def test_shapes_pass_through():
    x = opset.parameter(PartialShape([-1, 3, (1, 5)]), "f32", "x")
    assert opset.is_finite(x).get_output_partial_shape(0) == PartialShape([-1, 3, (1, 5)])
    assert opset.is_finite(x).get_output_element_type(0).name == "boolean"
    assert opset.erf_inv(x).get_output_partial_shape(0) == PartialShape([-1, 3, (1, 5)])


@pytest.mark.parametrize("factory,op", [(opset.is_finite, "IsFinite"),
                                        (opset.erf_inv, "ErfInv")])
def test_integer_input_is_refused_naming_the_op(factory, op):
    x = opset.parameter([3], "i32", "x")
    with pytest.raises(NetpassError, match=f"{op}.*float input"):
        factory(x)
