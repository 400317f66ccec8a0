"""A prompt's attention on the tensor-core flash kernel (emulated on PoCL) for transformers
causal LMs of several model types, exported without a cache (``export_last_logits``, the
TorchScript exporter, two also the dynamo one; small configs, random weights): the logits of prompts of several
lengths, left-padded ones included, against onnxruntime (rel. L2 <= 1e-4), and the causal
bound the build proves of each export's mask (``runtime.mask_bounds``), which lets the kernel
visit only the key blocks up to each query block's diagonal and, where the mask is one padding
row inside it (not with a sliding window), read that row for every query. (A sweep of 38 model types on 2026-11-30: all that export matched, the
bound proven on all but MPT, whose mask is sliced from a constant.)
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hf_decoders import INIT

import netpass
from netpass.testing import RUNTIME_DEVICE

pytestmark = pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="emulated tensor cores on PoCL")
RTOL_L2 = 1e-4
# model type -> (whether the build proves its mask's causal bound, and one row inside it): mpt
# slices a constant, mistral's and gemma2's masks have a sliding window
CASES = {"llama": (True, True), "mistral": (True, False), "gemma2": (True, False),
         "bloom": (True, True), "falcon": (True, True), "gpt_neo": (True, True),
         "mpt": (False, False)}


@pytest.mark.parametrize("arch,exporter", [(a, "torchscript") for a in CASES]
                         + [("llama", "dynamo"), ("gemma2", "dynamo")])
def test_prompt_on_the_flash_kernel_equals_onnxruntime(arch, exporter, emulated_flash):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("transformers")
    from export_decoder import build, export_last_logits
    model = build(arch, layers=2, d=64, heads=4, kv_heads=2, vocab=223, positions=256,
                  init=INIT.get(arch, 0.2), ffn=96)[0].eval()
    if exporter == "dynamo":
        pytest.importorskip("onnxscript")
    exported = export_last_logits(model, 223, exporter)
    req = netpass.compile_model(netpass.read_model(exported), RUNTIME_DEVICE,
                                {"TRANSFORMATIONS": "NONE"}).create_infer_request()
    sess = ort.InferenceSession(exported, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for s, padded in ((40, 0), (70, 5), (23, 0)):
        feeds = {"input_ids": rng.integers(0, 223, (1, s)),
                 "attention_mask": (np.arange(s)[None] >= padded).astype(np.int64)}
        got, want = req.infer(feeds)["logits"], sess.run(None, feeds)[0]
        assert np.linalg.norm(got - want) / np.linalg.norm(want) <= RTOL_L2, (arch, exporter, s)
    flash = [key[2] for key in req._runtime_request.network.kernel_objects
             if "flash_attention(" in key[2]]
    assert flash
    bounded, one_row = CASES[arch]
    assert any("nlive" in text for text in flash) == bounded
    assert any(re.search(r"srow\d_s = ", text) for text in flash) == one_row
