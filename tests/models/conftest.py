"""Session fixtures for the model tests: torch exports made once per test session."""
from __future__ import annotations

from collections.abc import Callable

import pytest


@pytest.fixture(scope="session")
def torch_export(tmp_path_factory) -> Callable:
    """``torch_export(name)`` -> ``torch_models.Exported``, exported on first use (skips the
    test when torch is not installed)."""
    pytest.importorskip("torch")
    import torch_models
    out_dir = tmp_path_factory.mktemp("torch_models")
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = torch_models.EXPORTERS[name](out_dir)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def hf_decoder() -> Callable:
    """``hf_decoder(name)`` -> ``export_decoder.Decoder`` ("gpt2", "llama"), exported on first
    use (skips the test without torch or transformers)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import hf_decoders
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = hf_decoders.EXPORTERS[name]()
        return cache[name]

    return get


@pytest.fixture(scope="session")
def hf_arch_decoder() -> Callable:
    """``hf_arch_decoder(arch, exporter)`` -> ``export_decoder.Decoder`` of the transformers
    model type ``arch`` exported by ``exporter`` ("torchscript", "dynamo"), exported on first
    use (skips the test without torch or transformers)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import hf_decoders
    cache: dict = {}

    def get(arch: str, exporter: str):
        if (arch, exporter) not in cache:
            cache[arch, exporter] = hf_decoders.export_arch(arch, exporter)
        return cache[arch, exporter]

    return get


@pytest.fixture(scope="session")
def hf_arch_decoder_sized() -> Callable:
    """``hf_arch_decoder_sized(arch, exporter="torchscript", **sizes)`` ->
    ``export_decoder.Decoder`` of ``arch`` at 2 layers with ``sizes`` (``hf_decoders.
    export_sized``), exported on first use (skips without torch or transformers)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import hf_decoders
    cache: dict = {}

    def get(arch: str, exporter: str = "torchscript", **sizes):
        key = (arch, exporter, tuple(sorted(sizes.items())))
        if key not in cache:
            cache[key] = hf_decoders.export_sized(arch, exporter, **sizes)
        return cache[key]

    return get
