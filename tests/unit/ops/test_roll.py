"""OpenVINO Roll-7 (what OpenVINO's PyTorch frontend writes for ``torch.roll``): netpass's
reference against OpenVINO's CPU plugin on the IR netpass writes (per-axis shifts,
negative shifts and axes, shifts past the dim, an axis named twice, integer data), IR that
OpenVINO writes (its opset7 builder and ``torch.roll`` converted), the IR round trip, the
runtime (host fallback) on dynamic shapes, and the errors; a scalar shift over several axes
against numpy. Exact (moved elements)."""
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
from netpass.ops.movement import Roll

RNG = np.random.default_rng(7)


def _model(shape, shift, axes, dtype="f32", dynamic=False):
    x = opset.parameter([-1] * len(shape) if dynamic else list(shape), dtype, "x")
    return Model([opset.roll(x, shift, axes).output(0)], [x])


def _x(shape, dtype=np.float32):
    if np.dtype(dtype).kind == "i":
        return RNG.integers(-100, 100, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


CASES = {
    "one_axis": ((5, 7), 2, 1),
    "per_axis_shifts": ((3, 4, 5), [1, -2], [2, 0]),
    "negative_axes": ((2, 3, 4, 5), [-3, 9], [-1, -3]),
    "shift_past_dim": ((6, 5), [13, -17], [0, 1]),
    "axis_twice": ((4, 9), [2, 5], [1, 1]),
    "one_dim": ((11,), -4, 0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_matches_openvino(name, tmp_path):
    shape, shift, axes = CASES[name]
    check_openvino(_model(shape, shift, axes), {"x": _x(shape)}, tmp_path, rtol=0, atol=0)


def test_integer_data_matches_openvino(tmp_path):
    check_openvino(_model((4, 6), [1, 2], [0, 1], "i32"), {"x": _x((4, 6), np.int32)},
                   tmp_path, rtol=0, atol=0)


@pytest.mark.parametrize("shift,axes", [([1, -2], [2, 0]), (3, [0, 2])])
def test_reference_is_numpy_roll(shift, axes):
    """A scalar shift applies to every axis (the specification; OpenVINO's CPU plugin refuses
    shift and axes of different lengths, so this case is checked against numpy)."""
    x = _x((3, 4, 5))
    model = _model(x.shape, shift, axes)
    got = netpass.reference.infer(model, {"x": x})[model.output_names[0]]
    np.testing.assert_array_equal(got, np.roll(x, np.broadcast_to(shift, len(axes)), axes))


@pytest.mark.parametrize("name", ["per_axis_shifts", "axis_twice"])
def test_ir_round_trip(name, tmp_path):
    shape, shift, axes = CASES[name]
    back = check_ir_round_trip(_model(shape, shift, axes), {"x": _x(shape)}, tmp_path)
    assert sum(isinstance(n, Roll) for n in back.get_ordered_ops()) == 1


def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset7
    x = opset1.parameter([3, 5, 4], ov.Type.f32, name="x")
    node = opset7.roll(x, opset1.constant(np.array([2, -1], np.int32)),
                       opset1.constant(np.array([-1, 1], np.int64)))
    check_reads_openvino_ir(ov.Model([node], [x]), {"x": _x((3, 5, 4))}, tmp_path, 0, 0)


def test_reads_torch_roll_converted_by_openvino(tmp_path):
    torch = pytest.importorskip("torch")
    model = check_torch_ir(lambda t: torch.roll(t, (1, -3), (0, 2)), [_x((3, 4, 5))], tmp_path,
                           0, 0)
    assert any(isinstance(n, Roll) for n in model.get_ordered_ops())


def test_runtime_over_dynamic_shapes():
    model = _model((3, 4, 5), [1, -2], [2, 0], dynamic=True)
    req = netpass.compile_model(model, netpass.testing.RUNTIME_DEVICE).create_infer_request()
    for shape in ((3, 4, 5), (2, 7, 3)):
        x = _x(shape)
        np.testing.assert_array_equal(req.infer({"x": x})[model.output_names[0]],
                                      np.roll(x, (1, -2), (2, 0)))


def test_runtime_matches_reference():
    check_runtime(_model((5, 7), [3], [1]), {"x": _x((5, 7))})


def test_shape_passes_through_dynamic_dims():
    x = opset.parameter(PartialShape([-1, 4, (2, 8)]), "f32", "x")
    assert opset.roll(x, 1, 0).get_output_partial_shape(0) == PartialShape([-1, 4, (2, 8)])


@pytest.mark.parametrize("shift,axes,match", [
    ([1, 2], [0, 1, 1], "shift has 2 elements and axes 3"),
    (1, [3], "axis 3 out of range"),
    ([[1]], [0], "must be a scalar or 1-D"),
    ("float", [0], "shift .* must be integer"),
])
def test_bad_inputs_name_the_node(shift, axes, match):
    x = opset.parameter([3, 4], "f32", "x")
    if shift == "float":
        shift = opset.constant(np.array(1.5, np.float32))
    with pytest.raises(NetpassError, match=match) as err:
        opset.roll(x, shift, axes)
    assert "Roll" in str(err.value)
