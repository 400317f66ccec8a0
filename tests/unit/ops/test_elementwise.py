"""Elementwise ops: ONNX import vs onnxruntime on one-node models, OpenVINO semantics of the
netpass classes, partial-shape inference, value propagation and ONNX export round trips.

Tolerances: rtol 1e-4, atol 1e-5 for floats; booleans and integers exact.
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import netpass
from netpass import Model, opset
from netpass.core.dimension import Dimension, Symbol
from netpass.core.node import Node
from netpass.core.shape import PartialShape
from netpass.core.types import i64
from netpass.errors import NetpassError, ShapeInferenceError
from netpass.frontend.onnx_writer import to_onnx
from netpass.passes.serialize import Serialize

RTOL, ATOL = 1e-4, 1e-5
ONNX_TYPE = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
             np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int32): TensorProto.INT32,
             np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.uint8): TensorProto.UINT8,
             np.dtype(np.float64): TensorProto.DOUBLE}


def one_node(op: str, feeds: dict, n_out: int = 1, opset_version: int = 17,
             initializers: dict | None = None, **attrs) -> onnx.ModelProto:
    """A model of one ONNX node reading ``feeds`` (graph inputs) then ``initializers``; output
    types come from ONNX shape inference."""
    initializers = initializers or {}
    inputs = [helper.make_tensor_value_info(k, ONNX_TYPE[v.dtype], v.shape)
              for k, v in feeds.items()]
    outs = [onnx.ValueInfoProto(name=f"y{i}") for i in range(n_out)]
    node = helper.make_node(op, list(feeds) + list(initializers), [o.name for o in outs], **attrs)
    graph = helper.make_graph([node], "g", inputs, outs,
                              [onnx.numpy_helper.from_array(v, k) for k, v in initializers.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)])
    proto.ir_version = 8 if opset_version <= 17 else 9
    return onnx.shape_inference.infer_shapes(proto, strict_mode=True)


def check_onnx(proto: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    """netpass.reference on the imported model equals onnxruntime, output by output."""
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, feeds)
    got = netpass.reference.infer(netpass.read_model(proto), feeds)
    for vo, ref in zip(proto.graph.output, expected):
        out = got[vo.name]
        assert out.shape == ref.shape, f"{vo.name}: {out.shape} != {ref.shape}"
        assert out.dtype == ref.dtype, f"{vo.name}: {out.dtype} != {ref.dtype}"
        if ref.dtype.kind == "f":
            np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)
        else:
            np.testing.assert_array_equal(out, ref)
    return expected


def check_export(model: Model, feeds: dict) -> None:
    """Exported ONNX (opset 17) run by onnxruntime equals netpass.reference on ``model``."""
    proto = to_onnx(model)
    onnx.checker.check_model(proto)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, feeds)
    got = netpass.reference.infer(model, feeds)
    for name, ref in zip(model.output_names, expected):
        if ref.dtype.kind == "f":
            np.testing.assert_allclose(got[name], ref, rtol=RTOL, atol=ATOL)
        else:
            np.testing.assert_array_equal(got[name], ref)


def rand(rng, shape, lo=-3.0, hi=3.0, dtype=np.float32):
    """Random non-zero values in [lo, hi]."""
    x = rng.uniform(lo, hi, size=shape)
    x = np.where(np.abs(x) < 1e-2, 0.5, x)
    return x.astype(dtype)


# -- binary arithmetic -------------------------------------------------------------------------

SHAPE_PAIRS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 3, 1), (2, 1, 5)), ((), (3,)),
               ((5, 1), (1, 6))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
def test_binary_float_matches_onnxruntime(op, shapes):
    rng = np.random.default_rng(0)
    feeds = {"a": rand(rng, shapes[0]), "b": rand(rng, shapes[1])}
    check_onnx(one_node(op, feeds), feeds)


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
def test_pow_matches_onnxruntime(shapes):
    rng = np.random.default_rng(1)
    feeds = {"a": rand(rng, shapes[0], 0.1, 3.0), "b": rand(rng, shapes[1], -2.0, 2.0)}
    check_onnx(one_node("Pow", feeds), feeds)


def test_pow_integer_base_real_exponent():
    feeds = {"a": np.array([[2, 3, 5, 7]], np.int64),
             "b": np.array([1.5, 0.5, 2.0, 0.3], np.float32)}
    check_onnx(one_node("Pow", feeds), feeds)


def test_pow_integer_exponent_of_other_type():
    rng = np.random.default_rng(2)
    feeds = {"a": rand(rng, (3, 4), 0.5, 2.0), "b": np.array([2, 3, 1, 0], np.int64)}
    check_onnx(one_node("Pow", feeds), feeds)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_div_truncates_toward_zero(dtype):
    rng = np.random.default_rng(3)
    a = rng.integers(-50, 50, size=(4, 5)).astype(dtype)
    sign = np.where(rng.random((4, 5)) < 0.5, -1, 1)
    b = (rng.integers(1, 7, size=(4, 5)) * sign).astype(dtype)
    feeds = {"a": a, "b": b}
    check_onnx(one_node("Div", feeds), feeds)


def test_divide_pythondiv_floors_integers():
    a = opset.parameter([4], np.int32, name="a")
    b = opset.parameter([4], np.int32, name="b")
    model = Model([opset.divide(a, b)], [a, b])
    out = netpass.reference.infer(model, {"a": np.array([7, -7, 7, -7], np.int32),
                                          "b": np.array([2, 2, -2, -2], np.int32)})
    np.testing.assert_array_equal(next(iter(out.values())), [3, -4, -4, 3])


@pytest.mark.parametrize("fmod,dtype",
                         [(0, np.int32), (0, np.int64), (1, np.int32), (1, np.float32)])
def test_mod_matches_onnxruntime(fmod, dtype):
    rng = np.random.default_rng(4)
    if dtype == np.float32:
        a, b = rand(rng, (3, 4), -9, 9), rand(rng, (4,), -4, 4)
    else:
        a = rng.integers(-20, 20, size=(3, 4)).astype(dtype)
        b = np.array([3, -4, 5, -7], dtype)
    feeds = {"a": a, "b": b}
    check_onnx(one_node("Mod", feeds, fmod=fmod), feeds)


@given(st.lists(st.integers(1, 4), min_size=0, max_size=4), st.integers(0, 4),
       st.sampled_from(["Add", "Sub", "Mul", "Div"]), st.integers(0, 2 ** 16))
@settings(max_examples=25, deadline=None)
def test_binary_broadcasting_hypothesis(shape, keep, op, seed):
    rng = np.random.default_rng(seed)
    # The right operand keeps a suffix of the left shape, with some dims set to 1.
    right = [d if rng.random() < 0.6 else 1 for d in shape[len(shape) - min(keep, len(shape)):]]
    feeds = {"a": rand(rng, tuple(shape)), "b": rand(rng, tuple(right))}
    check_onnx(one_node(op, feeds), feeds)


def test_squared_difference_and_floor_mod_semantics():
    a = opset.parameter([2, 3], np.float32, name="a")
    b = opset.parameter([3], np.float32, name="b")
    model = Model([opset.squared_difference(a, b), opset.floor_mod(a, b)], [a, b])
    rng = np.random.default_rng(5)
    feeds = {"a": rand(rng, (2, 3), -5, 5), "b": rand(rng, (3,), -3, 3)}
    out = list(netpass.reference.infer(model, feeds).values())
    np.testing.assert_allclose(out[0], (feeds["a"] - feeds["b"]) ** 2, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(out[1], np.mod(feeds["a"], feeds["b"]), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
@pytest.mark.parametrize("n", [1, 3])
def test_variadic_matches_onnxruntime(op, n):
    rng = np.random.default_rng(6)
    shapes = [(2, 3, 4), (3, 1), (4,)][:n]
    feeds = {f"x{i}": rand(rng, s) for i, s in enumerate(shapes)}
    check_onnx(one_node(op, feeds), feeds)


# -- comparison, logic, Where ------------------------------------------------------------------

@pytest.mark.parametrize("op,version", [("Equal", 17), ("Less", 17), ("Greater", 17),
                                        ("LessOrEqual", 17), ("GreaterOrEqual", 17)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_comparison_matches_onnxruntime(op, version, dtype):
    rng = np.random.default_rng(7)
    a = rng.integers(-3, 3, size=(3, 4)).astype(dtype)
    b = rng.integers(-3, 3, size=(4,)).astype(dtype)
    feeds = {"a": a, "b": b}
    check_onnx(one_node(op, feeds), feeds)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical_binary_matches_onnxruntime(op):
    rng = np.random.default_rng(8)
    feeds = {"a": rng.random((2, 3, 4)) < 0.5, "b": rng.random((3, 1)) < 0.5}
    check_onnx(one_node(op, feeds), feeds)


def test_not_matches_onnxruntime():
    feeds = {"a": np.random.default_rng(9).random((3, 5)) < 0.5}
    check_onnx(one_node("Not", feeds), feeds)


def test_not_equal_is_negated_equal():
    a = opset.parameter([4], np.int64, name="a")
    model = Model([opset.not_equal(a, np.array([1, 2, 3, 4]))], [a])
    out = netpass.reference.infer(model, {"a": np.array([1, 0, 3, 0])})
    np.testing.assert_array_equal(next(iter(out.values())), [False, True, False, True])


@pytest.mark.parametrize("shapes", [((2, 3), (2, 3), (2, 3)), ((3, 1), (1, 4), (4,)),
                                    ((4,), (2, 1, 4), ())], ids=str)
def test_where_broadcasts_three_inputs(shapes):
    rng = np.random.default_rng(10)
    feeds = {"c": rng.random(shapes[0]) < 0.5, "t": rand(rng, shapes[1]), "e": rand(rng, shapes[2])}
    check_onnx(one_node("Where", feeds), feeds)


# -- unary ops ---------------------------------------------------------------------------------

UNARY = [
    ("Relu", {}, (-3, 3)), ("Sigmoid", {}, (-8, 8)), ("Tanh", {}, (-3, 3)), ("Exp", {}, (-3, 3)),
    ("Log", {}, (0.1, 5)), ("Sqrt", {}, (0.1, 5)), ("Abs", {}, (-3, 3)), ("Neg", {}, (-3, 3)),
    ("Erf", {}, (-3, 3)), ("Floor", {}, (-3, 3)), ("Ceil", {}, (-3, 3)), ("Sign", {}, (-3, 3)),
    ("Sin", {}, (-3, 3)), ("Cos", {}, (-3, 3)), ("Tan", {}, (-1, 1)), ("Asin", {}, (-0.9, 0.9)),
    ("Acos", {}, (-0.9, 0.9)), ("Atan", {}, (-3, 3)), ("Sinh", {}, (-3, 3)), ("Cosh", {}, (-3, 3)),
    ("Asinh", {}, (-3, 3)), ("Acosh", {}, (1.1, 4)), ("Atanh", {}, (-0.9, 0.9)),
    ("Softplus", {}, (-20, 20)), ("Softsign", {}, (-3, 3)), ("HardSwish", {}, (-5, 5)),
    ("Reciprocal", {}, (0.2, 3)), ("Elu", {"alpha": 0.7}, (-3, 3)), ("Elu", {}, (-3, 3)),
    ("Selu", {}, (-3, 3)), ("Selu", {"alpha": 1.2, "gamma": 0.9}, (-3, 3)),
    ("HardSigmoid", {}, (-5, 5)), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, (-5, 5)),
    ("LeakyRelu", {}, (-3, 3)), ("LeakyRelu", {"alpha": 0.2}, (-3, 3)),
    ("Celu", {}, (-3, 3)), ("Celu", {"alpha": 0.6}, (-3, 3)),
    ("ThresholdedRelu", {}, (-3, 3)), ("ThresholdedRelu", {"alpha": 0.4}, (-3, 3)),
    ("Shrink", {}, (-3, 3)), ("Shrink", {"lambd": 0.8, "bias": 0.3}, (-3, 3)),
]


@pytest.mark.parametrize("op,attrs,domain", UNARY, ids=lambda v: str(v))
@pytest.mark.parametrize("shape", [(3,), (2, 3, 4)], ids=str)
def test_unary_matches_onnxruntime(op, attrs, domain, shape):
    rng = np.random.default_rng(11)
    feeds = {"x": rand(rng, shape, *domain)}
    check_onnx(one_node(op, feeds, **attrs), feeds)


@pytest.mark.parametrize("op", ["LeakyRelu", "Reciprocal"])
def test_double_data_keeps_double_constants(op):
    feeds = {"x": rand(np.random.default_rng(24), (3, 4), -3.0, 3.0, np.float64)}
    check_onnx(one_node(op, feeds), feeds)


def test_mish_opset18_matches_onnxruntime():
    feeds = {"x": rand(np.random.default_rng(25), (2, 5), -6, 6)}
    check_onnx(one_node("Mish", feeds, opset_version=18), feeds)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20_matches_onnxruntime(approximate):
    feeds = {"x": rand(np.random.default_rng(12), (2, 5), -4, 4)}
    check_onnx(one_node("Gelu", feeds, opset_version=20, approximate=approximate), feeds)


def test_round_is_half_to_even():
    feeds = {"x": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, 1.6], np.float32)}
    check_onnx(one_node("Round", feeds), feeds)


def test_round_half_away_from_zero_mode():
    x = opset.parameter([4], np.float32, name="x")
    out = netpass.reference.infer(Model([opset.round(x, "half_away_from_zero")], [x]),
                                  {"x": np.array([-2.5, -0.5, 0.5, 1.5], np.float32)})
    np.testing.assert_array_equal(next(iter(out.values())), [-3, -1, 1, 2])


def test_isnan_matches_onnxruntime():
    feeds = {"x": np.array([1.0, np.nan, -np.inf, 2.0], np.float32)}
    check_onnx(one_node("IsNaN", feeds), feeds)


@pytest.mark.parametrize("neg,pos", [(1, 1), (0, 1), (1, 0)])
def test_isinf_matches_onnxruntime(neg, pos):
    feeds = {"x": np.array([1.0, np.inf, -np.inf, np.nan], np.float32)}
    check_onnx(one_node("IsInf", feeds, detect_negative=neg, detect_positive=pos), feeds)


def test_swish_and_hsigmoid_semantics():
    x = opset.parameter([6], np.float32, name="x")
    model = Model([opset.swish(x, 1.5), opset.hsigmoid(x)], [x])
    v = rand(np.random.default_rng(13), (6,), -5, 5)
    out = list(netpass.reference.infer(model, {"x": v}).values())
    np.testing.assert_allclose(out[0], v / (1 + np.exp(-1.5 * v)), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(out[1], np.clip(v + 3, 0, 6) / 6, rtol=RTOL, atol=ATOL)


# -- PRelu -------------------------------------------------------------------------------------

@pytest.mark.parametrize("xshape,sshape", [((2, 3, 4), (4,)), ((2, 3, 4), (3, 1)),
                                           ((2, 3, 4), (1,)), ((2, 3), (3,)), ((2, 3, 4, 5), (5,))],
                         ids=str)
@pytest.mark.parametrize("const_slope", [True, False])
def test_prelu_onnx_slope_broadcasting(xshape, sshape, const_slope):
    rng = np.random.default_rng(14)
    x, s = rand(rng, xshape), rand(rng, sshape, 0.1, 1.0)
    if const_slope:
        check_onnx(one_node("PRelu", {"x": x}, initializers={"s": s}), {"x": x})
    else:
        check_onnx(one_node("PRelu", {"x": x, "s": s}), {"x": x, "s": s})


def test_prelu_openvino_slope_is_per_channel():
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    v = rand(np.random.default_rng(15), (2, 3, 4))
    model = Model([opset.prelu(x, slope)], [x])
    out = next(iter(netpass.reference.infer(model, {"x": v}).values()))
    np.testing.assert_allclose(out, np.where(v >= 0, v, v * slope[:, None]), rtol=RTOL, atol=ATOL)


# -- Clip --------------------------------------------------------------------------------------

def test_clip_opset6_attributes():
    feeds = {"x": rand(np.random.default_rng(16), (3, 4))}
    check_onnx(one_node("Clip", feeds, opset_version=6, min=-1.0, max=0.5), feeds)


@pytest.mark.parametrize("bounds", [("lo", "hi"), ("lo", ""), ("", "hi")])
def test_clip_constant_bounds_become_clamp(bounds):
    x = rand(np.random.default_rng(17), (3, 4))
    inits = {"lo": np.array(-1.0, np.float32), "hi": np.array(0.7, np.float32)}
    node = helper.make_node("Clip", ["x", *bounds], ["y0"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y0", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(v, k) for k, v in inits.items() if k in bounds])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    check_onnx(proto, {"x": x})
    types = {n.type_name for n in netpass.read_model(proto).get_ordered_ops()}
    assert "Clamp" in types


def test_clip_non_constant_bounds_use_maximum_minimum():
    rng = np.random.default_rng(18)
    feeds = {"x": rand(rng, (3, 4)), "lo": np.array(-0.5, np.float32),
             "hi": np.array(1.0, np.float32)}
    proto = one_node("Clip", feeds, opset_version=13)
    check_onnx(proto, feeds)
    types = {n.type_name for n in netpass.read_model(proto).get_ordered_ops()}
    assert {"Maximum", "Minimum"} <= types


def test_clip_integers():
    x = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    check_onnx(one_node("Clip", {"x": x}, opset_version=13,
                        initializers={"lo": np.array(-2, np.int32), "hi": np.array(3, np.int32)}),
               {"x": x})


def test_clamp_rounds_float_bounds_for_integers():
    x = opset.parameter([5], np.int32, name="x")
    out = netpass.reference.infer(Model([opset.clamp(x, -1.5, 2.5)], [x]),
                                  {"x": np.array([-3, -1, 0, 2, 3], np.int32)})
    np.testing.assert_array_equal(next(iter(out.values())), [-1, -1, 0, 2, 2])


# -- Cast --------------------------------------------------------------------------------------

@pytest.mark.parametrize("src,to", [
    (np.float32, TensorProto.INT32), (np.float32, TensorProto.INT64), (np.int64, TensorProto.FLOAT),
    (np.float32, TensorProto.BOOL), (np.bool_, TensorProto.FLOAT),
    (np.float32, TensorProto.FLOAT16), (np.int32, TensorProto.UINT8),
    (np.float32, TensorProto.DOUBLE)])
def test_cast_matches_onnxruntime(src, to):
    rng = np.random.default_rng(19)
    if src == np.bool_:
        x = rng.random((3, 4)) < 0.5
    elif np.dtype(src).kind == "f":
        x = rand(rng, (3, 4), -9, 9, src)
    else:
        x = rng.integers(0, 200, size=(3, 4)).astype(src)
    check_onnx(one_node("Cast", {"x": x}, to=to), {"x": x})


def test_castlike_takes_the_type_of_its_second_input():
    rng = np.random.default_rng(20)
    feeds = {"x": rand(rng, (3, 4), -9, 9), "like": np.zeros((1,), np.int64)}
    check_onnx(one_node("CastLike", feeds), feeds)


def test_cast_to_unsupported_type_is_refused():
    proto = one_node("Cast", {"x": np.zeros((2,), np.float32)}, to=TensorProto.COMPLEX64)
    with pytest.raises(netpass.errors.UnsupportedOpError, match="COMPLEX64"):
        netpass.read_model(proto)


# -- shape inference and partial values --------------------------------------------------------

class _Dims(Node):
    """Test-only source of a 1-D i64 tensor with known partial values (like ShapeOf)."""

    type_name = "TestDims"
    ATTRS = {"dims": ()}

    def infer_types(self) -> None:
        self.set_output_type(0, i64, [len(self.dims)])

    def infer_values(self) -> None:
        self.set_output_partial_value(0, list(self.dims))


def test_broadcast_keeps_symbols_and_dynamic_dims():
    n, m = Symbol("N"), Symbol("M")
    a = opset.parameter(PartialShape([Dimension(symbol=n), 1, 4]), np.float32)
    b = opset.parameter(PartialShape([Dimension(symbol=m), 4]), np.float32)
    out = opset.add(a, b).output(0).partial_shape
    assert out[0].symbol is n and out[1].symbol is m and out[2] == 4


def test_dynamic_rank_broadcasts_to_dynamic_rank():
    a = opset.parameter(PartialShape(None), np.float32)
    assert not opset.multiply(a, np.float32(2)).output(0).partial_shape.rank_is_static


def test_incompatible_shapes_raise_naming_the_node():
    a = opset.parameter([2, 3], np.float32)
    b = opset.parameter([4, 3], np.float32)
    with pytest.raises(ShapeInferenceError, match="Subtract"):
        opset.subtract(a, b)


def test_comparison_outputs_boolean_and_select_merges_shapes():
    a = opset.parameter(PartialShape([Dimension(2, 8), 3]), np.float32)
    cond = opset.greater(a, np.float32(0))
    sel = opset.select(cond, a, np.float32(0))
    assert cond.output(0).element_type.name == "boolean"
    assert sel.output(0).partial_shape == PartialShape([Dimension(2, 8), 3])


def test_interval_dims_merge_in_elementwise():
    a = opset.parameter(PartialShape([Dimension(2, 8)]), np.float32)
    b = opset.parameter(PartialShape([Dimension(4, 10)]), np.float32)
    assert opset.add(a, b).output(0).partial_shape == PartialShape([Dimension(4, 8)])


def test_mixed_element_types_are_rejected():
    a = opset.parameter([2], np.float32)
    b = opset.parameter([2], np.int64)
    with pytest.raises(ShapeInferenceError, match="element types"):
        opset.add(a, b)


def test_shape_arithmetic_propagates_partial_values():
    batch = Dimension(symbol=Symbol("B"))
    dims = _Dims([], dims=(batch, 3, 4)).output(0)
    doubled = opset.multiply(dims, np.array([1, 2, 1], np.int64))
    plus = opset.add(doubled, np.array(1, np.int64))
    halved = opset.divide(dims, np.array([1, 3, 2], np.int64))
    assert doubled.output(0).partial_value[0].symbol is batch.symbol
    assert doubled.output(0).partial_value[1:] == (6, 4)
    assert plus.output(0).partial_value[1:] == (7, 5)
    assert halved.output(0).partial_value[1:] == (1, 2)


def test_shape_arithmetic_folds_when_all_known():
    dims = _Dims([], dims=(2, 3, 4)).output(0)
    minus = opset.subtract(dims, np.array([1, 1, 1], np.int64))
    np.testing.assert_array_equal(minus.output(0).value, [1, 2, 3])


def test_convert_keeps_partial_values_of_int_shapes():
    batch = Dimension(symbol=Symbol("B"))
    dims = _Dims([], dims=(batch, 7)).output(0)
    conv = opset.convert(dims, "i32")
    pv = conv.output(0).partial_value
    assert pv[0].symbol is batch.symbol and pv[1] == 7
    assert conv.output(0).element_type.name == "i32"


def test_logical_not_rejects_float_input():
    with pytest.raises(ShapeInferenceError, match="boolean"):
        opset.logical_not(opset.parameter([2], np.float32))


def test_logical_and_rejects_float_inputs():
    x = opset.parameter([2], np.float32)
    with pytest.raises(ShapeInferenceError, match="boolean"):
        opset.logical_and(x, x)


def test_commutative_flags():
    assert opset.add(1.0, 2.0).commutative and not opset.subtract(1.0, 2.0).commutative
    assert netpass.ops.LogicalXor.commutative and netpass.ops.Maximum.commutative


def test_families_for_pattern_matching():
    x = opset.parameter([2], np.float32)
    assert isinstance(opset.relu(x), netpass.ops.UnaryElementwiseArithmetic)
    assert isinstance(opset.add(x, x), netpass.ops.BinaryElementwiseArithmetic)
    assert isinstance(opset.less(x, x), netpass.ops.BinaryElementwiseComparison)


# -- ONNX export -------------------------------------------------------------------------------

def _export_case(build, shape=(2, 3, 4), lo=-3.0, hi=3.0, dtype=np.float32):
    x = opset.parameter(list(shape), dtype, name="x")
    model = Model([build(x)], [x])
    if np.dtype(dtype).kind == "f":
        v = rand(np.random.default_rng(21), shape, lo, hi, dtype)
    else:
        v = np.random.default_rng(21).integers(-20, 20, size=shape).astype(dtype)
    check_export(model, {"x": v})


EXPORTS = {
    "gelu_erf": lambda x: opset.gelu(x, "erf"),
    "gelu_tanh": lambda x: opset.gelu(x, "tanh"),
    "swish_beta": lambda x: opset.swish(x, 0.8),
    "swish": lambda x: opset.swish(x),
    "hsigmoid": lambda x: opset.hsigmoid(x),
    "hswish": lambda x: opset.hswish(x),
    "floor_mod_float": lambda x: opset.floor_mod(x, np.float32(1.3)),
    "mod_float": lambda x: opset.mod(x, np.float32(1.3)),
    "not_equal": lambda x: opset.not_equal(opset.floor(x), np.float32(1)),
    "squared_difference": lambda x: opset.squared_difference(x, np.float32(0.5)),
    "round_away": lambda x: opset.round(x, "half_away_from_zero"),
    "clamp": lambda x: opset.clamp(x, -1.0, 2.0),
    "prelu_channel": lambda x: opset.prelu(x, np.array([0.1, 0.2, 0.3], np.float32)),
    "selu": lambda x: opset.selu(x, 1.5, 1.1),
    "hard_sigmoid": lambda x: opset.hard_sigmoid(x, 0.3, 0.4),
    "elu": lambda x: opset.elu(x, 0.5),
    "is_inf": lambda x: opset.is_inf(opset.divide(np.float32(1), opset.floor(x))),
    "convert": lambda x: opset.convert(x, "i32"),
    "select": lambda x: opset.select(opset.less(x, np.float32(0)), x, opset.exp(x)),
    "select_boolean": lambda x: opset.convert(opset.select(
        opset.less(x, np.float32(0)), opset.greater(x, np.float32(-1)),
        opset.less(x, np.float32(1))), "f32"),
    "logic": lambda x: opset.logical_xor(opset.less(x, np.float32(1)),
                                         opset.greater(x, np.float32(-1))),
    "softplus_softsign": lambda x: opset.softsign(opset.softplus(x)),
    "mish": lambda x: opset.mish(x),
    "convert_like": lambda x: opset.convert_like(x, np.zeros(1, np.int64)),
}


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_export_round_trip(name):
    _export_case(EXPORTS[name])


SIMPLE_UNARY = ["relu", "sigmoid", "tanh", "exp", "abs", "negative", "erf", "floor", "ceiling",
                "sign", "sin", "cos", "tan", "atan", "sinh", "cosh", "asinh"]
SIMPLE_BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum"]
SIMPLE_COMPARE = ["equal", "less", "greater", "less_equal", "greater_equal"]


@pytest.mark.parametrize("name", SIMPLE_UNARY + SIMPLE_BINARY + SIMPLE_COMPARE)
def test_export_one_to_one_ops_round_trip(name):
    fn = getattr(opset, name)
    if name in SIMPLE_UNARY:
        _export_case(fn)
    elif name in SIMPLE_BINARY:
        _export_case(lambda x: fn(x, np.array([0.5, -1.5, 2.0, 3.0], np.float32)))
    else:
        _export_case(lambda x: opset.convert(fn(opset.floor(x), np.float32(1)), "f32"))


DOMAIN_LIMITED = {  # name: (build, lowest input, highest input)
    "log_sqrt_pow": (lambda x: opset.add(opset.add(opset.log(x), opset.sqrt(x)),
                                         opset.power(x, np.float32(1.5))), 0.1, 3.0),
    "asin_acos_atanh": (lambda x: opset.add(opset.asin(x), opset.add(opset.acos(x),
                                                                     opset.atanh(x))), -0.9, 0.9),
    "acosh": (lambda x: opset.acosh(x), 1.1, 3.0),
}


@pytest.mark.parametrize("name", sorted(DOMAIN_LIMITED))
def test_export_domain_limited_ops_round_trip(name):
    build, lo, hi = DOMAIN_LIMITED[name]
    _export_case(build, lo=lo, hi=hi)


def test_export_is_nan():
    _export_case(lambda x: opset.convert(opset.is_nan(opset.log(x)), "f32"))


def test_export_integer_python_division_floors():
    _export_case(lambda x: opset.divide(x, np.array([3, -4, 5, -2], np.int32)), shape=(3, 4),
                 dtype=np.int32)


def test_export_integer_clamp_and_floor_mod():
    _export_case(lambda x: opset.floor_mod(opset.clamp(x, -7.5, 9.2), np.array(4, np.int64)),
                 shape=(3, 4), dtype=np.int64)


def test_parameter_inputs_must_be_scalars():
    x = opset.parameter([2, 3], np.float32)
    with pytest.raises(ShapeInferenceError, match="alpha"):
        opset.selu(x, np.ones(3, np.float32), 1.0)


def test_elu_takes_exactly_one_input():
    x = opset.parameter([2], np.float32)
    with pytest.raises(ShapeInferenceError, match="expects inputs"):
        netpass.ops.Elu([x, x], alpha=1.0)


def test_integer_division_partial_values_follow_the_mode():
    dims = _Dims([], dims=(Dimension(symbol=Symbol("B")), -7)).output(0)
    floor = opset.divide(dims, np.array([1, 2], np.int64))
    trunc = opset.divide(dims, np.array([1, 2], np.int64), m_pythondiv=False)
    assert floor.output(0).partial_value[1] == -4 and trunc.output(0).partial_value[1] == -3


# -- OpenVINO agrees (IR written by Serialize, run on OpenVINO's CPU plugin) -------------------

def check_openvino(model: Model, feeds: dict, tmp_path) -> None:
    ov = pytest.importorskip("openvino")
    xml = tmp_path / "model.xml"
    Serialize(xml).run_on_model(model)
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled([feeds[n] for n in model.input_names])
    expected = netpass.reference.infer(model, feeds)
    for i, name in enumerate(model.output_names):
        np.testing.assert_allclose(np.asarray(got[compiled.output(i)]).astype(np.float64),
                                   expected[name].astype(np.float64), rtol=RTOL, atol=ATOL)


OPENVINO = {
    "gelu_tanh": lambda x: opset.gelu(x, "tanh"),
    "gelu_erf": lambda x: opset.gelu(x, "erf"),
    "swish_beta": lambda x: opset.swish(x, 0.7),
    "hswish": opset.hswish,
    "hsigmoid": opset.hsigmoid,
    "hard_sigmoid": lambda x: opset.hard_sigmoid(x, 0.3, 0.4),
    "selu": lambda x: opset.selu(x, 1.5, 1.1),
    "elu": lambda x: opset.elu(x, 0.6),
    "softsign": opset.softsign,
    "softplus": opset.softplus,
    "round_even": lambda x: opset.round(opset.multiply(x, np.float32(2)), "half_to_even"),
    "round_away": lambda x: opset.round(opset.multiply(x, np.float32(2)), "half_away_from_zero"),
    "floor_mod": lambda x: opset.floor_mod(x, np.float32(0.7)),
    "mod": lambda x: opset.mod(x, np.float32(-0.7)),
    "squared_difference": lambda x: opset.squared_difference(x, np.float32(0.3)),
    "power": lambda x: opset.power(opset.abs(x), np.float32(1.7)),
    "prelu_per_channel": lambda x: opset.prelu(x, np.array([0.1, 0.2, 0.3], np.float32)),
    "prelu_numpy": lambda x: opset.prelu(x, np.array([[[0.1, 0.2, 0.3, 0.4]]], np.float32)),
    "logical": lambda x: opset.convert(opset.logical_xor(
        opset.greater(x, np.float32(0)), opset.logical_not(opset.less(x, np.float32(1)))), "f32"),
    "is_inf": lambda x: opset.convert(opset.is_inf(
        opset.divide(np.float32(1), opset.floor(x)), {"detect_negative": False}), "f32"),
    "clamp": lambda x: opset.clamp(x, -0.5, 0.5),
    "sign_erf": lambda x: opset.multiply(opset.sign(x), opset.erf(x)),
    "atanh": lambda x: opset.atanh(opset.multiply(x, np.float32(0.2))),
    "select": lambda x: opset.select(opset.less(x, np.float32(0)), x, np.float32(2)),
    "convert_truncates": lambda x: opset.convert(opset.multiply(x, np.float32(3)), "i32"),
    "convert_like": lambda x: opset.convert_like(opset.multiply(x, np.float32(3)),
                                                 np.zeros(1, np.int32)),
    "mish": opset.mish,
}


@pytest.mark.parametrize("name", sorted(OPENVINO))
def test_matches_openvino(name, tmp_path):
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    feeds = {"x": rand(np.random.default_rng(22), (2, 3, 4))}
    check_openvino(Model([OPENVINO[name](x)], [x]), feeds, tmp_path)


@pytest.mark.parametrize("op", ["c_division", "floor_mod", "mod", "power", "clamp"])
def test_integer_ops_match_openvino(op, tmp_path):
    # OpenVINO's CPU plugin truncates integer Divide even with m_pythondiv (its reference
    # floors, as netpass does), so the flooring variant is checked above against numpy only.
    x = opset.parameter([3, 4], np.int32, name="x")
    d = np.array([3, -4, 5, -2], np.int32)
    node = {"c_division": lambda: opset.divide(x, d, m_pythondiv=False),
            "floor_mod": lambda: opset.floor_mod(x, d), "mod": lambda: opset.mod(x, d),
            "power": lambda: opset.power(x, np.array([2, 1, 0, 3], np.int32)),
            "clamp": lambda: opset.clamp(x, -3.5, 4.5)}[op]()
    feeds = {"x": np.random.default_rng(23).integers(-20, 20, size=(3, 4)).astype(np.int32)}
    check_openvino(Model([node], [x]), feeds, tmp_path)


def check_read_from_openvino(build, tmp_path) -> None:
    """A graph built with OpenVINO's own opset and saved by OpenVINO reads into netpass and
    computes what OpenVINO's CPU plugin computes."""
    ov = pytest.importorskip("openvino")
    ovops = pytest.importorskip("openvino.opset13")
    param = ovops.parameter([2, 3, 4], np.float32, name="x")
    outs = [o if isinstance(o, ov.Output) else o.output(0) for o in build(ovops, param)]
    ov_model = ov.Model(outs, [param])
    xml = tmp_path / "ov.xml"
    ov.save_model(ov_model, str(xml), compress_to_fp16=False)
    x = rand(np.random.default_rng(26), (2, 3, 4))
    expected = ov.Core().compile_model(ov_model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})([x])
    model = netpass.read_model(str(xml))
    got = list(netpass.reference.infer(model, {model.input_names[0]: x}).values())
    for i, out in enumerate(got):
        ref = np.asarray(expected[i])
        assert out.shape == ref.shape
        np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64),
                                   rtol=RTOL, atol=ATOL, err_msg=outs[i].get_node().get_type_name())


def test_reads_openvino_ir(tmp_path):
    def build(o, x):
        f32 = lambda v: o.constant(np.array(v, np.float32))  # noqa: E731
        return [o.gelu(x, "tanh"), o.softsign(x), o.swish(x, f32(1.5)), o.clamp(x, -0.5, 0.5),
                o.elu(x, 0.3), o.round(x, "half_away_from_zero"),
                o.convert(o.is_inf(x, {"detect_negative": False}), "f32"), o.convert(x, "i32"),
                o.hsigmoid(x), o.hswish(x), o.mish(x), o.prelu(x, f32([0.1, 0.2, 0.3])),
                o.hard_sigmoid(x, f32(0.3), f32(0.4)), o.selu(x, f32([1.5]), f32([1.1])),
                o.floor_mod(x, f32(0.7)), o.squared_difference(x, f32(0.3)),
                o.convert_like(x, o.constant(np.array([1], np.int32))),
                o.select(o.less(x, f32(0)), x, f32(2)), o.divide(x, f32(1.5)),
                o.logical_xor(o.greater(x, f32(0)), o.less(x, f32(1)))]
    check_read_from_openvino(build, tmp_path)


def test_equal_and_select_carry_shape_values_through_torch_expand():
    """torch's expand(-1 dims) exports Where(Equal(shape, -1), 1, shape): a dimension is never
    -1, so the target keeps its dims and symbols."""
    batch, seq = Dimension(symbol=Symbol("B")), Dimension(symbol=Symbol("S"))
    shape = _Dims([], dims=(batch, -1, seq, 7)).output(0)
    is_minus_one = opset.equal(shape, np.array(-1, np.int64))
    assert is_minus_one.output(0).value.tolist() == [False, True, False, False]
    target = opset.select(is_minus_one, np.array(1, np.int64), shape)
    pv = target.output(0).partial_value
    assert pv[0].symbol is batch.symbol and pv[1] == 1 and pv[2].symbol is seq.symbol
    assert pv[3] == 7
    x = opset.parameter(PartialShape([Dimension(), 1, Dimension(), 7]), np.float32)
    out = opset.broadcast(x, target, "bidirectional").output(0).partial_shape
    assert out[0].symbol is batch.symbol and out[2].symbol is seq.symbol


def test_equal_of_unknown_dims_is_unknown_and_select_keeps_agreeing_branches():
    batch = Dimension(symbol=Symbol("B"))
    a = _Dims([], dims=(batch, Dimension(), 3)).output(0)
    b = _Dims([], dims=(batch, 5, Dimension(1, 2))).output(0)
    eq = opset.equal(a, b).output(0).partial_value
    assert eq[0] == 1 and not isinstance(eq[1], int) and eq[2] == 0
    cond = opset.parameter([3], "boolean")
    pv = opset.select(cond, a, _Dims([], dims=(batch, 4, 3))).output(0).partial_value
    assert pv[0].symbol is batch.symbol and not isinstance(pv[1], int) and pv[2] == 3


# -- opset 6 and before --------------------------------------------------------------------------

def _opset6_node(op: str, feeds: dict, initializers: dict | None = None,
                 **attrs) -> onnx.ModelProto:
    """``op`` at opset 6 (onnx's own shape inference of the legacy broadcast refuses an axis
    alignment: no inference here, the output typed float32)."""
    initializers = initializers or {}
    inputs = [helper.make_tensor_value_info(k, ONNX_TYPE[v.dtype], v.shape)
              for k, v in feeds.items()]
    out = helper.make_tensor_value_info("y0", TensorProto.FLOAT, None)
    node = helper.make_node(op, list(feeds) + list(initializers), ["y0"], **attrs)
    graph = helper.make_graph([node], "g", inputs, [out],
                              [onnx.numpy_helper.from_array(v, k) for k, v in initializers.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    proto.ir_version = 3
    return proto


@pytest.mark.parametrize("op,fn", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                                   ("Div", np.divide), ("Pow", np.power)],
                         ids=["Add", "Sub", "Mul", "Div", "Pow"])
@pytest.mark.parametrize("bshape,axis", [((3,), 1), ((3, 4), 1), ((2,), 0), ((4,), -1),
                                         ((1,), 1), ((), 0)], ids=str)
def test_legacy_broadcast_aligns_the_right_operand_at_axis(op, fn, bshape, axis):
    """Opset < 7: ``broadcast=1, axis=k`` matches B's dims with A's from k on (onnxruntime
    runs opset 7 and later only: the expected values are numpy's on B given trailing ones)."""
    rng = np.random.default_rng(31)
    a, b = rand(rng, (2, 3, 4), 0.5, 2.0), rand(rng, bshape, 0.5, 2.0)
    model = netpass.read_model(_opset6_node(op, {"a": a, "b": b}, broadcast=1, axis=axis))
    out = next(iter(netpass.reference.infer(model, {"a": a, "b": b}).values()))
    start = axis % 3 if bshape else 3
    expected = fn(a, b.reshape(bshape + (1,) * (3 - start - len(bshape))))
    np.testing.assert_allclose(out, expected, rtol=RTOL, atol=ATOL)


def test_legacy_broadcast_outside_the_rank_is_refused_naming_the_node():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(NetpassError, match="axis 1 does not place a rank-2"):
        netpass.read_model(_opset6_node("Add", {"a": a, "b": b}, broadcast=1, axis=1))


def test_prelu_opset6_slope_is_per_channel():
    """PRelu-6's 1-D slope applies along dim 1 (pytorch-converted's PReLU cases); opset 7
    broadcasts it numpy-style instead (test_prelu_onnx_slope_broadcasting)."""
    rng = np.random.default_rng(32)
    x, s = rand(rng, (2, 3, 4)), rand(rng, (3,), 0.1, 1.0)
    model = netpass.read_model(_opset6_node("PRelu", {"x": x}, {"s": s}))
    out = next(iter(netpass.reference.infer(model, {"x": x}).values()))
    np.testing.assert_allclose(out, np.where(x >= 0, x, x * s[:, None]), rtol=RTOL, atol=ATOL)
