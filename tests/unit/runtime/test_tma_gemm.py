"""The TF32 and 3xTF32 GEMM on Hopper's tensor memory accelerator and wgmma (netpass.runtime.
kernels.tma_gemm) with its schedule emulated on PoCL: tails in M, N and K, operands starting
off 16-byte boundaries, each tile, the epilogue; its plan; and a TF32 or float32
FullyConnected and MatMul routed to it. Relative L2 against float64 <= 2e-3 for TF32 (10-bit
mantissas), as the other tensor-core kernels' tests, and <= 1e-5 for 3xTF32 (float32's own
rounding over these K is ~1e-7; TF32 alone would be ~1e-3). On the H200
(``NETPASS_TEST_DEVICE=GPU``) the same tests run the real instructions where the engine has
them."""
from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
from graph_blocks import check_fc_gelu_residual, randn_f32

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.runtime.device import Engine, select_device
from netpass.runtime.kernels import tma_gemm
from netpass.runtime.kernels.common import Stage
from netpass.runtime.kernels.tma_gemm import TmaConfig, TmaPlan
from netpass.runtime.kernels.wgmma import retarget
from netpass.runtime.tensor_maps import templates
from netpass.testing import RUNTIME_DEVICE

TOL = 2e-3
TOL_3X = 1e-5


def _rel_l2(got, want) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def _engine():
    """The test device's engine: its own instructions where it has them, else emulated."""
    eng = Engine.get(select_device(RUNTIME_DEVICE))
    return eng, eng.tma == "ptx"


def _run(cfg, m, n, k, rng, aoff=0, boff=0, slice_k=0):
    """C = A @ W^T (W [N, K] as a FullyConnected's weights) through the kernel; (C, float64).
    Rows are stored in whole 16 bytes (the tensor maps' rule), the columns past K random.
    ``slice_k``: the kernel in K slices of that many, their partial products summed here."""
    eng, ptx = _engine()
    cl = eng.cl
    ld = -(-k // 4) * 4
    ap, wp = randn_f32(rng, m, ld), randn_f32(rng, n, ld)
    a, w = ap[:, :k], wp[:, :k]
    slices = -(-k // slice_k) if slice_k else 1
    src = tma_gemm.gemm_tma(cfg, [], 0, [], 0, False, ptx, bool(slice_k))
    mf = cl.mem_flags

    def buf(x, off):
        return cl.Buffer(eng.context, mf.COPY_HOST_PTR,
                         hostbuf=np.concatenate([np.zeros(off, np.float32), x.ravel()]))

    cbuf = cl.Buffer(eng.context, mf.READ_WRITE, slices * m * n * 4)
    tm = cl.Buffer(eng.context, mf.COPY_HOST_PTR,
                   hostbuf=np.array(templates(eng.tma or "emulated", cfg.bm, cfg.bn)))
    ts = cl.Buffer(eng.context, mf.READ_WRITE, tma_gemm.map_slots(cfg, m, n, slices))
    kern = cl.Kernel(eng.build(src.text), src.name)
    ints = [aoff, boff, 0, m, n, k, 1, 0, 0, ld, 1, 0, 0, 1, ld] + \
        ([slice_k, slices] if slice_k else [])
    abuf, wbuf = buf(ap, aoff), buf(wp, boff)  # (held until the kernel ran)
    kern.set_args(abuf, wbuf, cbuf, tm, ts, np.array(ints, np.int32))
    cl.enqueue_nd_range_kernel(eng.queue, kern, *tma_gemm.work_sizes(cfg, m, n, ptx, slices))
    c = np.full((slices, m, n), np.nan, np.float32)
    cl.enqueue_copy(eng.queue, c, cbuf)
    eng.queue.finish()
    return c.sum(axis=0), a.astype(np.float64) @ w.T.astype(np.float64)


@pytest.mark.parametrize("cfg,shape,aoff,boff", [
    (TmaConfig(64, 64, 2), (70, 70, 37), 0, 0),      # tails in every dimension
    # starts off 16-byte boundaries: the plain schedule
    (TmaConfig(64, 64, 3), (70, 70, 37), 1, 3),
    (TmaConfig(64, 128, 3), (64, 128, 40), 1, 3),
    (TmaConfig(128, 64, 2), (130, 65, 19), 2, 0),    # two warpgroups, a one-row tail tile
    (TmaConfig(64, 192, 2), (65, 200, 8), 0, 1),     # one K step
])
def test_tma_gemm_matches_numpy(cfg, shape, aoff, boff, rng):
    got, want = _run(cfg, *shape, rng, aoff, boff)
    assert not np.isnan(got).any()
    assert _rel_l2(got, want) <= TOL


@pytest.mark.parametrize("cfg,shape,slice_k,aoff", [
    (TmaConfig(64, 64, 2), (70, 70, 77), 24, 0),    # four slices, the last of 5 K
    (TmaConfig(128, 64, 3), (130, 65, 40), 16, 0),   # slices of two K steps
    (TmaConfig(64, 128, 2), (64, 128, 45), 32, 1),   # off 16 bytes: the plain schedule
])
def test_tma_gemm_in_k_slices_matches_numpy(cfg, shape, slice_k, aoff, rng):
    """Slice s of K writes its partial product at C + s * M * N; their sum is the product."""
    got, want = _run(cfg, *shape, rng, aoff, 0, slice_k)
    assert not np.isnan(got).any()
    assert _rel_l2(got, want) <= TOL


@pytest.mark.parametrize("cfg,shape,aoff,boff,slice_k", [
    (TmaConfig(64, 64, 2, 3), (70, 70, 37), 0, 0, 0),     # tails in every dimension
    (TmaConfig(128, 64, 3, 3), (130, 65, 40), 0, 0, 0),   # two warpgroups share a stage
    (TmaConfig(64, 128, 2, 3), (64, 128, 45), 1, 3, 0),   # off 16 bytes: the plain schedule
    (TmaConfig(64, 64, 2, 3), (70, 70, 77), 0, 0, 24),    # K slices
])
def test_tma_gemm_3xtf32_matches_float64(cfg, shape, aoff, boff, slice_k, rng):
    """Each stage's remainders (x less its TF32 head) written beside it, three products a K
    step: float32's accuracy, not TF32's."""
    got, want = _run(cfg, *shape, rng, aoff, boff, slice_k)
    assert not np.isnan(got).any()
    assert _rel_l2(got, want) <= TOL_3X


def test_tiles_checked_and_chosen():
    """Tiles of whole warpgroups and 64-column blocks up to 256 in 48 KB of local memory; the
    tile whose rounds over the compute units cost least at its measured rate."""
    with pytest.raises(ValueError, match="rows in 64s"):
        TmaConfig(96, 128, 3).check()
    with pytest.raises(ValueError, match="48 KB"):
        TmaConfig(128, 256, 4).check()
    with pytest.raises(ValueError, match="48 KB"):
        TmaConfig(128, 128, 4, 3).check()  # (the remainders take two stages' room)
    with pytest.raises(ValueError, match="split 2"):
        TmaConfig(64, 64, 2, 2).check()
    with pytest.raises(ValueError, match="2 stages"):
        TmaConfig(64, 64, 1, 3).check()  # (the next stage is split while one is read)
    for cfg, _ in tma_gemm.CONFIGS + tma_gemm.CONFIGS_3X:
        cfg.check()
        assert cfg.local_bytes() <= 48 << 10
    assert all(cfg.split == 3 for cfg, _ in tma_gemm.CONFIGS_3X)
    assert tma_gemm.choose(4096, 4096, 4096, 132, 3).cfg.split == 3
    whole = {(4096, 4096, 4096): TmaConfig(128, 256, 3), (4096, 3072, 768): TmaConfig(128, 256, 3),
             (4096, 2304, 768): TmaConfig(128, 192, 4), (1024, 3072, 768): TmaConfig(128, 192, 4),
             (1024, 768, 768): TmaConfig(64, 128, 7), (4096, 768, 3072): TmaConfig(128, 192, 4)}
    for (m, n, k), cfg in whole.items():
        assert tma_gemm.choose(m, n, k, 132) == TmaPlan(cfg, 1, k)
    # 24 tiles of a long K on 132 units: five slices of 616 (77 K steps), the last 608
    assert tma_gemm.choose(1024, 768, 3072, 132) == TmaPlan(TmaConfig(128, 256, 3), 5, 616)
    for m, n, k in ((128, 768, 3072), (200, 64, 700), (64, 64, 100)):
        got = tma_gemm.choose(m, n, k, 132)
        assert got.slice_k % 8 == 0 or got.slices == 1
        assert (got.slices - 1) * got.slice_k < k <= got.slices * got.slice_k


def test_plan_takes_k_contiguous_operands_only(monkeypatch):
    """TF32, or float32 as 3xTF32 (F32_SPLIT), one batch, no normalized rows, K contiguous in
    both operands with row strides of whole 16 bytes, M from MIN_M, on an engine with the
    instructions."""
    eng = SimpleNamespace(tma="ptx", device=SimpleNamespace(max_compute_units=132))
    ok = (1024, 768, 768, 1, [768, 1], [1, 768], None)
    assert tma_gemm.plan(eng, "tf32", *ok).cfg.split == 1
    assert tma_gemm.plan(eng, "f32", *ok).cfg.split == 3
    assert tma_gemm.plan(eng, "tf32", 128, 768, 768, 1, [768, 1], [1, 768], None) is not None
    assert tma_gemm.plan(eng, "f32", 128, 768, 768, 1, [768, 1], [1, 768], None) is None
    assert tma_gemm.plan(eng, "f32", 256, 768, 768, 1, [768, 1], [1, 768], None) is not None
    monkeypatch.setattr(tma_gemm, "F32_SPLIT", None)
    assert tma_gemm.plan(eng, "f32", *ok) is None
    assert tma_gemm.plan(SimpleNamespace(tma=""), "tf32", *ok) is None
    assert tma_gemm.plan(eng, "tf32", 1024, 768, 768, 2, [768, 1], [1, 768], None) is None
    assert tma_gemm.plan(eng, "tf32", 1024, 768, 768, 1, [768, 1], [768, 1], None) is None
    assert tma_gemm.plan(eng, "tf32", 1024, 768, 770, 1, [770, 1], [1, 770], None) is None
    assert tma_gemm.plan(eng, "tf32", 32, 768, 768, 1, [768, 1], [1, 768], None) is None
    assert tma_gemm.plan(eng, "tf32", 1024, 768, 768, 1, [768, 1], [1, 768],
                         (1e-5, True, True, True, True, False)) is None


def test_tf32_epilogue_takes_the_hardware_tanh():
    """With PTX and TF32, the epilogue's tanh calls (not atanh's) become tanh.approx.f32;
    3xTF32 (float32's accuracy) and the emulated kernel keep OpenCL's tanh."""
    stages = [Stage("(0.5f * {0} * (1.0f + tanh({0})))", [("x", None)], "float"),
              Stage("atanh({0})", [("x", None)], "float")]

    def text(split, ptx):
        return tma_gemm.gemm_tma(TmaConfig(64, 64, 2, split), stages, 0, [], 3, False, ptx).text
    tf32 = text(1, True)
    assert "tanh.approx.f32" in tf32 and not re.search(r"(?<![\w.])tanh\(", tf32)
    assert tf32.count("atanh(") == text(3, True).count("atanh(") > 0
    for other in (text(3, True), text(1, False)):
        assert "tanh_tf32" not in other and re.search(r"(?<![\w.])tanh\(", other)


def test_retarget_uncomments_and_raises_the_target():
    ptx = ".version 7.5\n.target sm_90, texmode_independent\n.address_size 64\n" \
          "\t//@@ wgmma.fence.sync.aligned;\n"
    out = retarget(ptx)
    assert ".version 8.3" in out and ".target sm_90a, texmode_independent" in out
    assert "//@@" not in out and "\t wgmma.fence.sync.aligned;" in out
    assert ".version 9.0" in retarget(ptx.replace("7.5", "9.0"))


@pytest.fixture
def tma_engine(monkeypatch):
    """The test device's engine with the kernel (emulated where the device lacks it) and
    small tiles."""
    eng, ptx = _engine()
    if not ptx:
        monkeypatch.setattr(eng, "tma", "emulated")
    monkeypatch.setattr(tma_gemm, "CONFIGS", ((TmaConfig(64, 64, 2), 1.0),))
    monkeypatch.setattr(tma_gemm, "MIN_M", 16)
    monkeypatch.setattr(tma_gemm, "MIN_M_3X", 16)
    return eng


@pytest.mark.parametrize("n", [36, 38])
def test_fully_connected_runs_on_it_with_its_epilogue(tma_engine, rng, n):
    """A TF32 FullyConnected with bias, GELU and a residual add over growing row counts reads
    its weights as given, [N, K], through the kernel: its epilogue four columns a lane (N =
    36, the last of them past a tile's N) or one (N = 38, not whole float4s)."""
    req = check_fc_gelu_residual(RUNTIME_DEVICE, rng, TOL * 2, n=n)
    sources = [key[2] for key in req.network.kernel_objects if "gemm_tma(" in key[2]]
    assert sources


def test_epilogue_side_input_without_row_strides(tma_engine, rng):
    """A side input broadcast over the sequence ([B, 1, N] added to a FullyConnected's [B, S, N]
    output) has no one stride over the GEMM's B * S rows: the epilogue finds its elements from
    the flat index, four columns a lane as one."""
    x = opset.parameter([3, -1, 72], np.float32, name="x")
    side = opset.parameter([3, 1, 36], np.float32, name="side")
    w = randn_f32(rng, 36, 72)
    y = opset.add(opset.fully_connected(x, w, np.zeros(36, np.float32)), side)
    model = Model([opset.result(y, name="y")], [x, side])
    req = compile_program(model, RUNTIME_DEVICE,
                          {"INFERENCE_PRECISION_HINT": "tf32"}).create_infer_request()
    for s in (37, 5):
        xv, sv = randn_f32(rng, 3, s, 72), randn_f32(rng, 3, 1, 36)
        want = xv.astype(np.float64) @ w.T.astype(np.float64) + sv
        assert _rel_l2(req.infer({"x": xv, "side": sv})["y"], want) <= TOL, s
    sources = [key[2] for key in req.network.kernel_objects if "gemm_tma(" in key[2]]
    assert sources and all("int rem = flat;" in src for src in sources)


def test_fully_connected_in_k_slices_reduces_through_its_epilogue(tma_engine, monkeypatch,
                                                                   rng):
    """A plan in K slices: the kernel writes three partial products, ``splitk_reduce`` sums
    them through the bias, GELU and residual add."""
    monkeypatch.setattr(tma_gemm, "choose",
                        lambda m, n, k, cus, split: TmaPlan(TmaConfig(64, 64, 2), 3, 24))
    req = check_fc_gelu_residual(RUNTIME_DEVICE, rng, TOL * 2)
    sources = [key[2] for key in req.network.kernel_objects]
    assert any("gemm_tma(" in src and "slice_k" in src for src in sources)
    assert any("splitk_reduce(" in src for src in sources)


def test_fully_connected_in_float32_runs_on_it_as_3xtf32(tma_engine, monkeypatch, rng):
    """A float32 FullyConnected with its epilogue runs on the kernel's 3xTF32 tiles, at
    float32's accuracy; with F32_SPLIT None it is left to the other kernels."""
    monkeypatch.setattr(tma_gemm, "CONFIGS_3X", ((TmaConfig(64, 64, 2, 3), 1.0),))
    req = check_fc_gelu_residual(RUNTIME_DEVICE, rng, TOL_3X, hint="f32")
    assert any("gemm_tma(" in key[2] and "split_stage" in key[2]
               for key in req.network.kernel_objects)
    monkeypatch.setattr(tma_gemm, "F32_SPLIT", None)
    req = check_fc_gelu_residual(RUNTIME_DEVICE, rng, TOL_3X, hint="f32")
    assert not any("gemm_tma(" in key[2] for key in req.network.kernel_objects)


def test_matmul_of_a_transposed_view_runs_on_it(tma_engine, monkeypatch, rng):
    """A MatMul whose second operand is a transposed [N, K] input (K contiguous) runs on it
    with TF32, and with float32 as 3xTF32 at float32's accuracy."""
    monkeypatch.setattr(tma_gemm, "CONFIGS_3X", ((TmaConfig(64, 64, 2, 3), 1.0),))
    a = opset.parameter([-1, 40], np.float32, name="a")
    b = opset.parameter([48, 40], np.float32, name="b")
    y = opset.matmul(a, b, False, True)
    model = Model([opset.result(y, name="y")], [a, b])
    for hint, tol in (("tf32", TOL), ("f32", TOL_3X)):
        req = compile_program(model, RUNTIME_DEVICE,
                              {"INFERENCE_PRECISION_HINT": hint}).create_infer_request()
        av, bv = randn_f32(rng, 33, 40), randn_f32(rng, 48, 40)
        got = req.infer({"a": av, "b": bv})["y"]
        assert _rel_l2(got, av.astype(np.float64) @ bv.T.astype(np.float64)) <= tol
        assert any("gemm_tma(" in key[2] for key in req.network.kernel_objects)


def _normalized_matmul(rng, k: int, n: int, kind: str) -> Model:
    """A LayerNorm (gamma and beta), a bare MVN or LLaMA's RMSNorm over K in front of a MatMul
    with a bias, its weights [N, K] (K contiguous, as the kernel reads them)."""
    x = opset.parameter([1, -1, k], np.float32, name="x")
    if kind == "rms":
        ms = opset.reduce_mean(opset.power(x, np.float32(2)), np.array([-1], np.int64), True)
        h = opset.multiply(x, opset.divide(np.float32(1),
                                           opset.sqrt(opset.add(ms, np.float32(1e-6)))))
    else:
        h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
    if kind != "mvn":
        h = opset.multiply(h, (1.0 + 0.2 * rng.standard_normal(k)).astype(np.float32))
    if kind == "layer":
        h = opset.add(h, (0.2 * rng.standard_normal(k)).astype(np.float32))
    y = opset.add(opset.matmul(h, randn_f32(rng, n, k), False, True), randn_f32(rng, n))
    return Model([opset.result(y, name="y")], [x])


@pytest.mark.parametrize("kind", ["layer", "mvn", "rms"])
@pytest.mark.parametrize("hint,tol", [("tf32", TOL), ("f32", TOL_3X)])
@pytest.mark.parametrize("slices", [1, 3])
def test_normalized_rows_run_ahead_of_the_kernel(tma_engine, monkeypatch, rng, kind, hint, tol,
                                                 slices):
    """A LayerNorm, MVN or RMSNorm ahead of the GEMM: a row kernel writes the normalized rows,
    the kernel (whole or in K slices and their reduction) reads them: rows whose mean is 20
    deviations off zero, row counts with tails, K = 44 (the last K step half past K), within
    the precision's tolerance of the reference. (Normalizing in the kernel instead, each
    tile's rows' statistics read first, cost GPT-2's TF32 prefill 0.9 ms: BENCHMARKS, issue
    18's twenty-fifth round.)"""
    monkeypatch.setattr(tma_gemm, "CONFIGS_3X", ((TmaConfig(64, 64, 2, 3), 1.0),))
    if slices > 1:
        monkeypatch.setattr(tma_gemm, "choose", lambda m, n, k, cus, split: TmaPlan(
            TmaConfig(64, 64, 2, split), slices, 16))
    k, n = 44, 72
    model = _normalized_matmul(rng, k, n, kind)
    req = compile_program(model, RUNTIME_DEVICE,
                          {"INFERENCE_PRECISION_HINT": hint}).create_infer_request()
    for m in (70, 16, 129):
        x = (20.0 + randn_f32(rng, 1, m, k)).astype(np.float32)
        got = req.infer({"x": x})["y"]
        want = netpass.reference.infer(model, {"x": x})["y"]
        assert _rel_l2(got, want) <= tol, (m, _rel_l2(got, want))
    kernels = [key[2] for key in req.network.kernel_objects]
    assert any("void gemm_tma(" in src for src in kernels)
    assert any("void normalize_rows(" in src for src in kernels)
