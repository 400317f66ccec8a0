"""Hugging Face transformers exports over several input shapes in ONE infer request, against
onnxruntime (issue 14, point 1). From the third distinct shape a request runs in symbolic mode,
where the T5 and BART exports used to fail ("Concat '...': no value for output 0": a mask
Reshape on the host read a target whose ShapeOf sub-graph does not run). Random weights from
small configs written here; nothing is downloaded. Skips without torch or transformers."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")

import netpass  # noqa: E402
from netpass.testing import RUNTIME_DEVICE  # noqa: E402

VOCAB = 1000
TOL = 1e-4  # relative L2


class _Logits(torch.nn.Module):
    """The model called with keyword inputs, logits only, no cache."""

    def __init__(self, model: torch.nn.Module, names: tuple[str, ...]) -> None:
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *args):
        return self.model(**dict(zip(self.names, args)), use_cache=False).logits


def _gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=256)
    return transformers.GPT2LMHeadModel(cfg), ("input_ids", "attention_mask")


def _t5():
    cfg = transformers.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                num_heads=4, decoder_start_token_id=0)
    return transformers.T5ForConditionalGeneration(cfg), ("input_ids", "attention_mask",
                                                          "decoder_input_ids")


def _bart():
    cfg = transformers.BartConfig(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=4, decoder_attention_heads=4,
                                  encoder_ffn_dim=128, decoder_ffn_dim=128,
                                  max_position_embeddings=256)
    return transformers.BartForConditionalGeneration(cfg), ("input_ids", "attention_mask",
                                                            "decoder_input_ids")


ARCHS = {"gpt2": _gpt2, "t5": _t5, "bart": _bart}


def _feeds(names, batch: int, length: int, rng) -> dict[str, np.ndarray]:
    out = {}
    for name in names:
        if name == "attention_mask":
            out[name] = np.ones((batch, length), np.int64)
        else:
            n = length if name == "input_ids" else max(1, length - 1)
            out[name] = rng.integers(0, VOCAB, (batch, n)).astype(np.int64)
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """``exported(arch) -> (path, input names)``, exported once per module with the
    TorchScript exporter, dynamic batch and sequence axes."""
    out_dir = tmp_path_factory.mktemp("transformers")
    cache: dict = {}

    def get(arch: str) -> tuple[Path, tuple[str, ...]]:
        if arch not in cache:
            torch.manual_seed(0)
            model, names = ARCHS[arch]()
            rng = np.random.default_rng(0)
            example = tuple(torch.from_numpy(a) for a in _feeds(names, 1, 5, rng).values())
            axes = {n: {0: "batch", 1: "dec" if n.startswith("decoder") else "seq"} for n in names}
            path = out_dir / f"{arch}.onnx"
            torch.onnx.export(_Logits(model.eval(), names), example, str(path), input_names=list(names),
                              output_names=["logits"], dynamic_axes=axes, dynamo=False)
            cache[arch] = (path, names)
        return cache[arch]

    return get


def _rel_l2(a, b) -> float:
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


@pytest.mark.parametrize("arch,transformations,shapes", [
    ("gpt2", "NONE", [(1, 1), (1, 2), (1, 3), (1, 4), (1, 2)]),
    ("gpt2", "COMMON", [(1, 1), (1, 128), (1, 64), (2, 64)]),
    ("gpt2", "GNA", [(1, 1), (1, 2), (1, 3), (2, 3)]),
    ("t5", "NONE", [(1, 1), (1, 2), (1, 3), (1, 4), (1, 3)]),
    ("t5", "GNA", [(1, 1), (1, 128), (1, 64)]),
    ("bart", "NONE", [(1, 1), (1, 2), (1, 3), (2, 4), (1, 3)]),
    ("bart", "COMMON", [(1, 1), (1, 128), (1, 64)]),
])
def test_one_request_over_a_shape_sequence_matches_onnxruntime(exported, arch, transformations, shapes):
    path, names = exported(arch)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    cm = netpass.compile_model(path, device=RUNTIME_DEVICE,
                               config={"TRANSFORMATIONS": transformations, "DEBUG_CHECKS": True})
    req = cm.create_infer_request()
    rng = np.random.default_rng(1)
    for batch, length in shapes:
        feeds = _feeds(names, batch, length, rng)
        ref = sess.run(None, feeds)[0]
        out = req.infer(feeds)["logits"]
        assert out.shape == ref.shape, (batch, length)
        assert _rel_l2(out, ref) <= TOL, (batch, length, _rel_l2(out, ref))
    assert req.stats["symbolic_infers"] >= 1  # the shapes reached symbolic mode
