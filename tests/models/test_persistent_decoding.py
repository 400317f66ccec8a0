"""Persistent decode steps (runtime.persistent): a stateful transformers decoder's decode steps
gathered into persistent kernels generate what the same steps launched one kernel at a time
generate (same tokens, logits within 1e-6 rel. L2: the same kernels run in the same order),
with fewer launches; requests of one compiled model decode at once from several threads; a
persistent kernel that stopped (its work-groups not all resident) is an error, not a wrong
result. On PoCL a persistent kernel holds at most CPU_MAX_PHASES launches and one work-group;
the GPU runs (NETPASS_TEST_DEVICE=GPU) take whole steps."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import netpass
from netpass.errors import DeviceError
from netpass.generation import GreedyDecoder, stateful_decoder
from netpass.testing import RUNTIME_DEVICE

NEW_TOKENS = 24


def _network(req):
    return req.network if hasattr(req, "network") else req._runtime_request.network


@pytest.fixture(scope="module")
def decoders(hf_decoder):
    out = {}
    for name in ("gpt2", "llama"):
        dec = hf_decoder(name)
        out[name] = (dec, stateful_decoder(netpass.read_model(dec.onnx)))
    return out


def _compiled(model, persistent: bool):
    # (debug mode runs every step on the checked path, without tapes or persistent kernels)
    return netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE",
                                                         "PERSISTENT_STEPS": persistent,
                                                         "DEBUG_CHECKS": False})


def _prompt(dec, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, dec.vocab, (1, 5))


def _rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _same(got, want) -> None:
    np.testing.assert_array_equal(got.tokens, want.tokens)
    assert max(_rel_l2(a, b) for a, b in zip(got.logits, want.logits)) <= 1e-6


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_persistent_steps_generate_what_single_launches_generate(decoders, name):
    dec, model = decoders[name]
    prompt = _prompt(dec)
    plain_cm, cm = _compiled(model, False), _compiled(model, True)
    plain_req, req = plain_cm.create_infer_request(), cm.create_infer_request()
    plain = GreedyDecoder(plain_cm).generate(prompt, NEW_TOKENS, plain_req)
    gathered = GreedyDecoder(cm).generate(prompt, NEW_TOKENS, req)
    _same(gathered, plain)
    assert req.stats["persistent_launches"] > 0
    assert req.stats["persistent_phases"] >= 2 * req.stats["persistent_launches"]
    assert req.stats["kernels_enqueued"] < plain_req.stats["kernels_enqueued"]
    assert plain_req.stats["persistent_launches"] == 0
    # a second generation on the request: its persistent kernels are reused, not rebuilt
    builds = req.stats["kernel_builds"]
    _same(GreedyDecoder(cm).generate(prompt, NEW_TOKENS, req), plain)
    assert req.stats["kernel_builds"] == builds


def test_requests_decode_at_once_from_several_threads(decoders):
    dec, model = decoders["gpt2"]
    cm = _compiled(model, True)
    prompts = [_prompt(dec, seed) for seed in range(3)]
    want = [GreedyDecoder(cm).generate(p, NEW_TOKENS) for p in prompts]
    got: list = [None] * len(prompts)
    errors: list = []

    def work(i: int) -> None:
        try:
            got[i] = GreedyDecoder(cm).generate(prompts[i], NEW_TOKENS)
        except Exception as e:  # (reported below, in the test's thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors and all(not t.is_alive() for t in threads)
    for g, w in zip(got, want):
        _same(g, w)


def test_a_persistent_kernel_that_stopped_is_an_error(decoders):
    dec, model = decoders["gpt2"]
    cm = _compiled(model, True)
    req = cm.create_infer_request()
    GreedyDecoder(cm).generate(_prompt(dec), NEW_TOKENS, req)
    net = _network(req)
    assert net.persistent is not None and req.stats["persistent_launches"] > 0
    # as a work-group that waited too long at a grid barrier leaves the barrier words
    net.engine.cl.enqueue_copy(net.queue, net.persistent.bar.buffer,
                               np.array([0, 0, 1, 0], np.int32), is_blocking=True)
    with pytest.raises(DeviceError, match="PERSISTENT_STEPS False"):
        GreedyDecoder(cm).generate(_prompt(dec), NEW_TOKENS, req)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
@pytest.mark.parametrize("persistent", [False, True])
def test_key_splits_generate_what_whole_rows_generate(decoders, monkeypatch, persistent, name):
    """The decode attention's key splits (kernels.decode, forced here on any device): the same
    tokens as the attention over whole rows, logits within 1e-5 rel. L2 (the merge sums the
    runs in another order), through moving kernels and persistent phases alike."""
    from netpass.runtime.kinds import attention as attention_kind
    dec, model = decoders[name]
    prompt = _prompt(dec)
    monkeypatch.setattr(attention_kind, "DECODE_SPLIT_WAVES", 0)
    whole_cm = _compiled(model, False)
    whole = GreedyDecoder(whole_cm).generate(prompt, NEW_TOKENS, whole_cm.create_infer_request())
    monkeypatch.setattr(attention_kind, "DECODE_SPLIT_WAVES", 64)
    cm = _compiled(model, persistent)
    req = cm.create_infer_request()
    split = GreedyDecoder(cm).generate(prompt, NEW_TOKENS, req)
    np.testing.assert_array_equal(split.tokens, whole.tokens)
    assert max(_rel_l2(a, b) for a, b in zip(split.logits, whole.logits)) <= 1e-5
    assert any("da_count" in key[2] for key in _network(req).kernel_objects)


def test_launches_past_the_solo_rounds_go_out_on_their_own(decoders):
    """A launch of more work than SOLO_ROUNDS rounds of the resident work-groups (on a GPU:
    an LM head) leaves the persistent kernels; the step generates the same tokens."""
    dec, model = decoders["gpt2"]
    prompt = _prompt(dec)
    cm = _compiled(model, True)
    req = cm.create_infer_request()
    want = GreedyDecoder(cm).generate(prompt, NEW_TOKENS, req)
    net = _network(req)
    assert net.persistent is not None and req.stats["persistent_launches"] > 0
    net.persistent.solo_items = 0  # (every launch is past it)
    launches = req.stats["persistent_launches"]
    _same(GreedyDecoder(cm).generate(prompt, NEW_TOKENS, req), want)
    assert req.stats["persistent_launches"] == launches
