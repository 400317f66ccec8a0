"""Small models the runtime's tests and benchmark run: a GPT-style decoder (full recompute, or
one step with past keys/values) built with ``netpass.opset``."""
from __future__ import annotations

import numpy as np

from ..core.model import Model


def _ln(x, d: int, rng):
    from .. import opset
    y = opset.mvn(x, np.array([-1], dtype=np.int64), True, 1e-5, "inside_sqrt")
    g = (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    b = (0.1 * rng.standard_normal(d)).astype(np.float32)
    return opset.add(opset.multiply(y, g), b)


def _dense(x, din: int, dout: int, rng):
    from .. import opset
    w = (rng.standard_normal((din, dout)) / np.sqrt(din)).astype(np.float32)
    b = (0.02 * rng.standard_normal(dout)).astype(np.float32)
    return opset.add(opset.matmul(x, w, False, False), b)


def gpt_decoder(vocab: int = 2048, layers: int = 4, d: int = 256, heads: int = 4,
                max_seq: int = 256, past: bool = False, seed: int = 0) -> Model:
    """GPT-2-style decoder. Inputs ``ids`` [1, S] (i64) and, with ``past``, ``past_k{i}`` /
    ``past_v{i}`` [1, heads, P, d/heads]; outputs ``logits`` [1, S, vocab] (and ``present_*``).
    Full recompute applies a causal mask sliced from a constant by the runtime sequence length."""
    from .. import opset
    rng = np.random.default_rng(seed)
    hd = d // heads
    i64 = lambda v: np.array(v, dtype=np.int64)  # noqa: E731
    ids = opset.parameter([1, -1], np.int64, name="ids")
    params = [ids]
    wte = (0.5 * rng.standard_normal((vocab, d))).astype(np.float32)
    wpe = (0.1 * rng.standard_normal((max_seq, d))).astype(np.float32)
    seq = opset.gather(opset.shape_of(ids), i64([1]), i64(0))
    if past:
        pk0 = opset.parameter([1, heads, -1, hd], np.float32, name="past_k0")
        start = opset.gather(opset.shape_of(pk0), i64([2]), i64(0))
        stop = opset.add(start, seq)
        pos = opset.range(opset.squeeze(start, i64([0])), opset.squeeze(stop, i64([0])), i64(1),
                          np.int64)
    else:
        pos = opset.range(i64(0), opset.squeeze(seq, i64([0])), i64(1), np.int64)
    x = opset.add(opset.gather(wte, ids, i64(0)),
                  opset.unsqueeze(opset.gather(wpe, pos, i64(0)), i64([0])))
    mask = None
    if not past:
        tri = np.triu(np.full((max_seq, max_seq), -1e9, dtype=np.float32), 1)
        stops = opset.concat([seq, seq], 0)
        mask = opset.slice(tri, i64([0, 0]), stops, i64([1, 1]), i64([0, 1]))
    outputs = []
    for layer in range(layers):
        h = _ln(x, d, rng)
        qkv = _dense(h, d, 3 * d, rng)
        q0, k0, v0 = opset.split(qkv, i64(-1), 3).outputs()

        def heads_first(t):
            return opset.transpose(opset.reshape(t, i64([0, 0, heads, hd]), True),
                                   i64([0, 2, 1, 3]))

        q, k, v = heads_first(q0), heads_first(k0), heads_first(v0)
        if past:
            pk = pk0 if layer == 0 else opset.parameter([1, heads, -1, hd], np.float32,
                                                        name=f"past_k{layer}")
            pv = opset.parameter([1, heads, -1, hd], np.float32, name=f"past_v{layer}")
            params += [pk, pv]
            k = opset.concat([pk, k], 2)
            v = opset.concat([pv, v], 2)
            outputs += [opset.result(k, name=f"present_k{layer}"),
                        opset.result(v, name=f"present_v{layer}")]
        att = opset.multiply(opset.matmul(q, k, False, True), np.float32(1.0 / np.sqrt(hd)))
        if mask is not None:
            att = opset.add(att, mask)
        att = opset.softmax(att, -1)
        o = opset.matmul(att, v, False, False)
        o = opset.reshape(opset.transpose(o, i64([0, 2, 1, 3])), i64([0, 0, d]), True)
        x = opset.add(x, _dense(o, d, d, rng))
        h = _ln(x, d, rng)
        h = opset.gelu(_dense(h, d, 4 * d, rng), "tanh")
        x = opset.add(x, _dense(h, 4 * d, d, rng))
    x = _ln(x, d, rng)
    wout = (rng.standard_normal((d, vocab)) / np.sqrt(d)).astype(np.float32)
    logits = opset.result(opset.matmul(x, wout, False, False), name="logits")
    return Model([logits] + outputs, params, "gpt_decoder_past" if past else "gpt_decoder")
