"""A Gather of one constant index (``kinds.indexing._picks_one``) read only by stride-reading
kernels is a strided view of its data: Bloom's fused projection viewed as [b, s, h, 3, d] and
q, k, v picked by ``[..., i, :]`` launch nothing of their own."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64, randn_f32, rel_l2

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.testing import RUNTIME_DEVICE


def _run(model, feeds_list):
    """Each feed's outputs within rel. L2 1e-5 of the reference; the request."""
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for feeds in feeds_list:
        out = req.infer(feeds)
        for k, r in netpass.reference.infer(model, feeds).items():
            assert out[k].shape == r.shape
            assert rel_l2(out[k], r) <= 1e-5, k
    return req


def _picks(model):
    return [n for n in Program.from_model(model).nodes if n.kind == "Gather"]


def _bloom_attention(h=2, d=8):
    """x [1, s, h*3*d] -> [1, s, h, 3, d]; q, k, v = Gather(axis 3, 0 / 1 / 2); q k^T * scale,
    softmax, @ v, heads merged back."""
    rng = np.random.default_rng(5)
    x = opset.parameter([1, -1, 3 * h * d], np.float32, name="x")
    fused = opset.reshape(opset.matmul(x, randn_f32(rng, 3 * h * d, 3 * h * d), False, False),
                          ints64([0, 0, h, 3, d]), True)
    q, k, v = (opset.gather(fused, np.int64(i), ints64(3)) for i in range(3))
    heads = ints64([0, 2, 1, 3])
    scores = opset.multiply(opset.matmul(opset.transpose(q, heads),
                                         opset.transpose(k, ints64([0, 2, 3, 1])), False, False),
                            np.float32(d ** -0.5))
    att = opset.matmul(opset.softmax(scores, -1), opset.transpose(v, heads), False, False)
    y = opset.reshape(opset.transpose(att, heads), ints64([0, 0, -1]), True)
    return Model([opset.result(y, name="y")], [x])


def test_picked_heads_read_by_the_attention_are_views(rng):
    model = _bloom_attention()
    picks = _picks(model)
    assert len(picks) == 3 and sum(n.strided_view for n in picks) >= 2
    _run(model, [{"x": randn_f32(rng, 1, s, 48)} for s in (1, 5, 5, 2)])


@pytest.mark.parametrize("index,axis", [(np.int64(-1), 1), (np.int64(0), 2), (ints64([2]), 1)])
def test_a_pick_read_by_a_matmul_is_a_view(rng, index, axis):
    """A scalar index drops the axis, a one-element index keeps it at size 1: either way the
    MatMul reads the picked rows through strides and only the MatMul launches."""
    x = opset.parameter([4, 3, 5, 6], np.float32, name="x")
    y = opset.matmul(opset.gather(x, index, ints64(axis)), randn_f32(rng, 6, 7), False, False)
    model = Model([opset.result(y, name="y")], [x])
    assert all(n.strided_view for n in _picks(model))
    req = _run(model, [{"x": randn_f32(rng, 4, 3, 5, 6)}])
    assert req.stats["kernels_enqueued"] == 1


def test_a_pick_read_by_an_elementwise_kernel_is_not_a_view(rng):
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    model = Model([opset.result(opset.relu(opset.gather(x, np.int64(1), ints64(1))), name="y")], [x])
    assert not any(n.strided_view for n in _picks(model))
    _run(model, [{"x": randn_f32(rng, 2, 3, 4)}])


def test_a_computed_index_is_not_a_pick(rng):
    x = opset.parameter([3, 5, 6], np.float32, name="x")
    i = opset.parameter([], np.int64, name="i")
    y = opset.matmul(opset.gather(x, i, ints64(1)), randn_f32(rng, 6, 2), False, False)
    model = Model([opset.result(y, name="y")], [x, i])
    assert not any(n.strided_view for n in _picks(model))
    _run(model, [{"x": randn_f32(rng, 3, 5, 6), "i": np.array(4, np.int64)}])
