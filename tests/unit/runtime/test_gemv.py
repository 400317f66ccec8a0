"""The decode GEMV (kernels.decode_gemv.gemv): GEMMs of up to GEMV_ROWS rows over weights
[N, K] read as they are, against numpy and the reference evaluator on random data with odd
shapes: float4 and scalar runs of K (odd K, A read with a stride), 16, 32 and 64 items per
column, batch broadcast, the FullyConnected bias and fused epilogues with a residual, a
LayerNorm or RMSNorm folded in (norm_gemm: the rows staged in local memory, or their
statistics taken in the loop), which kernels have a phase form, and the selection (kinds.legacy.fully_connected_impl: no weights reorder for it). Tolerance: rtol
1e-4 plus atol 1e-4 * sqrt(K), the float32 summation-order noise of a K-long dot product."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32

import netpass
from netpass import Model, opset
from netpass.ops import FullyConnected
from netpass.runtime import compile_program
from netpass.runtime.impls import Params
from netpass.runtime.kernels import decode_gemv
from netpass.runtime.kernels.decode_gemv import GEMV_ROWS, gemv_width
from netpass.runtime.kinds import TABLE, legacy
from netpass.testing import RUNTIME_DEVICE


@pytest.fixture(params=["this device's", "a GPU's"])
def widths(request, monkeypatch) -> list[int]:
    """The GEMV as this device runs it, and as a GPU would (its items a column and loads in
    flight: kernels.decode_gemv.gemv_width, gemv_run), on this device: the GPU's widths
    chosen (none for this device's)."""
    chosen: list[int] = []
    if request.param == "a GPU's":
        choose = decode_gemv.gemv_width

        def gpu_width(m, k, sbk, n, gpu=False, normalized=False):
            width = choose(m, k, sbk, n, True, normalized)
            chosen.append(width)
            return width
        monkeypatch.setattr(decode_gemv, "gemv_width", gpu_width)
        monkeypatch.setattr(decode_gemv, "GEMV_RUN_CPU", decode_gemv.GEMV_RUN)
    return chosen


def _ran_gemv(req, gpu_widths: list[int] | None = None) -> bool:
    """Whether ``req`` ran a GEMV (at the last of the GPU widths chosen, where given)."""
    net = req.network if hasattr(req, "network") else req._runtime_request.network
    tpr = f"#define TPR {gpu_widths[-1]}\n" if gpu_widths else ""
    return any(" gemv(" in key[2] and tpr in key[2] for key in net.kernel_objects)


def _fc_model(rng, k: int, n: int, residual: bool):
    x = opset.parameter([-1, -1, k], np.float32, name="x")
    w, bias = randn_f32(rng, n, k), randn_f32(rng, n)
    y = opset.relu(opset.fully_connected(x, w, bias))
    params = [x]
    if residual:
        r = opset.parameter([-1, -1, n], np.float32, name="r")
        params.append(r)
        y = opset.add(y, r)
    return Model([opset.result(y, name="y")], params), w, bias


@pytest.mark.parametrize("k, n", [(7, 5), (64, 37), (256, 77), (768, 1001), (1030, 33),
                                  (96, 16389), (3072, 40), (4100, 19), (6400, 9)])
def test_fully_connected_rows_match_numpy(rng, k, n, widths):
    """Odd K runs the scalar loop, K % 4 == 0 the float4 one; 16 or 64 items a column by K (16,
    32 or 64 on a GPU); runs of GEMV_RUN loads an item: part of one (K = 768), one (3072 on a
    GPU), several and a tail (4100, 6400); a tail of columns (16389)."""
    model, w, bias = _fc_model(rng, k, n, residual=True)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for rows in (1, 3, GEMV_ROWS):
        x, r = randn_f32(rng, 1, rows, k), randn_f32(rng, 1, rows, n)
        got = req.infer({"x": x, "r": r})["y"]
        want = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + bias, 0.0) + r
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    assert _ran_gemv(req, widths)
    assert req.stats["weight_reorders"] == 0 and req.stats["fused"] == 2 * 3


def test_more_rows_reorder_the_weights_for_the_other_kernels(rng):
    model, w, bias = _fc_model(rng, 64, 40, residual=False)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for rows in (1, GEMV_ROWS + 1, 1):
        x = randn_f32(rng, 1, rows, 64)
        want = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + bias, 0.0)
        np.testing.assert_allclose(req.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-3)
    assert _ran_gemv(req) and req.stats["weight_reorders"] == 1


def test_matmul_by_a_transposed_b_with_batch_broadcast(rng):
    a = opset.parameter([-1, -1, -1, -1], np.float32, name="a")
    b = opset.parameter([-1, -1, -1], np.float32, name="b")
    model = Model([opset.result(opset.matmul(a, b, False, True), name="y")], [a, b])
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for ashape, bshape in [((2, 3, 1, 33), (3, 37, 33)), ((1, 2, 5, 128), (2, 9, 128))]:
        av, bv = randn_f32(rng, *ashape), randn_f32(rng, *bshape)
        want = np.matmul(av.astype(np.float64), np.swapaxes(bv, -1, -2).astype(np.float64))
        np.testing.assert_allclose(req.infer({"a": av, "b": bv})["y"], want, rtol=1e-4,
                                   atol=1e-4 * np.sqrt(ashape[-1]))
    assert _ran_gemv(req)


@pytest.mark.parametrize("k", [52, 1100, 4000, 30])
def test_layernorm_folded_into_the_gemv(rng, k, widths):
    """compile_model's legacy stage: MVN * gamma + beta -> FullyConnected, rows with a large
    mean (the shifted sums): K = 52, 1100 and 30 (the scalar loop) with the rows staged in local
    memory, 4000 staged for one row and with the statistics in the loop for 2 and 5 (past
    GEMV_STAGED_BYTES; a second run of weight loads)."""
    n = 29
    x = opset.parameter([1, -1, k], np.float32, name="x")
    h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
    h = opset.add(opset.multiply(h, (1.0 + 0.2 * randn_f32(rng, k)).astype(np.float32)),
                  (0.2 * randn_f32(rng, k)).astype(np.float32))
    y = opset.add(opset.matmul(h, randn_f32(rng, k, n), False, False), randn_f32(rng, n))
    model = Model([opset.result(y, name="y")], [x])
    cm = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
    req = cm.create_infer_request()
    for rows in (1, 2, 5):
        feeds = {"x": (30.0 + randn_f32(rng, 1, rows, k)).astype(np.float32)}
        np.testing.assert_allclose(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"],
                                   rtol=2e-4, atol=2e-4)
    assert _ran_gemv(req, widths) and not any(n.kind == "MVN" for n in cm.runtime.program.nodes)


def test_selection_limits():
    f32 = np.dtype(np.float32)
    p = Params(row=TABLE[FullyConnected], attrs={"_weights_reordered": True},
               in_shapes=[(1, 5, 256), (768, 256), (768,)], in_dtypes=[f32] * 3,
               out_shapes=[(1, 5, 768)], out_dtypes=[f32], values={}, fused=[],
               extra_shapes=[], extra_dtypes=[], engine=None)
    impl = legacy.fully_connected_impl(p, None)
    assert impl.launches[0].source.name == "gemv" and impl.weights_as_given
    assert gemv_width(1, 768, 1, 3072, True) == 64 and gemv_width(1, 3072, 1, 768, True) == 64
    assert gemv_width(1, 256, 1, 64, True) == 32 and gemv_width(1, 96, 1, 64, True) == 16
    assert gemv_width(1, 768, 1, 50257, True, True) == 16  # (a normalized A: norm_gemm)
    assert gemv_width(1, 768, 1, 3072) == 16 and gemv_width(1, 3072, 1, 768) == 64
    assert gemv_width(1, 1024, 1, 64) == 16 and gemv_width(1, 1030, 1, 64) == 64
    assert gemv_width(GEMV_ROWS + 1, 64, 1, 64) is None      # more rows
    assert gemv_width(1, 64, 64, 64) is None                  # B read along n (reordered)
    # loads in flight: an item's part of a column, at most GEMV_RUN (GEMV_RUN_CPU on a CPU)
    runs = [(768, 64), (3072, 64), (768, 16), (7, 16)]
    assert [decode_gemv.gemv_run(k, t, True) for k, t in runs] == [3, 12, 12, 1]
    assert decode_gemv.gemv_run(768, 16, False) == decode_gemv.GEMV_RUN_CPU == 4
    # normalized rows staged in local memory where they fit GEMV_STAGED_BYTES
    assert decode_gemv.gemv_staged(1, 768) == 768 and decode_gemv.gemv_staged(1, 30) == 32
    assert decode_gemv.gemv_staged(1, 6144) == 6144 and decode_gemv.gemv_staged(1, 6148) == 0
    assert decode_gemv.gemv_staged(8, 768) == 768 and decode_gemv.gemv_staged(8, 772) == 0


def test_a_read_with_a_stride(rng):
    """A transposed (read along k with a stride): the scalar loads."""
    a = opset.parameter([-1, -1], np.float32, name="a")
    b = opset.parameter([-1, -1], np.float32, name="b")
    model = Model([opset.result(opset.matmul(a, b, True, True), name="y")], [a, b])
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    at, bt = randn_f32(rng, 64, 3), randn_f32(rng, 29, 64)
    want = at.T.astype(np.float64) @ bt.T.astype(np.float64)
    np.testing.assert_allclose(req.infer({"a": at, "b": bt})["y"], want, rtol=1e-4, atol=1e-3)
    assert _ran_gemv(req)


# norm_gemm's parameters: (eps, eps inside the root, divide by the deviation, gamma, beta, RMS)
NORMS = {"layernorm": (1e-5, True, True, True, True, False),
         "eps outside, no beta": (1e-3, False, True, True, False, False),
         "mean only, no gamma": (1e-5, True, False, False, True, False),
         "rmsnorm": (1e-6, True, True, True, False, True)}


def _normalized(x: np.ndarray, g: np.ndarray, bt: np.ndarray, norm: tuple) -> np.ndarray:
    eps, inside, variance, gamma, beta, rms = norm
    x = x.astype(np.float64)
    if rms:
        y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    else:
        y = x - x.mean(-1, keepdims=True)
        if variance:
            var = y.var(-1, keepdims=True)
            y = y / (np.sqrt(var + eps) if inside else np.sqrt(var) + eps)
    return y * (g if gamma else 1.0) + (bt if beta else 0.0)


@pytest.mark.parametrize("staged", [True, False], ids=["rows staged", "statistics in the loop"])
@pytest.mark.parametrize("norm", list(NORMS), ids=list(NORMS))
@pytest.mark.parametrize("k, tpr, sak", [(768, 16, 1), (768, 64, 1), (4100, 64, 1), (30, 16, 1),
                                         (64, 16, 3)])
def test_the_kernel_normalizes_the_rows(rng, norm, k, tpr, sak, staged):
    """kernels.decode_gemv.gemv with ``norm``, both ways (the rows normalized into local memory
    ahead of the loop; the shifted sums and squares taken as the weights are read), for every
    norm_gemm variant, 1, 3 and GEMV_ROWS rows with a large mean and an outlier, float4 runs
    (one run, several with a tail) and the scalar loop (odd K; A read with a stride along k);
    the kernel made for that many rows."""
    from netpass.runtime.device import Engine, select_device
    engine = Engine.get(select_device(RUNTIME_DEVICE))
    cl, ctx, q = engine.cl, engine.context, engine.queue
    n, spec = 37, NORMS[norm]
    w, g, bt = randn_f32(rng, n, k), 1.0 + 0.2 * randn_f32(rng, k), 0.2 * randn_f32(rng, k)
    mf = cl.mem_flags
    for rows in (1, 3, GEMV_ROWS):
        kl = -(-k // 4) * 4 if staged else 0  # (staged whatever the size: a test)
        src = decode_gemv.gemv([], 0, [], 0, tpr, spec, decode_gemv.gemv_run(k, tpr, True), rows,
                               kl)
        prog = cl.Program(ctx, src.text).build()
        x = 30.0 + randn_f32(rng, rows, k)
        x[:, 1] += 40.0  # (an outlier next to the shift)
        a = np.zeros((rows, k, sak), np.float32)
        a[:, :, 0] = x
        bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=v)
                for v in (a, w, np.zeros((rows, n), np.float32))]
        ints = [0, 0, 0]
        if spec[3]:
            bufs.append(cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=g))
            ints.append(0)
        if spec[4]:
            bufs.append(cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=bt))
            ints.append(0)
        ints += [rows, n, k, 1, 0, 0, k * sak, sak, 0, 0, 1, k]
        kern = cl.Kernel(prog, src.name)
        for i, buf in enumerate(bufs):
            kern.set_arg(i, buf)
        kern.set_arg(len(bufs), np.array(ints, np.int32))
        cl.enqueue_nd_range_kernel(q, kern, (-(-n * tpr // 256) * 256, 1, 1), (256, 1, 1))
        got = np.empty((rows, n), np.float32)
        cl.enqueue_copy(q, got, bufs[2])
        q.finish()
        want = _normalized(x, g, bt, spec) @ w.T.astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-4 * np.sqrt(k))


def test_the_kernels_that_have_a_phase_form():
    """A persistent step (kernels.phase) gathers a launch only where its kernel has a phase
    form: the plain GEMV and the normalized one with its statistics in the loop, every
    norm_gemm variant; the one staging its rows in local memory goes on its own (NO_PHASE)."""
    from netpass.runtime.kernels.phase import phase_of
    for norm in [None, *NORMS.values()]:
        for staged in ((0, 768) if norm else (0,)):
            src = decode_gemv.gemv([], 0, [], 0, 16, norm, decode_gemv.GEMV_RUN, 1, staged)
            assert (phase_of(src) is None) == bool(staged), (norm, staged)
