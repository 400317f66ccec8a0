"""The tensor-core GEMM (netpass.runtime.kernels.mma) against numpy on random data, on PoCL
with the PTX pieces emulated (mma.sync through local memory with operands rounded to TF32,
cp.async as plain 16-byte copies): tile shapes with several fragments per warp, K blocks of
16 and 32, stage rings of 2..4, odd M, N, K (tails in every dim), batches, B read along n or
along k, misaligned operands (the plain-copy ring), fused epilogues, a folded LayerNorm, and
the runtime's INFERENCE_PRECISION_HINT.

Tolerances, relative L2 against float64 products of standard normal data: TF32 (split 1)
<= 2e-3 (measured 3e-4 for K <= 4096: 10 mantissa bits, round to nearest); 3xTF32
(split 3, what float32 GEMMs use on tensor cores) <= 2e-6 (measured 1.6e-7, float32
rounding level)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from graph_blocks import randn_f32

import netpass
from netpass import Model, opset
from netpass.errors import NetpassError
from netpass.runtime import compile_program
from netpass.runtime.device import Engine, select_device
from netpass.runtime.kernels import mma, mma_parts, mma_plan
from netpass.runtime.kernels.common import UNOPTIMIZED
from netpass.testing import RUNTIME_DEVICE

pocl_only = pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="emulated tensor cores on PoCL")
TOL = {1: 2e-3, 3: 2e-6}
SMALL = mma.MmaConfig(32, 32, 16, 16, 16, 2)


def _rel_l2(got, want) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def _run_kernel(cfg, split, b_kmajor, copy, m, n, k, batch, rng, aoff=0):
    """C = A @ B through the generated kernel on the CPU device; (C, float64 reference)."""
    eng = Engine.get(select_device("CPU"))
    cl = eng.cl
    a = randn_f32(rng, batch, m, k)
    b = randn_f32(rng, batch, k, n) if b_kmajor else randn_f32(rng, batch, n, k)
    src = mma.gemm_mma(cfg, b_kmajor, split, False, copy, "rings", [], 0, [], 0)
    prg = eng.build(src.text)
    mf = cl.mem_flags
    abuf = cl.Buffer(eng.context, mf.COPY_HOST_PTR, hostbuf=np.concatenate([np.zeros(aoff, np.float32), a.ravel()]))
    bbuf = cl.Buffer(eng.context, mf.COPY_HOST_PTR, hostbuf=b)
    cbuf = cl.Buffer(eng.context, mf.READ_WRITE, batch * m * n * 4)
    sbk, sbn = (n, 1) if b_kmajor else (1, k)
    kern = cl.Kernel(prg, src.name)
    kern.set_args(abuf, bbuf, cbuf, np.array([aoff, 0, 0, m, n, k, batch, 0, m * k, k, 1, 0, k * n, sbk, sbn],
                                             np.int32))
    gws, lws = mma_plan.work_sizes(cfg, m, n, batch)
    cl.enqueue_nd_range_kernel(eng.queue, kern, gws, lws)
    c = np.full((batch, m, n), np.nan, np.float32)
    cl.enqueue_copy(eng.queue, c, cbuf)
    eng.queue.finish()
    bb = b if b_kmajor else b.transpose(0, 2, 1)
    return c, a.astype(np.float64) @ bb.astype(np.float64)


@pocl_only
@pytest.mark.parametrize("cfg,split,b_kmajor,copy,shape", [
    (SMALL, 1, True, "cp_async", (37, 45, 29, 1)),
    (SMALL, 3, True, "plain", (37, 45, 29, 2)),
    (SMALL, 3, False, "cp_async", (33, 64, 48, 1)),
    (mma.MmaConfig(64, 64, 32, 32, 32, 3), 1, False, "plain", (70, 67, 83, 1)),
    (mma.MmaConfig(64, 64, 32, 32, 32, 3), 3, True, "cp_async", (65, 70, 100, 2)),
    (mma.MmaConfig(64, 32, 32, 16, 16, 4), 3, True, "cp_async", (64, 96, 80, 1)),
    (mma.MmaConfig(128, 96, 64, 48, 16, 3), 3, True, "cp_async", (130, 100, 40, 1)),  # NARROW
    (mma.MmaConfig(128, 96, 64, 48, 16, 3), 1, False, "plain", (129, 97, 33, 2)),
])
def test_kernel_matches_numpy(cfg, split, b_kmajor, copy, shape, rng):
    got, want = _run_kernel(cfg, split, b_kmajor, copy, *shape, rng)
    assert not np.isnan(got).any()
    assert _rel_l2(got, want) <= TOL[split]


@pocl_only
@pytest.mark.parametrize("cfg,split,b_kmajor,copy,shape", [
    (mma.MmaConfig(32, 32, 16, 32, 16, 2, "pipe"), 1, True, "cp_async", (37, 45, 29, 1)),
    (mma.MmaConfig(32, 64, 32, 32, 8, 3, "pipe"), 3, True, "plain", (65, 70, 100, 2)),
    (mma.MmaConfig(32, 64, 16, 32, 16, 3, "pipe"), 3, False, "cp_async", (33, 64, 48, 1)),
])
def test_pipelined_loop_matches_numpy(cfg, split, b_kmajor, copy, shape, rng):
    """The pipelined main loop (kernels.mma_pipe): two steps per K block, one (BK 8: two
    blocks per loop pass, so the register sets alternate), B along n and along k, tails."""
    got, want = _run_kernel(cfg, split, b_kmajor, copy, *shape, rng)
    assert not np.isnan(got).any()
    assert _rel_l2(got, want) <= TOL[split]


@pocl_only
def test_pipelined_loop_misaligned_a(rng):
    cfg = mma.MmaConfig(32, 32, 16, 32, 16, 2, "pipe")
    got, want = _run_kernel(cfg, 3, True, "cp_async", 40, 32, 36, 1, rng, aoff=1)
    assert _rel_l2(got, want) <= TOL[3]


def test_tf32_takes_the_pipelined_loop_on_large_warp_tiles():
    """TF32 GEMMs on 64x64 warp tiles run the pipelined loop; 3xTF32, smaller warp tiles, a
    normalized A, K slices and element-wise fills keep the slab loop."""
    dev = SimpleNamespace(local_mem_size=48 << 10, max_compute_units=132)
    eng = SimpleNamespace(mma="ptx", device=dev)
    args = (4096, 4096, 4096, 1, [4096, 1], [4096, 1], [0], [0])
    assert mma_plan.plan(eng, "tf32", *args, None)[0].loop == "pipe"
    assert mma_plan.plan(eng, "f32", *args, None)[0].loop == "slab"
    assert mma_plan.plan(eng, "tf32", *args, (0, 1e-5, 1, False, False))[0].loop == "slab"
    small = mma_plan.plan(eng, "tf32", 1024, 768, 768, 1, [768, 1], [768, 1], [0], [0], None)
    assert (small[0].wm, small[0].loop) == (32, "slab")
    sliced = mma_plan.plan(eng, "tf32", 4096, 768, 3072, 1, [3072, 1], [768, 1], [0], [0], None)
    assert (sliced[0].wm, sliced[0].loop) == (64, "slab")
    odd = mma_plan.plan(eng, "tf32", 4096, 50257, 768, 1, [768, 1], [50257, 1], [0], [0], None)
    assert (odd[0].wm, odd[4], odd[0].loop) == (64, "plain", "slab")


@pocl_only
def test_pipelined_loop_with_an_epilogue(emulated, monkeypatch, rng):
    """The runtime's TF32 MatMul on the pipelined loop, its bias + GELU + residual epilogue
    passed through the stages."""
    monkeypatch.setattr(mma_plan, "CONFIGS", (mma.MmaConfig(32, 64, 16, 32, 16, 3),))
    monkeypatch.setattr(mma_plan, "PIPE_WARP", (16, 32))
    x = opset.parameter([1, -1, 48], np.float32, name="x")
    r = opset.parameter([1, -1, 40], np.float32, name="r")
    w, bias = randn_f32(rng, 48, 40), randn_f32(rng, 40)
    y = opset.add(opset.gelu(opset.add(opset.matmul(x, w, False, False), bias), "tanh"), r)
    model = Model([opset.result(y, name="y")], [x, r])
    req = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": "tf32"}).create_infer_request()
    feeds = {"x": randn_f32(rng, 1, 37, 48), "r": randn_f32(rng, 1, 37, 40)}
    got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
    assert _rel_l2(got, want) <= TOL[1] * 2
    assert any("gemm_mma(" in key[2] and "fa0" in key[2] for key in req.network.kernel_objects)


@pocl_only
def test_misaligned_a_takes_the_plain_ring(rng):
    """A starting one float into its buffer: the cp.async ring would fault, the plain one runs."""
    got, want = _run_kernel(SMALL, 3, True, "cp_async", 40, 32, 36, 1, rng, aoff=1)
    assert _rel_l2(got, want) <= TOL[3]


@pocl_only
def test_tf32_rounds_operands_and_3xtf32_does_not(rng):
    """The emulation rounds to TF32 as the hardware does: TF32's error is that of 10-bit
    mantissas, 3xTF32's that of float32."""
    got1, want = _run_kernel(SMALL, 1, True, "cp_async", 32, 32, 256, 1, np.random.default_rng(5))
    got3, _ = _run_kernel(SMALL, 3, True, "cp_async", 32, 32, 256, 1, np.random.default_rng(5))
    assert 5e-5 < _rel_l2(got1, want) <= TOL[1]
    assert _rel_l2(got3, want) <= TOL[3]


@pytest.fixture
def emulated(monkeypatch):
    """The CPU engine with emulated tensor cores and small tiles (PoCL compiles quickly)."""
    eng = Engine.get(select_device("CPU"))
    monkeypatch.setattr(eng, "mma", "emulated")
    monkeypatch.setattr(mma_plan, "CONFIGS", (mma.MmaConfig(64, 32, 32, 16, 16, 3), SMALL))
    monkeypatch.setattr(mma_plan, "NARROW", None)
    monkeypatch.setattr(mma_plan, "_choices", {})
    monkeypatch.setattr(mma_plan, "MIN_M", 16)
    return eng


def _ran_mma(req) -> bool:
    return any("gemm_mma(" in key[2] for key in req.network.kernel_objects)


@pocl_only
@pytest.mark.parametrize("precision", ["tf32", "f32"])
def test_matmul_bias_gelu_residual(precision, emulated, rng):
    """A MatMul with a fused bias, tanh-GELU and residual add, over growing sequences (130
    rows take the 64 x 32 tiles, whose epilogue runs from local memory)."""
    x = opset.parameter([1, -1, 48], np.float32, name="x")
    r = opset.parameter([1, -1, 40], np.float32, name="r")
    w, bias = randn_f32(rng, 48, 40), randn_f32(rng, 40)
    y = opset.add(opset.gelu(opset.add(opset.matmul(x, w, False, False), bias), "tanh"), r)
    model = Model([opset.result(y, name="y")], [x, r])
    req = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": precision}).create_infer_request()
    for s in (17, 50, 33, 130):
        feeds = {"x": randn_f32(rng, 1, s, 48), "r": randn_f32(rng, 1, s, 40)}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert _rel_l2(got, want) <= TOL[1 if precision == "tf32" else 3] * 2
    assert _ran_mma(req)


@pocl_only
@pytest.mark.parametrize("precision", ["tf32", "f32"])
def test_side_inputs_loaded_ahead_of_the_stores(precision, emulated, monkeypatch, rng):
    """Where the epilogue's slices fit in the stages and the side inputs' strides are over
    (batch, m, n), each lane loads its next side-input elements before storing them
    (``mma.slice_stores``): a batched product with a bias and a per-batch residual, tails
    in M and N, equal to the reference."""
    monkeypatch.setattr(mma_plan, "CONFIGS", (mma.MmaConfig(64, 32, 32, 16, 16, 3),))
    x = opset.parameter([2, -1, 48], np.float32, name="x")
    r = opset.parameter([2, -1, 40], np.float32, name="r")
    w, bias = randn_f32(rng, 2, 48, 40), randn_f32(rng, 40)
    y = opset.add(opset.relu(opset.add(opset.matmul(x, w, False, False), bias)), r)
    model = Model([opset.result(y, name="y")], [x, r])
    req = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": precision}
                          ).create_infer_request()
    for s in (37, 70):
        feeds = {"x": randn_f32(rng, 2, s, 48), "r": randn_f32(rng, 2, s, 40)}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert _rel_l2(got, want) <= TOL[1 if precision == "tf32" else 3] * 2
    assert any("gemm_mma(" in key[2] and "pv1_[" in key[2] for key in req.network.kernel_objects)


@pocl_only
def test_fully_connected_and_transposed_batched_matmul(emulated, rng):
    """FullyConnected (reordered weights, bias) and a batched MatMul with transposed B (B
    read along k) and a broadcast batch, on TF32."""
    x = opset.parameter([-1, 40], np.float32, name="x")
    w, bias = randn_f32(rng, 24, 40), randn_f32(rng, 24)
    fc = Model([opset.result(opset.relu(opset.fully_connected(x, w, bias)), name="y")], [x])
    req = compile_program(fc, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": "tf32"}).create_infer_request()
    xv = randn_f32(rng, 45, 40)
    want = np.maximum(xv.astype(np.float64) @ w.T.astype(np.float64) + bias, 0.0)
    assert _rel_l2(req.infer({"x": xv})["y"], want) <= TOL[1]
    assert _ran_mma(req)

    a = opset.parameter([-1, -1, -1, 20], np.float32, name="a")
    b = opset.parameter([-1, -1, 20], np.float32, name="b")
    mm = Model([opset.result(opset.matmul(a, b, False, True), name="y")], [a, b])
    req = compile_program(mm, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": "tf32"}).create_infer_request()
    av, bv = randn_f32(rng, 2, 3, 33, 20), randn_f32(rng, 3, 19, 20)
    want = av.astype(np.float64) @ np.swapaxes(bv, -1, -2).astype(np.float64)
    assert _rel_l2(req.infer({"a": av, "b": bv})["y"], want) <= TOL[1]
    assert _ran_mma(req)


@pocl_only
@pytest.mark.parametrize("precision", ["tf32", "f32"])
@pytest.mark.parametrize("norm", [False, True])
def test_fully_connected_of_unaligned_width_reads_its_weights_as_given(precision, norm,
                                                                       emulated, rng):
    """A FullyConnected whose N is not a multiple of 4 (an LM head's 50257) runs on the
    tensor cores over its weights as given, [N, K] (16-byte fills), not reordered to [K, N]
    (rows 4 * 23 bytes apart: element fills), with or without a LayerNorm in front (then a
    row kernel, not folded into reordered weights); equal to the reference within the
    precision's tolerance."""
    x = opset.parameter([-1, 40], np.float32, name="x")
    h = x
    if norm:
        h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
        h = opset.add(opset.multiply(h, (1 + 0.2 * randn_f32(rng, 40)).astype(np.float32)),
                      0.2 * randn_f32(rng, 40))
    w, bias = randn_f32(rng, 23, 40), randn_f32(rng, 23)
    fc = Model([opset.result(opset.fully_connected(h, w, bias), name="y")], [x])
    req = compile_program(fc, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": precision}
                          ).create_infer_request()
    xv = (3 + randn_f32(rng, 45, 40)).astype(np.float32)
    want = netpass.reference.infer(fc, {"x": xv})["y"]
    assert _rel_l2(req.infer({"x": xv})["y"], want) <= TOL[1 if precision == "tf32" else 3] * 2
    assert _ran_mma(req)
    assert req.stats["weight_reorders"] == 0
    assert any(inst.impl.weights_as_given for inst in req.network.insts
               if inst.impl is not None
               and any(ln.source.name == "gemm_mma" for ln in inst.impl.launches))


@pocl_only
@pytest.mark.parametrize("batch", [1, 2])
def test_folded_layernorm(batch, emulated, rng):
    """A LayerNorm folded into the GEMM (norm_gemm): one batch of contiguous rows is
    normalized into a scratch copy by a row kernel ahead of the GEMM; a batched product (B
    per batch: rows of a shared B would run as one batch) has A's fragments normalized as
    they are read."""
    k = 64
    x = opset.parameter([batch, -1, k], np.float32, name="x")
    h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
    h = opset.add(opset.multiply(h, (1 + 0.2 * randn_f32(rng, k)).astype(np.float32)), 0.2 * randn_f32(rng, k))
    model = Model([opset.result(opset.matmul(h, randn_f32(rng, batch, k, 40), False, False), name="y")], [x])
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    feeds = {"x": (30 + randn_f32(rng, batch, 37, k)).astype(np.float32)}
    assert _rel_l2(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 2e-5
    assert _ran_mma(req)
    assert any("void normalize_rows(" in key[2] for key in req.network.kernel_objects) == (batch == 1)


@pocl_only
def test_shared_weights_run_the_batch_as_rows(emulated, rng):
    """A [3, s, K] activation times a shared [K, N] weight with a fused bias and residual runs
    as one GEMM of 3 s rows (one launch over one batch), equal to the reference."""
    x = opset.parameter([3, -1, 48], np.float32, name="x")
    r = opset.parameter([3, -1, 72], np.float32, name="r")
    y = opset.add(opset.add(opset.matmul(x, randn_f32(rng, 48, 72), False, False), randn_f32(rng, 72)), r)
    model = Model([opset.result(y, name="y")], [x, r])
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in (37, 22):
        feeds = {"x": randn_f32(rng, 3, s, 48), "r": randn_f32(rng, 3, s, 72)}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert _rel_l2(got, want) <= 4e-6
    gemms = [ln for inst in req.network.insts if inst.impl is not None
             for ln in inst.impl.launches if ln.source.name == "gemm_mma"]
    assert len(gemms) == 1 and gemms[0].gws[2] == 1


def test_precision_hint_is_checked():
    x = opset.parameter([2, 3], np.float32, name="x")
    model = Model([opset.result(opset.relu(x), name="y")], [x])
    with pytest.raises(NetpassError, match="INFERENCE_PRECISION_HINT"):
        compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": "bf17"})


def test_selection_by_shape_class():
    """Large problems take the largest tiles, problems with few tiles smaller ones (every
    compute unit gets a work-group); the choice is cached per shape class; a folded
    LayerNorm's extra local memory costs a stage where the limit is reached."""
    big = mma_plan.choose_config(4096, 4096, 4096, 1, 132, 48 << 10, False)
    assert (big.bm, big.bn) == (128, 128)
    small = mma_plan.choose_config(1024, 768, 768, 1, 132, 48 << 10, False)
    assert small.bm * small.bn < big.bm * big.bn
    assert mma_plan.choose_config(1030, 760, 770, 1, 132, 48 << 10, False) is small
    assert mma_plan.choose_config(64, 3136, 576, 8, 132, 48 << 10, False).bm == 64  # no half-empty tiles
    normed = mma_plan.choose_config(4096, 4096, 4096, 1, 132, 48 << 10, True)
    assert normed.local_bytes() + 8 * (normed.bm + normed.threads) <= 48 << 10


def test_narrow_tiles_where_the_large_ones_leave_a_part_filled_round():
    """For the MatMul kernels (``narrow``), 128x96 tiles replace 128x128 ones whose last
    round over the compute units is part-filled (a 1024-token prompt's MLP: 192 tiles on 132
    units, against 256 of 3/4 the work), and replace the small tiles where they are the first
    to give the units WAVES work-groups each (its QKV); a full last round keeps 128x128."""
    def tile(M, N, K, narrow=True):
        c = mma_plan.choose_config(M, N, K, 1, 132, 48 << 10, False, narrow)
        return c.bm, c.bn
    assert tile(1024, 3072, 768) == (128, 96)
    assert tile(1024, 3072, 768, narrow=False) == (128, 128)
    assert tile(1024, 2304, 768) == (128, 96)
    assert tile(1024, 2304, 768, narrow=False) == (64, 64)
    assert tile(4096, 3072, 768) == (128, 128)
    assert tile(1576, 2304, 768) == (128, 128)
    assert tile(1024, 768, 768) == (64, 64)


@pocl_only
@pytest.mark.parametrize("precision", ["tf32", "f32"])
def test_narrow_tiles_with_a_folded_layernorm_and_gelu(precision, emulated, monkeypatch, rng):
    """A FullyConnected with its LayerNorm folded into the weights (3xTF32) or a row kernel
    ahead (TF32), bias and tanh-GELU fused, on 128x96 tiles: rows and columns in tails."""
    monkeypatch.setattr(mma_plan, "CONFIGS", (mma.MmaConfig(128, 96, 64, 48, 16, 3),))
    k = 64
    x = opset.parameter([1, -1, k], np.float32, name="x")
    h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
    h = opset.add(opset.multiply(h, (1 + 0.2 * randn_f32(rng, k)).astype(np.float32)), 0.2 * randn_f32(rng, k))
    y = opset.gelu(opset.add(opset.matmul(h, randn_f32(rng, k, 100), False, False), randn_f32(rng, 100)), "tanh")
    model = Model([opset.result(y, name="y")], [x])
    req = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": precision}
                          ).create_infer_request()
    feeds = {"x": (3 + randn_f32(rng, 1, 133, k)).astype(np.float32)}
    got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
    assert _rel_l2(got, want) <= TOL[1 if precision == "tf32" else 3] * 4
    assert any("#define BN 96" in key[2] for key in req.network.kernel_objects)


@pytest.mark.parametrize("mnkb,tile,sliced", [
    ((256, 3136, 64, 8), 64, False),     # short K: small tiles though large ones fill the units
    ((128, 784, 1152, 8), 128, True),    # 3x3 convolution at 28x28: large tiles in K slices
    ((1576, 768, 3072, 1), 128, True),   # an MLP's down-projection
    ((128, 768, 3072, 1), 64, True),     # a short prompt's: 6 large tiles in slices are too few
    ((512, 49, 4608, 8), 64, True),      # 7x7 pixels: large tiles would be mostly empty
    ((1024, 768, 768, 1), 64, False),    # K short of LONG_SPLIT_K
])
def test_tiles_and_k_slices_by_shape(mnkb, tile, sliced):
    """Where the large tiles leave compute units idle, a long K takes them in K slices unless
    they fill the output much worse than the small ones; a short K takes the small tiles."""
    M, N, K, nb = mnkb
    cfg = mma_plan.choose_config(M, N, K, nb, 132, 228 << 10, False)
    assert cfg.bm == tile
    assert (mma_plan.k_splits(cfg, M, N, K, nb, 132)[0] > 1) == sliced


@pytest.fixture
def split_k(emulated, monkeypatch):
    """Emulated tensor cores that split every K of 32 or more (PoCL has few compute units)."""
    monkeypatch.setattr(mma_plan, "SPLITK_WAVES", 64.0)
    monkeypatch.setattr(mma_plan, "SPLITK_MIN_K", 16)
    monkeypatch.setattr(mma_plan, "SPLITK_TAIL_MIN_K", 16)
    monkeypatch.setattr(mma_plan, "SPLITK_LONG_K", 16)
    return emulated


def _ran_split_k(req, mode: str = "tail") -> bool:
    mark = "sk_count" if mode == "tail" else "void splitk_reduce("
    return any(mark in key[2] for key in req.network.kernel_objects)


@pocl_only
@pytest.mark.parametrize("mode", ["tail", "apart"])
@pytest.mark.parametrize("precision", ["tf32", "f32"])
def test_split_k_with_bias_gelu_residual(precision, mode, split_k, rng, monkeypatch):
    """K slices (odd K: the last slice short, a tail inside it) summed by the reduction, in
    the GEMM's launch or apart (mma_plan.TAIL_MAX_TILE), which applies the fused bias,
    tanh-GELU and residual; batch 2, growing rows."""
    monkeypatch.setattr(mma_plan, "TAIL_MAX_TILE", 1 << 20 if mode == "tail" else 0)
    x = opset.parameter([2, -1, 83], np.float32, name="x")
    r = opset.parameter([2, -1, 40], np.float32, name="r")
    w, bias = randn_f32(rng, 83, 40), randn_f32(rng, 40)
    y = opset.add(opset.gelu(opset.add(opset.matmul(x, w, False, False), bias), "tanh"), r)
    model = Model([opset.result(y, name="y")], [x, r])
    req = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": precision}).create_infer_request()
    for s in (17, 50, 17):
        feeds = {"x": randn_f32(rng, 2, s, 83), "r": randn_f32(rng, 2, s, 40)}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert _rel_l2(got, want) <= TOL[1 if precision == "tf32" else 3] * 2
    assert _ran_split_k(req, mode)
    assert mma_plan.k_splits(SMALL, 17, 40, 83, 2, 2)[0] > 1


@pocl_only
def test_split_k_slices_past_the_unrolled_loads(split_k, monkeypatch, rng):
    """The last slice of a tile sums every partial in slice order, also those past the loads
    it issues at once (UNROLLED_SLICES), with N a multiple of 4 (four columns an item) and
    not (one); a second request keeps its own tile counters."""
    monkeypatch.setattr(mma, "UNROLLED_SLICES", 2)
    x = opset.parameter([-1, 150], np.float32, name="x")
    ys = [opset.result(opset.matmul(x, randn_f32(rng, 150, n), False, False), name=f"y{n}")
          for n in (40, 37)]
    model = Model(ys, [x])
    cm = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": "f32"})
    reqs = [cm.create_infer_request(), cm.create_infer_request()]
    for s in (33, 9, 33):
        for req in reqs:
            feeds = {"x": randn_f32(rng, s, 150)}
            got, want = req.infer(feeds), netpass.reference.infer(model, feeds)
            for n in (40, 37):
                assert _rel_l2(got[f"y{n}"], want[f"y{n}"]) <= TOL[3] * 2
    assert _ran_split_k(reqs[0]) and mma_plan.k_splits(SMALL, 33, 40, 150, 1, 2)[0] > 2


@pocl_only
def test_split_k_fully_connected_with_folded_layernorm(split_k, rng):
    """compile_model's FullyConnected with its LayerNorm folded, in K slices: each slice
    normalizes with the statistics of the whole row."""
    k = 96
    x = opset.parameter([1, -1, k], np.float32, name="x")
    h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
    h = opset.add(opset.multiply(h, (1 + 0.2 * randn_f32(rng, k)).astype(np.float32)), 0.2 * randn_f32(rng, k))
    y = opset.add(opset.matmul(h, randn_f32(rng, k, 40), False, False), randn_f32(rng, 40))
    model = Model([opset.result(y, name="y")], [x])
    cm = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
    req = cm.create_infer_request()
    for s in (37, 20):
        feeds = {"x": (30 + randn_f32(rng, 1, s, k)).astype(np.float32)}
        assert _rel_l2(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 2e-5
    assert any("sk_count" in key[2] for key in req._runtime_request.network.kernel_objects)


@pocl_only
def test_two_slices_of_large_tiles_even_out_a_round(emulated, monkeypatch, rng):
    """128x96 tiles, one more than the compute units, 3xTF32: two K slices added in the
    GEMM's tail (``k_splits``'s ``balance``, ``split_k_mode`` "tail" for two), with the
    LayerNorm folded into the weights (a tile of as many rows as items: the rows' statistics
    from a row kernel ahead, ``mma_plan.norm_ahead``), bias and tanh-GELU fused."""
    monkeypatch.setattr(mma_plan, "CONFIGS", (mma.MmaConfig(128, 96, 64, 48, 16, 3),))
    monkeypatch.setattr(mma_plan, "SPLITK_MIN_K", 16)
    cus = int(emulated.device.max_compute_units)
    k, n = 512, 96 * (cus + 1) - 12  # (N a multiple of 4: the weights reordered, the norm folded)
    x = opset.parameter([1, -1, k], np.float32, name="x")
    h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
    h = opset.add(opset.multiply(h, (1 + 0.2 * randn_f32(rng, k)).astype(np.float32)), 0.2 * randn_f32(rng, k))
    y = opset.gelu(opset.add(opset.matmul(h, randn_f32(rng, k, n), False, False), randn_f32(rng, n)), "tanh")
    model = Model([opset.result(y, name="y")], [x])
    req = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE",
                                                        "INFERENCE_PRECISION_HINT": "f32"}
                                ).create_infer_request()
    for s in (100, 77):
        feeds = {"x": (3 + randn_f32(rng, 1, s, k)).astype(np.float32)}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert _rel_l2(got, want) <= TOL[3] * 4
    network = req._runtime_request.network
    assert any("#define BN 96" in key[2] and "sk_count" in key[2] for key in network.kernel_objects)
    assert any("void row_moments(" in key[2] for key in network.kernel_objects)


def test_k_splits_choice():
    """Slices only where the tiles leave compute units idle, each at least SPLITK_MIN_K long
    (SPLITK_TAIL_MIN_K for tiles reduced in their own launch) and a multiple of BK; none for
    short K or enough tiles."""
    cfg = mma.MmaConfig(64, 64, 32, 32, 16, 4)
    n, length = mma_plan.k_splits(cfg, 512, 768, 3072, 1, 132)
    assert n > 1 and length % 16 == 0 and length >= mma_plan.SPLITK_MIN_K and (n - 1) * length < 3072 <= n * length
    assert mma_plan.k_splits(cfg, 4096, 4096, 3072, 1, 132) == (1, 3072)
    assert mma_plan.k_splits(cfg, 1024, 768, 768, 1, 132) == (1, 768)  # short K, tiles enough
    # ... unless (MatMul kernels, ``balance``) they leave a part-filled round: 192 tiles on
    # 132 units in two slices (384 on 3 rounds, 1.5 tiles' work at most, not 2), large ones
    # too under 3xTF32's heavier loop (their two slices added in the tail)
    assert mma_plan.k_splits(cfg, 1024, 768, 768, 1, 132, True) == (2, 384)
    assert mma_plan.k_splits(cfg, 1280, 768, 768, 1, 132, True) == (1, 768)  # 240: nearly full
    assert mma_plan.k_splits(mma_plan.NARROW, 1024, 2304, 768, 1, 132, True, True) == (2, 384)
    assert mma_plan.k_splits(mma_plan.NARROW, 1024, 2304, 768, 1, 132, True) == (1, 768)  # TF32
    assert mma_plan.split_k_mode(mma_plan.NARROW, 2) == "tail"  # (one other partial to add)
    assert mma_plan.split_k_mode(mma_plan.NARROW, 8) == "apart"
    # short K, fewer tiles than units: tiles summed in their own launch split from 128
    assert mma_plan.k_splits(cfg, 128, 768, 768, 1, 132) == (4, 192)
    assert mma_plan.k_splits(cfg, 128, 768, 200, 1, 132) == (1, 200)
    # larger tiles (a reduction launch of their own) only below a quarter of the units
    big = mma.MmaConfig(128, 128, 64, 64, 16, 3)
    assert mma_plan.k_splits(big, 128, 768, 768, 1, 132) == (2, 384)
    assert mma_plan.k_splits(big, 256, 6144, 768, 1, 132) == (1, 768)


@pytest.mark.parametrize("count,step", [(1024, 512), (768, 384), (512, 512), (256, 256)])
def test_epilogue_loads_ahead_in_whole_rounds_of_the_slice(count, step):
    """A warp's slice of ``count`` elements loads its side inputs ahead in rounds that divide
    it (768 = 16 x 48: 12 a lane, not 16, which would reach past the slice)."""
    lines = mma.slice_stores("STORE", count, "r", "c", "v", [0], [np.float32], 2)
    assert f"for (int h_ = lane; h_ < {count}; h_ += {step})" in lines[0]
    assert mma.slice_stores("STORE", count, "r", "c", "v", None, [], 2)[0] == "  #pragma unroll 2"


@pytest.mark.parametrize("split,products", [(1, 6), (3, 18)])
def test_emulated_products_of_a_step_share_two_barriers(split, products):
    """A 2 x 3 grid of fragments: every operand stored to its own slot, one barrier, the
    products (three each with 3xTF32, small ones first) read from the slots, one barrier."""
    lines = mma_parts.mma_calls(2, 3, split)
    puts = [x for x in lines if x.startswith(("MMA_PUT_A", "MMA_PUT_B"))]
    froms = [x for x in lines if x.startswith("MMA_FROM")]
    assert [x for x in lines if x.startswith("MMA_SYNC")] == ["MMA_SYNC()"] * 2
    assert lines[len(puts)] == "MMA_SYNC()" and lines[-1] == "MMA_SYNC()"
    assert len(froms) == products
    a_slots, b_slots = mma_parts.mma_slots(2, 3, split)
    assert len(puts) == a_slots + b_slots == (5 if split == 1 else 10)
    # 3xTF32: c0_0 += a_l b_h, then a_h b_l, then a_h b_h (slots 2i + {0: h, 1: l})
    if split == 3:
        assert [f.rsplit(", ", 2)[1:] for f in froms[:3]] == [["1", "0);"], ["0", "1);"],
                                                              ["0", "0);"]]


@pocl_only
def test_only_the_emulated_kernels_build_unoptimized():
    """The emulated tensor-core GEMM carries the mark that builds it with -cl-opt-disable
    (PoCL's optimizer spent minutes on each); with PTX it does not, and neither does any
    other kernel."""
    emulated = mma.gemm_mma(SMALL, True, 1, False, "cp_async", "rings", [], 0, [], 0)
    real = mma.gemm_mma(SMALL, True, 1, True, "cp_async", "rings", [], 0, [], 0)
    assert UNOPTIMIZED in emulated.text and UNOPTIMIZED not in real.text
    eng = Engine.get(select_device("CPU"))
    body = "__kernel void k(__global float* x) { x[get_global_id(0)] *= 2.0f; }"
    for marks, want in ((UNOPTIMIZED + "\n", True), ("", False)):
        prg = eng.build(marks + body + f"// {want}")
        device = eng.context.devices[0]
        options = prg.get_build_info(device, eng.cl.program_build_info.OPTIONS)
        assert ("-cl-opt-disable" in options) == want, options
