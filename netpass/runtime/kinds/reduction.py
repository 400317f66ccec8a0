"""Reductions (``netpass/ops/reduction.py``): the ``rowop`` template, one work-group per output
element, where the reduced axes are one contiguous block (ignoring size-1 dims); TopK: the
``topk`` template, one work-group per row along its axis (float32, int32, int64 data; others
on the host); CumSum: ``kernels.scan``, a work-item per row. :func:`axes_block` and
:func:`rowop_fused` also serve the normalizations."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ops.reduction import (
    CumSum,
    ReduceL1,
    ReduceL2,
    ReduceLogicalAnd,
    ReduceLogicalOr,
    ReduceMax,
    ReduceMean,
    ReduceMin,
    ReduceProd,
    ReduceSum,
    TopK,
)
from ..impls import Impl, Launch, Params, epilogue, epilogue_args, size, work_1d
from ..kernels.common import LS, Source
from ..kernels.rowop import rowop
from ..kernels.scan import cumsum
from ..kernels.topk import TOPK_DTYPES, WIDE_LS, WIDE_N, WIDE_ROWS, topk
from .base import ImplFactory, OpKind, ints, same_shape, table


def axes_block(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, int, int] | None:
    """(outer, R, inner) when ``axes`` (ignoring size-1 dims) are one contiguous block."""
    axes = sorted(set(axes))
    real = [a for a in axes if shape[a] != 1]
    if not real:
        return size(shape), 1, 1
    lo, hi = real[0], real[-1]
    if any(shape[k] != 1 and k not in axes for k in range(lo, hi + 1)):
        return None
    return size(shape[:lo]), size(shape[lo:hi + 1]), size(shape[hi + 1:])


def row_launch(src: Source, rows: int, R: int, inner: int, n_extra: int = 0,
               edims: Sequence[int] = (), est: Sequence[Sequence[int]] = (),
               row_stride: tuple[int, int, int] | None = None) -> Launch:
    """One work-group of LS items per row of R elements ``inner`` apart (``row_stride``: where
    the input's rows start, ``(h, outer, inner)`` as ``kernels.rowop``'s ``xrs``)."""
    spec = [("i", 0), ("o", 0), R, inner] + ([] if row_stride is None else list(row_stride)) \
        + epilogue_args(n_extra, edims, est)
    return Launch(src, (max(rows, 1) * LS,), (LS,), spec)


def rowop_fused(p: Params, key: Any, kind: str, params: dict, rows: int, R: int,
                inner: int, row_stride: tuple[int, int, int] | None = None) -> Impl:
    """A softmax / MVN rowop with the node's fused elementwise ops as its epilogue;
    ``row_stride`` (``inner`` 1): where the input's rows start (a strided view; row_launch)."""
    stages, n_extra, edt, edims, est = epilogue(p, p.out_shapes[0])
    if row_stride is not None:
        params = dict(params, xrs=True)
    src = p.cached(("rowop", len(edims), row_stride is not None),
                   lambda: rowop(kind, p.in_dtypes[0], p.out_dtypes[0], params, stages, edt,
                                 len(edims)))
    return Impl(key, [row_launch(src, rows, R, inner, n_extra, edims, est, row_stride)])


def reduce_impl(op: str) -> ImplFactory:
    """The impl factory of a reduction computing ``op`` (a ``rowop`` kind) over its axes."""
    def impl(p: Params, key: Any) -> Impl | None:
        shape = p.in_shapes[0]
        if p.values.get(1) is None or np.dtype(p.in_dtypes[0]) == np.float16:
            return None
        blk = axes_block(shape, [a % max(len(shape), 1) for a in ints(p.values[1])])
        if blk is None:
            return None
        outer, R, inner = blk
        src = rowop(op, p.in_dtypes[0], p.out_dtypes[0], {})
        return Impl(key, [row_launch(src, outer * inner, R, inner)])
    return impl


SCAN_DTYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))


def cumsum_impl(p: Params, key: Any) -> Impl | None:
    """One ``cumsum`` launch, a work-item per row along the axis (input 1's value, else 0)."""
    shape, dt = p.in_shapes[0], np.dtype(p.in_dtypes[0])
    if dt not in SCAN_DTYPES or (p.in_strides and p.in_strides[0]):
        return None
    if not shape:
        return None  # (a scalar: the host copies it)
    axis = ints(p.values[1])[0] % len(shape) if 1 in p.values else 0
    blk = axes_block(shape, [axis])
    if blk is None:  # (one axis is always one block)
        return None
    outer, R, inner = blk
    rows = outer * inner
    if not rows * R:
        return Impl(key, [])
    src = cumsum(dt, bool(p.attrs.get("exclusive")), bool(p.attrs.get("reverse")))
    return Impl(key, [Launch(src, *work_1d(rows), [("i", 0), ("o", 0), rows, R, inner])])


def topk_impl(p: Params, key: Any) -> Impl | None:
    """TopK over its axis, k from the host value (the output's size along the axis: at most
    the axis' size): one work-group per row, writing values and indices in the op's layout."""
    if np.dtype(p.in_dtypes[0]) not in TOPK_DTYPES:
        return None
    shape = p.in_shapes[0]
    axis = p.attrs["axis"] % len(shape)
    blk = axes_block(shape, [axis])
    if blk is None:  # (one axis is always one block)
        return None
    outer, N, inner = blk
    K = p.out_shapes[0][axis]  # (axis of size 1: axes_block gives rows of one element, K <= 1)
    rows = max(outer * inner, 1)
    ls = LS
    if rows <= WIDE_ROWS and N >= WIDE_N and p.engine is not None:  # (kernels.topk)
        ls = 1 << (max(LS, min(WIDE_LS, p.engine.max_work_group_size)).bit_length() - 1)
    src = topk(p.in_dtypes[0], p.out_dtypes[1], p.attrs["mode"], p.attrs["sort"], ls)
    spec = [("i", 0), ("o", 0), ("o", 1), N, inner, K]
    return Impl(key, [Launch(src, (rows * ls,), (ls,), spec)])


def _reduction(cls: type, op: str) -> OpKind:
    return OpKind(cls, deps=(1,), impl=reduce_impl(op))


ROWS = table(
    _reduction(ReduceSum, "sum"), _reduction(ReduceMean, "mean"), _reduction(ReduceMax, "max"),
    _reduction(ReduceMin, "min"), _reduction(ReduceProd, "prod"), _reduction(ReduceL1, "l1"),
    _reduction(ReduceL2, "l2"), _reduction(ReduceLogicalAnd, "and"),
    _reduction(ReduceLogicalOr, "or"),
    OpKind(TopK, deps=(1,), impl=topk_impl),
    OpKind(CumSum, deps=(1,), shape=same_shape, impl=cumsum_impl),
)
