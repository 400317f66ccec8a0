"""A decode step's cache appends taken by a bmm-style attention (kv_append through batch
views): the caches ``[b, h, n, d]`` read as ``[b * h, n, d]`` Reshapes for ``q @ k^T`` and
``p @ v``, the scores viewed ``[b, h, m, n]`` for the mask and back (Bloom's and XGLM's
exports), the view targets computed from shapes as those exports do (``size(0) * h`` and
``size(0) // h``). Against the reference evaluator run step by step."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64, randn_f32

import netpass
from netpass import Model, opset
from netpass.core.dimension import Dimension, Symbol
from netpass.generation import stateful_decoder
from netpass.runtime import compile_program
from netpass.runtime.kernels.decode import DECODE_ROWS
from netpass.testing import RUNTIME_DEVICE

H, D, E = 3, 8, 20


def _rel_l2(a, b) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _dim(x, i: int):
    return opset.unsqueeze(opset.gather(opset.shape_of(x), ints64(i), ints64(0)), ints64(0))


def _bmm_layer():
    """x [b, s, e] projected to q, k, v [b, s, h, d] (one MatMul, a Reshape and Gathers, as
    Bloom), each transposed to [b, h, s, d]; k and v appended to their caches; q and the
    caches reshaped to [b * h, ., d]; scores ``q @ k^T`` viewed [b, h, s, n] for the mask and
    back; softmax; ``@ v``; heads moved back."""
    rng = np.random.default_rng(5)
    batch, seq = Dimension.dynamic(Symbol("batch")), Dimension.dynamic(Symbol("seq"))
    x = opset.parameter([batch, seq, E], np.float32, name="x")
    mask = opset.parameter([batch, 1, seq, "total"], np.float32, name="mask")
    qkv = opset.reshape(opset.matmul(x, randn_f32(rng, E, 3 * H * D), False, False),
                        ints64([0, 0, H, 3, D]), True)
    bh = opset.multiply(_dim(x, 0), ints64([H]))
    heads = [opset.transpose(opset.gather(qkv, ints64(i), ints64(3)), ints64([0, 2, 1, 3]))
             for i in range(3)]
    caches, pasts, presents = [], [], []
    for name, new in (("key", heads[1]), ("value", heads[2])):
        past = opset.parameter([batch, H, "past", D], np.float32, name=f"past_key_values.0.{name}")
        grown = opset.concat([past, new], 2)
        pasts.append(past)
        caches.append(grown)
        presents.append(opset.result(grown, name=f"present.0.{name}"))
    flat = opset.concat([bh, ints64([-1]), ints64([D])], 0)
    q = opset.reshape(heads[0], flat, False)
    kt = opset.transpose(opset.reshape(caches[0], flat, False), ints64([0, 2, 1]))
    v = opset.reshape(caches[1], flat, False)
    scores = opset.multiply(opset.matmul(q, kt, False, False), np.float32(D ** -0.5))
    b = opset.divide(_dim(scores, 0), ints64([H]))
    viewed = opset.reshape(scores, opset.concat([b, ints64([H]), _dim(scores, 1), ints64([-1])], 0),
                           False)
    masked = opset.add(viewed, mask)
    back = opset.reshape(masked, opset.concat([bh, _dim(scores, 1), ints64([-1])], 0), False)
    att = opset.matmul(opset.softmax(back, -1), v, False, False)
    out = opset.reshape(att, opset.concat([b, ints64([H]), ints64([-1]), ints64([D])], 0), False)
    y = opset.transpose(out, ints64([0, 2, 1, 3]))
    model = Model([opset.result(y, name="y")] + presents, [x, mask] + pasts, "bmm_layer")
    return stateful_decoder(model, batch_input="x")  # (the caches' init: x's batch rows)


def _causal(b: int, s: int, total: int) -> np.ndarray:
    pos = np.arange(total - s, total)[:, None]
    m = np.where(np.arange(total)[None] <= pos, 0, -1e9).astype(np.float32)
    return np.broadcast_to(m, (b, 1, s, total)).copy()


@pytest.mark.parametrize("batch", [1, 2])
def test_bmm_attention_appends_decode_steps_to_the_cache(rng, batch):
    model = _bmm_layer()
    cm = compile_program(model, RUNTIME_DEVICE)
    att = next(n for n in cm.program.nodes if n.kind == "FusedAttention")
    assert att.subgraph.deps  # (the scores' batch views)
    appends = [n for n in cm.program.nodes if n.state_role == "append"]
    assert len(appends) == 2
    assert att.subgraph.appends == 2 and all(c.append_by is att for c in appends)
    req = cm.create_infer_request()
    ref_vars: dict = {}
    total = 0
    steps = [9] + [1] * 5 + [3] + [1] * 3  # a prompt (its kernel fills the caches), then steps
    for s in steps:
        total += s
        feeds = {"x": randn_f32(rng, batch, s, E), "mask": _causal(batch, s, total)}
        before = dict(req.stats)
        got = req.infer(feeds)["y"]
        want = netpass.reference.infer(model, feeds, variables=ref_vars)["y"]
        assert _rel_l2(got, want) <= 1e-5, (s, total)
        launches = req.stats["kernels_enqueued"] - before["kernels_enqueued"]
        if s <= DECODE_ROWS:
            # the projection, q's Gather, the attention and the output's Transpose (k's and
            # v's Gathers are views the attention reads; the appends' copies and the new rows'
            # Transposes were 4 more); over 3 rows q's [b, h, 3, d] heads, laid out
            # [b, 3, h, d], do not merge b and h: a copy
            assert launches == (4 if s == 1 else 5), (s, launches)
    assert req.stats["state_allocations"] == 2  # (each cache's buffer once: never copied)
    for state in req.query_state():
        np.testing.assert_allclose(state.state, ref_vars[state.name], rtol=1e-4, atol=1e-5)


def test_bmm_attention_appends_past_a_set_cache_and_into_a_regrown_buffer(rng):
    """Caches set from outside, then steps that fill the buffers' room and make them grow
    (the past copied once, the new rows still written by the decode kernel)."""
    model = _bmm_layer()
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    start = [randn_f32(rng, 2, H, 40, D), randn_f32(rng, 2, H, 40, D)]
    ref_vars = {}
    for state, value in zip(req.query_state(), start):
        state.state = value
        ref_vars[state.name] = value
    total = 40
    for _ in range(130):  # (PREALLOC_STEPS of room: the last steps reallocate)
        total += 1
        feeds = {"x": randn_f32(rng, 2, 1, E), "mask": _causal(2, 1, total)}
        got = req.infer(feeds)["y"]
        want = netpass.reference.infer(model, feeds, variables=ref_vars)["y"]
        assert _rel_l2(got, want) <= 1e-5, total
    assert req.stats["state_allocations"] > 2
