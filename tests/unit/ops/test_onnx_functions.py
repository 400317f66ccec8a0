"""Ops without an import rule that ONNX defines as functions are expanded into their function
bodies: LinearAttention (every update rule, GQA, with and without a past state),
CausalConvWithState (bias, past state, fused SiLU, an omitted optional input),
RotaryEmbedding (3-D and 4-D input, interleaved, partial rotation, no position ids) and
FlexAttention from the ``ai.onnx.preview`` domain with a score_mod sub-graph; against onnx's
reference evaluator on random data (onnxruntime lacks opset 27), rtol 1e-4, atol 1e-5; one
case through the runtime. An op with neither a rule nor a function is still refused.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from opcheck import assert_close, expected

import netpass
from netpass.errors import UnsupportedOpError
from netpass.testing import RUNTIME_DEVICE

RNG = np.random.default_rng(27)
F = TensorProto.FLOAT
RTOL, ATOL = 1e-4, 1e-5


def one_op(op, feeds, n_out, opset=27, domain="", imports=(), **attrs):
    names = [k if v is not None else "" for k, v in feeds.items()]
    inputs = [helper.make_tensor_value_info(k, F if v.dtype == np.float32 else TensorProto.INT64,
                                            v.shape) for k, v in feeds.items() if v is not None]
    outs = [helper.make_tensor_value_info(f"y{i}", F, None) for i in range(n_out)]
    node = helper.make_node(op, names, [o.name for o in outs], domain=domain, **attrs)
    graph = helper.make_graph([node], "g", inputs, outs)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    *imports])
    proto.ir_version = 10
    return proto


def check(proto, feeds):
    feeds = {k: v for k, v in feeds.items() if v is not None}
    m = netpass.read_model(proto)
    got = netpass.reference.infer(m, feeds)
    for vo, ref in zip(proto.graph.output, expected(proto, feeds, "reference")):
        assert_close(got[vo.name], ref, RTOL, ATOL, vo.name)
    return m


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize("heads,past", [((2, 2), False), ((4, 2), True), ((4, 1), True)])
def test_linear_attention(rule, heads, past):
    hq, hkv = heads
    b, t, dk, dv = 2, 3, 4, 5
    feeds = {"q": rand(b, t, hq * dk), "k": rand(b, t, hkv * dk) * 0.5,
             "v": rand(b, t, hkv * dv),
             "past": rand(b, hkv, dk, dv) if past else None,
             "decay": -np.abs(rand(b, t, hkv)) if "gated" in rule else None,
             "beta": 1 / (1 + np.exp(-rand(b, t, hkv))) if "delta" in rule else None}
    proto = one_op("LinearAttention", feeds, 2, q_num_heads=hq, kv_num_heads=hkv,
                   update_rule=rule)
    m = check(proto, feeds)
    assert "LinearAttention" not in [n.type_name for n in m.get_ordered_ops()]


@pytest.mark.parametrize("bias,past,activation", [(False, False, "none"), (True, True, "silu"),
                                                  (True, False, "swish"), (False, True, "none")])
def test_causal_conv_with_state(bias, past, activation):
    b, c, length, k = 2, 3, 6, 4
    feeds = {"x": rand(b, c, length), "w": rand(c, 1, k), "bias": rand(c) if bias else None,
             "past": rand(b, c, k - 1) if past else None}
    check(one_op("CausalConvWithState", feeds, 2, activation=activation), feeds)


def test_causal_conv_through_the_runtime():
    feeds = {"x": rand(1, 4, 7), "w": rand(4, 1, 3), "bias": rand(4), "past": rand(1, 4, 2)}
    m = check(one_op("CausalConvWithState", feeds, 2, activation="silu"), feeds)
    req = netpass.compile_model(m, device=RUNTIME_DEVICE).create_infer_request()
    got, ref = req.infer(feeds), netpass.reference.infer(m, feeds)
    for name in ref:
        assert_close(got[name], ref[name], RTOL, ATOL, name)


@pytest.mark.parametrize("rank,interleaved,rot_dim,with_ids", [
    (4, 0, 0, True), (4, 1, 0, True), (3, 0, 4, True), (3, 1, 0, False), (4, 0, 4, False)])
def test_rotary_embedding(rank, interleaved, rot_dim, with_ids):
    b, s, h, d = 2, 3, 2, 8
    x = rand(b, h, s, d) if rank == 4 else rand(b, s, h * d)
    half = (rot_dim or d) // 2
    rows = 5 if with_ids else s
    feeds = {"x": x, "cos": rand(*((rows, half) if with_ids else (b, s, half))),
             "sin": rand(*((rows, half) if with_ids else (b, s, half))),
             "ids": RNG.integers(0, rows, (b, s)).astype(np.int64) if with_ids else None}
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rot_dim}
    if rank == 3:
        attrs["num_heads"] = h
    check(one_op("RotaryEmbedding", feeds, 1, opset=23, **attrs), feeds)


def test_flex_attention_from_the_preview_domain():
    """A domain netpass has no rules for: the schema's function expands it, its score_mod
    sub-graph (a causal mask) with it."""
    feeds = {"q": rand(1, 2, 3, 4), "k": rand(1, 2, 5, 4), "v": rand(1, 2, 5, 4)}
    score_mod = helper.make_graph(
        [helper.make_node("Constant", [], ["bias"],
                          value=helper.make_tensor("b", F, [1], [0.5])),
         helper.make_node("Add", ["s", "bias"], ["out"])],
        "score_mod", [helper.make_tensor_value_info("s", F, None)],
        [helper.make_tensor_value_info("out", F, None)])
    proto = one_op("FlexAttention", feeds, 1, opset=24, domain="ai.onnx.preview",
                   imports=[helper.make_opsetid("ai.onnx.preview", 1)], score_mod=score_mod)
    check(proto, feeds)


def test_op_without_rule_or_function_is_refused():
    feeds = {"x": rand(1, 4, 4)}
    with pytest.raises(UnsupportedOpError, match="GlobalLpPool"):
        netpass.read_model(one_op("GlobalLpPool", feeds, 1, opset=22))
