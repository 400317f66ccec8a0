"""onnxruntime's GroupQueryAttention (``com.microsoft``), as onnxruntime-genai's decoders use it:
one-node models with symbolic batch, sequence and cache dims, run by onnxruntime's CPU kernel
(the reference implementation) against netpass's reference evaluator (rel. L2 <= 1e-5) and its
runtime on ``RUNTIME_DEVICE`` (several shapes in one request, rel. L2 <= 1e-4), on random
non-zero data: first prompts (no past, a past of length 0, right-padded rows), decode steps
into a growing cache and into a max-length ("shared") buffer, a batch-1 later prompt, an
8-step decode loop feeding present back as past, grouped heads, packed QKV, rotary inside,
the softmax and mask attributes; then a 1-layer decoder of GroupQueryAttention, MatMulNBits,
SkipSimplifiedLayerNormalization and RotaryEmbedding over 8 decode steps; the refused forms.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper
from opcheck import fuzz_tests

import netpass
from netpass.errors import UnsupportedOpError
from netpass.testing import RUNTIME_DEVICE

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
REF_TOL, RUNTIME_TOL = 1e-5, 1e-4
RNG = np.random.default_rng(11)
# input slots of GroupQueryAttention, and each graph input's dims ("B", "S", "P", "T" symbolic)
SLOTS = ["q", "k", "v", "pk", "pv", "seqlens", "total", "cos", "sin", "position_ids", "bias",
         "sink", "k_scale", "v_scale", "q_norm", "k_norm", "query_seqlens"]
DIMS = {"q": ["B", "S", None], "k": ["B", "S", None], "v": ["B", "S", None],
        "pk": ["B", None, "P", None], "pv": ["B", None, "P", None], "seqlens": ["B"],
        "total": [], "bias": ["BB", None, "S", "T"], "position_ids": ["B", "S"]}
CONSTANTS = ("cos", "sin", "sink")  # initializers
OUTS = ["y", "present_key", "present_value"]


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def rel_l2(got: np.ndarray, want: np.ndarray) -> float:
    want64 = np.asarray(want, np.float64)
    return float(np.linalg.norm(np.asarray(got, np.float64) - want64)
                 / max(np.linalg.norm(want64), 1e-30))


def rotary_tables(rows: int, half: int) -> dict[str, np.ndarray]:
    angles = np.arange(rows)[:, None] * (0.7 ** np.arange(half))[None, :]
    return {"cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)}


def gqa_model(feeds: dict[str, np.ndarray], heads: int, kv_heads: int,
              outputs: list[str] = OUTS, **attrs: Any) -> onnx.ModelProto:
    """One GroupQueryAttention node reading the slots ``feeds`` names (cos/sin/sink as
    initializers, the rest graph inputs with symbolic dims)."""
    names = [n if n in feeds else "" for n in SLOTS]
    while not names[-1]:
        names.pop()
    inputs, inits = [], []
    for n in filter(None, names):
        if n in CONSTANTS:
            inits.append(numpy_helper.from_array(feeds[n], n))
            continue
        dims = [d if sym is None else sym for sym, d in zip(DIMS.get(n, []), feeds[n].shape)] \
            if n in DIMS else list(feeds[n].shape)
        inputs.append(helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(feeds[n].dtype), dims))
    node = helper.make_node("GroupQueryAttention", names, outputs, domain=MS, name="the_node",
                            num_heads=heads, kv_num_heads=kv_heads, **attrs)
    graph = helper.make_graph([node], "g", inputs,
                              [onnx.ValueInfoProto(name=o) for o in outputs if o], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(MS, 1)])
    proto.ir_version = 8
    return proto


def graph_feeds(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v for k, v in feeds.items() if k not in CONSTANTS}


def specified(name: str, x: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The part of output ``name`` the op defines, the rest zeroed: of ``output`` the rows of
    real tokens (a right-padded row's padding rows are unspecified, and onnxruntime's differ
    with softcap), of the caches the ``lengths`` (seqlens_k + 1) rows of each batch row."""
    x = np.array(x)
    for b, n in enumerate(lengths):
        if name in ("present_key", "present_value"):
            x[b, :, n:] = 0
        else:
            x[b, min(n, x.shape[1]):] = 0
    return x


def assert_close(got: dict, want: list[np.ndarray], names: list[str], tol: float,
                 where: str, lengths: np.ndarray) -> None:
    for name, w in zip(names, want):
        g = np.asarray(got[name])
        assert g.shape == w.shape, f"{where} {name}: shape {g.shape} != {w.shape}"
        g, w = specified(name, g, lengths), specified(name, w, lengths)
        assert rel_l2(g, w) <= tol, f"{where} {name}: rel. L2 {rel_l2(g, w):.2e}"


def check(proto: onnx.ModelProto, feed_list: list[dict[str, np.ndarray]],
          runtime: bool = True, whole: bool = False) -> None:
    """netpass's reference and runtime (one request over all of ``feed_list``) agree with
    onnxruntime on every feed: on what the op defines, or with ``whole`` on every element (what
    onnxruntime's CPU kernel gives where the op leaves it open: padding rows attending up to
    their row's last token, cache rows past it zeroed)."""
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in proto.graph.output]
    net = netpass.read_model(proto)
    req = netpass.compile_model(net, device=RUNTIME_DEVICE).create_infer_request() \
        if runtime else None
    for i, feeds in enumerate(feed_list):
        want = sess.run(names, feeds)
        lengths = feeds["seqlens"] + 1 if not whole else [1 << 30] * len(feeds["seqlens"])
        assert_close(netpass.reference.infer(net, feeds), want, names, REF_TOL,
                     f"reference, feed {i}", lengths)
        if req is not None:
            assert_close(req.infer(feeds), want, names, RUNTIME_TOL, f"runtime, feed {i}",
                         lengths)


def step_feeds(batch: int, seq: int, heads: int, kv_heads: int, head: int,
               lengths: list[int], past: int | None, packed: bool = False) -> dict:
    """Feeds of one step: ``lengths`` the tokens each row holds after it (seqlens_k + 1),
    ``past`` the past cache's length (None: no past inputs)."""
    feeds: dict[str, np.ndarray] = {}
    if packed:
        feeds["q"] = rand(batch, seq, (heads + 2 * kv_heads) * head)
    else:
        feeds.update(q=rand(batch, seq, heads * head), k=rand(batch, seq, kv_heads * head),
                     v=rand(batch, seq, kv_heads * head))
    if past is not None:
        feeds.update(pk=rand(batch, kv_heads, past, head), pv=rand(batch, kv_heads, past, head))
    feeds["seqlens"] = np.asarray(lengths, np.int32) - 1
    feeds["total"] = np.asarray(max(lengths), np.int32)
    return feeds


# (batch, seq, lengths after the step, past length) per form, at two shapes each
FORMS = {
    "prompt": [(2, 5, [5, 5], None), (1, 3, [3], None)],
    "prompt right-padded": [(3, 5, [5, 2, 4], None), (2, 4, [1, 4], None)],
    "prompt, past of length 0": [(2, 4, [4, 3], 0), (1, 6, [6], 0)],
    "prompt into a max-length buffer": [(2, 4, [4, 2], 9), (2, 3, [3, 3], 9)],
    "decode, growing cache": [(2, 1, [5, 3], 4), (3, 1, [7, 7, 2], 6)],
    "decode, max-length buffer": [(2, 1, [5, 3], 9), (3, 1, [9, 1, 6], 9)],
    "later prompt, batch 1": [(1, 3, [7], 4), (1, 2, [5], 8)],
}


@pytest.mark.parametrize("ratio", [1, 2, 4])
@pytest.mark.parametrize("form", list(FORMS))
def test_forms(form, ratio):
    kv_heads, head = 2, 8
    heads = kv_heads * ratio
    feed_list = [step_feeds(b, s, heads, kv_heads, head, lengths, past)
                 for b, s, lengths, past in FORMS[form]]
    check(gqa_model(feed_list[0], heads, kv_heads), feed_list, runtime=ratio == 2, whole=True)


@pytest.mark.parametrize("form", ["prompt right-padded", "decode, max-length buffer",
                                  "later prompt, batch 1"])
@pytest.mark.parametrize("packed,interleaved,half", [(False, 0, 8), (True, 1, 8), (False, 1, 8),
                                                     (True, 0, 16)])
def test_rotary_inside(form, packed, interleaved, half):
    """do_rotary: Q and K rotated at each row's positions (halves or interleaved pairs, all of a
    head of 32 or its first 16 features)."""
    heads, kv_heads, head = 4, 2, 32
    tables = rotary_tables(16, half)
    feed_list = [step_feeds(b, s, heads, kv_heads, head, lengths, past, packed) | tables
                 for b, s, lengths, past in FORMS[form]]
    proto = gqa_model(feed_list[0], heads, kv_heads, do_rotary=1, rotary_interleaved=interleaved)
    check(proto, [graph_feeds(f) for f in feed_list], runtime=not packed)


@pytest.mark.parametrize("form", ["prompt right-padded", "decode, growing cache",
                                  "decode, max-length buffer"])
@pytest.mark.parametrize("attrs,extra", [
    ({"local_window_size": 2}, ()), ({"local_window_size": 1, "softcap": 2.0}, ()),
    ({"softcap": 1.5, "scale": 0.3}, ()), ({"smooth_softmax": 1}, ()), ({}, ("sink",)),
    ({"softcap": 1.0}, ("bias",)), ({"causal": 0}, ()), ({"smooth_softmax": 1}, ("bias",))])
def test_attributes(form, attrs, extra):
    heads, kv_heads, head = 4, 2, 8
    feed_list = [step_feeds(b, s, heads, kv_heads, head, lengths, past)
                 for b, s, lengths, past in FORMS[form]]
    sink = rand(heads)
    for f in feed_list:
        if "sink" in extra:
            f["sink"] = sink
        if "bias" in extra:  # [B, heads, S, total] or broadcast over batch and heads
            b, s = f["q"].shape[:2]
            f["bias"] = rand(b if s > 1 else 1, 1 if s > 1 else heads, s, int(f["total"]))
    proto = gqa_model(feed_list[0], heads, kv_heads, **attrs)
    check(proto, [graph_feeds(f) for f in feed_list], runtime="bias" not in extra)


@pytest.mark.parametrize("shared", [False, True])
def test_decode_loop_feeds_present_back(shared):
    """A right-padded prompt, then 8 decode steps, present fed back as past (a cache that grows
    by one each step, or one of a fixed maximum length): netpass's reference and its runtime in
    one request over the steps, each step against onnxruntime on the same inputs."""
    heads, kv_heads, head, max_len = 4, 2, 16, 16
    tables = rotary_tables(max_len, head // 2)
    lengths = np.array([4, 2])
    feeds = step_feeds(2, 4, heads, kv_heads, head, list(lengths), max_len if shared else 0)
    proto = gqa_model(feeds | tables, heads, kv_heads, do_rotary=1)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    net = netpass.read_model(proto)
    req = netpass.compile_model(net, device=RUNTIME_DEVICE).create_infer_request()
    ref_feeds, rt_feeds = dict(feeds), dict(feeds)
    for step in range(9):
        want = sess.run(OUTS, ref_feeds)
        ref = netpass.reference.infer(net, ref_feeds)
        got = req.infer(rt_feeds)
        assert_close(ref, want, OUTS, REF_TOL, f"reference, step {step}", lengths)
        assert_close(got, want, OUTS, RUNTIME_TOL, f"runtime, step {step}", lengths)
        lengths = lengths + 1
        new = step_feeds(2, 1, heads, kv_heads, head, list(lengths), None)
        ref_feeds = new | {"pk": ref["present_key"], "pv": ref["present_value"]}
        rt_feeds = new | {"pk": got["present_key"], "pv": got["present_value"]}


# -- a 1-layer decoder ------------------------------------------------------------------------
D, HEADS, KV_HEADS, HEAD, FF, BLOCK = 64, 4, 2, 16, 96, 16


def _nbits(n: int, k: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """4-bit MatMulNBits weights [n, k] (packed low nibble first) and their attributes."""
    q = RNG.integers(0, 16, (n, k // BLOCK, BLOCK)).astype(np.uint8)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    scales = (RNG.random((n, k // BLOCK)) * 0.1 + 0.02).astype(np.float32)
    return {"B": packed, "scales": scales}, {"N": n, "K": k, "bits": 4, "block_size": BLOCK}


def decoder_model() -> onnx.ModelProto:
    """x -> SimplifiedLayerNormalization -> Q/K/V MatMulNBits -> RotaryEmbedding (Q, K) ->
    GroupQueryAttention -> o MatMulNBits -> SkipSimplifiedLayerNormalization (with x) ->
    MatMulNBits up, FastGelu, MatMulNBits down -> + the residual sum."""
    nodes, inits = [], {"g1": rand(D) * 0.2 + 1, "g2": rand(D) * 0.2 + 1} | rotary_tables(32, 8)

    def nbits(name: str, x: str, n: int, k: int) -> str:
        weights, attrs = _nbits(n, k)
        inits.update({f"{name}_{k_}": v for k_, v in weights.items()})
        nodes.append(helper.make_node("MatMulNBits", [x, f"{name}_B", f"{name}_scales"], [name],
                                      domain=MS, name=name, **attrs))
        return name

    nodes.append(helper.make_node("SimplifiedLayerNormalization", ["x", "g1"], ["n1"],
                                  epsilon=1e-5, axis=-1))
    q, k, v = (nbits(p, "n1", w, D) for p, w in (("q", HEADS * HEAD), ("k", KV_HEADS * HEAD),
                                                  ("v", KV_HEADS * HEAD)))
    for t, n in ((q, HEADS), (k, KV_HEADS)):
        nodes.append(helper.make_node("RotaryEmbedding", [t, "position_ids", "cos", "sin"],
                                      [t + "_rot"], domain=MS, num_heads=n))
    nodes.append(helper.make_node(
        "GroupQueryAttention", ["q_rot", "k_rot", "v", "past_key", "past_value", "seqlens_k",
                                "total_sequence_length"], ["attn", "present_key", "present_value"],
        domain=MS, num_heads=HEADS, kv_num_heads=KV_HEADS))
    o = nbits("o", "attn", D, HEADS * HEAD)
    nodes.append(helper.make_node("SkipSimplifiedLayerNormalization", [o, "x", "g2"],
                                  ["n2", "", "", "resid"], domain=MS, epsilon=1e-5))
    up = nbits("up", "n2", FF, D)
    nodes.append(helper.make_node("FastGelu", [up], ["act"], domain=MS))
    down = nbits("down", "act", D, FF)
    nodes.append(helper.make_node("Add", [down, "resid"], ["y"]))
    f32, i32, i64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT32, onnx.TensorProto.INT64
    inputs = [helper.make_tensor_value_info("x", f32, ["B", "S", D]),
              helper.make_tensor_value_info("position_ids", i64, ["B", "S"]),
              helper.make_tensor_value_info("past_key", f32, ["B", KV_HEADS, "P", HEAD]),
              helper.make_tensor_value_info("past_value", f32, ["B", KV_HEADS, "P", HEAD]),
              helper.make_tensor_value_info("seqlens_k", i32, ["B"]),
              helper.make_tensor_value_info("total_sequence_length", i32, [])]
    graph = helper.make_graph(nodes, "decoder", inputs,
                              [onnx.ValueInfoProto(name=n) for n in ("y", "present_key",
                                                                     "present_value")],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(MS, 1)])
    proto.ir_version = 8
    return proto


def test_one_layer_decoder_over_8_decode_steps():
    """A prompt of 3 tokens (the second row right-padded to 2), then 7 decode steps, each
    step's present fed back: netpass's runtime in one request against onnxruntime, every
    output of every step."""
    proto = decoder_model()
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    req = netpass.compile_model(netpass.read_model(proto),
                                device=RUNTIME_DEVICE).create_infer_request()
    names = ["y", "present_key", "present_value"]
    lengths, seq = np.array([3, 2]), 3
    past = {"past_key": np.zeros((2, KV_HEADS, 0, HEAD), np.float32),
            "past_value": np.zeros((2, KV_HEADS, 0, HEAD), np.float32)}
    for step in range(8):
        start = lengths - seq if step else np.zeros(2, np.int64)
        feeds = {"x": rand(2, seq, D),
                 "position_ids": (start[:, None] + np.arange(seq)).astype(np.int64),
                 "seqlens_k": (lengths - 1).astype(np.int32),
                 "total_sequence_length": np.asarray(lengths.max(), np.int32)} | past
        want = sess.run(names, feeds)
        assert_close(req.infer(feeds), want, names, RUNTIME_TOL, f"step {step}", lengths)
        want = dict(zip(names, want))
        past = {"past_key": want["present_key"], "past_value": want["present_value"]}
        lengths, seq = lengths + 1, 1


# -- refusals ---------------------------------------------------------------------------------
def _base(**extra: np.ndarray) -> dict[str, np.ndarray]:
    return step_feeds(1, 1, 2, 1, 8, [3], 2) | extra


@pytest.mark.parametrize("feeds,attrs,outputs,words", [
    (_base(position_ids=np.zeros((1, 1), np.int64)), {}, OUTS, ("position_ids",)),
    (_base(k_scale=np.ones(1, np.float32), v_scale=np.ones(1, np.float32)), {}, OUTS,
     ("k_scale", "quantized")),
    (_base(query_seqlens=np.ones(1, np.int32)), {}, OUTS, ("query_seqlens",)),
    (_base(), {"sliding_window_cache": 1}, OUTS, ("sliding_window_cache",)),
    (_base(), {"qk_output": 1}, OUTS + ["qk"], ("qk",)),
    (_base(), {"k_quant_type": "PER_TENSOR"}, OUTS, ("k_quant_type",)),
    (_base(pk=np.zeros((1, 1, 2, 8), np.uint8), pv=np.zeros((1, 1, 2, 8), np.uint8)), {},
     OUTS, ("past_key", "quantized")),
    (_base(), {"causal": 0, "local_window_size": 2}, OUTS, ("local_window_size", "causal")),
    (step_feeds(1, 1, 3, 2, 8, [3], 2), {}, OUTS, ("num_heads",)),
    (_base(cos=np.ones((4, 8), np.float32), sin=np.ones((4, 8), np.float32)),
     {"do_rotary": 1}, OUTS, ("cos_cache",)),
])
def test_refused_forms_name_node_op_and_input(feeds, attrs, outputs, words):
    heads = 3 if feeds["q"].shape[-1] == 24 else 2
    kv_heads = 2 if heads == 3 else 1
    proto = gqa_model(feeds, heads, kv_heads, outputs=outputs, **attrs)
    with pytest.raises(UnsupportedOpError) as info:
        netpass.read_model(proto)
    text = str(info.value)
    for w in ("the_node", "GroupQueryAttention") + words:
        assert w in text, text


# -- fuzz -------------------------------------------------------------------------------------
def _fuzz_gqa(data: Any, runtime: bool) -> None:
    """One drawn GroupQueryAttention step (heads ratio, head size, packed, form, per-row lengths,
    rotary, window, softcap, smooth softmax, sink): netpass's reference (and runtime) against
    onnxruntime."""
    kv_heads = data.draw(st.integers(1, 3))
    heads = kv_heads * data.draw(st.sampled_from([1, 2, 4]))
    head = data.draw(st.sampled_from([8, 16, 32]))
    batch = data.draw(st.integers(1, 3))
    form = data.draw(st.sampled_from(["prompt", "grow", "max", "later"]))
    if form == "later":
        batch = 1
    if form == "prompt":
        seq = data.draw(st.integers(1, 6))
        lengths = [data.draw(st.integers(1, seq)) for _ in range(batch)]
        lengths[0] = seq
        past: int | None = data.draw(st.sampled_from([None, 0, seq + 3]))
    else:
        seq = data.draw(st.integers(2, 4)) if form == "later" else 1
        lengths = [data.draw(st.integers(seq, 9)) for _ in range(batch)]
        past = max(lengths) - seq if form != "max" else 9
    feeds = step_feeds(batch, seq, heads, kv_heads, head, lengths, past,
                       packed=data.draw(st.booleans()))
    attrs: dict[str, Any] = {}
    if head >= 16 and data.draw(st.booleans()):
        feeds |= rotary_tables(16, data.draw(st.sampled_from([8, head // 2])))
        attrs.update(do_rotary=1, rotary_interleaved=int(data.draw(st.booleans())))
    window = data.draw(st.sampled_from([-1, -1, 1, 3]))
    if window > 0:
        attrs["local_window_size"] = window
    if data.draw(st.booleans()):
        attrs["softcap"] = data.draw(st.sampled_from([0.5, 3.0]))
    sink = data.draw(st.sampled_from(["none", "smooth", "head_sink"]))
    if sink == "smooth":
        attrs["smooth_softmax"] = 1
    elif sink == "head_sink":
        feeds["sink"] = rand(heads)
    proto = gqa_model(feeds, heads, kv_heads, **attrs)
    check(proto, [graph_feeds(feeds)], runtime=runtime)


test_fuzz_gqa, test_fuzz_gqa_more = fuzz_tests(
    lambda data: _fuzz_gqa(data, runtime=False), 30, 500)


@pytest.mark.slow
@settings(derandomize=True, max_examples=150, deadline=None)
@given(st.data())
def test_fuzz_gqa_runtime(data):
    _fuzz_gqa(data, runtime=True)
