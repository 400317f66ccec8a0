"""Export a Hugging Face decoder with its key/value cache as ONNX, as optimum does.

The TorchScript exporter (``torch.onnx.export(..., dynamo=False)``) cannot take a transformers
``Cache`` object, so a thin wrapper takes the cache as flat tensors (``past_key_values.N.key``
/ ``.value``, ``[batch, kv heads, past, head dim]``), builds a ``DynamicCache`` from them and
returns the grown cache flat (``present.N.key`` / ``.value``) after the logits. The other
inputs are ``input_ids``, ``attention_mask`` (past + new tokens) and ``position_ids``; batch and
sequence axes are dynamic. ``netpass.generation.stateful_decoder`` makes such an export
stateful.

    python tools/export_decoder.py --arch gpt2 -o gpt2.onnx                 # GPT-2 small, random
    python tools/export_decoder.py --arch llama --layers 2 --d 64 --heads 4 --kv-heads 2 \\
        --vocab 223 -o llama.onnx

Weights are random (nothing is downloaded), seeded. Needs torch and transformers.
"""
from __future__ import annotations

import argparse
import io
import warnings
from dataclasses import dataclass
from pathlib import Path

OPSET = 17


@dataclass
class Decoder:
    """An exported decoder: the ONNX bytes and the cache layout a caller feeds."""

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


def _flat_cache_module(model, layers: int):
    """``(input_ids, attention_mask, position_ids, *past) -> (logits, *present)``."""
    from torch import nn

    class FlatCache(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):
            from transformers import DynamicCache
            cache = DynamicCache()
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             position_ids=position_ids, past_key_values=cache, use_cache=True)
            present = out.past_key_values
            if hasattr(present, "layers"):  # transformers 5
                pairs = [(layer.keys, layer.values) for layer in present.layers]
            else:
                pairs = present.to_legacy_cache()
            return (out.logits, *[t for pair in pairs for t in pair])

    return FlatCache().eval()


def export_decoder(name: str, model, layers: int, kv_heads: int, head_dim: int,
                   vocab: int) -> Decoder:
    """Export the transformers causal LM ``model`` (put in eval mode) with its cache."""
    import torch
    wrapper = _flat_cache_module(model.eval(), layers)
    dec = Decoder(name, b"", layers, kv_heads, head_dim, vocab)
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


def gpt2(layers: int = 12, d: int = 768, heads: int = 12, vocab: int = 50257,
         positions: int = 1024, init: float = 0.02, seed: int = 0):
    """A GPT-2 (default: GPT-2 small's config) with random weights."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=vocab, n_positions=positions, n_embd=d, n_layer=layers,
                     n_head=heads, initializer_range=init, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(seed)
    return GPT2LMHeadModel(cfg), layers, heads, d // heads, vocab


def llama(layers: int = 2, d: int = 64, heads: int = 4, kv_heads: int = 2, vocab: int = 223,
          positions: int = 1024, init: float = 0.02, seed: int = 0, ffn: int | None = None):
    """A LLaMA-style decoder (rotary embeddings, RMSNorm, grouped-query attention)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=d, intermediate_size=ffn or 3 * d // 2,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, max_position_embeddings=positions,
                      initializer_range=init, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg), layers, kv_heads, d // heads, vocab


ARCHS = {"gpt2": gpt2, "llama": llama}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", choices=sorted(ARCHS), default="gpt2")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--d", type=int, help="hidden size")
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int, help="llama: key/value heads")
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--positions", type=int, help="longest sequence")
    ap.add_argument("--init", type=float, help="initializer range of the random weights")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", required=True, type=Path)
    args = ap.parse_args()
    given = {k: v for k, v in (("layers", args.layers), ("d", args.d), ("heads", args.heads),
                               ("vocab", args.vocab), ("positions", args.positions),
                               ("init", args.init), ("kv_heads", args.kv_heads))
             if v is not None}
    if args.arch == "gpt2" and "kv_heads" in given:
        ap.error("--kv-heads applies to --arch llama only")
    dec = export_decoder(args.arch, *ARCHS[args.arch](seed=args.seed, **given))
    args.output.write_bytes(dec.onnx)
    print(f"{args.output}: {args.arch}, {dec.layers} layers, {dec.kv_heads} kv heads of "
          f"{dec.head_dim}, vocab {dec.vocab}, {len(dec.onnx) / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
