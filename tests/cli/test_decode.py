"""``netpass benchmark MODEL --decode PROMPT_LEN:NEW_TOKENS`` on a tiny language model saved
with its key/value cache as inputs and outputs (made stateful by the command)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from cli_helpers import EXAMPLES, netpass_cli

import netpass
from netpass import Model, opset
from netpass.generation import GreedyDecoder, stateful_decoder
from netpass.testing import RUNTIME_DEVICE

VOCAB, D = 19, 6


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    """logits = (the new embeddings + the mean of the cached ones) @ W, cache as past/present."""
    rng = np.random.default_rng(3)
    ids = opset.parameter([1, -1], np.int64, name="input_ids")
    past = opset.parameter([1, -1, D], np.float32, name="past_key_values.0.key")
    emb = opset.gather(opset.constant(rng.normal(size=(VOCAB, D)).astype(np.float32)), ids,
                       opset.constant(np.int64(0)))
    present = opset.concat([past, emb], 1)
    mean = opset.reduce_mean(present, opset.constant(np.array([1])), True)
    logits = opset.matmul(opset.add(emb, mean),
                          opset.constant(rng.normal(size=(D, VOCAB)).astype(np.float32)),
                          False, False)
    model = Model([opset.result(logits, name="logits"),
                   opset.result(present, name="present.0.key")], [ids, past], "tiny_lm")
    path = tmp_path_factory.mktemp("decode") / "tiny_lm.xml"
    netpass.save_model(model, path)
    return path


@pytest.mark.parametrize("device", ["REFERENCE", RUNTIME_DEVICE])
def test_decode_reports_first_token_latency_and_throughput(tiny_lm, device):
    proc = netpass_cli("benchmark", tiny_lm, "--decode", "5:7", "--device", device,
                       "--transformations", "none", "--iterations", "2", "--warmup", "0")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.search(r"^decode tiny_lm.xml: none pipeline, device .*, 1 variables$", out, re.M)
    assert "prompt 5 tokens, 7 new tokens, batch 1, greedy, 2 generation(s)" in out
    assert re.search(r"^time to first token: p50 [\d.]+ ms", out, re.M)
    assert re.search(r"^per-token latency: p50 [\d.]+ ms.*, mean [\d.]+ ms$", out, re.M)
    assert re.search(r"^tokens/s: [\d.]+ \(decode\)$", out, re.M)
    if device != "REFERENCE":
        assert re.search(r"^launches per token: [\d.]+, host waits per token: 1.00$", out, re.M)
        assert re.search(r"^allocations over the 6 decode steps: \d+ for the variables", out, re.M)
    # the tokens are the ones GreedyDecoder chooses from the same seeded prompt
    printed = [int(t) for t in re.search(r"^tokens: \[([^\]]*)\]", out, re.M).group(1).split(",")]
    cm = netpass.compile_model(stateful_decoder(netpass.read_model(tiny_lm)), "REFERENCE")
    prompt = np.random.default_rng(0).integers(0, VOCAB, (1, 5))
    assert printed == GreedyDecoder(cm).generate(prompt, 7).tokens[0].tolist()


@pytest.mark.parametrize("args, message", [
    (["--decode", "5"], "expected PROMPT_LEN:NEW_TOKENS"),
    (["--decode", "0:4"], "needs PROMPT_LEN >= 1 and NEW_TOKENS >= 1"),
    (["--decode", "4:4", "--shapes", "input_ids=1,4"], "--decode takes no --shapes"),
])
def test_decode_usage_errors(tiny_lm, args, message):
    proc = netpass_cli("benchmark", tiny_lm, *args)
    assert proc.returncode != 0 and message in proc.stderr


def test_decode_needs_a_decoder():
    proc = netpass_cli("benchmark", EXAMPLES / "kws_cnn.onnx", "--decode", "4:4")
    assert proc.returncode != 0
    assert "--decode needs a decoder exported with its key/value cache" in proc.stderr
