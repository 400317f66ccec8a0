"""Pooling (``netpass/ops/pooling.py``): MaxPool (values; a read indices output runs on the
host) and AvgPool, 1-D and 2-D, on the ``pool`` template."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ops.pooling import AvgPool, MaxPool
from ..impls import Impl, Launch, Params, contiguous_strides, size, work_1d
from ..kernels.window import pool
from .base import OpKind, table
from .convolution import as2d, window_pads


def pool_impl(p: Params, key: Any, kind: str, nhwc: bool = False) -> Impl | None:
    """Max (``kind`` "max") or average ("avg") 1-D / 2-D pooling (``kernels.pool``), NCHW or
    ``nhwc``; a MaxPool whose indices output is read runs on the host."""
    if np.dtype(p.in_dtypes[0]) != np.float32:
        return None
    if len(p.out_shapes) > 1 and p.node is not None and any(p.node.users[1:]):
        return None  # MaxPool indices are consumed: host
    x, y = p.in_shapes[0], p.out_shapes[0]
    nd = len(x) - 2
    if nd not in (1, 2):
        return None
    sp_in, sp_out = (x[1:-1], y[1:-1]) if nhwc else (x[2:], y[2:])
    C = x[-1] if nhwc else x[1]
    kern = list(p.attrs.get("kernel") or p.attrs.get("kernel_shape") or [])
    strides = list(p.attrs.get("strides") or [1] * nd)
    dil = list(p.attrs.get("dilations") or [1] * nd)
    pb, pe = window_pads(p, sp_in, sp_out, kern, strides, dil)
    xs, ys = contiguous_strides(x), contiguous_strides(y)
    if nhwc:
        xsn, xsc, xsp, ysn, ysc, ysp = xs[0], xs[-1], xs[1:-1], ys[0], ys[-1], ys[1:-1]
    else:
        xsn, xsc, xsp, ysn, ysc, ysp = xs[0], xs[1], xs[2:], ys[0], ys[1], ys[2:]
    exclude_pad = bool(p.attrs.get("exclude-pad", p.attrs.get("exclude_pad", False)))
    src = pool(p.in_dtypes[0], kind, exclude_pad)
    n = size(y)
    H, W_ = as2d(sp_in, nd, 1)
    OH, OW = as2d(sp_out, nd, 1)
    KH, KW = as2d(kern, nd, 1)
    sh, sw = as2d(strides, nd, 1)
    dh, dw = as2d(dil, nd, 1)
    ph, pw = as2d(pb, nd, 0)
    peh, pew = as2d(pe, nd, 0)
    xsh, xsw = as2d(xsp, nd, 0)
    ysh, ysw = as2d(ysp, nd, 0)
    spec = [("i", 0), ("o", 0), n, C, H, W_, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw, peh, pew,
            xsn, xsc, xsh, xsw, ysn, ysc, ysh, ysw]
    return Impl(key, [Launch(src, *work_1d(n), spec)])


ROWS = table(
    OpKind(MaxPool, impl=lambda p, key: pool_impl(p, key, "max")),
    OpKind(AvgPool, impl=lambda p, key: pool_impl(p, key, "avg")),
)
