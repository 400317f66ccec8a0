"""Property: the OpenCL runtime computes what the reference does, whatever the shapes do.

Hypothesis builds small graphs over ``x [b, s, 8]`` (dynamic ``b`` and ``s``) from the blocks
that exported models are made of: elementwise ops with constants, residual Adds, shape
arithmetic through ShapeOf/Gather/Concat into Reshape, Transposes (into a MatMul and not),
MatMuls with constant weights, attention-like products (fused attention with split and mask
views), tanh-GELU regions, LayerNorm into a projection, Softmax, Concat and a Slice back by
ShapeOf. One infer request then meets a random sequence of (b, s) with repeats, so that the
full path, the symbolic checks, symbolic mode, its per-binding records, step plans and their
replay all run; every output must match the reference (relative L2 1e-4) on random non-zero
inputs, with the runtime's invariant checks on (``DEBUG_CHECKS``).
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.testing import RUNTIME_DEVICE


def _i64(v):
    return np.array(v, dtype=np.int64)


def _rows_and_seq(v):
    return opset.gather(opset.shape_of(v), _i64([0, 1]), _i64(0))


def _block(kind: str, v, rng):
    """One [b, s, 8] -> [b, s, 8] block."""
    w = lambda *shape: opset.constant(rng.uniform(-0.5, 0.5, shape).astype(np.float32))  # noqa: E731
    if kind == "unary":
        return opset.tanh(opset.multiply(v, w(8)))
    if kind == "residual":
        return opset.add(v, opset.relu(opset.add(opset.matmul(v, w(8, 8), False, False), w(8))))
    if kind == "heads":  # [b, s, 8] -> [b, s, 2, 4] -> heads first -> back
        split = opset.reshape(v, opset.concat([_rows_and_seq(v), _i64([2, 4])], 0), False)
        heads = opset.sigmoid(opset.transpose(split, _i64([0, 2, 1, 3])))
        back = opset.transpose(heads, _i64([0, 2, 1, 3]))
        return opset.reshape(back, opset.concat([_rows_and_seq(v), _i64([-1])], 0), False)
    if kind == "attention":  # softmax(v v^T) v, the transposed side read through by the GEMM
        scores = opset.matmul(v, opset.transpose(v, _i64([0, 2, 1])), False, False)
        return opset.matmul(opset.softmax(opset.multiply(scores, np.float32(0.3)), -1), v, False, False)
    if kind == "concat_slice":  # [b, 2s, 8] then the first s rows back, bounds from ShapeOf
        both = opset.concat([v, opset.relu(v)], 1)
        seq = opset.gather(opset.shape_of(v), _i64([1]), _i64(0))
        return opset.slice(both, _i64([0]), seq, _i64([1]), _i64([1]))
    if kind == "softmax":
        return opset.softmax(opset.add(v, w(1, 1, 8)), -1)
    if kind == "gelu":  # tanh-GELU as exported: a fused region reading the GEMM's value 5 times
        h = opset.matmul(v, w(8, 8), False, False)
        inner = opset.multiply(opset.add(h, opset.multiply(opset.multiply(h, opset.multiply(h, h)),
                                                           np.float32(0.044715))), np.float32(0.8))
        return opset.multiply(opset.multiply(h, opset.add(opset.tanh(inner), np.float32(1.0))), np.float32(0.5))
    if kind == "qkv":  # projection, split, heads, scaled scores + causal mask cut by ShapeOf,
        # softmax, @ v, heads back: a fused attention reading strided views
        q, k, u = opset.split(opset.matmul(v, w(8, 24), False, False), _i64(-1), 3).outputs()
        heads = [opset.transpose(opset.reshape(t, _i64([0, 0, 2, 4]), True), _i64(order))
                 for t, order in ((q, [0, 2, 1, 3]), (k, [0, 2, 3, 1]), (u, [0, 2, 1, 3]))]
        seq = opset.gather(opset.shape_of(v), _i64([1]), _i64(0))
        tri = np.triu(np.full((16, 16), -1e4, np.float32), 1)
        mask = opset.slice(tri, _i64([0, 0]), opset.concat([seq, seq], 0), _i64([1, 1]), _i64([0, 1]))
        scores = opset.add(opset.multiply(opset.matmul(heads[0], heads[1], False, False), np.float32(0.5)), mask)
        att = opset.matmul(opset.softmax(scores, -1), heads[2], False, False)
        return opset.reshape(opset.transpose(att, _i64([0, 2, 1, 3])), _i64([0, 0, -1]), True)
    if kind == "layernorm":  # LayerNorm into a projection: a normalized GEMM
        h = opset.mvn(opset.add(v, w(8)), _i64([-1]), True, 1e-5, "inside_sqrt")
        return opset.matmul(opset.add(opset.multiply(h, w(8)), w(8)), w(8, 8), False, False)
    if kind == "position":  # data computed on the host from a shape (positions 0..s-1),
        # reshaped to a target from ShapeOf: transformers' mask and position logic
        seq = opset.gather(opset.shape_of(v), _i64(1), _i64(0))
        pos = opset.range(_i64(0), seq, _i64(1), "i64")
        target = opset.concat([_i64([1]), opset.unsqueeze(seq, _i64([0])), _i64([1])], 0)
        return opset.add(v, opset.convert(opset.reshape(pos, target, False), "f32"))
    raise AssertionError(kind)


KINDS = ("unary", "residual", "heads", "attention", "concat_slice", "softmax", "gelu", "qkv",
         "layernorm", "position")


@st.composite
def programs(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    x = opset.parameter(["b", "s", 8], np.float32, name="x")
    v = x.output(0)
    for kind in draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=5)):
        v = _block(kind, v, rng)
    model = Model([opset.result(v, name="y")], [x])
    sizes = draw(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 9)), min_size=3, max_size=6,
                          unique=True))
    # sizes in any order, each a run of 1 to 3 infers: a new size's first infer is a miss (the
    # full path while fewer than SYMBOLIC_CHECKS bindings are checked, else symbolic), its
    # repeat a hit with nothing changed (the step plan is built), later ones replays; a new
    # size may come after any of these
    seq: list = []
    for z in draw(st.lists(st.sampled_from(sizes), min_size=3, max_size=8)):
        seq += [z] * draw(st.integers(1, 3))
    return model, seq, rng


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_runtime_matches_the_reference_over_changing_shapes(case):
    model, sizes, rng = case
    req = compile_program(model, RUNTIME_DEVICE, {"DEBUG_CHECKS": True}).create_infer_request()
    for b, s in sizes:
        feeds = {"x": rng.standard_normal((b, s, 8)).astype(np.float32)}
        got = req.infer(feeds)["y"]
        ref = netpass.reference.infer(model, feeds)["y"]
        assert got.shape == ref.shape, ((b, s), got.shape, ref.shape)
        err = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-12)
        assert err <= 1e-4, ((b, s), err)
