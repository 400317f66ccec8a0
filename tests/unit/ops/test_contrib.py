"""onnxruntime's contrib ops (``com.microsoft``, and SimplifiedLayerNormalization and the
pre-17 LayerNormalization ORT registers in the default domain): one-node models with symbolic
batch/sequence dims, run by onnxruntime (the reference implementation) at two or three input
shapes, against netpass's reference evaluator (rel. L2 <= 1e-5) and its runtime on
``RUNTIME_DEVICE`` (the shapes in one request, rel. L2 <= 1e-4); every attribute and optional
input/output form netpass reads, and the forms it refuses (a ``netpass.errors`` error naming the
node and op).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import strategies as st
from onnx import helper, numpy_helper
from opcheck import fuzz_tests

import netpass
from netpass.errors import NetpassError, UnsupportedOpError
from netpass.testing import RUNTIME_DEVICE

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
REF_TOL, RUNTIME_TOL = 1e-5, 1e-4
RNG = np.random.default_rng(7)
# (batch, seq) pairs every case runs at: batch > 1, odd sizes, a length-1 sequence
SIZES = [(2, 5), (3, 1), (1, 7)]


def rand(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def rel_l2(got: np.ndarray, want: np.ndarray) -> float:
    want64 = np.asarray(want, np.float64)
    diff = np.linalg.norm(np.asarray(got, np.float64) - want64)
    return float(diff / max(np.linalg.norm(want64), 1e-30))


def model(op: str, inputs: dict[str, tuple], n_out: int = 1, domain: str = MS,
          initializers: dict[str, np.ndarray] | None = None, order: list[str] | None = None,
          opset: int = 17, outputs: list[str] | None = None, **attrs: Any) -> onnx.ModelProto:
    """One node reading ``inputs`` (name -> (numpy dtype, dims with "B"/"S"/"T" symbolic)) and
    ``initializers``, in ``order`` ("" for an omitted optional input), writing ``outputs``
    (default y0..y{n_out-1}; "" for one not asked for)."""
    initializers = initializers or {}
    vis = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(np.dtype(t)), d)
           for k, (t, d) in inputs.items()]
    outs = outputs if outputs is not None else [f"y{i}" for i in range(n_out)]
    names = order if order is not None else list(inputs) + list(initializers)
    node = helper.make_node(op, names, outs, domain=domain, name="the_node", **attrs)
    graph = helper.make_graph([node], "g", vis, [onnx.ValueInfoProto(name=o) for o in outs if o],
                              [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(MS, 1)])
    proto.ir_version = 8
    return proto


def check(proto: onnx.ModelProto, make_feeds: Callable[[int, int], dict[str, np.ndarray]],
          sizes: list[tuple[int, int]] = SIZES, runtime: bool = True,
          want_fn: Callable[[dict], list[np.ndarray]] | None = None) -> None:
    """netpass's reference and runtime agree with onnxruntime (``want_fn`` of the feeds for an
    op ORT runs on CUDA only) at every (batch, seq) of ``sizes``; the runtime takes them all in
    one request."""
    sess = None if want_fn else ort.InferenceSession(proto.SerializeToString(),
                                                     providers=["CPUExecutionProvider"])
    net = netpass.read_model(proto)
    req = netpass.compile_model(net, device=RUNTIME_DEVICE).create_infer_request() \
        if runtime else None
    names = [o.name for o in proto.graph.output]
    for b, s in sizes:
        feeds = make_feeds(b, s)
        want = dict(zip(names, want_fn(feeds) if sess is None else sess.run(names, feeds)))
        ref = netpass.reference.infer(net, feeds)
        got = req.infer(feeds) if req is not None else None
        for name in names:
            w = want[name]
            for engine, outs, tol in (("reference", ref, REF_TOL), ("runtime", got, RUNTIME_TOL)):
                if outs is None:
                    continue
                g = np.asarray(outs[name])
                where = f"{engine} {name} at batch {b}, seq {s}"
                assert g.shape == w.shape, f"{where}: shape {g.shape} != {w.shape}"
                assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != {w.dtype}"
                if w.dtype.kind in "iu":
                    np.testing.assert_array_equal(g, w, err_msg=where)
                else:
                    assert rel_l2(g, w) <= tol, f"{where}: rel. L2 {rel_l2(g, w):.2e}"


BSC = (np.float32, ["B", "S", 7])
C7 = rand(7)


# -- activations -------------------------------------------------------------------------------
@pytest.mark.parametrize("op,bias,attrs", [
    ("Gelu", False, {}), ("BiasGelu", True, {}), ("FastGelu", False, {}), ("FastGelu", True, {}),
    ("QuickGelu", False, {}), ("QuickGelu", False, {"alpha": 1.0}),
])
def test_gelu_family(op, bias, attrs):
    proto = model(op, {"x": BSC}, initializers={"b": C7} if bias else None, **attrs)
    check(proto, lambda b, s: {"x": 3 * rand(b, s, 7)})


def test_bias_add():  # (onnxruntime has a CUDA kernel only: its definition in numpy)
    proto = model("BiasAdd", {"x": BSC, "skip": BSC}, initializers={"b": C7},
                  order=["x", "b", "skip"])
    check(proto, lambda b, s: {"x": rand(b, s, 7), "skip": rand(b, s, 7)},
          want_fn=lambda f: [f["x"] + C7 + f["skip"]])


# -- normalizations --------------------------------------------------------------------------
H = 9
GAMMA, BETA, BIAS = rand(H) + 1.5, rand(H), rand(H)


def _skip_shape(form: str) -> list:
    return {"bsh": ["B", "S", H], "1sh": [1, "S", H], "sh": ["S", H]}[form]


def _skip_feeds(form: str) -> Callable[[int, int], dict]:
    def make(b: int, s: int) -> dict:
        skip = {"bsh": (b, s, H), "1sh": (1, s, H), "sh": (s, H)}[form]
        return {"x": 2 * rand(b, s, H) + 0.5, "skip": rand(*skip)}
    return make


@pytest.mark.parametrize("form", ["bsh", "1sh", "sh"])
@pytest.mark.parametrize("beta,bias", [(True, True), (False, False), (True, False),
                                       (False, True)])
def test_skip_layer_norm(form, beta, bias):
    inits = {"gamma": GAMMA, "beta": BETA, "bias": BIAS}
    order = ["x", "skip", "gamma", "beta" if beta else "", "bias" if bias else ""]
    while not order[-1]:
        order.pop()
    proto = model("SkipLayerNormalization",
                  {"x": (np.float32, ["B", "S", H]), "skip": (np.float32, _skip_shape(form))},
                  n_out=4, initializers=inits, order=order, epsilon=1e-5)
    check(proto, _skip_feeds(form))


@pytest.mark.parametrize("bias,outputs", [(True, ["y0", "", "y2", "y3"]), (False, ["y0"]),
                                          (True, ["y0", "", "", "y3"])])
def test_skip_simplified_layer_norm(bias, outputs):
    order = ["x", "skip", "gamma"] + (["bias"] if bias else [])
    proto = model("SkipSimplifiedLayerNormalization",
                  {"x": (np.float32, ["B", "S", H]), "skip": (np.float32, ["B", "S", H])},
                  initializers={"gamma": GAMMA, "bias": BIAS}, order=order, outputs=outputs)
    check(proto, _skip_feeds("bsh"))


@pytest.mark.parametrize("axis", [-1, 1])
def test_simplified_layer_norm_in_the_default_domain(axis):
    proto = model("SimplifiedLayerNormalization", {"x": (np.float32, ["B", "S", H])}, n_out=2,
                  domain="", initializers={"g": rand(H) if axis == -1 else rand(1, H)},
                  axis=axis, epsilon=1e-4)
    check(proto, lambda b, s: {"x": rand(b, s, H) + 1})


def test_layer_norm_before_opset_17_is_orts_contrib_op():
    proto = model("LayerNormalization", {"x": (np.float32, ["B", "S", H])}, n_out=3, domain="",
                  initializers={"g": GAMMA, "b": BETA}, opset=14, axis=-1, epsilon=1e-3)
    check(proto, lambda b, s: {"x": rand(b, s, H) + 1})


VOCAB, POSITIONS = 11, 8


@pytest.mark.parametrize("segment,mask,position_ids", [(True, True, False), (False, False, False),
                                                       (True, False, True), (False, True, True)])
def test_embed_layer_norm(segment, mask, position_ids):
    ids = (np.int32, ["B", "S"])
    inputs = {"ids": ids} | ({"seg": ids} if segment else {}) | ({"mask": ids} if mask else {}) \
        | ({"pos": ids} if position_ids else {})
    inits = {"word": rand(VOCAB, H), "position": rand(POSITIONS, H), "segment": rand(2, H),
             "gamma": GAMMA, "beta": BETA}
    order = ["ids", "seg" if segment else "", "word", "position", "segment" if segment else "",
             "gamma", "beta", "mask" if mask else "", "pos" if position_ids else ""]
    while not order[-1]:
        order.pop()
    outputs = ["y0", "y1" if mask else "", "y2"]
    if not segment:
        del inits["segment"]
    proto = model("EmbedLayerNormalization", inputs, initializers=inits, order=order,
                  outputs=outputs, epsilon=1e-5)

    def make(b: int, s: int) -> dict:
        feeds = {"ids": RNG.integers(0, VOCAB, (b, s)).astype(np.int32)}
        if segment:
            feeds["seg"] = RNG.integers(0, 2, (b, s)).astype(np.int32)
        if mask:
            feeds["mask"] = (RNG.random((b, s)) > 0.3).astype(np.int32)
        if position_ids:
            feeds["pos"] = RNG.integers(0, POSITIONS, (b, s)).astype(np.int32)
        return feeds
    check(proto, make)


# -- products ----------------------------------------------------------------------------
def _batch_trans(x: np.ndarray, trans: bool) -> np.ndarray:
    """The stored operand whose FusedMatMul batch transpose (with ``trans``) is ``x``."""
    r = x.ndim
    perm = list(range(1, r - 1)) + ([r - 1, 0] if trans else [0, r - 1])
    return np.ascontiguousarray(np.transpose(x, np.argsort(perm)))


@pytest.mark.parametrize("rank", [2, 3, 4])
@pytest.mark.parametrize("ta,tb,bta,btb", [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (1, 1, 0, 0),
                                           (0, 0, 1, 0), (1, 0, 1, 0), (0, 0, 0, 1), (0, 1, 0, 1),
                                           (1, 1, 1, 1)])
def test_fused_matmul(rank, ta, tb, bta, btb):
    if rank == 2 and (bta or btb):
        pytest.skip("no batch dims to transpose")
    batch = [3, 2][:rank - 2]

    def stored(x: np.ndarray, trans: int, batched: int) -> np.ndarray:
        if batched:
            return _batch_trans(x, bool(trans))
        return np.ascontiguousarray(np.swapaxes(x, -1, -2)) if trans else x

    def make(b: int, s: int) -> dict:
        a, w = rand(*batch, s, 6), rand(*batch, 6, 5)
        return {"a": stored(a, ta, bta), "b": stored(w, tb, btb)}
    shapes = {k: (np.float32, ["S" if d == 7 else d for d in v.shape])
              for k, v in {"a": stored(rand(*batch, 7, 6), ta, bta),
                           "b": stored(rand(*batch, 6, 5), tb, btb)}.items()}
    proto = model("FusedMatMul", shapes, transA=ta, transB=tb, transBatchA=bta,
                  transBatchB=btb, alpha=0.75)
    check(proto, make, sizes=[(1, 7), (1, 3)])


@pytest.mark.parametrize("activation,attrs", [
    ("Relu", {}), ("LeakyRelu", {"activation_alpha": 0.2}), ("Tanh", {}), ("Sigmoid", {}),
    ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.4})])
def test_fused_gemm(activation, attrs):
    proto = model("FusedGemm", {"a": (np.float32, ["B", 6])},
                  initializers={"w": rand(5, 6), "c": rand(5)}, activation=activation,
                  transB=1, alpha=0.5, beta=2.0, **attrs)
    check(proto, lambda b, s: {"a": rand(b, 6)})


@pytest.mark.parametrize("activation,params,z", [
    ("Relu", [], True), ("Clip", [-0.5, 0.7], False), ("LeakyRelu", [0.3], True),
    ("HardSigmoid", [0.2, 0.5], False), ("Sigmoid", [], False), ("Tanh", [], True)])
def test_fused_conv(activation, params, z):
    inputs = {"x": (np.float32, ["B", 3, "S", 6])} | ({"z": (np.float32, ["B", 4, "S", 6])}
                                                      if z else {})
    proto = model("FusedConv", inputs, initializers={"w": rand(4, 3, 3, 3), "bias": rand(4)},
                  order=["x", "w", "bias"] + (["z"] if z else []), activation=activation,
                  pads=[1, 1, 1, 1], strides=[1, 1],
                  **({"activation_params": params} if params else {}))

    def make(b: int, s: int) -> dict:
        return {"x": rand(b, 3, s, 6)} | ({"z": rand(b, 4, s, 6)} if z else {})
    check(proto, make)


def _pack(q: np.ndarray, bits: int) -> np.ndarray:
    """Values packed ``8 // bits`` per byte along the last axis, the first in the low bits."""
    per = 8 // bits
    pad = (-q.shape[-1]) % per
    q = np.concatenate([q, np.zeros(q.shape[:-1] + (pad,), q.dtype)], axis=-1)
    q = q.reshape(*q.shape[:-1], -1, per).astype(np.uint8)
    return np.bitwise_or.reduce(q << (np.arange(per, dtype=np.uint8) * bits), axis=-1)


@pytest.mark.parametrize("bits", [4, 8, 2])
@pytest.mark.parametrize("zero_points", ["none", "packed", "float"])
def test_matmul_nbits(bits, zero_points):
    if bits == 8 and zero_points == "float":
        pytest.skip("onnxruntime's CPU kernel has no 8-bit weights with float zero points")
    n, k, block = 6, 40, 16
    blocks = -(-k // block)
    q = RNG.integers(0, 1 << bits, (n, blocks, block)).astype(np.uint8)
    inits = {"B": _pack(q, bits), "scales": (RNG.random((n, blocks)) + 0.5).astype(np.float32)}
    if zero_points == "packed":
        inits["zp"] = _pack(RNG.integers(0, 1 << bits, (n, blocks)).astype(np.uint8), bits)
    elif zero_points == "float":
        inits["zp"] = rand(n, blocks)
    inits["bias"] = rand(n)
    order = ["a", "B", "scales", "zp" if zero_points != "none" else "", "", "bias"]
    proto = model("MatMulNBits", {"a": (np.float32, ["B", "S", k])}, initializers=inits,
                  order=order, bits=bits, block_size=block, N=n, K=k)
    check(proto, lambda b, s: {"a": rand(b, s, k)})


# -- attention -----------------------------------------------------------------------------
D_IN, HEADS = 10, 3


def _attention_case(mask: str, past: bool, sizes: tuple[int, int, int] = (12, 12, 9),
                    bias: bool = True, attention_bias: bool = False, **attrs: Any):
    inputs: dict[str, tuple] = {"x": (np.float32, ["B", "S", D_IN])}
    mask_dims = {"none": None, "1d": ["B"], "2d": ["B", "T"], "3d": ["B", "S", "T"]}[mask]
    if mask_dims:
        inputs["m"] = (np.int32, mask_dims)
    if past:
        inputs["past"] = (np.float32, [2, "B", HEADS, "P", sizes[0] // HEADS])
    if attention_bias:
        inputs["ab"] = (np.float32, [1, HEADS, "S", "T"])
    inits = {"w": rand(D_IN, sum(sizes)) / 2, "b": rand(sum(sizes))}
    order = ["x", "w", "b" if bias else "", "m" if mask_dims else "", "past" if past else "",
             "ab" if attention_bias else ""]
    while not order[-1]:
        order.pop()
    if sizes[0] != sizes[2]:
        attrs["qkv_hidden_sizes"] = list(sizes)
    proto = model("Attention", inputs, initializers=inits, order=order,
                  outputs=["y0", "y1"] if past else ["y0"], num_heads=HEADS, **attrs)

    def make(b: int, s: int) -> dict:
        p = s + 1 if past else 0
        total = s + p
        feeds = {"x": rand(b, s, D_IN)}
        if mask == "1d":
            feeds["m"] = RNG.integers(1, total + 1, b).astype(np.int32)
        elif mask in ("2d", "3d"):
            shape = (b, total) if mask == "2d" else (b, s, total)
            m = (RNG.random(shape) > 0.3).astype(np.int32)
            m[..., 0] = 1
            feeds["m"] = m
        if past:
            feeds["past"] = rand(2, b, HEADS, p, sizes[0] // HEADS)
        if attention_bias:
            feeds["ab"] = rand(1, HEADS, s, total)
        return feeds
    return proto, make


@pytest.mark.parametrize("mask", ["none", "1d", "2d", "3d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention_masks(mask, unidirectional):
    check(*_attention_case(mask, past=False, unidirectional=unidirectional))


@pytest.mark.parametrize("mask", ["none", "2d"])
def test_attention_past_and_present(mask):
    check(*_attention_case(mask, past=True, sizes=(12, 12, 12), unidirectional=1))


@pytest.mark.skipif(tuple(int(v) for v in ort.__version__.split(".")[:2]) < (1, 32),
                    reason="onnxruntime 1.30's CPU Attention segfaults on this form (the H200 "
                           "machine's)")
def test_attention_qkv_hidden_sizes_scale_and_bias():
    check(*_attention_case("2d", past=False, sizes=(6, 6, 12), bias=False, attention_bias=True,
                           scale=0.3, mask_filter_value=-1000.0))


def _mha_case(mask: str, past: bool, bias: bool, attention_bias: bool = False, **attrs: Any):
    hq, hv = 12, 12 if past else 9  # (ORT: a past value's head size is the key's)
    inputs: dict[str, tuple] = {"q": (np.float32, ["B", "S", hq]),
                                "k": (np.float32, ["B", "L", hq]),
                                "v": (np.float32, ["B", "L", hv])}
    mask_dims = {"none": None, "1d": ["B"], "2d": ["B", "T"]}[mask]
    if mask_dims:
        inputs["m"] = (np.int32, mask_dims)
    if attention_bias:
        inputs["ab"] = (np.float32, ["B", 1, "S", "T"])
    if past:
        inputs["pk"] = (np.float32, ["B", HEADS, "P", hq // HEADS])
        inputs["pv"] = (np.float32, ["B", HEADS, "P", hv // HEADS])
    order = ["q", "k", "v", "bias" if bias else "", "m" if mask_dims else "",
             "ab" if attention_bias else ""] + (["pk", "pv"] if past else [])
    while not order[-1]:
        order.pop()
    proto = model("MultiHeadAttention", inputs, initializers={"bias": rand(2 * hq + hv)},
                  order=order, outputs=["y0", "y1", "y2"] if past else ["y0"],
                  num_heads=HEADS, **attrs)

    def make(b: int, s: int) -> dict:
        kv = s + 2
        p = 3 if past else 0
        feeds = {"q": rand(b, s, hq), "k": rand(b, kv, hq), "v": rand(b, kv, hv)}
        if mask == "1d":
            feeds["m"] = RNG.integers(1, kv + p + 1, b).astype(np.int32)
        elif mask == "2d":
            m = (RNG.random((b, kv + p)) > 0.3).astype(np.int32)
            m[:, 0] = 1
            feeds["m"] = m
        if attention_bias:
            feeds["ab"] = rand(b, 1, s, kv + p)
        if past:
            feeds["pk"], feeds["pv"] = rand(b, HEADS, p, hq // HEADS), rand(b, HEADS, p,
                                                                           hv // HEADS)
        return feeds
    return proto, make


@pytest.mark.parametrize("mask,past,bias,attention_bias", [
    ("none", False, False, False), ("2d", False, True, False), ("1d", False, True, True),
    ("2d", True, True, False), ("none", True, False, True)])
def test_multi_head_attention(mask, past, bias, attention_bias):
    check(*_mha_case(mask, past, bias, attention_bias, scale=0.4))


def test_multi_head_attention_unidirectional():
    proto, make = _mha_case("none", False, True, unidirectional=1)

    def same_length(b: int, s: int) -> dict:  # ORT's causal mask needs L == S here
        feeds = make(b, s)
        feeds["k"], feeds["v"] = feeds["k"][:, :s], feeds["v"][:, :s]
        return feeds
    check(proto, same_length)


@pytest.mark.parametrize("rank", [3, 4])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary,positions", [(0, "ids"), (4, "ids"), (0, "offset")])
def test_rotary_embedding(rank, interleaved, rotary, positions):
    head, max_len = 8, 16
    half = (rotary or head) // 2
    x = (np.float32, ["B", "S", HEADS * head] if rank == 3 else ["B", HEADS, "S", head])
    pos = (np.int64, ["B", "S"] if positions == "ids" else [1])
    attrs = {"interleaved": interleaved}
    if rotary:
        attrs.update(rotary_embedding_dim=rotary, num_heads=HEADS)
    angles = np.arange(max_len)[:, None] * (0.5 ** np.arange(half))[None, :]
    proto = model("RotaryEmbedding", {"x": x, "pos": pos},
                  initializers={"cos": np.cos(angles).astype(np.float32),
                                "sin": np.sin(angles).astype(np.float32)}, **attrs)

    def make(b: int, s: int) -> dict:
        shape = (b, s, HEADS * head) if rank == 3 else (b, HEADS, s, head)
        p = RNG.integers(0, max_len - s, (b, s)) if positions == "ids" else \
            RNG.integers(0, max_len - s, (1,))
        return {"x": rand(*shape), "pos": p.astype(np.int64)}
    check(proto, make)


# -- refusals --------------------------------------------------------------------------------
def _refused(proto: onnx.ModelProto, *words: str) -> None:
    with pytest.raises(UnsupportedOpError) as info:
        netpass.read_model(proto)
    text = str(info.value)
    assert "the_node" in text and proto.graph.node[0].op_type in text, text
    for w in words:
        assert w in text, text


@pytest.mark.parametrize("build,words", [
    (lambda: model("SparseAttention", {"x": BSC}), ("com.microsoft",)),
    (lambda: model("Attention", {"x": (np.float32, ["B", "S", D_IN])},
                   initializers={"w": rand(D_IN, 36)}, num_heads=3, do_rotary=1), ("do_rotary",)),
    (lambda: model("Attention", {"x": (np.float32, [2, "S", D_IN]), "m": (np.int32, [4])},
                   initializers={"w": rand(D_IN, 36)}, order=["x", "w", "", "m"], num_heads=3),
     ("start/end",)),
    (lambda: model("Attention", {"x": (np.float32, ["B", "S", D_IN]),
                                 "m": (np.int32, ["B", 1, 4, 4])},
                   initializers={"w": rand(D_IN, 36)}, order=["x", "w", "", "m"], num_heads=3),
     ("rank",)),
    (lambda: model("Attention", {"x": (np.float32, ["B", "S", D_IN])},
                   initializers={"w": rand(D_IN, 36)}, num_heads=5), ("num_heads",)),
    (lambda: model("SkipSimplifiedLayerNormalization", {"x": BSC, "s": BSC},
                   initializers={"g": C7}, n_out=2), ("mean",)),
    (lambda: model("FusedGemm", {"a": (np.float32, ["B", 7])}, initializers={"w": rand(7, 3)},
                   activation="Softsign"), ("Softsign",)),
    (lambda: model("MultiHeadAttention", {"q": (np.float32, ["B", "S", 3, 3, 4])}, num_heads=3),
     ("packed",)),
    (lambda: model("MatMulNBits", {"a": (np.float32, ["B", 32])},
                   initializers={"B": np.zeros((4, 2, 8), np.uint8),
                                 "s": np.ones((4, 2), np.float32),
                                 "g": np.zeros(32, np.int32)},
                   order=["a", "B", "s", "", "g"], N=4, K=32, bits=4, block_size=16),
     ("g_idx",)),
])
def test_unsupported_forms_are_refused_naming_node_and_op(build, words):
    _refused(build(), *words)


def test_a_refused_op_is_a_netpass_error_at_compile_too():
    with pytest.raises(NetpassError, match="SparseAttention"):
        netpass.compile_model(model("SparseAttention", {"x": BSC}), device=RUNTIME_DEVICE)


# -- fuzz ---------------------------------------------------------------------------------------
def _fuzz_attention(data: Any) -> None:
    """One drawn contrib Attention (heads, head sizes, past, mask form, causal, bias) at one
    drawn shape: netpass's reference against onnxruntime."""
    heads, head, v_head = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5)),
                           data.draw(st.integers(1, 5)))
    past = data.draw(st.booleans())
    sizes = (heads * head, heads * head, heads * (head if past else v_head))
    b, s, p = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 6)), \
        data.draw(st.integers(0, 4))
    total = s + (p if past else 0)
    mask = data.draw(st.sampled_from(["none", "1d", "2d", "3d"]))
    inputs: dict[str, tuple] = {"x": (np.float32, ["B", "S", D_IN])}
    feeds = {"x": rand(b, s, D_IN)}
    if mask == "1d":
        inputs["m"], feeds["m"] = (np.int32, ["B"]), RNG.integers(0, total + 1, b).astype(np.int32)
    elif mask != "none":
        shape = (b, total) if mask == "2d" else (b, s, total)
        inputs["m"] = (np.int32, ["B", "T"] if mask == "2d" else ["B", "S", "T"])
        feeds["m"] = RNG.integers(0, 2, shape).astype(np.int32)
    if past:
        inputs["past"] = (np.float32, [2, "B", heads, "P", head])
        feeds["past"] = rand(2, b, heads, p, head)
    order = ["x", "w", "b", "m" if "m" in inputs else "", "past" if past else ""]
    while not order[-1]:
        order.pop()
    attrs: dict[str, Any] = {"num_heads": heads,
                             "unidirectional": int(data.draw(st.booleans()))}
    if sizes[2] != sizes[0]:
        attrs["qkv_hidden_sizes"] = list(sizes)
    proto = model("Attention", inputs, initializers={"w": rand(D_IN, sum(sizes)) / 2,
                                                     "b": rand(sum(sizes))},
                  order=order, outputs=["y0", "y1"] if past else ["y0"], **attrs)
    check(proto, lambda _b, _s: feeds, sizes=[(b, s)], runtime=False)


test_fuzz_attention, test_fuzz_attention_more = fuzz_tests(_fuzz_attention, 40, 600)
