"""A mixture-of-experts' routed GEMMs (netpass.runtime.expert_gemm): MatMul(Gather(W [E, N, K],
router TopK indices, axis 0), X) as one ExpertMatMul that reads each batch's expert matrix
where it lies, against the reference on random data; look-alikes stay as they are."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32, rel_l2

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program, expert_gemm, program
from netpass.testing import RUNTIME_DEVICE

TOL = 1e-5
E, N, K = 6, 40, 24


def _i64(*v):
    return np.array(v, np.int64)


def _gathered(w, idx, nd: bool):
    """W's matrices by flat indices [B]: a Gather along axis 0, or dynamo's GatherND [B, 1]."""
    if nd:
        return opset.gather_nd(w, opset.unsqueeze(idx, _i64(-1)))
    return opset.gather(w, idx, _i64(0))


def _moe(rng, k: int, nd: bool = False, shift: int = 0):
    """transformers' batched_mm experts: tokens x [T, K] routed (softmax, TopK k) to experts of
    W [E, N, K]; each (token, expert) pair's row times its expert's matrix: y [T * k, N, 1].
    ``shift``: added to the TopK indices (-E: the same experts as negative indices)."""
    x = opset.parameter([-1, K], np.float32, name="x")
    probs = opset.softmax(opset.matmul(x, randn_f32(rng, K, E), False, False), 1)
    top = opset.topk(probs, _i64(k), 1, "max", "value", index_element_type=np.int64)
    idx = opset.reshape(top.output(1), _i64(-1), False)
    if shift:
        idx = opset.add(idx, _i64(shift))
    rows = opset.reshape(opset.tile(opset.unsqueeze(x, _i64(1)), _i64(1, k, 1)), _i64(-1, K),
                         False)
    y = opset.matmul(_gathered(randn_f32(rng, E, N, K), idx, nd), opset.unsqueeze(rows, _i64(-1)),
                     False, False)
    return Model([opset.result(y, name="y")], [x])


def _kinds(model) -> list[str]:
    return [n.kind for n in Program.from_model(model).nodes
            if n.kind in ("Gather", "GatherND", "MatMul", "ExpertMatMul")]


def _run(model, feeds_list, want=None):
    """One request over ``feeds_list``: each output against the reference (or ``want``'s);
    the kernels each infer enqueued."""
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    launches = []
    for j, feeds in enumerate(feeds_list):
        k0 = req.stats["kernels_enqueued"]
        got = req.infer(feeds)["y"]
        launches.append(req.stats["kernels_enqueued"] - k0)
        ref = netpass.reference.infer(model, feeds)["y"] if want is None else want[j]
        assert got.shape == ref.shape
        assert rel_l2(got, ref) <= TOL, (j, rel_l2(got, ref))
    return launches


@pytest.mark.parametrize("nd", [False, True], ids=["gather", "gather_nd"])
@pytest.mark.parametrize("k", [1, 2])
def test_routed_experts_read_in_place(rng, monkeypatch, k, nd):
    """One token (a decode step), then several, then one again, in one request: the gathered
    copy is gone (no Gather, no MatMul): a step takes one launch fewer than without the pass
    (router MatMul, Softmax, TopK, the rows' Tile, the ExpertMatMul)."""
    model = _moe(rng, k, nd)
    assert _kinds(model) == ["MatMul", "ExpertMatMul"]
    feeds = [{"x": randn_f32(rng, t, K)} for t in (1, 7, 1, 3, 1)]
    launches = _run(model, feeds)
    assert launches[0] == launches[2] == launches[4] == 5
    monkeypatch.setattr(program, "NODE_PASSES", tuple(
        p for p in program.NODE_PASSES if p is not expert_gemm.fuse_expert_gemms))
    assert _kinds(model) == ["MatMul", "GatherND" if nd else "Gather", "MatMul"]
    assert _run(model, feeds[:1]) == [6]


def test_negative_indices_count_from_the_end(rng):
    model = _moe(rng, 2, shift=-E)
    assert "Gather" not in _kinds(model)
    _run(model, [{"x": randn_f32(rng, t, K)} for t in (1, 4)])


def _indexed(rng, w, idx_len, x_shape, ta=False, tb=False, side=0, nd=False):
    """y = MatMul of Gather(w, i, 0) (operand ``side``) and x, the indices a parameter."""
    i = opset.parameter([idx_len], np.int64, name="i")
    x = opset.parameter(list(x_shape), np.float32, name="x")
    g = _gathered(w, i, nd)
    a, b = (g, x) if side == 0 else (x, g)
    return Model([opset.result(opset.matmul(a, b, ta, tb), name="y")], [i, x])


@pytest.mark.parametrize("case", ["column", "row_tb", "row", "ta", "several_columns",
                                  "broadcast_x"])
def test_operand_layouts(rng, case):
    """The gathered weights as A or B, transposed or not, one or several columns a batch, X
    shared by every batch: the GEMV where each batch is one row against the expert's rows,
    the tiled kernel otherwise; indices in [-E, E)."""
    w = randn_f32(rng, E, N, K)
    b = 5
    side, ta, tb, xs = {
        "column": (0, False, False, (b, K, 1)),
        "row_tb": (1, False, True, (b, 1, K)),
        "row": (1, False, False, (b, 1, N)),
        "ta": (0, True, False, (b, N, 2)),
        "several_columns": (0, False, False, (b, K, 3)),
        "broadcast_x": (0, False, True, (2, K)),
    }[case]
    model = _indexed(rng, w, b, xs, ta, tb, side)
    assert _kinds(model) == ["ExpertMatMul"]
    _run(model, [{"i": rng.integers(-E, E, b), "x": randn_f32(rng, *xs)} for _ in range(2)])


def test_indices_outside_read_zeros(rng):
    """An index outside [-E, E) reads zeros, as the runtime's Gather does, never outside W."""
    w = randn_f32(rng, E, N, K)
    model = _indexed(rng, w, 4, (4, K, 1))
    i, x = _i64(1, E, -E - 1, 1 << 40), randn_f32(rng, 4, K, 1)
    want = np.zeros((4, N, 1), np.float32)
    want[0] = w[1] @ x[0]
    _run(model, [{"i": i, "x": x}], want=[want])


def test_look_alikes_stay(rng):
    """The gathered weights read by something else too, and a Gather along axis 1, stay."""
    w = randn_f32(rng, E, N, K)
    i = opset.parameter([3], np.int64, name="i")
    x = opset.parameter([3, K, 1], np.float32, name="x")
    g = opset.gather(w, i, _i64(0))
    shared = Model([opset.result(opset.matmul(g, x, False, False), name="y"),
                    opset.result(opset.reduce_sum(g, _i64(2), False), name="s")], [i, x])
    assert _kinds(shared) == ["Gather", "MatMul"]
    wt = randn_f32(rng, N, E, K)
    g1 = opset.gather(wt, i, _i64(1))  # [N, 3, K]
    x1 = opset.parameter([K, 1], np.float32, name="x")
    axis1 = Model([opset.result(opset.matmul(g1, x1, False, False), name="y")], [i, x1])
    assert _kinds(axis1) == ["Gather", "MatMul"]
    feeds = {"i": rng.integers(0, E, 3), "x": randn_f32(rng, K, 1)}
    _run(axis1, [feeds])
