"""Config fuzzing of transformers causal LMs (``tools/config_fuzz.py``), stateful: each model
type built from a drawn small config (heads and key/value heads in ratios 1-4 and multi-query,
head sizes 4-20 or their own, odd feed-forward and vocabulary sizes, 1-3 layers, activations,
norm epsilons, rotary scaling (linear, dynamic, yarn, llama3), ``rope_theta``, partial rotary,
sliding windows, bias, tying and architecture flags), exported by ``tools/export_decoder.py``,
made stateful (``stateful_decoder``), compiled for ``RUNTIME_DEVICE``; two greedy generations
on one request (prompts of 1-9 tokens, batch 1-2) against the plain export run step by step in
onnxruntime: the same tokens up to a tie, the logits within rel. L2 1e-4.

A draw torch, transformers or onnxruntime itself refuses is not a case. CI: two derandomized
draws (TorchScript); ``-m slow``: every model type of ``test_decoder_archs.py`` and some the
repo does not cover otherwise (``NEW_DECODERS``), both exporters, two seeds each.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hf_decoders import ARCHS
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import config_fuzz

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")

CI_DECODERS = ("llama", "qwen2", "gpt2")
NEW_DECODERS = ("dots1", "cwm", "jais2", "flex_olmo", "hunyuan_v1_moe", "exaone_moe",
                "solar_open", "granite_swa", "gpt_neox_japanese", "ctrl")
SLOW_SEEDS = (0, 1)


@settings(max_examples=2, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(arch=st.sampled_from(CI_DECODERS), seed=st.integers(0, 2**16))
def test_drawn_decoders_generate_as_onnxruntime(tmp_path_factory, arch, seed):
    errors = config_fuzz.case_errors(f"decoder:{arch}", "torchscript", seed,
                                     tmp_path_factory.mktemp("cfg"))
    if errors is None:
        reject()
    assert not errors, f"{arch} seed {seed}: {config_fuzz.decoder_draw(arch, seed)}: {errors}"


def _slow(cases):
    return [pytest.param(*c, id="-".join(map(str, c)), marks=pytest.mark.slow) for c in cases]


@pytest.mark.parametrize(("arch", "exporter", "seed"), _slow(
    (a, e, s) for a in (*ARCHS, *NEW_DECODERS) for e in config_fuzz.export_zoo.EXPORTERS
    for s in SLOW_SEEDS if (a, e) not in config_fuzz.UNEXPORTABLE))
def test_sweep_decoders(tmp_path_factory, arch, exporter, seed):
    errors = config_fuzz.case_errors(f"decoder:{arch}", exporter, seed,
                                     tmp_path_factory.mktemp("cfg"))
    if errors is None:
        pytest.skip("torch, the exporter or onnxruntime refuses this draw")
    assert not errors
