"""GEMMs without the flatten/unflatten reshapes around them (runtime.gemm_reshapes) and shape
vectors traced through their ShapeOf sub-graphs (runtime.shape_terms): a Linear layer as
exporters write it (``x.view(-1, K) @ W + b``, then ``view(x.shape[:-1] + (N,))``) runs as one
GEMM with its LayerNorm, bias, GELU and residual fused, and computes what the graph does."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64, randn_f32

import netpass
from netpass import Model, opset
from netpass.runtime import Program
from netpass.runtime.kernels import mma_plan, tma_gemm
from netpass.runtime.norm_gemm import NormDesc
from netpass.runtime.shape_terms import dims_terms, reshape_keeps_prefix, shape_terms
from netpass.testing import RUNTIME_DEVICE


def _dims(x, *axes):
    """ShapeOf(x) gathered at ``axes``, each as a 1-element vector (as torch exports it)."""
    shape = opset.shape_of(x)
    return [opset.unsqueeze(opset.gather(shape, ints64(a), ints64(0)), ints64([0])) for a in axes]


def _linear(rng, x, k: int, n: int, exact: bool = True, lead_of=None):
    """x [b, s, k] -> flatten -> MatMul + bias -> unflatten to x's leading dims then n (with
    ``exact`` False, to [b, -1, n]: the same, but not provably; ``lead_of``: the leading dims
    read off that tensor instead, as the dynamo exporter reads them off the model's input)."""
    last = opset.slice(opset.shape_of(x), ints64([-1]), ints64([np.iinfo(np.int64).max]), ints64([1]))
    flat = opset.reshape(x, opset.concat([ints64([-1]), last], 0), True)
    y = opset.add(opset.matmul(flat, randn_f32(rng, k, n), False, False), randn_f32(rng, n))
    src = x if lead_of is None else lead_of
    lead = _dims(src, 0, 1) if exact else [*_dims(src, 0), ints64([-1])]
    return opset.reshape(y, opset.concat([*lead, ints64([n])], 0), True)


def _block(rng, k=32, n=40, exact=True, lead_of_input=False):
    """LayerNorm -> Linear -> tanh-GELU -> Linear back to k -> residual Add. (k whole stages of
    the tensor-core GEMM, which folds a LayerNorm only then: on a GPU with k = 24 the LayerNorm
    of 99 or 130 rows ran as a kernel of its own.)"""
    x = opset.parameter([-1, -1, k], np.float32, name="x")
    lead_of = x if lead_of_input else None
    h = opset.mvn(x, ints64([-1]), True, 1e-5, "inside_sqrt")
    h = opset.add(opset.multiply(h, (1 + 0.2 * randn_f32(rng, k)).astype(np.float32)), 0.1 * randn_f32(rng, k))
    u = _linear(rng, h, k, n, exact, lead_of)
    g = opset.multiply(opset.multiply(u, opset.add(opset.tanh(opset.multiply(u, np.float32(0.79))),
                                                   np.float32(1.0))), np.float32(0.5))
    y = opset.add(_linear(rng, g, n, k, lead_of=lead_of), x)
    return Model([opset.result(y, name="y")], [x])


def _check(model, compiled, shapes, rng, tol=2e-4):
    """Infer each shape on a request of ``compiled`` (from ``model``) against the reference."""
    req = compiled.create_infer_request()
    for shape in shapes:
        feeds = {"x": (1.5 + randn_f32(rng, *shape)).astype(np.float32)}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    return req


def _via_legacy(model):
    """compile_model's path: the legacy stage turns MatMul by constant weights into
    FullyConnected."""
    return netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})


def _via_program(model):
    from netpass.runtime import compile_program
    return compile_program(model, RUNTIME_DEVICE)


SHAPES = [(2, 7, 32), (1, 1, 32), (3, 33, 32), (2, 7, 32), (2, 7, 32), (2, 7, 32), (1, 130, 32)]


@pytest.mark.parametrize("compile_fn", [_via_legacy, _via_program], ids=["fully_connected", "matmul"])
def test_linear_block_runs_as_two_fused_gemms(rng, compile_fn):
    """Odd sizes, batch > 1, one row, repeats (the symbolic path and its step plan)."""
    model = _block(rng)
    compiled = compile_fn(model)
    req = _check(model, compiled, SHAPES, rng)
    prog = getattr(compiled, "runtime", compiled).program  # (compile_model's wraps the runtime's)
    kinds = [n.kind for n in prog.exec_order
             if not n.optimized and not n.in_shape_of_subgraph and n.kind not in ("Parameter", "Constant")]
    assert kinds in (["FullyConnected"] * 2, ["MatMul"] * 2)
    # A FullyConnected folds the LayerNorm into its reordered weights, but on Hopper's TMA
    # kernel (which reads them as given); there, and for a MatMul on the tensor cores (a GPU's,
    # at MIN_M rows or more), the rows are normalized into a scratch copy first
    # (test_norm_gemm: one row kernel ahead), elsewhere inside the GEMM.
    engine = getattr(compiled, "runtime", compiled).engine
    k, n = SHAPES[0][-1], 40
    if kinds[0] == "FullyConnected":
        ahead = sum(tma_gemm.plan(engine, "f32", m, n, k, 1, [k, 1], [1, k], None) is not None
                    for m in (int(np.prod(s[:-1])) for s in SHAPES))
    else:
        ahead = sum(mma_plan.on_tensor_cores(engine, "f32", int(np.prod(s[:-1])))
                    for s in SHAPES)
    assert req.stats["kernels_enqueued"] == 2 * len(SHAPES) + ahead


def test_program_structure(rng):
    cm = _via_legacy(_block(rng))
    prog = cm.runtime.program
    first, second = [n for n in prog.nodes if n.kind == "FullyConnected"]
    assert isinstance(first.subgraph, NormDesc)  # the LayerNorm folded through the flatten
    assert first.inputs[0][0].kind == "Parameter"
    assert [f.row.name for f in first.fused] == ["Multiply", "Tanh", "Add", "Multiply", "Multiply"]
    assert [f.row.name for f in second.fused] == ["Add"]  # the residual
    assert not [n for n in prog.nodes if n.kind in ("Reshape", "ShapeOf", "MVN")]


def test_unflatten_to_the_model_inputs_dims(rng):
    """The unflattens' leading dims read off the model's input (the dynamo exporter's way),
    the same symbols as the GEMMs' own rows: the reshapes go, the GELU and the residual fuse;
    the results are the graph's."""
    model = _block(rng, lead_of_input=True)
    cm = _via_legacy(model)
    prog = cm.runtime.program
    first, second = [n for n in prog.nodes if n.kind == "FullyConnected"]
    assert [f.row.name for f in first.fused] == ["Multiply", "Tanh", "Add", "Multiply", "Multiply"]
    assert [f.row.name for f in second.fused] == ["Add"]
    assert not [n for n in prog.nodes if n.kind == "Reshape"]
    _check(model, cm, SHAPES[:3], rng)


def test_unprovable_unflatten_keeps_the_reshapes(rng):
    """An unflatten to [b, -1, n] is not provably x's dims: the first Linear keeps its
    reshapes (its LayerNorm still folds through the flatten, whose ShapeOf reads the norm's
    input: parallel_gemms.read_shapes_upstream); the results are the graph's."""
    model = _block(rng, exact=False)
    cm = _via_legacy(model)
    first = next(n for n in cm.runtime.program.nodes if n.kind == "FullyConnected")
    assert first.inputs[0][0].kind == "Reshape" and isinstance(first.subgraph, NormDesc)
    _check(model, cm, [(2, 5, 32), (3, 4, 32), (1, 6, 32)], rng)


def test_gemm_output_shape_read_keeps_the_reshapes(rng):
    """A ShapeOf of the 2-D GEMM output reads [rows, n]: the GEMM keeps its 2-D output."""
    x = opset.parameter([-1, -1, 8], np.float32, name="x")
    y = _linear(rng, x, 8, 6)
    flat_gemm = y.input_value(0).node
    rows = opset.shape_of(flat_gemm)
    model = Model([opset.result(y, name="y"), opset.result(rows, name="rows")], [x])
    prog = Program.from_model(model)
    gemm = next(n for n in prog.nodes if n.kind == "MatMul")
    assert gemm.inputs[0][0].kind == "Reshape"
    feeds = {"x": randn_f32(rng, 2, 3, 8)}
    out = _via_program(model).create_infer_request().infer(feeds)
    np.testing.assert_array_equal(out["rows"], [6, 6])
    np.testing.assert_allclose(out["y"], netpass.reference.infer(model, feeds)["y"], rtol=1e-5, atol=1e-5)


def test_shape_terms_trace_shape_sub_graphs():
    x = opset.parameter([-1, -1, 8], np.float32, name="x")
    shape = opset.shape_of(x)
    head = opset.slice(shape, ints64([0]), ints64([-1]), ints64([1]))
    target = opset.concat([head, ints64([2, 4])], 0)
    y = opset.reshape(x, target, False)
    z = opset.reshape(x, opset.concat([*_dims(x, 1, 0), ints64([8])], 0), False)
    prog = Program.from_model(Model([opset.result(y, name="y"), opset.result(z, name="z")], [x]),
                              fuse=False)
    px = next(n for n in prog.nodes if n.kind == "Parameter")
    ry, rz = sorted((n for n in prog.nodes if n.kind == "Reshape" and n.inputs[0][0] is px),
                    key=lambda n: -len(n.out_pshapes[0]))
    xd = dims_terms(px, 0)
    assert xd == [("dim", id(px), 0, 0), ("dim", id(px), 0, 1), 8]
    assert shape_terms(*ry.inputs[1]) == xd[:2] + [2, 4]
    assert shape_terms(*rz.inputs[1]) == [xd[1], xd[0], 8]
    assert reshape_keeps_prefix(ry, 2) and not reshape_keeps_prefix(rz, 1)
    mul = opset.multiply(shape, ints64(2))  # arithmetic is not traced
    prog2 = Program.from_model(Model([opset.result(opset.reshape(x, mul, False), name="y")], [x]), fuse=False)
    r = next(n for n in prog2.nodes if n.kind == "Reshape")
    assert shape_terms(*r.inputs[1]) is None


def test_split_pieces_share_the_split_tensor_dims():
    """q, k, v of one projection: the non-split dims of each piece name the split tensor's."""
    x = opset.parameter([-1, -1, 12], np.float32, name="x")
    parts = opset.variadic_split(x, ints64(2), ints64([4, 4, 4]))
    model = Model([opset.result(parts.output(i), name=f"p{i}") for i in range(3)], [x])
    prog = Program.from_model(model, fuse=False)
    px = next(n for n in prog.nodes if n.kind == "Parameter")
    split = next(n for n in prog.nodes if n.kind == "VariadicSplit")
    want = [("dim", id(px), 0, 0), ("dim", id(px), 0, 1), 4]
    assert [dims_terms(split, k) for k in range(3)] == [want] * 3


def test_flatten_merging_the_heads(rng):
    """An attention's output [b, s, heads, d] flattened to [b * s, heads * d] for the output
    projection at once (the dynamo exporter's way), unflattened to [b, s]: the GEMM reads a
    view of [b, s, heads * d] and its residual Add fuses; the reference's results."""
    x = opset.parameter([-1, -1, 4, 6], np.float32, name="x")
    r = opset.parameter([-1, -1, 40], np.float32, name="r")
    flat = opset.reshape(x, ints64([-1, 24]), True)
    y = opset.add(opset.matmul(flat, randn_f32(rng, 24, 40), False, False), randn_f32(rng, 40))
    y = opset.reshape(y, opset.concat([*_dims(x, 0, 1), ints64([40])], 0), True)
    model = Model([opset.result(opset.add(y, r), name="y")], [x, r])
    cm = _via_legacy(model)
    prog = cm.runtime.program
    fc = next(n for n in prog.nodes if n.kind == "FullyConnected")
    assert [f.row.name for f in fc.fused] == ["Add"]
    assert fc.inputs[0][0].kind == "Reshape" and len(fc.inputs[0][0].out_pshapes[0]) == 3
    req = cm.create_infer_request()
    for b, s in ((2, 5), (1, 1), (3, 9)):
        feeds = {"x": randn_f32(rng, b, s, 4, 6), "r": randn_f32(rng, b, s, 40)}
        np.testing.assert_allclose(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"],
                                   rtol=1e-4, atol=1e-4)
    assert req.stats["kernels_enqueued"] == 3
