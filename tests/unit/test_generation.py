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
