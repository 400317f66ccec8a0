"""Fused elementwise regions (Program._fused_region): single-exit groups of elementwise ops
that read the producer's value several times run in the producer's kernel."""
from __future__ import annotations

import numpy as np

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.testing import RUNTIME_DEVICE


def _f(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _tanh_gelu(x):
    """torch's gelu(approximate="tanh") as torch.onnx.export writes it."""
    c = np.float32
    cube = opset.multiply(x, opset.multiply(x, x))
    inner = opset.multiply(opset.add(x, opset.multiply(cube, c(0.044715))), c(0.7978845608))
    return opset.multiply(opset.multiply(x, opset.add(opset.tanh(inner), c(1.0))), c(0.5))


def _fc_gelu(rng, n_in=16, n_out=32):
    x = opset.parameter([1, -1, n_in], np.float32, name="x")
    h = opset.add(opset.matmul(x, _f(rng, n_in, n_out), False, False), _f(rng, n_out))
    return Model([opset.result(_tanh_gelu(h), name="y")], [x])


def test_tanh_gelu_region_joins_the_matmul(rng):
    prog = Program.from_model(_fc_gelu(rng))
    mm = next(n for n in prog.nodes if n.kind == "MatMul")
    assert [f.row.name for f in mm.fused] == ["Add", "Multiply", "Multiply", "Multiply", "Add",
                                          "Multiply", "Tanh", "Add", "Multiply", "Multiply"]
    assert all(n.fused_into is mm for n in prog.nodes if n.kind in ("Tanh", "Multiply"))
    assert sum(f.refs.count(1) for f in mm.fused) == 5  # the biased value: x * x, x * x², x + .., x * ..


def test_tanh_gelu_region_matches_the_reference(rng):
    model = _fc_gelu(rng)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in (1, 5, 9):
        x = _f(rng, 1, s, 16)
        np.testing.assert_allclose(req.infer({"x": x})["y"], netpass.reference.infer(model, {"x": x})["y"],
                                   rtol=1e-5, atol=1e-5)
    assert req.stats["kernels_enqueued"] == 3  # one launch per infer


def test_region_is_cut_before_a_value_used_outside(rng):
    """relu(h) also feeds a second output: the region ends at it (the longest prefix whose
    only value used outside is its last)."""
    x = opset.parameter([4, 8], np.float32, name="x")
    h = opset.matmul(x, _f(rng, 8, 8), False, False)
    r = opset.relu(h)
    y = opset.add(opset.multiply(r, r), r)
    model = Model([opset.result(y, name="y"), opset.result(opset.sigmoid(r), name="z")], [x])
    prog = Program.from_model(model)
    mm = next(n for n in prog.nodes if n.kind == "MatMul")
    assert [f.row.name for f in mm.fused] == ["Relu"]
    feeds = {"x": _f(rng, 4, 8)}
    out = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)
    ref = netpass.reference.infer(model, feeds)
    for k in ("y", "z"):
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-5, atol=1e-5)


def test_region_side_input_must_broadcast_into_the_output(rng):
    """x * other where other is larger than the producer's output: not fused."""
    a = opset.parameter([1, 8], np.float32, name="a")
    b = opset.parameter([4, 8], np.float32, name="b")
    h = opset.relu(a)
    model = Model([opset.result(opset.multiply(opset.exp(h), b), name="y")], [a, b])
    prog = Program.from_model(model)
    relu = next(n for n in prog.nodes if n.kind == "Relu")
    assert [f.row.name for f in relu.fused] == ["Exp"]


def test_host_fallback_applies_a_region(rng):
    """MVN over a non-innermost axis runs on the host; its fused region is applied there."""
    x = opset.parameter([2, 6, 5], np.float32, name="x")
    m = opset.mvn(x, np.array([1], np.int64), True, 1e-5, "inside_sqrt")
    model = Model([opset.result(_tanh_gelu(m), name="y")], [x])
    prog = Program.from_model(model)
    assert len(next(n for n in prog.nodes if n.kind == "MVN").fused) == 9
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    feeds = {"x": _f(rng, 2, 6, 5)}
    np.testing.assert_allclose(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"],
                               rtol=1e-5, atol=1e-5)
    assert req.stats["host_fallbacks"] == 1 and req.stats["fused"] == 9
