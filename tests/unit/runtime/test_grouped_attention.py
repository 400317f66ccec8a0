"""Grouped-query attention (``netpass.runtime.attention``): the keys and values repeated per
query head as transformers' ``repeat_kv`` writes it (``Unsqueeze -> Broadcast -> Reshape``)
are read where they are, each key head by its group of query heads, on the decode kernel (one
query row), the row kernel and the flash kernel (tensor cores emulated on PoCL), against the
reference on random data (rel. L2 <= 1e-5; flash 3xTF32 <= 4e-6, TF32 <= 4e-3)."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64, randn_f32, rel_l2_unfloored, repeat_kv

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.runtime.device import Engine, select_device
from netpass.runtime.kinds import attention as attention_kind
from netpass.testing import RUNTIME_DEVICE

HEADS, KV_HEADS, D = 4, 2, 16


def _heads(x, h):
    """[1, s, h * D] -> [1, h, s, D]."""
    return opset.transpose(opset.reshape(x, ints64([0, 0, h, D]), True), ints64([0, 2, 1, 3]))


def _keys_swapped_through_3d(k):
    """The repeated keys' last two axes swapped as the dynamo exporter writes it for a batched
    matmul: to [heads, s, D] (the target read off the keys' shape), Transpose [0, 2, 1], back
    to [1, heads, D, s]."""
    seq = opset.gather(opset.shape_of(k), ints64([2]), ints64(0))
    flat = opset.reshape(k, opset.concat([ints64([HEADS]), seq, ints64([D])], 0), False)
    return opset.reshape(opset.transpose(flat, ints64([0, 2, 1])), ints64([1, HEADS, D, -1]), False)


def _model(causal: bool = True, keys: str = "transposed") -> Model:
    """``keys``: the repeated keys transposed in 4-D ("transposed") or by way of 3-D ("bmm")."""
    rng = np.random.default_rng(5)
    x = opset.parameter([1, -1, 32], np.float32, name="x")
    q = _heads(opset.matmul(x, randn_f32(rng, 32, HEADS * D), False, False), HEADS)
    k = repeat_kv(_heads(opset.matmul(x, randn_f32(rng, 32, KV_HEADS * D), False, False), KV_HEADS),
                  KV_HEADS, HEADS // KV_HEADS, D)
    v = repeat_kv(_heads(opset.matmul(x, randn_f32(rng, 32, KV_HEADS * D), False, False), KV_HEADS),
                  KV_HEADS, HEADS // KV_HEADS, D)
    kt = opset.transpose(k, ints64([0, 1, 3, 2])) if keys == "transposed" else \
        _keys_swapped_through_3d(k)
    scores = opset.multiply(opset.matmul(q, kt, False, False), np.float32(D ** -0.5))
    if causal:
        seq = opset.gather(opset.shape_of(x), ints64([1]), ints64(0))
        tri = np.triu(np.full((96, 96), -1e9, np.float32), 1)
        scores = opset.add(scores, opset.slice(tri, ints64([0, 0]), opset.concat([seq, seq], 0),
                                               ints64([1, 1]), ints64([0, 1])))
    att = opset.matmul(opset.softmax(scores, -1), v, False, False)
    y = opset.reshape(opset.transpose(att, ints64([0, 2, 1, 3])), ints64([0, 0, -1]), True)
    return Model([opset.result(y, name="y")], [x])


@pytest.mark.parametrize("keys", ["transposed", "bmm"])
def test_the_repeat_is_read_where_it_is(keys):
    nodes = Program.from_model(_model(keys=keys)).nodes
    att = [n for n in nodes if n.kind == "FusedAttention"]
    assert len(att) == 1 and att[0].subgraph.group == HEADS // KV_HEADS
    assert not any(n.kind in ("Broadcast", "Unsqueeze") for n in nodes)
    # (nor the Broadcasts' target shapes: drop_unread takes what nothing reads any more)
    assert all(n.is_output or n.is_parameter or any(n.users) for n in nodes)


@pytest.mark.parametrize("keys", ["transposed", "bmm"])
@pytest.mark.parametrize("causal", [True, False])
def test_decode_and_row_kernels(causal, keys, rng):
    model = _model(causal, keys)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for s in (1, 6, 13, 1):
        feeds = {"x": randn_f32(rng, 1, s, 32)}
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-5
    assert req.stats["host_fallbacks"] == 0


@pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="emulated tensor cores on PoCL")
@pytest.mark.parametrize("precision,tol", [("f32", 4e-6), ("tf32", 4e-3)])
def test_flash_kernel(precision, tol, monkeypatch, rng):
    eng = Engine.get(select_device("CPU"))
    monkeypatch.setattr(eng, "mma", "emulated")
    monkeypatch.setattr(attention_kind, "FLASH_MIN_M", 4)
    model = _model()
    req = compile_program(model, RUNTIME_DEVICE,
                          {"INFERENCE_PRECISION_HINT": precision}).create_infer_request()
    for s in (37, 20):
        feeds = {"x": randn_f32(rng, 1, s, 32)}
        assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= tol
    assert any("flash_attention(" in key[2] for key in req.network.kernel_objects)
