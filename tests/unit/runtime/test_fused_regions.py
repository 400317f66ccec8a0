"""Fused elementwise regions (Program._fused_region): single-exit groups of elementwise ops
that read the producer's value several times run in the producer's kernel."""
from __future__ import annotations

import numpy as np
from graph_blocks import randn_f32

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.testing import RUNTIME_DEVICE


def _tanh_gelu(x):
    """torch's gelu(approximate="tanh") as torch.onnx.export writes it."""
    c = np.float32
    cube = opset.multiply(x, opset.multiply(x, x))
    inner = opset.multiply(opset.add(x, opset.multiply(cube, c(0.044715))), c(0.7978845608))
    return opset.multiply(opset.multiply(x, opset.add(opset.tanh(inner), c(1.0))), c(0.5))


def _fc_gelu(rng, n_in=16, n_out=32):
    x = opset.parameter([1, -1, n_in], np.float32, name="x")
    h = opset.add(opset.matmul(x, randn_f32(rng, n_in, n_out), False, False), randn_f32(rng, n_out))
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
        x = randn_f32(rng, 1, s, 16)
        np.testing.assert_allclose(req.infer({"x": x})["y"], netpass.reference.infer(model, {"x": x})["y"],
                                   rtol=1e-5, atol=1e-5)
    assert req.stats["kernels_enqueued"] == 3  # one launch per infer


def test_region_is_cut_before_a_value_used_outside(rng):
    """relu(h) also feeds a second output: the region ends at it (the longest prefix whose
    only value used outside is its last)."""
    x = opset.parameter([4, 8], np.float32, name="x")
    h = opset.matmul(x, randn_f32(rng, 8, 8), False, False)
    r = opset.relu(h)
    y = opset.add(opset.multiply(r, r), r)
    model = Model([opset.result(y, name="y"), opset.result(opset.sigmoid(r), name="z")], [x])
    prog = Program.from_model(model)
    mm = next(n for n in prog.nodes if n.kind == "MatMul")
    assert [f.row.name for f in mm.fused] == ["Relu"]
    feeds = {"x": randn_f32(rng, 4, 8)}
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
    feeds = {"x": randn_f32(rng, 2, 6, 5)}
    np.testing.assert_allclose(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"],
                               rtol=1e-5, atol=1e-5)
    assert req.stats["host_fallbacks"] == 1 and req.stats["fused"] == 9


def _fc_pow_gelu(rng, n_in=16, n_out=32):
    """tanh-GELU as GPT-2's export writes it: the cube by Pow(x, 3)."""
    c = np.float32
    x = opset.parameter([1, -1, n_in], np.float32, name="x")
    h = opset.add(opset.matmul(x, randn_f32(rng, n_in, n_out), False, False), randn_f32(rng, n_out))
    inner = opset.multiply(opset.add(h, opset.multiply(opset.power(h, c(3.0)), c(0.044715))),
                           c(0.7978845608))
    y = opset.multiply(opset.multiply(h, c(0.5)), opset.add(opset.tanh(inner), c(1.0)))
    return Model([opset.result(y, name="y")], [x])


def _epilogue_sources(req) -> str:
    return "".join(ln.source.text for inst in req.network.insts
                   if inst.impl is not None for ln in inst.impl.launches)


def test_scalar_constants_of_a_region_are_literals(rng):
    """The region's one-element constants are written into the kernel (not loaded per
    element); the cube becomes a product."""
    prog = Program.from_model(_fc_pow_gelu(rng))
    mm = next(n for n in prog.nodes if n.kind == "MatMul")
    literals = [v for f in mm.fused for v in f.literals if v is not None]
    assert sorted(literals) == sorted(float(np.float32(v)) for v in
                                      (3.0, 0.044715, 0.7978845608, 0.5, 1.0))
    req = compile_program(_fc_pow_gelu(rng), RUNTIME_DEVICE).create_infer_request()
    req.infer({"x": randn_f32(rng, 1, 3, 16)})
    text = _epilogue_sources(req)
    assert "pow(" not in text and "0.044714998" in text


def test_pow_gelu_with_literals_matches_the_reference(rng):
    model = _fc_pow_gelu(rng)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in (1, 7):
        x = 3 * randn_f32(rng, 1, s, 16)
        np.testing.assert_allclose(req.infer({"x": x})["y"], netpass.reference.infer(model, {"x": x})["y"],
                                   rtol=1e-5, atol=1e-5)


def test_integer_and_special_literals_keep_their_values(rng):
    """An int64 scalar and a float infinity as literals: the same values as loaded."""
    x = opset.parameter([4, 8], np.float32, name="x")
    i = opset.parameter([4, 8], np.int64, name="i")
    y = opset.minimum(opset.relu(x), np.float32(np.inf))
    j = opset.add(opset.relu(i), np.int64(2**40))
    model = Model([opset.result(y, name="y"), opset.result(j, name="j")], [x, i])
    feeds = {"x": randn_f32(rng, 4, 8), "i": rng.integers(-5, 5, (4, 8))}
    out = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)
    ref = netpass.reference.infer(model, feeds)
    np.testing.assert_array_equal(out["y"], ref["y"])
    np.testing.assert_array_equal(out["j"], ref["j"])
