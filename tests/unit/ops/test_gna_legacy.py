"""GNA channels-last ops against Convolution / MaxPool between transposes, and the legacy IE ops
against their numpy formulas (rtol 1e-5, atol 1e-6 unless stated)."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Dimension, PartialShape, Symbol, opset
from netpass.errors import ShapeInferenceError, UnsupportedOpError
from netpass.frontend.onnx_writer import to_onnx
from netpass.ops import (
    CropIE,
    Eltwise,
    FullyConnected,
    GNAConvolution,
    GNAMaxPool,
    PowerIE,
    ReLUIE,
    ScaleShiftIE,
)

RTOL, ATOL = 1e-5, 1e-6


def rand(shape: list[int], seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) + 0.1).astype(np.float32)


def to_nhwc(x: np.ndarray) -> np.ndarray:
    return np.moveaxis(x, 1, -1)


def to_nchw(x: np.ndarray) -> np.ndarray:
    return np.moveaxis(x, -1, 1)


def evaluate(node, *inputs: np.ndarray) -> np.ndarray:
    return node.evaluate(list(inputs))[0]


# -- GNAConvolution ----------------------------------------------------------------------------
CONV_CASES = [
    ([1, 3, 10, 9], [4, 3, 3, 3], dict(strides=[1, 1], pads_begin=[0, 0], pads_end=[0, 0],
                                       dilations=[1, 1])),
    ([2, 3, 10, 9], [5, 3, 3, 2], dict(strides=[2, 1], pads_begin=[1, 0], pads_end=[2, 1],
                                       dilations=[1, 2])),
    ([1, 4, 11, 7], [2, 4, 2, 3], dict(strides=[2, 2], pads_begin=[0, 0], pads_end=[0, 0],
                                       dilations=[1, 1], auto_pad="same_upper")),
    ([1, 8, 16], [4, 8, 5], dict(strides=[2], pads_begin=[2], pads_end=[1], dilations=[1])),
]


@pytest.mark.parametrize("data_shape,filter_shape,attrs", CONV_CASES, ids=["plain", "geometry",
                                                                           "same_upper", "1d"])
def test_gna_convolution_equals_transposed_convolution(data_shape, filter_shape, attrs):
    x, w = rand(data_shape), rand(filter_shape, 1)
    conv = opset.convolution(opset.parameter(data_shape), w, **attrs)
    expected = evaluate(conv, x, w)
    gna = opset.gna_convolution(opset.parameter(to_nhwc(x).shape), to_nhwc(w), **attrs)
    assert gna.output(0).partial_shape == list(to_nhwc(expected).shape)
    np.testing.assert_allclose(to_nchw(evaluate(gna, to_nhwc(x), to_nhwc(w))), expected,
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("activation,fn", [
    ("NO_ACTIVATION", lambda y: y), ("RELU", lambda y: np.maximum(y, 0)),
    ("SIGMOID", lambda y: 1 / (1 + np.exp(-y))), ("TANH", np.tanh), ("ABS", np.abs),
    ("SIGN", np.sign),
])
def test_gna_convolution_adds_bias_then_activation(activation, fn):
    x, w, b = rand([1, 6, 7, 3]), rand([4, 3, 2, 3], 1), rand([4], 2)
    node = opset.gna_convolution(opset.parameter([1, 6, 7, 3]), w, [1, 1], [0, 0], [0, 0],
                                 [1, 1], bias=b, activation=activation)
    assert node.has_bias and node.activation == activation
    plain = opset.gna_convolution(opset.parameter([1, 6, 7, 3]), w, [1, 1], [0, 0], [0, 0], [1, 1])
    expected = fn(evaluate(plain, x, w) + b)
    np.testing.assert_allclose(evaluate(node, x, w, b), expected, rtol=RTOL, atol=ATOL)


def test_gna_convolution_partial_shape_keeps_batch_symbol():
    batch = Symbol("batch")
    x = opset.parameter(PartialShape([Dimension(symbol=batch), Dimension(8, 16), 10, 3]))
    node = opset.gna_convolution(x, rand([5, 3, 3, 3]), [1, 1], [0, 0], [0, 0], [1, 1])
    out = node.output(0).partial_shape
    assert out == PartialShape([-1, Dimension(6, 14), 8, 5]) and out[0].symbol is batch


def test_gna_convolution_channel_mismatch_is_reported():
    with pytest.raises(ShapeInferenceError, match="channels"):
        opset.gna_convolution(opset.parameter([1, 8, 8, 4]), rand([5, 3, 3, 3]), [1, 1], [0, 0],
                              [0, 0], [1, 1])


def test_gna_convolution_unknown_activation_is_reported():
    with pytest.raises(ShapeInferenceError, match="activation"):
        opset.gna_convolution(opset.parameter([1, 8, 8, 3]), rand([5, 3, 3, 3]), [1, 1], [0, 0],
                              [0, 0], [1, 1], activation="SWISH")


# -- GNAMaxPool --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,kernel,strides,pads,rounding", [
    ([1, 3, 10, 9], [2, 2], [2, 2], ([0, 0], [0, 0]), "floor"),
    ([2, 4, 9, 9], [3, 3], [2, 2], ([1, 1], [1, 1]), "ceil"),
    ([1, 5, 13], [3], [2], ([0], [0]), "ceil"),
], ids=["2d", "2d_ceil_pads", "1d"])
def test_gna_max_pool_equals_transposed_max_pool(shape, kernel, strides, pads, rounding):
    x = rand(shape)
    n = len(kernel)
    ref = opset.max_pool(opset.parameter(shape), strides, [1] * n, pads[0], pads[1], kernel,
                         rounding)
    expected = ref.evaluate([x])[0]
    node = opset.gna_max_pool(opset.parameter(to_nhwc(x).shape), strides, pads[0], pads[1],
                              kernel, rounding)
    assert node.output(0).partial_shape == list(to_nhwc(expected).shape)
    np.testing.assert_array_equal(to_nchw(evaluate(node, to_nhwc(x))), expected)


def test_gna_ops_have_openvino_type_and_version():
    assert (GNAConvolution.type_name, GNAConvolution.version) == ("GNAConvolution", "intel_gna")
    assert (GNAMaxPool.type_name, GNAMaxPool.version) == ("GNAMaxPool", "intel_gna")
    assert {"strides", "dilations", "pads_begin", "pads_end", "auto_pad", "activation",
            "has_bias"} == set(GNAConvolution.ATTRS)


def test_gna_op_export_to_onnx_is_refused():
    x = opset.parameter([1, 4, 4, 2], name="x")
    y = opset.gna_max_pool(x, [1, 1], [0, 0], [0, 0], [2, 2])
    with pytest.raises(UnsupportedOpError, match="GNAMaxPool"):
        to_onnx(netpass.Model([opset.result(y)], [x]))


# -- legacy ops --------------------------------------------------------------------------------
def test_crop_ie_takes_dim_elements_from_offset():
    x = rand([2, 6, 5, 7])
    node = opset.crop_ie(opset.parameter([2, 6, 5, 7]), [1, 3], [3, 4], [2, 1])
    assert node.output(0).partial_shape == [2, 3, 5, 4]
    np.testing.assert_array_equal(evaluate(node, x), x[:, 2:5, :, 1:5])


def test_crop_ie_outside_the_data_is_reported():
    with pytest.raises(ShapeInferenceError, match="crop"):
        opset.crop_ie(opset.parameter([1, 6]), [1], [4], [3])


def test_crop_ie_keeps_dynamic_batch():
    node = opset.crop_ie(opset.parameter(PartialShape([-1, 8])), [1], [4], [2])
    assert node.output(0).partial_shape == [-1, 4]


def test_power_ie_is_scale_shift_then_power():
    x = np.abs(rand([3, 4])) + 0.5
    node = opset.power_ie(opset.parameter([3, 4]), power=1.5, scale=2.0, shift=0.25)
    np.testing.assert_allclose(evaluate(node, x), (2.0 * x + 0.25) ** 1.5, rtol=RTOL, atol=ATOL)


def test_scale_shift_ie_is_per_channel():
    x, w, b = rand([2, 3, 4, 5]), rand([3], 1), rand([3], 2)
    node = opset.scale_shift_ie(opset.parameter([2, 3, 4, 5]), w, b)
    expected = x * w[None, :, None, None] + b[None, :, None, None]
    np.testing.assert_allclose(evaluate(node, x, w, b), expected, rtol=RTOL, atol=ATOL)


def test_scale_shift_ie_channel_mismatch_is_reported():
    with pytest.raises(ShapeInferenceError, match="weights"):
        opset.scale_shift_ie(opset.parameter([2, 3, 4]), rand([4]), rand([3]))


def test_fully_connected_is_a_times_w_transposed_plus_bias():
    a, w, b = rand([2, 3, 4]), rand([6, 4], 1), rand([6], 2)
    node = opset.fully_connected(opset.parameter(PartialShape([2, -1, 4])), w, b)
    assert node.out_size == 6 and node.output(0).partial_shape == [2, -1, 6]
    np.testing.assert_allclose(evaluate(node, a, w, b), a @ w.T + b, rtol=RTOL, atol=ATOL)


def test_fully_connected_inner_dim_mismatch_is_reported():
    with pytest.raises(ShapeInferenceError, match="K="):
        opset.fully_connected(opset.parameter([2, 5]), rand([6, 4]), rand([6]))


@pytest.mark.parametrize("operation,fn", [("sum", np.add), ("prod", np.multiply),
                                          ("max", np.maximum), ("min", np.minimum),
                                          ("sub", np.subtract)])
def test_eltwise_applies_operation_with_broadcasting(operation, fn):
    a, b = rand([2, 3, 4]), rand([3, 1], 1)
    node = opset.eltwise(opset.parameter([2, 3, 4]), opset.parameter([3, 1]), operation)
    assert node.output(0).partial_shape == [2, 3, 4]
    np.testing.assert_allclose(evaluate(node, a, b), fn(a, b), rtol=RTOL, atol=ATOL)


def test_relu_ie_scales_negatives():
    x = rand([4, 5])
    node = opset.relu_ie(opset.parameter([4, 5]), 0.1)
    np.testing.assert_allclose(evaluate(node, x), np.where(x > 0, x, 0.1 * x), rtol=RTOL,
                               atol=ATOL)


def test_legacy_ops_have_legacy_version():
    for cls in (CropIE, PowerIE, ScaleShiftIE, FullyConnected, Eltwise, ReLUIE):
        assert cls.version == "legacy", cls.type_name


def test_legacy_ops_run_in_the_reference_evaluator():
    x = opset.parameter([2, 8], name="x")
    fc = opset.fully_connected(x, rand([4, 8], 1), rand([4], 2))
    y = opset.relu_ie(opset.crop_ie(fc, [1], [2], [1]), 0.2)
    model = netpass.Model([opset.result(y)], [x])
    data = rand([2, 8], 3)
    fc_ref = data @ rand([4, 8], 1).T + rand([4], 2)
    expected = np.where(fc_ref[:, 1:3] > 0, fc_ref[:, 1:3], 0.2 * fc_ref[:, 1:3])
    got = list(netpass.reference.infer(model, {"x": data}).values())[0]
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
