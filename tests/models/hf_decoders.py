"""Hugging Face decoders with their key/value cache, exported the way optimum exports them.

Test-only (needs torch and transformers). Random weights from small configs written here,
nothing downloaded. The TorchScript exporter (``dynamo=False``) cannot take a transformers
``Cache`` object, so a thin wrapper takes the cache as flat tensors
(``past_key_values.N.key`` / ``.value``, ``[batch, kv heads, past, head dim]``), builds a
``DynamicCache`` from them and returns the grown cache flat (``present.N.key`` / ``.value``)
after the logits; ``input_ids``, ``attention_mask`` (past + new) and ``position_ids`` are the
other inputs, with dynamic batch and sequence axes, as optimum's decoder exports.

Weights are drawn 10x wider than transformers' default (``initializer_range=0.2``): with the
default a random GPT-2 repeats one token forever, which would make a greedy-decoding test
blind to a wrong cache.
"""
from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import torch
from torch import nn

OPSET = 17


@dataclass
class HfDecoder:
    """An exported decoder: the ONNX bytes and what a caller needs to feed its cache."""

    name: str
    onnx: bytes
    layers: int
    kv_heads: int
    head_dim: int
    vocab: int

    @property
    def past_names(self) -> list[str]:
        return [f"past_key_values.{i}.{kind}" for i in range(self.layers)
                for kind in ("key", "value")]

    @property
    def present_names(self) -> list[str]:
        return [f"present.{i}.{kind}" for i in range(self.layers) for kind in ("key", "value")]


class _FlatCache(nn.Module):
    """``(input_ids, attention_mask, position_ids, *past) -> (logits, *present)``."""

    def __init__(self, model: nn.Module, layers: int) -> None:
        super().__init__()
        self.model = model
        self.layers = layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        from transformers import DynamicCache
        cache = DynamicCache()
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=cache, use_cache=True)
        present = out.past_key_values
        if hasattr(present, "layers"):  # transformers 5
            pairs = [(layer.keys, layer.values) for layer in present.layers]
        else:
            pairs = present.to_legacy_cache()
        return (out.logits, *[t for pair in pairs for t in pair])


def _export(name: str, model: nn.Module, layers: int, kv_heads: int, head_dim: int,
            vocab: int) -> HfDecoder:
    wrapper = _FlatCache(model.eval(), layers).eval()
    dec = HfDecoder(name, b"", layers, kv_heads, head_dim, vocab)
    past_len, seq = 2, 3
    ids = torch.randint(0, vocab, (1, seq), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(1, past_len + seq, dtype=torch.int64)
    pos = torch.arange(past_len, past_len + seq)[None]
    past = [torch.randn(1, kv_heads, past_len, head_dim) for _ in dec.past_names]
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
           "position_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    dyn.update({n: {0: "batch", 2: "past"} for n in dec.past_names})
    dyn.update({n: {0: "batch", 2: "total"} for n in dec.present_names})
    buf = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapper, (ids, mask, pos, *past), buf, dynamo=False,
                          opset_version=OPSET,
                          input_names=["input_ids", "attention_mask", "position_ids",
                                       *dec.past_names],
                          output_names=["logits", *dec.present_names], dynamic_axes=dyn)
    dec.onnx = buf.getvalue()
    return dec


def export_gpt2() -> HfDecoder:
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=211, n_positions=256, n_embd=48, n_layer=2, n_head=4,
                     initializer_range=0.2, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    return _export("gpt2", GPT2LMHeadModel(cfg), 2, 4, 12, cfg.vocab_size)


def export_llama() -> HfDecoder:
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=223, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      initializer_range=0.2, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    torch.manual_seed(0)
    return _export("llama", LlamaForCausalLM(cfg), 2, 2, 16, cfg.vocab_size)


EXPORTERS = {"gpt2": export_gpt2, "llama": export_llama}
