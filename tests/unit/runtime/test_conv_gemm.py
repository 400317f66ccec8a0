"""Convolutions that run as GEMMs: a pointwise (1x1, stride 1, no padding) NCHW convolution is
the batched product W [O, C] @ X[n] [C, H W], so it takes the runtime's GEMM kernels (and
their tensor-core variant where there is one) with its fused bias and activation; other dense
convolutions take the tensor-core GEMM with B gathered from the image (implicit im2col) where
the device has tensor cores (emulated here on PoCL; TF32 tolerance 2e-3, 3xTF32 4e-6)."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.runtime.device import Engine, select_device
from netpass.runtime.kernels import mma, mma_plan
from netpass.testing import RUNTIME_DEVICE


def _rel_l2(got, want) -> float:
    return float(np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want))


def _conv(rng, c, o, k, stride=1, pad=0):
    x = opset.parameter([-1, c, -1, -1], np.float32, name="x")
    y = opset.convolution(x, randn_f32(rng, o, c, k, k), [stride] * 2, [pad] * 2, [pad] * 2, [1, 1])
    y = opset.relu(opset.add(y, randn_f32(rng, 1, o, 1, 1)))
    return Model([opset.result(y, name="y")], [x])


def _ran_direct_conv(req) -> bool:
    return any("void conv(" in key[2] for key in req.network.kernel_objects)


def test_pointwise_convolution_runs_as_gemm(rng):
    model = _conv(rng, 24, 40, 1)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for shape in ((2, 24, 7, 9), (1, 24, 16, 16)):
        feeds = {"x": randn_f32(rng, *shape)}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert _rel_l2(got, want) <= 1e-5
    assert not _ran_direct_conv(req)
    assert req.stats["fused"] == 4  # the bias and the Relu, at both shapes


def test_strided_and_padded_convolutions_keep_the_direct_kernel(rng):
    """(12 output channels: below the tensor-core kernel's minimum on any device.)"""
    for k, stride, pad in ((1, 2, 0), (3, 1, 1)):
        model = _conv(rng, 8, 12, k, stride, pad)
        req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
        feeds = {"x": randn_f32(rng, 2, 8, 9, 9)}
        assert _rel_l2(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-5
        assert _ran_direct_conv(req)


@pytest.fixture
def emulated(monkeypatch):
    """The CPU engine with emulated tensor cores (kernels.mma) and small tiles."""
    eng = Engine.get(select_device("CPU"))
    monkeypatch.setattr(eng, "mma", "emulated")
    monkeypatch.setattr(mma_plan, "CONFIGS", (mma.MmaConfig(64, 32, 32, 16, 16, 3), mma.MmaConfig(32, 32, 16, 16, 16, 2)))
    monkeypatch.setattr(mma_plan, "_choices", {})
    return eng


def _ran_mma(req) -> bool:
    return any("gemm_mma(" in key[2] for key in req.network.kernel_objects)


@pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="emulated tensor cores on PoCL")
@pytest.mark.parametrize("c,o,k,stride,pad,dil,precision", [
    (8, 24, 3, 1, 1, 1, "tf32"),
    (3, 16, 7, 2, 3, 1, "f32"),   # K = 147: A read with element loads
    (12, 20, 3, 2, 0, 2, "f32"),
])
def test_convolution_as_implicit_gemm(c, o, k, stride, pad, dil, precision, emulated, rng):
    """Dense convolutions on the tensor-core GEMM with B gathered from the image (padding,
    strides, dilation, batch), the bias and Relu as its epilogue."""
    x = opset.parameter([-1, c, -1, -1], np.float32, name="x")
    y = opset.convolution(x, randn_f32(rng, o, c, k, k), [stride] * 2, [pad] * 2, [pad] * 2, [dil] * 2)
    model = Model([opset.result(opset.relu(opset.add(y, randn_f32(rng, 1, o, 1, 1))), name="y")], [x])
    req = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": precision}).create_infer_request()
    for shape in ((2, c, 21, 19), (1, c, 20, 20)):
        feeds = {"x": randn_f32(rng, *shape)}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert _rel_l2(got, want) <= (2e-3 if precision == "tf32" else 4e-6)
    assert _ran_mma(req) and not _ran_direct_conv(req)


@pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="emulated tensor cores on PoCL")
@pytest.mark.parametrize("pad,precision,mode", [(1, "f32", "tail"), (0, "tf32", "apart")])
def test_convolution_in_k_slices(pad, precision, mode, emulated, monkeypatch, rng):
    """A 3x3 unit-stride convolution (rows of four pixels inside the image as one vector load,
    the rest element by element across output rows) in K slices, reduced (in the GEMM's
    launch or apart) through the bias, the residual Add and Relu; odd image sizes, batch 2."""
    monkeypatch.setattr(mma_plan, "TAIL_MAX_TILE", 1 << 20 if mode == "tail" else 0)
    monkeypatch.setattr(mma_plan, "SPLITK_WAVES", 64.0)
    monkeypatch.setattr(mma_plan, "SPLITK_MIN_K", 32)
    monkeypatch.setattr(mma_plan, "SPLITK_TAIL_MIN_K", 32)
    monkeypatch.setattr(mma_plan, "SPLITK_LONG_K", 32)
    c, o = 16, 24
    x = opset.parameter([-1, c, -1, -1], np.float32, name="x")
    r = opset.parameter([-1, o, -1, -1], np.float32, name="r")
    y = opset.convolution(x, randn_f32(rng, o, c, 3, 3), [1, 1], [pad] * 2, [pad] * 2, [1, 1])
    y = opset.relu(opset.add(opset.add(y, randn_f32(rng, 1, o, 1, 1)), r))
    model = Model([opset.result(y, name="y")], [x, r])
    req = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": precision}).create_infer_request()
    for h, w in ((13, 11), (9, 17)):
        oh, ow = h + 2 * pad - 2, w + 2 * pad - 2
        feeds = {"x": randn_f32(rng, 2, c, h, w), "r": randn_f32(rng, 2, o, oh, ow)}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert _rel_l2(got, want) <= (2e-3 if precision == "tf32" else 4e-6)
    mark = "sk_count" if mode == "tail" else "void splitk_reduce("
    assert _ran_mma(req) and any(mark in key[2] for key in req.network.kernel_objects)


@pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="emulated tensor cores on PoCL")
@pytest.mark.parametrize("k,pad", [(1, 0), (3, 1)])
def test_residual_epilogue_by_row_and_column(k, pad, emulated, rng):
    """The bias and a residual input fused into a convolution's tensor-core GEMM (pointwise
    and implicit im2col) are addressed by their (image, channel, pixel) strides, with no
    division of the flat index; batch 3, odd image sizes (72 output channels: a pointwise
    convolution takes the tensor-core GEMM from mma_plan.MIN_M rows)."""
    c, o = 16, 72
    x = opset.parameter([-1, c, -1, -1], np.float32, name="x")
    r = opset.parameter([-1, o, -1, -1], np.float32, name="r")
    y = opset.convolution(x, randn_f32(rng, o, c, k, k), [1, 1], [pad] * 2, [pad] * 2, [1, 1])
    y = opset.relu(opset.add(opset.add(y, randn_f32(rng, 1, o, 1, 1)), r))
    model = Model([opset.result(y, name="y")], [x, r])
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for h, w in ((13, 11), (9, 17)):
        feeds = {"x": randn_f32(rng, 3, c, h, w), "r": randn_f32(rng, 3, o, h, w)}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert _rel_l2(got, want) <= 4e-6
    assert any("+ b * s_in1_0" in key[2] for key in req.network.kernel_objects)
