"""Rotary embeddings as one Rotary node (``netpass.runtime.rotary``): transformers'
``x * cos + rotate_half(x) * sin`` in one launch against the reference on random data (rel. L2
<= 1e-6), through a per-head Transpose read as a view, and the rotations that must stay as
they are."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32, rel_l2_unfloored

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.testing import RUNTIME_DEVICE

BIG = np.iinfo(np.int64).max  # (torch's export of x[..., h:])


def _half(x, start, stop):
    return opset.slice(x, np.array([start], np.int64), np.array([stop], np.int64),
                       np.array([1], np.int64), np.array([-1], np.int64))


def _rotate(x, cos, sin, d, swap=False, parts=None):
    """x * cos + cat(-x[..., d/2:], x[..., :d/2]) * sin (``swap``: operands the other way;
    ``parts``: the Concat's two inputs given)."""
    h = d // 2
    rot = opset.concat(parts or [opset.negative(_half(x, h, BIG)), _half(x, 0, h)], -1)
    if swap:
        return opset.add(opset.multiply(sin, rot), opset.multiply(cos, x))
    return opset.add(opset.multiply(x, cos), opset.multiply(rot, sin))


def _model(d=16, swap=False, transposed=False):
    """x [B, S, H, d] (per-head Transpose to [B, H, S, d] when ``transposed``), cos and sin
    [B, 1, S, d]."""
    x = opset.parameter([1, -1, 3, d] if transposed else [1, 3, -1, d], np.float32, name="x")
    cos = opset.parameter([1, 1, -1, d], np.float32, name="cos")
    sin = opset.parameter([1, 1, -1, d], np.float32, name="sin")
    xs = opset.transpose(x, np.array([0, 2, 1, 3], np.int64)) if transposed else x
    y = _rotate(xs, cos, sin, d, swap)
    return Model([opset.result(y, name="y")], [x, cos, sin])


def _feeds(rng, s, d=16, transposed=False):
    return {"x": randn_f32(rng, *((1, s, 3, d) if transposed else (1, 3, s, d))),
            "cos": randn_f32(rng, 1, 1, s, d), "sin": randn_f32(rng, 1, 1, s, d)}


def _kinds(model) -> list[str]:
    return [n.kind for n in Program.from_model(model).nodes if not n.is_constant]


@pytest.mark.parametrize("swap", [False, True])
def test_rotation_is_one_launch(swap, rng):
    model = _model(swap=swap)
    kinds = _kinds(model)
    assert kinds.count("Rotary") == 1
    assert not {"Slice", "Negative", "Concat", "Multiply", "Add"} & set(kinds)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in (1, 5, 9):
        feeds = _feeds(rng, s)
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-6
    assert req.stats["kernels_enqueued"] == 3


def test_a_per_head_transpose_is_read_as_a_view(rng):
    model = _model(transposed=True)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in (4, 7):
        feeds = _feeds(rng, s, transposed=True)
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-6
    assert req.stats["kernels_enqueued"] == 2  # the Transpose is no launch


def _stays(y, inputs, rng, s=5, d=16):
    model = Model([opset.result(y, name="y")], inputs)
    assert "Rotary" not in _kinds(model)
    feeds = _feeds(rng, s, d)
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)
    assert rel_l2_unfloored(got["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-6


def _inputs(d=16):
    return [opset.parameter([1, 3, -1, d], np.float32, name="x"),
            opset.parameter([1, 1, -1, d], np.float32, name="cos"),
            opset.parameter([1, 1, -1, d], np.float32, name="sin")]


def test_halves_in_the_other_order_stay(rng):
    x, cos, sin = _inputs()
    parts = [_half(x, 0, 8), opset.negative(_half(x, 8, BIG))]
    _stays(_rotate(x, cos, sin, 16, parts=parts), [x, cos, sin], rng)


def test_uneven_halves_stay(rng):
    x, cos, sin = _inputs()
    parts = [opset.negative(_half(x, 7, BIG)), _half(x, 0, 7)]
    _stays(_rotate(x, cos, sin, 16, parts=parts), [x, cos, sin], rng)


def test_another_tensors_halves_stay(rng):
    x, cos, sin = _inputs()
    other = opset.multiply(x, np.float32(2))
    parts = [opset.negative(_half(other, 8, BIG)), _half(other, 0, 8)]
    _stays(_rotate(x, cos, sin, 16, parts=parts), [x, cos, sin], rng)


def test_a_rotation_read_elsewhere_stays(rng):
    x, cos, sin = _inputs()
    rot = opset.concat([opset.negative(_half(x, 8, BIG)), _half(x, 0, 8)], -1)
    y = opset.add(opset.multiply(x, cos), opset.multiply(rot, sin))
    model = Model([opset.result(y, name="y"), opset.result(rot, name="rot")], [x, cos, sin])
    assert "Rotary" not in _kinds(model)
    feeds = _feeds(rng, 5)
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)
    want = netpass.reference.infer(model, feeds)
    assert all(rel_l2_unfloored(got[k], want[k]) <= 1e-6 for k in ("y", "rot"))



def _qk_model(keys_first: bool, d=16, hq=4, hk=2):
    """A layer's queries and keys cut from one projection of x [1, S, 24] (a Split, per-head
    Reshapes and Transposes), rotated by the same cos and sin (``keys_first``: the keys'
    rotation comes first and is read before the queries' is made), then q @ k^T."""
    rng = np.random.default_rng(5)
    x = opset.parameter([1, -1, 24], np.float32, name="x")
    cos = opset.parameter([1, 1, -1, d], np.float32, name="cos")
    sin = opset.parameter([1, 1, -1, d], np.float32, name="sin")
    proj = opset.matmul(x, randn_f32(rng, 24, (hq + hk) * d), False, False)
    pieces = opset.variadic_split(proj, np.array(-1, np.int64),
                                  np.array([hq * d, hk * d], np.int64)).outputs()
    heads = [opset.transpose(opset.reshape(p, np.array([0, 0, h, d], np.int64), True),
                             np.array([0, 2, 1, 3], np.int64)) for p, h in zip(pieces, (hq, hk))]
    if keys_first:
        k = _rotate(heads[1], cos, sin, d)
        k = opset.multiply(k, np.float32(0.5))  # (a reader of the keys before the queries)
        q = _rotate(heads[0], cos, sin, d)
    else:
        q = _rotate(heads[0], cos, sin, d)
        k = _rotate(heads[1], cos, sin, d)
    k = opset.concat([k, k], 1)  # (grouped-query heads: the keys repeated)
    y = opset.matmul(q, k, False, True)
    return Model([opset.result(y, name="y")], [x, cos, sin])


@pytest.mark.parametrize("keys_first", [False, True])
def test_queries_and_keys_rotate_in_one_launch(rng, keys_first):
    """One Rotary of two tensors (merge_rotary_pairs), however the export orders them; each
    read through its per-head view."""
    model = _qk_model(keys_first)
    prog = Program.from_model(model)
    rot = [n for n in prog.nodes if n.kind == "Rotary"]
    assert len(rot) == 1 and rot[0].num_outputs == 2
    assert all(u.index > rot[0].index for us in rot[0].users for u, _ in us)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in (1, 6):
        feeds = {"x": randn_f32(rng, 1, s, 24), "cos": randn_f32(rng, 1, 1, s, 16), "sin": randn_f32(rng, 1, 1, s, 16)}
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-6


def test_a_key_head_picked_by_a_gather_merges_with_the_queries(rng):
    """Falcon's TorchScript export: the fused projection's heads [B, S, 6, d], the queries a
    Slice of the first four, the key head picked by a Gather of index [-2]: both rotations
    reach the projection, so they merge."""
    d = 16
    x = opset.parameter([1, -1, 24], np.float32, name="x")
    cos = opset.parameter([1, -1, 1, d], np.float32, name="cos")
    sin = opset.parameter([1, -1, 1, d], np.float32, name="sin")
    heads = opset.reshape(opset.matmul(x, randn_f32(rng, 24, 6 * d), False, False),
                          np.array([0, 0, 6, d], np.int64), True)
    q = opset.slice(heads, np.array([0], np.int64), np.array([4], np.int64),
                    np.array([1], np.int64), np.array([2], np.int64))
    k = opset.gather(heads, np.array([-2], np.int64), np.array(2, np.int64))
    y = opset.matmul(opset.transpose(_rotate(q, cos, sin, d), np.array([0, 2, 1, 3], np.int64)),
                     opset.transpose(_rotate(k, cos, sin, d), np.array([0, 2, 3, 1], np.int64)),
                     False, False)
    model = Model([opset.result(y, name="y")], [x, cos, sin])
    rot = [n for n in Program.from_model(model).nodes if n.kind == "Rotary"]
    assert len(rot) == 1 and rot[0].num_outputs == 2
    feeds = {"x": randn_f32(rng, 1, 5, 24), "cos": randn_f32(rng, 1, 5, 1, d), "sin": randn_f32(rng, 1, 5, 1, d)}
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)["y"]
    assert rel_l2_unfloored(got, netpass.reference.infer(model, feeds)["y"]) <= 1e-5


def test_rotations_of_two_projections_stay_apart(rng):
    """Queries and keys of two separate inputs may depend on each other: no merge."""
    d = 16
    a = opset.parameter([1, 3, -1, d], np.float32, name="a")
    cos = opset.parameter([1, 1, -1, d], np.float32, name="cos")
    sin = opset.parameter([1, 1, -1, d], np.float32, name="sin")
    first = _rotate(a, cos, sin, d)
    second = _rotate(opset.add(first, np.float32(1.0)), cos, sin, d)
    model = Model([opset.result(second, name="y")], [a, cos, sin])
    rot = [n for n in Program.from_model(model).nodes if n.kind == "Rotary"]
    assert len(rot) == 2 and all(n.num_outputs == 1 for n in rot)
    feeds = {"a": randn_f32(rng, 1, 3, 5, d), "cos": randn_f32(rng, 1, 1, 5, d), "sin": randn_f32(rng, 1, 1, 5, d)}
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)["y"]
    assert rel_l2_unfloored(got, netpass.reference.infer(model, feeds)["y"]) <= 1e-6


def _partial_rotate(x, cos, sin, r, d):
    """GPT-NeoX's partial rotary: cat(rotate(x[..., :r]), x[..., r:])."""
    return opset.concat([_rotate(_half(x, 0, r), cos, sin, r), _half(x, r, BIG)], -1)


def _partial_model(r=8, d=20, transposed=False):
    """x [1, 3, S, d] (or [1, S, 3, d] seen per head), cos and sin [1, 1, S, r]."""
    x = opset.parameter([1, -1, 3, d] if transposed else [1, 3, -1, d], np.float32, name="x")
    cos = opset.parameter([1, 1, -1, r], np.float32, name="cos")
    sin = opset.parameter([1, 1, -1, r], np.float32, name="sin")
    xs = opset.transpose(x, np.array([0, 2, 1, 3], np.int64)) if transposed else x
    return Model([opset.result(_partial_rotate(xs, cos, sin, r, d), name="y")], [x, cos, sin])


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("r, d", [(8, 20), (4, 16), (2, 6)])
def test_a_partial_rotation_is_one_launch(rng, r, d, transposed):
    """cat(rotate(x[..., :r]), x[..., r:]): one Rotary of x rotating its first r elements and
    copying the rest (no Slice or Concat left), through a per-head Transpose too."""
    model = _partial_model(r, d, transposed)
    prog = Program.from_model(model)
    rot = [n for n in prog.nodes if n.kind == "Rotary"]
    assert len(rot) == 1 and rot[0].subgraph.rotated == r
    assert not {"Slice", "Concat"} & {n.kind for n in prog.nodes}
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in (1, 5):
        feeds = {"x": randn_f32(rng, *((1, s, 3, d) if transposed else (1, 3, s, d))),
                 "cos": randn_f32(rng, 1, 1, s, r), "sin": randn_f32(rng, 1, 1, s, r)}
        want = netpass.reference.infer(model, feeds)["y"]
        got = req.infer(feeds)["y"]
        assert rel_l2_unfloored(got, want) <= 1e-6
        np.testing.assert_array_equal(got[..., r:], want[..., r:])  # (copied as they are)
    assert req.stats["kernels_enqueued"] == 2


def test_partial_rotations_of_queries_and_keys_merge(rng):
    """A layer's queries and keys rotated partially by the same tables: one launch."""
    d, r = 16, 8
    x = opset.parameter([1, -1, 6 * d], np.float32, name="x")
    cos = opset.parameter([1, 1, -1, r], np.float32, name="cos")
    sin = opset.parameter([1, 1, -1, r], np.float32, name="sin")
    proj = opset.matmul(x, randn_f32(rng, 6 * d, 6 * d), False, False)
    q, k = (opset.transpose(opset.reshape(p, np.array([0, 0, 3, d], np.int64), True),
                            np.array([0, 2, 1, 3], np.int64))
            for p in opset.split(proj, np.array(-1, np.int64), 2).outputs())
    y = opset.matmul(_partial_rotate(q, cos, sin, r, d), _partial_rotate(k, cos, sin, r, d),
                     False, True)
    model = Model([opset.result(y, name="y")], [x, cos, sin])
    rot = [n for n in Program.from_model(model).nodes if n.kind == "Rotary"]
    assert len(rot) == 1 and rot[0].num_outputs == 2 and rot[0].subgraph.rotated == r
    feeds = {"x": randn_f32(rng, 1, 4, 6 * d), "cos": randn_f32(rng, 1, 1, 4, r), "sin": randn_f32(rng, 1, 1, 4, r)}
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)["y"]
    assert rel_l2_unfloored(got, netpass.reference.infer(model, feeds)["y"]) <= 1e-6


@pytest.mark.parametrize("how", ["gap", "other_tensor", "pass_first"])
def test_what_is_not_a_partial_rotation_stays(rng, how):
    """The pass-through not starting where the rotation ends, cut from another tensor, or
    first in the Concat: the Concat stays (the rotation itself still fuses)."""
    d, r = 16, 8
    x = opset.parameter([1, 3, -1, d], np.float32, name="x")
    other = opset.parameter([1, 3, -1, d], np.float32, name="other")
    cos = opset.parameter([1, 1, -1, r], np.float32, name="cos")
    sin = opset.parameter([1, 1, -1, r], np.float32, name="sin")
    rot = _rotate(_half(x, 0, r), cos, sin, r)
    rest = {"gap": _half(x, r + 2, BIG), "other_tensor": _half(other, r, BIG),
            "pass_first": _half(x, r, BIG)}[how]
    y = opset.concat([rest, rot] if how == "pass_first" else [rot, rest], -1)
    model = Model([opset.result(y, name="y")], [x, other, cos, sin])
    prog = Program.from_model(model)
    assert "Concat" in {n.kind for n in prog.nodes}
    assert all(n.subgraph.rotated is None for n in prog.nodes if n.kind == "Rotary")
    feeds = {"x": randn_f32(rng, 1, 3, 5, d), "other": randn_f32(rng, 1, 3, 5, d),
             "cos": randn_f32(rng, 1, 1, 5, r), "sin": randn_f32(rng, 1, 1, 5, r)}
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)["y"]
    assert rel_l2_unfloored(got, netpass.reference.infer(model, feeds)["y"]) <= 1e-6


def _rms(x, scale):
    """An RMSNorm over the last axis as exports write it, then its scale."""
    ms = opset.reduce_mean(opset.power(x, np.float32(2.0)), np.array([-1], np.int64), True)
    inv = opset.divide(np.float32(1.0), opset.sqrt(opset.add(ms, np.float32(1e-6))))
    return opset.multiply(opset.multiply(x, inv), scale)


def test_queries_and_keys_through_their_own_norms_rotate_in_one_launch(rng):
    """Qwen3's per-head q and k norms between the projection's pieces and the rotation: the
    pieces still come from one node, so the two rotations merge."""
    d = 16
    x = opset.parameter([1, -1, 6 * d], np.float32, name="x")
    cos = opset.parameter([1, 1, -1, d], np.float32, name="cos")
    sin = opset.parameter([1, 1, -1, d], np.float32, name="sin")
    proj = opset.matmul(x, randn_f32(rng, 6 * d, 6 * d), False, False)
    heads = [opset.transpose(_rms(opset.reshape(p, np.array([0, 0, 3, d], np.int64), True),
                                  (1 + 0.1 * randn_f32(rng, d)).astype(np.float32)),
                             np.array([0, 2, 1, 3], np.int64))
             for p in opset.split(proj, np.array(-1, np.int64), 2).outputs()]
    y = opset.matmul(_rotate(heads[0], cos, sin, d), _rotate(heads[1], cos, sin, d), False, True)
    model = Model([opset.result(y, name="y")], [x, cos, sin])
    rot = [n for n in Program.from_model(model).nodes if n.kind == "Rotary"]
    assert len(rot) == 1 and rot[0].num_outputs == 2
    feeds = {"x": randn_f32(rng, 1, 5, 6 * d), "cos": randn_f32(rng, 1, 1, 5, d), "sin": randn_f32(rng, 1, 1, 5, d)}
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)["y"]
    assert rel_l2_unfloored(got, netpass.reference.infer(model, feeds)["y"]) <= 1e-5


def test_slices_of_one_tensor_are_rotated_as_views(rng):
    """GPT-NeoX's heads hold q, k and v side by side ([..., 3 d]): the rotations read the q and
    k slices through their strides (no copy of either), in one launch, then the product."""
    d = 16
    x = opset.parameter([1, 3, -1, 3 * d], np.float32, name="x")
    cos = opset.parameter([1, 1, -1, d], np.float32, name="cos")
    sin = opset.parameter([1, 1, -1, d], np.float32, name="sin")
    q, k = (_rotate(_half(x, a * d, (a + 1) * d), cos, sin, d) for a in (0, 1))
    model = Model([opset.result(opset.matmul(q, k, False, True), name="y")], [x, cos, sin])
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in (1, 5):
        feeds = {"x": randn_f32(rng, 1, 3, s, 3 * d), "cos": randn_f32(rng, 1, 1, s, d),
                 "sin": randn_f32(rng, 1, 1, s, d)}
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-6
    assert req.stats["kernels_enqueued"] == 4  # (a Rotary of both and the product, twice)
