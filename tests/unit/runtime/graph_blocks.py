"""Graph pieces the runtime's tests build the way exporters write them."""
from __future__ import annotations

import numpy as np

from netpass import opset


def repeat_kv(x, kv_heads: int, group: int, head_size: int):
    """transformers' repeat_kv: [1, kv_heads, s, head_size] -> [1, kv_heads * group, s,
    head_size], each head repeated ``group`` times (Unsqueeze, Broadcast to a target read off
    x's shape, Reshape)."""
    seq = opset.gather(opset.shape_of(x), np.array([2], np.int64), np.int64(0))
    target = opset.concat([np.array([1, kv_heads, group], np.int64), seq,
                           np.array([head_size], np.int64)], 0)
    expanded = opset.broadcast(opset.unsqueeze(x, np.array([2], np.int64)), target,
                               "bidirectional")
    return opset.reshape(expanded, np.array([1, kv_heads * group, -1, head_size], np.int64),
                         False)
