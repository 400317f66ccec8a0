"""Reductions, TopK, ArgMax/ArgMin and CumSum: ONNX import vs onnxruntime over opset variants
(axes attribute vs input, keepdims, noop_with_empty_axes), partial-shape inference and ONNX
export round trips.

Tolerances: rtol 1e-4, atol 1e-5 for floats; integers exact.
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
from netpass.core.shape import PartialShape
from netpass.errors import ShapeInferenceError, UnsupportedOpError
from netpass.frontend.onnx_writer import to_onnx
from netpass.passes.serialize import Serialize

RTOL, ATOL = 1e-4, 1e-5
ONNX_TYPE = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
             np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL}


def one_node(op: str, feeds: dict, n_out: int = 1, opset_version: int = 17,
             initializers: dict | None = None, inputs: list[str] | None = None,
             **attrs) -> onnx.ModelProto:
    """One ONNX node reading ``inputs`` (default: feeds then initializers); output types from
    ONNX shape inference."""
    initializers = initializers or {}
    vis = [helper.make_tensor_value_info(k, ONNX_TYPE[v.dtype], v.shape) for k, v in feeds.items()]
    outs = [onnx.ValueInfoProto(name=f"y{i}") for i in range(n_out)]
    names = inputs if inputs is not None else list(feeds) + list(initializers)
    node = helper.make_node(op, names, [o.name for o in outs], **attrs)
    graph = helper.make_graph([node], "g", vis, outs,
                              [onnx.numpy_helper.from_array(v, k) for k, v in initializers.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)])
    proto.ir_version = 8 if opset_version <= 17 else 9
    return onnx.shape_inference.infer_shapes(proto, strict_mode=True)


def check_onnx(proto: onnx.ModelProto, feeds: dict) -> None:
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, feeds)
    got = netpass.reference.infer(netpass.read_model(proto), feeds)
    for vo, ref in zip(proto.graph.output, expected):
        out = got[vo.name]
        assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, ref.shape, out.dtype)
        if ref.dtype.kind == "f":
            np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)
        else:
            np.testing.assert_array_equal(out, ref)


def check_export(model: Model, feeds: dict) -> None:
    proto = to_onnx(model)
    onnx.checker.check_model(proto)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = netpass.reference.infer(model, feeds)
    for name, ref in zip(model.output_names, sess.run(None, feeds)):
        np.testing.assert_allclose(got[name], ref, rtol=RTOL, atol=ATOL)


def rand(rng, shape, lo=-3.0, hi=3.0):
    x = rng.uniform(lo, hi, size=shape)
    return np.where(np.abs(x) < 1e-2, 0.5, x).astype(np.float32)


REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
AXES = [[1], [0, 2], [-1], [-3, -2, -1]]


def _data(op, rng, shape=(2, 3, 4)):
    # LogSum needs positive sums; Prod stays near 1 so it neither overflows nor vanishes.
    if op == "ReduceLogSum":
        return rand(rng, shape, 0.1, 2.0)
    if op == "ReduceProd":
        return rand(rng, shape, 0.5, 1.5)
    return rand(rng, shape)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes_attribute_opset13(op, axes, keepdims):
    rng = np.random.default_rng(0)
    feeds = {"x": _data(op, rng)}
    if op == "ReduceSum":  # axes is an input from opset 13 on
        proto = one_node(op, feeds, opset_version=13, keepdims=keepdims,
                         initializers={"axes": np.array(axes, np.int64)})
    else:
        proto = one_node(op, feeds, opset_version=13, axes=axes, keepdims=keepdims)
    check_onnx(proto, feeds)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes_input_opset18(op, axes, keepdims):
    rng = np.random.default_rng(1)
    feeds = {"x": _data(op, rng)}
    proto = one_node(op, feeds, opset_version=18, keepdims=keepdims,
                     initializers={"axes": np.array(axes, np.int64)})
    check_onnx(proto, feeds)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_without_axes_reduces_all(op, keepdims):
    feeds = {"x": _data(op, np.random.default_rng(2))}
    check_onnx(one_node(op, feeds, opset_version=18, keepdims=keepdims), feeds)


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_noop_with_empty_axes_reduces_nothing(op):
    feeds = {"x": _data(op, np.random.default_rng(3))}
    proto = one_node(op, feeds, opset_version=18, noop_with_empty_axes=1,
                     initializers={"axes": np.zeros((0,), np.int64)})
    check_onnx(proto, feeds)


def test_reduce_axes_from_graph_input():
    rng = np.random.default_rng(4)
    feeds = {"x": rand(rng, (2, 3, 4)), "axes": np.array([0, 2], np.int64)}
    check_onnx(one_node("ReduceMean", feeds, opset_version=18, keepdims=1), feeds)


def test_reduce_axes_of_unknown_length_is_refused():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    axes = helper.make_tensor_value_info("axes", TensorProto.INT64, ["n"])
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"])
    graph = helper.make_graph([node], "g", [x, axes], [helper.make_tensor_value_info("y", 1, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(UnsupportedOpError, match="axes of unknown length"):
        netpass.read_model(proto)


def test_reduce_max_of_integers():
    x = np.random.default_rng(5).integers(-100, 100, size=(3, 5)).astype(np.int64)
    check_onnx(one_node("ReduceMax", {"x": x}, opset_version=18,
                        initializers={"axes": np.array([1], np.int64)}), {"x": x})


def test_reduce_logsumexp_large_values_do_not_overflow():
    feeds = {"x": rand(np.random.default_rng(6), (2, 5), 100.0, 120.0)}
    check_onnx(one_node("ReduceLogSumExp", feeds, opset_version=18,
                        initializers={"axes": np.array([1], np.int64)}), feeds)


@pytest.mark.parametrize("fill", [-np.inf, np.inf])
def test_reduce_logsumexp_of_infinite_rows(fill):
    x = rand(np.random.default_rng(16), (3, 4))
    x[1] = fill
    x[2, 0] = fill
    proto = one_node("ReduceLogSumExp", {"x": x}, opset_version=18, keepdims=0,
                     initializers={"axes": np.array([1], np.int64)})
    check_onnx(proto, {"x": x})


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data(), st.booleans(),
       st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2"]))
@settings(max_examples=25, deadline=None)
def test_reduce_hypothesis(shape, data, keepdims, op):
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                              unique_by=lambda a: a % rank))
    feeds = {"x": rand(np.random.default_rng(7), tuple(shape))}
    check_onnx(one_node(op, feeds, opset_version=18, keepdims=int(keepdims),
                        initializers={"axes": np.array(axes, np.int64)}), feeds)


def test_logical_reductions():
    b = opset.parameter([2, 3, 4], np.bool_, name="b")
    model = Model([opset.reduce_logical_and(b, [1], True), opset.reduce_logical_or(b, [0, 2])], [b])
    v = np.random.default_rng(8).random((2, 3, 4)) < 0.7
    out = list(netpass.reference.infer(model, {"b": v}).values())
    np.testing.assert_array_equal(out[0], np.all(v, axis=1, keepdims=True))
    np.testing.assert_array_equal(out[1], np.any(v, axis=(0, 2)))


def test_empty_axes_reduce_nothing_in_openvino_semantics():
    x = opset.parameter([2, 3], np.float32, name="x")
    r = opset.reduce_sum(x, np.zeros((0,), np.int64))
    v = rand(np.random.default_rng(9), (2, 3))
    assert r.output(0).partial_shape == PartialShape([2, 3])
    out = netpass.reference.infer(Model([r], [x]), {"x": v})
    np.testing.assert_array_equal(next(iter(out.values())), v)


def test_reduce_max_of_empty_set_is_lowest():
    x = opset.parameter([2, 0], np.float32, name="x")
    out = netpass.reference.infer(Model([opset.reduce_max(x, [1])], [x]),
                                  {"x": np.zeros((2, 0), np.float32)})
    np.testing.assert_array_equal(next(iter(out.values())), [-np.inf, -np.inf])


# -- shape inference ---------------------------------------------------------------------------

def test_reduce_shape_keeps_symbols_of_kept_dims():
    n = Symbol("N")
    x = opset.parameter(PartialShape([Dimension(symbol=n), Dimension(2, 5), 4]), np.float32)
    ps = opset.reduce_mean(x, [1]).output(0).partial_shape
    assert ps[0].symbol is n and ps[1] == 4 and len(ps) == 2
    assert opset.reduce_mean(x, [-1], True).output(0).partial_shape[1] == Dimension(2, 5)


def test_reduce_unknown_axes_keep_rank_only_with_keep_dims():
    x = opset.parameter([2, 3, 4], np.float32)
    axes = opset.parameter([1], np.int64)
    assert opset.reduce_sum(x, axes, True).output(0).partial_shape == PartialShape.dynamic(3)
    assert not opset.reduce_sum(x, axes).output(0).partial_shape.rank_is_static


def test_reduce_dynamic_rank_stays_dynamic():
    x = opset.parameter(PartialShape(None), np.float32)
    assert not opset.reduce_l1(x, [0]).output(0).partial_shape.rank_is_static


def test_reduce_axis_out_of_range_raises():
    with pytest.raises(ShapeInferenceError, match="axis 3"):
        opset.reduce_sum(opset.parameter([2, 3, 4], np.float32), [3])


# -- TopK, ArgMax/ArgMin -------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("k", [1, 3])
def test_topk_matches_onnxruntime(axis, largest, k):
    feeds = {"x": rand(np.random.default_rng(10), (4, 5, 6))}
    check_onnx(one_node("TopK", feeds, n_out=2, opset_version=11, axis=axis, largest=largest,
                        initializers={"k": np.array([k], np.int64)}), feeds)


def test_topk_opset1_k_attribute():
    feeds = {"x": rand(np.random.default_rng(11), (3, 7))}
    check_onnx(one_node("TopK", feeds, n_out=2, opset_version=9, k=2), feeds)


def test_topk_ties_keep_lower_index_first():
    feeds = {"x": np.array([[1, 3, 3, 2, 3]], np.float32)}
    check_onnx(one_node("TopK", feeds, n_out=2, initializers={"k": np.array([3], np.int64)}), feeds)


def test_topk_sort_by_index_and_i32_indices():
    x = opset.parameter([5], np.float32, name="x")
    node = opset.topk(x, 3, 0, "max", "index", "i32")
    out = netpass.reference.infer(Model([node.output(0), node.output(1)], [x]),
                                  {"x": np.array([5, 1, 4, 2, 3], np.float32)})
    values, indices = out.values()
    np.testing.assert_array_equal(values, [5, 4, 3])
    np.testing.assert_array_equal(indices, [0, 2, 4])
    assert indices.dtype == np.int32


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.uint64, np.bool_])
def test_topk_max_of_integers_at_their_limits(dtype):
    """The reference orders integers exactly: the minimum is the smallest (its negation wraps
    to itself), and uint64 beyond 2**53 keeps its order (no float64 keys)."""
    if dtype is np.bool_:
        data, top = np.array([0, 1, 0, 1, 0], dtype), [1, 3, 0]
    else:
        lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
        data, top = np.array([lo, hi - 1, lo, hi, lo], dtype), [3, 1, 0]
    x = opset.parameter([5], dtype, name="x")
    for mode, want in (("max", top), ("min", [0, 2, 4])):
        node = opset.topk(x, 3, 0, mode, "value", "i32")
        _, idx = netpass.reference.infer(Model([node.output(0), node.output(1)], [x]),
                                         {"x": data}).values()
        np.testing.assert_array_equal(idx, want, err_msg=f"{mode}")


def test_topk_shape_with_unknown_k_and_dynamic_dims():
    n = Symbol("N")
    x = opset.parameter(PartialShape([Dimension(symbol=n), Dimension(1, 10)]), np.float32)
    k = opset.parameter([], np.int64)
    node = opset.topk(x, k, 1, "min", "value")
    assert node.output(0).partial_shape[0].symbol is n
    assert node.output(0).partial_shape[1] == Dimension(0, 10)
    assert opset.topk(x, 4, 1, "max", "value").output(1).partial_shape[1] == Dimension(1, 4)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_argmax_argmin_match_onnxruntime(op, axis, keepdims):
    rng = np.random.default_rng(12)
    x = rng.integers(0, 4, size=(3, 4, 5)).astype(np.float32)  # many ties
    check_onnx(one_node(op, {"x": x}, axis=axis, keepdims=keepdims), {"x": x})


# -- CumSum ------------------------------------------------------------------------------------

@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, -1, 1])
def test_cumsum_matches_onnxruntime(exclusive, reverse, axis):
    feeds = {"x": rand(np.random.default_rng(13), (3, 4, 2))}
    check_onnx(one_node("CumSum", feeds, exclusive=exclusive, reverse=reverse,
                        initializers={"axis": np.array(axis, np.int64)}), feeds)


def test_cumsum_integers():
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    check_onnx(one_node("CumSum", {"x": x}, initializers={"axis": np.array(1, np.int32)}), {"x": x})


# -- ONNX export -------------------------------------------------------------------------------

EXPORTS = {
    "mean": lambda x: opset.reduce_mean(x, [1], True),
    "sum": lambda x: opset.reduce_sum(x, [0, 2]),
    "sum_empty_axes": lambda x: opset.reduce_sum(x, np.zeros((0,), np.int64)),
    "max_min": lambda x: opset.add(opset.reduce_max(x, [2]), opset.reduce_min(x, [2])),
    "prod": lambda x: opset.reduce_prod(x, [-1], True),
    "l1_l2": lambda x: opset.multiply(opset.reduce_l1(x, [1]), opset.reduce_l2(x, [1])),
    "logical": lambda x: opset.convert(
        opset.reduce_logical_and(opset.greater(x, np.float32(-2)), [1]), "f32"),
    "logical_or": lambda x: opset.convert(
        opset.reduce_logical_or(opset.greater(x, np.float32(2)), [0, 1]), "f32"),
    "topk_values": lambda x: opset.topk(x, 2, 1, "min", "value").output(0),
    "topk_i32": lambda x: opset.convert(opset.topk(x, 2, -1, "max", "value").output(1), "f32"),
    "cumsum": lambda x: opset.cumsum(x, 1, exclusive=True, reverse=True),
}


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_export_round_trip(name):
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    check_export(Model([EXPORTS[name](x)], [x]), {"x": rand(np.random.default_rng(14), (2, 3, 4))})


def test_export_topk_sort_by_index_is_refused():
    x = opset.parameter([5], np.float32, name="x")
    node = opset.topk(x, 2, 0, "max", "index")
    with pytest.raises(UnsupportedOpError, match="sort=index"):
        to_onnx(Model([node.output(0)], [x]))


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
    "min_keep": lambda x: opset.reduce_min(x, [1], True),
    "max": lambda x: opset.reduce_max(x, [0, 2]),
    "l1": lambda x: opset.reduce_l1(x, [2]),
    "l2": lambda x: opset.reduce_l2(x, [-1], True),
    "mean": lambda x: opset.reduce_mean(x, [-1]),
    "prod": lambda x: opset.reduce_prod(x, [1]),
    "sum_all": lambda x: opset.reduce_sum(x, [0, 1, 2]),
    "logical_or": lambda x: opset.convert(
        opset.reduce_logical_or(opset.greater(x, np.float32(1)), [2]), "f32"),
    "logical_and": lambda x: opset.convert(
        opset.reduce_logical_and(opset.greater(x, np.float32(-2)), [1], True), "f32"),
    "topk_min_by_index": lambda x: opset.topk(x, 2, 2, "min", "index", "i64").output(1),
    "topk_max_values": lambda x: opset.topk(x, 3, 1, "max", "value").output(0),
    "topk_max_indices": lambda x: opset.topk(x, 3, -1, "max", "value").output(1),
    "cumsum_exclusive": lambda x: opset.cumsum(x, 2, True, False),
    "cumsum_reverse": lambda x: opset.cumsum(x, -1, False, True),
    "cumsum_both": lambda x: opset.cumsum(x, 0, True, True),
}


@pytest.mark.parametrize("name", sorted(OPENVINO))
def test_matches_openvino(name, tmp_path):
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    feeds = {"x": rand(np.random.default_rng(15), (2, 3, 4))}
    check_openvino(Model([OPENVINO[name](x)], [x]), feeds, tmp_path)


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
        i64 = lambda v: o.constant(np.array(v, np.int64))  # noqa: E731
        return [o.topk(x, i64(2), 1, "min", "index").output(1),
                o.topk(x, i64(3), -1, "max", "value").output(0), o.reduce_l2(x, i64([1]), True),
                o.reduce_l1(x, i64([0, 2])), o.reduce_mean(x, i64([-1])),
                o.reduce_max(x, i64([1])), o.reduce_prod(x, i64([2]), True),
                o.cumsum(x, i64(2), True, True),
                o.reduce_logical_or(o.greater(x, o.constant(np.float32(1))), i64([2]))]
    check_read_from_openvino(build, tmp_path)
