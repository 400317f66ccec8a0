"""Normalizations (``netpass/ops/normalization/``): softmax, log-softmax and MVN on the
``rowop`` template (with fused elementwise epilogues, e.g. a LayerNorm's scale and shift),
BatchNormInference as an elementwise expression per channel. NormalizeL2 and
GroupNormalization run on the host. ``RmsNorm``: the runtime's own kind for the RMSNorm
chains exports write out (``netpass.runtime.rms_norm``), on the same template."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ...ops.normalization import (
    MVN,
    MVN2,
    BatchNormInference,
    BatchNormInference1,
    LogSoftmax,
    NormalizeL2,
    Softmax,
)
from ..impls import Impl, Params, collapse, size
from ..kernels.common import flit
from .base import ImplFactory, OpKind, ints, same_shape, table
from .elementwise import per_channel_impl
from .reduction import axes_block, rowop_fused


def softmax_impl(kind: str) -> ImplFactory:
    """Softmax (``kind`` "softmax") or LogSoftmax ("logsoftmax") over one axis."""
    def impl(p: Params, key: Any) -> Impl | None:
        shape = p.in_shapes[0]
        if np.dtype(p.in_dtypes[0]).kind != "f" or np.dtype(p.in_dtypes[0]) == np.float16:
            return None
        axis = int(p.attrs.get("axis", 1)) % max(len(shape), 1)
        outer, R, inner = size(shape[:axis]), shape[axis] if shape else 1, size(shape[axis + 1:])
        return rowop_fused(p, key, kind, {}, outer * inner, R, inner)
    return impl


def mvn_impl(p: Params, key: Any) -> Impl | None:
    """MVN over trailing axes (opset 6 with an axes input, or opset 2's attributes)."""
    shape = p.in_shapes[0]
    if np.dtype(p.in_dtypes[0]) != np.float32:
        return None
    rank = len(shape)
    if len(p.in_shapes) > 1:
        if p.values.get(1) is None:
            return None
        axes = [a % rank for a in ints(p.values[1])]
        inside = str(p.attrs.get("eps_mode", "inside_sqrt")).lower() == "inside_sqrt"
    else:
        start = 1 if p.attrs.get("across_channels", False) else 2
        axes = list(range(start, rank))
        if p.attrs.get("reduction_axes"):
            axes = [int(a) % rank for a in p.attrs["reduction_axes"]]
        inside = True
    blk = axes_block(shape, axes)
    if blk is None or blk[2] != 1:
        return None
    outer, R, _ = blk
    params = {"eps": p.attrs.get("eps", 1e-9), "inside_sqrt": inside,
              "normalize_variance": p.attrs.get("normalize_variance", True)}
    return rowop_fused(p, key, "mvn", params, outer, R, 1)


class RmsNorm:
    """The kind of ``x / sqrt(mean(x^2 over the last axis) + eps)`` (an RMSNorm without its
    scale, which fuses as the epilogue), made by ``netpass.runtime.rms_norm`` from the ops an
    export writes, never an op of a model; its node's ``subgraph`` is a :class:`RmsNormDesc`."""

    type_name: ClassVar[str] = "RmsNorm"


class RmsNormDesc:
    """What an RmsNorm computes: ``eps``, and the nodes it replaced (for messages)."""

    def __init__(self, eps: float, nodes: list) -> None:
        self.eps = eps
        self.nodes = nodes

    def key(self) -> tuple:
        return ("rms_norm", self.eps)

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        return [tuple(shapes[0])]

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = np.asarray(arrays[0])
        ms = np.mean(np.square(x, dtype=np.float32), axis=-1, keepdims=True, dtype=np.float32)
        return [(x * (np.float32(1) / np.sqrt(ms + np.float32(self.eps)))).astype(x.dtype)]


def row_stride(shape: Sequence[int],
               strides: Sequence[int] | None) -> tuple[int, int, int] | None | bool:
    """Where the rows of the last axis of a tensor of ``strides`` (elements; None: dense)
    start: None where they are dense; ``(h, outer, inner)`` (row r at ``(r // h) * outer +
    (r % h) * inner``) where the last axis is contiguous and the leading dims walk as at most
    two (a split piece of a projection, per token, or per head of each token reshaped from
    it: ``Program._mark_strided_views`` leaves it a view for an RmsNorm); else False."""
    if strides is None or not shape:
        return None
    dims, (st,) = collapse(list(shape[:-1]), [list(strides[:-1])])
    if shape[-1] != 1 and strides[-1] != 1 or len(dims) > 2:
        return False
    if len(dims) == 2:
        return dims[1], st[0], st[1]
    rs = st[0] if dims else shape[-1]
    return None if rs == shape[-1] else (1, rs, 0)


def rms_impl(p: Params, key: Any) -> Impl | None:
    """One ``rowop`` "rms" launch over the rows of the last axis (float32), read through the
    input's row stride where it is a strided view (:func:`row_stride`); none where the decode
    attention that reads it normalizes its rows (``runtime.rotary_fold``)."""
    shape = p.in_shapes[0]
    if np.dtype(p.in_dtypes[0]) != np.float32 or not shape:
        return None
    fold = p.node.rotary_fold
    if fold is not None and fold.skips(p.node, tuple(p.out_shapes[0])):
        return Impl(key, [])
    rs = row_stride(shape, p.in_strides[0] if p.in_strides else None)
    if rs is not None and not isinstance(rs, tuple):
        return None
    return rowop_fused(p, key, "rms", {"eps": p.node.subgraph.eps}, size(shape[:-1]),
                       shape[-1], 1, rs)


def _batch_norm(attrs: dict, in_dtypes: Sequence[Any], out_dtype: Any) -> str | None:
    """data, gamma, beta, mean, variance (float32 only)."""
    if any(np.dtype(d) != np.float32 for d in list(in_dtypes) + [out_dtype]):
        return None
    return f"((({{0}} - {{3}}) / sqrt({{4}} + {flit(attrs.get('epsilon', 1e-5))})) * {{1}} + {{2}})"


ROWS = table(
    OpKind(Softmax, shape=same_shape, impl=softmax_impl("softmax"), epilogue=True),
    OpKind(LogSoftmax, shape=same_shape, impl=softmax_impl("logsoftmax"), epilogue=True),
    OpKind(MVN, deps=(1,), shape=same_shape, impl=mvn_impl, epilogue=True),
    OpKind(MVN2, shape=same_shape, impl=mvn_impl, epilogue=True),
    OpKind(NormalizeL2, deps=(1,), shape=same_shape),
    OpKind(BatchNormInference, impl=per_channel_impl, expr=_batch_norm, epilogue=True),
    OpKind(BatchNormInference1, shape=lambda attrs, shapes, values: [tuple(shapes[2])]),
    OpKind(RmsNorm, shape=same_shape, impl=rms_impl, epilogue=True),
)
