"""Launches a decode step folds into its attention kernel (``runtime.rotary_fold``, and
``runtime.attention_proj`` under config ``DECODE_PROJECTION_FUSION``).

Decoders exported by transformers (TorchScript and dynamo): on steps of up to
``DECODE_ROWS`` rows a rotary embedding's Rotary launches nothing (LLaMA with grouped-query
heads, GPT-NeoX and Phi with partial rotary, GPT-J and CodeGen rotating before the heads'
transpose: the attention rotates the queries and new keys as it loads them), nor do the
queries' and keys' per-head norms before it (Qwen3, Gemma 3: normalized in the attention too;
also with scales of their own, the zoo's being ones, which the exports drop), and neither does
the attention (GPT-2,
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
         ("phi", "dynamo"), ("qwen3", "torchscript"), ("qwen3", "dynamo"),
         ("gptj", "torchscript"), ("gptj", "dynamo"), ("codegen", "dynamo"),
         ("gemma3_text", "torchscript")]  # (rotary)
# launches a layer's rotary fold saves: the Rotary, and the queries' and keys' norms where folded
FOLDED = {"qwen3": 3, "gemma3_text": 3}
# per-head norms given scales of their own ("scaled": qwen3 and gemma3_text below)
SCALED = [("qwen3", "torchscript"), ("qwen3", "dynamo"), ("gemma3_text", "dynamo")]
PROJECTED = CASES[:5] + [("gpt2", "torchscript"), ("gpt2", "dynamo"), ("opt", "torchscript"),
                         ("falcon", "dynamo")]


def _scaled_norms(arch: str, exporter: str):
    """``arch`` at the zoo's sizes with random scales in its queries' and keys' norms (around
    1; Gemma's ``1 + weight`` too), exported by ``exporter``."""
    import torch
    from export_decoder import causal_lm, export_decoder
    from hf_decoders import INIT
    model, *rest = causal_lm(arch, layers=2, d=64, heads=4, kv_heads=2, vocab=223,
                             positions=256, init=INIT.get(arch, 0.2), ffn=96)
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, w in model.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                w.copy_(w + 0.5 * torch.rand(w.shape, generator=gen) - 0.25)
    return export_decoder(arch, model, *rest, exporter=exporter)


@pytest.fixture(scope="module")
def exports(hf_arch_decoder):
    """(arch, exporter) -> (decoder export, stateful Model), made once; arch "scaled:ARCH":
    :func:`_scaled_norms`."""
    cache: dict = {}

    def get(arch: str, exporter: str):
        if (arch, exporter) not in cache:
            scaled = arch.startswith("scaled:")
            dec = _scaled_norms(arch[7:], exporter) if scaled else hf_arch_decoder(arch, exporter)
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


def _folds(cm) -> list:
    return [n.rotary_fold for n in cm.runtime.program.nodes if n.kind == "Rotary"]


@pytest.mark.parametrize(("arch", "exporter"),
                         CASES + [(f"scaled:{a}", e) for a, e in SCALED])
def test_a_decode_step_launches_no_rotary(exports, monkeypatch, arch, exporter):
    dec, stateful = exports(arch, exporter)
    folded = _step_launches(stateful)
    cm, _ = _request(stateful)
    folds = _folds(cm)
    assert len(folds) == dec.layers and None not in folds
    per_layer = FOLDED.get(arch.removeprefix("scaled:"), 1)
    assert all(len(f.host_nodes()) == per_layer for f in folds)
    if arch.startswith("scaled:"):  # (each norm's scale a fused Multiply, applied in the kernel)
        assert all(nf.gamma is not None for f in folds for nf in f.norms)
    monkeypatch.setattr(program, "fold_decode_rotaries", lambda nodes: None)
    assert _step_launches(stateful) - folded == per_layer * dec.layers


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


@pytest.mark.parametrize(("arch", "exporter"),
                         CASES + PROJECTED[5:] + [(f"scaled:{a}", e) for a, e in SCALED])
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


@pytest.mark.parametrize(("arch", "exporter"),
                         CASES[:3] + [("scaled:qwen3", "dynamo"), ("gptj", "torchscript")]
                         + PROJECTED[-4:-1])
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


@pytest.mark.parametrize(("arch", "exporter"),
                         [("scaled:qwen3", "torchscript"), ("gptj", "dynamo")])
def test_an_attention_on_the_host_runs_its_folded_nodes_first(exports, arch, exporter):
    """An attention whose kernels take no shape (a host fallback) after its Rotary and norms
    launched nothing: the host runs them (the norms' scales too), writes them where views
    read them, and every step's logits stay onnxruntime's."""
    import onnxruntime as ort

    from netpass.runtime.kinds import FusedAttention, row_of
    dec, stateful = exports(arch, exporter)
    row = row_of(FusedAttention)
    kernel_impl = row.impl
    object.__setattr__(row, "impl", lambda p, key: None)  # (every shape to the host)
    try:
        cm, req = _request(stateful, {"TRANSFORMATIONS": "NONE"})
        assert None not in _folds(cm)
        twin = Twin(req, ort.InferenceSession(dec.onnx, providers=["CPUExecutionProvider"]),
                    dec, 1)
        rng = np.random.default_rng(11)
        for prompt in (5, 11):
            twin.start(1)
            nxt = twin.decode(twin.step(rng.integers(1, dec.vocab, (1, prompt))), 2)
            twin.step(np.concatenate([nxt, rng.integers(1, dec.vocab, (1, 2))], 1))
        assert req.stats["host_fallback_kinds"].get("FusedAttention", 0) > 0
    finally:
        object.__setattr__(row, "impl", kernel_impl)
