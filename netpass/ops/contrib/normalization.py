"""onnxruntime's fused normalizations: SkipLayerNormalization and
SkipSimplifiedLayerNormalization (``input + skip [+ bias]``, then LayerNorm / RMSNorm over the
last dim, the sum and the statistics as optional outputs), SimplifiedLayerNormalization (RMSNorm,
which ORT registers in the default domain and its optimizer writes there) and
EmbedLayerNormalization (BERT's word + position [+ segment] embeddings, LayerNorm, and the mask's
per-row token count as the 1-D ``mask_index`` Attention reads)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Output
from ..elementwise import Add, Convert, Divide, Multiply, Sqrt, Subtract, const_like
from ..indexing import Gather
from ..normalization.common import i64, onnx_axis, static_rank
from ..normalization.mvn import MVN
from ..reduction import ReduceMean, ReduceSum
from ..registry import onnx_rule
from ..shape_ops import Range
from .common import MS, refuse_outputs, scalar_dim, wants


def _inv_std(x: Output, axes: Output, eps: float, rms: bool) -> Output:
    """1 / sqrt(mean((x - mean)^2) + eps) over ``axes`` (kept); with ``rms``, of mean(x^2)."""
    centered = x if rms else Subtract([x, ReduceMean([x, axes], keep_dims=True)]).output(0)
    var = ReduceMean([Multiply([centered, centered]), axes], keep_dims=True)
    return Divide([const_like(1, x), Sqrt([Add([var, const_like(eps, x)])])]).output(0)


def _normalized(x: Output, axes: Output, eps: float, rms: bool, gamma: Output,
                beta: Output | None) -> Output:
    """LayerNorm (MVN) or RMSNorm of ``x`` over ``axes``, times gamma [plus beta]."""
    if rms:
        y = Multiply([x, _inv_std(x, axes, eps, rms=True)]).output(0)
    else:
        y = MVN([x, axes], normalize_variance=True, eps=eps, eps_mode="INSIDE_SQRT").output(0)
    y = Multiply([y, gamma]).output(0)
    return y if beta is None else Add([y, beta]).output(0)


def _skip_norm(ctx: Any, rms: bool) -> list[Output | None]:
    """Skip[Simplified]LayerNormalization: outputs (y, mean, inv_std_var, input_skip_bias_sum),
    None where not asked for."""
    x, skip, gamma = ctx.inputs[:3]
    beta, bias = (None, ctx.input(3)) if rms else (ctx.input(3), ctx.input(4))
    if rms:
        refuse_outputs(ctx, {1: "an RMS normalization has no mean"})
    eps = float(ctx.attr("epsilon", 1e-12))
    rank = static_rank(ctx, x, ctx.op_type)
    axes = i64([rank - 1])
    total = Add([x, skip]).output(0)
    if bias is not None:
        total = Add([total, bias]).output(0)
    y = _normalized(total, axes, eps, rms, gamma, beta)
    mean = ReduceMean([total, axes], keep_dims=True).output(0) if wants(ctx, 1) else None
    inv = _inv_std(total, axes, eps, rms) if wants(ctx, 2) else None
    return [y, mean, inv, total]


@onnx_rule("SkipLayerNormalization", domain=MS)
def _import_skip_layer_norm(ctx):
    return _skip_norm(ctx, rms=False)


@onnx_rule("SkipSimplifiedLayerNormalization", domain=MS)
def _import_skip_simplified_layer_norm(ctx):
    return _skip_norm(ctx, rms=True)


@onnx_rule("SimplifiedLayerNormalization")
def _import_simplified_layer_norm(ctx):
    """RMSNorm over the dims from ``axis`` on; outputs (y, inv_std_var)."""
    x, scale = ctx.inputs[:2]
    if ctx.attr("stash_type", 1) != 1 and x.element_type.name != "f32":
        ctx.error("stash_type other than float is not supported")
    rank = static_rank(ctx, x, ctx.op_type)
    axes = i64(np.arange(onnx_axis(ctx, rank), rank))
    eps = float(ctx.attr("epsilon", 1e-5))
    inv = _inv_std(x, axes, eps, rms=True) if wants(ctx, 1) else None
    return [_normalized(x, axes, eps, True, scale, None), inv]


@onnx_rule("EmbedLayerNormalization", domain=MS)
def _import_embed_layer_norm(ctx):
    """LayerNorm(word[ids] + position[position_ids or 0..S-1] [+ segment[segment_ids]]);
    outputs (y, mask_index: the mask's row sums as i32, embedding_sum)."""
    ids, segment_ids, word, position, segment, gamma, beta = (ctx.input(i) for i in range(7))
    mask, position_ids = ctx.input(7), ctx.input(8)
    if (segment_ids is None) != (segment is None):
        ctx.error("segment_ids and segment_embedding must be given together")
    static_rank(ctx, ids, ctx.op_type)
    zero = i64(0)
    if position_ids is None:
        position_ids = Range([zero, scalar_dim(ids, 1), i64(1)], output_type="i64").output(0)
    total = Add([Gather([word, ids, zero]), Gather([position, position_ids, zero])]).output(0)
    if segment is not None:
        total = Add([total, Gather([segment, segment_ids, zero])]).output(0)
    y = _normalized(total, i64([2]), float(ctx.attr("epsilon", 1e-12)), False, gamma, beta)
    mask_index = None
    if wants(ctx, 1):
        if mask is None:
            ctx.error("output mask_index needs the mask input")
        mask_index = ReduceSum([Convert([mask], destination_type="i32"), i64([1])],
                               keep_dims=False).output(0)
    return [y, mask_index, total]
