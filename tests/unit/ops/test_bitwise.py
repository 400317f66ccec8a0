"""Bitwise ops and shifts: ONNX import vs onnxruntime (BitwiseAnd/Or/Xor/Not-18, BitShift-11)
and onnx's reference evaluator (BitShift-28: signed values, out-of-range amounts) over random
values of every integer type with broadcasting; boolean inputs; errors; ONNX export; IR v11 read
back by netpass and run by OpenVINO; the runtime. Exact comparisons.
"""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import (
    check_export,
    check_import,
    check_ir_round_trip,
    check_openvino,
    check_runtime,
    one_node,
)

import netpass
from netpass import Model, opset
from netpass.errors import NetpassError

RNG = np.random.default_rng(18)
INTS = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64]


def rand_int(dtype, shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_binary_matches_onnxruntime(op, dtype):
    feeds = {"a": rand_int(dtype, (2, 3, 4)), "b": rand_int(dtype, (3, 1))}
    check_import(one_node(op, feeds, opset=18), feeds)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_not_matches_onnxruntime(dtype):
    feeds = {"a": rand_int(dtype, (5, 2))}
    check_import(one_node("BitwiseNot", feeds, opset=18), feeds)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", INTS[:4], ids=lambda d: np.dtype(d).name)
def test_unsigned_shift_matches_onnxruntime(direction, dtype):
    bits = np.dtype(dtype).itemsize * 8
    feeds = {"x": rand_int(dtype, (3, 4)),
             "y": RNG.integers(0, bits, size=(4,)).astype(dtype)}
    check_import(one_node("BitShift", feeds, opset=11, direction=direction), feeds)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_shift_28_signed_and_out_of_range(direction, dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = rand_int(dtype, (4, 6))
    y = RNG.integers(0, bits, size=(4, 6)).astype(dtype)
    y[0, :3] = bits  # the width itself, and beyond
    y[1, :2] = min(bits + 5, np.iinfo(dtype).max)
    if np.dtype(dtype).kind == "i":
        y[2, :2] = -1
    x[3, :] = -1 if np.dtype(dtype).kind == "i" else np.iinfo(dtype).max
    feeds = {"x": x, "y": y}
    check_import(one_node("BitShift", feeds, opset=28, direction=direction), feeds,
                 engine="reference")


def test_out_of_range_shift_values():
    x = np.array([-8, 8, -1, 1], np.int8)
    y = np.array([8, 8, 100, -2], np.int8)
    left = netpass.reference.infer(_shift_model("left"), {"x": x, "y": y})
    right = netpass.reference.infer(_shift_model("right"), {"x": x, "y": y})
    np.testing.assert_array_equal(next(iter(left.values())), [0, 0, 0, 0])
    np.testing.assert_array_equal(next(iter(right.values())), [-1, 0, -1, 0])


def _shift_model(which):
    x = opset.parameter([4], "i8", "x")
    y = opset.parameter([4], "i8", "y")
    fn = opset.bitwise_left_shift if which == "left" else opset.bitwise_right_shift
    return Model([fn(x, y)], [x, y])


def test_boolean_inputs():
    a = opset.parameter([3], "boolean", "a")
    b = opset.parameter([3], "boolean", "b")
    model = Model([opset.bitwise_xor(a, b), opset.bitwise_not(a)], [a, b])
    feeds = {"a": np.array([True, False, True]), "b": np.array([True, True, False])}
    out = list(netpass.reference.infer(model, feeds).values())
    np.testing.assert_array_equal(out[0], [False, True, True])
    np.testing.assert_array_equal(out[1], [False, True, False])
    check_export(model, feeds)


def test_errors():
    f = opset.parameter([2], "f32", "f")
    with pytest.raises(NetpassError, match="integer"):
        opset.bitwise_and(f, f)
    b = opset.parameter([2], "boolean", "b")
    with pytest.raises(NetpassError, match="integer"):
        opset.bitwise_left_shift(b, b)
    feeds = {"x": np.array([1, 2], np.int32), "y": np.array([1, 1], np.int32)}
    with pytest.raises(NetpassError, match="unsigned"):
        netpass.read_model(one_node("BitShift", feeds, opset=11, direction="LEFT"))


def _built():
    x = opset.parameter([2, 3], "i32", "x")
    y = opset.parameter([3], "i32", "y")
    model = Model([opset.bitwise_and(x, y), opset.bitwise_or(x, y), opset.bitwise_xor(x, y),
                   opset.bitwise_not(x)], [x, y])
    feeds = {"x": rand_int(np.int32, (2, 3)), "y": rand_int(np.int32, (3,))}
    return model, feeds


def _shifts(dtype=np.uint32):
    et = {np.uint32: "u32", np.int32: "i32"}[dtype]
    x = opset.parameter([2, 5], et, "x")
    y = opset.parameter([5], et, "y")
    model = Model([opset.bitwise_left_shift(x, y), opset.bitwise_right_shift(x, y)], [x, y])
    feeds = {"x": rand_int(dtype, (2, 5)), "y": RNG.integers(0, 32, 5).astype(dtype)}
    return model, feeds


def _signed_shifts():
    return _shifts(np.int32)


@pytest.mark.parametrize("build", [_built, _shifts])
def test_export_round_trip(build):
    model, feeds = build()
    check_export(model, feeds)


# (OpenVINO's CPU plugin shifts u32 as if signed: 0xF0000000 >> 4 sign-fills; i32 agrees)
@pytest.mark.parametrize("build", [_built, _signed_shifts])
def test_ir_round_trip_and_openvino(build, tmp_path):
    model, feeds = build()
    check_ir_round_trip(model, feeds, tmp_path)
    check_openvino(model, feeds, tmp_path, rtol=0, atol=0)


@pytest.mark.parametrize("build", [_built, _shifts, _signed_shifts])
def test_runtime(build):
    model, feeds = build()
    check_runtime(model, feeds)
