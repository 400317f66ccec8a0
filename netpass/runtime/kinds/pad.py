"""Pad (``netpass/ops/pad.py``): a copy through its index map, the padding marked -1 and written
as the pad value."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ops.pad import Pad
from ..impls import Impl, Params
from .base import OpKind, table
from .movement import index_map_impl


def pad_impl(p: Params, key: Any) -> Impl | None:
    """The reference runs on indices with the pad value -1, which marks the padding; the
    kernel writes the real pad value there (0 without a pad-value input; a float16 value as
    its bit pattern, since copies move float16 as 16 bits)."""
    if p.values.get(1) is None or p.values.get(2) is None:
        return None
    pad = float(np.asarray(p.values[3]).reshape(-1)[0]) if p.values.get(3) is not None else 0.0
    if np.dtype(p.in_dtypes[0]) == np.float16:
        pad = float(np.asarray(pad, np.float16).view(np.uint16))
    mark = np.asarray(-1, dtype=np.int64)
    return index_map_impl(p, key, [p.values[1], p.values[2], mark], pad)


ROWS = table(
    OpKind(Pad, deps=(1, 2, 3), impl=pad_impl, movement=True),
)
