"""Regression tests of the runtime conformance findings R1-R7 (docs/dev/runtime-findings.md)
and of zoo finding F8 (docs/dev/zoo-findings.md), one behaviour each, on the OpenCL CPU device
(PoCL, which has no cl_khr_fp16)."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program, devices
from netpass.testing import RUNTIME_DEVICE

DEVICE_FP16 = any(d["fp16"] for d in devices() if d["type"].endswith(RUNTIME_DEVICE))


def _model(node, *params):
    return Model([opset.result(node, name="y")], list(params))


def _infer(model, feeds):
    req = compile_program(model, device=RUNTIME_DEVICE).create_infer_request()
    return req.infer(feeds)["y"], req


def test_float16_transpose_copies_on_the_device(rng):
    """R1: a float16 copy kernel needs no cl_khr_fp16 (it moves 16-bit words)."""
    x = opset.parameter([2, 3, 4], np.float16, name="x")
    a = rng.standard_normal((2, 3, 4)).astype(np.float16)
    y, req = _infer(_model(opset.transpose(x, np.array([2, 0, 1], np.int64)), x), {"x": a})
    np.testing.assert_array_equal(y, a.transpose(2, 0, 1))
    assert req.stats["host_fallbacks"] == 0


def test_float16_concat_gather_slice_copy_exactly(rng):
    """R1: float16 Concat, Gather and Slice give the reference's bits."""
    x = opset.parameter([4, 6], np.float16, name="x")
    g = opset.gather(x, np.array([3, 0, 3], np.int64), np.int64(0))
    s = opset.slice(x, np.array([1], np.int64), np.array([4], np.int64), np.array([1], np.int64),
                    np.array([0], np.int64))
    model = _model(opset.concat([g, s], 0), x)
    a = rng.standard_normal((4, 6)).astype(np.float16)
    y, _ = _infer(model, {"x": a})
    np.testing.assert_array_equal(y, netpass.reference.infer(model, {"x": a})["y"])


def test_float16_pad_value_is_kept_as_bits(rng):
    """R1: a float16 Pad copied as 16-bit words writes the pad value's float16 bit pattern."""
    x = opset.parameter([2, 3], np.float16, name="x")
    model = _model(opset.pad(x, np.array([1, 0], np.int64), np.array([0, 2], np.int64), "constant",
                             np.float16(2.5)), x)
    a = rng.standard_normal((2, 3)).astype(np.float16)
    y, _ = _infer(model, {"x": a})
    np.testing.assert_array_equal(y, np.pad(a, [(1, 0), (0, 2)], constant_values=2.5))


def test_pad_without_pad_value_pads_with_zero(rng):
    """R2: a 3-input constant Pad fills with 0, not with input element 0."""
    x = opset.parameter([2, 3], np.float32, name="x")
    model = _model(opset.pad(x, np.array([1, 1], np.int64), np.array([0, 1], np.int64), "constant"), x)
    a = rng.standard_normal((2, 3)).astype(np.float32) + 3.0
    y, _ = _infer(model, {"x": a})
    np.testing.assert_array_equal(y, np.pad(a, [(1, 0), (1, 1)]))


def test_fused_multiply_applies_when_conv3d_runs_on_the_host(rng):
    """R3: a post-op fused into a 3-D convolution (host fallback) is still applied."""
    x = opset.parameter([1, 2, 4, 4, 4], np.float32, name="x")
    w = rng.standard_normal((3, 2, 2, 2, 2)).astype(np.float32)
    conv = opset.convolution(x, w, [1, 1, 1], [0, 0, 0], [0, 0, 0], [1, 1, 1])
    model = _model(opset.multiply(conv, np.float32(0.5)), x)
    a = rng.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    y, _ = _infer(model, {"x": a})
    ref = netpass.reference.infer(model, {"x": a})["y"]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_fused_add_applies_to_int32_matmul(rng):
    """R3: an Add fused into an int32 MatMul (no int kernel) is applied on the host."""
    x = opset.parameter([2, 3], np.int32, name="x")
    w = rng.integers(-4, 5, (3, 3)).astype(np.int32)
    model = _model(opset.add(opset.matmul(x, w, False, False), np.int32(7)), x)
    a = rng.integers(-4, 5, (2, 3)).astype(np.int32)
    y, _ = _infer(model, {"x": a})
    np.testing.assert_array_equal(y, a @ w + 7)


def test_split_with_one_empty_output_keeps_the_other(rng):
    """R4: VariadicSplit [8, 0] still writes its non-empty output."""
    x = opset.parameter([2, 3, 8], np.float32, name="x")
    model = _model(opset.variadic_split(x, np.int64(-1), np.array([8, 0], np.int64)).output(0), x)
    a = rng.standard_normal((2, 3, 8)).astype(np.float32)
    y, _ = _infer(model, {"x": a})
    np.testing.assert_array_equal(y, a)


def test_one_hot_v16_attribute_in_runtime_shape_inference():
    """R5: shape inference uses the node's own op version (OneHot-16 negative_indices_mode)."""
    i = opset.parameter([3], np.int64, name="i")
    oh = opset.one_hot(i, np.int64(4), np.float32(1), np.float32(0), -1, negative_indices_mode="normalize")
    y, _ = _infer(_model(oh, i), {"i": np.array([0, -1, 2], np.int64)})
    np.testing.assert_array_equal(y, np.eye(4, dtype=np.float32)[[0, 3, 2]])


def test_scatter_nd_update_reduction_in_runtime_shape_inference(rng):
    """R5: ScatterNDUpdate-15 with a reduction compiles and adds."""
    d = opset.parameter([4, 3], np.float32, name="d")
    upd = rng.standard_normal((2, 3)).astype(np.float32)
    model = _model(opset.scatter_nd_update(d, np.array([[1], [1]], np.int64), upd, reduction="sum"), d)
    a = rng.standard_normal((4, 3)).astype(np.float32)
    y, _ = _infer(model, {"d": a})
    want = a.copy()
    want[1] += upd[0] + upd[1]
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_float_floor_mod_with_infinite_divisor():
    """R6: x mod +-inf is x when the signs agree, else the divisor (numpy), not NaN."""
    x = opset.parameter([4], np.float32, name="x")
    d = opset.parameter([4], np.float32, name="d")
    xs = np.array([-3, 3, -1.5, 1.5], np.float32)
    ds = np.array([np.inf, np.inf, -np.inf, -np.inf], np.float32)
    y, _ = _infer(_model(opset.floor_mod(x, d), x, d), {"x": xs, "d": ds})
    np.testing.assert_array_equal(y, np.mod(xs, ds))


def test_float_floor_mod_finite_values(rng):
    """R6: the fmod-based expression keeps numpy's floor-mod sign rule for finite values."""
    x = opset.parameter([64], np.float32, name="x")
    d = opset.parameter([64], np.float32, name="d")
    xs = (rng.standard_normal(64) * 10).astype(np.float32)
    ds = (rng.standard_normal(64) * 3 + np.where(rng.random(64) < 0.5, -1, 1)).astype(np.float32)
    y, _ = _infer(_model(opset.floor_mod(x, d), x, d), {"x": xs, "d": ds})
    np.testing.assert_allclose(y, np.mod(xs, ds), rtol=1e-5, atol=1e-5)


def test_bfloat16_parameter_runs_on_the_host():
    """R7: a bf16 parameter takes bfloat16 feeds and gives the reference's bf16 result."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = opset.parameter([5], "bf16", name="x")
    model = _model(opset.relu(x), x)
    feeds = {"x": np.array([1.5, -2, 3.25, -0.5, 7], ml_dtypes.bfloat16)}
    y, req = _infer(model, feeds)
    assert y.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y.astype(np.float32), np.array([1.5, 0, 3.25, 0, 7], np.float32))
    assert req.stats["host_fallbacks"] >= 1


@pytest.mark.skipif(DEVICE_FP16, reason="the test device has cl_khr_fp16")
def test_float16_convolution_falls_back_without_fp16(rng):
    """F8: a float16 convolution on a device without cl_khr_fp16 runs on the host."""
    x = opset.parameter([1, 3, 6, 6], np.float16, name="x")
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float16)
    model = _model(opset.relu(opset.convolution(x, w, [1, 1], [1, 1], [1, 1], [1, 1])), x)
    a = rng.standard_normal((1, 3, 6, 6)).astype(np.float16)
    y, req = _infer(model, {"x": a})
    ref = netpass.reference.infer(model, {"x": a})["y"]
    np.testing.assert_allclose(y.astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=2e-3)
    assert req.stats["host_fallback_kinds"].get("Convolution", 0) == 1


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 3), (1, 3, 5, 5), (2, 3)], ids=str)
def test_a_per_channel_prelu_slope_runs_per_channel(shape, rng):
    """A 1-D PRelu slope as long as dim 1 applies per channel (the op's rule, OpenVINO's and
    ONNX opset 6's): the runtime broadcast it numpy-style, along the last axis, silently wrong
    where that axis is as long (2, 3, 3) and reading past it elsewhere. It stays per channel
    behind a convolution too (a PRelu is not folded into a producer's epilogue)."""
    x = opset.parameter(list(shape), np.float32, name="x")
    slope = np.array([0.1, 0.5, 0.9], np.float32)
    head = x
    if len(shape) == 4:
        w = rng.standard_normal((3, 3, 1, 1)).astype(np.float32)
        head = opset.convolution(x, w, [1, 1], [0, 0], [0, 0], [1, 1])
    model = _model(opset.multiply(opset.prelu(head, slope), np.float32(2.0)), x)
    a = rng.standard_normal(shape).astype(np.float32)
    y, req = _infer(model, {"x": a})
    expected = netpass.reference.infer(model, {"x": a})["y"]
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
    if head is x:
        per_channel = slope.reshape((3,) + (1,) * (len(shape) - 2))
        np.testing.assert_allclose(y, 2 * np.where(a >= 0, a, a * per_channel), rtol=1e-6)
    assert req.stats["host_fallbacks"] == 0
