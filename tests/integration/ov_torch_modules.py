"""Small torch modules for ``test_openvino_written_ir.py`` (converted by ``ov.convert_model``
with example inputs): conv nets, an MLP, attention blocks (SDPA, causal, a hand-written masked
one), indexing, reductions, view / reshape / expand / stack, cumsum / topk / masked_fill /
where / arange, interpolation, recurrent layers, embeddings and integer math.

``CASES`` maps a name to (module, dynamic input shapes (-1 where a size changes), per-step
input shapes). Float inputs are random non-zero (magnitude 0.5-2, either sign); integer ones
are drawn per module by :func:`feeds`.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Conv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, groups=2)
        self.dw, self.fc = nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.Linear(8, 5)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2, ceil_mode=True)
        y = F.hardswish(self.c2(y))
        y = F.adaptive_avg_pool2d(self.dw(y) + y, 1).flatten(1)
        return F.log_softmax(self.fc(y), -1)


class Conv1d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c, self.gn = nn.Conv1d(4, 6, 3, padding=2, dilation=2), nn.GroupNorm(3, 6)
        self.t = nn.ConvTranspose1d(6, 3, 4, stride=2, padding=1)

    def forward(self, x):
        return (self.t(F.silu(self.gn(self.c(x)))),
                F.avg_pool1d(x, 3, 2, count_include_pad=False, padding=1))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2, self.ln = nn.Linear(16, 32), nn.Linear(32, 16), nn.LayerNorm(16)

    def forward(self, x):
        return self.ln(x + self.l2(F.gelu(self.l1(x)))) * torch.sigmoid(x).mean(-1, keepdim=True)


class Attention(nn.Module):
    """Multi-head self-attention through SDPA with a boolean padding mask."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.o = nn.Linear(16, 48), nn.Linear(16, 16)

    def forward(self, x, mask):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :] > 0)
        return self.o(a.transpose(1, 2).reshape(b, t, 16))


class CausalAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)


class MaskedAttention(nn.Module):
    """Scores masked by ``masked_fill`` of a triangular mask, softmax, weighted sum."""

    def forward(self, q, k):
        t = q.shape[1]
        scores = q @ k.transpose(-1, -2) / 4.0
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        return torch.softmax(scores.masked_fill(mask, float("-inf")), -1) @ k


class Index(nn.Module):
    def forward(self, x, idx):
        b = torch.gather(x, 1, idx.clamp(0, 1).expand(-1, -1, x.shape[2]))
        d = torch.index_select(x, 2, torch.tensor([0, 2, 1]))
        return x[:, 1:, ::2].sum() + b, x[..., -1:] * x[:, :1], d.flip(1)


class Reduce(nn.Module):
    def forward(self, x):
        return (x.sum(1), x.amax(-1), x.prod(0, keepdim=True), x.std(2), x.norm(dim=1),
                x.logsumexp(-1), torch.argmax(x, 1), x.min(2).values)


class Shapes(nn.Module):
    """view / reshape / expand / permute / cat / repeat / stack, and ``squeeze(0)`` of a dim
    of 2 (a no-op in torch: OpenVINO writes a Squeeze-1 whose listed axis is kept)."""

    def forward(self, x):
        b, t, c = x.shape
        y = x.view(b, t * c).reshape(b, c, t).unsqueeze(1).expand(b, 3, c, t)
        z = y.flatten(0, 1).permute(2, 0, 1).contiguous().view(t, -1)
        return (z, torch.cat([x, x.new_zeros(b, 1, c)], 1), x.repeat(1, 2, 1),
                torch.stack([x, -x], 0).squeeze(0))


class Misc(nn.Module):
    def forward(self, x):
        top_v, top_i = torch.topk(x, 2, dim=-1)
        arange = torch.arange(x.shape[1]).to(x.dtype)
        return (torch.cumsum(x, 1), top_v, top_i, x.masked_fill(x > 0.5, 0.0),
                torch.where(x < 0, x * 2, x.abs().sqrt()) + arange[None, :, None],
                torch.clamp(x, -0.3, 0.3), F.pad(x, (1, 2)))


class Interpolate(nn.Module):
    def forward(self, x):
        return (F.interpolate(x, scale_factor=2, mode="nearest"),
                F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=False),
                F.interpolate(x, scale_factor=1.5, mode="bicubic", align_corners=True))


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 8, batch_first=True, num_layers=2)
        self.gru = nn.GRU(8, 5, batch_first=True, bidirectional=True)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.gru(y)


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.e, self.pos = nn.Embedding(20, 8), nn.Parameter(torch.randn(1, 32, 8))

    def forward(self, ids):
        return (self.e(ids) + self.pos[:, :ids.shape[1]],
                (ids != 0).to(torch.float32).cumsum(-1))


class Ints(nn.Module):
    """Integer math (no ``//``: OpenVINO's CPU plugin truncates the integer Divide it becomes,
    see ``ov_written_ir.refuse_cpu_departures``)."""

    def forward(self, a, b):
        return (a % 3, torch.bitwise_and(a, b), a * b - 2, (a > b) & (a < 5),
                a.to(torch.float32) / 3, torch.remainder(a, -4))


# name -> (module, dynamic input shapes, per-step input shapes)
CASES = {
    "conv": (Conv, [(-1, 3, -1, -1)], [[(1, 3, 16, 16)], [(2, 3, 20, 12)], [(1, 3, 9, 9)]]),
    "conv1d": (Conv1d, [(-1, 4, -1)], [[(2, 4, 10)], [(1, 4, 7)]]),
    "mlp": (MLP, [(-1, -1, 16)], [[(2, 5, 16)], [(1, 1, 16)], [(3, 7, 16)]]),
    "attention": (Attention, [(-1, -1, 16), (-1, -1)], [[(2, 5, 16), (2, 5)], [(1, 3, 16), (1, 3)]]),
    "causal": (CausalAttention, [(-1, -1, 16)], [[(2, 5, 16)], [(1, 1, 16)], [(1, 9, 16)]]),
    "masked": (MaskedAttention, [(-1, -1, 4)] * 2, [[(2, 5, 4)] * 2, [(1, 3, 4)] * 2]),
    "index": (Index, [(-1, -1, -1), (-1, 2, 1)], [[(2, 3, 4), (2, 2, 1)], [(1, 4, 5), (1, 2, 1)]]),
    "reduce": (Reduce, [(-1, -1, -1)], [[(2, 3, 4)], [(3, 2, 5)]]),
    "shapes": (Shapes, [(-1, -1, -1)], [[(2, 3, 4)], [(1, 5, 2)]]),
    "misc": (Misc, [(-1, -1, -1)], [[(2, 3, 4)], [(1, 5, 6)]]),
    "interpolate": (Interpolate, [(-1, 2, -1, -1)], [[(1, 2, 4, 4)], [(2, 2, 3, 5)]]),
    "recurrent": (Recurrent, [(-1, -1, 6)], [[(2, 5, 6)], [(1, 2, 6)], [(3, 7, 6)]]),
    "embed": (Embed, [(-1, -1)], [[(2, 5)], [(1, 9)]]),
    "ints": (Ints, [(-1, -1)] * 2, [[(2, 3)] * 2, [(4, 1)] * 2]),
}
INT_INPUTS = {("embed", 0): (0, 20), ("index", 1): (0, 2), ("ints", 0): (-9, 10),
              ("ints", 1): (-9, 10), ("attention", 1): (0, 2)}


def feeds(name: str, shapes: list[tuple[int, ...]], rng: np.random.Generator) -> list[np.ndarray]:
    """Inputs of module ``name`` at ``shapes``: integers in the module's range, or a 0/1 mask
    with its first position set, or random non-zero floats."""
    out = []
    for i, shape in enumerate(shapes):
        bounds = INT_INPUTS.get((name, i))
        if bounds is None:
            mag = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
            out.append(mag.astype(np.float32))
        elif name == "attention":  # a padding mask: at least the first key is attended
            mask = (rng.random(shape) < 0.7).astype(np.float32)
            mask[..., 0] = 1.0
            out.append(mask)
        else:
            out.append(rng.integers(*bounds, shape).astype(np.int64))
    return out
