"""Normalized GEMMs (netpass.runtime.norm_gemm): a LayerNorm in front of a MatMul is folded
into the GEMM's prologue; every GEMM kernel computes what MVN, Multiply, Add and MatMul do."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.runtime.kernels import mma_plan
from netpass.runtime.norm_gemm import NormDesc
from netpass.testing import RUNTIME_DEVICE

pocl_only = pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="checks the kernel choices on PoCL")


def _ln_matmul(rng, k=32, n=24, gamma=True, beta=True, eps_mode="inside_sqrt", variance=True,
               rows=-1):
    x = opset.parameter([1, rows, k], np.float32, name="x")
    h = opset.mvn(x, np.array([-1], np.int64), variance, 1e-5, eps_mode)
    if gamma:
        h = opset.multiply(h, (1.0 + 0.2 * rng.standard_normal(k)).astype(np.float32))
    if beta:
        h = opset.add(h, (0.2 * rng.standard_normal(k)).astype(np.float32))
    y = opset.add(opset.matmul(h, randn_f32(rng, k, n), False, False), randn_f32(rng, n))
    return Model([opset.result(y, name="y")], [x])


def _check(model, shapes, rng, offset=0.0, tol=1e-5):
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for shape in shapes:
        feeds = {"x": (offset + randn_f32(rng, *shape)).astype(np.float32)}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    return req


def test_layernorm_folds_into_the_matmul(rng):
    prog = Program.from_model(_ln_matmul(rng))
    assert not [n for n in prog.nodes if n.kind == "MVN"]
    mm = next(n for n in prog.nodes if n.kind == "MatMul")
    assert isinstance(mm.subgraph, NormDesc) and (mm.subgraph.gamma, mm.subgraph.beta) == (True, True)
    assert [f.row.name for f in mm.fused] == ["Add"]  # the bias is still the epilogue


@pytest.mark.parametrize("gamma,beta", [(True, True), (True, False), (False, True), (False, False)])
def test_normalized_gemm_matches_the_reference(rng, gamma, beta):
    """Small M (the skinny kernel) and larger M (the tiled kernel), rows with a large mean."""
    req = _check(_ln_matmul(rng, gamma=gamma, beta=beta), [(1, 3, 32), (1, 300, 32), (1, 1, 32)],
                 rng, offset=50.0, tol=2e-4)
    if RUNTIME_DEVICE == "CPU":  # (a GPU's tensor cores take 300 rows after a row kernel)
        assert req.stats["kernels_enqueued"] == 3


@pytest.mark.parametrize("eps_mode,variance", [("outside_sqrt", True), ("inside_sqrt", False)])
def test_mvn_variants(rng, eps_mode, variance):
    _check(_ln_matmul(rng, eps_mode=eps_mode, variance=variance), [(1, 5, 32), (1, 70, 32)], rng)


@pocl_only
def test_aligned_gemm_prologue(rng, monkeypatch):
    """The 128x128 GPU kernel (taken here on PoCL by calling the CPU device a GPU)."""
    model = _ln_matmul(rng, k=64, n=128, rows=256)
    cm = compile_program(model, "CPU")
    monkeypatch.setattr(cm.engine, "is_gpu", True)
    req = cm.create_infer_request()
    feeds = {"x": (3.0 + randn_f32(rng, 1, 256, 64)).astype(np.float32)}
    np.testing.assert_allclose(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"],
                               rtol=1e-4, atol=1e-4)
    impl = req.network.insts[next(n.index for n in cm.program.nodes if n.kind == "MatMul")].impl
    assert impl.launches[0].gws == (128 // 8, 256 // 8, 1)  # (the aligned kernel's grid)


def test_reference_device_runs_the_absorbed_ops(rng):
    model = _ln_matmul(rng)
    feeds = {"x": randn_f32(rng, 1, 4, 32)}
    out = compile_program(model, "REFERENCE").create_infer_request().infer(feeds)["y"]
    np.testing.assert_allclose(out, netpass.reference.infer(model, feeds)["y"], rtol=1e-6, atol=1e-6)


def test_layernorm_read_elsewhere_is_not_folded(rng):
    x = opset.parameter([1, -1, 16], np.float32, name="x")
    h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
    model = Model([opset.result(opset.matmul(h, randn_f32(rng, 16, 8), False, False), name="y"),
                   opset.result(opset.relu(h), name="z")], [x])
    assert any(n.kind == "MVN" for n in Program.from_model(model).nodes)


def test_mvn_over_another_axis_is_not_folded(rng):
    x = opset.parameter([1, 6, 16], np.float32, name="x")
    h = opset.mvn(x, np.array([1], np.int64), True, 1e-5, "inside_sqrt")
    model = Model([opset.result(opset.matmul(h, randn_f32(rng, 16, 8), False, False), name="y")], [x])
    assert any(n.kind == "MVN" for n in Program.from_model(model).nodes)


def test_scale_that_varies_along_rows_is_not_folded(rng):
    x = opset.parameter([1, 6, 16], np.float32, name="x")
    h = opset.multiply(opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt"), randn_f32(rng, 6, 1))
    model = Model([opset.result(opset.matmul(h, randn_f32(rng, 16, 8), False, False), name="y")], [x])
    assert any(n.kind == "MVN" for n in Program.from_model(model).nodes)


@pytest.mark.parametrize("on_host", [False, True])
def test_layernorm_folds_into_a_fully_connected(rng, monkeypatch, on_host):
    """compile_model's legacy stage makes the MatMul and its bias a FullyConnected: the
    LayerNorm folds into it (gamma and beta after the bias), on the kernel and, where no
    kernel runs it, in the host fallback (NormDesc.evaluate)."""
    from dataclasses import replace

    from netpass.ops.legacy import FullyConnected
    from netpass.runtime.kinds import TABLE
    model = _ln_matmul(rng, k=24, n=20)
    if on_host:  # the row's kernel factory takes no shape
        monkeypatch.setitem(TABLE, FullyConnected, replace(TABLE[FullyConnected], impl=lambda p, key: None))
    cm = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
    fc = next(n for n in cm.runtime.program.nodes if n.kind == "FullyConnected")
    assert isinstance(fc.subgraph, NormDesc) and fc.subgraph.first == 3 and len(fc.inputs) == 5
    req = cm.create_infer_request()
    for rows in (1, 9, 70):
        feeds = {"x": (20.0 + randn_f32(rng, 1, rows, 24)).astype(np.float32)}
        np.testing.assert_allclose(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"],
                                   rtol=2e-4, atol=2e-4)
    assert req.stats["host_fallbacks"] == (3 if on_host else 0)


def _ln_rows_matmul(rng, k, n, axes):
    """LayerNorm, a Reshape keeping the last dim, a Slice of ``axes`` (``None``: no axes
    input, the leading ones), then a MatMul: the LM head after ``slice_before_lm_head``."""
    x = opset.parameter([-1, -1, k], np.float32, name="x")
    h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
    h = opset.add(opset.multiply(h, randn_f32(rng, k)), randn_f32(rng, k))
    h = opset.reshape(h, opset.shape_of(x), False)
    big = np.array([np.iinfo(np.int64).max], np.int64)
    if axes is None:
        h = opset.slice(h, np.array([0, -1], np.int64), np.array([1, big[0]], np.int64),
                        np.array([1, 1], np.int64))
    else:
        h = opset.slice(h, np.array([-1], np.int64), big, np.array([1], np.int64),
                        np.array(axes, np.int64))
    return Model([opset.result(opset.matmul(h, randn_f32(rng, k, n), False, False), name="y")], [x])


@pytest.mark.parametrize("axes", [[1], [-2], None])
def test_layernorm_folds_through_row_views(rng, axes):
    """The views move in front of the normalization (whole rows, a per-row norm): one launch,
    the reference's values (rel. and abs. 2e-4) at odd sizes, rows with a large mean."""
    model = _ln_rows_matmul(rng, 37, 29, axes)
    prog = Program.from_model(model)
    assert not [n for n in prog.nodes if n.kind == "MVN"]
    req = _check(model, [(2, 5, 37), (1, 1, 37), (3, 17, 37)], rng, offset=20.0, tol=2e-4)
    assert req.stats["kernels_enqueued"] == 3


def test_slice_of_the_normalized_axis_is_not_folded(rng):
    x = opset.parameter([1, -1, 16], np.float32, name="x")
    h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
    h = opset.slice(h, np.array([0], np.int64), np.array([8], np.int64), np.array([1], np.int64),
                    np.array([2], np.int64))
    model = Model([opset.result(opset.matmul(h, randn_f32(rng, 8, 4), False, False), name="y")], [x])
    assert any(n.kind == "MVN" for n in Program.from_model(model).nodes)


def _rms_matmul(rng, k=32, n=24, rows=-1):
    """LLaMA's RMSNorm (x * rsqrt(mean(x^2) + eps) * weight) in front of a MatMul."""
    x = opset.parameter([1, rows, k], np.float32, name="x")
    ms = opset.reduce_mean(opset.power(x, np.float32(2)), np.array([-1], np.int64), True)
    h = opset.multiply(x, opset.divide(np.float32(1), opset.sqrt(opset.add(ms, np.float32(1e-6)))))
    h = opset.multiply(h, (1.0 + 0.2 * rng.standard_normal(k)).astype(np.float32))
    y = opset.matmul(h, randn_f32(rng, k, n), False, False)
    return Model([opset.result(y, name="y")], [x])


def test_rmsnorm_folds_into_the_matmul(rng):
    prog = Program.from_model(_rms_matmul(rng))
    assert not [n for n in prog.nodes if n.kind == "RmsNorm"]
    mm = next(n for n in prog.nodes if n.kind == "MatMul")
    assert isinstance(mm.subgraph, NormDesc) and mm.subgraph.rms and mm.subgraph.gamma
    req = _check(_rms_matmul(rng), [(1, 3, 32), (1, 300, 32), (1, 1, 32)], rng, offset=5.0,
                 tol=2e-4)
    if RUNTIME_DEVICE == "CPU":  # one launch per infer (as above)
        assert req.stats["kernels_enqueued"] == 3


@pocl_only
def test_rmsnorm_ahead_of_the_tensor_core_gemm(rng, monkeypatch):
    """On the tensor-core path (emulated on PoCL) the folded RMSNorm runs as a row kernel
    into a scratch copy the GEMM reads."""
    from netpass.runtime.device import Engine, select_device
    monkeypatch.setattr(Engine.get(select_device("CPU")), "mma", "emulated")
    req = _check(_rms_matmul(rng, k=64, n=64), [(1, 300, 64)], rng, offset=5.0, tol=2e-4)
    assert any("gemm_mma" in key[2] for key in req.network.kernel_objects)
    assert req.stats["kernels_enqueued"] == 2


@pytest.mark.parametrize("norm,k", [
    ((1e-5, True, True, True, True, False), 768),    # LayerNorm, 16-byte loads and stores
    ((1e-5, True, True, True, True, False), 37),     # a row of no whole 16 bytes
    ((1e-3, False, True, False, True, False), 64),   # eps outside the root, no gamma
    ((1e-5, True, False, True, False, False), 40),   # no variance, no beta
    ((1e-6, True, True, True, False, True), 96),     # RMSNorm (no mean)
])
def test_normalize_rows_matches_numpy(rng, norm, k):
    """The row kernel ahead of a tensor-core GEMM (kernels.mma_parts.normalize_rows): MVN or
    RMSNorm of each row, times gamma plus beta where the norm has them, for rows whose mean is
    20 deviations (sums shifted by each row's first element); within 1e-5 of float64."""
    from netpass.runtime.device import Engine, select_device
    from netpass.runtime.kernels import mma_parts
    from netpass.runtime.kernels.common import LS
    eps, inside, variance, gamma, beta, rms = norm
    eng = Engine.get(select_device(RUNTIME_DEVICE))
    rows, off = 33, 3
    x = (20.0 + randn_f32(rng, rows * k + off)).astype(np.float32)
    g, b = 1 + 0.2 * randn_f32(rng, k), 0.2 * randn_f32(rng, k)
    src = mma_parts.normalize_rows(norm)
    cl, mf = eng.cl, eng.cl.mem_flags
    xb = cl.Buffer(eng.context, mf.COPY_HOST_PTR, hostbuf=x)
    yb = cl.Buffer(eng.context, mf.READ_WRITE, rows * k * 4)
    vecs = [cl.Buffer(eng.context, mf.COPY_HOST_PTR, hostbuf=v) for v, on in ((g, gamma), (b, beta))
            if on]
    kern = cl.Kernel(eng.build(src.text), src.name)
    # (the engine's kernels take their buffers, then their ints in one array)
    kern.set_args(xb, yb, *vecs, np.array([off, k] + [0] * len(vecs), np.int32))
    cl.enqueue_nd_range_kernel(eng.queue, kern, (rows * LS,), (LS,))
    y = np.empty((rows, k), np.float32)
    cl.enqueue_copy(eng.queue, y, yb)
    eng.queue.finish()
    x64 = x[off:].astype(np.float64).reshape(rows, k)
    if rms:
        want = x64 / np.sqrt((x64 ** 2).mean(1, keepdims=True) + eps)
    else:
        want = x64 - x64.mean(1, keepdims=True)
        if variance:
            var = want.var(1, keepdims=True)
            want = want / (np.sqrt(var + eps) if inside else np.sqrt(var) + eps)
    want = want * (g if gamma else 1) + (b if beta else 0)
    assert np.abs(y - want).max() <= 1e-5 * max(1.0, np.abs(want).max())


def _tensor_cores(monkeypatch) -> None:
    """The tensor-core kernels on this device: emulated on PoCL, else the device's own; not
    Hopper's TMA kernel, which takes float32 GEMMs too and reads rows a row kernel
    normalized ahead of it instead of folding the norm into its weights (test_tma_gemm)."""
    from netpass.runtime.device import Engine, select_device
    engine = Engine.get(select_device(RUNTIME_DEVICE))
    if RUNTIME_DEVICE == "CPU":
        monkeypatch.setattr(engine, "mma", "emulated")
    elif not getattr(engine, "mma", ""):
        pytest.skip("no tensor-core kernels on this device")
    monkeypatch.setattr(engine, "tma", "")


ROWS = (70, 300, 1)


@pytest.mark.parametrize("make,k,n,offset,rows", [
    (_ln_matmul, 64, 72, 50.0, ROWS),     # 64-row tiles, two items a row; rows with a large mean
    (_ln_matmul, 512, 136, 2.0, ROWS),    # 128-row tiles, one item a row
    (lambda rng, k, n: _ln_matmul(rng, k, n, gamma=False), 64, 40, 3.0, ROWS),
    (lambda rng, k, n: _ln_matmul(rng, k, n, beta=False, eps_mode="outside_sqrt"), 48, 24, 1.0,
     ROWS),
    (lambda rng, k, n: _ln_matmul(rng, k, n, variance=False), 48, 24, 1.0, ROWS),
    (_rms_matmul, 64, 64, 5.0, ROWS),
    (_ln_matmul, 1024, 40, 20.0, (70, 100, 1)),  # K slices (PoCL's 2 units): sums in the tail
    (_rms_matmul, 1024, 40, 3.0, (70, 100, 1)),
])
@pytest.mark.parametrize("ahead", [False, True], ids=["stages", "ahead"])
def test_layernorm_folded_into_the_tensor_core_weights(rng, monkeypatch, make, k, n, offset,
                                                       rows, ahead):
    """On the tensor-core path (emulated on PoCL) a FullyConnected's LayerNorm or RMSNorm
    folds into its weights (norm_gemm.fold_weights): one launch per inference with the rows'
    statistics taken as the A stages pass, or two with a row kernel taking them ahead
    (``mma_plan.norm_ahead``); the reference's values within 1e-4 of the largest output (rows
    whose mean is 50 deviations included: the mean cancels in the product, 3xTF32 keeps that
    near float32's own rounding of the rows)."""
    _tensor_cores(monkeypatch)
    monkeypatch.setattr(mma_plan, "norm_ahead", lambda cfg: ahead)
    model = make(rng, k=k, n=n)
    req = netpass.compile_model(model, RUNTIME_DEVICE,
                                {"TRANSFORMATIONS": "NONE"}).create_infer_request()
    for m in rows:
        feeds = {"x": (offset + randn_f32(rng, 1, m, k)).astype(np.float32)}
        before = req.stats["kernels_enqueued"]
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
        # (a device with many compute units may take these shapes in K slices instead)
        launches = 1 + (ahead and m > 1)  # (one row: the GEMV, its own statistics)
        assert req.stats["kernels_enqueued"] - before == launches or RUNTIME_DEVICE != "CPU"
    assert req.stats["weight_reorders"] >= 1
    assert any("void row_moments(" in key[2]
               for key in req._runtime_request.network.kernel_objects) == ahead


def test_layernorm_over_k_in_no_whole_stages_runs_ahead_of_the_gemm(rng, monkeypatch):
    """K = 40 is not in whole 16-wide stages: the folded LayerNorm runs as a row kernel."""
    _tensor_cores(monkeypatch)
    model = _ln_matmul(rng, k=40, n=24)
    req = netpass.compile_model(model, RUNTIME_DEVICE,
                                {"TRANSFORMATIONS": "NONE"}).create_infer_request()
    feeds = {"x": (2.0 + randn_f32(rng, 1, 300, 40)).astype(np.float32)}
    np.testing.assert_allclose(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"],
                               rtol=2e-4, atol=2e-4)
    assert req.stats["kernels_enqueued"] == 2


def test_folded_weights_are_the_normalization_over_the_product(rng):
    """fold_weights: (x - mean) * rstd * gamma @ W^T + beta @ W^T equals
    rstd * (x @ B[:K] - mean * B[K]) + B[K + 1], in float64."""
    from netpass.runtime.norm_gemm import fold_weights
    w, gamma, beta = randn_f32(rng, 5, 7), randn_f32(rng, 7), randn_f32(rng, 7)
    x = 3.0 + rng.standard_normal((4, 7))
    mean, rstd = x.mean(-1, keepdims=True), 1.0 / x.std(-1, keepdims=True)
    want = ((x - mean) * rstd * gamma) @ w.T.astype(np.float64) + beta @ w.T.astype(np.float64)
    b = fold_weights(w, gamma, beta).astype(np.float64)
    got = rstd * (x @ b[:7] - mean * b[7]) + b[8]
    assert np.abs(got - want).max() <= 1e-6 * np.abs(want).max()  # (B is float32)
