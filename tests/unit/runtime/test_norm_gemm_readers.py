"""A LayerNorm or RMSNorm read by several GEMMs (netpass.runtime.norm_gemm): parallel-residual
decoders feed one normalized tensor to the attention's and the MLP's projections; the norm
folds into each of them (no launch of its own left), or, where anything else reads it, into
none."""
from __future__ import annotations

import re

import numpy as np
import pytest
from graph_blocks import randn_f32, rel_l2

import netpass
from netpass import Model, opset
from netpass.core.boundary import Constant
from netpass.ops.legacy import FullyConnected
from netpass.runtime import Program, compile_program
from netpass.runtime import program as program_module
from netpass.runtime.norm_gemm import NormDesc
from netpass.runtime.parallel_gemms import read_shapes_upstream
from netpass.testing import RUNTIME_DEVICE

K, N = 48, 40
ROWS = (1, 300, 9, 1)  # one row: the decode GEMV; more: the prompt's GEMMs
NORM_KINDS = ("MVN", "RmsNorm", "Multiply", "Add")


def _norm(x, rng, kind: str):
    """A LayerNorm (MVN, then gamma and beta) or transformers' RMSNorm as exports write it
    (``fuse_rms_norms`` makes it one RmsNorm node), then its scale."""
    if kind == "layernorm":
        h = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
        h = opset.multiply(h, 1.0 + randn_f32(rng, K, scale=0.2))
        return opset.add(h, randn_f32(rng, K, scale=0.2))
    ms = opset.reduce_mean(opset.power(x, np.float32(2)), np.array([-1], np.int64), True)
    h = opset.multiply(x, opset.divide(np.float32(1), opset.sqrt(opset.add(ms, np.float32(1e-6)))))
    return opset.multiply(h, 1.0 + randn_f32(rng, K, scale=0.2))


def _const(value):
    return Constant([], value=np.asarray(value)).output(0)


def _reader(h, rng, how: str):
    """One GEMM over ``h``: a MatMul and its bias, a FullyConnected, or a FullyConnected
    through row views (a Reshape keeping the last dim, a Slice of the last row)."""
    if how == "matmul":
        return opset.add(opset.matmul(h, randn_f32(rng, K, N), False, False), randn_f32(rng, N))
    if how == "rows":
        h = opset.reshape(h, np.array([-1, K], np.int64), False)
        big = np.iinfo(np.int64).max
        h = opset.slice(h, np.array([-1], np.int64), np.array([big], np.int64),
                        np.array([1], np.int64), np.array([0], np.int64))
    return FullyConnected([h.output(0), _const(randn_f32(rng, N, K)), _const(randn_f32(rng, N))], out_size=N)


def _model(rng, kind: str, readers: tuple, other: str | None = None):
    """``readers`` (:func:`_reader`) over one norm of ``x``; ``other``: the norm ("norm") or
    the row view a reader reads ("view") also read by a Relu, another output."""
    x = opset.parameter([1, -1, K], np.float32, name="x")
    h = _norm(x, rng, kind)
    outs = [opset.result(_reader(h, rng, how), name=f"y{i}") for i, how in enumerate(readers)]
    if other == "norm":
        outs.append(opset.result(opset.relu(h), name="z"))
    elif other == "view":
        view = opset.reshape(h, np.array([-1, K], np.int64), False)
        outs.append(opset.result(opset.matmul(view, randn_f32(rng, K, N), False, False), name="v"))
        outs.append(opset.result(opset.relu(view), name="z"))
    return Model(outs, [x])


def _run(model, rng, rows=ROWS, offset=20.0):
    """Each infer's launches (``kernels_enqueued``), its outputs checked against the
    reference within 1e-5 rel. L2, rows whose mean is ``offset`` deviations."""
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    launches = []
    for m in rows:
        feeds = {"x": (offset + randn_f32(rng, 1, m, K)).astype(np.float32)}
        before = req.stats["kernels_enqueued"]
        got, want = req.infer(feeds), netpass.reference.infer(model, feeds)
        launches.append(req.stats["kernels_enqueued"] - before)
        for name, ref in want.items():
            assert got[name].shape == ref.shape
            assert rel_l2(got[name], ref) <= 1e-5, (name, m, rel_l2(got[name], ref))
    return req, launches


def _kinds(prog) -> list[str]:
    """The kinds of the program's nodes but constants and ops fused into others."""
    return [n.kind for n in prog.nodes if not n.is_constant and n.fused_into is None]


def _gemms(prog) -> list:
    return [n for n in prog.nodes if n.kind in ("MatMul", "FullyConnected")]


@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("readers", [("matmul", "fc"), ("fc", "matmul", "rows")],
                         ids=["two", "three"])
def test_norm_folds_into_every_reading_gemm(rng, kind, readers):
    model = _model(rng, kind, readers)
    prog = Program.from_model(model)
    assert not [k for k in _kinds(prog) if k in NORM_KINDS]  # (the bias Adds: epilogues)
    gemms = _gemms(prog)
    assert sorted(n.kind for n in gemms) == sorted(
        "MatMul" if how == "matmul" else "FullyConnected" for how in readers)
    for g in gemms:
        assert isinstance(g.subgraph, NormDesc) and g.subgraph.rms == (kind == "rmsnorm")
        assert g.subgraph.gamma and g.subgraph.beta == (kind == "layernorm")
        assert g.inputs[0][0].kind in ("Parameter", "Slice")  # (the raw rows, or their view)
        names = [s.id for s, _ in g.inputs[g.subgraph.first:]]
        assert names == [f"{g.id}/gamma"] + ([f"{g.id}/beta"] if g.subgraph.beta else [])
    req, launches = _run(model, rng)
    if RUNTIME_DEVICE == "CPU":  # one launch per GEMM (a GPU may take K slices)
        assert launches == [len(readers)] * len(ROWS)
        kernels = {re.search(r"void (\w+)\(", key[2]).group(1)
                   for key in req.network.kernel_objects}
        assert {"gemv", "gemm"} <= kernels and "rowop" not in kernels  # (1 row; 300 rows)


@pytest.mark.parametrize("other", ["norm", "view"])
def test_norm_read_by_anything_else_stays(rng, other):
    """All readers or none: an elementwise reader of the norm (or of a reader's row view)
    keeps it a launch of its own, and no GEMM folds it."""
    model = _model(rng, "layernorm", ("matmul", "fc"), other)
    prog = Program.from_model(model)
    assert [n.kind for n in prog.nodes if n.kind == "MVN"] == ["MVN"]
    assert not [g for g in _gemms(prog) if g.subgraph is not None]
    _, launches = _run(model, rng, rows=(1, 70))
    if RUNTIME_DEVICE == "CPU":
        assert min(launches) >= 3 + (other == "view")


@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("how", ["matmul", "fc", "rows"])
def test_one_reader_as_before(rng, kind, how):
    """A norm read by one GEMM folds as it always did: the GEMM reads the raw rows (or their
    views), its gamma (and beta) just before it, one launch."""
    model = _model(rng, kind, (how,))
    prog = Program.from_model(model)
    gemm = _gemms(prog)[0]
    views = {"matmul": [], "fc": [], "rows": ["Reshape", "Slice"]}[how]
    assert _kinds(prog) == ["Parameter", *views, gemm.kind, "Result"]
    vectors = ["gamma", "beta"] if kind == "layernorm" else ["gamma"]
    at = prog.nodes.index(gemm)
    assert [n.id for n in prog.nodes[at - len(vectors):at]] == [f"{gemm.id}/{v}" for v in vectors]
    assert [s.id for s, _ in gemm.inputs[gemm.subgraph.first:]] == \
        [f"{gemm.id}/{v}" for v in vectors]
    assert [f.row.name for f in gemm.fused] == (["Add"] if how == "matmul" else [])
    _, launches = _run(model, rng, rows=(1, 70))
    if RUNTIME_DEVICE == "CPU":
        assert launches == [1, 1]


def test_shape_of_reader_keeps_the_norm_shape_only(rng, monkeypatch):
    """A ShapeOf reads only the norm's shape: the norm still folds into both GEMMs, its nodes
    stay, never run (``shape_only``). (``read_shapes_upstream`` would move the ShapeOf onto
    ``x``: left out here.)"""
    x = opset.parameter([1, -1, K], np.float32, name="x")
    h = _norm(x, rng, "layernorm")
    a, b = _reader(h, rng, "matmul"), _reader(h, rng, "fc")
    rows = opset.gather(opset.shape_of(h), np.array([1], np.int64), np.int64(0))
    target = opset.concat([rows, np.array([N], np.int64)], 0)
    model = Model([opset.result(opset.reshape(a, target, False), name="y0"),
                   opset.result(b, name="y1")], [x])
    passes = tuple(p for p in program_module.NODE_PASSES if p is not read_shapes_upstream)
    monkeypatch.setattr(program_module, "NODE_PASSES", passes)
    prog = Program.from_model(model)
    norm = [n for n in prog.nodes if n.kind in NORM_KINDS and n.fused_into is None]
    assert sorted(n.kind for n in norm) == ["Add", "MVN", "Multiply"]
    assert all(n.shape_only for n in norm)
    assert all(isinstance(g.subgraph, NormDesc) for g in _gemms(prog))
    _, launches = _run(model, rng, rows=(1, 70))
    if RUNTIME_DEVICE == "CPU":
        assert launches == [2, 2]


@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("ahead", [False, True], ids=["stages", "ahead"])
def test_norm_folds_into_each_tensor_core_gemm(rng, monkeypatch, kind, ahead):
    """A prompt on the tensor-core GEMMs (emulated on PoCL; compile_model makes the MatMul a
    FullyConnected): each reader folds the norm into its own weights (``fold_weights``) and
    takes the rows' statistics in its A stages, or from a row kernel of its own ahead of it
    (``mma_plan.norm_ahead``); the last-row reader runs as a GEMV."""
    from netpass.runtime.device import Engine, select_device
    from netpass.runtime.kernels import mma_plan
    engine = Engine.get(select_device(RUNTIME_DEVICE))
    if RUNTIME_DEVICE == "CPU":
        monkeypatch.setattr(engine, "mma", "emulated")
    elif not getattr(engine, "mma", ""):
        pytest.skip("no tensor-core kernels on this device")
    monkeypatch.setattr(engine, "tma", "")  # (Hopper's TMA kernel normalizes rows ahead)
    monkeypatch.setattr(mma_plan, "norm_ahead", lambda cfg: ahead)
    model = _model(rng, kind, ("fc", "matmul", "rows"))
    req = netpass.compile_model(model, RUNTIME_DEVICE,
                                {"TRANSFORMATIONS": "NONE"}).create_infer_request()
    for m in (300, 1):
        feeds = {"x": (20.0 + randn_f32(rng, 1, m, K)).astype(np.float32)}
        before = req.stats["kernels_enqueued"]
        got, want = req.infer(feeds), netpass.reference.infer(model, feeds)
        for name, ref in want.items():
            assert rel_l2(got[name], ref) <= 1e-5, (name, m, rel_l2(got[name], ref))
        if RUNTIME_DEVICE == "CPU":
            assert req.stats["kernels_enqueued"] - before == 3 + 2 * (ahead and m > 1)
    kernels = {key[2] for key in req._runtime_request.network.kernel_objects}
    assert any("gemm_mma" in src for src in kernels)
    assert any("void row_moments(" in src for src in kernels) == ahead
