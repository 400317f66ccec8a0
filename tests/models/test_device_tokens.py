"""Greedy decoding with the token chosen on the device and steps enqueued ahead (issue 17):
``with_next_token``, ``request.enqueue`` (:mod:`netpass.runtime.pending`) and
``GreedyDecoder.generate(..., on_device=True)``.

The tokens must be the synchronous loop's (``GreedyDecoder.generate``, the token chosen on the
host from the logits) and onnxruntime's on the plain export (up to the first near tie of its
logits), for GPT-2 and LLaMA exports, prompts of two lengths, batch 2, and the TorchScript and
dynamo exporters. The request: no host wait while a step is enqueued, one per token taken;
results of several pending inferences right in any order; errors at enqueue or result leave it
usable; reset_state and a second request of the same compiled model keep their own tokens.
"""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass.errors import DeviceError, InputError, NetpassError
from netpass.generation import NEXT_TOKEN, GreedyDecoder, stateful_decoder, with_next_token
from netpass.testing import RUNTIME_DEVICE

NEW_TOKENS = 32
FAST = {"TRANSFORMATIONS": "NONE", "DEBUG_CHECKS": False}


def _models(dec, last_logits: bool = True):
    base = stateful_decoder(netpass.read_model(dec.onnx), last_logits=last_logits)
    return base, with_next_token(base)


def _prompt(dec, batch: int, length: int, seed: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, dec.vocab, (batch, length))


def _ort_tokens(dec, prompt: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """onnxruntime's greedy tokens and how many of them come before a near tie."""
    import hf_decoders
    logits = hf_decoders.ort_generate(dec, prompt, n)
    return np.stack([s.argmax(-1) for s in logits], 1), hf_decoders.tie_step(logits, 1e-4)


@pytest.mark.parametrize("name,batch,length,in_flight", [
    ("gpt2", 1, 3, 2), ("gpt2", 2, 7, 3), ("llama", 1, 7, 2), ("llama", 2, 3, 1)])
def test_tokens_equal_the_synchronous_loop_and_onnxruntime(hf_decoder, name, batch, length,
                                                           in_flight):
    dec = hf_decoder(name)
    base, model = _models(dec, last_logits=name == "gpt2")
    prompt = _prompt(dec, batch, length)
    want = GreedyDecoder(netpass.compile_model(base, RUNTIME_DEVICE, FAST)).generate(
        prompt, NEW_TOKENS)
    cm = netpass.compile_model(model, RUNTIME_DEVICE, FAST)
    got = GreedyDecoder(cm).generate(prompt, NEW_TOKENS, on_device=True, in_flight=in_flight,
                                     with_logits=True)
    np.testing.assert_array_equal(got.tokens, want.tokens)
    ort, before_tie = _ort_tokens(dec, prompt, NEW_TOKENS)
    np.testing.assert_array_equal(got.tokens[:, :before_tie], ort[:, :before_tie])
    assert before_tie > 8
    for a, b in zip(got.logits, want.logits):  # (asked for: read beside the tokens)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    steps = NEW_TOKENS - 1
    assert len(got.token_latencies_s) == steps and got.time_to_first_token_s > 0
    # one host wait per token taken, none while enqueueing; the steps replay a length family
    assert got.decode_stats["host_waits"] == steps
    assert got.decode_stats["length_replays"] >= steps - 8


def test_a_dynamo_export(hf_arch_decoder):
    dec = hf_arch_decoder("gpt2", "dynamo")
    base, model = _models(dec)
    prompt = _prompt(dec, 1, 5)
    want = GreedyDecoder(netpass.compile_model(base, RUNTIME_DEVICE, FAST)).generate(
        prompt, NEW_TOKENS)
    got = GreedyDecoder(netpass.compile_model(model, RUNTIME_DEVICE, FAST)).generate(
        prompt, NEW_TOKENS, on_device=True)
    np.testing.assert_array_equal(got.tokens, want.tokens)
    assert got.logits == []  # (not asked for: never read)


@pytest.mark.parametrize("transformations", ["NONE", "COMMON", "GNA"])
@pytest.mark.parametrize("device", [RUNTIME_DEVICE, "REFERENCE"])
def test_every_pipeline_and_the_reference_device(hf_decoder, transformations, device):
    dec = hf_decoder("gpt2")
    base, model = _models(dec)
    prompt = _prompt(dec, 1, 4, seed=9)
    cfg = {"TRANSFORMATIONS": transformations}
    want = GreedyDecoder(netpass.compile_model(base, device, cfg)).generate(prompt, 12)
    got = GreedyDecoder(netpass.compile_model(model, device, cfg)).generate(
        prompt, 12, on_device=True, in_flight=3)
    np.testing.assert_array_equal(got.tokens, want.tokens)


@pytest.fixture(scope="module")
def gpt2(hf_decoder):
    dec = hf_decoder("gpt2")
    base, model = _models(dec)
    return dec, netpass.compile_model(base, RUNTIME_DEVICE, FAST), \
        netpass.compile_model(model, RUNTIME_DEVICE, FAST)


def test_reset_state_restarts_and_requests_keep_their_own_tokens(gpt2):
    dec, plain, cm = gpt2
    prompts = [_prompt(dec, 1, 5, seed=s) for s in (1, 2)]
    want = [GreedyDecoder(plain).generate(p, 20).tokens for p in prompts]
    decoder = GreedyDecoder(cm)
    req = cm.create_infer_request()
    for p, w in zip(prompts + prompts[::-1], want + want[::-1]):  # (reset_state between)
        got = decoder.generate(p, 20, req, on_device=True)
        np.testing.assert_array_equal(got.tokens, w)
    # two requests of one compiled model, their steps enqueued in turns, each its own token
    reqs = [cm.create_infer_request() for _ in prompts]
    toks = [cm.create_device_tensor(np.zeros((1, 1), np.int64)) for _ in prompts]
    pending = [r.enqueue(decoder._feeds(p, 0, {}), (NEXT_TOKEN,), {NEXT_TOKEN: t})
               for r, p, t in zip(reqs, prompts, toks)]
    got = [[], []]
    past = [p.shape[1] for p in prompts]
    for _ in range(19):
        for i, (r, t) in enumerate(zip(reqs, toks)):
            feeds = decoder._feeds(np.zeros((1, 1), np.int64), past[i], {})
            pending.append(r.enqueue({**feeds, "input_ids": t}, (NEXT_TOKEN,),
                                     {NEXT_TOKEN: t}))
            past[i] += 1
        for i in range(2):
            got[i].append(pending.pop(0).result()[NEXT_TOKEN][0, 0])
    for i in range(2):
        got[i] += [pending.pop(0).result()[NEXT_TOKEN][0, 0]]
        np.testing.assert_array_equal(got[i], want[i][0])


def test_pending_results_in_any_order_and_host_waits(gpt2):
    dec, plain, cm = gpt2
    prompt = _prompt(dec, 1, 6, seed=3)
    decoder = GreedyDecoder(cm)
    sync = cm.create_infer_request()
    want = [sync.infer(decoder._feeds(prompt, 0, {}))]
    ids = [prompt, *([None] * 5)]
    for k in range(1, 6):  # (the token fed from the host: the same steps, one at a time)
        ids[k] = want[-1][NEXT_TOKEN]
        want.append(sync.infer(decoder._feeds(ids[k], prompt.shape[1] + k - 1, {})))
    req = cm.create_infer_request()
    tok = cm.create_device_tensor(np.zeros((1, 1), np.int64))
    first = req.enqueue(decoder._feeds(prompt, 0, {}), None, {NEXT_TOKEN: tok})
    waits = req.stats["host_waits"]
    pending = [first]
    for k in range(1, 6):
        feeds = decoder._feeds(ids[k], prompt.shape[1] + k - 1, {})
        pending.append(req.enqueue({**feeds, "input_ids": tok}, None, {NEXT_TOKEN: tok}))
    assert req.stats["host_waits"] == waits  # (decode steps enqueued without a wait)
    for k in (5, 2, 3, 0, 4, 1):  # (any order: the queue ran them in order)
        out = pending[k].result()
        np.testing.assert_array_equal(out[NEXT_TOKEN], want[k][NEXT_TOKEN])
        np.testing.assert_array_equal(out["logits"], want[k]["logits"])
        assert pending[k].done() and pending[k].result() is out
    assert req.stats["host_waits"] == waits + 6
    # infer and query_state with inferences pending run after them
    more = req.enqueue({**decoder._feeds(ids[1], prompt.shape[1] + 5, {}), "input_ids": tok})
    lengths = {s.name: s.state.shape for s in req.query_state()}
    assert all(shape[2] == prompt.shape[1] + 6 for shape in lengths.values()), lengths
    assert more.done()


def test_errors_at_enqueue_and_result_leave_the_request_usable(gpt2, monkeypatch):
    dec, plain, cm = gpt2
    prompt = _prompt(dec, 1, 4, seed=8)
    decoder = GreedyDecoder(cm)
    want = GreedyDecoder(plain).generate(prompt, 6).tokens
    req = cm.create_infer_request()
    feeds = decoder._feeds(prompt, 0, {})
    with pytest.raises(InputError):
        req.enqueue({**feeds, "input_ids": prompt.astype(np.float32)})
    with pytest.raises(NetpassError, match="not outputs"):
        req.enqueue(feeds, ("tokens",))
    with pytest.raises(NetpassError, match="device tensor"):
        req.enqueue(feeds, None, {NEXT_TOKEN: np.zeros((1, 1), np.int64)})
    wrong = cm.create_device_tensor(np.zeros((1, 1), np.int32))
    with pytest.raises(NetpassError, match="cannot go into"):
        req.enqueue(feeds, None, {NEXT_TOKEN: wrong})
    assert all(s.state.shape[2] == 0 for s in req.query_state())  # (nothing committed)
    # a device failure surfaces at result() as a DeviceError
    failing = req.enqueue(feeds, (NEXT_TOKEN,))

    class _Failed:
        command_execution_status = -5

        def wait(self) -> None:
            pass
    monkeypatch.setattr(failing, "_event", _Failed())
    with pytest.raises(DeviceError, match="error status"):
        failing.result()
    got = GreedyDecoder(cm).generate(prompt, 6, req, on_device=True)
    np.testing.assert_array_equal(got.tokens, want)


def test_with_next_token_checks_and_copies(hf_decoder):
    dec = hf_decoder("gpt2")
    base = stateful_decoder(netpass.read_model(dec.onnx))
    names = list(base.output_names)
    model = with_next_token(base)
    assert base.output_names == names and model.output_names == names + [NEXT_TOKEN]
    with pytest.raises(NetpassError, match="already"):
        with_next_token(model)
    with pytest.raises(NetpassError, match="need output"):
        with_next_token(base, logits="scores")
    with pytest.raises(NetpassError, match="with_next_token"):
        GreedyDecoder(netpass.compile_model(base, RUNTIME_DEVICE, FAST)).generate(
            _prompt(dec, 1, 3), 4, on_device=True)
