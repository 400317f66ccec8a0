"""Export a Hugging Face causal LM with its key/value cache as ONNX, as optimum does.

Any transformers model type (``--arch``, e.g. ``gpt2``, ``llama``, ``qwen2``, ``gemma2``,
``falcon``, ``mixtral``) is built from a small config with random weights
(``AutoConfig.for_model`` with the size fields under the config's own names) and exported
with the TorchScript exporter (``--exporter torchscript``, ``dynamo=False``) or the dynamo
one (``--exporter dynamo``, ``torch.export`` with ``dynamic_shapes``). Neither can take a
transformers ``Cache`` object, so a thin wrapper takes the cache as flat tensors
(``past_key_values.N.key`` / ``.value``), builds a ``DynamicCache`` from them and returns the
grown cache flat (``present.N.key`` / ``.value``) after the logits. The other inputs are
``input_ids``, ``attention_mask`` (past + new tokens) and ``position_ids``; batch and sequence
axes are dynamic. The cache layout (``Decoder.past_dims``) is read off a real forward of the
model, not assumed. ``netpass.generation.stateful_decoder`` makes such an export stateful.
``export_last_logits``: a prompt's forward without a cache, the last position's logits only.

    python tools/export_decoder.py --arch gpt2 -o gpt2.onnx                 # GPT-2 small, random
    python tools/export_decoder.py --arch llama --layers 2 --d 64 --heads 4 --kv-heads 2 \\
        --vocab 223 -o llama.onnx
    python tools/export_decoder.py --arch qwen2 --exporter dynamo -o qwen2.onnx

Weights are random (nothing is downloaded), seeded. Needs torch and transformers (and
onnxscript for the dynamo exporter).
"""
from __future__ import annotations

import argparse
import inspect
import io
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OPSET = 17          # the TorchScript exporter's
DYNAMO_OPSET = 18   # the dynamo exporter's lowest
EXPORTERS = ("torchscript", "dynamo")

# (arch, exporter) pairs known not to export with transformers 5.24 / torch 2.13, and why.
UNEXPORTABLE = {
    ("mpt", "dynamo"): "torch.export finds the sizes of MPT's ALiBi bias slice inconsistent",
    **{(arch, "torchscript"): f"the TorchScript exporter fails on {arch}'s interleaved rotary "
       f"('All tensors must have the same rank')"
       for arch in ("cohere", "glm", "helium", "glm4", "cohere2", "ernie4_5", "ernie4_5_moe")},
    **{(arch, exporter): f"{arch}'s rotary embedding is complex (torch.polar): the TorchScript "
       f"exporter has no aten::polar, the dynamo one no complex unsqueeze"
       for arch in ("llama4_text", "deepseek_v2") for exporter in EXPORTERS},
    ("apertus", "torchscript"): "the TorchScript exporter has no aten::expm1 (xIELU)",
    ("diffllama", "torchscript"): "the TorchScript exporter has no aten::rms_norm",
    ("jetmoe", "torchscript"): "the TorchScript trace fixes the tokens per expert of its "
                               "example (a Split of constant sizes: onnxruntime fails too)",
    ("dbrx", "torchscript"): "DBRX loops over the experts its input routes to: the TorchScript "
                             "trace fixes the example's (a Split of constant sizes: onnxruntime "
                             "fails too)",
    ("dbrx", "dynamo"): "DBRX loops over the experts its input routes to: torch.export cannot "
                        "guard on their count (GuardOnDataDependentSymNode)",
}

# A logical size -> the config attributes it goes by; the first one the config takes wins.
FIELDS = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "d": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head", "num_heads", "n_heads", "attention_heads"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads"),
    "ffn": ("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"),
    "vocab": ("vocab_size",),
    "positions": ("max_position_embeddings", "n_positions", "max_seq_len"),
    "init": ("initializer_range", "init_std"),
}


@dataclass
class Decoder:
    """An exported decoder: the ONNX bytes and the cache layout a caller feeds.

    ``past_dims`` (one per past input, in ``past_names`` order) holds each axis's size, with
    ``"batch"`` and ``"past"`` for the dynamic ones; empty: ``[batch, kv_heads, past,
    head_dim]``. ``kv_heads`` and ``head_dim`` are those of the first key."""

    name: str
    onnx: bytes
    layers: int
    kv_heads: int
    head_dim: int
    vocab: int
    exporter: str = "torchscript"
    past_dims: list[tuple[int | str, ...]] = field(default_factory=list)

    @property
    def past_names(self) -> list[str]:
        return [f"past_key_values.{i}.{kind}" for i in range(self.layers)
                for kind in ("key", "value")]

    @property
    def present_names(self) -> list[str]:
        return [f"present.{i}.{kind}" for i in range(self.layers) for kind in ("key", "value")]

    def past_shape(self, name: str, batch: int = 1, past: int = 0) -> tuple[int, ...]:
        """The shape of past input ``name`` holding ``past`` tokens of ``batch`` sequences."""
        dims = (self.past_dims[self.past_names.index(name)] if self.past_dims
                else ("batch", self.kv_heads, "past", self.head_dim))
        return tuple(batch if d == "batch" else past if d == "past" else int(d) for d in dims)


def _forward(model, **kw):
    """``model(**kw, cache=..., use_cache=True)`` under the cache argument's name in this
    transformers (``cache`` in 5.x, ``past_key_values`` before); the output's cache as
    ``[(key, value)]`` per layer."""
    params = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"
    if "cache" in kw:
        kw[cache_kw] = kw.pop("cache")
    out = model(**kw, use_cache=True)
    present = out.get("cache", None) or out.get("past_key_values", None)
    if hasattr(present, "layers"):  # transformers 5
        pairs = [(layer.keys, layer.values) for layer in present.layers]
    elif hasattr(present, "to_legacy_cache"):
        pairs = present.to_legacy_cache()
    else:
        pairs = present
    return out.logits, [t for pair in pairs for t in pair]


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
            logits, present = _forward(self.model, input_ids=input_ids,
                                       attention_mask=attention_mask,
                                       position_ids=position_ids, cache=cache)
            return (logits, *present)

    return FlatCache().eval()


def cache_layout(model, vocab: int) -> list[tuple[int | str, ...]]:
    """Each cache tensor's axes as a real forward of ``model`` (no past) fills them: the axis
    that follows the batch ``"batch"``, the one that follows the length ``"past"``, the others
    their size. Forwards of batch 1 and 2 and lengths 3 and 5 tell them apart."""
    import torch
    shapes = {}
    with torch.no_grad():
        for batch, length in ((1, 3), (2, 3), (1, 5)):
            ids = torch.randint(0, vocab, (batch, length),
                                generator=torch.Generator().manual_seed(0))
            _, present = _forward(model, input_ids=ids)
            shapes[batch, length] = [tuple(t.shape) for t in present]
    layout = []
    for base, wide, long in zip(shapes[1, 3], shapes[2, 3], shapes[1, 5]):
        dims: list[int | str] = []
        for b, w, n in zip(base, wide, long):
            if w != b and n == b and w == 2 * b and b == 1:
                dims.append("batch")
            elif n != b and w == b and (n, b) == (5, 3):
                dims.append("past")
            elif w == b and n == b:
                dims.append(b)
            else:
                raise ValueError(f"{type(model).__name__}: cache axis of sizes {b}, {w}, {n} "
                                 f"for (batch, length) (1, 3), (2, 3), (1, 5): neither the "
                                 f"batch, the length nor fixed")
        layout.append(tuple(dims))
    return layout


def export_decoder(name: str, model, layers: int, kv_heads: int, head_dim: int,
                   vocab: int, exporter: str = "torchscript") -> Decoder:
    """Export the transformers causal LM ``model`` (put in eval mode) with its cache.
    ``kv_heads`` and ``head_dim`` are checked against the cache of a real forward."""
    import torch
    if exporter not in EXPORTERS:
        raise ValueError(f"{name}: exporter {exporter!r} is not one of {EXPORTERS}")
    if (name, exporter) in UNEXPORTABLE:
        raise ValueError(f"{name} does not export with the {exporter} exporter: "
                         f"{UNEXPORTABLE[name, exporter]}")
    model = model.eval()
    layout = cache_layout(model, vocab)
    if len(layout) != 2 * layers:
        raise ValueError(f"{name}: {len(layout)} cache tensors, expected 2 x {layers} layers")
    first = layout[0]
    kv_heads, head_dim = (first[1], first[3]) if len(first) == 4 else (kv_heads, head_dim)
    dec = Decoder(name, b"", layers, int(kv_heads), int(head_dim), vocab, exporter, layout)
    wrapper = _flat_cache_module(model, layers)
    batch = 1 if exporter == "torchscript" else 2
    past_len, seq = 7, 3
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    mask = torch.ones(batch, past_len + seq, dtype=torch.int64)
    pos = torch.arange(past_len, past_len + seq)[None].expand(batch, seq).contiguous()
    past = [torch.randn(dec.past_shape(n, batch, past_len), generator=gen)
            for n in dec.past_names]
    names = dict(input_names=["input_ids", "attention_mask", "position_ids", *dec.past_names],
                 output_names=["logits", *dec.present_names])
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            dec.onnx = _torchscript(wrapper, (ids, mask, pos, *past), dec, names)
        else:
            dec.onnx = _dynamo(wrapper, (ids, mask, pos, *past), dec, names)
    return dec


def ort_generate(dec: Decoder, prompt, new_tokens: int) -> list:
    """onnxruntime on ``dec``'s plain export, greedy from ``prompt`` (``[batch, length]``
    ints), its cache fed back: the last position's logits of each of ``new_tokens`` steps
    (the reference a stateful run is checked against)."""
    import numpy as np
    import onnxruntime as ort
    sess = ort.InferenceSession(dec.onnx, providers=["CPUExecutionProvider"])
    takes = {i.name for i in sess.get_inputs()}
    names = [o.name for o in sess.get_outputs()]
    batch = prompt.shape[0]
    cache = {n: np.zeros(dec.past_shape(n, batch, 0), np.float32) for n in dec.past_names}
    ids, past, logits = prompt, 0, []
    while True:
        n = ids.shape[1]
        feeds = {"input_ids": ids, "attention_mask": np.ones((batch, past + n), np.int64),
                 "position_ids": np.broadcast_to(np.arange(past, past + n), (batch, n)).copy(),
                 **cache}
        out = dict(zip(names, sess.run(None, {k: v for k, v in feeds.items() if k in takes})))
        logits.append(out["logits"][:, -1])
        if len(logits) == new_tokens:
            return logits
        cache = {p: out[p.replace("past_key_values", "present")] for p in dec.past_names}
        past += n
        ids = logits[-1].argmax(-1)[:, None]


def tie_step(logits: list, tolerance: float) -> int:
    """The first step of ``logits`` whose two best are within ``tolerance`` of the step's
    norm (greedy choices past it may differ by rounding alone), or ``len(logits)``."""
    import numpy as np
    for k, step in enumerate(logits):
        top = np.sort(step, axis=-1)[:, -2:]
        if np.any(top[:, 1] - top[:, 0] <= tolerance * np.linalg.norm(step, axis=-1)):
            return k
    return len(logits)


def last_logits(model):
    """``model`` (a transformers causal LM) returning the last position's logits only, from
    ``(input_ids, attention_mask)``: a prompt's forward as a generation's first step runs it."""
    import torch

    class LastLogits(torch.nn.Module):
        def __init__(self, m) -> None:
            super().__init__()
            self.m = m

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask, use_cache=False,
                          logits_to_keep=1).logits
    return LastLogits(model)


def export_last_logits(model, vocab: int, exporter: str = "torchscript") -> bytes:
    """:func:`last_logits` of ``model`` exported to ONNX: a prompt's forward without a cache.
    TorchScript: opset 17, batch and sequence dynamic; dynamo: opset 18, the sequence
    dynamic."""
    import torch
    ids = torch.randint(0, vocab, (1, 7))
    names = {"input_names": ["input_ids", "attention_mask"], "output_names": ["logits"]}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            seq = torch.export.Dim("s", min=2, max=4096)
            program = torch.onnx.export(last_logits(model).eval(), (ids, torch.ones_like(ids)),
                                        dynamo=True, opset_version=18,
                                        dynamic_shapes=({1: seq}, {1: seq}), **names)
            return program.model_proto.SerializeToString()
        buf = io.BytesIO()
        torch.onnx.export(last_logits(model).eval(), (ids, torch.ones_like(ids)), buf,
                          dynamo=False, opset_version=17,
                          dynamic_axes={"input_ids": {0: "b", 1: "s"},
                                        "attention_mask": {0: "b", 1: "s"}, "logits": {0: "b"}},
                          **names)
    return buf.getvalue()


def _axes(dims, seq: str) -> dict[int, str]:
    return {a: "batch" if d == "batch" else seq for a, d in enumerate(dims)
            if d in ("batch", "past")}


def _torchscript(wrapper, args, dec: Decoder, names: dict) -> bytes:
    import torch
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
           "position_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    dyn.update({n: _axes(d, "past") for n, d in zip(dec.past_names, dec.past_dims)})
    dyn.update({n: _axes(d, "total") for n, d in zip(dec.present_names, dec.past_dims)})
    buf = io.BytesIO()
    torch.onnx.export(wrapper, args, buf, dynamo=False, opset_version=OPSET,
                      dynamic_axes=dyn, **names)
    return buf.getvalue()


def _dynamo(wrapper, args, dec: Decoder, names: dict) -> bytes:
    """``torch.onnx.export(dynamo=True)``: batch, new tokens and past dynamic (``Dim.AUTO``:
    torch.export works out that the mask's length is their sum)."""
    import torch
    auto = torch.export.Dim.AUTO
    tokens = {0: auto, 1: auto}
    past = tuple(dict.fromkeys(_axes(d, "past"), auto) for d in dec.past_dims)
    prog = torch.onnx.export(wrapper, args, dynamo=True, opset_version=DYNAMO_OPSET,
                             dynamic_shapes=(tokens, tokens, tokens, past), verbose=False,
                             **names)
    return prog.model_proto.SerializeToString()


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


def _arch_extras(arch: str, layers: int, d: int, heads: int, ffn: int) -> dict:
    """Config fields besides the sizes that a small model of ``arch`` needs: head sizes that
    default to a big model's, expert counts, per-layer lists sized to ``layers``."""
    head = d // heads
    extras = {"head_dim": head, "rotary_dim": head, "n_ctx": None,
              "moe_intermediate_size": ffn, "shared_expert_intermediate_size": ffn,
              "num_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
              "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0,
              "decoder_start_token_id": 0,
              # multi-head latent attention (DeepSeek-V2/V3, MiniCPM3): small latent ranks;
              # routed experts in one group, the first layer dense
              "qk_rope_head_dim": head // 2, "qk_nope_head_dim": head // 2, "v_head_dim": head,
              "kv_lora_rank": d // 2, "q_lora_rank": d // 2, "n_routed_experts": 4,
              "n_shared_experts": 1, "n_group": 1, "topk_group": 1, "first_k_dense_replace": 1,
              "moe_num_experts": 4, "moe_k": 2,
              # (Gemma 3n's last layers read earlier layers' caches: none at 2 layers)
              "num_kv_shared_layers": 0}
    if arch.startswith("deepseek"):  # (its rotary embedding is sized by head_dim)
        extras["head_dim"] = head // 2
    if arch == "dbrx":  # (transformers 5.24's DBRX reads rope_theta off its attention config
        # and clamps by clip_qkv unguarded: both given)
        extras["attn_config"] = {"kv_n_heads": max(heads // 2, 1), "rope_theta": 10000.0,
                                 "clip_qkv": 8.0}
        extras["ffn_config"] = {"ffn_hidden_size": ffn, "moe_num_experts": 4, "moe_top_k": 2}
    if arch == "gpt_neo":
        extras["attention_types"] = [[["global", "local"], max(layers // 2, 1)]]
        extras["window_size"] = 16
    return extras


def causal_lm(arch: str, layers: int = 2, d: int = 64, heads: int = 4,
              kv_heads: int | None = None, vocab: int = 223, positions: int = 256,
              init: float = 0.02, seed: int = 0, ffn: int | None = None,
              config: Mapping[str, Any] | None = None):
    """A transformers causal LM of model type ``arch`` (any ``AutoModelForCausalLM`` takes)
    with random weights: the sizes go under the names its config takes them by (``FIELDS``);
    ``kv_heads`` (default ``heads // 2``) where it has grouped-query attention. ``config``:
    more config fields (activation, norm epsilon, rotary parameters, ...), over all those."""
    import torch
    from transformers import CONFIG_MAPPING, AutoConfig, AutoModelForCausalLM
    if arch not in CONFIG_MAPPING:
        raise ValueError(f"unknown transformers model type {arch!r}")
    cls = CONFIG_MAPPING[arch]
    takes = set(inspect.signature(cls.__init__).parameters)
    ffn = ffn or 2 * d
    # (multi-head latent attention expands its latent to every head: no key/value groups)
    kv_heads = heads if "kv_lora_rank" in takes else kv_heads
    sizes = {"layers": layers, "d": d, "heads": heads, "kv_heads": kv_heads or heads // 2,
             "ffn": ffn, "vocab": vocab, "positions": positions, "init": init}
    kw = {}
    for key, value in sizes.items():
        name = next((n for n in FIELDS[key] if n in takes), None)
        if name is not None:
            kw[name] = value
    for name, value in _arch_extras(arch, layers, d, heads, ffn).items():
        if name in takes:
            kw[name] = positions if name == "n_ctx" else value
    kw.update(config or {})
    cfg = AutoConfig.for_model(arch, **kw)
    # mixture of experts: gather each token's experts' weights ("batched_mm"), which traces
    # (the default "grouped_mm" counts tokens per expert with histc, which TorchScript lacks,
    # and "eager" loops over the experts the example input routed to); set for every model
    # type (dense ones ignore it): the top-k field goes by several names (moe_k, ...)
    moe = {"experts_implementation": "batched_mm"}
    torch.manual_seed(seed)
    try:
        model = AutoModelForCausalLM.from_config(cfg, **moe)
    except ValueError as e:
        raise ValueError(f"{arch} has no causal LM in transformers: {e}") from e
    return model, layers, kw.get("num_key_value_heads", heads), d // heads, vocab


ARCHS = {"gpt2": gpt2, "llama": llama}


def build(arch: str, seed: int = 0, **sizes):
    """``(model, layers, kv_heads, head_dim, vocab)`` of ``arch``: ``gpt2`` and ``llama`` by
    their own builders, any other transformers model type by :func:`causal_lm`."""
    if arch in ARCHS:
        return ARCHS[arch](seed=seed, **sizes)
    return causal_lm(arch, seed=seed, **sizes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="gpt2",
                    help="transformers model type (gpt2, llama, qwen2, gemma2, falcon, ...)")
    ap.add_argument("--exporter", choices=EXPORTERS, default="torchscript")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--d", type=int, help="hidden size")
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int, help="key/value heads (grouped-query attention)")
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
        ap.error("--kv-heads applies to grouped-query archs (not gpt2)")
    if (args.arch, args.exporter) in UNEXPORTABLE:
        ap.error(f"--arch {args.arch} does not export with --exporter {args.exporter}: "
                 f"{UNEXPORTABLE[args.arch, args.exporter]}")
    try:
        dec = export_decoder(args.arch, *build(args.arch, seed=args.seed, **given),
                             exporter=args.exporter)
    except Exception as e:
        ap.error(f"--arch {args.arch} --exporter {args.exporter} failed: "
                 f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    args.output.write_bytes(dec.onnx)
    print(f"{args.output}: {args.arch}, {dec.layers} layers, {dec.kv_heads} kv heads of "
          f"{dec.head_dim}, vocab {dec.vocab}, {len(dec.onnx) / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
