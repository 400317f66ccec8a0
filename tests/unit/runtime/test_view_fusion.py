"""Program fusions that turn kernels into views: computed side inputs in epilogues and
Transposes read through by their MatMul."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64

from netpass import Model, opset
from netpass.runtime import Program


def _f(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _attention(dtype=np.float32, probs_out: bool = False):
    """q, k, v [b, s, 2, 8] -> per-head layouts by Transposes -> softmax(q k^T) v; with
    ``probs_out`` the probabilities are an output too (no fused attention then)."""
    q, k, v = (opset.parameter(["b", "s", 2, 8], dtype, name=n) for n in "qkv")
    qh = opset.transpose(q, ints64([0, 2, 1, 3]))
    kt = opset.transpose(k, ints64([0, 2, 3, 1]))
    vh = opset.transpose(v, ints64([0, 2, 1, 3]))
    att = opset.softmax(opset.matmul(qh, kt, False, False), -1)
    results = [opset.result(opset.matmul(att, vh, False, False), name="y")]
    if probs_out:
        results.append(opset.result(att, name="p"))
    return Model(results, [q, k, v])


def test_transposes_into_matmul_become_views():
    prog = Program.from_model(_attention(probs_out=True))
    views = [n for n in prog.nodes if n.kind == "Transpose"]
    assert all(n.permute_view is not None and n.optimized for n in views)
    mm = [n for n in prog.nodes if n.kind == "MatMul"]
    assert mm[0].permuted_inputs == {0: (0, 2, 1, 3), 1: (0, 2, 3, 1)}


def test_transposes_into_fused_attention_become_views():
    prog = Program.from_model(_attention())
    att = next(n for n in prog.nodes if n.kind == "FusedAttention")
    assert att.permuted_inputs == {0: (0, 2, 1, 3), 1: (0, 2, 3, 1), 2: (0, 2, 1, 3)}


@pytest.mark.parametrize("probs_out", [False, True])
def test_permuted_views_compute_the_same(run_shapes, rng, probs_out):
    feeds = [{n: _f(rng, b, s, 2, 8) for n in "qkv"} for b, s in ((1, 3), (2, 5), (1, 1))]
    req = run_shapes(_attention(probs_out=probs_out), feeds)
    # two GEMMs and the softmax per infer, or the fused attention
    assert req.stats["kernels_enqueued"] == 3 * (3 if probs_out else 1)


def test_permuted_view_read_back_by_a_host_fallback(run_shapes, rng):
    # float64 MatMul has no kernel: the host reads the permuted views back
    feeds = [{n: _f(rng, 1, s, 2, 8, dtype=np.float64) for n in "qkv"} for s in (2, 4)]
    req = run_shapes(_attention(np.float64), feeds)
    assert req.stats["host_fallbacks"] >= 2


@pytest.mark.parametrize("order", [(1, 0), (0, 2, 1)])
def test_transposed_weights_side(run_shapes, rng, order):
    a = opset.parameter([3, -1] if len(order) == 2 else [2, 3, -1], np.float32, name="a")
    w = opset.parameter([5, -1] if len(order) == 2 else [2, 5, -1], np.float32, name="w")
    y = opset.matmul(a, opset.transpose(w, ints64(list(order))), False, False)
    model = Model([opset.result(y, name="y")], [a, w])
    n = [7, 4]
    feeds = [{"a": _f(rng, *(([3] if len(order) == 2 else [2, 3]) + [k])),
              "w": _f(rng, *(([5] if len(order) == 2 else [2, 5]) + [k]))} for k in n]
    run_shapes(model, feeds)


def test_residual_add_is_fused_into_the_gemm(run_shapes, rng):
    x = opset.parameter(["b", "s", 16], np.float32, name="x")
    w = opset.constant(_f(rng, 16, 16))
    y = opset.add(x, opset.matmul(x, w, False, False))
    model = Model([opset.result(opset.relu(y), name="y")], [x])
    prog = Program.from_model(model)
    mm = next(n for n in prog.nodes if n.kind == "MatMul")
    assert [f.row.name for f in mm.fused] == ["Add", "Relu"]
    req = run_shapes(model, [{"x": _f(rng, 2, s, 16)} for s in (3, 6, 1)])
    assert req.stats["kernels_enqueued"] == 3


def test_side_input_not_provably_fitting_is_fused_and_checked(run_shapes, rng):
    """z's rows are not provably x's: the Add joins the Relu's kernel, and where z would
    broadcast the output (x has 1 row, z 4) the host applies the region instead."""
    x = opset.parameter([-1, 16], np.float32, name="x")
    z = opset.parameter([-1, 16], np.float32, name="z")
    model = Model([opset.result(opset.add(opset.relu(x), z), name="y")], [x, z])
    relu = next(n for n in Program.from_model(model).nodes if n.kind == "Relu")
    assert [f.row.name for f in relu.fused] == ["Add"]
    grows = [{"x": _f(rng, 1, 16), "z": _f(rng, 4, 16)} for _ in range(4)]  # (symbolic path, plan)
    req = run_shapes(model, [{"x": _f(rng, 4, 16), "z": _f(rng, 4, 16)}, *grows,
                             {"x": _f(rng, 3, 16), "z": _f(rng, 1, 16)}])
    assert req.stats["host_fallbacks"] == 4


def test_output_dim_of_one_against_an_unknown_dim_is_not_fused():
    """An output dim statically 1 meeting an unknown one is a broadcast: not fused."""
    x = opset.parameter([1, 16], np.float32, name="x")
    z = opset.parameter([-1, 16], np.float32, name="z")
    prog = Program.from_model(Model([opset.result(opset.add(opset.relu(x), z), name="y")], [x, z]))
    relu = next(n for n in prog.nodes if n.kind == "Relu")
    assert relu.fused == []


def _slice_model(axis: int):
    x = opset.parameter([-1, 6], np.float32, name="x")
    n = opset.parameter([1], np.int64, name="n")
    s = opset.slice(x, ints64([1]), opset.add(n, ints64([1])), ints64([1]), ints64([axis]))
    return Model([opset.result(opset.relu(s), name="y")], [x, n])


def test_contiguous_slice_is_a_view_at_its_offset(run_shapes, rng):
    feeds = [{"x": _f(rng, r, 6), "n": ints64([k])} for r, k in ((5, 3), (7, 2), (4, 4))]
    req = run_shapes(_slice_model(0), feeds)  # rows 1..k: one contiguous piece
    assert req.stats["skipped"] == 3
    assert req.stats["kernels_enqueued"] == 3 * 2  # the end's Add and the Relu


def test_strided_slice_of_columns_runs_a_kernel(run_shapes, rng):
    feeds = [{"x": _f(rng, r, 6), "n": ints64([k])} for r, k in ((5, 3), (7, 2))]
    req = run_shapes(_slice_model(1), feeds)  # columns 1..k of every row
    assert req.stats["skipped"] == 0
    assert req.stats["kernels_enqueued"] == 2 * 3  # the end's Add, the Slice and the Relu


def test_same_kernel_with_differently_shaped_side_inputs(run_shapes, rng):
    # two Relu+Add kernels alike but for their side input: a row [6], then a full [4, 6]
    x = opset.parameter([4, 6], np.float32, name="x")
    r = opset.parameter([6], np.float32, name="r")
    y1 = opset.add(opset.relu(x), r)
    again = opset.reshape(y1, ints64([4, 6]), False)  # a view: the second Relu comes after y1
    model = Model([opset.result(opset.add(opset.relu(again), y1), name="y")], [x, r])
    prog = Program.from_model(model)
    assert sum(1 for n in prog.nodes if n.kind == "Relu" and n.fused) == 2
    run_shapes(model, [{"x": _f(rng, 4, 6), "r": _f(rng, 6)}])
