"""A swap of the last two axes by way of 3-D (``netpass.runtime.swap_views``): the dynamo
exporter's ``k.transpose(-1, -2)`` for a batched matmul becomes one Transpose, which the
attention fusion takes as its keys' transpose; equal to the reference on random data."""
from __future__ import annotations

import numpy as np
from graph_blocks import ints64, randn_f32, rel_l2_unfloored

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.testing import RUNTIME_DEVICE

HEADS, D = 4, 16


def _swap_3d(k, back=(1, HEADS, D, -1)):
    """[1, h, s, D] -> [h, s, D] (the target read off k's shape) -> [h, D, s] -> ``back``."""
    seq = opset.gather(opset.shape_of(k), ints64([2]), ints64(0))
    flat = opset.reshape(k, opset.concat([ints64([HEADS]), seq, ints64([D])], 0), False)
    return opset.reshape(opset.transpose(flat, ints64([0, 2, 1])), ints64(list(back)), False)


def _heads(x):
    return opset.transpose(opset.reshape(x, ints64([0, 0, HEADS, D]), True), ints64([0, 2, 1, 3]))


def _attention(rng, back=(1, HEADS, D, -1)) -> Model:
    x = opset.parameter([1, -1, 32], np.float32, name="x")
    q, k, v = (_heads(opset.matmul(x, randn_f32(rng, 32, HEADS * D), False, False)) for _ in range(3))
    scores = opset.multiply(opset.matmul(q, _swap_3d(k, back), False, False),
                            np.float32(D ** -0.5))
    att = opset.matmul(opset.softmax(scores, -1), v, False, False)
    y = opset.reshape(opset.transpose(att, ints64([0, 2, 1, 3])), ints64([0, 0, -1]), True)
    return Model([opset.result(y, name="y")], [x])


def test_the_detour_is_one_transpose_the_attention_reads(rng):
    nodes = Program.from_model(_attention(rng)).nodes
    att = [n for n in nodes if n.kind == "FusedAttention"]
    assert len(att) == 1
    keys = att[0].inputs[1][0]
    assert keys.kind == "Transpose"
    assert [int(a) for a in np.asarray(keys.inputs[1][0].value)] == [0, 1, 3, 2]
    assert not any(n.kind == "Transpose" and len(n.out_pshapes[0]) == 3 for n in nodes)


def test_equal_to_the_reference(rng):
    """Prompts and single rows through one request, rel. L2 <= 1e-5."""
    model = _attention(rng)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for rows in (1, 5, 19, 1):
        feeds = {"x": randn_f32(rng, 1, rows, 32)}
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-5


def test_a_regrouping_that_is_not_a_swap_stays(rng):
    """Back to [1, h, s, D] after the 3-D transpose: the sizes fit a [1, h, D, s] result
    only where s == D, so nothing proves a swap and the detour stays."""
    nodes = Program.from_model(_attention(rng, back=(1, HEADS, -1, D))).nodes
    assert any(n.kind == "Transpose" and len(n.out_pshapes[0]) == 3 for n in nodes)
