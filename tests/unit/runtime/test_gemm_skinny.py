"""The skinny GEMM (kernels.gemm_skinny) on PoCL: MatMul / FullyConnected with few rows of
output against numpy on random data, over transposed B, batch broadcast and fused
epilogues; and the selection (kinds.matmul.skinny_width) on GPU-like and CPU engines without
compiling. Tolerance: rtol 1e-4 plus atol 1e-4 * sqrt(K), the float32 summation-order noise
of a K-long dot product of standard normal values (their sums are ~sqrt(K) in size)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from graph_blocks import randn_f32

from netpass import Model, opset
from netpass.ops import FullyConnected, MatMul
from netpass.runtime import compile_program
from netpass.runtime.impls import Launch, Params
from netpass.runtime.kinds import TABLE, legacy, matmul
from netpass.testing import RUNTIME_DEVICE

F32 = np.dtype(np.float32)

pocl_only = pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="checks the kernel choices on PoCL")


def _check(got, a, b, k: int) -> None:
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(max(k, 1)))


def _ran_skinny(req) -> bool:
    """True when one of the request's kernels is the skinny GEMM."""
    return any("gemm_skinny(" in key[2] for key in req.network.kernel_objects)


def _matmul_model(ta: bool = False, tb: bool = False, ranks=(2, 2)):
    a = opset.parameter([-1] * ranks[0], np.float32, name="a")
    b = opset.parameter([-1] * ranks[1], np.float32, name="b")
    return Model([opset.result(opset.matmul(a, b, ta, tb), name="y")], [a, b])


# (M, K, N): every M of 1, 3, 17, 64, K of 1, 7, 256, 1024 and N of 1, 5, 256, 2048
SHAPES = [(1, 1, 1), (3, 7, 5), (17, 1024, 256), (64, 256, 2048), (1, 1024, 2048), (17, 7, 1)]


def test_matmul_shapes_match_numpy(rng):
    cm = compile_program(_matmul_model(), RUNTIME_DEVICE)
    req = cm.create_infer_request()
    for m, k, n in SHAPES:
        a, b = randn_f32(rng, m, k), randn_f32(rng, k, n)
        _check(req.infer({"a": a, "b": b})["y"], a, b, k)
    assert _ran_skinny(req)
    assert req.stats["host_fallbacks"] == 0


def test_transposed_b_matches_numpy(rng):
    cm = compile_program(_matmul_model(tb=True), RUNTIME_DEVICE)
    req = cm.create_infer_request()
    for m, k, n in [(3, 7, 5), (17, 1024, 256), (64, 256, 1)]:
        a, bt = randn_f32(rng, m, k), randn_f32(rng, n, k)
        _check(req.infer({"a": a, "b": bt})["y"], a, bt.T, k)
    assert _ran_skinny(req)


def test_transposed_a_matches_numpy(rng):
    """A read along k with a stride (no float4 loads)."""
    cm = compile_program(_matmul_model(ta=True), RUNTIME_DEVICE)
    req = cm.create_infer_request()
    for m, k, n in [(1, 256, 5), (17, 1024, 256)]:
        at, b = randn_f32(rng, k, m), randn_f32(rng, k, n)
        _check(req.infer({"a": at, "b": b})["y"], at.T, b, k)
    assert _ran_skinny(req)


def test_batch_broadcast_matches_numpy(rng):
    cm = compile_program(_matmul_model(ranks=(4, 3)), RUNTIME_DEVICE)
    req = cm.create_infer_request()
    for ashape, bshape in [((2, 3, 17, 7), (3, 7, 5)), ((1, 4, 3, 256), (1, 256, 64))]:
        a, b = randn_f32(rng, *ashape), randn_f32(rng, *bshape)
        _check(req.infer({"a": a, "b": b})["y"], a, b, ashape[-1])
    assert _ran_skinny(req)


def test_fully_connected_bias_relu(rng):
    """FullyConnected (weights reordered to [K, N]: B read along n) with its bias and a fused
    Relu as the epilogue."""
    x = opset.parameter([-1, 256], np.float32, name="x")
    w, bias = randn_f32(rng, 768, 256), randn_f32(rng, 768)
    model = Model([opset.result(opset.relu(opset.fully_connected(x, w, bias)), name="y")], [x])
    cm = compile_program(model, RUNTIME_DEVICE)
    req = cm.create_infer_request()
    for m in (1, 17, 64):
        xv = randn_f32(rng, m, 256)
        got = req.infer({"x": xv})["y"]
        want = np.maximum(xv.astype(np.float64) @ w.T.astype(np.float64) + bias, 0.0)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(256))
    assert _ran_skinny(req)
    assert req.stats["fused"] == 3 and req.stats["weight_reorders"] == 1


def test_matmul_fused_add_multiply(rng):
    """MatMul with constant weights, a broadcast Add and a Multiply folded into the kernel."""
    x = opset.parameter([-1, -1, 1024], np.float32, name="x")
    w, c, s = randn_f32(rng, 1024, 256), randn_f32(rng, 256), randn_f32(rng, 256)
    y = opset.multiply(opset.add(opset.matmul(x, w, False, False), c), s)
    cm = compile_program(Model([opset.result(y, name="y")], [x]), RUNTIME_DEVICE)
    req = cm.create_infer_request()
    for shape in ((1, 1, 1024), (2, 3, 1024), (1, 64, 1024)):
        xv = randn_f32(rng, *shape)
        got = req.infer({"x": xv})["y"]
        want = (xv.astype(np.float64) @ w.astype(np.float64) + c) * s
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(1024) * np.abs(s).max())
    assert _ran_skinny(req)
    assert req.stats["fused"] == 6


@pocl_only
def test_gpu_widths_on_pocl(rng, monkeypatch):
    """The GPU selection on PoCL's 2 compute units (8 work-groups wanted): 32 columns per
    work-group for (M, N) = (1, 256), 16 for (17, 40), 8 for (1, 64)."""
    cm = compile_program(_matmul_model(), "CPU")
    monkeypatch.setattr(cm.engine, "is_gpu", True)
    widths = {(1, 256): 32, (17, 40): 16, (1, 64): 8}
    req = cm.create_infer_request()
    for (m, n), tn in widths.items():
        assert matmul.skinny_width(cm.engine, m, n, 1, 1) == tn
        a, b = randn_f32(rng, m, 300), randn_f32(rng, 300, n)
        _check(req.infer({"a": a, "b": b})["y"], a, b, 300)
    assert _ran_skinny(req)


def test_tall_matmul_runs_tiled_kernel(rng):
    """M > 256: a tiled kernel (same argument list) still runs and matches: the register-tiled
    one, or the tensor-core one where the device has it (kernels.mma)."""
    cm = compile_program(_matmul_model(), RUNTIME_DEVICE)
    req = cm.create_infer_request()
    a, b = randn_f32(rng, 300, 20), randn_f32(rng, 20, 70)
    _check(req.infer({"a": a, "b": b})["y"], a, b, 20)
    assert not _ran_skinny(req)
    assert any(" gemm(" in key[2] or " gemm_mma(" in key[2] for key in req.network.kernel_objects)


# -- selection -------------------------------------------------------------------------------
def _engine(gpu: bool, cus: int):
    return SimpleNamespace(is_gpu=gpu, device=SimpleNamespace(max_compute_units=cus))


H200 = _engine(True, 132)
POCL = _engine(False, 2)


def _matmul_launch(engine, a_shape, b_shape, tb: bool = False) -> Launch:
    out = tuple(np.broadcast_shapes(a_shape[:-2], b_shape[:-2])) + \
        (a_shape[-2], b_shape[-2] if tb else b_shape[-1])
    p = Params(row=TABLE[MatMul], attrs={"transpose_a": False, "transpose_b": tb},
               in_shapes=[a_shape, b_shape], in_dtypes=[F32, F32], out_shapes=[out],
               out_dtypes=[F32], values={}, fused=[], extra_shapes=[], extra_dtypes=[],
               engine=engine)
    impl = matmul.matmul_impl(p, None)
    assert impl is not None and len(impl.launches) == 1
    return impl.launches[0]


@pytest.mark.parametrize("m", [1, 3, 17, 64, 128])
def test_gpu_decoder_shapes_select_skinny(m):
    for k, n in ((256, 768), (256, 256), (256, 1024), (1024, 256), (256, 2048)):
        assert _matmul_launch(H200, (1, m, k), (k, n)).source.name == "gemm_skinny", (m, k, n)


def test_gpu_single_row_narrows_columns_to_fill_the_device():
    ln = _matmul_launch(H200, (1, 1024), (1024, 256))
    assert ln.lws == (8, 32, 1)  # 32 work-groups of 8 columns x 32 K-slices
    assert ln.gws == (256, 32, 1)


def test_gpu_transposed_b_and_batch_select_skinny():
    ln = _matmul_launch(H200, (8, 17, 64), (8, 17, 64), tb=True)
    assert ln.source.name == "gemm_skinny" and ln.gws[2] == 8


def test_gpu_large_problems_keep_tiled_kernels():
    assert _matmul_launch(H200, (512, 256), (256, 512)).source.name == "gemm"
    assert _matmul_launch(H200, (4096, 64), (64, 64)).source.name == "gemm"
    # M = 256 and 256 aligned 128x128 tiles, M = 32 and 1024 32x32 tiles: the device is full
    assert _matmul_launch(H200, (64, 256, 64), (64, 256)).source.name == "gemm"
    assert _matmul_launch(H200, (8, 32, 64), (64, 4096)).source.name == "gemm"
    # one row block reads B once: skinny whatever the tiling
    assert _matmul_launch(H200, (64, 8, 64), (64, 4096)).source.name == "gemm_skinny"


def test_nvidia_aligned_problems_select_the_cp_async_ring():
    nvidia = SimpleNamespace(is_gpu=True, cp_async=True, device=H200.device)
    text = _matmul_launch(nvidia, (1024, 512), (512, 1024)).source.text
    assert "cp.async" in text and "#define STAGES" in text
    assert "cp.async" not in _matmul_launch(H200, (1024, 512), (512, 1024)).source.text
    assert "cp.async" not in _matmul_launch(nvidia, (1000, 512), (512, 1024)).source.text  # M unaligned


@pocl_only
def test_pocl_has_no_cp_async():
    from netpass.runtime.device import Engine, select_device
    assert not Engine.get(select_device("CPU")).cp_async


def test_cp_async_needs_compute_capability_8_and_can_be_turned_off(monkeypatch):
    from netpass.runtime.device import _has_cp_async

    def nvidia(major):
        return SimpleNamespace(platform=SimpleNamespace(name="NVIDIA CUDA"), compute_capability_major_nv=major)
    assert not _has_cp_async(nvidia(7), None)  # Volta / Turing: no cp.async
    monkeypatch.setenv("NETPASS_CP_ASYNC", "0")
    assert not _has_cp_async(nvidia(9), None)


def test_cpu_keeps_width_per_n():
    """PoCL compiles one kernel per local size: the width depends on N only."""
    assert _matmul_launch(POCL, (1, 256), (256, 2048)).lws == (64, 4, 1)
    assert _matmul_launch(POCL, (64, 256), (256, 2048)).lws == (64, 4, 1)
    assert _matmul_launch(POCL, (17, 7), (7, 5)).lws == (8, 32, 1)
    assert _matmul_launch(POCL, (1024, 256), (256, 256)).source.name == "gemm"


def test_no_engine_keeps_tiled_kernel():
    assert _matmul_launch(None, (1, 256), (256, 256)).source.name == "gemm"


def test_fully_connected_selects_skinny_on_gpu():
    # (17 rows: up to kernels.decode_gemv.GEMV_ROWS the GEMV reads the weights as they are)
    p = Params(row=TABLE[FullyConnected], attrs={"_weights_reordered": True},
               in_shapes=[(1, 17, 256), (768, 256), (768,)], in_dtypes=[F32, F32, F32],
               out_shapes=[(1, 17, 768)], out_dtypes=[F32], values={}, fused=[],
               extra_shapes=[], extra_dtypes=[], engine=H200)
    ln = legacy.fully_connected_impl(p, None).launches[0]
    assert ln.source.name == "gemm_skinny"
    assert ln.spec[:3] == [("i", 0), ("i", 1), ("o", 0)] and ("i", 2) in ln.spec
