"""A swap of the last two axes by way of 3-D (``netpass.runtime.swap_views``): the dynamo
exporter's ``k.transpose(-1, -2)`` for a batched matmul becomes one Transpose, which the
attention fusion takes as its keys' transpose; equal to the reference on random data."""
from __future__ import annotations

import numpy as np

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.testing import RUNTIME_DEVICE

HEADS, D = 4, 16


def _i64(v):
    return np.array(v, dtype=np.int64)


def _f(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _swap_3d(k, back=(1, HEADS, D, -1)):
    """[1, h, s, D] -> [h, s, D] (the target read off k's shape) -> [h, D, s] -> ``back``."""
    seq = opset.gather(opset.shape_of(k), _i64([2]), _i64(0))
    flat = opset.reshape(k, opset.concat([_i64([HEADS]), seq, _i64([D])], 0), False)
    return opset.reshape(opset.transpose(flat, _i64([0, 2, 1])), _i64(list(back)), False)


def _heads(x):
    return opset.transpose(opset.reshape(x, _i64([0, 0, HEADS, D]), True), _i64([0, 2, 1, 3]))


def _attention(rng, back=(1, HEADS, D, -1)) -> Model:
    x = opset.parameter([1, -1, 32], np.float32, name="x")
    q, k, v = (_heads(opset.matmul(x, _f(rng, 32, HEADS * D), False, False)) for _ in range(3))
    scores = opset.multiply(opset.matmul(q, _swap_3d(k, back), False, False),
                            np.float32(D ** -0.5))
    att = opset.matmul(opset.softmax(scores, -1), v, False, False)
    y = opset.reshape(opset.transpose(att, _i64([0, 2, 1, 3])), _i64([0, 0, -1]), True)
    return Model([opset.result(y, name="y")], [x])


def test_the_detour_is_one_transpose_the_attention_reads(rng):
    nodes = Program.from_model(_attention(rng)).nodes
    att = [n for n in nodes if n.kind == "FusedAttention"]
    assert len(att) == 1
    keys = att[0].inputs[1][0]
    assert keys.kind == "Transpose"
    assert [int(a) for a in np.asarray(keys.inputs[1][0].value)] == [0, 1, 3, 2]
    assert not any(n.kind == "Transpose" and len(n.out_pshapes[0]) == 3 for n in nodes)


def _rel_l2(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def test_equal_to_the_reference(rng):
    """Prompts and single rows through one request, rel. L2 <= 1e-5."""
    model = _attention(rng)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for rows in (1, 5, 19, 1):
        feeds = {"x": _f(rng, 1, rows, 32)}
        assert _rel_l2(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-5


def test_a_regrouping_that_is_not_a_swap_stays(rng):
    """Back to [1, h, s, D] after the 3-D transpose: the sizes fit a [1, h, D, s] result
    only where s == D, so nothing proves a swap and the detour stays."""
    nodes = Program.from_model(_attention(rng, back=(1, HEADS, -1, D))).nodes
    assert any(n.kind == "Transpose" and len(n.out_pshapes[0]) == 3 for n in nodes)
