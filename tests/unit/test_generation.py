"""GreedyDecoder and stateful_decoder on a tiny hand-built language model (the transformers
decoders are in tests/models/test_stateful_decoders.py)."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.errors import NetpassError
from netpass.generation import GreedyDecoder, stateful_decoder

VOCAB, D = 17, 6
RNG = np.random.default_rng(2)


def _tiny_lm() -> Model:
    """logits = (running mean of the cached embeddings + the new ones) @ W: every next token
    depends on the whole cache."""
    ids = opset.parameter([-1, -1], np.int64, name="input_ids")
    past = opset.parameter([-1, -1, D], np.float32, name="past_key_values.0.key")
    emb = opset.gather(opset.constant(RNG.normal(size=(VOCAB, D)).astype(np.float32)), ids,
                       opset.constant(np.int64(0)))
    present = opset.concat([past, emb], 1)
    mean = opset.reduce_mean(present, opset.constant(np.array([1])), True)
    logits = opset.matmul(opset.add(emb, mean),
                          opset.constant(RNG.normal(size=(D, VOCAB)).astype(np.float32)),
                          False, False)
    return Model([opset.result(logits, name="logits"),
                  opset.result(present, name="present.0.key")], [ids, past], "tiny_lm")


def test_stateful_and_plain_generation_agree():
    model = _tiny_lm()
    stateful = stateful_decoder(model)
    assert model.input_names == ["input_ids", "past_key_values.0.key"]  # not changed
    assert stateful.input_names == ["input_ids"] and stateful.output_names == ["logits"]
    prompt = RNG.integers(0, VOCAB, (2, 5))
    got = GreedyDecoder(netpass.compile_model(stateful, "REFERENCE")).generate(prompt, 12)
    want = GreedyDecoder(netpass.compile_model(model, "REFERENCE"),
                         {"past_key_values.0.key": "present.0.key"}).generate(prompt, 12)
    assert got.tokens.shape == (2, 12) and len(np.unique(want.tokens)) > 2
    np.testing.assert_array_equal(got.tokens, want.tokens)
    for a, b in zip(got.logits, want.logits):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert len(got.token_latencies_s) == 11 and got.time_to_first_token_s > 0
    assert got.tokens_per_s == pytest.approx(11 / sum(got.token_latencies_s))
    assert got.per_token_s == pytest.approx(float(np.median(got.token_latencies_s)))


def test_one_new_token_is_the_prefill_alone():
    model = _tiny_lm()
    cm = netpass.compile_model(stateful_decoder(model), "REFERENCE")
    prompt = RNG.integers(0, VOCAB, (1, 4))
    g = GreedyDecoder(cm).generate(prompt, 1)
    assert g.tokens.shape == (1, 1) and g.token_latencies_s == [] and g.tokens_per_s == 0.0
    logits = netpass.reference.infer(model, {
        "input_ids": prompt, "past_key_values.0.key": np.zeros((1, 0, D), np.float32)})
    assert g.tokens[0, 0] == logits["logits"][0, -1].argmax()


def test_generation_errors_name_the_problem():
    cm = netpass.compile_model(stateful_decoder(_tiny_lm()), "REFERENCE")
    with pytest.raises(NetpassError, match=r"prompt_ids must be \[batch, length>0\]"):
        GreedyDecoder(cm).generate(np.array([1, 2, 3]), 4)
    with pytest.raises(NetpassError, match="new_tokens must be >= 1"):
        GreedyDecoder(cm).generate(np.array([[1]]), 0)
    with pytest.raises(NetpassError, match=r"cannot fill \['past_key_values.0.key'\]"):
        GreedyDecoder(netpass.compile_model(_tiny_lm(), "REFERENCE"))
    x = opset.parameter([2], np.float32, name="x")
    with pytest.raises(NetpassError, match="no past/present key-value pairs"):
        stateful_decoder(Model([opset.result(opset.relu(x), name="y")], [x], "m"))


def test_last_logits_only_slices_the_lm_head_input():
    """stateful_decoder(..., last_logits=True): a prompt's logits are its last position's,
    equal to the full model's last row; generation is unchanged."""
    model = _tiny_lm()
    full = stateful_decoder(model)
    last = stateful_decoder(model, last_logits=True)
    assert any(op.type_name == "Slice" for op in last.get_ordered_ops())
    prompt = RNG.integers(0, VOCAB, (2, 5))
    outs = [netpass.reference.create_infer_request(m).infer({"input_ids": prompt})["logits"]
            for m in (full, last)]
    assert outs[0].shape == (2, 5, VOCAB) and outs[1].shape == (2, 1, VOCAB)
    np.testing.assert_allclose(outs[1][:, 0], outs[0][:, -1], rtol=1e-6)
    want = GreedyDecoder(netpass.compile_model(full, "REFERENCE")).generate(prompt, 6)
    got = GreedyDecoder(netpass.compile_model(last, "REFERENCE")).generate(prompt, 6)
    np.testing.assert_array_equal(got.tokens, want.tokens)


def test_slice_before_lm_head_needs_a_matmul_by_constant_weights():
    from netpass.generation import slice_before_lm_head
    x = opset.parameter([1, -1, D], np.float32, name="x")
    w = opset.parameter([D, VOCAB], np.float32, name="w")  # not a constant: left alone
    model = Model([opset.result(opset.matmul(x, w, False, False), name="logits")], [x, w])
    assert not slice_before_lm_head(model)
    assert not slice_before_lm_head(_tiny_lm(), output="nothing")


def test_slice_before_lm_head_takes_weights_transposed_from_constants():
    """The dynamo exporter's tied LM head reads ``Transpose(embeddings)``: weights computed
    from constants alone are the head's; the last row's logits equal the full model's."""
    from netpass.generation import slice_before_lm_head
    x = opset.parameter([1, -1, D], np.float32, name="x")
    table = RNG.standard_normal((VOCAB, D)).astype(np.float32)
    w = opset.transpose(table, np.array([1, 0], np.int64))
    model = Model([opset.result(opset.matmul(x, w, False, False), name="logits")], [x])
    feeds = {"x": RNG.standard_normal((1, 4, D)).astype(np.float32)}
    want = netpass.reference.infer(model, feeds)["logits"]
    assert slice_before_lm_head(model)
    got = netpass.reference.infer(model, feeds)["logits"]
    assert got.shape == (1, 1, VOCAB)
    np.testing.assert_allclose(got[:, 0], want[:, -1], rtol=1e-6)
    y = opset.parameter([D, VOCAB], np.float32, name="y")  # a parameter on the way: not one
    x2 = opset.parameter([1, -1, D], np.float32, name="x")
    mixed = opset.add(w, y)
    other = Model([opset.result(opset.matmul(x2, mixed, False, False), name="logits")], [x2, y])
    assert not slice_before_lm_head(other)


def _head_model(after):
    """logits = after(x @ W) over a [1, s, D] input (the ops an export puts after its head)."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    w = RNG.standard_normal((D, VOCAB)).astype(np.float32)
    y = after(opset.matmul(x, w, False, False))
    outs = y if isinstance(y, list) else [y]
    return Model([opset.result(o, name=n) for o, n in zip(outs, ("logits", "other"))], [x])


BIAS = RNG.standard_normal(VOCAB).astype(np.float32)


@pytest.mark.parametrize("after", [
    lambda h: opset.add(h, BIAS),                                        # GPT-J's, Phi's bias
    lambda h: opset.divide(h, np.float32(4.0)),                          # Granite's scale
    lambda h: opset.multiply(opset.tanh(opset.divide(h, np.float32(30.0))),
                             np.float32(30.0)),                          # Gemma 2's soft cap
], ids=["bias", "scale", "softcap"])
def test_slice_before_lm_head_looks_through_row_wise_ops(after):
    from netpass.generation import slice_before_lm_head
    model = _head_model(after)
    feeds = {"x": RNG.standard_normal((1, 5, D)).astype(np.float32)}
    want = netpass.reference.infer(model, feeds)["logits"]
    assert slice_before_lm_head(model)
    got = netpass.reference.infer(model, feeds)["logits"]
    np.testing.assert_allclose(got[:, 0], want[:, -1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("after", [
    lambda h: opset.add(h, RNG.standard_normal((1, 5, VOCAB)).astype(np.float32)),  # per position
    lambda h: [opset.add(h, BIAS), opset.relu(h)],               # the head read by another output
], ids=["per_position", "read_elsewhere"])
def test_slice_before_lm_head_leaves_what_is_not_row_wise(after):
    from netpass.generation import slice_before_lm_head
    assert not slice_before_lm_head(_head_model(after))
