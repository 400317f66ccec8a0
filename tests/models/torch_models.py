"""Typical architectures built with torch and exported the way users export them
(``torch.onnx.export(..., dynamo=False, opset_version=17, dynamic_axes=...)``). Test-only:
imported by the model tests when torch is installed.

Each ``export_*`` function writes one ``.onnx`` file into a directory and returns an
:class:`Exported`: its path and a ``feeds(shape_case, rng)`` function that makes seeded inputs
for one of the model's ``cases`` (the input shapes the tests run at).
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

OPSET = 17


@dataclass
class Exported:
    path: Path
    cases: list[dict]                                   # one dict of sizes per input shape
    feeds: Callable[[dict, np.random.Generator], dict]  # sizes, rng -> {input name: array}
    output_names: list[str] = field(default_factory=list)


def _export(module: nn.Module, args: tuple, path: Path, input_names: list[str],
            output_names: list[str], dynamic_axes: dict) -> None:
    module.eval()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), dynamo=False, opset_version=OPSET,
                          input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic_axes)


def _randn(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _perturb_batchnorm(module: nn.Module, seed: int) -> None:
    """Give BatchNorm layers non-trivial running statistics (fresh ones are 0 and 1)."""
    g = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(n, generator=g) * 0.1)


# -- KWS CNN --------------------------------------------------------------------------------
class KwsCnn(nn.Module):
    def __init__(self, classes: int = 12) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, (3, 1), padding=(1, 0)), nn.BatchNorm2d(32), nn.ReLU())
        self.head = nn.Linear(32 * 12 * 2, classes)

    def forward(self, x):
        return torch.softmax(self.head(torch.flatten(self.features(x), 1)), dim=-1)


def export_kws_cnn(out_dir: Path) -> Exported:
    torch.manual_seed(0)
    m = KwsCnn()
    _perturb_batchnorm(m, 1)
    path = out_dir / "torch_kws_cnn.onnx"
    _export(m, (torch.randn(1, 1, 49, 10),), path, ["mfcc"], ["probs"],
            {"mfcc": {0: "batch"}, "probs": {0: "batch"}})
    return Exported(path, [{"b": 1}, {"b": 2}, {"b": 5}],
                    lambda s, rng: {"mfcc": _randn(rng, s["b"], 1, 49, 10)}, ["probs"])


# -- ResNet-style ---------------------------------------------------------------------------
class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNetSmall(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU())
        self.layers = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2),
                                    BasicBlock(32, 64, 2))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        y = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def export_resnet(out_dir: Path) -> Exported:
    torch.manual_seed(1)
    m = ResNetSmall()
    _perturb_batchnorm(m, 2)
    path = out_dir / "torch_resnet.onnx"
    _export(m, (torch.randn(1, 3, 32, 32),), path, ["image"], ["logits"],
            {"image": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}})
    return Exported(path, [{"b": 1, "h": 32, "w": 32}, {"b": 2, "h": 24, "w": 40},
                           {"b": 3, "h": 17, "w": 15}],
                    lambda s, rng: {"image": _randn(rng, s["b"], 3, s["h"], s["w"])}, ["logits"])


# -- LSTM speech model ----------------------------------------------------------------------
class SpeechLstm(nn.Module):
    def __init__(self, feat: int = 40, hidden: int = 48, classes: int = 30) -> None:
        super().__init__()
        self.proj = nn.Linear(feat, hidden)
        self.lstm = nn.LSTM(hidden, hidden, num_layers=2, batch_first=True)
        self.gru = nn.GRU(hidden, hidden // 2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        y, _ = self.lstm(torch.tanh(self.proj(x)))
        y, _ = self.gru(y)
        return torch.log_softmax(self.out(y), dim=-1)


def export_lstm_speech(out_dir: Path) -> Exported:
    torch.manual_seed(2)
    m = SpeechLstm()
    path = out_dir / "torch_lstm_speech.onnx"
    _export(m, (torch.randn(1, 20, 40),), path, ["features"], ["log_probs"],
            {"features": {0: "batch", 1: "time"}, "log_probs": {0: "batch", 1: "time"}})
    return Exported(path, [{"b": 1, "t": 1}, {"b": 1, "t": 37}, {"b": 3, "t": 9}],
                    lambda s, rng: {"features": _randn(rng, s["b"], s["t"], 40)}, ["log_probs"])


# -- GPT-2-style decoder --------------------------------------------------------------------
class Attention(nn.Module):
    """Causal self-attention with optional past keys/values. ``mask`` is "triu" (a Trilu
    mask, ONNX 14+) or "where" (GPT-2's causal buffer sliced to the query and key lengths,
    then Where)."""

    def __init__(self, d: int, heads: int, max_pos: int, mask: str) -> None:
        super().__init__()
        self.heads, self.hd, self.mask = heads, d // heads, mask
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("bias", torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool))
                             .view(1, 1, max_pos, max_pos), persistent=False)

    def forward(self, x, past_k=None, past_v=None):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, self.hd).transpose(1, 2) for t in (q, k, v))
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        total = k.shape[2]
        if self.mask == "triu":
            upper = torch.triu(torch.ones(s, total, dtype=torch.bool), diagonal=total - s + 1)
            att = att.masked_fill(upper, float("-inf"))
        else:
            causal = self.bias[:, :, total - s:total, :total]
            att = torch.where(causal, att, torch.tensor(torch.finfo(att.dtype).min))
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, s, d)
        return self.proj(y), k, v


class Block(nn.Module):
    def __init__(self, d: int, heads: int, max_pos: int, mask: str) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads, max_pos, mask)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d, d))

    def forward(self, x, past_k=None, past_v=None):
        a, k, v = self.attn(self.ln1(x), past_k, past_v)
        x = x + a
        return x + self.mlp(self.ln2(x)), k, v


class TinyGpt(nn.Module):
    """GPT-2 layout: token + learned position embeddings, pre-norm blocks, tied LM head. The
    mask defaults to Trilu without past and to the sliced buffer with past."""

    def __init__(self, vocab: int = 256, d: int = 64, heads: int = 4, layers: int = 2,
                 max_pos: int = 128, with_past: bool = False, mask: str | None = None) -> None:
        super().__init__()
        mask = mask or ("where" if with_past else "triu")
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(max_pos, d)
        self.blocks = nn.ModuleList(Block(d, heads, max_pos, mask) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.with_past = with_past

    def forward(self, input_ids, *past):
        s = input_ids.shape[1]
        start = past[0].shape[2] if self.with_past else 0
        pos = torch.arange(start, start + s, dtype=torch.long).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(pos)
        presents = []
        for i, block in enumerate(self.blocks):
            pk, pv = (past[2 * i], past[2 * i + 1]) if self.with_past else (None, None)
            x, k, v = block(x, pk, pv)
            presents += [k, v]
        logits = self.ln_f(x) @ self.wte.weight.t()
        return (logits, *presents) if self.with_past else logits


GPT_LAYERS, GPT_HEADS, GPT_HD, GPT_VOCAB = 2, 4, 16, 256


def export_gpt(out_dir: Path, with_past: bool) -> Exported:
    torch.manual_seed(3)
    m = TinyGpt(vocab=GPT_VOCAB, heads=GPT_HEADS, layers=GPT_LAYERS, with_past=with_past)
    name = "torch_gpt_past" if with_past else "torch_gpt"
    path = out_dir / f"{name}.onnx"
    ids = torch.randint(0, GPT_VOCAB, (2, 5))
    inputs, outputs = ["input_ids"], ["logits"]
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    args: tuple = (ids,)
    if with_past:
        past = []
        for i in range(GPT_LAYERS):
            for kind in ("key", "value"):
                inputs.append(f"past_{kind}_{i}")
                outputs.append(f"present_{kind}_{i}")
                dyn[inputs[-1]] = {0: "batch", 2: "past_seq"}
                dyn[outputs[-1]] = {0: "batch", 2: "total_seq"}
                past.append(torch.randn(2, GPT_HEADS, 3, GPT_HD))
        args = (ids, *past)
    _export(m, args, path, inputs, outputs, dyn)

    def feeds(s: dict, rng: np.random.Generator) -> dict:
        out = {"input_ids": rng.integers(0, GPT_VOCAB, (s["b"], s["s"])).astype(np.int64)}
        for name_ in inputs[1:]:
            out[name_] = _randn(rng, s["b"], GPT_HEADS, s["past"], GPT_HD)
        return out

    cases = [{"b": 1, "s": 1, "past": 4}, {"b": 2, "s": 5, "past": 1}, {"b": 3, "s": 12, "past": 9}]
    return Exported(path, cases, feeds, outputs)


EXPORTERS: dict[str, Callable[[Path], Exported]] = {
    "kws_cnn": export_kws_cnn,
    "resnet": export_resnet,
    "lstm_speech": export_lstm_speech,
    "gpt": lambda d: export_gpt(d, with_past=False),
    "gpt_past": lambda d: export_gpt(d, with_past=True),
}
