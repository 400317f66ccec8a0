"""torchvision's MultiheadAttention layout, shared by the attention tests: x [S, B, D] to heads
by Reshape [S, B H, Dh], Transpose [B H, S, Dh], Reshape [B, H, S, Dh] (k then transposed once
more), softmax(q k^T / sqrt(Dh)) v, and the heads back to [S, B, D]."""
from __future__ import annotations

import numpy as np
from graph_blocks import ints64, randn_f32

from netpass import Model, opset


def torchvision_attention(rng, S: int, B: int, H: int, Dh: int, projections: bool = True) -> Model:
    """The model over input ``x``; q, k and v are MatMuls by random weights (``projections``)
    or products by random vectors."""
    D = H * Dh
    x = opset.parameter([S, B, D], np.float32, name="x")

    def heads(t):
        t = opset.reshape(t, ints64([S, B * H, Dh]), False)
        return opset.reshape(opset.transpose(t, ints64([1, 0, 2])), ints64([B, H, S, Dh]), False)

    q, k, v = (opset.matmul(x, randn_f32(rng, D, D), False, False) if projections
               else opset.multiply(x, randn_f32(rng, D)) for _ in range(3))
    kh = opset.transpose(heads(k), ints64([0, 1, 3, 2]))
    scores = opset.multiply(opset.matmul(heads(q), kh, False, False), np.float32(Dh ** -0.5))
    att = opset.matmul(opset.softmax(scores, -1), heads(v), False, False)
    y = opset.reshape(opset.transpose(att, ints64([2, 0, 1, 3])), ints64([S, B, D]), False)
    return Model([opset.result(y, name="y")], [x])
