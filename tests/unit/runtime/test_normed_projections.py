"""OLMo2's normalized projections (``q_norm(q_proj(x))``, an RMSNorm over the whole projection
before the heads' split): the q, k and v projections merge into one FullyConnected although
RmsNorms read q and k (``parallel_gemms._mergeable``), the norms read their pieces as strided
rows (``Program._strided_readers``, the ``rowop`` kernel's ``xrs``), the q and k rotations
find their common origin and run as one launch; against the reference (rel. L2 <= 1e-5) over
rows far from zero mean, one and several rows through one request; a look-alike (a
projection read by a LayerNorm) stays apart."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32, rel_l2_unfloored, repeat_kv

import netpass
from netpass import Model, opset
from netpass.runtime import program as program_module
from netpass.runtime.parallel_gemms import merge_parallel_gemms
from netpass.testing import RUNTIME_DEVICE

D, HEADS, KV_HEADS, HD = 32, 4, 2, 8
BIG = np.iinfo(np.int64).max


def _rms(x, width, rng):
    """transformers' RMSNorm over the last axis (``width``) as an export writes it, scaled."""
    ms = opset.reduce_mean(opset.power(x, np.float32(2.0)), np.array([-1], np.int64), True)
    h = opset.multiply(x, opset.divide(np.float32(1.0), opset.sqrt(opset.add(ms, np.float32(1e-6)))))
    return opset.multiply(h, 1.0 + randn_f32(rng, width, scale=0.2))


def _layer_norm(x, width, rng):
    """A LayerNorm (MVN and its scale) over the last axis: the look-alike."""
    mvn = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
    return opset.multiply(mvn, 1.0 + randn_f32(rng, width, scale=0.2))


def _proj(x, width, rng):
    """A Linear with a bias far from zero (the rows' mean is far from zero)."""
    return opset.add(opset.matmul(x, randn_f32(rng, D, width, scale=0.3), False, False),
                     3.0 + randn_f32(rng, width, scale=0.1))


def _heads(y, heads):
    """[1, s, heads * HD] -> [1, heads, s, HD]."""
    r = opset.reshape(y, np.array([1, -1, heads, HD], np.int64), False)
    return opset.transpose(r, np.array([0, 2, 1, 3], np.int64))


def _rotate(x, cos, sin):
    """x * cos + cat(-x[..., HD/2:], x[..., :HD/2]) * sin."""
    def half(start, stop):
        return opset.slice(x, np.array([start], np.int64), np.array([stop], np.int64),
                           np.array([1], np.int64), np.array([-1], np.int64))
    rot = opset.concat([opset.negative(half(HD // 2, BIG)), half(0, HD // 2)], -1)
    return opset.add(opset.multiply(x, cos), opset.multiply(rot, sin))


def _model(rng, norm=_rms):
    """OLMo2's attention: q and k projections normalized whole (``norm``), v not; the heads'
    split, rotary on q and k, attention over the heads."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    cos = opset.parameter([1, 1, -1, HD], np.float32, name="cos")
    sin = opset.parameter([1, 1, -1, HD], np.float32, name="sin")
    q = _rotate(_heads(norm(_proj(x, HEADS * HD, rng), HEADS * HD, rng), HEADS), cos, sin)
    k = _rotate(_heads(norm(_proj(x, KV_HEADS * HD, rng), KV_HEADS * HD, rng), KV_HEADS),
                cos, sin)
    v = _heads(_proj(x, KV_HEADS * HD, rng), KV_HEADS)
    k, v = (repeat_kv(t, KV_HEADS, HEADS // KV_HEADS, HD) for t in (k, v))
    s = opset.multiply(opset.matmul(q, k, False, True), np.float32(HD ** -0.5))
    y = opset.matmul(opset.softmax(s, -1), v, False, False)
    return Model([opset.result(y, name="y")], [x, cos, sin])


def _feeds(rng, s):
    return {"x": 5.0 + randn_f32(rng, 1, s, D), "cos": randn_f32(rng, 1, 1, s, HD),
            "sin": randn_f32(rng, 1, 1, s, HD)}


def _compiled(model):
    return netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})


def _running(prog) -> list:
    return [n for n in prog.nodes if not (n.is_constant or n.shape_only
                                          or n.in_shape_of_subgraph)]


def test_normed_projections_merge_and_their_rotations_too(rng):
    prog = _compiled(_model(rng)).runtime.program
    kinds = [n.kind for n in _running(prog)]
    assert kinds.count("FullyConnected") == 1 and kinds.count("Rotary") == 1
    split = next(n for n in prog.nodes if n.kind == "VariadicSplit")
    assert split.strided_view  # (the norms read their pieces in place: no copy)
    norms = [n for n in prog.nodes if n.kind == "RmsNorm"]
    assert len(norms) == 2 and all(n.inputs[0][0] is split and 0 in n.strided_inputs
                                   for n in norms)


@pytest.mark.parametrize("rows", [[1, 5, 1], [7, 1, 2]])
def test_normed_projections_match_the_reference(rng, rows):
    """Prompts and single-token steps through one request, rows far from zero mean."""
    model = _model(rng)
    req = _compiled(model).create_infer_request()
    for s in rows:
        feeds = _feeds(rng, s)
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-5


def test_merging_saves_launches(rng, monkeypatch):
    """Two GEMMs fewer and one rotation fewer than the projections apart; no split copies."""
    model = _model(rng)
    feeds = _feeds(rng, 1)
    merged = _compiled(model).create_infer_request()
    merged.infer(feeds)
    passes = tuple(p for p in program_module.NODE_PASSES if p is not merge_parallel_gemms)
    monkeypatch.setattr(program_module, "NODE_PASSES", passes)
    apart = _compiled(model).create_infer_request()
    apart.infer(feeds)
    assert apart.stats["kernels_enqueued"] - merged.stats["kernels_enqueued"] == 3


def test_a_projection_read_by_a_layer_norm_stays_apart(rng):
    """Only an RmsNorm reads a strided row: MVN-normalized projections stay as they are."""
    model = _model(rng, norm=_layer_norm)
    prog = _compiled(model).runtime.program
    kinds = [n.kind for n in _running(prog)]
    assert kinds.count("FullyConnected") == 3 and kinds.count("Rotary") == 2
    req = _compiled(model).create_infer_request()
    for s in (1, 4):
        feeds = _feeds(rng, s)
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-5


def _per_head_model(rng, batch):
    """Qwen3's attention: q and k normalized per head (``q_norm(q_proj(x).view(b, s, h, d))``,
    before the heads' transpose), v not; rotary on q and k, attention over the heads (as
    many key heads as query heads: ``repeat_kv`` is batch 1)."""
    x = opset.parameter([batch, -1, D], np.float32, name="x")
    cos = opset.parameter([batch, 1, -1, HD], np.float32, name="cos")
    sin = opset.parameter([batch, 1, -1, HD], np.float32, name="sin")

    def heads(y, n, norm):
        r = opset.reshape(y, np.array([batch, -1, n, HD], np.int64), False)
        return opset.transpose(_rms(r, HD, rng) if norm else r, np.array([0, 2, 1, 3], np.int64))
    q = _rotate(heads(_proj(x, HEADS * HD, rng), HEADS, True), cos, sin)
    k = _rotate(heads(_proj(x, HEADS * HD, rng), HEADS, True), cos, sin)
    v = heads(_proj(x, HEADS * HD, rng), HEADS, False)
    s = opset.multiply(opset.matmul(q, k, False, True), np.float32(HD ** -0.5))
    y = opset.matmul(opset.softmax(s, -1), v, False, False)
    return Model([opset.result(y, name="y")], [x, cos, sin])


@pytest.mark.parametrize("batch", [1, 3])
def test_norms_per_head_read_the_merged_projection_in_place(rng, batch):
    """The norms' rows are a head's HD values: per token, the heads HD apart and the tokens a
    whole projection apart (two strides, ``rowop``'s ``xrs``); the split stays a view. Prompts
    and single-token steps through one request against the reference."""
    model = _per_head_model(rng, batch)
    cm = _compiled(model)
    split = next(n for n in cm.runtime.program.nodes if n.kind == "VariadicSplit")
    assert split.strided_view
    req = cm.create_infer_request()
    for s in (1, 5, 1, 2):
        feeds = {"x": 5.0 + randn_f32(rng, batch, s, D), "cos": randn_f32(rng, batch, 1, s, HD),
                 "sin": randn_f32(rng, batch, 1, s, HD)}
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-5
