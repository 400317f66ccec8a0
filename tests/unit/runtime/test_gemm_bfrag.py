"""The tensor-core GEMM's "bfrag" main loop (netpass.runtime.kernels.mma_bfrag: B constant
weights in mma.sync fragment order, loaded from global memory into registers; A through the
local-memory ring) against numpy on PoCL with the PTX pieces emulated, and its selection
(``mma_plan.BFRAG``; None turns it off) for a FullyConnected whose weights the runtime stores in
that order. Tolerances as test_gemm_mma's: relative L2 against float64, TF32 <= 2e-3, 3xTF32
<= 2e-6."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from graph_blocks import check_fc_gelu_residual, randn_f32

from netpass.runtime.device import Engine, select_device
from netpass.runtime.kernels import mma, mma_bfrag, mma_plan
from netpass.testing import RUNTIME_DEVICE

pocl_only = pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="emulated tensor cores on PoCL")
TOL = {1: 2e-3, 3: 2e-6}
BF = mma.MmaConfig(128, 128, 64, 64, 16, 6, "bfrag")  # (BFRAG: its tile fields are replaced)


def _rel_l2(got, want) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def test_swizzle_puts_each_lanes_fragments_in_one_float4(rng):
    """Lane (g, t) of chunk p of panel c, step s holds the m16n8k8 B fragments (k slots t,
    t + 4 = k 2t, 2t + 1 of the step) of n8 tiles 2p and 2p + 1; zeros past K and N."""
    k, n, wn = 37, 40, 32
    b = randn_f32(rng, k, n)
    f = mma_bfrag.swizzle(b, wn)
    kp = mma_bfrag.padded_k(k)
    assert kp == 64 and f.shape == (mma_bfrag.swizzled_size(k, n, wn),) == (kp * 64,)
    pad = np.zeros((kp, 64), np.float32)
    pad[:k, :n] = b
    for c, s, p, g, t in [(0, 0, 0, 0, 0), (1, 3, 1, 5, 2), (0, 7, 1, 7, 3), (1, 4, 0, 2, 1)]:
        at = ((c * (kp // 8) + s) * (wn // 16) + p) * 128 + (4 * g + t) * 4
        n0, k0 = c * wn + 16 * p + g, 8 * s + 2 * t
        want = [pad[k0, n0], pad[k0 + 1, n0], pad[k0, n0 + 8], pad[k0 + 1, n0 + 8]]
        np.testing.assert_array_equal(f[at:at + 4], want)
    assert not f.reshape(2, kp // 8, -1)[:, k // 8 + 1:].any()  # (steps past K: zeros)


def _run(cfg, split, m, n, k, batch, rng, aoff=0, copy="cp_async"):
    """C = A @ B through the bfrag kernel on the CPU device with B swizzled; (C, float64)."""
    eng = Engine.get(select_device("CPU"))
    cl = eng.cl
    a = randn_f32(rng, batch, m, k)
    b = randn_f32(rng, batch, k, n)
    frags = mma_bfrag.swizzle(b, cfg.wn)
    src = mma.gemm_mma(cfg, True, split, False, copy, "rings", [], 0, [], 0)
    mf = cl.mem_flags
    abuf = cl.Buffer(eng.context, mf.COPY_HOST_PTR,
                     hostbuf=np.concatenate([np.zeros(aoff, np.float32), a.ravel()]))
    bbuf = cl.Buffer(eng.context, mf.COPY_HOST_PTR, hostbuf=frags)
    cbuf = cl.Buffer(eng.context, mf.READ_WRITE, batch * m * n * 4)
    kern = cl.Kernel(eng.build(src.text), src.name)
    ints = [aoff, 0, 0, m, n, k, batch, 0, m * k, k, 1, 0, frags.shape[-1], 0, 0]
    kern.set_args(abuf, bbuf, cbuf, np.array(ints, np.int32))
    cl.enqueue_nd_range_kernel(eng.queue, kern, *mma_plan.work_sizes(cfg, m, n, batch))
    c = np.full((batch, m, n), np.nan, np.float32)
    cl.enqueue_copy(eng.queue, c, cbuf)
    eng.queue.finish()
    return c, a.astype(np.float64) @ b.astype(np.float64)


C = mma.MmaConfig


@pocl_only
@pytest.mark.parametrize("cfg,split,shape,aoff,copy", [
    # BK 16, B one step ahead, A one step ahead: tails in M, N (a warp past the last panel), K
    (C(32, 32, 16, 32, 16, 2, "bfrag"), 1, (37, 45, 29, 1), 0, "cp_async"),
    # B two steps ahead (3 register sets over 2-step blocks: 6 steps a pass), a batch
    (C(32, 64, 16, 32, 16, 3, "bfrag", 2), 1, (37, 70, 29, 2), 0, "cp_async"),
    # BK 8 (one step a block), A read in its step, K past the last whole 32
    (C(64, 32, 32, 16, 8, 3, "bfrag", 2, False), 1, (65, 40, 100, 1), 0, "cp_async"),
    # BK 8 with A one step ahead (two blocks a pass), A one float into its buffer: plain ring
    (C(64, 32, 32, 16, 8, 4, "bfrag", 1), 1, (70, 33, 75, 1), 1, "cp_async"),
    # BK 32, B three steps ahead, A read by element loads
    (C(32, 32, 16, 16, 32, 2, "bfrag", 3, False), 1, (65, 70, 100, 1), 0, "plain"),
    # 3xTF32
    (C(32, 32, 16, 16, 16, 3, "bfrag"), 3, (40, 33, 75, 2), 0, "cp_async"),
])
def test_bfrag_loop_matches_numpy(cfg, split, shape, aoff, copy, rng):
    got, want = _run(cfg, split, *shape, rng, aoff, copy)
    assert not np.isnan(got).any()
    assert _rel_l2(got, want) <= TOL[split]


def test_bfrag_configs_checked():
    """K blocks past the layout's padding, odd n8 tiles and the inputs the loop cannot take
    are refused."""
    with pytest.raises(ValueError, match="bad mma tile"):
        C(32, 32, 16, 16, 64, 2, "bfrag").check()
    with pytest.raises(ValueError, match="bad mma tile"):
        C(32, 48, 16, 24, 16, 2, "bfrag").check()
    with pytest.raises(ValueError, match="bfrag loop"):
        mma.gemm_mma(C(32, 32, 16, 32, 16, 2, "bfrag"), True, 1, False, "cp_async", "rings",
                     [], 0, [], 0, None, "rn", False, "tail")
    assert C(128, 128, 64, 64, 16, 6, "bfrag").local_bytes() == 48 << 10


def _engine(mma_kind: str = "ptx"):
    dev = SimpleNamespace(local_mem_size=48 << 10, max_compute_units=132)
    return SimpleNamespace(mma=mma_kind, device=dev)


def test_bfrag_plan_is_taken_where_the_pipelined_loop_is_and_off_with_none(monkeypatch):
    """BFRAG None: the plans and a FullyConnected's weight layout are as before (pipe, [K, N]).
    With BFRAG (the default, or another): TF32 GEMMs the pipelined loop takes whose B is
    constant (``b_const``) take BFRAG's loop on the pipelined tile shape; other B, 3xTF32, K
    slices (the runtime's balanced ones too) and narrow tiles keep their loops."""
    eng = _engine()
    args = (4096, 4096, 4096, 1, [4096, 1], [4096, 1], [0], [0], None)
    assert mma_plan.BFRAG is not None and mma_plan.BFRAG.loop == "bfrag"
    monkeypatch.setattr(mma_plan, "BFRAG", None)
    monkeypatch.setattr(mma_plan, "_choices", {})
    assert mma_plan.plan(eng, "tf32", *args, True)[0].loop == "pipe"
    assert mma_plan.bfrag_width(eng, "tf32", 4096, 4096, 4096) == 0
    monkeypatch.setattr(mma_plan, "BFRAG", BF)
    monkeypatch.setattr(mma_plan, "_choices", {})
    cfg = mma_plan.plan(eng, "tf32", *args, True)[0]
    assert cfg == C(128, 128, 64, 64, 16, 6, "bfrag")
    assert mma_plan.plan(eng, "tf32", *args)[0].loop == "pipe"
    assert mma_plan.plan(eng, "f32", *args, True)[0].loop == "slab"
    assert mma_plan.bfrag_width(eng, "tf32", 4096, 4096, 4096) == 64
    assert mma_plan.bfrag_width(eng, "f32", 4096, 4096, 4096) == 0
    assert mma_plan.bfrag_width(eng, "tf32", 4096, 768, 3072) == 0  # (K slices: slab)
    assert mma_plan.bfrag_width(eng, "tf32", 1024, 2304, 768) == 0  # (narrow tiles)
    assert mma_plan.bfrag_width(eng, "tf32", 4096, 3072, 768) == 64


@pytest.fixture
def emulated_bfrag(monkeypatch):
    """The CPU engine with emulated tensor cores, small tiles on the pipelined warp shape and
    BFRAG on."""
    eng = Engine.get(select_device("CPU"))
    monkeypatch.setattr(eng, "mma", "emulated")
    monkeypatch.setattr(mma_plan, "CONFIGS", (C(32, 64, 16, 32, 16, 3), C(32, 32, 16, 16, 16, 2)))
    monkeypatch.setattr(mma_plan, "NARROW", None)
    monkeypatch.setattr(mma_plan, "PIPE_WARP", (16, 32))
    monkeypatch.setattr(mma_plan, "BFRAG", C(0, 0, 0, 0, 16, 4, "bfrag", 2))
    monkeypatch.setattr(mma_plan, "_choices", {})
    monkeypatch.setattr(mma_plan, "MIN_M", 16)
    monkeypatch.setattr(mma_plan, "SHORT_K", 0)
    return eng


@pocl_only
def test_fully_connected_reads_its_weights_in_fragment_order(emulated_bfrag, rng):
    """A TF32 FullyConnected with bias, GELU and a residual add over growing row counts: 70
    and 99 rows take the large tiles on the bfrag loop (the weights stored once in fragment
    order), 17 rows the small ones on [K, N] weights; both layouts kept side by side."""
    req = check_fc_gelu_residual(RUNTIME_DEVICE, rng, TOL[1] * 2)
    sources = [key[2] for key in req.network.kernel_objects if "gemm_mma(" in key[2]]
    assert any("bq_" in s for s in sources) and any("bq_" not in s for s in sources)
    assert req.network.stats["weight_reorders"] == 2
