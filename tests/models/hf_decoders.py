"""The Hugging Face decoders of the stateful-decoding tests, exported with their key/value cache
by ``tools/export_decoder.py`` (the flat-cache wrapper optimum's exports mirror).

Small configs with random weights, nothing downloaded. Weights are drawn 10x wider than
transformers' default (``initializer_range=0.2``): with the default a random GPT-2 repeats one
token forever, which would make a greedy-decoding test blind to a wrong cache. Positions up to
256: the tests decode 128 tokens after a prompt.

``export_arch(arch, exporter)``: any transformers model type (``ARCHS``) at the same scale (2
layers, hidden size 64, 4 heads, 2 key/value heads where it groups them), exported by the
TorchScript or the dynamo exporter.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from export_decoder import (
    UNEXPORTABLE,
    Decoder,
    causal_lm,
    export_decoder,
    gpt2,
    llama,
    ort_generate,
    tie_step,
)

__all__ = ["ARCHS", "Decoder", "EXPORTERS", "UNEXPORTABLE", "export_arch", "export_sized",
           "ort_generate", "tie_step"]


def export_gpt2() -> Decoder:
    return export_decoder("gpt2", *gpt2(layers=2, d=48, heads=4, vocab=211, positions=256,
                                        init=0.2))


def export_llama() -> Decoder:
    return export_decoder("llama", *llama(layers=2, d=64, heads=4, kv_heads=2, vocab=223,
                                          positions=256, init=0.2, ffn=96))


EXPORTERS = {"gpt2": export_gpt2, "llama": export_llama}


# The model types of the stateful-decoding tests of other archs (gpt2 and llama: by their own
# builders at the sizes above).
ARCHS = ("gpt2", "llama", "qwen2", "qwen3", "mistral", "ministral", "phi3", "phi", "gpt_neox",
         "opt", "gemma", "gemma2", "gemma3_text", "falcon", "bloom", "gptj", "codegen",
         "gpt_neo", "gpt_bigcode", "starcoder2", "stablelm", "persimmon", "olmo", "olmo2",
         "granite", "nemotron", "smollm3", "exaone4", "xglm", "biogpt", "mixtral", "qwen2_moe",
         "qwen3_moe", "olmoe", "mpt", "cohere", "glm", "helium", "llama4_text", "gpt_oss",
         "deepseek_v3", "deepseek_v2", "glm4", "glm4_moe", "cohere2", "granitemoe",
         "granitemoeshared", "phimoe", "dbrx", "ernie4_5", "ernie4_5_moe", "seed_oss",
         "hunyuan_v1_dense", "arcee", "apertus", "internlm3", "minicpm3", "exaone", "jetmoe",
         "olmo3", "vaultgemma", "bitnet", "doge", "diffllama", "nanochat", "lfm2", "ministral3",
         "gemma3n_text")

# Initializer ranges other than 0.2 where that one makes a random model of the type repeat a
# token (logit soft-capping saturates, ALiBi or scaled embeddings flatten the scores).
INIT = {"gemma": 0.5, "gemma2": 0.02, "gemma3_text": 0.02, "bloom": 2.0, "biogpt": 1.0,
        "xglm": 0.5, "mpt": 0.1, "vaultgemma": 0.5, "minicpm3": 0.5}


def export_arch(arch: str, exporter: str) -> Decoder:
    """``arch`` (a transformers model type) with random weights, exported by ``exporter``."""
    if arch == "gpt2":
        built = gpt2(layers=2, d=48, heads=4, vocab=211, positions=256, init=0.2)
    elif arch == "llama":
        built = llama(layers=2, d=64, heads=4, kv_heads=2, vocab=223, positions=256, init=0.2,
                      ffn=96)
    else:
        built = causal_lm(arch, layers=2, d=64, heads=4, kv_heads=2, vocab=223, positions=256,
                          init=INIT.get(arch, 0.2), ffn=96)
    return export_decoder(arch, *built, exporter=exporter)


def export_sized(arch: str, exporter: str = "torchscript", **sizes) -> Decoder:
    """``arch`` at 2 layers with the given ``sizes`` (``d``, ``heads``, ``kv_heads``, ...: the
    ``causal_lm`` arguments) over the defaults of :func:`export_arch`."""
    kw = {"layers": 2, "d": 64, "heads": 4, "kv_heads": 2, "vocab": 223, "positions": 256,
          "init": INIT.get(arch, 0.2), "ffn": 96, **sizes}
    return export_decoder(arch, *causal_lm(arch, **kw), exporter=exporter)
