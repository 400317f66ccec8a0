"""GPT-J's and CodeGen's rotary embeddings, neighbouring pairs rotated
(``rotate_every_two``), as one Rotary node (``netpass.runtime.rotary``): against the reference
on random data (rel. L2 <= 1e-6), whole, partial, queries and keys merged, and the look-alikes
that must stay as they are."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32, rel_l2_unfloored

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.testing import RUNTIME_DEVICE

BIG = np.iinfo(np.int64).max  # (torch's export of x[..., 1::2])


def _cut(x, start, stop, step=1):
    return opset.slice(x, np.array([start], np.int64), np.array([stop], np.int64),
                       np.array([step], np.int64), np.array([-1], np.int64))


def _flatten_pairs(stacked, target=None):
    """Reshape [..., h, 2] to [..., 2h] by TorchScript's target: the stacked tensor's own
    shape without its last two dims, then -1 (a ShapeOf reads the Concat); or ``target``."""
    if target is None:
        dims = opset.shape_of(stacked)
        target = opset.concat([_cut(dims, 0, -2), np.array([-1], np.int64)], 0)
    return opset.reshape(stacked, target, False)


def _every_two(x, swap=False, target=None):
    """flatten(stack((-x[..., 1::2], x[..., ::2]), -1)) (``swap``: the halves the other
    way)."""
    last = np.array([-1], np.int64)
    odd = opset.unsqueeze(opset.negative(_cut(x, 1, BIG, 2)), last)
    even = opset.unsqueeze(_cut(x, 0, BIG, 2), last)
    return _flatten_pairs(opset.concat([even, odd] if swap else [odd, even], -1), target)


def _rotate(x, cos, sin, **kw):
    return opset.add(opset.multiply(x, cos), opset.multiply(_every_two(x, **kw), sin))


def _inputs(d=16, r=None):
    r = r or d
    return [opset.parameter([1, 3, -1, d], np.float32, name="x"),
            opset.parameter([1, 1, -1, r], np.float32, name="cos"),
            opset.parameter([1, 1, -1, r], np.float32, name="sin")]


def _feeds(rng, s, d=16, r=None):
    r = r or d
    return {"x": randn_f32(rng, 1, 3, s, d), "cos": randn_f32(rng, 1, 1, s, r), "sin": randn_f32(rng, 1, 1, s, r)}


def _rotaries(model) -> list:
    return [n for n in Program.from_model(model).nodes if n.kind == "Rotary"]


def _check(model, rng, d=16, r=None, sizes=(1, 5, 9)) -> dict:
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in sizes:
        feeds = _feeds(rng, s, d, r)
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-6
    return req.stats


def test_a_pair_rotation_is_one_launch(rng):
    x, cos, sin = _inputs()
    model = Model([opset.result(_rotate(x, cos, sin), name="y")], [x, cos, sin])
    rot = _rotaries(model)
    assert len(rot) == 1 and rot[0].subgraph.interleaved and rot[0].subgraph.rotated is None
    running = {n.kind for n in Program.from_model(model).nodes
               if not (n.is_constant or n.shape_only or n.in_shape_of_subgraph)}
    assert not {"Slice", "Negative", "Unsqueeze", "Concat", "Reshape", "Multiply", "Add"} & running
    assert _check(model, rng)["kernels_enqueued"] == 3


def test_the_whole_axis_with_an_empty_rest_is_one_launch(rng):
    """GPT-J with its rotary dim the head size: cat(rotate(x[..., :d]), x[..., d:])."""
    x, cos, sin = _inputs()
    y = opset.concat([_rotate(_cut(x, 0, 16), cos, sin), _cut(x, 16, BIG)], -1)
    model = Model([opset.result(y, name="y")], [x, cos, sin])
    rot = _rotaries(model)
    assert len(rot) == 1 and rot[0].subgraph.interleaved and rot[0].subgraph.rotated is None
    assert "Concat" not in {n.kind for n in Program.from_model(model).nodes}
    assert _check(model, rng)["kernels_enqueued"] == 3


@pytest.mark.parametrize("r, d", [(8, 20), (4, 16), (2, 6)])
def test_a_partial_pair_rotation_is_one_launch(rng, r, d):
    """cat(rotate_every_two(x[..., :r]) ..., x[..., r:]): the rest copied as it is."""
    x, cos, sin = _inputs(d, r)
    y = opset.concat([_rotate(_cut(x, 0, r), cos, sin), _cut(x, r, BIG)], -1)
    model = Model([opset.result(y, name="y")], [x, cos, sin])
    rot = _rotaries(model)
    assert len(rot) == 1 and rot[0].subgraph.interleaved and rot[0].subgraph.rotated == r
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in (1, 5):
        feeds = _feeds(rng, s, d, r)
        want, got = netpass.reference.infer(model, feeds)["y"], req.infer(feeds)["y"]
        assert rel_l2_unfloored(got, want) <= 1e-6
        np.testing.assert_array_equal(got[..., r:], want[..., r:])
    assert req.stats["kernels_enqueued"] == 2


def test_queries_and_keys_rotate_in_one_launch(rng):
    """A layer's queries and keys, pieces of one projection, rotated by the same tables."""
    d = 16
    x = opset.parameter([1, -1, 6 * d], np.float32, name="x")
    cos = opset.parameter([1, -1, 1, d], np.float32, name="cos")
    sin = opset.parameter([1, -1, 1, d], np.float32, name="sin")
    proj = opset.matmul(x, randn_f32(rng, 6 * d, 6 * d), False, False)
    q, k = (_rotate(opset.reshape(p, np.array([0, 0, 3, d], np.int64), True), cos, sin)
            for p in opset.split(proj, np.array(-1, np.int64), 2).outputs())
    y = opset.matmul(opset.transpose(q, np.array([0, 2, 1, 3], np.int64)),
                     opset.transpose(k, np.array([0, 2, 3, 1], np.int64)), False, False)
    model = Model([opset.result(y, name="y")], [x, cos, sin])
    rot = _rotaries(model)
    assert len(rot) == 1 and rot[0].num_outputs == 2 and rot[0].subgraph.interleaved
    feeds = {"x": randn_f32(rng, 1, 5, 6 * d), "cos": randn_f32(rng, 1, 5, 1, d), "sin": randn_f32(rng, 1, 5, 1, d)}
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)["y"]
    assert rel_l2_unfloored(got, netpass.reference.infer(model, feeds)["y"]) <= 1e-5


def _stays(y, inputs, rng):
    model = Model([opset.result(y, name="y")], inputs)
    assert not _rotaries(model)
    _check(model, rng, sizes=(5,))


def test_halves_stacked_the_other_way_stay(rng):
    x, cos, sin = _inputs()
    _stays(_rotate(x, cos, sin, swap=True), [x, cos, sin], rng)


def test_a_flattening_that_swaps_dims_stays(rng):
    """The stacked pairs of x [1, A, B, 16] reshaped to [1, B, A, 16]: with A = 1 the sum
    broadcasts to [1, B, B, 16], which a rotation of x (its shape) would not give."""
    x = opset.parameter([1, -1, -1, 16], np.float32, name="x")
    cos = opset.parameter([1, 1, 1, 16], np.float32, name="cos")
    sin = opset.parameter([1, 1, 1, 16], np.float32, name="sin")
    target = opset.gather(opset.shape_of(x), np.array([0, 2, 1, 3], np.int64),
                          np.array(0, np.int64))
    model = Model([opset.result(_rotate(x, cos, sin, target=target), name="y")], [x, cos, sin])
    assert not _rotaries(model)
    feeds = {"x": randn_f32(rng, 1, 1, 4, 16), "cos": randn_f32(rng, 1, 1, 1, 16),
             "sin": randn_f32(rng, 1, 1, 1, 16)}
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)["y"]
    want = netpass.reference.infer(model, feeds)["y"]
    assert got.shape == want.shape == (1, 4, 4, 16) and rel_l2_unfloored(got, want) <= 1e-6


def test_a_stacked_pair_read_elsewhere_stays(rng):
    x, cos, sin = _inputs()
    last = np.array([-1], np.int64)
    odd = opset.unsqueeze(opset.negative(_cut(x, 1, BIG, 2)), last)
    stacked = opset.concat([odd, opset.unsqueeze(_cut(x, 0, BIG, 2), last)], -1)
    y = opset.add(opset.multiply(x, cos), opset.multiply(_flatten_pairs(stacked), sin))
    extra = opset.reduce_sum(stacked, np.array([-1, -2], np.int64), True)
    model = Model([opset.result(y, name="y"), opset.result(extra, name="extra")], [x, cos, sin])
    assert not _rotaries(model)
    feeds = _feeds(rng, 5)
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)
    want = netpass.reference.infer(model, feeds)
    assert rel_l2_unfloored(got["y"], want["y"]) <= 1e-6 and rel_l2_unfloored(got["extra"], want["extra"]) <= 1e-6
