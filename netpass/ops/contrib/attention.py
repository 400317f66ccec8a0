"""onnxruntime's attention ops as netpass's ONNX ``Attention`` (3-D inputs split into heads):

- ``Attention``: one packed Q/K/V projection (weights [in, q + k + v], optional bias), then
  multi-head attention; ``mask_index`` as 1-D key lengths [B], a 2-D [B, total] or 3-D
  [B, S, total] 0/1 mask, each masked key getting ``mask_filter_value`` added (as ORT does, not
  -inf); ``unidirectional`` (causal); ``past`` [2, B, N, P, H] and ``present``;
  ``attention_bias``; ``qkv_hidden_sizes``.
- ``MultiHeadAttention``: separate 3-D Q, K, V (optional packed bias), the same mask forms as
  ``key_padding_mask``, ``attention_bias``, ``past_key``/``past_value`` and presents.
- ``RotaryEmbedding``: rotary position embedding of 3-D [B, S, N*H] or 4-D [B, N, S, H] input,
  halves or interleaved pairs, the rotary dims a prefix of each head, position ids [B, S] or a
  start offset [1].

Forms netpass does not read are refused naming the node: 4-D (Megatron) and start/end 1-D
masks, shared past/present buffers, rotary inside Attention, packed QKV/KV inputs of
MultiHeadAttention, 4-D keys/values, cache indirection, the qk output, packed batching.
"""
from __future__ import annotations

from typing import Any

from ...core.node import Output
from ..attention import attention
from ..elementwise import Add, Convert, Greater, Less, Multiply, Select, Subtract, const_like
from ..indexing import Gather
from ..matmul import MatMul
from ..movement import Concat, Reshape, Unsqueeze, VariadicSplit, slice
from ..normalization.common import i64
from ..registry import onnx_rule
from ..shape_ops import Range
from .common import (
    MS,
    refuse_inputs,
    refuse_outputs,
    same_dim,
    scalar_dim,
    static_last_dim,
    static_rank_of,
    wants,
)


def _mask_bias(ctx: Any, mask: Output | None, like: Output, total: Any) -> Output | None:
    """The additive float mask [B, 1, 1 or S, total] of an ORT ``mask_index`` /
    ``key_padding_mask``: 0 where a key is attended, ``mask_filter_value`` where not.
    ``like``: the [B, S, hidden] query; ``total``: a function giving the keys' count (i64
    scalar), past included."""
    if mask is None:
        return None
    rank = static_rank_of(ctx, mask, "the mask", (1, 2, 3))
    if rank == 1:
        if not same_dim(mask.partial_shape[0], like.partial_shape[0]):
            ctx.error(f"a 1-D mask of {mask.partial_shape} is read only as key lengths [batch] "
                      f"(batch {like.partial_shape[0]}); start/end positions are not supported")
        keys = Range([i64(0), total(), i64(1)], output_type="i64").output(0)
        lengths = Unsqueeze([Convert([mask], destination_type="i64"), i64([1])]).output(0)
        attended = Less([keys, lengths]).output(0)
    else:
        attended = Greater([mask, const_like(0, mask)]).output(0)
    bias = Select([attended, const_like(0, like),
                   const_like(float(ctx.attr("mask_filter_value", -10000.0)), like)]).output(0)
    return Unsqueeze([bias, i64([1, 2] if rank < 3 else [1])]).output(0)


def _with_bias(mask: Output | None, attention_bias: Output | None) -> Output | None:
    if attention_bias is None:
        return mask
    return attention_bias if mask is None else Add([mask, attention_bias]).output(0)


def _attend(ctx: Any, q: Output, k: Output, v: Output, mask: Output | None,
            past_k: Output | None, past_v: Output | None, heads: int) -> list[Output]:
    """netpass's Attention over 3-D Q, K, V with ``heads`` heads: (y, present_k, present_v)."""
    attrs: dict[str, Any] = {"q_num_heads": heads, "kv_num_heads": heads,
                             "is_causal": bool(ctx.attr("unidirectional", 0))}
    if ctx.has_attr("scale"):
        attrs["scale"] = float(ctx.attr("scale", 0.0))
    return attention(q, k, v, mask, past_k, past_v, **attrs).outputs()[:3]


def _heads(ctx: Any, sizes: list[int]) -> int:
    heads = int(ctx.attr("num_heads", 0))
    if heads <= 0 or any(s % heads for s in sizes):
        ctx.error(f"num_heads={heads} must be positive and divide the hidden sizes {sizes}")
    return heads


@onnx_rule("Attention", domain=MS)
def _import_attention(ctx):
    """Outputs (y [B, S, v_hidden], present [2, B, N, total, H])."""
    x, weights, bias, mask, past, attention_bias = (ctx.input(i) for i in range(6))
    refuse_inputs(ctx, {6: "past_sequence_length (a shared past/present buffer)"})
    for attr in ("do_rotary", "past_present_share_buffer"):
        if ctx.attr(attr, 0):
            ctx.error(f"{attr}=1 is not supported")
    width = static_last_dim(ctx, weights, "weights")
    sizes = [int(s) for s in ctx.attr("qkv_hidden_sizes", [])] or [width // 3] * 3
    if len(sizes) != 3 or sum(sizes) != width or sizes[0] != sizes[1]:
        ctx.error(f"qkv_hidden_sizes {sizes} do not split weights of width {width} into Q, K "
                  "and V with Q and K of one size")
    heads = _heads(ctx, sizes)
    if (past is not None or wants(ctx, 1)) and sizes[2] != sizes[0]:
        ctx.error(f"past/present need V of Q and K's hidden size, got qkv_hidden_sizes {sizes}")
    static_rank_of(ctx, x, "input", (3,))
    qkv = MatMul([x, weights], transpose_a=False, transpose_b=False).output(0)
    if bias is not None:
        qkv = Add([qkv, bias]).output(0)
    q, k, v = VariadicSplit([qkv, i64(-1), i64(sizes)]).outputs()
    past_k = past_v = None
    if past is not None:
        static_rank_of(ctx, past, "past", (5,))
        past_k, past_v = (Gather([past, i64(i), i64(0)]).output(0) for i in (0, 1))

    def total() -> Output:
        n = scalar_dim(x, 1)
        return n if past is None else Add([n, scalar_dim(past, 3)]).output(0)

    masks = _with_bias(_mask_bias(ctx, mask, x, total), attention_bias)
    y, pk, pv = _attend(ctx, q, k, v, masks, past_k, past_v, heads)
    present = None
    if wants(ctx, 1):
        present = Concat([Unsqueeze([pk, i64([0])]), Unsqueeze([pv, i64([0])])],
                         axis=0).output(0)
    return [y, present]


@onnx_rule("MultiHeadAttention", domain=MS)
def _import_multi_head_attention(ctx):
    """Outputs (y [B, S, v_hidden], present_key, present_value [B, N, total, H])."""
    q, k, v, bias, mask, attention_bias, past_k, past_v = (ctx.input(i) for i in range(8))
    refuse_inputs(ctx, {8: "past_sequence_length (a shared past/present buffer)",
                        9: "cache_indirection (beam search)"})
    refuse_outputs(ctx, {3: "the qk debug output"})
    if k is None or v is None:
        ctx.error("packed QKV in the query input is not supported")
    for what, value in (("query", q), ("key", k), ("value", v)):
        static_rank_of(ctx, value, f"{what} (packed or [B, N, L, H] forms are not supported)",
                       (3,))
    if (past_k is None) != (past_v is None):
        ctx.error("past_key and past_value must be given together")
    sizes = [static_last_dim(ctx, t, what) for t, what in ((q, "query"), (k, "key"),
                                                            (v, "value"))]
    heads = _heads(ctx, sizes)
    if bias is not None:
        q, k, v = (Add([t, b]).output(0) for t, b in
                   zip((q, k, v), VariadicSplit([bias, i64(0), i64(sizes)]).outputs()))

    def total() -> Output:
        n = scalar_dim(k, 1)
        return n if past_k is None else Add([n, scalar_dim(past_k, 2)]).output(0)

    masks = _with_bias(_mask_bias(ctx, mask, q, total), attention_bias)
    return _attend(ctx, q, k, v, masks, past_k, past_v, heads)


def _last(x: Output, start: int, stop: int, step: int = 1) -> Output:
    return slice(x, [start], [stop], [step], [-1]).output(0)


@onnx_rule("RotaryEmbedding", domain=MS)
def _import_rotary_embedding(ctx):
    x, positions, cos, sin = ctx.inputs[:4]
    if ctx.attr("is_packed_batching", 0):
        ctx.error("is_packed_batching=1 is not supported")
    if float(ctx.attr("scale", 1.0)) != 1.0:
        ctx.error("a scale other than 1 is not supported")
    rank = static_rank_of(ctx, x, "input", (3, 4))
    half = static_last_dim(ctx, cos, "cos_cache")
    heads, rot = int(ctx.attr("num_heads", 0)), int(ctx.attr("rotary_embedding_dim", 0))
    width = static_last_dim(ctx, x, "input")
    head = width if rank == 4 else (width // heads if heads else 2 * half)
    rot = rot or head
    if rot != 2 * half or rot > head or width % head:
        ctx.error(f"cos_cache of {half} columns, rotary_embedding_dim {rot} and head size "
                  f"{head} (input {x.partial_shape}, num_heads {heads}) do not fit")
    pos_rank = static_rank_of(ctx, positions, "position_ids", (1, 2))
    pos = Convert([positions], destination_type="i64").output(0)
    if pos_rank == 1:  # a start offset: positions offset + 0..S-1
        seq = scalar_dim(x, 1 if rank == 3 else 2)
        pos = Add([Range([i64(0), seq, i64(1)], output_type="i64"), pos]).output(0)
    # cos/sin rows [(B,) S, half], made to broadcast over [B, S, N, H] or [B, N, S, H]
    axis = [-2] if rank == 3 else ([1] if pos_rank == 2 else [])
    c, s = (Gather([table, pos, i64(0)]).output(0) for table in (cos, sin))
    if axis:
        c, s = (Unsqueeze([t, i64(axis)]).output(0) for t in (c, s))
    xs = x if rank == 4 else Reshape([x, i64([0, 0, -1, head])], special_zero=True).output(0)
    y = rotate(xs, c, s, head, rot, bool(ctx.attr("interleaved", 0)))
    return y if rank == 4 else Reshape([y, i64([0, 0, -1])], special_zero=True).output(0)


def rotate(xs: Output, c: Output, s: Output, head: int, rot: int, interleaved: bool) -> Output:
    """The rotary embedding of the 4-D heads ``xs`` (last dim ``head``): its first ``rot``
    features rotated by the cos/sin rows ``c``, ``s`` (``rot / 2`` columns, broadcastable to
    ``xs`` but for the last dim), as halves or as ``interleaved`` pairs; the rest kept."""
    half = rot // 2
    x1, x2 = ((_last(xs, 0, rot, 2), _last(xs, 1, rot, 2)) if interleaved
              else (_last(xs, 0, half), _last(xs, half, rot)))
    o1 = Subtract([Multiply([x1, c]), Multiply([x2, s])]).output(0)
    o2 = Add([Multiply([x2, c]), Multiply([x1, s])]).output(0)
    if interleaved:
        pairs = Concat([Unsqueeze([o1, i64([-1])]), Unsqueeze([o2, i64([-1])])], axis=-1)
        parts = [Reshape([pairs, i64([0, 0, 0, -1])], special_zero=True).output(0)]
    else:
        parts = [o1, o2]
    if rot < head:
        parts.append(_last(xs, rot, head))
    return Concat(parts, axis=-1).output(0)
