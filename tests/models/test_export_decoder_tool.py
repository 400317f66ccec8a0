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
