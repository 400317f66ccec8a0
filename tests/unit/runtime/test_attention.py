"""Fused attention (netpass.runtime.attention): which chains are fused, and that the kernel
computes what the unfused ops compute, on random data over changing shapes."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64, randn_f32, rel_l2
from torchvision_heads import torchvision_attention

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.testing import RUNTIME_DEVICE


def _heads(x, h, d, order=(0, 2, 1, 3)):
    """[b, s, h*d] -> [b, h, s, d] (or another order) as exports write it."""
    return opset.transpose(opset.reshape(x, ints64([0, 0, h, d]), True), ints64(list(order)))


def _check(model, feeds_list, n_attention=1, fallbacks=0):
    prog = Program.from_model(model)
    assert sum(n.kind == "FusedAttention" for n in prog.nodes) == n_attention
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for feeds in feeds_list:
        out = req.infer(feeds)
        ref = netpass.reference.infer(model, feeds)
        for k, r in ref.items():
            assert out[k].shape == r.shape
            assert rel_l2(out[k], r) <= 1e-5, (k, {n: a.shape for n, a in feeds.items()})
    assert req.stats["host_fallbacks"] == fallbacks
    return req


def _decoder_attention(h=2, d=8, max_seq=96):
    """GPT-style: x [1, s, h*d] -> q, k, v by one projection and a split, q k^T * scale +
    causal mask sliced from a constant, softmax, @ v, heads transposed back and merged."""
    rng = np.random.default_rng(3)
    x = opset.parameter([1, -1, h * d], np.float32, name="x")
    qkv = opset.matmul(x, randn_f32(rng, h * d, 3 * h * d), False, False)
    q, k, v = opset.split(qkv, ints64(-1), 3).outputs()
    scores = opset.multiply(opset.matmul(_heads(q, h, d), _heads(k, h, d, (0, 2, 3, 1)), False, False),
                            np.float32(d ** -0.5))
    seq = opset.gather(opset.shape_of(x), ints64([1]), ints64(0))
    tri = np.triu(np.full((max_seq, max_seq), -1e9, np.float32), 1)
    mask = opset.slice(tri, ints64([0, 0]), opset.concat([seq, seq], 0), ints64([1, 1]), ints64([0, 1]))
    att = opset.matmul(opset.softmax(opset.add(scores, mask), -1), _heads(v, h, d), False, False)
    y = opset.reshape(opset.transpose(att, ints64([0, 2, 1, 3])), ints64([0, 0, -1]), True)
    return Model([opset.result(y, name="y")], [x])


def test_decoder_attention_with_sliced_mask_and_transposed_output(rng):
    model = _decoder_attention()
    prog = Program.from_model(model)
    att = next(n for n in prog.nodes if n.kind == "FusedAttention")
    assert att.subgraph.out_perm == (0, 2, 1, 3)
    assert [f.row.name for f in att.subgraph.chain] == ["Multiply", "Add"]
    assert [n.kind for n in prog.nodes if n.kind in ("Softmax", "MatMul")] == ["MatMul"]  # the projection
    # more than one block of 64 keys
    _check(model, [{"x": randn_f32(rng, 1, s, 16)} for s in (5, 70, 1, 96, 70)])


def test_bert_style_scale_division_and_padding_mask(rng):
    """(q k^T) / sqrt(d) + mask[b, 1, 1, s] (a computed input), heads from separate inputs."""
    b_, h, d = 2, 3, 12
    q, k, v = (opset.parameter([b_, h, -1, d], np.float32, name=n) for n in "qkv")
    mask = opset.parameter([b_, 1, 1, -1], np.float32, name="mask")
    scores = opset.add(opset.divide(opset.matmul(q, k, False, True), np.float32(np.sqrt(d))), mask)
    y = opset.matmul(opset.softmax(scores, -1), v, False, False)
    model = Model([opset.result(y, name="y")], [q, k, v, mask])

    def feeds(s):
        m = np.where(rng.random((b_, 1, 1, s)) < 0.3, -10000.0, 0.0).astype(np.float32)
        return {"q": randn_f32(rng, b_, h, s, d), "k": randn_f32(rng, b_, h, s, d), "v": randn_f32(rng, b_, h, s, d), "mask": m}
    _check(model, [feeds(s) for s in (7, 130, 3)])


def test_where_causal_mask_and_wide_values(rng):
    """HF GPT-2 style Where(bool mask, scores, min) and a value width over 64 columns, a
    head dim that is no power of two."""
    h, d, dv = 2, 48, 80
    q = opset.parameter([1, h, -1, d], np.float32, name="q")
    k = opset.parameter([1, h, -1, d], np.float32, name="k")
    v = opset.parameter([1, h, -1, dv], np.float32, name="v")
    causal = opset.parameter([1, 1, -1, -1], np.bool_, name="causal")
    scores = opset.select(causal, opset.matmul(q, k, False, True), np.float32(-3.4e38))
    model = Model([opset.result(opset.matmul(opset.softmax(scores, -1), v, False, False), name="y")],
                  [q, k, v, causal])

    def feeds(s):
        return {"q": randn_f32(rng, 1, h, s, d), "k": randn_f32(rng, 1, h, s, d), "v": randn_f32(rng, 1, h, s, dv),
                "causal": np.tril(np.ones((s, s), bool))[None, None]}
    _check(model, [feeds(s) for s in (4, 66, 1)])


def test_one_query_against_a_long_past(rng):
    """Decoding with past keys: M = 1 query row, N = past + 1 keys over several blocks."""
    h, d = 4, 16
    q = opset.parameter([1, h, 1, d], np.float32, name="q")
    k = opset.parameter([1, h, -1, d], np.float32, name="k")
    v = opset.parameter([1, h, -1, d], np.float32, name="v")
    y = opset.matmul(opset.softmax(opset.multiply(opset.matmul(q, k, False, True), np.float32(0.25)), -1),
                     v, False, False)
    model = Model([opset.result(y, name="y")], [q, k, v])
    _check(model, [{"q": randn_f32(rng, 1, h, 1, d), "k": randn_f32(rng, 1, h, n, d), "v": randn_f32(rng, 1, h, n, d)}
                   for n in (1, 63, 64, 65, 200)])


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # the reference's -inf - -inf
def test_nan_guard_gives_zeros_for_fully_masked_rows(rng):
    """torch's scaled_dot_product_attention export: Where(IsNaN(p), 0, p) after the softmax."""
    q, k, v = (opset.parameter([1, 2, -1, 8], np.float32, name=n) for n in "qkv")
    mask = opset.parameter([1, 1, -1, -1], np.float32, name="mask")
    p = opset.softmax(opset.add(opset.matmul(q, k, False, True), mask), -1)
    p = opset.select(opset.is_nan(p), np.float32(0.0), p)
    model = Model([opset.result(opset.matmul(p, v, False, False), name="y")], [q, k, v, mask])
    s = 6
    m = np.zeros((1, 1, s, s), np.float32)
    m[0, 0, 2, :] = -np.inf  # row 2 sees no key
    m[0, 0, 4, :3] = -np.inf
    feeds = {"q": randn_f32(rng, 1, 2, s, 8), "k": randn_f32(rng, 1, 2, s, 8), "v": randn_f32(rng, 1, 2, s, 8), "mask": m}
    req = _check(model, [feeds])
    out = req.infer(feeds)["y"]
    assert np.all(out[0, :, 2] == 0) and np.all(np.isfinite(out))


def test_score_op_that_broadcasts_rows_runs_on_the_host(rng):
    """A side input with more query rows than q: the scores grow, the kernel does not apply
    (the host reference runs the node)."""
    q = opset.parameter([1, 2, 1, 8], np.float32, name="q")
    k, v = (opset.parameter([1, 2, -1, 8], np.float32, name=n) for n in "kv")
    bias = opset.parameter([1, 1, 3, -1], np.float32, name="bias")
    y = opset.matmul(opset.softmax(opset.add(opset.matmul(q, k, False, True), bias), -1), v, False, False)
    model = Model([opset.result(y, name="y")], [q, k, v, bias])
    feeds = {"q": randn_f32(rng, 1, 2, 1, 8), "k": randn_f32(rng, 1, 2, 5, 8), "v": randn_f32(rng, 1, 2, 5, 8),
             "bias": randn_f32(rng, 1, 1, 3, 5)}
    _check(model, [feeds], fallbacks=1)


@pytest.mark.parametrize("where", ["probs", "scores"])
def test_values_used_elsewhere_are_not_fused(where):
    q, k, v = (opset.parameter([1, 2, 4, 8], np.float32, name=n) for n in "qkv")
    scores = opset.matmul(q, k, False, True)
    p = opset.softmax(scores, -1)
    extra = opset.result(p if where == "probs" else scores, name="extra")
    model = Model([opset.result(opset.matmul(p, v, False, False), name="y"), extra], [q, k, v])
    assert not any(n.kind == "FusedAttention" for n in Program.from_model(model).nodes)


def test_a_score_op_read_elsewhere_is_not_fused(rng):
    """The last score op before the softmax read by another op too (found by the length-plan
    tests: the fused node swallowed it and its other reader read nothing)."""
    q, k, v = (opset.parameter([1, 2, 4, 8], np.float32, name=n) for n in "qkv")
    scores = opset.add(opset.matmul(q, k, False, True), np.float32(0.5))
    y = opset.matmul(opset.softmax(scores, -1), v, False, False)
    model = Model([opset.result(y, name="y"), opset.result(opset.relu(scores), name="r")],
                  [q, k, v])
    _check(model, [{n: randn_f32(rng, 1, 2, 4, 8) for n in "qkv"}], n_attention=0)


def test_an_attention_output_read_as_the_next_chain_s_scores_stays_one_fusion(rng):
    """softmax(attention + c) @ w after an attention: the second chain's "scores" MatMul is
    the first chain's ``@ v`` (found by the runtime property test: both fused, the second
    dropped the first and read a removed node)."""
    x = opset.parameter([1, "s", 8], np.float32, name="x")
    first = opset.matmul(opset.softmax(opset.matmul(x, x, False, True), -1), x, False, False)
    probs = opset.softmax(opset.add(first, randn_f32(rng, 1, 1, 8)), -1)
    model = Model([opset.result(opset.matmul(probs, randn_f32(rng, 8, 8), False, False), name="y")], [x])
    _check(model, [{"x": randn_f32(rng, 1, s, 8)} for s in (1, 3, 3, 1)])


def test_reference_device_evaluates_the_fused_node(rng):
    model = _decoder_attention()
    feeds = {"x": randn_f32(rng, 1, 9, 16)}
    out = compile_program(model, "REFERENCE").create_infer_request().infer(feeds)
    np.testing.assert_allclose(out["y"], netpass.reference.infer(model, feeds)["y"], rtol=1e-5, atol=1e-6)


def test_fusion_off_keeps_the_ops(rng):
    model = _decoder_attention()
    prog = Program.from_model(model, fuse=False)
    assert not any(n.kind == "FusedAttention" for n in prog.nodes)
    assert sum(n.kind == "Softmax" for n in prog.nodes) == 1


def test_split_pieces_and_mask_slice_are_strided_views(rng):
    """The QKV split's pieces and the mask cut from the constant are views the attention reads
    through strides: per infer only the projection and the attention launch."""
    model = _decoder_attention()
    prog = Program.from_model(model)
    split = next(n for n in prog.nodes if n.kind == "Split")
    mask = next(n for n in prog.nodes if n.kind == "Slice" and n.inputs[0][0].kind == "Constant"
                and n.inputs[0][0].value.ndim == 2 and n.inputs[0][0].value.size > 64)
    att = next(n for n in prog.nodes if n.kind == "FusedAttention")
    assert split.strided_view and mask.strided_view
    assert att.strided_inputs == {0, 1, 2, 4}  # q, k, v and the mask (3 is the scale)
    req = _check(model, [{"x": randn_f32(rng, 1, s, 16)} for s in (3, 7, 7)])
    assert req.stats["kernels_enqueued"] == 2 * 3


def test_host_fallback_reads_strided_views(rng):
    """q, k, v from a split (strided views) and a score input that broadcasts the rows: the
    host reference reads the views back through their strides."""
    h, d = 2, 8
    x = opset.parameter([1, 1, 3 * h * d], np.float32, name="x")
    kv = opset.parameter([1, h, -1, d], np.float32, name="kv")
    bias = opset.parameter([1, 1, 3, -1], np.float32, name="bias")
    q, _, _ = opset.split(x, ints64(-1), 3).outputs()
    scores = opset.add(opset.matmul(_heads(q, h, d), kv, False, True), bias)
    y = opset.matmul(opset.softmax(scores, -1), kv, False, False)
    model = Model([opset.result(y, name="y")], [x, kv, bias])
    feeds = {"x": randn_f32(rng, 1, 1, 3 * h * d), "kv": randn_f32(rng, 1, h, 5, d), "bias": randn_f32(rng, 1, 1, 3, 5)}
    _check(model, [feeds], fallbacks=1)


def test_split_read_by_another_kernel_is_not_a_view():
    x = opset.parameter([1, -1, 24], np.float32, name="x")
    a, b, c = opset.split(x, ints64(-1), 3).outputs()
    model = Model([opset.result(opset.relu(a), name="y"),
                   opset.result(opset.matmul(b, opset.transpose(c, ints64([0, 2, 1])), False, False), name="z")],
                  [x])
    split = next(n for n in Program.from_model(model).nodes if n.kind == "Split")
    assert not split.strided_view


def test_reshape_across_the_split_boundary_is_not_a_view():
    """[1, s, 8] pieces reshaped to [1, s * 8]: the seq and feature dims of a piece are not
    contiguous together."""
    x = opset.parameter([1, 4, 24], np.float32, name="x")
    a, b, _ = opset.split(x, ints64(-1), 3).outputs()
    flat_a = opset.reshape(a, ints64([1, 32]), False)
    flat_b = opset.reshape(b, ints64([1, 32]), False)
    model = Model([opset.result(opset.matmul(flat_a, flat_b, False, True), name="y")], [x])
    split = next(n for n in Program.from_model(model).nodes if n.kind == "Split")
    assert not split.strided_view


def test_prescaled_q_and_k_with_shape_readers(rng):
    """torch's scaled_dot_product_attention export: q and k each multiplied by a scalar before
    q k^T, and the heads' shapes read by ShapeOf nodes. The scales become the first score op
    (their product), and the split pieces and transposes stay views (a ShapeOf reads only
    the shape), so the projection's output is read in place."""
    h, d = 2, 8
    x = opset.parameter([1, -1, h * d], np.float32, name="x")
    q, k, v = opset.split(opset.matmul(x, randn_f32(rng, h * d, 3 * h * d), False, False), ints64(-1), 3).outputs()
    qh, kh, vh = _heads(q, h, d), _heads(k, h, d, (0, 2, 3, 1)), _heads(v, h, d)
    s = np.float32(d ** -0.25)
    scores = opset.matmul(opset.multiply(qh, s), opset.multiply(kh, s), False, False)
    att = opset.matmul(opset.softmax(scores, -1), vh, False, False)
    shape = opset.shape_of(qh)
    target = opset.concat([opset.gather(shape, ints64([0]), ints64(0)), opset.gather(shape, ints64([2]), ints64(0)),
                           ints64([h * d])], 0)
    y = opset.reshape(opset.transpose(att, ints64([0, 2, 1, 3])), target, False)
    model = Model([opset.result(y, name="y")], [x])
    prog = Program.from_model(model)
    att_node = next(n for n in prog.nodes if n.kind == "FusedAttention")
    assert att_node.subgraph.scale == pytest.approx(float(s) ** 2)
    assert not [n for n in prog.nodes if n.kind == "Multiply"]
    assert next(n for n in prog.nodes if n.kind == "Split").strided_view
    assert all(n.permute_view is not None for n in prog.nodes if n.kind == "Transpose" and n.users[0]
               and n.users[0][0][0] is att_node)
    req = _check(model, [{"x": randn_f32(rng, 1, s_, h * d)} for s_ in (5, 70)])
    assert req.stats["kernels_enqueued"] == 2 * 2  # the projection and the attention (writing the merged heads)


def _sdpa_export(rng, rows_from_q=True, h=2, d=8):
    """torch's TorchScript export of scaled_dot_product_attention as transformers calls it:
    ``@ v`` reshaped to the shape it has (batch from its own ShapeOf, -1 heads, rows from q's,
    width from v's), then the heads transposed back and merged. Without ``rows_from_q`` the
    rows come from the shape of a second input ``r``, as many rows, but not provably."""
    x = opset.parameter([1, -1, h * d], np.float32, name="x")
    r = opset.parameter([-1], np.float32, name="r")
    q, k, v = opset.split(opset.matmul(x, randn_f32(rng, h * d, 3 * h * d), False, False), ints64(-1), 3).outputs()
    qh, kh, vh = _heads(q, h, d), _heads(k, h, d, (0, 2, 3, 1)), _heads(v, h, d)
    att = opset.matmul(opset.softmax(opset.multiply(opset.matmul(qh, kh, False, False),
                                                    np.float32(d ** -0.5)), -1), vh, False, False)

    def dim(t, i):
        return opset.gather(opset.shape_of(t), ints64([i]), ints64(0))
    rows = dim(qh, 2) if rows_from_q else dim(r, 0)
    target = opset.concat([dim(att, 0), ints64([-1]), rows, dim(vh, 3)], 0)
    y = opset.reshape(opset.transpose(opset.reshape(att, target, False), ints64([0, 2, 1, 3])),
                      ints64([0, 0, -1]), True)
    return Model([opset.result(y, name="y")], [x, r])


def test_a_reshape_to_the_same_shape_before_the_output_transpose_is_absorbed(rng):
    model = _sdpa_export(rng)
    att = next(n for n in Program.from_model(model).nodes if n.kind == "FusedAttention")
    assert att.subgraph.out_perm == (0, 2, 1, 3)
    req = _check(model, [{"x": randn_f32(rng, 1, s, 16), "r": randn_f32(rng, s)} for s in (5, 70, 1, 70)])
    assert req.stats["kernels_enqueued"] == 4 * 2  # the projection and the attention


def test_a_reshape_not_known_to_keep_the_shape_stays(rng):
    """The rows of the Reshape's target come from another input: it is not proven to keep
    the shape, and the Transpose after it stays a primitive of its own."""
    model = _sdpa_export(rng, rows_from_q=False)
    att = next(n for n in Program.from_model(model).nodes if n.kind == "FusedAttention")
    assert att.subgraph.out_perm is None
    _check(model, [{"x": randn_f32(rng, 1, s, 16), "r": randn_f32(rng, s)} for s in (5, 70)])


@pytest.mark.parametrize("with_gemms", [False, True])
def test_per_head_transposes_behind_reshapes_are_views(with_gemms, rng):
    """torchvision's MultiheadAttention export: x [S, B, D] to heads by Reshape [S, B H, Dh],
    Transpose [B H, S, Dh], Reshape [B, H, S, Dh] (k then transposed once more); the
    Transposes behind the Reshapes become views the attention reads through (strides over the
    permuted layout), so only the attention (and the projections) launch."""
    S, B, D = 11, 3, 16
    model = torchvision_attention(rng, S, B, 2, D // 2, projections=with_gemms)
    prog = Program.from_model(model)
    att_node = next(n for n in prog.nodes if n.kind == "FusedAttention")
    assert all(n.permute_view is not None for n in prog.nodes if n.kind == "Transpose"
               and n is not att_node)
    assert att_node.strided_inputs == {0, 1, 2}
    req = _check(model, [{"x": randn_f32(rng, S, B, D)}] * 2)
    launches = 3 + 1  # (q, k and v's producers, the attention)
    assert req.stats["kernels_enqueued"] == 2 * launches
