"""Fused attention over batch views (netpass.runtime.attention): scores and probabilities
reshaped between per-head matrices ``[b * h, m, n]`` and ``[b, h, m, n]`` inside the chain
(Bloom, DeBERTa, exports that multiply heads with bmm), a scalar computed from a shape
dividing k, and ShapeOf readers of what the fusion absorbs. Checked against the reference on
random data over changing shapes (rel. L2 <= 1e-5; the flash kernel, tensor cores emulated
on PoCL, 3xTF32 <= 4e-6)."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64, randn_f32, rel_l2_unfloored

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.runtime.device import Engine, select_device
from netpass.runtime.kinds import attention as attention_kind
from netpass.testing import RUNTIME_DEVICE

H, D = 2, 8


def _dim(x, i: int):
    return opset.gather(opset.shape_of(x), ints64([i]), ints64(0))


def _bloom() -> Model:
    """Bloom's attention: x [b, s, h*d] to per-head matrices [b*h, s, d], scores times a scale
    plus a per-head bias [b*h, 1, s] (ALiBi), viewed as [b, h, s, s] for the mask
    [b, 1, 1, s], softmax, viewed back as [b*h, s, s] for the product with v, heads merged."""
    rng = np.random.default_rng(0)
    x = opset.parameter([-1, -1, H * D], np.float32, name="x")
    bias = opset.parameter([-1, 1, -1], np.float32, name="bias")
    mask = opset.parameter([-1, 1, 1, -1], np.float32, name="mask")
    seq = _dim(x, 1)

    def heads():
        y = opset.matmul(x, randn_f32(rng, H * D, H * D), False, False)
        y = opset.transpose(opset.reshape(y, ints64([0, 0, H, D]), True), ints64([0, 2, 1, 3]))
        return opset.reshape(y, opset.concat([ints64([-1]), seq, ints64([D])], 0), False)
    q, k, v = heads(), heads(), heads()
    scores = opset.add(opset.multiply(opset.matmul(q, k, False, True), np.float32(D ** -0.5)),
                       bias)
    scores = opset.reshape(scores, opset.concat([ints64([-1, H]), seq, seq], 0), False)
    p = opset.softmax(opset.add(scores, mask), -1)
    p = opset.reshape(p, opset.concat([ints64([-1]), seq, seq], 0), False)
    o = opset.reshape(opset.matmul(p, v, False, False),
                      opset.concat([ints64([-1, H]), seq, ints64([D])], 0), False)
    y = opset.reshape(opset.transpose(o, ints64([0, 2, 1, 3])), ints64([0, 0, H * D]), True)
    return Model([opset.result(y, name="y")], [x, bias, mask])


def _xglm() -> Model:
    """XGLM's attention (TorchScript): bmm-style scores [b*h, s, s] viewed as [b, h, s, s]
    for the mask, clamped at the float's lowest by a Maximum, viewed back for the softmax,
    the probabilities viewed as [b, h, s, s] and back again before the product with v."""
    rng = np.random.default_rng(1)
    x = opset.parameter([-1, -1, H * D], np.float32, name="x")
    mask = opset.parameter([-1, 1, 1, -1], np.float32, name="mask")
    seq = _dim(x, 1)
    per_head = opset.concat([ints64([-1, H]), seq, seq], 0)
    rows = opset.concat([ints64([-1]), seq, seq], 0)

    def heads():
        y = opset.matmul(x, randn_f32(rng, H * D, H * D), False, False)
        y = opset.transpose(opset.reshape(y, ints64([0, 0, H, D]), True), ints64([0, 2, 1, 3]))
        return opset.reshape(y, opset.concat([ints64([-1]), seq, ints64([D])], 0), False)
    q, k, v = heads(), heads(), heads()
    scores = opset.add(opset.reshape(opset.matmul(q, k, False, True), per_head, False), mask)
    scores = opset.maximum(scores, np.float32(np.finfo(np.float32).min))
    p = opset.softmax(opset.reshape(scores, rows, False), -1)
    p = opset.reshape(opset.reshape(p, per_head, False), rows, False)
    y = opset.matmul(p, v, False, False)
    return Model([opset.result(y, name="y")], [x, mask])


def _bloom_feeds(rng, b: int, s: int) -> dict:
    return {"x": randn_f32(rng, b, s, H * D), "bias": randn_f32(rng, b * H, 1, s),
            "mask": np.where(rng.random((b, 1, 1, s)) < 0.3, -1e4, 0).astype(np.float32)}


def _deberta(scaled: str) -> Model:
    """DeBERTa's attention (torch's TorchScript export): per-head q, k, v [b*h, s, d] of
    dynamic shape, k (or q) scaled by a scalar computed from q's shape (divided by
    ``sqrt(d)``, or multiplied by its inverse), a relative-position term added, the views'
    target shapes read from the scores' and the probabilities' own shapes, a Where mask."""
    params = [opset.parameter([-1, -1, -1], np.float32, name=n) for n in ("q", "k", "v", "rel")]
    mask = opset.parameter([-1, 1, 1, -1], np.bool_, name="mask")
    q, k, v, rel = params
    root = opset.sqrt(opset.convert(opset.squeeze(_dim(q, 2), ints64([0])), np.float32))
    if scaled == "k":
        k = opset.divide(k, root)
    else:
        q = opset.multiply(opset.divide(np.float32(1.0), root), q)
    scores = opset.add(opset.matmul(q, k, False, True), rel)
    target = opset.concat([ints64([-1, H]), _dim(scores, 1), _dim(scores, 2)], 0)
    scores = opset.reshape(scores, target, False)
    p = opset.softmax(opset.select(mask, scores, np.float32(-3.4e38)), -1)
    p = opset.reshape(p, opset.concat([ints64([-1]), _dim(p, 2), _dim(p, 3)], 0), False)
    y = opset.matmul(p, v, False, False)
    return Model([opset.result(y, name="y")], [*params, mask])


def _deberta_feeds(rng, b: int, s: int) -> dict:
    mask = np.ones((b, 1, 1, s), bool)
    mask[1:, ..., s // 2 + 1:] = False
    return {"q": randn_f32(rng, b * H, s, D), "k": randn_f32(rng, b * H, s, D), "v": randn_f32(rng, b * H, s, D),
            "rel": randn_f32(rng, b * H, s, s), "mask": mask}


def _check(model, feeds_list, config=None, tol=1e-5, fallbacks=0):
    req = compile_program(model, RUNTIME_DEVICE, config).create_infer_request()
    for feeds in feeds_list:
        got = req.infer(feeds)["y"]
        want = netpass.reference.infer(model, feeds)["y"]
        assert got.shape == want.shape
        assert rel_l2_unfloored(got, want) <= tol, {n: a.shape for n, a in feeds.items()}
    assert req.stats["host_fallbacks"] == fallbacks
    return req


def _running(model) -> list:
    """The kinds of the nodes that run on the device (no shape computations)."""
    return [n.kind for n in Program.from_model(model).nodes
            if not n.shape_only and not n.in_shape_of_subgraph]


def test_bloom_views_are_one_attention(rng):
    model = _bloom()
    kinds = _running(model)
    assert kinds.count("FusedAttention") == 1 and "Softmax" not in kinds
    assert kinds.count("MatMul") == 3  # (the projections)
    # one query row (the decode kernel), more than one block of keys (the row kernel)
    _check(model, [_bloom_feeds(rng, b, s) for b, s in ((2, 5), (1, 1), (3, 70), (2, 5))])


def test_probabilities_viewed_twice_are_one_attention(rng):
    """XGLM: two views of the probabilities between the softmax and the product with v."""
    model = _xglm()
    kinds = _running(model)
    assert kinds.count("FusedAttention") == 1
    assert not {"Softmax", "Maximum", "Add"} & set(kinds) and kinds.count("MatMul") == 3
    feeds = []
    for b, s in ((2, 5), (1, 1), (3, 70)):
        f = _bloom_feeds(rng, b, s)
        feeds.append({"x": f["x"], "mask": f["mask"]})
    _check(model, feeds)


@pytest.mark.parametrize("scaled", ["k", "q"])
def test_deberta_scale_and_shape_readers(scaled, rng):
    """The absorbed scores and probabilities stay for the ShapeOfs that read them, and never
    run: per infer the attention is the only kernel."""
    model = _deberta(scaled)
    kinds = _running(model)
    assert kinds.count("FusedAttention") == 1
    assert not {"Softmax", "MatMul", "Select", "Divide", "Multiply"} & set(kinds)
    req = _check(model, [_deberta_feeds(rng, b, s) for b, s in ((2, 5), (3, 1), (2, 67))])
    assert req.stats["kernels_enqueued"] == 3


@pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="emulated tensor cores on PoCL")
def test_flash_kernel_over_views(monkeypatch, rng):
    eng = Engine.get(select_device("CPU"))
    monkeypatch.setattr(eng, "mma", "emulated")
    monkeypatch.setattr(attention_kind, "FLASH_MIN_M", 4)
    req = _check(_bloom(), [_bloom_feeds(rng, b, s) for b, s in ((2, 37), (1, 20))], tol=4e-6)
    assert any("flash_attention(" in key[2] for key in req.network.kernel_objects)


@pytest.mark.parametrize("order", ["keys and rows", "heads"])
def test_a_view_the_kernels_cannot_take_runs_on_the_host(order, rng):
    """A Reshape of the scores that moves the keys into the rows, or one whose batch layout
    and m1's have no common split ([2, 3] against [3, 2]): the host runs the fused node, with
    the same results."""
    q, k, v = (opset.parameter([2, 3, -1, D], np.float32, name=n) for n in "qkv")
    scores = opset.matmul(q, k, False, True)
    seq = _dim(q, 2)
    target = opset.concat([ints64([3, 2]), seq, seq], 0) if order == "heads" \
        else opset.concat([ints64([2, 3, 1]), opset.multiply(seq, seq)], 0)
    p = opset.softmax(opset.reshape(scores, target, False), -1)
    p = opset.reshape(p, opset.concat([ints64([2, 3]), seq, seq], 0), False)
    model = Model([opset.result(opset.matmul(p, v, False, False), name="y")], [q, k, v])
    assert _running(model).count("FusedAttention") == 1
    _check(model, [{n: randn_f32(rng, 2, 3, s, D) for n in "qkv"} for s in (4, 6)], fallbacks=2)


def test_a_softmax_over_flattened_rows_stays_unfused(rng):
    """scores [b, h, s, s] reshaped to rows [b * h * s, s] for the softmax and back: no batch
    view (the rows are not a batch dim), so the ops run as they are."""
    q, k, v = (opset.parameter([2, H, -1, D], np.float32, name=n) for n in "qkv")
    scores = opset.matmul(q, k, False, True)
    p = opset.softmax(opset.reshape(scores, opset.concat([ints64([-1]), _dim(q, 2)], 0), False), -1)
    p = opset.reshape(p, opset.shape_of(scores), False)
    model = Model([opset.result(opset.matmul(p, v, False, False), name="y")], [q, k, v])
    assert "FusedAttention" not in _running(model)
    _check(model, [{n: randn_f32(rng, 2, H, s, D) for n in "qkv"} for s in (3, 5)])
