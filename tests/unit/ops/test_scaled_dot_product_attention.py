"""OpenVINO ScaledDotProductAttention-13 (what OpenVINO's PyTorch frontend writes for torch's
``scaled_dot_product_attention``): netpass's reference against OpenVINO's CPU plugin on the
IR netpass writes, over random shapes (ranks 3 to 5, query and key lengths that differ, key
and value batch dims that broadcast), causal, boolean and float masks, a given scale; IR read
from OpenVINO's own writer; the IR round trip; ONNX export (as Attention) against
onnxruntime; the decomposition the pipelines run and the runtime under each TRANSFORMATIONS
setting, with dynamic lengths. Tolerance rtol 1e-4, atol 1e-5 (opcheck).
"""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_export, check_ir_round_trip, check_openvino, check_runtime

import netpass
from netpass import Model, opset
from netpass.core.dimension import Dimension
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError
from netpass.ngraph_passes.common import ScaledDotProductAttentionDecomposition
from netpass.ops.attention import ScaledDotProductAttention
from netpass.passes import Manager
from netpass.testing import RUNTIME_DEVICE

RNG = np.random.default_rng(13)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _model(feeds: dict, causal: bool = False, scale: float | None = None,
           dynamic: bool = False) -> Model:
    """SDPA over Parameters named as ``feeds`` (q, k, v[, mask]); lengths dynamic with
    ``dynamic``."""
    params = {}
    for name, arr in feeds.items():
        shape = [-1 if dynamic and i >= arr.ndim - 2 and name != "m" else d
                 for i, d in enumerate(arr.shape)]
        if dynamic and name == "m":
            shape = [-1 if i >= arr.ndim - 2 else d for i, d in enumerate(arr.shape)]
        params[name] = opset.parameter(shape, arr.dtype, name)
    node = opset.scaled_dot_product_attention(
        params["q"], params["k"], params["v"], params.get("m"),
        None if scale is None else np.float32(scale), causal=causal)
    return Model([node.output(0)], list(params.values()))


def _qkv(batch=(2, 3), L=4, S=6, E=8, Ev=5, kv_batch=None):
    kv_batch = batch if kv_batch is None else kv_batch
    return {"q": rand(*batch, L, E), "k": rand(*kv_batch, S, E), "v": rand(*kv_batch, S, Ev)}


CASES = {
    "rank4": (lambda: _qkv(), {}),
    "rank3": (lambda: _qkv(batch=(3,)), {}),
    "rank5": (lambda: _qkv(batch=(2, 2, 3)), {}),
    "kv_batch_broadcast": (lambda: _qkv(kv_batch=(1, 3)), {}),
    "one_query_row": (lambda: _qkv(L=1, S=9), {}),
    "causal_square": (lambda: _qkv(L=5, S=5), {"causal": True}),
    "causal_more_keys": (lambda: _qkv(L=3, S=7), {"causal": True}),
    "causal_more_queries": (lambda: _qkv(L=6, S=4), {"causal": True}),
    "causal_ignores_mask": (lambda: {**_qkv(), "m": rand(4, 6)}, {"causal": True}),
    "bool_mask": (lambda: {**_qkv(), "m": np.c_[np.ones((4, 1), bool),
                                                  RNG.random((4, 5)) > 0.4]}, {}),
    "float_mask_broadcast": (lambda: {**_qkv(), "m": rand(2, 1, 4, 6)}, {}),
    "scale": (lambda: {**_qkv(), "m": rand(4, 6)}, {"scale": 0.37}),
    "scale_without_mask": (lambda: _qkv(), {"scale": 1.7}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_matches_openvino(name, tmp_path):
    make, attrs = CASES[name]
    feeds = make()
    check_openvino(_model(feeds, **attrs), feeds, tmp_path)


@pytest.mark.parametrize("name", sorted(CASES))
def test_ir_round_trip(name, tmp_path):
    make, attrs = CASES[name]
    feeds = make()
    back = check_ir_round_trip(_model(feeds, **attrs), feeds, tmp_path)
    sdpa = [n for n in back.get_ordered_ops() if isinstance(n, ScaledDotProductAttention)]
    assert len(sdpa) == 1 and sdpa[0].causal == attrs.get("causal", False)


def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset13 as ops
    feeds = {**_qkv(L=3, S=5), "m": RNG.random((3, 5)) > 0.3}
    feeds["m"][:, 0] = True
    params = [ops.parameter(list(a.shape), ov.Type.boolean if a.dtype == bool else ov.Type.f32,
                            name=n) for n, a in feeds.items()]
    for p, n in zip(params, feeds):
        p.output(0).get_tensor().set_names({n})
    node = ops.scaled_dot_product_attention(*params, scale=np.float32(0.5))
    path = tmp_path / "sdpa.xml"
    ov.save_model(ov.Model([node], params, "sdpa"), path, compress_to_fp16=False)
    want = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(
        list(feeds.values()))[0]
    model = netpass.read_model(path)
    assert [n.type_name for n in model.get_ordered_ops()].count("ScaledDotProductAttention") == 1
    got = netpass.reference.infer(model, feeds)[model.output_names[0]]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["rank4", "causal_more_keys", "bool_mask", "scale"])
def test_onnx_export_as_attention(name):
    make, attrs = CASES[name]
    feeds = make()
    proto = check_export(_model(feeds, **attrs), feeds, engine="ort")
    assert [n.op_type for n in proto.graph.node] == ["Attention"]


def test_decomposition_leaves_the_chain_the_exporters_write():
    feeds = {**_qkv(), "m": rand(4, 6)}
    model = _model(feeds, scale=0.5)
    ref = netpass.reference.infer(model, feeds)
    manager = Manager()
    manager.register_pass(ScaledDotProductAttentionDecomposition())
    assert manager.run_passes(model)
    types = [n.type_name for n in model.get_ordered_ops()]
    assert "ScaledDotProductAttention" not in types
    assert types.count("MatMul") == 2 and types.count("Softmax") == 1
    got = netpass.reference.infer(model, feeds)
    np.testing.assert_allclose(got[model.output_names[0]], ref[model.output_names[0]],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("transformations", ["NONE", "COMMON", "GNA"])
@pytest.mark.parametrize("causal", [False, True])
def test_runtime_over_dynamic_lengths(transformations, causal):
    """One request over query / key lengths that change (the causal mask is built from the
    shapes after the decomposition)."""
    model = _model(_qkv(), causal=causal, dynamic=True)
    req = netpass.compile_model(model, RUNTIME_DEVICE,
                                {"TRANSFORMATIONS": transformations}).create_infer_request()
    for L, S in ((4, 6), (1, 9), (7, 3), (4, 6)):
        feeds = _qkv(L=L, S=S)
        got = req.infer(feeds)[model.output_names[0]]
        want = netpass.reference.infer(model, feeds)[model.output_names[0]]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"L={L} S={S}")
    if transformations != "NONE":  # decomposed, then fused: nothing left for the host
        assert req.stats["host_fallbacks"] == 0


@pytest.mark.parametrize("name", ["rank4", "causal_square", "float_mask_broadcast"])
def test_runtime_default_config(name):
    make, attrs = CASES[name]
    feeds = make()
    check_runtime(_model(feeds, **attrs), feeds)


def test_sink_joins_the_softmax_as_a_key_without_value():
    feeds = _qkv()
    q, k, v = (opset.parameter(list(a.shape), "f32", n) for n, a in feeds.items())
    sink = rand(2, 3, 4, 1)
    plain = opset.scaled_dot_product_attention(q, k, v)
    sunk = opset.scaled_dot_product_attention(q, k, v, sink=sink)
    model = Model([plain.output(0), sunk.output(0)], [q, k, v])
    a, b = netpass.reference.infer(model, feeds).values()
    scores = np.einsum("bhle,bhse->bhls", feeds["q"], feeds["k"]) / np.sqrt(8)
    top = np.maximum(scores.max(-1, keepdims=True), sink)
    kept = np.exp(scores - top).sum(-1, keepdims=True)
    share = kept / (kept + np.exp(sink - top))  # the weight the keys keep beside the sink
    np.testing.assert_allclose(b, a * share, rtol=1e-5, atol=1e-6)


def test_partial_shapes_broadcast_the_leading_dims():
    q = opset.parameter(PartialShape([Dimension(), 4, -1, 8]), "f32", "q")
    k = opset.parameter([1, 4, 10, 8], "f32", "k")
    v = opset.parameter([1, 1, 10, 16], "f32", "v")
    out = opset.scaled_dot_product_attention(q, k, v).output(0)
    assert out.partial_shape == PartialShape([Dimension(), 4, -1, 16])


@pytest.mark.parametrize("shapes,match", [
    (([4, 8], [6, 8], [6, 5]), "rank of at least 3"),
    (([2, 4, 8], [2, 6, 7], [2, 6, 5]), "last dim"),
    (([2, 4, 8], [2, 6, 8], [2, 5, 5]), "sequence dim"),
    (([2, 4, 8], [3, 6, 8], [3, 6, 5]), "do not broadcast"),
])
def test_bad_shapes_name_the_node(shapes, match):
    q, k, v = (opset.parameter(s, "f32", n) for s, n in zip(shapes, "qkv"))
    with pytest.raises(NetpassError, match=match) as err:
        opset.scaled_dot_product_attention(q, k, v, name="attn")
    assert "attn" in str(err.value) or "ScaledDotProductAttention" in str(err.value)


def test_integer_mask_is_refused():
    q, k, v = (opset.parameter(s, "f32", n) for s, n in
               (([2, 4, 8], "q"), ([2, 6, 8], "k"), ([2, 6, 5], "v")))
    mask = opset.parameter([4, 6], "i32", "m")
    with pytest.raises(NetpassError, match="attention_mask must be boolean"):
        opset.scaled_dot_product_attention(q, k, v, mask)
