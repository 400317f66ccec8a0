"""The attention ops.

``Attention``: ONNX Attention (opsets 23, 24, 25): scaled dot-product attention over 3-D or 4-D
Q, K, V with an optional mask, causal and sliding-window masking, a key/value cache (past
inputs, present outputs), grouped-query heads, soft capping and a debug output of the QK
product. OpenVINO's ScaledDotProductAttention covers only part of this (no 3-D inputs, caches,
soft cap or window), so netpass keeps the ONNX op whole, evaluated as the ONNX specification
describes (the runtime runs it on its flash kernel where it can, else on the host).

``ScaledDotProductAttention``: OpenVINO's op (opset13), which its PyTorch frontend writes for
every ``torch.nn.functional.scaled_dot_product_attention`` (so in the IR of every transformers
model converted from torch): read and written in IR v11, evaluated as OpenVINO's specification
says, exported to ONNX as Attention, and decomposed into MatMul / Softmax / MatMul by
``ScaledDotProductAttentionDecomposition`` for the runtime's attention fusion.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.boundary import Constant
from ..core.dimension import Dimension
from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..core.types import Type, boolean
from .base import NETPASS_OPSET, merged_input_type, set_name, to_output
from .onnx_types import onnx_element_type
from .registry import export_error, onnx_export, onnx_rule

__all__ = ["attention", "scaled_dot_product_attention"]


class Attention(Node):
    """ONNX Attention. Inputs ``(Q, K, V[, attn_mask][, past_key, past_value]
    [, nonpad_kv_seqlen])``: the optional ones that are present, in that order, as the ``has_*``
    attributes say. Outputs ``(Y, present_key, present_value, qk_matmul_output)``.

    Attributes follow ONNX; ``q_num_heads``/``kv_num_heads`` 0 means "not given" (4-D inputs),
    ``scale`` 0.0 means ``1/sqrt(head_size)``, ``softcap`` 0.0 means none,
    ``softmax_precision`` None means the inputs' type, window sizes -1 mean unbounded.
    """

    type_name = "Attention"
    version = NETPASS_OPSET
    ATTRS = {"is_causal": False, "q_num_heads": 0, "kv_num_heads": 0, "scale": 0.0,
             "softcap": 0.0, "softmax_precision": None, "qk_matmul_output_mode": 0,
             "left_window_size": -1, "right_window_size": -1, "has_attn_mask": False,
             "has_past": False, "has_nonpad_kv_seqlen": False}
    softmax_precision: Any

    def _optional_inputs(self) -> dict[str, int]:
        names, i = {}, 3
        for flag, keys in (("has_attn_mask", ("attn_mask",)),
                           ("has_past", ("past_key", "past_value")),
                           ("has_nonpad_kv_seqlen", ("nonpad_kv_seqlen",))):
            if getattr(self, flag):
                for k in keys:
                    names[k] = i
                    i += 1
        return names

    def infer_types(self) -> None:
        opt = self._optional_inputs()
        self.check(self.get_input_size() == 3 + len(opt),
                   "expects {} inputs (Q, K, V and {}), got {}", 3 + len(opt), list(opt),
                   self.get_input_size())
        self.check(self.qk_matmul_output_mode in (0, 1, 2, 3),
                   "qk_matmul_output_mode must be 0..3, got {}", self.qk_matmul_output_mode)
        self.check(self.left_window_size >= -1 and self.right_window_size >= -1,
                   "window sizes must be -1 or non-negative")
        if self.softmax_precision is not None:
            self.softmax_precision = Type.of(self.softmax_precision)
            self.check(self.softmax_precision.is_real, "softmax_precision must be a float type, "
                       "got {}", self.softmax_precision)
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "Q must be a float tensor, got {}", et)
        if "attn_mask" in opt:
            m = self.get_input_element_type(opt["attn_mask"])
            self.check(m.is_dynamic or m is boolean or m.merge(et) is not None,
                       "attn_mask must be boolean or of Q's type {}, got {}", et, m)
        q, k, v = (self.get_input_partial_shape(i) for i in range(3))
        ranks = {len(s) for s in (q, k, v) if s.rank_is_static}
        self.check(len(ranks) <= 1 and ranks <= {3, 4}, "Q, K, V must all be 3-D or all 4-D, "
                   "got {}, {}, {}", q, k, v)
        rank = ranks.pop() if ranks else None
        heads_given = self.q_num_heads > 0 and self.kv_num_heads > 0
        if rank == 3:
            self.check(heads_given, "3-D inputs need q_num_heads and kv_num_heads")
        kv_et = self.get_input_element_type(1)
        if rank is None:
            for i, t in enumerate((et, kv_et, self.get_input_element_type(2), et)):
                self.set_output_type(i, t, PartialShape(None))
            return
        batch, q_heads, q_len, v_head, kv_heads, head, kv_len = self._dims(rank, q, k, v)
        total = kv_len
        if "past_key" in opt:
            past = self.get_input_partial_shape(opt["past_key"])
            if past.rank_is_static:
                self.check(len(past) == 4, "past_key must be 4-D, got {}", past)
                total = past[2] + kv_len
            else:
                total = Dimension()
        if q_heads.is_static and kv_heads.is_static and kv_heads.min > 0:
            self.check(q_heads.min % kv_heads.min == 0, "q_num_heads {} is not a multiple of "
                       "kv_num_heads {}", q_heads, kv_heads)
        if rank == 4:
            y = PartialShape([batch, q_heads, q_len, v_head])
        else:
            y = PartialShape([batch, q_len, q_heads * v_head])
        self.set_output_type(0, et, y)
        self.set_output_type(1, kv_et, PartialShape([batch, kv_heads, total, head]))
        self.set_output_type(2, self.get_input_element_type(2),
                             PartialShape([batch, kv_heads, total, v_head]))
        self.set_output_type(3, et, PartialShape([batch, q_heads, q_len, total]))

    def _dims(self, rank: int, q: PartialShape, k: PartialShape, v: PartialShape) -> tuple:
        """(batch, q_heads, q_len, v_head_size, kv_heads, head_size, kv_len) as Dimensions."""
        def dim(s: PartialShape, i: int) -> Dimension:
            return s[i] if s.rank_is_static else Dimension()

        batch = dim(q, 0)
        if rank == 4:
            return (batch, dim(q, 1), dim(q, 2), dim(v, 3), dim(k, 1), dim(k, 3), dim(k, 2))
        qh, kvh = self.q_num_heads, self.kv_num_heads
        for s, n, what in ((q, qh, "Q"), (k, kvh, "K"), (v, kvh, "V")):
            d = dim(s, 2)
            self.check(not d.is_static or d.min % n == 0, "{} hidden size {} is not a multiple "
                       "of its {} heads", what, d, n)
        return (batch, Dimension(qh), dim(q, 1), dim(v, 2) // kvh, Dimension(kvh),
                dim(k, 2) // kvh, dim(k, 1))

    def evaluate(self, inputs):
        opt = self._optional_inputs()
        q, k, v = inputs[:3]
        mask = inputs[opt["attn_mask"]] if "attn_mask" in opt else None
        past_k = inputs[opt["past_key"]] if "past_key" in opt else None
        past_v = inputs[opt["past_value"]] if "past_value" in opt else None
        nonpad = inputs[opt["nonpad_kv_seqlen"]] if "nonpad_kv_seqlen" in opt else None
        three_d = q.ndim == 3
        if three_d:
            q, k, v = (_split_heads(x, n) for x, n in ((q, self.q_num_heads),
                                                       (k, self.kv_num_heads),
                                                       (v, self.kv_num_heads)))
        dt = q.dtype
        scale = self.scale if self.scale else 1.0 / np.sqrt(q.shape[-1])
        root = dt.type(np.sqrt(scale))
        if past_k is not None:
            k = np.concatenate([past_k, k], axis=2)
            v = np.concatenate([past_v, v], axis=2)
        present_k, present_v = k, v
        q_len, total = q.shape[2], k.shape[2]
        if past_k is not None:
            offset: Any = past_k.shape[2]
        elif nonpad is not None:
            offset = np.asarray(nonpad, np.int64).reshape(-1, 1, 1, 1) - q_len
        else:
            offset = 0
        bias = self._bias(mask, dt, q_len, total, offset, nonpad)
        if q.shape[1] != k.shape[1]:  # grouped-query: each KV head serves consecutive Q heads
            k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
            v = np.repeat(v, q.shape[1] // v.shape[1], axis=1)
        with np.errstate(all="ignore"):
            # (numpy's matmul of bf16 gives f32: back to the inputs' type, as ONNX's MatMul)
            raw = np.matmul(q * root, np.swapaxes(k, -1, -2) * root).astype(dt)
            capped = raw
            if self.softcap > 0:
                capped = (self.softcap * np.tanh(raw / self.softcap)).astype(dt)
            logits = capped + bias
            work = logits.astype(self.softmax_precision.dtype) \
                if self.softmax_precision is not None and self.softmax_precision.dtype else logits
            probs = _masked_softmax(work)
            masked_rows = np.isneginf(np.max(bias, axis=-1, keepdims=True))
            probs = np.where(masked_rows, probs.dtype.type(0), probs).astype(dt)
            y = np.matmul(probs, v)
        debug = (raw, capped, logits, probs)[self.qk_matmul_output_mode]
        if three_d:
            y = np.swapaxes(y, 1, 2).reshape(y.shape[0], y.shape[2], -1)
        return [y.astype(dt), present_k, present_v,
                np.broadcast_to(debug, probs.shape).astype(dt)]

    def _bias(self, mask: np.ndarray | None, dt: np.dtype, q_len: int, total: int,
              offset: Any, nonpad: np.ndarray | None) -> np.ndarray:
        """The additive bias: 0 where a key may be attended, -inf where not, plus a float mask;
        broadcastable to (batch, heads, q_len, total)."""
        bias = np.zeros((q_len, total), dt)
        if mask is not None:
            if mask.shape[-1] < total:  # a short mask is padded with "not attended"
                pad = [(0, 0)] * (mask.ndim - 1) + [(0, total - mask.shape[-1])]
                mask = np.pad(mask, pad, constant_values=False if mask.dtype == np.bool_
                              else -np.inf)
            if mask.dtype == np.bool_:
                mask = np.where(mask, dt.type(0), dt.type(-np.inf))
            bias = bias + mask.astype(dt)
        # query i sits at absolute position i + offset; key j is allowed when
        # j <= i + offset (causal) and within the window around that position
        rel = np.arange(q_len).reshape(-1, 1) + offset - np.arange(total)  # (.., q_len, total)
        allowed = np.ones(np.shape(rel), bool)
        if self.is_causal:
            allowed &= rel >= 0
        if self.left_window_size >= 0:
            allowed &= rel <= self.left_window_size
        if self.right_window_size >= 0:
            allowed &= -rel <= self.right_window_size
        if nonpad is not None:
            n = np.asarray(nonpad, np.int64).reshape(-1, 1, 1, 1)
            allowed = allowed & (np.arange(total) < n)
        with np.errstate(all="ignore"):
            return bias + np.where(allowed, dt.type(0), dt.type(-np.inf))


def _split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """(batch, seq, heads * size) -> (batch, heads, seq, size)."""
    b, s, hidden = x.shape
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def _masked_softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; a row of -inf only (no key attended) gives zeros."""
    zero, one = x.dtype.type(0), x.dtype.type(1)  # every step in x's type (bf16, f16 too)
    top = np.max(x, axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), zero, top)
    e = np.exp(x - top)
    total = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(total == zero, one, total)


# -- factory ---------------------------------------------------------------------------------

def attention(query: Any, key: Any, value: Any, attn_mask: Any = None, past_key: Any = None,
              past_value: Any = None, nonpad_kv_seqlen: Any = None, name: str | None = None,
              **attrs: Any) -> Node:
    """ONNX Attention (netpass has no OpenVINO name for it); attributes as :class:`Attention`."""
    inputs = [to_output(query), to_output(key), to_output(value)]
    if attn_mask is not None:
        inputs.append(to_output(attn_mask))
    if (past_key is None) != (past_value is None):
        raise ValueError("attention: past_key and past_value go together")
    if past_key is not None:
        inputs += [to_output(past_key), to_output(past_value)]
    if nonpad_kv_seqlen is not None:
        inputs.append(to_output(nonpad_kv_seqlen, "i64"))
    return set_name(Attention(inputs, has_attn_mask=attn_mask is not None,
                              has_past=past_key is not None,
                              has_nonpad_kv_seqlen=nonpad_kv_seqlen is not None, **attrs), name)


# -- ONNX import ------------------------------------------------------------------------------

def _import_attention(ctx: Any, version: int) -> list[Output]:
    q, k, v = ctx.inputs[:3]
    mask, past_k, past_v = ctx.input(3), ctx.input(4), ctx.input(5)
    nonpad = ctx.input(6) if version >= 24 else None
    if (past_k is None) != (past_v is None):
        ctx.error("past_key and past_value must be given together")
    if nonpad is not None and past_k is not None:
        ctx.error("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    rank = q.partial_shape.rank
    if version >= 25 and rank.is_static and rank.get_length() == 4 and \
            (ctx.has_attr("q_num_heads") or ctx.has_attr("kv_num_heads")):
        ctx.error("q_num_heads and kv_num_heads must not be given for 4-D inputs")
    precision = ctx.attr("softmax_precision", 0)
    attrs = dict(is_causal=bool(ctx.attr("is_causal", 0)),
                 q_num_heads=ctx.attr("q_num_heads", 0), kv_num_heads=ctx.attr("kv_num_heads", 0),
                 scale=ctx.attr("scale", 0.0), softcap=ctx.attr("softcap", 0.0),
                 softmax_precision=onnx_element_type(precision, ctx.name) if precision else None,
                 qk_matmul_output_mode=ctx.attr("qk_matmul_output_mode", 0))
    if version >= 25:
        attrs.update(left_window_size=ctx.attr("left_window_size", -1),
                     right_window_size=ctx.attr("right_window_size", -1))
    node = attention(q, k, v, mask, past_k, past_v,
                     _as_i64(nonpad) if nonpad is not None else None, **attrs)
    return node.outputs()


def _as_i64(x: Output) -> Output:
    if x.element_type.name == "i64":
        return x
    from .elementwise import Convert
    return Convert([x], destination_type="i64").output(0)


for _version in (23, 24, 25):
    onnx_rule("Attention", since=_version)(
        lambda ctx, _v=_version: _import_attention(ctx, _v))


# -- ONNX export ------------------------------------------------------------------------------

@onnx_export(Attention, opset=24)
def _export_attention(node: Attention, ectx: Any) -> None:
    if node.left_window_size >= 0 or node.right_window_size >= 0:
        export_error(node, "window sizes need ONNX opset 25, above what netpass writes")
    names = ectx.inputs(node)
    opt = node._optional_inputs()
    ins = names[:3] + [""] * 4
    for key, slot in (("attn_mask", 3), ("past_key", 4), ("past_value", 5),
                      ("nonpad_kv_seqlen", 6)):
        if key in opt:
            ins[slot] = names[opt[key]]
    while ins and not ins[-1]:
        ins.pop()
    # outputs nothing reads stay unnamed (ONNX optional outputs)
    outs = [name if i == 0 or node.output(i).consumers() else ""
            for i, name in enumerate(ectx.outputs(node))]
    while not outs[-1]:
        outs.pop()
    attrs: dict[str, Any] = {"is_causal": int(node.is_causal),
                             "qk_matmul_output_mode": int(node.qk_matmul_output_mode)}
    if node.q_num_heads:
        attrs.update(q_num_heads=int(node.q_num_heads), kv_num_heads=int(node.kv_num_heads))
    if node.scale:
        attrs["scale"] = float(node.scale)
    if node.softcap:
        attrs["softcap"] = float(node.softcap)
    if node.softmax_precision is not None:
        from onnx import helper
        attrs["softmax_precision"] = int(helper.np_dtype_to_tensor_dtype(
            Type.of(node.softmax_precision).dtype))
    ectx.add_node("Attention", ins, outs, **attrs)


# -- OpenVINO ScaledDotProductAttention -------------------------------------------------------

class ScaledDotProductAttention(Node):
    """OpenVINO ScaledDotProductAttention-13. Inputs ``(query [N, ..., L, E], key [N, ..., S,
    E], value [N, ..., S, Ev][, attention_mask][, scale][, sink])``; the leading dims broadcast
    (numpy rules). Output ``[N, ..., L, Ev]``.

    ``attention_mask`` is boolean (True: attended) or of the query's type (added to the scaled
    scores); a scalar 0 stands for "no mask" where ``scale`` follows it. ``scale`` defaults to
    ``1 / sqrt(E)``. ``causal`` masks key j > query i (aligned at the top left, as torch's
    ``is_causal``) and then ignores ``attention_mask``. ``sink`` ([N, ..., L, 1]) joins the
    softmax as one more key with no value. A row with every key masked gives NaN, as the
    specification's softmax does."""

    type_name = "ScaledDotProductAttention"
    version = "opset13"
    ATTRS = {"causal": False}

    def infer_types(self) -> None:
        n = self.get_input_size()
        self.check(3 <= n <= 6, "expects 3 to 6 inputs (query, key, value[, attention_mask]"
                   "[, scale][, sink]), got {}", n)
        et = merged_input_type(self, range(3))
        self.check(et.is_dynamic or et.is_real, "query, key and value must be float tensors, "
                   "got {}", et)
        if n > 3:
            m = self.get_input_element_type(3)
            self.check(m.is_dynamic or m is boolean or m.merge(et) is not None,
                       "attention_mask must be boolean or of the query's type {}, got {}", et, m)
        if n > 4:
            scale = self.get_input_partial_shape(4)
            self.check(not scale.rank_is_static or all(d.compatible(1) for d in scale),
                       "scale must be a scalar, got {}", scale)
        q, k, v = (self.get_input_partial_shape(i) for i in range(3))
        if not (q.rank_is_static and k.rank_is_static and v.rank_is_static):
            self.set_output_type(0, et, PartialShape(None))
            return
        self.check(len(q) >= 3 and len(k) == len(q) and len(v) == len(q),
                   "query, key and value must have one rank of at least 3, got {}, {}, {}",
                   q, k, v)
        self.check(q[-1].compatible(k[-1]), "query {} and key {} differ in their last dim "
                   "(E)", q, k)
        self.check(k[-2].compatible(v[-2]), "key {} and value {} differ in their sequence "
                   "dim (S)", k, v)
        batch: PartialShape | None = PartialShape(list(q)[:-2])
        for other in (k, v):
            batch = batch.broadcast_merge(PartialShape(list(other)[:-2])) \
                if batch is not None else None
        self.check(batch is not None, "the leading dims of query {}, key {} and value {} do not "
                   "broadcast", q, k, v)
        assert batch is not None
        self.set_output_type(0, et, PartialShape(list(batch) + [q[-2], v[-1]]))

    def evaluate(self, inputs):
        q, k, v = inputs[:3]
        dt = q.dtype
        n = len(inputs)
        scale = np.asarray(inputs[4]).reshape(()).astype(dt) if n > 4 else \
            dt.type(1.0 / np.sqrt(q.shape[-1]))
        L, S = q.shape[-2], k.shape[-2]
        bias = np.zeros((L, S), dt)
        with np.errstate(all="ignore"):
            if self.causal:
                bias = np.triu(np.full((L, S), -np.inf, dt), k=1)
            elif n > 3:
                mask = inputs[3]
                bias = np.where(mask, dt.type(0), dt.type(-np.inf)) if mask.dtype == np.bool_ \
                    else bias + mask.astype(dt)
            scores = (np.matmul(q, np.swapaxes(k, -1, -2)).astype(dt) * scale + bias).astype(dt)
            if n > 5:
                sink = np.broadcast_to(inputs[5], scores.shape[:-1] + (1,)).astype(dt)
                scores = np.concatenate([scores, sink], axis=-1)
            top = np.max(scores, axis=-1, keepdims=True)
            e = np.exp(scores - top)
            probs = (e / np.sum(e, axis=-1, keepdims=True)).astype(dt)
            if n > 5:
                probs = probs[..., :-1]
            return [np.matmul(probs, v).astype(dt)]


def scaled_dot_product_attention(query: Any, key: Any, value: Any, attention_mask: Any = None,
                                 scale: Any = None, sink: Any = None, causal: bool = False,
                                 name: str | None = None) -> Node:
    """OpenVINO ScaledDotProductAttention-13 (see :class:`ScaledDotProductAttention`); a
    ``scale`` or ``sink`` without ``attention_mask`` puts a scalar 0 in the mask's place."""
    q = to_output(query)
    inputs = [q, to_output(key), to_output(value)]
    tail = [attention_mask, scale, sink]
    while tail and tail[-1] is None:
        tail.pop()
    for i, x in enumerate(tail):
        if x is None:
            x = np.zeros((), q.element_type.dtype or np.float32) if i == 0 else \
                np.array(1.0 / np.sqrt(q.partial_shape[-1].get_length()),
                         q.element_type.dtype or np.float32)
        inputs.append(to_output(x))
    return set_name(ScaledDotProductAttention(inputs, causal=bool(causal)), name)


@onnx_export(ScaledDotProductAttention, opset=24)
def _export_sdpa(node: ScaledDotProductAttention, ectx: Any) -> None:
    """As ONNX Attention on 4-D inputs ([batch, heads, seq, size]) with a constant scale."""
    n = node.get_input_size()
    q = node.get_input_partial_shape(0)
    if not q.rank_is_static or len(q) != 4:
        export_error(node, f"ONNX Attention needs 4-D query, key and value, got query {q}")
    if n > 5:
        export_error(node, "ONNX Attention has no sink input")
    names = ectx.inputs(node)
    attrs: dict[str, Any] = {"is_causal": int(node.causal)}
    if n > 4:
        scale = node.input_value(4).node
        if not isinstance(scale, Constant):
            export_error(node, "ONNX Attention needs a constant scale")
        attrs["scale"] = float(np.asarray(scale.value).reshape(()))
    ins = names[:3]
    if n > 3 and not node.causal:
        ins.append(names[3])
    ectx.add_node("Attention", ins, ectx.outputs(node)[:1], **attrs)
