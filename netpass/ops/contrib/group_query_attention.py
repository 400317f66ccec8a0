"""onnxruntime's GroupQueryAttention, the attention op of every decoder onnxruntime-genai's model
builder writes (LLaMA, Mistral, Phi-3, Qwen, Gemma), read as netpass's ONNX ``Attention`` over a
key/value cache built with Gather and Select.

What onnxruntime's CPU kernel does (and so netpass): row ``b`` of the batch holds
``L_b = seqlens_k[b] + 1`` tokens after the step, ``p_b = max(L_b - S, 0)`` of them from before
it (S the query's length: a first prompt, right-padded where ``L_b < S``, has ``p_b = 0``).
``present`` ([B, kv_heads, T, H], ``T = max(total_sequence_length, past length)``) holds the
past's first ``p_b`` rows, then the S new ones, then zeros. This covers both cache forms: a past
of exactly the previous length (present one longer) and a past of the maximum length (the
"shared buffer", present as long as past). Query ``i`` sits at position ``p_b + i`` and sees
keys ``j <= min(p_b + i, L_b - 1)`` (with ``causal=0``, every ``j < L_b``), within the last
``local_window_size`` positions when that is set. ``do_rotary`` rotates Q and K at those
positions; ``softcap`` caps the scaled scores; ``attention_bias`` is added after the cap;
``smooth_softmax`` and ``head_sink`` add one more softmax term (``exp(0)`` or
``exp(head_sink[h])``), made here as a zero key and value with that logit.

The values onnxruntime checks at run time (``seqlens_k`` within the present length,
``total_sequence_length`` the past length plus S or within a fixed buffer) are not checked: the
cache indices are clamped.

Refused naming the input or attribute: ``position_ids``, a quantized cache (``k_scale``,
``v_scale``, non-float past), ``q_norm_weight``/``k_norm_weight``, ``query_seqlens``,
``sliding_window_cache``, the ``output_qk`` output (``qk_output``).
"""
from __future__ import annotations

from typing import Any

from ...core.node import Output
from ..attention import attention
from ..elementwise import (
    Add,
    Convert,
    Greater,
    Less,
    LessEqual,
    LogicalAnd,
    Maximum,
    Minimum,
    Multiply,
    Select,
    Subtract,
    const_like,
)
from ..indexing import Gather
from ..movement import Broadcast, Concat, Reshape, Transpose, Unsqueeze, VariadicSplit
from ..normalization.common import i64
from ..registry import onnx_rule
from ..shape_ops import Range
from .attention import rotate
from .common import MS, dim_of, refuse_inputs, refuse_outputs, scalar_dim, static_last_dim

_REFUSED_INPUTS = {9: "position_ids (netpass takes the positions from seqlens_k)",
                   12: "k_scale (a quantized KV cache)", 13: "v_scale (a quantized KV cache)",
                   14: "q_norm_weight (per-head Q/K RMS normalization)",
                   15: "k_norm_weight (per-head Q/K RMS normalization)",
                   16: "query_seqlens (right-padded query chunks)"}


def _heads(x: Output, heads: int, head: int) -> Output:
    """[B, S, heads * head] -> [B, heads, S, head]."""
    split = Reshape([x, i64([0, 0, heads, head])], special_zero=True).output(0)
    return Transpose([split, i64([0, 2, 1, 3])]).output(0)


def _rows(x: Output, axis: int) -> Output:
    """``x`` as an i64 vector [0, 1, .., x's dim ``axis`` - 1]."""
    return Range([i64(0), scalar_dim(x, axis), i64(1)], output_type="i64").output(0)


def _cache(new: Output, past: Output | None, pos0: Output, keys: Output, heads: int,
           head: int) -> Output:
    """The present cache [B, N, T, H]: at key ``j`` (``keys``, [T]) of row b, past[b, :, j] where
    ``j < pos0[b]``, new[b, :, j - pos0[b]] where that is one of the S new rows, else 0."""
    src = new if past is None else Concat([past, new], axis=2).output(0)
    p = i64(0) if past is None else scalar_dim(past, 2)
    rel = Subtract([keys, Unsqueeze([pos0, i64([1])])]).output(0)  # [B, T]
    idx = Select([Less([rel, i64(0)]), keys, Add([rel, p])]).output(0)
    rows = scalar_dim(src, 2)
    idx = Minimum([Maximum([idx, i64(0)]), Subtract([rows, i64(1)])]).output(0)
    # one Gather of rows of the flattened [B * N * (P + S), H] source (the runtime's Gather
    # kernel takes batch_dims 0 only): (b * N + n) * (P + S) + idx[b, t]
    count = Multiply([scalar_dim(src, 0), i64(heads)]).output(0)
    starts = Multiply([Range([i64(0), count, i64(1)], output_type="i64"), rows]).output(0)
    starts = Reshape([starts, i64([-1, heads, 1])], special_zero=False).output(0)
    flat = Add([starts, Unsqueeze([idx, i64([1])])]).output(0)  # [B, N, T]
    picked = Gather([Reshape([src, i64([-1, head])], special_zero=False), flat,
                     i64(0)]).output(0)
    keep = Unsqueeze([Less([rel, scalar_dim(new, 2)]), i64([1, 3])]).output(0)
    return Select([keep, picked, const_like(0, picked)]).output(0)


def _allowed(ctx: Any, keys: Output, pos0: Output, length: Output, seq: Output) -> Output:
    """The boolean mask [B, 1, S, T] of the keys each query attends."""
    length = Unsqueeze([length, i64([1, 2])]).output(0)  # [B, 1, 1]
    if not ctx.attr("causal", 1):
        if int(ctx.attr("local_window_size", -1)) != -1:
            ctx.error("local_window_size needs causal=1")
        allowed = Less([keys, length]).output(0)  # [B, 1, T]
        return Unsqueeze([allowed, i64([1])]).output(0)
    pos = Unsqueeze([Add([Unsqueeze([pos0, i64([1])]), seq]), i64([2])]).output(0)  # [B, S, 1]
    last = Minimum([pos, Subtract([length, i64(1)])]).output(0)
    allowed = LessEqual([keys, last]).output(0)
    window = int(ctx.attr("local_window_size", -1))
    if window > 0:  # the last `window` positions, the query's own among them
        first = Subtract([pos, i64(window)]).output(0)
        allowed = LogicalAnd([allowed, Greater([keys, first])]).output(0)
    elif window not in (-1, 0):
        ctx.error(f"local_window_size={window} is not valid")
    return Unsqueeze([allowed, i64([1])]).output(0)


def _with_sink(ctx: Any, k: Output, v: Output, mask: Output, sink: Output | None,
               heads: int) -> tuple[Output, Output, Output]:
    """K, V and the float mask with one more key of zeros whose logit is 0 (smooth softmax) or
    ``sink[h]`` (head_sink): that extra softmax term, with no value."""
    zeros_shape = Concat([dim_of(k, 0), dim_of(k, 1), i64([1]), dim_of(k, 3)], axis=0).output(0)
    zeros = Broadcast([const_like(0, k), zeros_shape]).output(0)
    k, v = (Concat([t, zeros], axis=2).output(0) for t in (k, v))
    logit = const_like(0, mask) if sink is None else \
        Reshape([sink, i64([1, heads, 1, 1])], special_zero=False).output(0)
    full = Concat([dim_of(mask, 0), i64([heads]), dim_of(mask, 2), i64([1])], axis=0).output(0)
    column = Broadcast([logit, full]).output(0)
    mask = Broadcast([mask, Concat([dim_of(mask, 0), i64([heads]), dim_of(mask, 2),
                                    dim_of(mask, 3)], axis=0)]).output(0)
    return k, v, Concat([mask, column], axis=3).output(0)


@onnx_rule("GroupQueryAttention", domain=MS)
def _import_group_query_attention(ctx: Any) -> list[Output]:
    """Outputs (output [B, S, num_heads * H], present_key, present_value [B, kv_heads, T, H])."""
    q, k, v, past_k, past_v, seqlens, total, cos, sin = (ctx.input(i) for i in range(9))
    bias, sink = ctx.input(10), ctx.input(11)
    refuse_inputs(ctx, _REFUSED_INPUTS)
    refuse_outputs(ctx, {3: "the QK debug output"})
    for attr, default in (("sliding_window_cache", 0), ("qk_output", 0)):
        if ctx.attr(attr, default):
            ctx.error(f"{attr}={ctx.attr(attr, default)} is not supported")
    for attr in ("k_quant_type", "v_quant_type"):
        kind = ctx.attr(attr, "NONE")
        if (kind.decode() if isinstance(kind, bytes) else kind) != "NONE":
            ctx.error(f"{attr}={kind!r}: a quantized KV cache is not supported")
    heads, kv_heads = int(ctx.attr("num_heads", 0)), int(ctx.attr("kv_num_heads", 0))
    if heads <= 0 or kv_heads <= 0 or heads % kv_heads:
        ctx.error(f"num_heads={heads} must be a positive multiple of kv_num_heads={kv_heads}")
    if (k is None) != (v is None) or (past_k is None) != (past_v is None) or \
            (cos is None) != (sin is None):
        ctx.error("key and value, past_key and past_value, cos_cache and sin_cache go in pairs")
    if seqlens is None or total is None:
        ctx.error("seqlens_k and total_sequence_length are required")
    width = static_last_dim(ctx, q, "query")
    packed = k is None
    parts = heads + 2 * kv_heads if packed else heads
    if width % parts:
        ctx.error(f"query width {width} is not a multiple of {parts} heads")
    head = width // parts
    if packed:
        q, k, v = VariadicSplit([q, i64(-1), i64([heads * head, kv_heads * head,
                                                  kv_heads * head])]).outputs()
    for what, t in (("past_key", past_k), ("past_value", past_v)):
        if t is not None and not t.element_type.is_dynamic and t.element_type != q.element_type:
            ctx.error(f"{what} of type {t.element_type}: a quantized KV cache is not supported")

    length = Add([Convert([seqlens], destination_type="i64"), i64(1)]).output(0)  # L_b [B]
    seq = _rows(q, 1)  # [S]
    pos0 = Maximum([Subtract([length, scalar_dim(q, 1)]), i64(0)]).output(0)  # p_b [B]
    if ctx.attr("do_rotary", 0):
        if cos is None:
            ctx.error("do_rotary=1 needs cos_cache and sin_cache")
        rot = 2 * static_last_dim(ctx, cos, "cos_cache")
        if rot > head:
            ctx.error(f"cos_cache of {rot // 2} columns does not fit head size {head}")
        positions = Add([Unsqueeze([pos0, i64([1])]), seq]).output(0)  # [B, S]
        c, s = (Unsqueeze([Gather([t, positions, i64(0)]), i64([2])]).output(0)
                for t in (cos, sin))  # [B, S, 1, rot / 2]
        interleaved = bool(ctx.attr("rotary_interleaved", 0))
        q, k = (Reshape([rotate(Reshape([t, i64([0, 0, -1, head])], special_zero=True).output(0),
                                c, s, head, rot, interleaved), i64([0, 0, -1])],
                        special_zero=True).output(0) for t in (q, k))
    total = Reshape([Convert([total], destination_type="i64"), i64([])],
                    special_zero=False).output(0)
    size = total if past_k is None else Maximum([total, scalar_dim(past_k, 2)]).output(0)
    keys = Range([i64(0), size, i64(1)], output_type="i64").output(0)  # [T]
    present_k, present_v = (_cache(_heads(t, kv_heads, head), past, pos0, keys, kv_heads, head)
                            for t, past in ((k, past_k), (v, past_v)))

    mask = _allowed(ctx, keys, pos0, length, seq)
    kk, vv = present_k, present_v
    softcap = float(ctx.attr("softcap", 0.0))
    if bias is not None or sink is not None or ctx.attr("smooth_softmax", 0):
        # a float mask: -inf where not attended, attention_bias (its columns: keys < total)
        # added after the soft cap as onnxruntime does
        columns = Minimum([keys, Subtract([total, i64(1)])]).output(0)
        base = const_like(0, q) if bias is None else Gather([bias, columns, i64(-1)]).output(0)
        mask = Select([mask, base, const_like(float("-inf"), q)]).output(0)
        if sink is not None or ctx.attr("smooth_softmax", 0):
            kk, vv, mask = _with_sink(ctx, kk, vv, mask, sink, heads)
    attrs: dict[str, Any] = {"softcap": softcap}
    if float(ctx.attr("scale", 0.0)):
        attrs["scale"] = float(ctx.attr("scale", 0.0))
    y = attention(_heads(q, heads, head), kk, vv, mask, **attrs).output(0)  # [B, N, S, H]
    y = Reshape([Transpose([y, i64([0, 2, 1, 3])]), i64([0, 0, -1])],
                special_zero=True).output(0)
    return [y, present_k, present_v]
