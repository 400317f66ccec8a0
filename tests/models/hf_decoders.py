"""The Hugging Face decoders of the stateful-decoding tests, exported with their key/value cache
by ``tools/export_decoder.py`` (the flat-cache wrapper optimum's exports mirror).

Small configs with random weights, nothing downloaded. Weights are drawn 10x wider than
transformers' default (``initializer_range=0.2``): with the default a random GPT-2 repeats one
token forever, which would make a greedy-decoding test blind to a wrong cache. Positions up to
256: the tests decode 128 tokens after a prompt.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from export_decoder import Decoder, export_decoder, gpt2, llama

__all__ = ["Decoder", "EXPORTERS"]


def export_gpt2() -> Decoder:
    return export_decoder("gpt2", *gpt2(layers=2, d=48, heads=4, vocab=211, positions=256,
                                        init=0.2))


def export_llama() -> Decoder:
    return export_decoder("llama", *llama(layers=2, d=64, heads=4, kv_heads=2, vocab=223,
                                          positions=256, init=0.2, ffn=96))


EXPORTERS = {"gpt2": export_gpt2, "llama": export_llama}
