"""ONNX Attention (``ops/attention.py``) on the flash kernel (``kernels.flash``), its plan
shared with the fused attention's (:mod:`.attention`)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...ops.attention import Attention
from ..impls import Impl, Params, broadcast_strides, cdiv, contiguous_strides
from ..kernels import flash, mma_plan
from ..kernels.common import Stage, flit
from .attention import F32, causal_bound, dead_keys, flash_impl, key_chunk
from .base import OpKind, table


def _heads_view(shape: Sequence[int], heads: int) -> tuple[tuple, list]:
    """A 3-D ONNX Attention operand [b, s, heads * size] as [b, heads, s, size]: (shape,
    strides)."""
    b, s, hidden = shape
    width = hidden // heads
    return (b, heads, s, width), [s * hidden, width, hidden, 1]


def onnx_attention_impl(p: Params, key) -> Impl | None:
    """ONNX Attention (``ops/attention.py``) on the flash kernel where the device has tensor
    cores: 3-D or 4-D q, k, v, grouped-query heads, a boolean or additive mask as long as the
    keys (broadcast over batch, heads and queries), ``is_causal``, ``scale`` and ``softcap``;
    a row whose keys are all masked gives zeros. Past caches, padded lengths, windows, a
    softmax precision other than float32, and used ``present`` / QK outputs run on the host."""
    a = p.attrs
    kind = getattr(p.engine, "mma", "") if p.engine is not None else ""
    split = 1 if p.precision == "tf32" else mma_plan.F32_SPLIT
    sp = a.get("softmax_precision")
    if not kind or split is None or a.get("has_past") or a.get("has_nonpad_kv_seqlen") \
            or a.get("left_window_size", -1) != -1 or a.get("right_window_size", -1) != -1 \
            or (sp is not None and np.dtype(getattr(sp, "dtype", sp)) != F32) \
            or any(np.dtype(d) != F32 for d in p.in_dtypes[:3]) \
            or (p.node is not None and any(p.node.users[1:])):
        return None
    q, k, v = (tuple(s) for s in p.in_shapes[:3])
    if len(q) == 4:
        qs, ks, vs = (contiguous_strides(s) for s in (q, k, v))
    elif len(q) == 3:
        hq, hkv = int(a.get("q_num_heads", 0)), int(a.get("kv_num_heads", 0))
        if hq <= 0 or hkv <= 0:
            return None
        (q, qs), (k, ks), (v, vs) = _heads_view(q, hq), _heads_view(k, hkv), _heads_view(v, hkv)
    else:
        return None
    B, Hq, M, D = q
    Hkv, N, DV = k[1], k[2], v[3]
    if Hkv == 0 or Hq % Hkv or D > flash.MAX_HEAD or DV > flash.MAX_HEAD or (split == 3 and D > 64):
        return None
    out = p.out_shapes[0]
    os_ = contiguous_strides(out)
    # [b, m, heads * dv] as [b, heads, m, dv]
    ost = os_ if len(out) == 4 else [os_[0], DV, os_[1], 1]
    scale = float(a.get("scale") or 0.0) or 1.0 / np.sqrt(D)
    stages = [Stage(f"({{0}} * {flit(scale)})", [("x", None)], "float")]
    cap = float(a.get("softcap") or 0.0)
    if cap > 0:
        stages.append(Stage(f"({flit(cap)} * tanh({{0}} / {flit(cap)}))", [("x", None)], "float"))
    spec_mask, side_dtypes = [], []
    if a.get("has_attn_mask"):
        ms, mdt = tuple(p.in_shapes[3]), np.dtype(p.in_dtypes[3])
        if not ms or ms[-1] != N or len(ms) > 4 or mdt not in (F32, np.dtype(np.bool_)):
            return None
        expr = "({1} ? {0} : -INFINITY)" if mdt == np.bool_ else "({0} + {1})"
        stages.append(Stage(expr, [("x", None), ("in", 0)], "float"))
        side_dtypes = [mdt]
        mst = (p.in_strides or [None] * 4)[3]
        st = broadcast_strides(ms, (B, Hq, M, N), mst)
        spec_mask = [("i", 3)] + list(st)
    if M == 0 or B * Hq == 0:
        return Impl(key, [])
    vec = all(x % 4 == 0 for x in list(qs[:3]) + list(ks[:3]) + list(vs[:3]) + [D, DV])
    cfg = flash.config_for(D, split)
    causal = bool(a.get("is_causal"))
    groups = cdiv(M, cfg.bq) * B * Hq
    chunk = key_chunk(p, groups, cdiv(N, cfg.bkv), split)
    bound, past = (None, None) if causal or not side_dtypes else causal_bound(p, 3)
    shared = None if past is None else (0, past)
    skip = dead_keys(p, 0 if side_dtypes else None, side_dtypes[0] if side_dtypes else F32, groups,
                 chunk, bound is not None)

    # (the mask read at build-time key offsets where its keys are contiguous)
    unit_keys = bool(spec_mask) and spec_mask[-1] == 1

    def src_of(kv_split: bool):
        return p.cached(("flash", cfg, D, DV, split, kind, vec, causal, scale, cap,
                         tuple(side_dtypes), skip, kv_split, bound is not None, unit_keys, shared),
                        lambda: flash.flash_attention(cfg, D, DV, split, kind == "ptx", vec,
                                                      stages, side_dtypes, causal, "zero",
                                                      mma_plan.HI_ROUND, skip, False, kv_split,
                                                      bound is not None, unit_keys, shared))
    spec = [("i", 0), ("i", 1), ("i", 2), ("o", 0), M, N, D, DV, Hq, Hq // Hkv,
            0 if bound is None else bound,
            qs[0], qs[1], qs[2], qs[3], ks[0], ks[1], ks[2], ks[3], vs[0], vs[1], vs[2], vs[3],
            ost[0], ost[1], ost[2], ost[3]] + spec_mask
    return Impl(key, *flash_impl(src_of, cfg, M, N, DV, B * Hq, chunk, spec))


ROWS = table(OpKind(Attention, impl=onnx_attention_impl))
