"""Stateful decoding on configurations and feeds the other decoder tests do not use (issue 17).

Bad feeds of a stateful decoder must end in a ``netpass.errors`` exception naming the input or
variable and the shapes, never in silent garbage or a corrupted heap: token ids outside the
vocabulary (the runtime's Gather reads zeros there; onnxruntime refuses them), position ids
of another length than the tokens (the rotary kernel read its cos and sin past their
buffers), a batch other than the state's (the runtime's Concat shape rule took the first
input's dims, and the copy wrote past the grown cache: "corrupted size vs. prev_size"), and
states of the wrong shape or type.

Good feeds on a configuration of its own (6 query heads over 2 key/value heads of 16, GQA
ratio 3; batch 2 left-padded, multi-token steps, a state copied into another request) must
give onnxruntime's logits on the plain export fed its own cache, within rel. L2 1e-4.
"""
from __future__ import annotations

import numpy as np
import pytest
from decoder_twin import Twin, left_padded

import netpass
from netpass.errors import InputError, NetpassError, StateError
from netpass.generation import stateful_decoder
from netpass.testing import RUNTIME_DEVICE

DEVICES = ["REFERENCE", RUNTIME_DEVICE]


def _feeds(n: int, past: int = 0, batch: int = 1) -> dict:
    """``n`` new tokens after ``past`` for ``batch`` sequences, no padding."""
    return {"input_ids": np.ones((batch, n), np.int64),
            "attention_mask": np.ones((batch, past + n), np.int64),
            "position_ids": np.broadcast_to(np.arange(past, past + n), (batch, n)).copy()}


@pytest.fixture(scope="module")
def llama(hf_decoder):
    dec = hf_decoder("llama")
    return dec, stateful_decoder(netpass.read_model(dec.onnx))


def _request(stateful, device: str, config: dict | None = None):
    cm = netpass.compile_model(stateful, device, {"TRANSFORMATIONS": "NONE", **(config or {})})
    return cm.create_infer_request()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("token", [500, -500])
def test_token_ids_outside_the_vocabulary_are_refused(llama, device, token):
    dec, stateful = llama
    req = _request(stateful, device)
    feeds = _feeds(3)
    feeds["input_ids"] = np.array([[1, token, 2]])
    with pytest.raises(InputError, match=rf"'input_ids': value {token} \(shape \[1, 3\]\) is "
                                         rf"outside \[-{dec.vocab}, {dec.vocab}\)"):
        req.infer(feeds)
    # the ONNX bounds of a Gather: the last row and the first counted from the end are fine
    feeds["input_ids"] = np.array([[dec.vocab - 1, -dec.vocab, 2]])
    assert np.isfinite(req.infer(feeds)["logits"]).all()


@pytest.mark.parametrize("device", DEVICES)
def test_position_ids_of_another_length_are_refused(llama, device):
    _, stateful = llama
    feeds = _feeds(4)
    feeds["position_ids"] = np.arange(2)[None]
    with pytest.raises(NetpassError, match=r"\[1, 1, 2, 16\]"):
        _request(stateful, device).infer(feeds)


@pytest.mark.parametrize("config", [{}, {"FUSION": False}])
def test_a_batch_other_than_the_state_is_refused(llama, config):
    """Batch 2 fed over a batch-1 cache (no ``reset_state``), on the runtime: a StateError
    naming the variable and the shapes (it decoded garbage, or with FUSION off wrote past the
    cache's buffer)."""
    _, stateful = llama
    req = _request(stateful, RUNTIME_DEVICE, config)
    req.infer(_feeds(4))
    with pytest.raises(StateError, match=r"variable 'past_key_values\.\d\.\w+present.*"
                                         r"\[1,2,4,16\], \[2,2,1,16\]"):
        req.infer(_feeds(1, 4, batch=2))
    req.reset_state()  # (then batch 2 is a new sequence)
    assert req.infer(_feeds(3, batch=2))["logits"].shape[0] == 2


@pytest.mark.parametrize("device", DEVICES)
def test_setting_a_state_of_the_wrong_shape_or_type_is_refused(llama, device):
    dec, stateful = llama
    req = _request(stateful, device)
    req.infer(_feeds(4))
    state = req.query_state()[0]
    shape = (1, dec.kv_heads, 4, dec.head_dim)
    for bad, what in ((np.zeros((1, dec.kv_heads + 1, 4, dec.head_dim), np.float32), "dim 1"),
                      (np.zeros(shape[:3], np.float32), "rank 3"),
                      (np.zeros(shape, np.float64), "dtype float64")):
        with pytest.raises(StateError, match=rf"variable '{state.name}': {what}"):
            state.state = bad
    np.testing.assert_array_equal(state.state.shape, shape)  # (left as it was)


def test_left_padded_batch_and_multi_token_steps_on_grouped_heads(hf_arch_decoder_sized):
    """Qwen2 with 6 query heads over 2 key/value heads (ratio 3): a batch of 2 prompts of 6
    and 2 tokens, left-padded; single tokens, then steps of 3 and 2 tokens (as speculative
    decoding feeds them); then the state copied into a second request, which continues
    exactly as the first."""
    import onnxruntime as ort
    dec = hf_arch_decoder_sized("qwen2", heads=6, kv_heads=2, d=96)
    session = ort.InferenceSession(dec.onnx, providers=["CPUExecutionProvider"])
    cm = netpass.compile_model(stateful_decoder(netpass.read_model(dec.onnx)), RUNTIME_DEVICE,
                               {"TRANSFORMATIONS": "NONE"})
    rng = np.random.default_rng(3)
    first = Twin(cm.create_infer_request(), session, dec, 2)
    nxt = first.step(*left_padded(rng, dec.vocab, [6, 2]))
    for width in (1, 1, 3, 2, 1):
        extra = rng.integers(1, dec.vocab, (2, width - 1))
        nxt = first.step(np.concatenate([nxt, extra], 1))
    second = Twin(cm.create_infer_request(), session, dec, 2)
    second.step(rng.integers(1, dec.vocab, (2, 3)))  # (a state of its own, overwritten)
    first.copy_into(second)
    a = b = nxt
    for _ in range(4):
        a, b = first.step(a), second.step(b)
        np.testing.assert_array_equal(a, b)
