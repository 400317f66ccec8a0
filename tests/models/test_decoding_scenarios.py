"""A sweep of stateful decoding scenarios against onnxruntime (issue 17; ``slow``).

GPT-2, LLaMA with 6 query heads over 2 key/value heads, GPT-NeoX (rotary on a quarter of each
head) and Falcon (multi-query: one key/value head), each exported by the TorchScript and the
dynamo exporters (2 layers, random weights), made stateful and compiled for the runtime
(``TRANSFORMATIONS`` ``NONE``; ``COMMON`` and ``GNA`` once each on two of them). Each step is
run by onnxruntime on the plain export, its cache fed back (``decoder_twin.Twin``): the
logits of real tokens within rel. L2 1e-4 and the same greedy tokens. Scenarios: a batch of 2
left-padded prompts of different lengths; steps of 2 to 4 tokens; ``reset_state`` and a new
prompt of another length and batch; two requests interleaved; a state copied through
``query_state`` into a second request, which continues as the first; a long run (5 prompt
tokens, then 150) across several growths of the cache's buffers.
"""
from __future__ import annotations

import numpy as np
import pytest
from decoder_twin import Twin, left_padded

import netpass
from netpass.generation import find_state_lengths, stateful_decoder
from netpass.testing import RUNTIME_DEVICE

pytestmark = pytest.mark.slow

# sizes over hf_decoders' defaults (2 layers, d 64, 4 heads, 2 key/value heads)
ARCHS = {"gpt2": None, "llama": {"heads": 6, "kv_heads": 2, "d": 96}, "gpt_neox": {},
         "falcon": {}}
CASES = [pytest.param(a, e, id=f"{a}-{e}") for a in ARCHS for e in ("torchscript", "dynamo")]


@pytest.fixture(scope="module")
def twins(hf_arch_decoder, hf_arch_decoder_sized):
    """``twins(arch, exporter, n, batch, transformations="NONE", fresh=False)``: ``n`` Twins
    over one compiled model (compiled once per arch, exporter and transformations; ``fresh``:
    a model of its own, for requests whose buffers are laid out unlike the others')."""
    import onnxruntime as ort
    compiled: dict = {}

    def compile_(arch: str, exporter: str, transformations: str) -> tuple:
        sizes = ARCHS[arch]
        dec = hf_arch_decoder(arch, exporter) if sizes is None \
            else hf_arch_decoder_sized(arch, exporter, **sizes)
        stateful = stateful_decoder(netpass.read_model(dec.onnx))
        assert [r.input for r in find_state_lengths(stateful)] == ["attention_mask"]
        session = ort.InferenceSession(dec.onnx, providers=["CPUExecutionProvider"])
        return dec, session, netpass.compile_model(stateful, RUNTIME_DEVICE,
                                                   {"TRANSFORMATIONS": transformations})

    def get(arch: str, exporter: str, n: int = 1, batch: int = 1,
            transformations: str = "NONE", fresh: bool = False) -> list[Twin]:
        key = (arch, exporter, transformations)
        if fresh:
            dec, session, cm = compile_(*key)
        else:
            if key not in compiled:
                compiled[key] = compile_(*key)
            dec, session, cm = compiled[key]
        return [Twin(cm.create_infer_request(), session, dec, batch) for _ in range(n)]
    return get


def _wide(rng: np.random.Generator, vocab: int, first: np.ndarray, width: int) -> np.ndarray:
    """``first`` followed by ``width - 1`` random tokens (a speculative step's)."""
    return np.concatenate([first, rng.integers(1, vocab, (first.shape[0], width - 1))], 1)


@pytest.mark.parametrize(("arch", "exporter"), CASES)
def test_left_padded_batch(twins, arch, exporter):
    (twin,) = twins(arch, exporter, batch=2)
    rng = np.random.default_rng(1)
    twin.decode(twin.step(*left_padded(rng, twin.dec.vocab, [7, 3])), 6)


@pytest.mark.parametrize(("arch", "exporter"), CASES)
def test_multi_token_steps(twins, arch, exporter):
    (twin,) = twins(arch, exporter, batch=2)
    rng = np.random.default_rng(2)
    nxt = twin.step(*left_padded(rng, twin.dec.vocab, [4, 6]))
    for width in (2, 3, 4, 1, 3, 2):
        nxt = twin.step(_wide(rng, twin.dec.vocab, nxt, width))


@pytest.mark.parametrize(("arch", "exporter"), CASES)
def test_reset_then_a_new_prompt(twins, arch, exporter):
    (twin,) = twins(arch, exporter)
    rng = np.random.default_rng(3)
    twin.decode(twin.step(rng.integers(1, twin.dec.vocab, (1, 6))), 4)
    twin.start(2)  # (reset_state: a new sequence of another length and batch)
    twin.decode(twin.step(*left_padded(rng, twin.dec.vocab, [9, 5])), 4)
    twin.start(1)
    twin.decode(twin.step(rng.integers(1, twin.dec.vocab, (1, 2))), 3)


@pytest.mark.parametrize(("arch", "exporter"), CASES)
def test_interleaved_requests(twins, arch, exporter):
    a, b = twins(arch, exporter, n=2)
    rng = np.random.default_rng(4)
    x = a.step(rng.integers(1, a.dec.vocab, (1, 5)))
    y = b.step(rng.integers(1, b.dec.vocab, (1, 8)))
    for width in (1, 3, 1, 2, 1):
        x = a.step(_wide(rng, a.dec.vocab, x, width))
        y = b.step(y)


@pytest.mark.parametrize(("arch", "exporter"), CASES)
def test_a_state_copy_continues_identically(twins, arch, exporter):
    first, second = twins(arch, exporter, n=2)
    rng = np.random.default_rng(5)
    nxt = first.decode(first.step(rng.integers(1, first.dec.vocab, (1, 6))), 3)
    second.step(rng.integers(1, second.dec.vocab, (1, 4)))  # (a state of its own, overwritten)
    first.copy_into(second)
    a = b = nxt
    for _ in range(5):
        a, b = first.step(a), second.step(b)
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(("arch", "exporter"), CASES)
def test_a_long_run_across_buffer_growths(twins, arch, exporter, monkeypatch):
    """5 prompt tokens then 150: with room for 32 steps per growth (not 128), the cache's
    buffers grow at least 4 times. (A compiled model of its own: a new request of a model
    whose step plans were made with 128 steps of room takes their buffers' layout.)"""
    monkeypatch.setattr("netpass.runtime.state.PREALLOC_STEPS", 32)
    (twin,) = twins(arch, exporter, fresh=True)
    rng = np.random.default_rng(6)
    nxt = twin.step(rng.integers(1, twin.dec.vocab, (1, 5)))
    before = twin.req.stats.get("state_allocations", 0)
    twin.decode(nxt, 149)
    assert twin.mask.shape[1] == 154
    if "state_allocations" in twin.req.stats:
        grown = twin.req.stats["state_allocations"] - before
        assert grown >= 4 * 2 * twin.dec.layers, grown


@pytest.mark.parametrize("transformations", ["COMMON", "GNA"])
@pytest.mark.parametrize(("arch", "exporter"), [("llama", "torchscript"), ("gpt2", "dynamo")])
def test_other_transformations(twins, arch, exporter, transformations):
    """A left-padded batch, multi-token steps, then a reset and a new prompt, under the
    CommonOptimizations and the GNA pipeline."""
    (twin,) = twins(arch, exporter, batch=2, transformations=transformations)
    rng = np.random.default_rng(7)
    nxt = twin.step(*left_padded(rng, twin.dec.vocab, [6, 3]))
    for width in (1, 3, 2, 1):
        nxt = twin.step(_wide(rng, twin.dec.vocab, nxt, width))
    twin.start(1)
    twin.decode(twin.step(rng.integers(1, twin.dec.vocab, (1, 4))), 3)
