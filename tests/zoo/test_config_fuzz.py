"""Config fuzzing of the transformers zoo (``tools/config_fuzz.py``): the zoo's encoder,
vision, speech and seq2seq specs re-built from perturbed small configs (odd and small head
sizes, odd feed-forward and vocabulary sizes, 1-3 layers, activations, norm epsilons, tied
embeddings), exported, compiled by netpass for ``RUNTIME_DEVICE`` and run over 3-5 input
shapes in ONE infer request, each within rel. L2 1e-4 of onnxruntime. (The decoders' config
fuzzing, stateful: ``tests/models/test_decoder_config_fuzz.py``.)

A draw torch, transformers or onnxruntime itself refuses is not a case (hypothesis rejects it;
the slow sweep skips it). CI: a few derandomized draws with the TorchScript exporter;
``-m slow``: every spec with both exporters, two seeds each, and the model types the zoo does
not cover (``config_fuzz.NEW_SPECS``).
"""
from __future__ import annotations

import config_fuzz
import export_zoo
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")

CI_SPECS = ("bert", "t5", "deberta_v2", "vit", "bart")
SLOW_SEEDS = (0, 1)
_SETTINGS = dict(derandomize=True, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@settings(max_examples=4, **_SETTINGS)
@given(name=st.sampled_from(CI_SPECS), seed=st.integers(0, 2**16))
def test_drawn_configs_follow_onnxruntime(tmp_path_factory, name, seed):
    errors = config_fuzz.case_errors(name, "torchscript", seed,
                                     tmp_path_factory.mktemp("cfg"))
    if errors is None:
        reject()
    assert not errors, f"{name} seed {seed}: {errors}"


def _slow(cases):
    return [pytest.param(*c, id="-".join(map(str, c)), marks=pytest.mark.slow) for c in cases]


@pytest.mark.parametrize(("name", "exporter", "seed"), _slow(
    (n, e, s) for n in [*config_fuzz.SPECS, *config_fuzz.NEW_SPECS]
    for e in export_zoo.EXPORTERS for s in SLOW_SEEDS
    if (n, e) not in config_fuzz.FAILURES and not n.endswith("_past")
    and n not in ("whisper_encoder", "depth_anything")))   # (not built from a config dict)
def test_sweep_specs(tmp_path_factory, name, exporter, seed):
    errors = config_fuzz.case_errors(name, exporter, seed,
                                     tmp_path_factory.mktemp("cfg"))
    if errors is None:
        pytest.skip("torch, the exporter or onnxruntime refuses this draw")
    assert not errors
