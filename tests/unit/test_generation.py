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
