"""GNA support check (netpass.ngraph_passes.gna.check_support): each rule of OpenVINO's GNA
Limitations answers for the op it covers, and says why when the op cannot run."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import model_of, param, rand

from netpass import opset
from netpass.ngraph_passes.gna import (
    GnaTransformationsPipeline,
    OpSupport,
    check_support,
    unsupported,
)


def verdict(model, type_name: str, target: str = "3.0") -> OpSupport:
    found = [r for r in check_support(model, target) if r.type_name == type_name]
    assert len(found) == 1, found
    return found[0]


def i64(*v):
    return opset.constant(np.array(v, np.int64))


def test_every_op_answers_in_order_and_plain_layers_pass():
    x = param([1, 16])
    y = opset.sigmoid(opset.add(opset.multiply(x, opset.constant(rand(1, 16))), opset.constant(rand(1, 16))))
    m = model_of(opset.relu(opset.tanh(y)), x)
    report = check_support(m)
    assert [r.type_name for r in report] == [n.type_name for n in m.get_ordered_ops()]
    assert unsupported(report) == []


def test_no_such_layer():
    x = param([1, 8])
    m = model_of(opset.gather(x, i64(1, 0, 2), opset.constant(np.int64(1))), x)
    assert verdict(m, "Gather").rule == "GNA has no Gather layer"
    m = model_of(opset.softmax(x, 1), x)
    assert not verdict(m, "Softmax").supported


def test_pad_is_not_a_gna_layer():
    """The issue's point: the legacy network kept Pad with no word on it. GNA has no Pad layer
    (the GNA plugin only folds zero padding into convolutions)."""
    x = param([1, 8, 4])
    m = model_of(opset.pad(x, [0, 0, 1], [0, 0, 1], "constant"), x)
    r = verdict(m, "Pad")
    assert not r.supported and r.rule == "GNA has no Pad layer"


def test_strided_slice_unit_steps_is_a_crop_stepped_is_not():
    """The issue's other point: a StridedSlice GNA can run is a crop (one contiguous window);
    one with a step is not."""
    x = param([1, 8, 16])
    unit = opset.strided_slice(x, i64(0, 0, 2), i64(1, 8, 10), i64(1, 1, 1), [0, 0, 0], [0, 0, 0])
    r = verdict(model_of(unit, x), "StridedSlice")
    assert r.supported and r.note == "crop"
    stepped = opset.strided_slice(x, i64(0, 0, 0), i64(1, 8, 16), i64(1, 1, 2), [0, 0, 0], [0, 0, 0])
    r = verdict(model_of(stepped, x), "StridedSlice")
    assert not r.supported and "contiguous" in r.rule
    reversed_ = opset.slice(x, i64(-1), i64(-100), i64(-1), i64(2))
    assert not verdict(model_of(reversed_, x), "Slice").supported
    bounds = param([3], "b")
    dynamic_bounds = opset.slice(x, opset.convert(bounds, np.int64), i64(1, 4, 8), i64(1, 1, 1))
    assert "not constants" in verdict(model_of(dynamic_bounds, [x, bounds]), "Slice").rule


def test_element_types():
    x = opset.parameter([1, 4], np.int32, "x")
    m = model_of(opset.relu(x), x)
    assert "i32" in verdict(m, "Parameter").rule
    x = opset.parameter([1, 4], np.float16, "x")
    m = model_of(opset.add(x, opset.constant(np.ones((1, 4), np.float16))), x)
    assert verdict(m, "Parameter").supported and verdict(m, "Constant").supported
    x = param([1, 4])
    m = model_of(opset.add(x, opset.convert(opset.constant(np.ones((1, 4), np.bool_)), np.float32)), x)
    assert "boolean" in verdict(m, "Constant").rule or "bool" in verdict(m, "Constant").rule


def test_power_needs_a_constant_exponent():
    x, e = param([1, 4]), param([1, 4], "e")
    assert verdict(model_of(opset.power(x, opset.constant(np.float32(0.5))), x), "Power").supported
    assert not verdict(model_of(opset.power(x, e), [x, e]), "Power").supported


@pytest.mark.parametrize("rows, ok", [(8, True), (9, False)])
def test_affine_batch(rows, ok):
    x = param([rows, 16])
    m = model_of(opset.matmul(x, opset.constant(rand(16, 4)), False, False), x)
    r = verdict(m, "MatMul")
    assert r.supported == ok
    assert ok or "kAffineMaxBatchSize" in r.rule


def test_affine_batch_with_weights_first():
    """MatMul(W, X): X's columns are the vectors (GNA swaps the inputs)."""
    x = param([16, 4])
    m = model_of(opset.matmul(opset.constant(rand(32, 16)), x, False, False), x)
    assert verdict(m, "MatMul").supported


@pytest.mark.parametrize("shape, ok", [([1, 8, 64], True), ([1, 64, 8], True), ([8, 8], True),
                                       ([1, 16, 16], False), ([2, 4, 8], False), ([1, 9, 12], False),
                                       ([1, 1, 64], True)])
def test_transpose_rule(shape, ok):
    x = param(shape)
    order = list(range(len(shape)))
    order[-1], order[-2] = order[-2], order[-1]
    m = model_of(opset.transpose(x, opset.constant(np.array(order, np.int64))), x)
    r = verdict(m, "Transpose")
    assert r.supported == ok
    assert ok or "one side <= 8" in r.rule


def test_concat_axis_rule():
    a, b = param([1, 4, 8], "a"), param([1, 4, 8], "b")
    on_first = opset.concat([opset.relu(a), opset.relu(b)], 1)
    assert verdict(model_of(on_first, [a, b]), "Concat").supported
    a, b = param([1, 4, 8], "a"), param([1, 4, 8], "b")
    on_last = opset.concat([opset.add(a, b), opset.multiply(a, b)], 2)
    r = verdict(model_of(on_last, [a, b]), "Concat")
    assert not r.supported and "first dimension that is not 1" in r.rule


def test_concat_of_parameters_through_activations_is_supported():
    a, b = param([1, 4, 8], "a"), param([1, 4, 8], "b")
    m = model_of(opset.concat([opset.tanh(a), opset.reshape(b, i64(1, 4, 8), False)], 2), [a, b])
    assert verdict(m, "Concat").supported


def test_concat_of_affine_outputs_is_interleaved():
    """An affine layer's output is interleaved: the axis rule applies to the rotated shape."""
    a = param([4, 16], "a")
    w = opset.constant(rand(16, 8))
    mm1, mm2 = opset.matmul(a, w, False, False), opset.matmul(a, w, False, False)
    assert verdict(model_of(opset.concat([mm1, mm2], 1), a), "Concat").supported
    a = param([4, 16], "a")
    mm1, mm2 = opset.matmul(a, w, False, False), opset.matmul(a, w, False, False)
    r = verdict(model_of(opset.concat([mm1, mm2], 0), a), "Concat")
    assert not r.supported and "interleaved" in r.rule


def test_split_alignment_note():
    x = param([1, 64])
    m = model_of(list(opset.variadic_split(x, 1, [32, 32]).outputs()), x)
    assert verdict(m, "VariadicSplit").note == ""
    x = param([1, 64])
    m = model_of(list(opset.variadic_split(x, 1, [5, 59]).outputs()), x)
    r = verdict(m, "VariadicSplit")
    assert r.supported and "affine" in r.note


def conv(h, w, c, kn, kh, kw, strides=(1, 1), pads=(0, 0), dilations=(1, 1), batch=1):
    x = param([batch, h, w, c])
    node = opset.gna_convolution(x, opset.constant(rand(kn, kh, kw, c)), list(strides), list(pads),
                                 list(pads), list(dilations))
    return model_of(node, x)


def test_convolution_mapped_to_1d_and_limits():
    assert verdict(conv(1, 64, 8, 8, 1, 3), "GNAConvolution").note == "1-D convolution"
    assert verdict(conv(16, 16, 8, 8, 3, 16), "GNAConvolution").note == "2-D convolution mapped to 1-D"
    ok = verdict(conv(16, 16, 8, 8, 3, 3), "GNAConvolution")
    assert ok.supported and ok.note == "2-D convolution"
    r = verdict(conv(16, 16, 3, 8, 3, 3), "GNAConvolution")
    assert not r.supported and "3 input channels" in r.rule
    assert verdict(conv(16, 16, 3, 8, 3, 3), "GNAConvolution", "3.5").supported
    r = verdict(conv(16, 16, 8, 8, 3, 3, pads=(1, 1)), "GNAConvolution")
    assert not r.supported and "padding" in r.rule
    assert verdict(conv(16, 16, 8, 8, 3, 3, pads=(1, 1)), "GNAConvolution", "3.5").supported
    r = verdict(conv(16, 16, 8, 8, 3, 3, pads=(3, 3)), "GNAConvolution", "3.5")
    assert not r.supported and "below the kernel size" in r.rule
    r = verdict(conv(16, 16, 8, 8, 2, 2, strides=(3, 3)), "GNAConvolution")
    assert not r.supported and "larger than the kernel" in r.rule
    assert "dilation" in verdict(conv(16, 16, 8, 8, 3, 3, dilations=(2, 2)), "GNAConvolution").rule
    assert "batch 2" in verdict(conv(16, 16, 8, 8, 3, 3, batch=2), "GNAConvolution").rule


def test_pooling_limits():
    def pool(k, s):
        x = param([1, 16, 16, 8])
        return model_of(opset.gna_max_pool(x, s, [0, 0], [0, 0], k), x)
    assert verdict(pool([2, 2], [2, 2]), "GNAMaxPool").supported
    r = verdict(pool([2, 4], [2, 2]), "GNAMaxPool")
    assert not r.supported and "square up to 3x3" in r.rule
    assert verdict(pool([2, 4], [2, 2]), "GNAMaxPool", "3.5").supported
    assert "larger than the window" in verdict(pool([2, 2], [3, 3]), "GNAMaxPool").rule


def test_nchw_convolution_needs_the_pipeline():
    x = param([1, 8, 16, 16])
    m = model_of(opset.convolution(x, opset.constant(rand(8, 8, 3, 3)), [1, 1], [0, 0], [0, 0], [1, 1]), x)
    assert "run the GNA pipeline first" in verdict(m, "Convolution").rule
    GnaTransformationsPipeline().run_on_model(m)
    assert verdict(m, "GNAConvolution").supported


def test_unknown_target():
    x = param([1, 4])
    with pytest.raises(ValueError, match="unknown GNA target"):
        check_support(model_of(opset.relu(x), x), "2.0")
