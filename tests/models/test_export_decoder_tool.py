"""tools/export_decoder.py from the command line: a LLaMA-style decoder with its cache as
inputs and outputs, which netpass reads, finds the pairs of and runs as onnxruntime does."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import netpass
from netpass.ngraph_passes.common import find_kv_cache_pairs

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "export_decoder.py"


def test_help():
    proc = subprocess.run([sys.executable, TOOL, "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--arch" in proc.stdout


def test_exports_a_decoder_netpass_runs(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    ort = pytest.importorskip("onnxruntime")
    out = tmp_path / "llama.onnx"
    proc = subprocess.run([sys.executable, TOOL, "--arch", "llama", "--layers", "1", "--d", "16",
                           "--heads", "2", "--kv-heads", "1", "--vocab", "31", "-o", out],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "1 layers, 1 kv heads of 8, vocab 31" in proc.stdout
    model = netpass.read_model(out)
    assert find_kv_cache_pairs(model) == {"past_key_values.0.key": "present.0.key",
                                          "past_key_values.0.value": "present.0.value"}
    rng = np.random.default_rng(0)
    feeds = {"input_ids": rng.integers(0, 31, (1, 2)), "attention_mask": np.ones((1, 5), np.int64),
             "position_ids": np.array([[3, 4]]),
             "past_key_values.0.key": rng.standard_normal((1, 1, 3, 8)).astype(np.float32),
             "past_key_values.0.value": rng.standard_normal((1, 1, 3, 8)).astype(np.float32)}
    want = ort.InferenceSession(str(out)).run(None, feeds)
    got = netpass.reference.infer(model, feeds)
    np.testing.assert_allclose(got["logits"], want[0], rtol=1e-4, atol=1e-5)
    assert got["present.0.key"].shape == (1, 1, 5, 8)


def test_a_pair_that_does_not_export_is_an_error_naming_it(tmp_path):
    proc = subprocess.run([sys.executable, TOOL, "--arch", "mpt", "--exporter", "dynamo",
                           "-o", tmp_path / "mpt.onnx"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "--arch mpt does not export with --exporter dynamo" in proc.stderr


def test_an_unknown_model_type_is_an_error_naming_it(tmp_path):
    pytest.importorskip("transformers")
    proc = subprocess.run([sys.executable, TOOL, "--arch", "nonesuch", "-o", tmp_path / "x.onnx"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "nonesuch" in proc.stderr.splitlines()[-1]
    assert not (tmp_path / "x.onnx").exists()


def test_the_cache_layout_is_read_off_a_forward():
    """Multi-query attention (one key/value head for gpt_bigcode and falcon) and grouped-query
    attention: the past inputs' shapes are those of the model's own cache."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "tools"))
    from export_decoder import Decoder, cache_layout, causal_lm
    for arch, heads in (("gpt_bigcode", 1), ("falcon", 1), ("qwen2", 2), ("opt", 4)):
        model, *_ = causal_lm(arch, layers=2, d=32, heads=4, kv_heads=2, vocab=31)
        layout = cache_layout(model.eval(), 31)
        assert layout == [("batch", heads, "past", 8)] * 4, arch
        dec = Decoder(arch, b"", 2, heads, 8, 31, past_dims=layout)
        assert dec.past_shape("past_key_values.1.value", 3, 5) == (3, heads, 5, 8)
