"""MaxPool (values and indices), AvgPool and global pooling: one-node ONNX models in netpass's
reference vs onnxruntime (rtol 1e-4, atol 1e-5; indices exact), partial shapes, factories,
attribute names against OpenVINO, and ONNX export."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import netpass
from netpass import Dimension, PartialShape, Symbol, opset
from netpass.errors import ShapeInferenceError
from netpass.frontend.onnx_writer import to_onnx
from netpass.ops import AvgPool, MaxPool

RTOL, ATOL = 1e-4, 1e-5


def one_node(op: str, shape: list[int], attrs: dict, n_out: int = 1,
             opset_version: int = 17) -> onnx.ModelProto:
    outs = ["y", "idx"][:n_out]
    node = helper.make_node(op, ["x"], outs, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         shape)],
                              [helper.make_empty_tensor_value_info(o) for o in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)],
                             ir_version=8)


def feeds_for(shape: list[int], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": (rng.standard_normal(shape) + 0.1).astype(np.float32)}


def run_ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check(model: onnx.ModelProto, shape: list[int]) -> netpass.Model:
    feeds = feeds_for(shape)
    expected = run_ort(model, feeds)
    m = netpass.read_model(model)
    got = netpass.reference.infer(m, feeds)
    np.testing.assert_allclose(got["y"], expected[0], rtol=RTOL, atol=ATOL)
    if len(expected) > 1:
        assert got["idx"].dtype == np.int64
        np.testing.assert_array_equal(got["idx"], expected[1])
    return m


POOL_2D = [
    {"kernel_shape": [3, 3]},
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 1, 1]},
    {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [4, 3], "strides": [3, 2], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [2, 2], "strides": [2, 1], "auto_pad": "VALID"},
]


@pytest.mark.parametrize("attrs", POOL_2D, ids=str)
def test_max_pool_values_and_indices_match_onnxruntime(attrs):
    check(one_node("MaxPool", [2, 3, 11, 10], attrs, n_out=2), [2, 3, 11, 10])


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 2], "dilations": [2, 1]},
    {"kernel_shape": [2, 2], "dilations": [2, 3], "strides": [2, 1], "pads": [1, 1, 0, 1]},
    {"kernel_shape": [3, 3], "dilations": [2, 2], "strides": [2, 2], "ceil_mode": 1},
], ids=str)
def test_max_pool_with_dilations_matches_onnxruntime(attrs):
    check(one_node("MaxPool", [1, 2, 12, 11], attrs, n_out=2), [1, 2, 12, 11])


@pytest.mark.parametrize("shape,attrs", [
    ([2, 3, 15], {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ([2, 3, 15], {"kernel_shape": [4], "strides": [3], "ceil_mode": 1}),
    ([1, 2, 6, 7, 5], {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2], "ceil_mode": 1}),
    ([1, 2, 6, 7, 5], {"kernel_shape": [3, 3, 3], "pads": [1] * 6}),
], ids=["1d", "1d_ceil", "3d_ceil", "3d_pads"])
def test_max_pool_1d_3d_match_onnxruntime(shape, attrs):
    check(one_node("MaxPool", shape, attrs, n_out=2), shape)


def test_max_pool_with_one_output_has_unused_indices():
    m = check(one_node("MaxPool", [1, 3, 8, 8], {"kernel_shape": [2, 2]}), [1, 3, 8, 8])
    pool = [n for n in m.get_ordered_ops() if isinstance(n, MaxPool)][0]
    assert pool.get_output_size() == 2 and not pool.output(1).consumers()


@pytest.mark.parametrize("shape,attrs", [
    ([2, 3, 7, 6], {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 0, 0, 1]}),
    ([2, 3, 9], {"kernel_shape": [3], "strides": [2]}),
], ids=["2d", "1d"])
def test_max_pool_column_major_indices_match_onnxruntime(shape, attrs):
    check(one_node("MaxPool", shape, dict(attrs, storage_order=1), n_out=2), shape)


def test_max_pool_index_axis_counts_from_that_axis():
    x = np.random.default_rng(0).standard_normal([2, 3, 4, 4]).astype(np.float32)
    node = opset.max_pool(opset.parameter([2, 3, 4, 4]), [2, 2], [1, 1], [0, 0], [0, 0], [2, 2],
                          axis=2, index_element_type="i32")
    values, indices = node.evaluate([x])
    assert indices.dtype == np.int32 and indices.max() < 16
    windows = x.reshape(2, 3, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 2, 2, 4)
    np.testing.assert_array_equal(values, windows.max(-1))
    picked = np.take_along_axis(x.reshape(2, 3, 16), indices.reshape(2, 3, 4), axis=-1)
    np.testing.assert_array_equal(picked.reshape(2, 3, 2, 2), values)


AVG = [
    {"kernel_shape": [3, 3]},
    {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 1, 1]},
    {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 1, 1], "count_include_pad": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1,
     "count_include_pad": 1},
    {"kernel_shape": [4, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [4, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER", "count_include_pad": 1},
    {"kernel_shape": [2, 2], "strides": [2, 2], "auto_pad": "VALID"},
]


@pytest.mark.parametrize("attrs", AVG, ids=str)
def test_average_pool_matches_onnxruntime(attrs):
    check(one_node("AveragePool", [2, 3, 11, 10], attrs), [2, 3, 11, 10])


def test_counted_padding_with_ceil_where_one_axis_drops_its_last_window():
    """Axis 0's last ceil window would start in the end padding (onnxruntime drops it);
    axis 1 keeps an overhanging window whose divisor counts padding but not the overhang."""
    attrs = {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [0, 1, 1, 1], "ceil_mode": 1,
             "count_include_pad": 1}
    check(one_node("AveragePool", [1, 2, 4, 6], attrs), [1, 2, 4, 6])


@pytest.mark.parametrize("shape,attrs", [
    ([2, 3, 15], {"kernel_shape": [3], "strides": [2], "pads": [1, 2], "count_include_pad": 1}),
    ([1, 2, 6, 7, 5], {"kernel_shape": [2, 3, 2], "strides": [2, 2, 1], "ceil_mode": 1}),
], ids=["1d", "3d"])
def test_average_pool_1d_3d_match_onnxruntime(shape, attrs):
    check(one_node("AveragePool", shape, attrs), shape)


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "dilations": [2, 2]},
    {"kernel_shape": [3, 2], "dilations": [2, 3], "strides": [2, 1], "pads": [1, 0, 2, 1]},
    {"kernel_shape": [3, 2], "dilations": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1],
     "count_include_pad": 1},
    {"kernel_shape": [2, 3], "dilations": [2, 2], "strides": [3, 2], "ceil_mode": 1},
], ids=str)
def test_dilated_average_pool_is_a_scaled_depthwise_convolution(attrs):
    m = check(one_node("AveragePool", [1, 3, 11, 10], attrs, opset_version=19), [1, 3, 11, 10])
    assert "GroupConvolution" in {n.type_name for n in m.get_ordered_ops()}


@settings(max_examples=25, deadline=None)
@given(size=st.tuples(st.integers(4, 10), st.integers(4, 10)),
       kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       pads=st.tuples(*[st.integers(0, 1)] * 4), ceil=st.booleans(), include=st.booleans(),
       op=st.sampled_from(["MaxPool", "AveragePool"]))
def test_pool_random_geometry_matches_onnxruntime(size, kernel, strides, pads, ceil, include,
                                                  op):
    pads = [min(p, k - 1) for p, k in zip(pads, kernel * 2)]  # onnxruntime: pad < kernel
    attrs = {"kernel_shape": list(kernel), "strides": list(strides), "pads": pads,
             "ceil_mode": int(ceil)}
    if op == "AveragePool":
        attrs["count_include_pad"] = int(include)
    shape = [1, 2] + list(size)
    check(one_node(op, shape, attrs, n_out=2 if op == "MaxPool" else 1), shape)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [[2, 3, 7], [2, 3, 5, 6], [1, 2, 3, 4, 5]], ids=str)
def test_global_pooling_matches_onnxruntime(op, shape):
    check(one_node(op, shape, {}), shape)


def test_global_pooling_keeps_dynamic_spatial_dims_reduced():
    model = one_node("GlobalAveragePool", [1, 3, 4, 4], {})
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "h"
    m = netpass.read_model(model)
    assert m.results[0].output(0).partial_shape == [1, 3, 1, 1]


# -- partial shapes ----------------------------------------------------------------------------
def test_max_pool_keeps_symbolic_batch_and_types_indices():
    batch = Symbol("batch")
    x = opset.parameter(PartialShape([Dimension(symbol=batch), 8, 9, 9]))
    node = opset.max_pool(x, [2, 2], [1, 1], [0, 0], [0, 0], [3, 3], rounding_type="ceil",
                          index_element_type="i32")
    assert node.output(0).partial_shape == [-1, 8, 4, 4]
    assert node.output(0).partial_shape[0].symbol is batch
    assert node.output(1).element_type.name == "i32"


def test_pool_on_interval_spatial_dim():
    x = opset.parameter(PartialShape([1, 3, Dimension(8, 16), -1]))
    node = opset.avg_pool(x, [2, 2], [0, 0], [0, 0], [2, 2], True)
    assert node.output(0).partial_shape == PartialShape([1, 3, Dimension(4, 8), -1])


def test_same_upper_pool_with_unit_stride_keeps_spatial_symbol():
    w = Symbol("w")
    x = opset.parameter(PartialShape([1, 3, 8, Dimension(symbol=w)]))
    node = opset.max_pool(x, [1, 1], [1, 1], [0, 0], [0, 0], [3, 3], auto_pad="same_upper")
    assert node.output(0).partial_shape[3].symbol is w


def test_pool_on_dynamic_rank_gives_rank_from_kernel():
    node = opset.avg_pool(opset.parameter(PartialShape(None)), [1], [0], [0], [2], False)
    assert node.output(0).partial_shape == PartialShape.dynamic(3)


def test_pool_kernel_rank_mismatch_is_reported():
    with pytest.raises(ShapeInferenceError, match="kernel"):
        opset.max_pool(opset.parameter([1, 3, 8, 8]), [1], [1], [0], [0], [2])


# -- factories and attributes ------------------------------------------------------------------
def test_factories_use_openvino_attribute_names():
    x = opset.parameter([1, 3, 8, 8])
    mp = opset.max_pool(x, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2])
    ap = opset.avg_pool(x, [2, 2], [0, 0], [0, 0], [2, 2], True, "ceil")
    assert (mp.type_name, mp.version, ap.type_name, ap.version) == \
        ("MaxPool", "opset8", "AvgPool", "opset1")
    assert ap.get_attributes()["exclude-pad"] is True and ap.exclude_pad
    assert mp.get_attributes()["index_element_type"] == "i64"


def test_attribute_names_match_openvino():
    o1 = pytest.importorskip("openvino.opset1")
    import openvino.opset8 as o8
    x = o1.parameter([1, 3, 8, 8], np.float32)
    assert set(MaxPool.ATTRS) == set(o8.max_pool(x, [1, 1], [1, 1], [0, 0], [0, 0],
                                                 [2, 2]).get_attributes())
    assert set(AvgPool.ATTRS) == set(o1.avg_pool(x, [1, 1], [0, 0], [0, 0], [2, 2],
                                                 True).get_attributes())


# -- ONNX export -------------------------------------------------------------------------------
@pytest.mark.parametrize("op,attrs,n_out", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                 "ceil_mode": 1}, 2),
    ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2]}, 1),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0],
                     "count_include_pad": 1}, 1),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_LOWER"}, 1),
], ids=["max_idx", "max_dil", "avg_incl", "avg_same"])
def test_export_reproduces_onnxruntime_numbers(op, attrs, n_out):
    model = one_node(op, [1, 3, 9, 8], attrs, n_out)
    feeds = feeds_for([1, 3, 9, 8])
    expected = run_ort(model, feeds)
    got = run_ort(to_onnx(netpass.read_model(model)), feeds)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)


def test_export_of_i32_indices_casts():
    x = opset.parameter([1, 2, 6, 6], name="x")
    node = opset.max_pool(x, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2], index_element_type="i32")
    model = netpass.Model([opset.result(node.output(0)), opset.result(node.output(1))], [x])
    feeds = feeds_for([1, 2, 6, 6])
    expected = netpass.reference.infer(model, feeds)
    got = run_ort(to_onnx(model), feeds)
    assert got[1].dtype == np.int32
    for g, e in zip(got, expected.values()):
        np.testing.assert_array_equal(g, e)


def test_ir_loads_in_openvino_with_the_same_numbers(tmp_path):
    ov = pytest.importorskip("openvino")
    x = opset.parameter([1, 3, 11, 10], name="x")
    mp = opset.max_pool(x, [2, 2], [1, 2], [1, 1], [0, 1], [3, 2], "ceil")
    ap = opset.avg_pool(mp.output(0), [1, 2], [1, 1], [1, 1], [3, 3], False, "ceil")
    model = netpass.Model([opset.result(ap, name="y"), opset.result(mp.output(1), name="idx")],
                          [x])
    netpass.save_model(model, tmp_path / "m.xml")
    compiled = ov.Core().compile_model(ov.Core().read_model(tmp_path / "m.xml"), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    data = feeds_for([1, 3, 11, 10])
    expected = netpass.reference.infer(model, data)
    got = compiled(data["x"])
    np.testing.assert_allclose(got[0], expected["y"], rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(got[1], expected["idx"])


def test_counted_padding_with_ceil_rounding_divides_by_the_whole_kernel():
    """OpenVINO's AvgPool counts padding and the ceil overhang alike when exclude-pad is off."""
    x = np.ones([1, 1, 6], np.float32)
    node = opset.avg_pool(opset.parameter([1, 1, 6]), [3], [1], [1], [4], False, "ceil")
    np.testing.assert_allclose(node.evaluate([x])[0][0, 0], [0.75, 1.0, 0.25], rtol=RTOL)


def test_export_of_counted_padding_with_ceil_rounding_keeps_openvino_numbers():
    x = opset.parameter([1, 2, 7, 6], name="x")
    y = opset.avg_pool(x, [2, 2], [1, 0], [1, 1], [3, 3], False, "ceil")
    model = netpass.Model([opset.result(y, name="y")], [x])
    feeds = feeds_for([1, 2, 7, 6])
    expected = netpass.reference.infer(model, feeds)["y"]
    np.testing.assert_allclose(run_ort(to_onnx(model), feeds)[0], expected, rtol=RTOL, atol=ATOL)
