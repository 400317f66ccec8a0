"""A zoo of typical architectures that are in no repository, written with ``torch.nn`` and
exported the way users export them (``torch.onnx.export(..., dynamo=False)``, dynamic axes where
natural). Test-only: imported by ``test_zoo.py`` when torch is installed.

Every entry is small (the whole zoo runs in about a minute on two cores) but keeps the
structure that matters to the flow: depthwise and grouped convolutions, stride-2 shortcuts,
BatchNorm with non-trivial statistics, LSTM/GRU, attention with masks and past key/values,
ConvTranspose with skip concats, Resize, Pad/Slice/Split/Concat heads and Where/Expand/Range
shape logic.
"""
from __future__ import annotations

import io
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch_models import TinyGpt, _randn

Feeds = Callable[[dict, np.random.Generator], dict]


@dataclass
class ZooModel:
    """How to build and export one zoo model.

    ``kind``: "cnn", "speech" or "transformer" (which pipeline checks apply); ``cases``: the
    sizes of the input shapes the tests run at (the first is the export shape); ``feeds``
    makes seeded inputs for a case; ``opsets``: the ONNX opsets it is exported at.
    """

    name: str
    kind: str
    build: Callable[[], nn.Module]
    example: Callable[[dict], tuple]
    inputs: list[str]
    outputs: list[str]                       # empty: torch's own names
    dynamic_axes: dict
    cases: list[dict]
    feeds: Feeds
    opsets: tuple[int, ...] = (17,)
    unsupported: str = ""                    # an ONNX op netpass refuses, by design
    half: bool = False                       # exported in float16 (weights and inputs)


def export(entry: ZooModel, opset: int) -> bytes:
    """The ONNX bytes of ``entry`` exported at ``opset`` (seeded, deterministic weights)."""
    torch.manual_seed(0)
    module = entry.build().eval()
    _perturb_norms(module)
    args = entry.example(entry.cases[0])
    if entry.half:
        module = module.half()
        args = tuple(a.half() if a.is_floating_point() else a for a in args)
    buf = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, buf, dynamo=False,
                          opset_version=opset, input_names=entry.inputs,
                          output_names=entry.outputs or None, dynamic_axes=entry.dynamic_axes)
    return buf.getvalue()


def feeds(entry: ZooModel, case: dict, rng: np.random.Generator) -> dict:
    """Seeded inputs for one of ``entry``'s cases, in the model's float type."""
    out = entry.feeds(case, rng)
    if entry.half:
        out = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in out.items()}
    return out


def _perturb_norms(module: nn.Module) -> None:
    """Non-trivial BatchNorm statistics and affine parameters (fresh ones are identities)."""
    g = torch.Generator().manual_seed(1)
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(n, generator=g) * 0.1)
        elif isinstance(m, nn.LayerNorm):
            m.weight.data.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)


def _t(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


# -- MobileNet-style ------------------------------------------------------------------------
class SqueezeExcite(nn.Module):
    def __init__(self, c: int, r: int = 4) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, c // r, 1), nn.Conv2d(c // r, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.fc2(torch.relu(self.fc1(s))))


class DepthwiseSeparable(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, se: bool, act: type) -> None:
        super().__init__()
        self.dw = nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False),
                                nn.BatchNorm2d(cin), act())
        self.se = SqueezeExcite(cin) if se else nn.Identity()
        self.pw = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.pw(self.se(self.dw(x)))
        return x + y if self.residual else y


class MobileNetish(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.Hardswish())
        self.blocks = nn.Sequential(DepthwiseSeparable(8, 8, 1, False, nn.ReLU6),
                                    DepthwiseSeparable(8, 16, 2, True, nn.Hardswish),
                                    DepthwiseSeparable(16, 16, 1, True, nn.ReLU6))
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        y = self.blocks(self.stem(x)).mean((2, 3))
        return self.head(y)


# -- ResNet-style ---------------------------------------------------------------------------
class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                                  nn.BatchNorm2d(cout), nn.ReLU(),
                                  nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return torch.relu(self.body(x) + self.short(x))


class ResNetish(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.Sequential(ResBlock(8, 8, 1), ResBlock(8, 16, 2))
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


# -- DS-CNN keyword spotting ----------------------------------------------------------------
class DsCnn(nn.Module):
    def __init__(self, classes: int = 12, c: int = 16) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(1, c, (10, 4), (2, 2), (5, 1)), nn.BatchNorm2d(c),
                                   nn.ReLU()]
        for _ in range(2):
            layers += [nn.Conv2d(c, c, 3, 1, 1, groups=c), nn.BatchNorm2d(c), nn.ReLU(),
                       nn.Conv2d(c, c, 1), nn.BatchNorm2d(c), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d((25, 5))
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return torch.softmax(self.fc(torch.flatten(self.pool(self.body(x)), 1)), -1)


# -- CRNN -----------------------------------------------------------------------------------
class Crnn(nn.Module):
    def __init__(self, feat: int = 16, classes: int = 8) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 4, 3, 1, 1), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.MaxPool2d((1, 2)))
        self.gru = nn.GRU(4 * feat // 2, 12, batch_first=True)
        self.fc = nn.Linear(12, classes)

    def forward(self, x):                        # x: [batch, time, feat]
        y = self.conv(x.unsqueeze(1))              # [b, 4, t, feat/2]
        b, c, t, f = y.shape
        y = y.permute(0, 2, 1, 3).reshape(b, t, c * f)
        return self.fc(self.gru(y)[0])


# -- bidirectional LSTM speech model --------------------------------------------------------
class BiLstm(nn.Module):
    def __init__(self, feat: int = 12, hidden: int = 10, classes: int = 6) -> None:
        super().__init__()
        self.lstm = nn.LSTM(feat, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        return torch.log_softmax(self.fc(self.lstm(x)[0]), -1)


# -- GRU classifier: frame skipping, bidirectional stack, last step ---------------------------
class GruClassifier(nn.Module):
    def __init__(self, feat: int = 12, hidden: int = 8, classes: int = 4) -> None:
        super().__init__()
        self.gru = nn.GRU(feat, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, x):                        # x: [batch, time, feat]
        y = self.gru(x[:, ::2])[0]               # every other frame (stepped Slice)
        return self.fc(y[:, -1])                 # last step (Gather with a scalar index)


# -- TDNN / 1-D conv speech model -----------------------------------------------------------
class Tdnn(nn.Module):
    def __init__(self, feat: int = 12, c: int = 16, classes: int = 5) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(feat, c, 5, dilation=1), nn.BatchNorm1d(c), nn.ReLU(),
            nn.Conv1d(c, c, 3, dilation=2), nn.BatchNorm1d(c), nn.ReLU(),
            nn.Conv1d(c, c, 3, dilation=3, padding=3), nn.BatchNorm1d(c), nn.ReLU(),
            nn.Conv1d(c, c, 1), nn.ReLU())
        self.fc = nn.Linear(2 * c, classes)

    def forward(self, x):                        # x: [batch, feat, time]
        y = self.body(x)
        stats = torch.cat([y.mean(-1), y.std(-1)], -1)   # x-vector statistics pooling
        return self.fc(stats)


# -- U-Net-style ----------------------------------------------------------------------------
class UNetish(nn.Module):
    def __init__(self, c: int = 4) -> None:
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(1, c, 3, 1, 1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(c, 2 * c, 3, 1, 1), nn.ReLU())
        self.up = nn.ConvTranspose2d(2 * c, c, 2, 2)
        self.dec = nn.Sequential(nn.Conv2d(2 * c, c, 3, 1, 1), nn.ReLU(), nn.Conv2d(c, 1, 1))

    def forward(self, x):
        e1 = self.enc1(x)
        d = self.up(self.enc2(e1))
        return torch.sigmoid(self.dec(torch.cat([d, e1], 1)))


# -- BERT-style encoder ---------------------------------------------------------------------
class EncoderLayer(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def _split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.hd).transpose(1, 2)

    def forward(self, x, additive_mask):
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.hd) + additive_mask, -1)
        y = (att @ v).transpose(1, 2).reshape(x.shape)
        x = self.ln1(x + self.o(y))
        return self.ln2(x + self.ff(x))


class Bertish(nn.Module):
    def __init__(self, vocab: int = 50, d: int = 32, heads: int = 4, layers: int = 2,
                 max_pos: int = 64) -> None:
        super().__init__()
        self.tok, self.pos, self.typ = nn.Embedding(vocab, d), nn.Embedding(max_pos, d), \
            nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.ModuleList(EncoderLayer(d, heads) for _ in range(layers))
        self.pool = nn.Linear(d, d)

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        pos = torch.arange(s, dtype=torch.long).unsqueeze(0)
        x = self.ln(self.tok(input_ids) + self.pos(pos) + self.typ(torch.zeros_like(input_ids)))
        additive = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, additive)
        return x, torch.tanh(self.pool(x[:, 0]))


def _bert_feeds(case: dict, rng: np.random.Generator) -> dict:
    b, s = case["b"], case["s"]
    lengths = rng.integers(1, s + 1, size=b)
    mask = (np.arange(s)[None, :] < lengths[:, None]).astype(np.int64)
    return {"input_ids": rng.integers(0, 50, (b, s)).astype(np.int64), "attention_mask": mask}


# -- GPT-2-style decoder --------------------------------------------------------------------
GPT_VOCAB, GPT_D, GPT_HEADS, GPT_LAYERS = 40, 32, 2, 2


def Gptish(with_past: bool, mask: str) -> nn.Module:
    """The repository's GPT-2-style decoder (``torch_models.TinyGpt``) at the zoo's size."""
    return TinyGpt(GPT_VOCAB, GPT_D, GPT_HEADS, GPT_LAYERS, max_pos=64, with_past=with_past,
                   mask=mask)


def _gpt_entry(name: str, with_past: bool, mask: str, opsets: tuple[int, ...]) -> ZooModel:
    hd = GPT_D // GPT_HEADS
    inputs, outputs = ["input_ids"], ["logits"]
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    if with_past:
        for i in range(GPT_LAYERS):
            for kind in ("key", "value"):
                inputs.append(f"past_{kind}_{i}")
                outputs.append(f"present_{kind}_{i}")
                dyn[inputs[-1]] = {0: "batch", 2: "past_seq"}
                dyn[outputs[-1]] = {0: "batch", 2: "total_seq"}

    def example(c: dict) -> tuple:
        ids = torch.randint(0, GPT_VOCAB, (c["b"], c["s"]))
        past = [_t(c["b"], GPT_HEADS, c["past"], hd) for _ in inputs[1:]]
        return (ids, *past)

    def feeds(c: dict, rng: np.random.Generator) -> dict:
        out = {"input_ids": rng.integers(0, GPT_VOCAB, (c["b"], c["s"])).astype(np.int64)}
        for n in inputs[1:]:
            out[n] = _randn(rng, c["b"], GPT_HEADS, c["past"], hd)
        return out

    cases = [{"b": 2, "s": 5, "past": 3}, {"b": 1, "s": 1, "past": 7}, {"b": 3, "s": 9, "past": 2}]
    return ZooModel(name, "transformer", lambda: Gptish(with_past, mask), example, inputs,
                    outputs, dyn, cases, feeds, opsets)


# -- Conformer-ish block --------------------------------------------------------------------
class ConformerBlock(nn.Module):
    def __init__(self, d: int = 16, heads: int = 2, kernel: int = 5) -> None:
        super().__init__()
        self.ff1 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
        self.ln_att = nn.LayerNorm(d)
        self.heads = heads
        self.qkv, self.att_out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln_conv = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.pw2 = nn.Conv1d(d, d, 1)
        self.ff2 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
        self.ln_out = nn.LayerNorm(d)

    def _attention(self, x):
        b, t, d = x.shape
        q, k, v = (u.reshape(b, t, self.heads, d // self.heads).permute(0, 2, 1, 3)
                   for u in self.qkv(x).chunk(3, -1))
        att = torch.softmax(q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5, -1)
        return self.att_out((att @ v).permute(0, 2, 1, 3).reshape(b, t, d))

    def forward(self, x):                        # x: [batch, time, d]
        x = x + 0.5 * self.ff1(x)
        x = x + self._attention(self.ln_att(x))
        c = F.glu(self.pw1(self.ln_conv(x).transpose(1, 2)), dim=1)
        c = self.pw2(F.silu(self.bn(self.dw(c))))
        x = x + c.transpose(1, 2)
        return self.ln_out(x + 0.5 * self.ff2(x))


# -- attention through scaled_dot_product_attention -----------------------------------------
class SdpaDecoder(nn.Module):
    """Modern exports: ``F.scaled_dot_product_attention`` with ``is_causal`` and a bool mask."""

    def __init__(self, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):                        # x: [batch, seq, d]
        b, s, d = x.shape
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
                   for t in self.qkv(self.ln(x)).chunk(3, -1))
        causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        masked = F.scaled_dot_product_attention(
            q, k, v, attn_mask=torch.ones(s, s, dtype=torch.bool).tril())
        return x + self.out((causal + masked).transpose(1, 2).reshape(b, s, d))


# -- outputs that share a tensor or pass an input through -----------------------------------
class SharedOutputs(nn.Module):
    """Exported without output names: torch names both copies of ``z`` alike."""

    def __init__(self, d: int = 4) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x, y):
        z = self.fc(x)
        return z, z, x, torch.relu(z) + y, y.transpose(1, 2)


# -- Upsample / interpolate -----------------------------------------------------------------
class Upsampler(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, 1, 1)

    def forward(self, x):
        y = F.interpolate(torch.relu(self.conv(x)), scale_factor=2.0, mode="nearest")
        return F.interpolate(y, scale_factor=0.5, mode="bilinear", align_corners=False)


# -- Pad/Slice/Split/Concat-heavy pre/post-processing ---------------------------------------
class PrePostHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3)
        self.fc = nn.Linear(8, 6)

    def forward(self, x):                        # x: [batch, 4, h, w]
        y = F.pad(x, (1, 1, 2, 0), mode="constant", value=0.5)
        y = torch.cat([y[:, :2] * 2.0, y[:, 2:] - 1.0], 1)      # channel split + concat
        y = torch.relu(self.conv(y))                           # [b, 8, h, w]
        a, b, c = torch.split(y, [3, 3, 2], dim=1)
        y = torch.cat([c, b, a], 1)                            # reordered channels
        y = y[:, :, 1:-1:2, ::2]                               # strided crop
        boxes = self.fc(y.mean((2, 3)))
        xy, wh, conf = boxes.split([2, 2, 2], -1)
        return torch.cat([torch.sigmoid(xy), torch.exp(wh.clamp(max=2.0)),
                          torch.softmax(conf, -1)], -1), F.pad(y, (0, 1, 1, 0), mode="reflect")


# -- Where/Expand/Cast/Range shape logic ----------------------------------------------------
class ShapeLogic(nn.Module):
    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x, lengths):               # x: [batch, time, d], lengths: [batch] int64
        t = x.shape[1]
        steps = torch.arange(t, device=x.device)                      # Range
        valid = steps.unsqueeze(0).expand(x.shape[0], t) < lengths.unsqueeze(1)   # Expand
        y = torch.where(valid.unsqueeze(-1), self.fc(x), torch.zeros_like(x))     # Where
        denom = valid.sum(1, keepdim=True).to(torch.float32).clamp(min=1.0)      # Cast
        pos = (steps.to(torch.float32) / t).unsqueeze(-1)             # Cast + Div
        return y.sum(1) / denom, y + pos, valid.to(torch.int32)


def _shape_logic_feeds(c: dict, rng: np.random.Generator) -> dict:
    return {"x": _randn(rng, c["b"], c["t"], 8),
            "lengths": rng.integers(1, c["t"] + 1, size=c["b"]).astype(np.int64)}


# -- the zoo --------------------------------------------------------------------------------
def _image(channels: int, h: int, w: int) -> tuple[Callable, Feeds]:
    return (lambda c: (_t(c["b"], channels, c.get("h", h), c.get("w", w)),),
            lambda c, rng: {"x": _randn(rng, c["b"], channels, c.get("h", h), c.get("w", w))})


def _seq(feat: int, time_last: bool = False) -> tuple[Callable, Feeds]:
    def shape(c: dict) -> tuple[int, ...]:
        return (c["b"], feat, c["t"]) if time_last else (c["b"], c["t"], feat)
    return (lambda c: (_t(*shape(c)),), lambda c, rng: {"x": _randn(rng, *shape(c))})


def _entries() -> list[ZooModel]:
    img_dyn = {"x": {0: "batch", 2: "h", 3: "w"}, "y": {0: "batch"}}
    seq_dyn = {"x": {0: "batch", 1: "time"}, "y": {0: "batch", 1: "time"}}
    hw_cases = [{"b": 1, "h": 16, "w": 16}, {"b": 2, "h": 12, "w": 20}]
    zoo = [
        ZooModel("mobilenet", "cnn", MobileNetish, *_image(3, 16, 16)[:1], ["x"], ["y"], img_dyn,
                 hw_cases, _image(3, 16, 16)[1], (17, 13, 11)),
        ZooModel("resnet", "cnn", ResNetish, *_image(3, 16, 16)[:1], ["x"], ["y"], img_dyn,
                 [{"b": 1, "h": 16, "w": 16}, {"b": 2, "h": 15, "w": 21}], _image(3, 16, 16)[1]),
        ZooModel("resnet_f16", "cnn", ResNetish, *_image(3, 16, 16)[:1], ["x"], ["y"], img_dyn,
                 [{"b": 1, "h": 16, "w": 16}, {"b": 2, "h": 12, "w": 8}], _image(3, 16, 16)[1],
                 half=True),
        ZooModel("ds_cnn_kws", "cnn", DsCnn, *_image(1, 49, 10)[:1], ["x"], ["y"],
                 {"x": {0: "batch"}, "y": {0: "batch"}}, [{"b": 1}, {"b": 3}],
                 _image(1, 49, 10)[1], (17, 11)),
        ZooModel("crnn", "speech", Crnn, *_seq(16)[:1], ["x"], ["y"], seq_dyn,
                 [{"b": 1, "t": 6}, {"b": 2, "t": 11}], _seq(16)[1]),
        ZooModel("bilstm", "speech", BiLstm, *_seq(12)[:1], ["x"], ["y"], seq_dyn,
                 [{"b": 1, "t": 5}, {"b": 3, "t": 8}], _seq(12)[1], (17, 13)),
        ZooModel("gru_classifier", "speech", GruClassifier, *_seq(12)[:1], ["x"], ["y"],
                 {"x": {0: "batch", 1: "time"}, "y": {0: "batch"}},
                 [{"b": 2, "t": 8}, {"b": 1, "t": 5}], _seq(12)[1]),
        ZooModel("tdnn", "speech", Tdnn, *_seq(12, True)[:1], ["x"], ["y"],
                 {"x": {0: "batch", 2: "time"}, "y": {0: "batch"}},
                 [{"b": 1, "t": 20}, {"b": 2, "t": 31}], _seq(12, True)[1]),
        ZooModel("unet", "cnn", UNetish, *_image(1, 16, 16)[:1], ["x"], ["y"],
                 {"x": {0: "batch", 2: "h", 3: "w"}, "y": {0: "batch", 2: "h", 3: "w"}},
                 [{"b": 1, "h": 16, "w": 16}, {"b": 2, "h": 8, "w": 12}], _image(1, 16, 16)[1]),
        ZooModel("bert", "transformer", Bertish,
                 lambda c: (torch.randint(0, 50, (c["b"], c["s"])),
                            torch.ones(c["b"], c["s"], dtype=torch.long)),
                 ["input_ids", "attention_mask"], ["hidden", "pooled"],
                 {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                  "hidden": {0: "batch", 1: "seq"}, "pooled": {0: "batch"}},
                 [{"b": 2, "s": 7}, {"b": 1, "s": 3}, {"b": 3, "s": 12}], _bert_feeds, (17, 13, 11)),
        _gpt_entry("gpt2", False, "triu", (17,)),
        _gpt_entry("gpt2_where", False, "where", (17, 13, 11)),
        _gpt_entry("gpt2_past", True, "triu", (17,)),
        _gpt_entry("gpt2_past_where", True, "where", (13,)),
        ZooModel("conformer", "transformer", ConformerBlock, *_seq(16)[:1], ["x"], ["y"], seq_dyn,
                 [{"b": 1, "t": 6}, {"b": 2, "t": 9}], _seq(16)[1]),
        ZooModel("sdpa_decoder", "transformer", SdpaDecoder, *_seq(16)[:1], ["x"], ["y"], seq_dyn,
                 [{"b": 1, "t": 5}, {"b": 2, "t": 8}], _seq(16)[1]),
        ZooModel("shared_outputs", "speech", SharedOutputs,
                 lambda c: (_t(c["b"], c["t"], 4), _t(c["b"], c["t"], 4)), ["x", "y"], [],
                 {"x": {0: "batch", 1: "time"}, "y": {0: "batch", 1: "time"}},
                 [{"b": 1, "t": 3}, {"b": 2, "t": 5}],
                 lambda c, rng: {"x": _randn(rng, c["b"], c["t"], 4),
                                 "y": _randn(rng, c["b"], c["t"], 4)}),
        ZooModel("upsample", "cnn", Upsampler, *_image(3, 8, 8)[:1], ["x"], ["y"],
                 {"x": {0: "batch", 2: "h", 3: "w"}, "y": {0: "batch", 2: "h2", 3: "w2"}},
                 [{"b": 1, "h": 8, "w": 8}, {"b": 2, "h": 6, "w": 10}], _image(3, 8, 8)[1]),
        ZooModel("prepost_heads", "cnn", PrePostHeads, *_image(4, 10, 12)[:1], ["x"],
                 ["boxes", "features"], {"x": {0: "batch"}, "boxes": {0: "batch"},
                                         "features": {0: "batch"}},
                 [{"b": 1}, {"b": 2}], _image(4, 10, 12)[1]),
        ZooModel("shape_logic", "speech", ShapeLogic,
                 lambda c: (_t(c["b"], c["t"], 8), torch.full((c["b"],), c["t"], dtype=torch.long)),
                 ["x", "lengths"], ["pooled", "y", "valid"],
                 {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}, "pooled": {0: "batch"},
                  "y": {0: "batch", 1: "time"}, "valid": {0: "batch", 1: "time"}},
                 [{"b": 2, "t": 6}, {"b": 3, "t": 4}, {"b": 1, "t": 9}], _shape_logic_feeds),
    ]
    return zoo


ZOO: dict[str, ZooModel] = {m.name: m for m in _entries()}
