"""Launches a decode step folds into its attention kernel (``runtime.rotary_fold``, and
``runtime.attention_proj`` under config ``DECODE_PROJECTION_FUSION``).

Decoders exported by transformers (TorchScript and dynamo): on steps of up to
``DECODE_ROWS`` rows a rotary embedding's Rotary launches nothing (LLaMA with grouped-query
heads, GPT-NeoX and Phi with partial rotary, Qwen3 with per-head norms before it: the attention
rotates the queries and new keys as it loads them), and neither does the attention (GPT-2,
OPT, Falcon and the rotary ones: the output projection's launch runs the attention kernel,
each head's output multiplied by its columns of the weights, the last head of a row summing
them and adding the bias and the residual). Shown here: one launch fewer per layer and step
for each fold than without it, and every step's logits within rel. L2 1e-4 of onnxruntime on
the plain export fed its own cache, for prompts the decode kernel takes (1 to 8 rows), longer
ones (run apart, decoded after with the folds), multi-row steps after a past, and batch 2
left-padded.
"""
from __future__ import annotations

import numpy as np
import pytest
from decoder_twin import Twin, left_padded

import netpass
import netpass.runtime.program as program
from netpass.generation import GreedyDecoder, stateful_decoder
from netpass.runtime.attention_proj import ProjDesc
from netpass.testing import RUNTIME_DEVICE

CASES = [("llama", "torchscript"), ("llama", "dynamo"), ("gpt_neox", "torchscript"),
         ("phi", "dynamo"), ("qwen3", "torchscript")]  # (rotary)
PROJECTED = CASES + [("gpt2", "torchscript"), ("gpt2", "dynamo"), ("opt", "torchscript"),
                     ("falcon", "dynamo")]


@pytest.fixture(scope="module")
def exports(hf_arch_decoder):
    """(arch, exporter) -> (decoder export, stateful Model), made once."""
    cache: dict = {}

    def get(arch: str, exporter: str):
        if (arch, exporter) not in cache:
            dec = hf_arch_decoder(arch, exporter)
            cache[arch, exporter] = dec, stateful_decoder(netpass.read_model(dec.onnx))
        return cache[arch, exporter]
    return get


# (the output projection's fold is off by default: compiled.projection_fusion)
FOLDS = {"TRANSFORMATIONS": "NONE", "DECODE_PROJECTION_FUSION": True}


def _request(stateful, config: dict = FOLDS):
    cm = netpass.compile_model(stateful, RUNTIME_DEVICE, config)
    return cm, cm.create_infer_request()


def _step_launches(stateful, config: dict = FOLDS) -> int:
    """Kernels one single-token step after a prompt of 5 enqueues."""
    _, req = _request(stateful, config)
    feeds = {"input_ids": np.array([[3, 1, 4, 1, 5]]), "attention_mask": np.ones((1, 5), np.int64),
             "position_ids": np.arange(5)[None]}
    names = {i.get_any_name() for i in stateful.inputs}
    req.infer({k: v for k, v in feeds.items() if k in names})
    step = {"input_ids": np.array([[2]]), "attention_mask": np.ones((1, 6), np.int64),
            "position_ids": np.array([[5]])}
    before = req.stats["kernels_enqueued"]
    req.infer({k: v for k, v in step.items() if k in names})
    return req.stats["kernels_enqueued"] - before


@pytest.mark.parametrize(("arch", "exporter"), CASES)
def test_a_decode_step_launches_no_rotary(exports, monkeypatch, arch, exporter):
    dec, stateful = exports(arch, exporter)
    folded = _step_launches(stateful)
    cm, _ = _request(stateful)
    rotaries = [n for n in cm.runtime.program.nodes if n.kind == "Rotary"]
    assert rotaries and all(n.rotary_fold is not None for n in rotaries)
    monkeypatch.setattr(program, "fold_decode_rotaries", lambda nodes: None)
    assert _step_launches(stateful) - folded == len(rotaries) == dec.layers


@pytest.mark.parametrize(("arch", "exporter"), PROJECTED)
def test_a_decode_step_launches_no_attention_apart(exports, arch, exporter):
    dec, stateful = exports(arch, exporter)
    folded = _step_launches(stateful)
    cm, _ = _request(stateful)
    nodes = cm.runtime.program.nodes
    projections = [n for n in nodes if isinstance(n.subgraph, ProjDesc)]
    assert all(n.proj_fold is not None for n in nodes if n.kind == "FusedAttention")
    assert _step_launches(stateful, {"TRANSFORMATIONS": "NONE"}) - folded \
        == len(projections) == dec.layers


@pytest.mark.parametrize(("arch", "exporter"), PROJECTED)
def test_folded_steps_equal_onnxruntime(exports, arch, exporter):
    import onnxruntime as ort
    dec, stateful = exports(arch, exporter)
    _, req = _request(stateful)
    twin = Twin(req, ort.InferenceSession(dec.onnx, providers=["CPUExecutionProvider"]), dec, 1)
    rng = np.random.default_rng(3)
    for prompt in (1, 5, 8, 11):
        twin.start(1)
        nxt = twin.step(rng.integers(1, dec.vocab, (1, prompt)))
        nxt = twin.decode(nxt, 3)
        twin.step(np.concatenate([nxt, rng.integers(1, dec.vocab, (1, 2))], 1))
        twin.decode(nxt, 2)


@pytest.mark.parametrize(("arch", "exporter"), CASES[:3] + PROJECTED[-4:-1])
def test_folded_steps_of_a_left_padded_batch_equal_onnxruntime(exports, arch, exporter):
    import onnxruntime as ort
    dec, stateful = exports(arch, exporter)
    _, req = _request(stateful)
    twin = Twin(req, ort.InferenceSession(dec.onnx, providers=["CPUExecutionProvider"]), dec, 2)
    ids, mask = left_padded(np.random.default_rng(5), dec.vocab, [3, 7])
    twin.decode(twin.step(ids, mask), 4)


def test_a_long_decode_replays_the_folded_projection(exports):
    """128 prompt tokens, then 32 single-token steps: the length family replays the folded
    projection as a moving kernel (it read the unset input shapes of a FullyConnected when
    its output was placed again: a TypeError at the sixth step)."""
    dec, stateful = exports("gpt2", "torchscript")
    prompt = np.random.default_rng(9).integers(1, dec.vocab, (1, 128))
    cm, req = _request(stateful)
    got = GreedyDecoder(cm).generate(prompt, 32, req)
    assert req.stats["steady_steps"] > 0
    cm, req = _request(stateful, {"TRANSFORMATIONS": "NONE"})
    want = GreedyDecoder(cm).generate(prompt, 32, req)
    np.testing.assert_array_equal(got.tokens, want.tokens)
    for a, b in zip(got.logits, want.logits):
        assert np.linalg.norm(a - b) <= 1e-4 * np.linalg.norm(b)


def test_the_projection_fold_is_off_by_default_and_with_persistent_steps(exports):
    _, stateful = exports("gpt2", "torchscript")
    for config in ({"TRANSFORMATIONS": "NONE"},
                   {**FOLDS, "PERSISTENT_STEPS": True}):
        cm, _ = _request(stateful, config)
        assert not any(isinstance(n.subgraph, ProjDesc) for n in cm.runtime.program.nodes)
