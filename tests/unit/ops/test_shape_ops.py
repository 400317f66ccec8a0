"""Shape ops (ShapeOf, Range) and the ONNX ops built on them (Shape with start/end, Size,
ConstantOfShape, Trilu, EyeLike): netpass's reference vs onnxruntime, and shape sub-graphs
that resolve to static shapes for static inputs and keep symbols for dynamic ones."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import netpass
from netpass import Dimension, Model, PartialShape, Symbol, opset
from netpass.frontend.onnx_writer import to_onnx
from netpass.ops import Range, ShapeOf


def graph_model(nodes: list, inputs: list, inits: dict | None = None, outputs=("y",),
                opset_version: int = 17) -> onnx.ModelProto:
    """``inputs``: (name, onnx elem type, shape with ints or dim_param strings)."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)],
                             ir_version=8)


def compare(model: onnx.ModelProto, feeds: dict, rtol: float = 0.0) -> netpass.Model:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    m = netpass.read_model(model)
    got = netpass.reference.infer(m, feeds)
    for vo, expected in zip(model.graph.output, sess.run(None, feeds)):
        g = got[vo.name]
        assert g.dtype == expected.dtype and g.shape == expected.shape
        np.testing.assert_allclose(g, expected, rtol=rtol, atol=0)
    return m


def rand(shape, seed: int = 0) -> np.ndarray:
    return np.asarray(np.random.default_rng(seed).standard_normal(shape) + 0.1, np.float32)


def i64(v) -> np.ndarray:
    return np.asarray(v, dtype=np.int64)


F = TensorProto.FLOAT


# -- ShapeOf / Shape / Size -----------------------------------------------------------------
@pytest.mark.parametrize("attrs,opset_version", [({}, 13), ({"start": 1}, 15), ({"end": -1}, 15),
                                                 ({"start": -2, "end": 10}, 15)])
def test_shape_matches_onnxruntime(attrs, opset_version):
    model = graph_model([helper.make_node("Shape", ["x"], ["y"], **attrs)],
                        [("x", F, [2, 3, 4])], opset_version=opset_version)
    m = compare(model, {"x": rand([2, 3, 4])})
    assert m.results[0].input_value(0).value is not None  # static input: folded


def test_shape_of_partial_value_keeps_symbols():
    b = Symbol("b")
    x = opset.parameter(PartialShape([Dimension(symbol=b), 3, Dimension(2, 5)]), np.float32)
    s = opset.shape_of(x, "i32")
    assert s.output(0).element_type.name == "i32" and s.output(0).partial_shape == [3]
    pv = s.output(0).partial_value
    assert pv[0].symbol is b and pv[1] == 3 and pv[2] == Dimension(2, 5)
    assert s.output(0).value is None


def test_shape_of_dynamic_rank():
    s = opset.shape_of(opset.parameter(PartialShape(None), np.float32))
    assert s.output(0).partial_shape == PartialShape([-1]) and s.output(0).partial_value is None


@pytest.mark.parametrize("shape", [[2, 3, 4], [5], []])
def test_size_matches_onnxruntime(shape):
    model = graph_model([helper.make_node("Size", ["x"], ["y"])], [("x", F, shape)])
    compare(model, {"x": rand(shape)})


def test_size_of_dynamic_input():
    pytest.importorskip("netpass.ops.reduction")
    if not hasattr(opset, "reduce_prod"):
        pytest.skip("ReduceProd not available")
    model = graph_model([helper.make_node("Size", ["x"], ["y"])], [("x", F, ["b", 3])])
    compare(model, {"x": rand([4, 3])})


# -- ConstantOfShape / Range ----------------------------------------------------------------
@pytest.mark.parametrize("value", [None, np.float32([2.5]), np.int32([7]), np.int64([-3])])
def test_constant_of_shape_matches_onnxruntime(value):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    model = graph_model([helper.make_node("ConstantOfShape", ["s"], ["y"], **attrs)],
                        [("s", TensorProto.INT64, [3])])
    compare(model, {"s": i64([2, 1, 3])})


def test_constant_of_shape_from_shape_keeps_symbols():
    model = graph_model([helper.make_node("Shape", ["x"], ["s"]),
                         helper.make_node("ConstantOfShape", ["s"], ["y"])],
                        [("x", F, ["b", 4])])
    ps = netpass.read_model(model).results[0].output(0).partial_shape
    assert ps[0].symbol.name == "b" and ps[1] == 4


@pytest.mark.parametrize("dtype,start,limit,delta", [
    (np.int64, 0, 10, 3), (np.int64, 10, -3, -4), (np.int32, 5, 5, 1),
    (np.float32, 0.5, 3.2, 0.7), (np.float32, 1.0, -2.0, -0.25), (np.float64, 0.0, 1.0, 0.1)])
def test_range_matches_onnxruntime(dtype, start, limit, delta):
    et = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = graph_model([helper.make_node("Range", ["a", "b", "c"], ["y"])],
                        [("a", et, []), ("b", et, []), ("c", et, [])])
    feeds = {k: np.asarray(v, dtype=dtype) for k, v in zip("abc", (start, limit, delta))}
    compare(model, feeds, rtol=1e-5)


def test_range_of_constants_is_static_and_of_a_dim_keeps_its_symbol():
    assert opset.range(2, 11, 3, "i64").output(0).partial_shape == PartialShape([3])
    s = Symbol("s")
    x = opset.parameter(PartialShape([2, Dimension(symbol=s)]), np.float32)
    n = opset.gather(opset.shape_of(x), 1, 0)
    r = opset.range(np.int64(0), n, np.int64(1), "i64")
    assert r.output(0).partial_shape[0].symbol is s
    assert isinstance(r, Range)


def test_range_to_an_interval_dim_has_interval_length():
    x = opset.parameter(PartialShape([Dimension(4, 10)]), np.float32)
    n = opset.gather(opset.shape_of(x), 0, 0)
    assert opset.range(np.int64(1), n, np.int64(2), "i64").output(0).partial_shape == \
        PartialShape([Dimension(2, 5)])
    assert opset.range(np.int64(20), n, np.int64(-3), "i64").output(0).partial_shape == \
        PartialShape([Dimension(4, 6)])


# -- Trilu / EyeLike ------------------------------------------------------------------------
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 2, -1, -7])
@pytest.mark.parametrize("shape", [[4, 6], [2, 5, 3]])
def test_trilu_matches_onnxruntime(upper, k, shape):
    inputs = ["x"] + ([] if k is None else ["k"])
    model = graph_model([helper.make_node("Trilu", inputs, ["y"], upper=upper)],
                        [("x", F, shape)], {} if k is None else {"k": i64(k)})
    compare(model, {"x": rand(shape)})


def test_trilu_dynamic_shape():
    model = graph_model([helper.make_node("Trilu", ["x"], ["y"], upper=0)],
                        [("x", F, ["b", "s", "s2"])])
    m = compare(model, {"x": rand([2, 3, 5])})
    assert m.results[0].output(0).partial_shape.rank == 3


@pytest.mark.parametrize("k", [0, 1, -2])
@pytest.mark.parametrize("shape", [[3, 5], ["h", "w"]])
def test_eye_like_matches_onnxruntime(k, shape):
    model = graph_model([helper.make_node("EyeLike", ["x"], ["y"], k=k)], [("x", F, shape)])
    compare(model, {"x": rand([3, 5])})


# -- shape sub-graphs -----------------------------------------------------------------------
def gpt_split_heads(batch, seq) -> onnx.ModelProto:
    """x [batch, seq, 32] -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)),
    Unsqueeze(Gather(Shape(x), 1)), [4, 8])), as torch.onnx.export writes it; plus the
    trailing dims through Shape -> Slice."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["b"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["s"], axis=0),
        helper.make_node("Unsqueeze", ["b", "axes0"], ["b1"]),
        helper.make_node("Unsqueeze", ["s", "axes0"], ["s1"]),
        helper.make_node("Concat", ["b1", "s1", "heads"], ["pattern"], axis=0),
        helper.make_node("Reshape", ["x", "pattern"], ["y"]),
        helper.make_node("Slice", ["shape", "zero1", "minus1"], ["lead"]),
        helper.make_node("Concat", ["lead", "minus1"], ["pattern2"], axis=0),
        helper.make_node("Reshape", ["x", "pattern2"], ["z"]),
    ]
    inits = {"zero": i64(0), "one": i64(1), "axes0": i64([0]), "heads": i64([4, 8]),
             "zero1": i64([0]), "minus1": i64([-1])}
    return graph_model(nodes, [("x", F, [batch, seq, 32])], inits, outputs=("y", "z"))


def test_gpt_shape_subgraph_is_static_for_static_input():
    model = gpt_split_heads(2, 5)
    m = compare(model, {"x": rand([2, 5, 32])})
    y, z = (r.output(0).partial_shape for r in m.results)
    assert y == PartialShape([2, 5, 4, 8]) and z == PartialShape([2, 5, 32])


def test_gpt_shape_subgraph_keeps_symbols_for_dynamic_input():
    m = netpass.read_model(gpt_split_heads("batch", "seq"))
    y, z = (r.output(0).partial_shape for r in m.results)
    assert [d.symbol.name for d in y.dims[:2]] == ["batch", "seq"] and list(y)[2:] == [4, 8]
    assert y[0].symbol is z[0].symbol and z[1].symbol.name == "seq" and z[2] == 32
    outs = netpass.reference.infer(m, {"x": rand([3, 7, 32])})
    assert outs["y"].shape == (3, 7, 4, 8) and outs["z"].shape == (3, 7, 32)


def test_concat_with_an_unknown_piece_keeps_the_known_dims():
    b = Symbol("b")
    x = opset.parameter(PartialShape([Dimension(symbol=b), 6, 8]), np.float32)
    n = opset.parameter([1], np.int64)  # a length computed at run time
    pattern = opset.concat([opset.gather(opset.shape_of(x), [0], 0), n, [4]], 0)
    ps = opset.reshape(x, pattern, False).output(0).partial_shape
    assert ps[0].symbol is b and ps[1].is_dynamic and ps[2] == 4
    m = Model([opset.reshape(x, pattern, False)], [x, n])
    out = list(netpass.reference.infer(m, dict(zip(m.input_names, [rand([2, 6, 8]), i64([12])])))
               .values())[0]
    assert out.shape == (2, 12, 4)


def test_reshape_resolves_after_model_reshape():
    m = netpass.read_model(gpt_split_heads("batch", "seq"))
    m.reshape({"x": [1, 9, 32]})
    assert m.results[0].output(0).partial_shape == PartialShape([1, 9, 4, 8])


def test_shape_slice_keeps_trailing_symbols():
    model = graph_model([helper.make_node("Shape", ["x"], ["y"], start=1)],
                        [("x", F, ["b", "s", 16])], opset_version=15)
    pv = netpass.read_model(model).results[0].input_value(0).partial_value
    assert pv[0].symbol.name == "s" and pv[1] == 16


# -- export ---------------------------------------------------------------------------------
def test_shape_of_i32_and_range_export_roundtrip():
    x = opset.parameter(PartialShape([-1, 3]), np.float32, "x")
    s = opset.shape_of(x, "i32")
    n = opset.gather(s, 0, 0)
    r = opset.range(np.int32(0), n, np.int32(2), "f32")
    m = Model([s, r], [x])
    assert isinstance(s, ShapeOf)
    feeds = {"x": rand([5, 3])}
    sess = ort.InferenceSession(to_onnx(m).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    for got, expected in zip(sess.run(None, feeds), netpass.reference.infer(m, feeds).values()):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


def test_reshape_minus_one_keeps_the_product_of_symbols():
    """[b, s, 32] -> [-1, 32] (transformers' Conv1D) gives b*s; back to [b, -1, 32] gives s."""
    b, s = Symbol("b"), Symbol("s")
    x = opset.parameter(PartialShape([Dimension(symbol=b), Dimension(symbol=s), 32]), np.float32)
    flat = opset.reshape(x, [-1, 32], False)
    rows = flat.output(0).partial_shape[0]
    assert rows.symbol is (Dimension(symbol=b) * Dimension(symbol=s)).symbol
    batch = opset.gather(opset.shape_of(x), [0], 0)
    back = opset.reshape(flat, opset.concat([batch, [-1], [32]], 0), False)
    ps = back.output(0).partial_shape
    assert ps[0].symbol is b and ps[1].symbol is s and ps[2] == 32
    m = Model([back], [x])
    out = list(netpass.reference.infer(m, {m.input_names[0]: rand([3, 5, 32])}).values())[0]
    assert out.shape == (3, 5, 32)
