"""MatMul, Gemm and Einsum: one-node ONNX models in netpass's reference vs onnxruntime (rtol 1e-4,
atol 1e-5), partial-shape inference, factories and ONNX export."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import netpass
from netpass import Dimension, PartialShape, Symbol, opset
from netpass.errors import ShapeInferenceError, UnsupportedOpError
from netpass.frontend.onnx_writer import to_onnx
from netpass.ops import Einsum, MatMul
from netpass.ops.matmul import explicit_equation

RTOL, ATOL = 1e-4, 1e-5


def one_node(op: str, shapes: list[list[int]], attrs: dict, consts: dict | None = None,
             dtype: int = TensorProto.FLOAT, opset_version: int = 17) -> onnx.ModelProto:
    consts = consts or {}
    names = [f"x{i}" for i in range(len(shapes))] + list(consts)
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(f"x{i}", dtype, s) for i, s in enumerate(shapes)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)],
                             ir_version=8)


def feeds_for(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == TensorProto.INT64:
            feeds[vi.name] = rng.integers(-5, 6, shape).astype(np.int64)
        else:
            feeds[vi.name] = np.asarray(rng.standard_normal(shape) + 0.1, dtype=np.float32)
    return feeds


def run_ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check(model: onnx.ModelProto) -> netpass.Model:
    feeds = feeds_for(model)
    expected = run_ort(model, feeds)[0]
    m = netpass.read_model(model)
    got = netpass.reference.infer(m, feeds)["y"]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    return m


@pytest.mark.parametrize("a,b", [
    ([3, 4], [4, 5]), ([2, 3, 4], [4, 5]), ([2, 1, 3, 4], [3, 4, 5]), ([4], [4, 5]),
    ([2, 3, 4], [4]), ([4], [4]), ([4], [2, 3, 4, 6]), ([1, 3, 4], [5, 1, 4, 2]),
], ids=str)
def test_matmul_matches_onnxruntime(a, b):
    check(one_node("MatMul", [a, b], {}))


def test_integer_matmul_is_exact():
    check(one_node("MatMul", [[2, 3, 4], [4, 5]], {}, dtype=TensorProto.INT64))


@settings(max_examples=25, deadline=None)
@given(batch_a=st.lists(st.sampled_from([1, 2, 3]), max_size=2),
       batch_b=st.lists(st.sampled_from([1, 2, 3]), max_size=2),
       m=st.integers(1, 4), k=st.integers(1, 4), n=st.integers(1, 4))
def test_matmul_broadcasting_matches_numpy(batch_a, batch_b, m, k, n):
    shape_a, shape_b = batch_a + [m, k], batch_b + [k, n]
    try:
        np.broadcast_shapes(tuple(batch_a), tuple(batch_b))
    except ValueError:
        return
    check(one_node("MatMul", [shape_a, shape_b], {}))


@pytest.mark.parametrize("attrs,shapes", [
    ({}, [[3, 4], [4, 5], [5]]),
    ({"transA": 1}, [[4, 3], [4, 5], [3, 5]]),
    ({"transB": 1, "alpha": 0.5}, [[3, 4], [5, 4], [1, 5]]),
    ({"transA": 1, "transB": 1, "alpha": 2.0, "beta": 0.25}, [[4, 3], [5, 4], [3, 1]]),
    ({"beta": 3.0}, [[3, 4], [4, 5], []]),
    ({"alpha": 1.5}, [[3, 4], [4, 5]]),
], ids=["plain", "transA", "transB_alpha", "both_beta", "scalar_c", "no_c"])
def test_gemm_matches_onnxruntime(attrs, shapes):
    check(one_node("Gemm", shapes, attrs))


def test_gemm_with_constant_c_folds_beta():
    c = np.random.default_rng(3).standard_normal([5]).astype(np.float32)
    m = check(one_node("Gemm", [[3, 4], [4, 5]], {"beta": 0.5}, {"c": c}))
    assert "Multiply" not in {n.type_name for n in m.get_ordered_ops()}


@pytest.mark.parametrize("equation,shapes", [
    ("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]]),
    ("bij,bjk", [[2, 3, 4], [2, 4, 5]]),
    ("ij->ji", [[3, 4]]),
    ("ii->i", [[3, 3]]),
    ("ii", [[3, 3]]),
    ("ij->", [[3, 4]]),
    ("i,j->ij", [[3], [4]]),
    ("...ij,jk->...ik", [[2, 5, 3, 4], [4, 6]]),
    ("...ij,...jk", [[2, 5, 3, 4], [2, 5, 4, 6]]),
    ("ij,jk,kl->il", [[3, 4], [4, 5], [5, 2]]),
    ("bhqd,bhkd->bhqk", [[2, 2, 3, 4], [2, 2, 5, 4]]),
    ("i j, j k -> i k", [[3, 4], [4, 2]]),
], ids=str)
def test_einsum_matches_onnxruntime(equation, shapes):
    m = check(one_node("Einsum", shapes, {"equation": equation}))
    einsum = [n for n in m.get_ordered_ops() if isinstance(n, Einsum)][0]
    assert "->" in einsum.equation


def test_implicit_equation_orders_output_like_numpy():
    assert explicit_equation("ba,cb") == "ba,cb->ac"
    assert explicit_equation("...ij,jk") == "...ij,jk->...ik"
    assert explicit_equation("Ab,bc") == "Ab,bc->Ac"


def test_malformed_einsum_equation_is_refused():
    with pytest.raises(UnsupportedOpError, match="equation"):
        netpass.read_model(one_node("Einsum", [[3, 4]], {"equation": "ij,jk->ik"}))


# -- partial shapes ----------------------------------------------------------------------------
def test_matmul_keeps_symbols_and_broadcasts_batch():
    batch = Symbol("batch")
    a = opset.parameter(PartialShape([Dimension(symbol=batch), -1, 8]))
    b = opset.parameter([1, 8, 3])
    out = opset.matmul(a, b, False, False).output(0).partial_shape
    assert out == [-1, -1, 3] and out[0].symbol is batch


def test_matmul_transposes_last_two_dims():
    a = opset.parameter([2, 8, 4])
    b = opset.parameter([5, 8])
    assert opset.matmul(a, b, True, True).output(0).partial_shape == [2, 4, 5]


def test_matmul_one_dimensional_operands_drop_their_unit_dim():
    assert opset.matmul(opset.parameter([4]), opset.parameter([3, 4, 5]), True, False) \
        .output(0).partial_shape == [3, 5]
    assert opset.matmul(opset.parameter([4]), opset.parameter([4]), False, False) \
        .output(0).partial_shape == []


def test_matmul_with_dynamic_rank_gives_dynamic_rank():
    node = opset.matmul(opset.parameter(PartialShape(None)), opset.parameter([4, 5]), False, False)
    assert not node.output(0).partial_shape.rank_is_static


def test_matmul_inner_dim_mismatch_is_reported():
    with pytest.raises(ShapeInferenceError, match="inner dims"):
        opset.matmul(opset.parameter([2, 3]), opset.parameter([4, 5]), False, False)


def test_einsum_shape_from_equation_with_ellipsis_and_dynamic_dims():
    a = opset.parameter(PartialShape([-1, 2, 3, 4]))
    b = opset.parameter(PartialShape([4, Dimension(1, 8)]))
    node = opset.einsum([a, b], "...ij,jk->...ki")
    assert node.output(0).partial_shape == PartialShape([-1, 2, Dimension(1, 8), 3])


def test_einsum_merges_a_label_seen_twice():
    a = opset.parameter(PartialShape([-1, 4]))
    b = opset.parameter(PartialShape([Dimension(2, 6), 3]))
    assert opset.einsum([a, b], "ij,ik->ijk").output(0).partial_shape == \
        PartialShape([Dimension(2, 6), 4, 3])


def test_einsum_label_conflict_is_reported():
    with pytest.raises(ShapeInferenceError, match="label 'j'"):
        opset.einsum([opset.parameter([2, 3]), opset.parameter([4, 5])], "ij,jk->ik")


def test_attribute_names_match_openvino():
    o1 = pytest.importorskip("openvino.opset1")
    import openvino.opset7 as o7
    x = o1.parameter([2, 2], np.float32)
    assert set(MatMul.ATTRS) == set(o1.matmul(x, x, False, True).get_attributes())
    assert set(Einsum.ATTRS) == set(o7.einsum([x], "ij->ji").get_attributes())
    assert (MatMul.version, Einsum.version) == ("opset1", "opset7")


# -- ONNX export -------------------------------------------------------------------------------
@pytest.mark.parametrize("op,shapes,attrs", [
    ("Gemm", [[4, 3], [5, 4], [5]], {"transA": 1, "transB": 1, "alpha": 0.5}),
    ("MatMul", [[2, 3, 4], [4]], {}),
    ("Einsum", [[2, 3, 4], [2, 4, 5]], {"equation": "bij,bjk->bki"}),
], ids=["gemm", "matmul_1d", "einsum"])
def test_export_reproduces_onnxruntime_numbers(op, shapes, attrs):
    model = one_node(op, shapes, attrs)
    feeds = feeds_for(model)
    expected = run_ort(model, feeds)[0]
    got = run_ort(to_onnx(netpass.read_model(model)), feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def test_ir_loads_in_openvino_with_the_same_numbers(tmp_path):
    ov = pytest.importorskip("openvino")
    x = opset.parameter([2, 3, 4], name="x")
    w = np.random.default_rng(1).standard_normal([5, 4]).astype(np.float32)
    y = opset.einsum([opset.matmul(x, w, False, True)], "bij->bji")
    model = netpass.Model([opset.result(y, name="y")], [x])
    netpass.save_model(model, tmp_path / "m.xml")
    compiled = ov.Core().compile_model(ov.Core().read_model(tmp_path / "m.xml"), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    data = np.random.default_rng(0).standard_normal([2, 3, 4]).astype(np.float32)
    expected = netpass.reference.infer(model, {"x": data})["y"]
    np.testing.assert_allclose(compiled(data)[0], expected, rtol=RTOL, atol=ATOL)
