"""OpenVINO ExtractImagePatches-3: netpass's reference against OpenVINO's CPU plugin on the IR
netpass writes (each auto_pad mode, strides, rates, windows larger than the stride, odd
sizes, integer data), against a direct per-patch loop, on IR OpenVINO writes, the IR round
trip, the runtime (host fallback), shape inference, and the errors. Exact (moved elements)."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_ir_round_trip, check_openvino, check_reads_openvino_ir, check_runtime

import netpass
from netpass import Model, opset
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError
from netpass.ops.extract_patches import ExtractImagePatches

RNG = np.random.default_rng(3)

CASES = {
    "valid": ((2, 3, 7, 6), [2, 3], [1, 2], [1, 1], "valid"),
    "valid_rates": ((1, 2, 9, 10), [3, 2], [2, 3], [2, 3], "valid"),
    "same_upper": ((1, 2, 9, 8), [3, 2], [2, 3], [2, 1], "same_upper"),
    "same_lower": ((1, 2, 9, 8), [3, 2], [2, 3], [2, 1], "same_lower"),
    "big_window": ((2, 1, 5, 5), [4, 4], [3, 3], [1, 1], "same_upper"),
}


def _model(shape, sizes, strides, rates, pad, dtype="f32"):
    x = opset.parameter(list(shape), dtype, "x")
    return Model([opset.extract_image_patches(x, sizes, strides, rates, pad).output(0)], [x])


def _x(shape, dtype=np.float32):
    if np.dtype(dtype).kind == "i":
        return RNG.integers(-50, 50, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_matches_openvino(name, tmp_path):
    shape, *attrs = CASES[name]
    check_openvino(_model(shape, *attrs), {"x": _x(shape)}, tmp_path, 0, 0)


def test_integer_data_matches_openvino(tmp_path):
    shape, *attrs = CASES["same_lower"]
    check_openvino(_model(shape, *attrs, dtype="i32"), {"x": _x(shape, np.int32)}, tmp_path,
                   0, 0)


def test_valid_patches_by_loop():
    """Each output position against the window read element by element."""
    shape, sizes, strides, rates, pad = CASES["valid_rates"]
    x = _x(shape)
    model = _model(shape, sizes, strides, rates, pad)
    got = netpass.reference.infer(model, {"x": x})[model.output_names[0]]
    c = shape[1]
    for i in range(got.shape[2]):
        for j in range(got.shape[3]):
            for r in range(sizes[0]):
                for s in range(sizes[1]):
                    k = (r * sizes[1] + s) * c
                    np.testing.assert_array_equal(
                        got[:, k:k + c, i, j],
                        x[:, :, i * strides[0] + r * rates[0], j * strides[1] + s * rates[1]])


def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset3
    x = opset1.parameter([2, 3, 8, 7], ov.Type.f32, name="x")
    node = opset3.extract_image_patches(x, [3, 2], [2, 2], [1, 2], "same_lower")
    check_reads_openvino_ir(ov.Model([node], [x]), {"x": _x((2, 3, 8, 7))}, tmp_path, 0, 0)


def test_ir_round_trip_and_runtime(tmp_path):
    shape, *attrs = CASES["same_upper"]
    model = _model(shape, *attrs)
    feeds = {"x": _x(shape)}
    back = check_ir_round_trip(model, feeds, tmp_path)
    patches = [n for n in back.get_ordered_ops() if isinstance(n, ExtractImagePatches)]
    assert [p.sizes for p in patches] == [[3, 2]] and patches[0].auto_pad == "same_upper"
    check_runtime(model, feeds)


def test_shape_inference():
    x = opset.parameter(PartialShape([-1, 3, 10, -1]), "f32", "x")
    node = opset.extract_image_patches(x, [2, 2], [3, 1], [1, 1], "same_upper")
    assert node.get_output_partial_shape(0) == PartialShape([-1, 12, 4, -1])


@pytest.mark.parametrize("shape,sizes,strides,pad,match", [
    ((1, 2, 5), [2, 2], [1, 1], "valid", r"\[N, C, H, W\]"),
    ((1, 2, 5, 5), [2, 0], [1, 1], "valid", "sizes must be two positive values"),
    ((1, 2, 5, 5), [2, 2], [1], "valid", "strides must be two positive values"),
    ((1, 2, 5, 5), [2, 2], [1, 1], "explicit", "auto_pad must be"),
])
def test_bad_inputs_name_the_op(shape, sizes, strides, pad, match):
    x = opset.parameter(list(shape), "f32", "x")
    with pytest.raises(NetpassError, match=f"ExtractImagePatches.*{match}"):
        opset.extract_image_patches(x, sizes, strides, [1, 1], pad)
