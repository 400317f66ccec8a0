"""Softmax, LogSoftmax, MVN, BatchNormInference, NormalizeL2 and the ONNX normalizations built
from them (LayerNormalization, InstanceNormalization, MeanVarianceNormalization,
LpNormalization): ONNX import vs onnxruntime, OpenVINO semantics, partial shapes and export.

Tolerances: rtol 1e-4, atol 1e-5.
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
from netpass.errors import ShapeInferenceError
from netpass.frontend.onnx_writer import to_onnx
from netpass.passes.serialize import Serialize
from netpass.testing import RUNTIME_DEVICE

RTOL, ATOL = 1e-4, 1e-5


def one_node(op: str, feeds: dict, n_out: int = 1, opset_version: int = 17,
             initializers: dict | None = None, **attrs) -> onnx.ModelProto:
    """One ONNX node reading float32 ``feeds`` then ``initializers``, with float32 outputs."""
    initializers = initializers or {}
    vis = [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in feeds.items()]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None) for i in range(n_out)]
    node = helper.make_node(op, list(feeds) + list(initializers), [o.name for o in outs], **attrs)
    graph = helper.make_graph([node], "g", vis, outs,
                              [onnx.numpy_helper.from_array(v, k) for k, v in initializers.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)])
    proto.ir_version = 8 if opset_version <= 17 else 10
    return proto


def check_onnx(proto: onnx.ModelProto, feeds: dict) -> None:
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, feeds)
    got = netpass.reference.infer(netpass.read_model(proto), feeds)
    for vo, ref in zip(proto.graph.output, expected):
        assert got[vo.name].shape == ref.shape, (vo.name, got[vo.name].shape, ref.shape)
        np.testing.assert_allclose(got[vo.name], ref, rtol=RTOL, atol=ATOL, err_msg=vo.name)


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


def infer_one(node, x, value: np.ndarray) -> np.ndarray:
    """Run the one-output ``node`` fed by parameter ``x`` on ``value``."""
    return next(iter(netpass.reference.infer(Model([node], [x]), {"x": value}).values()))


# -- Softmax / LogSoftmax ----------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
def test_softmax_opset13_axis(op, axis):
    feeds = {"x": rand(np.random.default_rng(0), (2, 3, 4), -5, 5)}
    check_onnx(one_node(op, feeds, axis=axis), feeds)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis,shape", [(1, (2, 3, 4)), (0, (2, 3)), (1, (2, 3)),
                                        (-2, (2, 3, 4, 5)), (2, (2, 3, 4, 5))], ids=str)
def test_softmax_before_opset13_flattens_to_2d(op, axis, shape):
    feeds = {"x": rand(np.random.default_rng(1), shape, -5, 5)}
    check_onnx(one_node(op, feeds, opset_version=11, axis=axis), feeds)


def test_softmax_before_opset13_default_axis_is_1():
    feeds = {"x": rand(np.random.default_rng(2), (2, 3, 4), -5, 5)}
    check_onnx(one_node("Softmax", feeds, opset_version=11), feeds)


def test_softmax_before_opset13_with_dynamic_dims():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "T"])
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    graph = helper.make_graph([node], "g", [x], [helper.make_tensor_value_info("y", 1, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    proto.ir_version = 8
    check_onnx(proto, {"x": rand(np.random.default_rng(3), (2, 3, 5), -5, 5)})


def test_softmax_before_opset13_keeps_symbols():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    graph = helper.make_graph([node], "g", [x], [helper.make_tensor_value_info("y", 1, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model = netpass.read_model(proto)
    out = model.output("y").partial_shape
    assert out[0].symbol is model.parameters[0].output(0).partial_shape[0].symbol
    assert out[1:] == PartialShape([3, 4])


def test_softmax_large_inputs_stay_finite():
    x = opset.parameter([2, 4], np.float32, name="x")
    v = rand(np.random.default_rng(4), (2, 4), 500, 900)
    out = infer_one(opset.softmax(x, -1), x, v)
    e = np.exp(v.astype(np.float64) - v.max(-1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), rtol=RTOL, atol=ATOL)


def test_softmax_axis_out_of_range_raises():
    with pytest.raises(ShapeInferenceError, match="axis 3"):
        opset.softmax(opset.parameter([2, 3, 4], np.float32), 3)


def test_softmax_keeps_symbols():
    n = Symbol("N")
    x = opset.parameter(PartialShape([Dimension(symbol=n), Dimension(1, 9)]), np.float32)
    ps = opset.log_softmax(x, 1).output(0).partial_shape
    assert ps[0].symbol is n and ps[1] == Dimension(1, 9)


# -- MVN ---------------------------------------------------------------------------------------

def _mvn_ref(x, axes, normalize, eps, mode):
    x = x.astype(np.float64)
    d = x - x.mean(axis=axes, keepdims=True)
    if not normalize:
        return d
    var = (d * d).mean(axis=axes, keepdims=True)
    return d / np.sqrt(var + eps) if mode == "inside_sqrt" else d / (np.sqrt(var) + eps)


@given(st.sampled_from([(1,), (2, 3), (1, 2, 3), (-1,)]), st.booleans(),
       st.sampled_from(["inside_sqrt", "outside_sqrt"]), st.sampled_from([1e-9, 1e-5, 0.1]))
@settings(max_examples=30, deadline=None)
def test_mvn_matches_formula(axes, normalize, mode, eps):
    x = opset.parameter([2, 3, 4, 5], np.float32, name="x")
    v = rand(np.random.default_rng(5), (2, 3, 4, 5))
    out = infer_one(opset.mvn(x, list(axes), normalize, eps, mode), x, v)
    np.testing.assert_allclose(out, _mvn_ref(v, axes, normalize, eps, mode), rtol=RTOL, atol=ATOL)


def test_mvn_attribute_names_follow_openvino():
    node = opset.mvn(opset.parameter([2, 3], np.float32), [1], True, 1e-5, "inside_sqrt")
    assert node.get_attributes() == {"normalize_variance": True, "eps": 1e-5,
                                     "eps_mode": "INSIDE_SQRT"}
    assert (node.type_name, node.version) == ("MVN", "opset6")


@pytest.mark.parametrize("axes", [None, [1], [0, 1, 2, 3]], ids=str)
def test_onnx_mean_variance_normalization(axes):
    feeds = {"x": rand(np.random.default_rng(6), (2, 3, 4, 5))}
    attrs = {} if axes is None else {"axes": axes}
    check_onnx(one_node("MeanVarianceNormalization", feeds, **attrs), feeds)


# -- BatchNormalization ------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (2, 3, 4, 5)], ids=str)
@pytest.mark.parametrize("epsilon", [1e-5, 0.1])
def test_batch_normalization_matches_onnxruntime(shape, epsilon):
    rng = np.random.default_rng(7)
    c = shape[1]
    inits = {"scale": rand(rng, (c,)), "bias": rand(rng, (c,)), "mean": rand(rng, (c,)),
             "var": rand(rng, (c,), 0.1, 2.0)}
    feeds = {"x": rand(rng, shape)}
    check_onnx(one_node("BatchNormalization", feeds, initializers=inits, epsilon=epsilon), feeds)


@pytest.mark.parametrize("shape,momentum", [((2, 3), 0.9), ((4, 3, 5, 2), 0.7)])
def test_batch_normalization_training_mode(shape, momentum):
    """Normalized by the batch's statistics, running statistics moved towards them: onnx's
    reference evaluator (onnxruntime's CPU build has no training mode), and the runtime."""
    rng = np.random.default_rng(14)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    inits = {k: rng.uniform(0.5, 1.5, 3).astype(np.float32) for k in ("s", "b", "m", "v")}
    proto = one_node("BatchNormalization", feeds, n_out=3, initializers=inits, training_mode=1,
                     momentum=momentum, opset_version=15)
    m = netpass.read_model(proto)
    from onnx.reference import ReferenceEvaluator
    ref = ReferenceEvaluator(proto).run(None, feeds)
    req = netpass.compile_model(m, device=RUNTIME_DEVICE).create_infer_request()
    for got in (netpass.reference.infer(m, feeds), req.infer(feeds)):
        for name, r in zip(["y0", "y1", "y2"], ref):
            np.testing.assert_allclose(got[name], r, rtol=1e-5, atol=1e-6)


def test_batch_norm_channel_mismatch_raises():
    x = opset.parameter([2, 3, 4], np.float32)
    with pytest.raises(ShapeInferenceError, match="gamma"):
        opset.batch_norm_inference(x, np.ones(4), np.ones(3), np.ones(3), np.ones(3), 1e-5)


def test_batch_norm_merges_channel_dim():
    n = Symbol("N")
    x = opset.parameter(PartialShape([Dimension(symbol=n), Dimension(), 7]), np.float32)
    w = np.ones(5, np.float32)
    ps = opset.batch_norm_inference(x, w, w, w, w, 1e-5).output(0).partial_shape
    assert ps[0].symbol is n and ps[1] == 5 and ps[2] == 7


# -- LayerNormalization and InstanceNormalization -------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 1, 2])
@pytest.mark.parametrize("n_out", [1, 3])
def test_layer_normalization_matches_onnxruntime(axis, n_out):
    rng = np.random.default_rng(8)
    shape = (2, 3, 4)
    norm_shape = shape[axis:]
    inits = {"scale": rand(rng, norm_shape), "bias": rand(rng, norm_shape)}
    feeds = {"x": rand(rng, shape)}
    check_onnx(one_node("LayerNormalization", feeds, n_out=n_out, initializers=inits, axis=axis,
                        epsilon=1e-3), feeds)


def test_layer_normalization_without_bias():
    rng = np.random.default_rng(9)
    feeds = {"x": rand(rng, (3, 8))}
    proto = one_node("LayerNormalization", feeds, initializers={"scale": rand(rng, (8,))})
    check_onnx(proto, feeds)


def test_layer_normalization_imports_as_mvn():
    rng = np.random.default_rng(10)
    proto = one_node("LayerNormalization", {"x": rand(rng, (3, 8))},
                     initializers={"scale": rand(rng, (8,)), "bias": rand(rng, (8,))})
    types = [n.type_name for n in netpass.read_model(proto).get_ordered_ops()]
    assert "MVN" in types and "Multiply" in types and "Add" in types


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5)], ids=str)
def test_instance_normalization_matches_onnxruntime(shape):
    rng = np.random.default_rng(11)
    inits = {"scale": rand(rng, (3,)), "bias": rand(rng, (3,))}
    feeds = {"x": rand(rng, shape)}
    check_onnx(one_node("InstanceNormalization", feeds, initializers=inits, epsilon=1e-4), feeds)


@pytest.mark.parametrize("axis", [-1, 1])
def test_rms_normalization_opset23_matches_onnxruntime(axis):
    rng = np.random.default_rng(19)
    feeds = {"x": rand(rng, (2, 3, 4))}
    proto = one_node("RMSNormalization", feeds, opset_version=23, axis=axis, epsilon=1e-3,
                     initializers={"scale": rand(rng, (2, 3, 4)[axis:])})
    check_onnx(proto, feeds)


# -- GroupNormalization --------------------------------------------------------------------------

@pytest.mark.parametrize("shape,groups", [((2, 4, 3, 3), 2), ((2, 6, 5), 3), ((1, 4, 2, 2), 4)],
                         ids=str)
def test_group_normalization_opset21_matches_onnxruntime(shape, groups):
    rng = np.random.default_rng(17)
    feeds = {"x": rand(rng, shape), "scale": rand(rng, shape[1:2]), "bias": rand(rng, shape[1:2])}
    check_onnx(one_node("GroupNormalization", feeds, opset_version=21, num_groups=groups,
                        epsilon=1e-3), feeds)


def test_group_normalization_opset18_repeats_per_group_scale():
    rng = np.random.default_rng(18)
    x = rand(rng, (2, 6, 4))
    scale, bias = rand(rng, (3,)), rand(rng, (3,))
    proto = one_node("GroupNormalization", {"x": x}, opset_version=18, num_groups=3,
                     initializers={"scale": scale, "bias": bias})
    got = netpass.reference.infer(netpass.read_model(proto), {"x": x})["y0"]
    g = x.reshape(2, 3, -1).astype(np.float64)
    norm = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    expected = norm.reshape(x.shape) * np.repeat(scale, 2)[:, None] + np.repeat(bias, 2)[:, None]
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def test_group_normalization_channels_must_split_into_groups():
    x = opset.parameter([2, 6, 4], np.float32)
    with pytest.raises(ShapeInferenceError, match="groups"):
        opset.group_normalization(x, np.ones(6), np.zeros(6), 4, 1e-5)


def test_group_normalization_keeps_symbols():
    n = Symbol("N")
    x = opset.parameter(PartialShape([Dimension(symbol=n), Dimension(), 7]), np.float32)
    ps = opset.group_normalization(x, np.ones(4), np.zeros(4), 2, 1e-5).output(0).partial_shape
    assert ps[0].symbol is n and ps[1] == 4 and ps[2] == 7


# -- NormalizeL2 / LpNormalization ---------------------------------------------------------------

@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_lp_normalization_matches_onnxruntime(p, axis):
    feeds = {"x": rand(np.random.default_rng(12), (3, 4, 5))}
    check_onnx(one_node("LpNormalization", feeds, p=p, axis=axis), feeds)


@pytest.mark.parametrize("mode", ["add", "max"])
@pytest.mark.parametrize("axes", [[1], [1, 2], []], ids=str)
def test_normalize_l2_matches_formula(mode, axes):
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    v = rand(np.random.default_rng(13), (2, 3, 4), -0.3, 0.3)
    eps = 0.05
    out = infer_one(opset.normalize_l2(x, np.array(axes, np.int64), eps, mode), x, v)
    ss = np.sum(v.astype(np.float64) ** 2, axis=tuple(axes), keepdims=True)
    norm = np.sqrt(ss + eps) if mode == "add" else np.sqrt(np.maximum(ss, eps))
    np.testing.assert_allclose(out, v / norm, rtol=RTOL, atol=ATOL)


def test_normalize_l2_rejects_bad_eps_mode():
    with pytest.raises(ShapeInferenceError, match="eps_mode"):
        opset.normalize_l2(opset.parameter([2, 3], np.float32), [1], 1e-6, "mul")


# -- ONNX export -------------------------------------------------------------------------------

EXPORTS = {
    "softmax": lambda x: opset.softmax(x, 1),
    "log_softmax": lambda x: opset.log_softmax(x, -1),
    "mvn_inside": lambda x: opset.mvn(x, [1, 2], True, 1e-5, "inside_sqrt"),
    "mvn_outside": lambda x: opset.mvn(x, [2], True, 1e-3, "outside_sqrt"),
    "mvn_mean_only": lambda x: opset.mvn(x, [0], False, 1e-5, "inside_sqrt"),
    "batch_norm": lambda x: opset.batch_norm_inference(
        x, np.array([1.0, 2.0, 0.5]), np.array([0.1, 0.2, 0.3]), np.array([0.0, 0.5, -0.5]),
        np.array([1.0, 2.0, 0.5]), 1e-5),
    "normalize_l2_add": lambda x: opset.normalize_l2(x, [2], 1e-6, "add"),
    "normalize_l2_max": lambda x: opset.normalize_l2(x, [1, 2], 1e-6, "max"),
    "group_norm": lambda x: opset.group_normalization(
        x, np.array([1.0, 2.0, 0.5]), np.array([0.1, 0.2, 0.3]), 3, 1e-4),
}


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_export_round_trip(name):
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    check_export(Model([EXPORTS[name](x)], [x]), {"x": rand(np.random.default_rng(14), (2, 3, 4))})


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization_of_zero_vector_is_zero(p):
    x = rand(np.random.default_rng(15), (2, 3))
    x[1] = 0.0
    got = netpass.reference.infer(netpass.read_model(one_node("LpNormalization", {"x": x}, p=p)),
                                  {"x": x})["y0"]
    np.testing.assert_array_equal(got[1], np.zeros(3, np.float32))
    np.testing.assert_allclose(got[0], x[0] / np.linalg.norm(x[0], ord=p), rtol=RTOL, atol=ATOL)


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
    "softmax_axis0": lambda x: opset.softmax(x, 0),
    "log_softmax": lambda x: opset.log_softmax(x, -1),
    "mvn_outside": lambda x: opset.mvn(x, [1, 2], True, 1e-3, "outside_sqrt"),
    "mvn_inside": lambda x: opset.mvn(x, [2], True, 1e-3, "inside_sqrt"),
    "mvn_mean_only": lambda x: opset.mvn(x, [0, 2], False, 1e-3, "inside_sqrt"),
    "normalize_l2_add": lambda x: opset.normalize_l2(x, [2], 1e-3, "add"),
    "normalize_l2_max": lambda x: opset.normalize_l2(x, [1, 2], 1e-3, "max"),
    "batch_norm": lambda x: opset.batch_norm_inference(
        x, np.array([1.0, 2.0, 0.5]), np.array([0.1, 0.2, 0.3]), np.array([0.0, 0.5, -0.5]),
        np.array([1.0, 2.0, 0.5]), 1e-3),
    "group_norm": lambda x: opset.group_normalization(
        x, np.array([1.0, 2.0, 0.5]), np.array([0.1, 0.2, 0.3]), 3, 1e-4),
}


@pytest.mark.parametrize("name", sorted(OPENVINO))
def test_matches_openvino(name, tmp_path):
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    feeds = {"x": rand(np.random.default_rng(16), (2, 3, 4))}
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
        f32 = lambda v: o.constant(np.array(v, np.float32))  # noqa: E731
        axes = o.constant(np.array([1], np.int64))
        return [o.mvn(x, axes, True, 1e-3, "outside_sqrt"),
                o.mvn(x, axes, False, 1e-3, "inside_sqrt"),
                o.normalize_l2(x, o.constant(np.array([2], np.int64)), 1e-3, "max"),
                o.softmax(x, 0), o.log_softmax(x, 1),
                o.group_normalization(x, f32([1, 2, 3]), f32([0.1, 0.2, 0.3]), 3, 1e-4),
                o.batch_norm_inference(x, f32([1, 2, 3]), f32([0.1, 0.2, 0.3]), f32([0, 1, 2]),
                                       f32([1, 2, 3]), 1e-3)]
    check_read_from_openvino(build, tmp_path)
