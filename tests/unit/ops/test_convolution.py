"""Convolution, GroupConvolution, ConvolutionBackpropData, GroupConvolutionBackpropData:
one-node ONNX Conv / ConvTranspose models run in netpass's reference and in onnxruntime
(rtol 1e-4, atol 1e-5), partial-shape inference, factories and the ONNX export rules."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import netpass
from netpass import Dimension, PartialShape, Symbol, opset
from netpass.errors import ShapeInferenceError, UnsupportedOpError
from netpass.frontend.onnx_writer import to_onnx
from netpass.ops import (
    Convolution,
    ConvolutionBackpropData,
    GroupConvolution,
    GroupConvolutionBackpropData,
)

RTOL, ATOL = 1e-4, 1e-5


def one_node(op: str, shapes: list[list[int]], attrs: dict, weights: dict | None = None,
             opset_version: int = 17) -> onnx.ModelProto:
    """Model with graph inputs x0.. of ``shapes`` and ``weights`` (name -> array) as
    initializers, in that input order."""
    weights = weights or {}
    names = [f"x{i}" for i in range(len(shapes))] + list(weights)
    inputs = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, s)
              for i, s in enumerate(shapes)]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], "g", inputs, [helper.make_empty_tensor_value_info("y")],
                              [numpy_helper.from_array(v, k) for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)],
                             ir_version=8)


def random_feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = (rng.standard_normal(shape) + 0.1).astype(np.float32)
    return feeds


def run_ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check(model: onnx.ModelProto, seed: int = 0) -> netpass.Model:
    feeds = random_feeds(model, seed)
    expected = run_ort(model, feeds)[0]
    m = netpass.read_model(model)
    got = netpass.reference.infer(m, feeds)["y"]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    return m


def weights(shape: list[int], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- ONNX Conv ---------------------------------------------------------------------------------
CONV_2D = [
    {},
    {"strides": [2, 2]},
    {"strides": [2, 1], "pads": [1, 0, 2, 1]},
    {"dilations": [2, 3], "pads": [1, 1, 1, 1]},
    {"strides": [3, 2], "dilations": [2, 1], "pads": [0, 2, 1, 0]},
    {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"auto_pad": "SAME_LOWER", "strides": [2, 3]},
    {"auto_pad": "VALID", "strides": [2, 2]},
]


@pytest.mark.parametrize("attrs", CONV_2D, ids=str)
@pytest.mark.parametrize("kernel", [[3, 3], [2, 4], [1, 1]], ids=str)
def test_conv_2d_matches_onnxruntime(attrs, kernel):
    check(one_node("Conv", [[2, 3, 11, 10]], attrs, {"w": weights([4, 3] + kernel)}))


@pytest.mark.parametrize("attrs", [{}, {"strides": [2], "pads": [2, 1]}, {"dilations": [3]},
                                   {"auto_pad": "SAME_LOWER", "strides": [3]}], ids=str)
def test_conv_1d_matches_onnxruntime(attrs):
    check(one_node("Conv", [[2, 5, 17]], attrs, {"w": weights([6, 5, 3])}))


@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1]},
                                   {"strides": [1, 2, 2], "auto_pad": "SAME_UPPER"}], ids=str)
def test_conv_3d_matches_onnxruntime(attrs):
    check(one_node("Conv", [[1, 2, 6, 7, 5]], attrs, {"w": weights([3, 2, 3, 2, 2])}))


def test_conv_with_weights_as_graph_input():
    check(one_node("Conv", [[2, 3, 8, 8], [5, 3, 3, 3]], {"pads": [1, 1, 1, 1]}))


def test_conv_bias_as_graph_input_is_reshaped_at_run_time():
    check(one_node("Conv", [[2, 3, 8, 8], [5, 3, 3, 3], [5]], {"strides": [2, 1]}))


def test_conv_bias_becomes_add_of_channel_vector():
    m = check(one_node("Conv", [[2, 3, 8, 9]], {"strides": [2, 2]},
                       {"w": weights([5, 3, 3, 3]), "b": weights([5], 2)}))
    types = {n.type_name for n in m.get_ordered_ops()}
    assert {"Convolution", "Add"} <= types


@pytest.mark.parametrize("groups,in_c,out_c", [(2, 4, 6), (3, 6, 3), (4, 4, 4), (4, 4, 8)],
                         ids=["g2", "g3", "depthwise", "depthwise_x2"])
def test_grouped_conv_becomes_group_convolution(groups, in_c, out_c):
    m = check(one_node("Conv", [[2, in_c, 9, 8]], {"group": groups, "pads": [1, 1, 1, 1]},
                       {"w": weights([out_c, in_c // groups, 3, 3]), "b": weights([out_c], 3)}))
    conv = [n for n in m.get_ordered_ops() if isinstance(n, GroupConvolution)]
    assert len(conv) == 1
    assert conv[0].get_input_partial_shape(1) == [groups, out_c // groups, in_c // groups, 3, 3]


def test_grouped_ops_are_not_subclasses_of_the_plain_ones():
    """As in OpenVINO: a pattern on Convolution (an isinstance check) must not match a
    GroupConvolution, whose filters have one more dimension (a GNA depthwise conv crashed)."""
    assert not issubclass(GroupConvolution, Convolution)
    assert not issubclass(GroupConvolutionBackpropData, ConvolutionBackpropData)


def test_grouped_conv_with_weights_as_graph_input():
    check(one_node("Conv", [[1, 4, 7, 7], [4, 2, 3, 3]], {"group": 2, "strides": [2, 2]}))


def test_depthwise_conv_1d_same_upper():
    check(one_node("Conv", [[2, 6, 15]], {"group": 6, "auto_pad": "SAME_UPPER", "strides": [2]},
                   {"w": weights([6, 1, 5])}))


@settings(max_examples=25, deadline=None)
@given(size=st.tuples(st.integers(5, 12), st.integers(5, 12)),
       kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       dilations=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       pads=st.tuples(*[st.integers(0, 2)] * 4), groups=st.sampled_from([1, 2]))
def test_conv_random_geometry_matches_onnxruntime(size, kernel, strides, dilations, pads, groups):
    attrs = {"strides": list(strides), "dilations": list(dilations), "pads": list(pads),
             "group": groups}
    check(one_node("Conv", [[1, 4] + list(size)], attrs, {"w": weights([4, 4 // groups] +
                                                                        list(kernel))}))


# -- ONNX ConvTranspose ------------------------------------------------------------------------
CONV_T = [
    {},
    {"strides": [2, 2]},
    {"strides": [2, 3], "pads": [1, 0, 2, 1]},
    {"strides": [2, 2], "output_padding": [1, 1]},
    {"strides": [3, 2], "dilations": [2, 1], "pads": [1, 1, 0, 0], "output_padding": [1, 0]},
    {"strides": [2, 2], "output_shape": [12, 13]},
    {"strides": [2, 2], "output_shape": [11, 9]},
    {"strides": [2, 2], "output_shape": [11, 9], "auto_pad": "SAME_UPPER"},
    {"strides": [2, 2], "output_shape": [11, 9], "auto_pad": "SAME_LOWER"},
    {"strides": [2, 3], "auto_pad": "SAME_UPPER"},
    {"strides": [2, 3], "auto_pad": "SAME_LOWER"},
    {"strides": [2, 1], "auto_pad": "VALID"},
]


@pytest.mark.parametrize("attrs", CONV_T, ids=str)
def test_conv_transpose_2d_matches_onnxruntime(attrs):
    check(one_node("ConvTranspose", [[2, 3, 5, 6]], attrs, {"w": weights([3, 4, 3, 4])}))


@pytest.mark.parametrize("kernel", [1, 2, 4], ids=str)
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_transpose_same_pads_for_kernels_below_and_above_stride(kernel, auto_pad):
    check(one_node("ConvTranspose", [[1, 2, 5]], {"strides": [3], "auto_pad": auto_pad},
                   {"w": weights([2, 3, kernel])}))


@pytest.mark.parametrize("attrs", [{}, {"strides": [2], "pads": [1, 2], "output_padding": [1]}])
def test_conv_transpose_1d_matches_onnxruntime(attrs):
    check(one_node("ConvTranspose", [[2, 3, 7]], attrs, {"w": weights([3, 2, 3])}))


def test_conv_transpose_3d_matches_onnxruntime():
    check(one_node("ConvTranspose", [[1, 2, 3, 4, 3]], {"strides": [2, 1, 2], "pads": [1] * 6},
                   {"w": weights([2, 3, 3, 2, 3])}))


@pytest.mark.parametrize("groups", [2, 4])
def test_grouped_conv_transpose_with_bias(groups):
    m = check(one_node("ConvTranspose", [[2, 4, 5, 5]], {"group": groups, "strides": [2, 2]},
                       {"w": weights([4, 3, 3, 3]), "b": weights([3 * groups], 2)}))
    assert any(isinstance(n, GroupConvolutionBackpropData) for n in m.get_ordered_ops())


@settings(max_examples=20, deadline=None)
@given(size=st.integers(2, 6), kernel=st.integers(1, 4), stride=st.integers(1, 3),
       dilation=st.integers(1, 2), pads=st.tuples(st.integers(0, 1), st.integers(0, 1)),
       out_pad=st.integers(0, 2))
def test_conv_transpose_random_geometry_matches_onnxruntime(size, kernel, stride, dilation, pads,
                                                            out_pad):
    out_pad = min(out_pad, stride - 1)
    assume(stride * (size - 1) + dilation * (kernel - 1) + 1 + out_pad - sum(pads) > 0)
    attrs = {"strides": [stride], "dilations": [dilation], "pads": list(pads),
             "output_padding": [out_pad]}
    check(one_node("ConvTranspose", [[1, 2, size]], attrs, {"w": weights([2, 3, kernel])}))


# -- partial shapes ----------------------------------------------------------------------------
def test_symbolic_batch_is_kept():
    batch = Symbol("batch")
    x = opset.parameter(PartialShape([Dimension(symbol=batch), 3, 16, 16]))
    conv = opset.convolution(x, weights([8, 3, 3, 3]), [2, 2], [1, 1], [1, 1], [1, 1])
    out = conv.output(0).partial_shape
    assert out == [-1, 8, 8, 8] and out[0].symbol is batch


def test_dynamic_spatial_dims_give_bounded_or_dynamic_output():
    x = opset.parameter(PartialShape([1, 3, Dimension(10, 20), -1]))
    conv = opset.convolution(x, weights([4, 3, 3, 3]), [2, 2], [0, 0], [0, 0], [1, 1])
    assert conv.output(0).partial_shape == PartialShape([1, 4, Dimension(4, 9), Dimension(0, -1)])


def test_same_padding_with_unit_stride_keeps_spatial_symbol():
    h = Symbol("h")
    x = opset.parameter(PartialShape([1, 3, Dimension(symbol=h), 8]))
    conv = opset.convolution(x, weights([4, 3, 3, 3]), [1, 1], [0, 0], [0, 0], [1, 1],
                             auto_pad="same_upper")
    assert conv.output(0).partial_shape[2].symbol is h


def test_dynamic_rank_data_gives_channels_from_filters():
    x = opset.parameter(PartialShape(None))
    conv = opset.convolution(x, weights([4, 3, 3, 3]), [1, 1], [0, 0], [0, 0], [1, 1])
    assert conv.output(0).partial_shape == PartialShape([-1, 4, -1, -1])


def test_group_convolution_output_channels():
    x = opset.parameter([1, 6, 10, 10])
    conv = opset.group_convolution(x, weights([3, 4, 2, 3, 3]), [1, 1], [1, 1], [1, 1], [1, 1])
    assert conv.output(0).partial_shape == [1, 12, 10, 10]


def test_backprop_output_shape_input_sets_spatial_dims():
    x = opset.parameter([-1, 3, 5, 5])
    node = opset.convolution_backprop_data(x, weights([3, 2, 3, 3]), [2, 2],
                                           output_shape=[10, 11])
    assert node.output(0).partial_shape == [-1, 2, 10, 11]


def test_backprop_dynamic_spatial_dim_is_mapped_through_stride():
    x = opset.parameter(PartialShape([1, 3, Dimension(2, 4), 5]))
    node = opset.convolution_backprop_data(x, weights([3, 2, 3, 3]), [2, 2],
                                           pads_begin=[1, 1], pads_end=[1, 1])
    assert node.output(0).partial_shape == PartialShape([1, 2, Dimension(3, 7), 9])


def test_channel_mismatch_is_reported_with_the_input_shapes():
    x = opset.parameter([1, 4, 8, 8])
    with pytest.raises(ShapeInferenceError, match=r"Convolution .*\[1,4,8,8\].*4 channels"):
        opset.convolution(x, weights([2, 3, 3, 3]), [1, 1], [0, 0], [0, 0], [1, 1])


def test_kernel_larger_than_padded_input_is_refused():
    x = opset.parameter([1, 3, 2, 2])
    with pytest.raises(ShapeInferenceError, match="does not fit"):
        opset.convolution(x, weights([4, 3, 3, 3]), [1, 1], [0, 0], [0, 0], [1, 1])


def test_auto_pad_spelling_is_checked():
    x = opset.parameter([1, 3, 8, 8])
    with pytest.raises(ShapeInferenceError, match="auto_pad"):
        opset.convolution(x, weights([4, 3, 3, 3]), [1, 1], [0, 0], [0, 0], [1, 1],
                          auto_pad="same")


# -- factories and attributes ------------------------------------------------------------------
def test_factories_fill_attributes_in_openvino_spelling():
    x = opset.parameter([1, 3, 8, 8])
    conv = opset.convolution(x, weights([4, 3, 3, 3]), [1, 1], [0, 0], [0, 0], [1, 1])
    assert (conv.type_name, conv.version) == ("Convolution", "opset1")
    assert conv.get_attributes() == {"strides": [1, 1], "pads_begin": [0, 0], "pads_end": [0, 0],
                                      "dilations": [1, 1], "auto_pad": "explicit"}
    back = opset.convolution_backprop_data(x, weights([3, 2, 3, 3]), [2, 2])
    assert back.get_attributes()["output_padding"] == [0, 0]
    assert back.output(0).partial_shape == [1, 2, 17, 17]


def test_attribute_names_match_openvino():
    ov = pytest.importorskip("openvino.opset1")
    x = ov.parameter([1, 4, 8, 8], np.float32)
    gw = ov.constant(weights([2, 2, 2, 3, 3]))
    expected = {
        Convolution: ov.convolution(x, ov.constant(weights([4, 4, 3, 3])), [1, 1], [0, 0],
                                    [0, 0], [1, 1]),
        GroupConvolution: ov.group_convolution(x, gw, [1, 1], [0, 0], [0, 0], [1, 1]),
        ConvolutionBackpropData: ov.convolution_backprop_data(
            x, ov.constant(weights([4, 2, 3, 3])), [1, 1]),
        GroupConvolutionBackpropData: ov.group_convolution_backprop_data(x, gw, [1, 1]),
    }
    for cls, node in expected.items():
        assert set(cls.ATTRS) == set(node.get_attributes()), cls.type_name


@pytest.mark.parametrize("ctor", ["convolution_backprop_data", "group_convolution_backprop_data"])
def test_backprop_with_output_shape_places_pads_like_openvino(ctor):
    """With output_shape, OpenVINO puts an odd total pad first only for same_upper, and keeps
    explicit pads_begin only for the ungrouped op."""
    ov = pytest.importorskip("openvino")
    import openvino.opset1 as ovo
    w = weights([2, 1, 1, 3, 3]) if ctor.startswith("group") else weights([2, 1, 3, 3])
    data = np.random.default_rng(5).standard_normal([1, 2, 4, 4]).astype(np.float32)
    for auto_pad in ("explicit", "same_upper", "same_lower", "valid"):
        xo = ovo.parameter([1, 2, 4, 4], np.float32)
        yo = getattr(ovo, ctor)(xo, ovo.constant(w), [2, 2], ovo.constant(np.array([8, 10])),
                                [1, 2], [0, 1], [1, 1], auto_pad)
        expected = ov.Core().compile_model(ov.Model([yo], [xo]), "CPU",
                                           {"INFERENCE_PRECISION_HINT": "f32"})(data)[0]
        x = opset.parameter([1, 2, 4, 4], name="x")
        y = getattr(opset, ctor)(x, w, [2, 2], [8, 10], [1, 2], [0, 1], [1, 1], auto_pad)
        got = netpass.reference.infer(netpass.Model([opset.result(y)], [x]), {"x": data})
        np.testing.assert_allclose(list(got.values())[0], expected, rtol=RTOL, atol=ATOL,
                                   err_msg=auto_pad)


# -- ONNX export -------------------------------------------------------------------------------
@pytest.mark.parametrize("model", [
    one_node("Conv", [[1, 4, 9, 9]], {"group": 2, "strides": [2, 1], "pads": [1, 0, 1, 2]},
             {"w": weights([6, 2, 3, 3]), "b": weights([6], 2)}),
    one_node("Conv", [[1, 3, 9, 9]], {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
             {"w": weights([4, 3, 4, 4])}),
    one_node("ConvTranspose", [[1, 4, 4, 5]], {"group": 2, "strides": [2, 2],
                                                "output_padding": [1, 0], "pads": [1, 1, 0, 0]},
             {"w": weights([4, 3, 3, 3])}),
    one_node("ConvTranspose", [[1, 3, 4, 5]], {"strides": [2, 2], "output_shape": [9, 10]},
             {"w": weights([3, 2, 3, 3])}),
], ids=["group_conv_bias", "conv_same_lower", "group_conv_transpose", "conv_transpose_oshape"])
def test_export_reproduces_onnxruntime_numbers(model):
    feeds = random_feeds(model)
    expected = run_ort(model, feeds)[0]
    exported = to_onnx(netpass.read_model(model))
    np.testing.assert_allclose(run_ort(exported, feeds)[0], expected, rtol=RTOL, atol=ATOL)


def test_export_of_grouped_conv_with_dynamic_filters_is_refused():
    x = opset.parameter([1, 4, 8, 8], name="x")
    w = opset.parameter([2, -1, 2, 3, 3], name="w")
    y = opset.group_convolution(x, w, [1, 1], [0, 0], [0, 0], [1, 1])
    with pytest.raises(UnsupportedOpError, match="static filters"):
        to_onnx(netpass.Model([opset.result(y)], [x, w]))


def test_export_writes_same_padding_with_dilation_as_explicit_pads():
    """onnxruntime refuses SAME with dilations; the exported model still runs there."""
    x = opset.parameter([1, 3, 9, 8], name="x")
    w = weights([4, 3, 3, 3])
    y = opset.convolution(x, w, [2, 1], [0, 0], [0, 0], [2, 2], auto_pad="same_upper")
    model = netpass.Model([opset.result(y)], [x])
    feeds = random_feeds(one_node("Relu", [[1, 3, 9, 8]], {}))
    feeds = {"x": feeds["x0"]}
    expected = list(netpass.reference.infer(model, feeds).values())[0]
    np.testing.assert_allclose(run_ort(to_onnx(model), feeds)[0], expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("auto_pad", ["explicit", "same_upper", "same_lower"])
def test_export_of_backprop_with_output_shape_keeps_pad_placement(auto_pad):
    x = opset.parameter([1, 2, 4, 4], name="x")
    y = opset.convolution_backprop_data(x, weights([2, 3, 3, 3]), [2, 2], [8, 10], [0, 0],
                                        [0, 0], [1, 1], auto_pad)
    model = netpass.Model([opset.result(y)], [x])
    feeds = {"x": np.random.default_rng(3).standard_normal([1, 2, 4, 4]).astype(np.float32)}
    expected = list(netpass.reference.infer(model, feeds).values())[0]
    np.testing.assert_allclose(run_ort(to_onnx(model), feeds)[0], expected, rtol=RTOL, atol=ATOL)


def test_ir_loads_in_openvino_with_the_same_numbers(tmp_path):
    ov = pytest.importorskip("openvino")
    x = opset.parameter([1, 4, 9, 8], name="x")
    y = opset.group_convolution(x, weights([2, 3, 2, 3, 3]), [2, 1], [1, 0], [0, 1], [1, 2])
    y = opset.convolution(y, weights([5, 6, 3, 3], 2), [1, 1], [0, 0], [0, 0], [1, 1],
                          auto_pad="same_lower")
    y = opset.convolution_backprop_data(y, weights([5, 3, 3, 3], 3), [2, 2], [10, 9],
                                        auto_pad="same_upper")
    y = opset.group_convolution_backprop_data(y, weights([3, 1, 2, 2, 2], 4), [2, 1],
                                              pads_begin=[1, 0], pads_end=[0, 1],
                                              output_padding=[1, 0])
    model = netpass.Model([opset.result(y, name="y")], [x])
    netpass.save_model(model, tmp_path / "m.xml")
    compiled = ov.Core().compile_model(ov.Core().read_model(tmp_path / "m.xml"), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    data = np.random.default_rng(0).standard_normal([1, 4, 9, 8]).astype(np.float32)
    expected = netpass.reference.infer(model, {"x": data})["y"]
    np.testing.assert_allclose(compiled(data)[0], expected, rtol=RTOL, atol=1e-4)


def test_float16_conv_accumulates_in_float32_like_onnxruntime():
    w = weights([4, 3, 3, 3]).astype(np.float16)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 3, 9, 8])],
        [helper.make_empty_tensor_value_info("y")], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feeds = {"x": np.random.default_rng(0).standard_normal([1, 3, 9, 8]).astype(np.float16)}
    got = netpass.reference.infer(netpass.read_model(model), feeds)["y"]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), run_ort(model, feeds)[0].astype(np.float32),
                               rtol=1e-3, atol=1e-2)
