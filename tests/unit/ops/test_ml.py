"""The ai.onnx.ml ops (ArrayFeatureExtractor, Binarizer, LabelEncoder, TreeEnsemble): netpass's
reference against onnxruntime on random non-zero data, or onnx's reference evaluator where
onnxruntime has no kernel (Binarizer and TreeEnsemble on doubles, LabelEncoder's tensor
attributes) (exact for lookups and comparisons; rtol 1e-5 for the tree sums), every key and value type of LabelEncoder's versions 2 and 4,
every comparison mode, aggregate and post transform of TreeEnsemble; the ONNX export, the
runtime (host fallback), models importing ai.onnx.ml alone, and the errors."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from opcheck import check_export, check_import, check_runtime

import netpass
from netpass.errors import NetpassError, UnsupportedOpError

ML = "ai.onnx.ml"
RNG = np.random.default_rng(5)


def _model(op, feeds, out_type, ml_version, default_opset=17, **attrs):
    vis = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype)
                                         if v.dtype != object else onnx.TensorProto.STRING,
                                         v.shape) for k, v in feeds.items()]
    node = helper.make_node(op, list(feeds), ["y"], name="n0", domain=ML, **attrs)
    out = helper.make_tensor_value_info("y", out_type, None)
    imports = [helper.make_opsetid(ML, ml_version)]
    if default_opset:
        imports.insert(0, helper.make_opsetid("", default_opset))
    proto = helper.make_model(helper.make_graph([node], "g", vis, [out]), opset_imports=imports)
    proto.ir_version = 10
    return proto


def _strings(values):
    return np.array(values, dtype=object)


# -- ArrayFeatureExtractor, Binarizer ---------------------------------------------------------

@pytest.mark.parametrize("shape,idx", [((3, 5), [4, 0, 2]), ((2, 3, 6), [[1, 5]]), ((7,), [6, 1]),
                                       ((4, 3), [[2], [0]])])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_array_feature_extractor(shape, idx, dtype):
    feeds = {"x": (RNG.integers(1, 50, shape) * RNG.choice([-1, 1], shape)).astype(dtype),
             "i": np.array(idx, np.int64)}
    proto = _model("ArrayFeatureExtractor", feeds,
                   helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), 1)
    check_import(proto, feeds, 0, 0, engine="ort")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("threshold", [0.0, 0.37, -1.5])
def test_binarizer(dtype, threshold):
    x = (RNG.standard_normal((3, 4, 5)) * 2).astype(dtype)
    x[x == 0] = 1
    proto = _model("Binarizer", {"x": x}, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), 1,
                   threshold=threshold)
    check_import(proto, {"x": x}, 0, 0)


def test_array_feature_extractor_index_out_of_range_names_the_node():
    feeds = {"x": np.ones((2, 3), np.float32), "i": np.array([3], np.int64)}
    model = netpass.read_model(_model("ArrayFeatureExtractor", feeds, onnx.TensorProto.FLOAT, 1))
    with pytest.raises(NetpassError, match="n0.*out of range"):
        netpass.reference.infer(model, feeds)


# -- LabelEncoder -------------------------------------------------------------------------------

LABEL_CASES = {
    "string_int": (_strings(["a", "b", "zz", "c", "q", "a"]),
                   dict(keys_strings=["a", "b", "c"], values_int64s=[7, -3, 2],
                        default_int64=42), onnx.TensorProto.INT64, 2),
    "string_int_no_default": (_strings(["b", "x"]),
                              dict(keys_strings=["a", "b"], values_int64s=[1, 2]),
                              onnx.TensorProto.INT64, 2),
    "int_string": (np.array([[3, -8], [5, 1]], np.int64),
                   dict(keys_int64s=[5, 3, -8], values_strings=["five", "three", "m"],
                        default_string="?"), onnx.TensorProto.STRING, 2),
    "int_string_no_default": (np.array([4, 5], np.int64),
                              dict(keys_int64s=[5], values_strings=["five"]),
                              onnx.TensorProto.STRING, 2),
    "float_float": (np.array([1.5, -2.25, 9.0, 0.5], np.float32),
                    dict(keys_floats=[0.5, 1.5, -2.25], values_floats=[10.0, -1.0, 3.5],
                         default_float=-7.0), onnx.TensorProto.FLOAT, 2),
    "float_int_no_default": (np.array([0.25, 8.0], np.float32),
                             dict(keys_floats=[0.25], values_int64s=[4]),
                             onnx.TensorProto.INT64, 2),
    "tensor_mapping": (_strings(["a", "b", "d", "c"]),
                       dict(keys_tensor=helper.make_tensor("k", onnx.TensorProto.STRING, [3],
                                                           [b"a", b"b", b"c"]),
                            values_tensor=numpy_helper.from_array(
                                np.array([4, 5, 6], np.int32), "v"),
                            default_tensor=numpy_helper.from_array(np.array([42], np.int32),
                                                                   "d")),
                       onnx.TensorProto.INT32, 4),
    "int16_double_tensors": (np.array([3, 9, -2], np.int16),
                             dict(keys_tensor=numpy_helper.from_array(
                                 np.array([3, -2], np.int16), "k"),
                                 values_tensor=numpy_helper.from_array(
                                     np.array([0.5, 1.25]), "v"),
                                 default_tensor=numpy_helper.from_array(np.array([9.5]), "d")),
                             onnx.TensorProto.DOUBLE, 4),
}


@pytest.mark.parametrize("name", sorted(LABEL_CASES))
def test_label_encoder(name):
    x, attrs, out_type, version = LABEL_CASES[name]
    proto = _model("LabelEncoder", {"x": x}, out_type, version, **attrs)
    model = check_import(proto, {"x": x}, 0, 0)
    check_export(model, {"x": x}, 0, 0)
    check_runtime(model, {"x": x}, 0, 0)


def test_label_encoder_version_1_maps_strings_to_indices():
    x = _strings(["b", "a", "nope"])
    proto = _model("LabelEncoder", {"x": x}, onnx.TensorProto.INT64, 1,
                   classes_strings=["a", "b"], default_int64=-5)
    got = netpass.reference.infer(netpass.read_model(proto), {"x": x})["y"]
    np.testing.assert_array_equal(got, [1, 0, -5])


def test_label_encoder_nan_key_matches_nan():
    x = np.array([np.nan, 1.0, 2.0], np.float32)
    proto = _model("LabelEncoder", {"x": x}, onnx.TensorProto.INT64, 2,
                   keys_floats=[1.0, float("nan")], values_int64s=[10, 20])
    got = netpass.reference.infer(netpass.read_model(proto), {"x": x})["y"]
    np.testing.assert_array_equal(got, [20, 10, -1])


def test_label_encoder_key_type_mismatch_names_the_node():
    x = np.array([1, 2], np.int64)
    proto = _model("LabelEncoder", {"x": x}, onnx.TensorProto.INT64, 2,
                   keys_strings=["a"], values_int64s=[1])
    with pytest.raises(NetpassError, match="n0"):
        netpass.read_model(proto)


def test_label_encoder_needs_one_keys_attribute():
    x = np.array([1, 2], np.int64)
    proto = _model("LabelEncoder", {"x": x}, onnx.TensorProto.INT64, 2,
                   keys_int64s=[1], keys_floats=[1.0], values_int64s=[1])
    with pytest.raises(UnsupportedOpError, match="n0.*keys_"):
        netpass.read_model(proto)


# -- TreeEnsemble -------------------------------------------------------------------------------

def _forest(modes, splits, n_targets=2, members=None, tracks=None, **extra):
    """Two trees over 3 features: tree 0 is nodes 0..2 (root 0), tree 1 node 3 (root 3);
    leaves 0..3 for tree 0, 4..5 for tree 1."""
    attrs = dict(
        nodes_featureids=[0, 1, 2, 1], nodes_modes=numpy_helper.from_array(
            np.array(modes, np.uint8), "m"),
        nodes_splits=numpy_helper.from_array(np.array(splits, np.float32), "s"),
        nodes_truenodeids=[1, 0, 2, 4], nodes_trueleafs=[0, 1, 1, 1],
        nodes_falsenodeids=[2, 1, 3, 5], nodes_falseleafs=[0, 1, 1, 1],
        leaf_targetids=[0, 1, 1, 0, 1, 0][:6], leaf_weights=numpy_helper.from_array(
            np.array([1.5, -2.0, 4.25, 0.75, 3.0, -1.25], np.float32), "w"),
        tree_roots=[0, 3], n_targets=n_targets, **extra)
    if members is not None:
        attrs["membership_values"] = numpy_helper.from_array(np.array(members, np.float32),
                                                             "mv")
    if tracks is not None:
        attrs["nodes_missing_value_tracks_true"] = tracks
    return attrs


def _x(n=12):
    x = RNG.integers(-4, 5, (n, 3)).astype(np.float32)
    x[x == 0] = 0.5
    return x


@pytest.mark.parametrize("modes", [[0, 0, 0, 0], [1, 2, 3, 4], [5, 0, 2, 1]])
@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_tree_ensemble_modes_and_aggregates(modes, aggregate):
    x = _x()
    proto = _model("TreeEnsemble", {"x": x}, onnx.TensorProto.FLOAT, 5,
                   **_forest(modes, [0.5, -1.0, 2.0, 1.0], aggregate_function=aggregate))
    model = check_import(proto, {"x": x}, 1e-5, 1e-6, engine="ort")
    check_export(model, {"x": x}, 1e-5, 1e-6, engine="ort")


def _softmax(y, zero=False):
    e = np.exp(y - y.max(axis=1, keepdims=True))
    if zero:
        e = np.where(y != 0, e, 0)
    return e / e.sum(axis=1, keepdims=True)


POST = {1: _softmax, 2: lambda y: 1 / (1 + np.exp(-y)), 3: lambda y: _softmax(y, True)}


@pytest.mark.parametrize("post", sorted(POST))
def test_tree_ensemble_post_transforms(post):
    """The spec's numbering (1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO) on onnxruntime's scores
    without a transform (onnxruntime 1.32 reads 1 as LOGISTIC and 2 as SOFTMAX, and onnx's
    reference ignores the attribute)."""
    x = _x()
    forest = _forest([0, 3, 0, 2], [0.5, -1.0, 2.0, 1.0], n_targets=3)
    raw = check_import(_model("TreeEnsemble", {"x": x}, onnx.TensorProto.FLOAT, 5, **forest),
                       {"x": x}, 1e-5, 1e-6, engine="ort")
    scores = netpass.reference.infer(raw, {"x": x})["y"].astype(np.float64)
    assert (scores == 0).any(axis=1).any()  # SOFTMAX_ZERO's zeros occur
    proto = _model("TreeEnsemble", {"x": x}, onnx.TensorProto.FLOAT, 5, post_transform=post,
                   **forest)
    got = netpass.reference.infer(netpass.read_model(proto), {"x": x})["y"]
    np.testing.assert_allclose(got, POST[post](scores), rtol=1e-5, atol=1e-6)


def test_tree_ensemble_membership_and_missing_values():
    x = _x()
    x[::3, 0] = np.nan
    x[1::4, 1] = np.nan
    proto = _model("TreeEnsemble", {"x": x}, onnx.TensorProto.FLOAT, 5,
                   **_forest([6, 0, 6, 2], [0.0, -1.0, 0.0, 1.0],
                             members=[1, 3, -2, np.nan, 4, np.nan], tracks=[1, 0, 0, 1]))
    model = check_import(proto, {"x": x}, 1e-5, 1e-6, engine="ort")
    check_runtime(model, {"x": x}, 1e-5, 1e-6)


def test_tree_ensemble_only_the_ml_domain_imported():
    x = _x().astype(np.float64)
    attrs = _forest([0, 0, 0, 0], [0.5, -1.0, 2.0, 1.0])
    for key in ("nodes_splits", "leaf_weights"):  # typed as X
        attrs[key] = numpy_helper.from_array(numpy_helper.to_array(attrs[key]).astype(
            np.float64), key)
    proto = _model("TreeEnsemble", {"x": x}, onnx.TensorProto.DOUBLE, 5, default_opset=0,
                   **attrs)
    assert [o.domain for o in proto.opset_import] == [ML]
    check_import(proto, {"x": x}, 1e-5, 1e-6)


def test_tree_ensemble_bad_leaf_id_names_the_node():
    attrs = _forest([0, 0, 0, 0], [0.5, -1.0, 2.0, 1.0])
    attrs["nodes_truenodeids"] = [1, 0, 2, 9]
    proto = _model("TreeEnsemble", {"x": _x()}, onnx.TensorProto.FLOAT, 5, **attrs)
    with pytest.raises(NetpassError, match="n0.*nodes_truenodeids"):
        netpass.read_model(proto)


def test_tree_ensemble_too_few_features_names_the_node():
    attrs = _forest([0, 0, 0, 0], [0.5, -1.0, 2.0, 1.0])
    x = np.ones((2, 2), np.float32)
    with pytest.raises(NetpassError, match="n0.*feature 2"):
        netpass.read_model(_model("TreeEnsemble", {"x": x}, onnx.TensorProto.FLOAT, 5, **attrs))


# -- the reader ---------------------------------------------------------------------------------

def test_default_domain_node_without_a_default_opset_is_refused():
    x = np.ones(3, np.float32)
    proto = _model("Binarizer", {"x": x}, onnx.TensorProto.FLOAT, 1, default_opset=0)
    proto.graph.node.append(helper.make_node("Relu", ["y"], ["z"], name="r0"))
    proto.graph.output[0].name = "z"
    with pytest.raises(NetpassError, match="r0.*no default-domain"):
        netpass.read_model(proto)


def test_op_of_a_domain_not_imported_names_op_and_domain():
    x = np.ones(3, np.float32)
    proto = _model("Binarizer", {"x": x}, onnx.TensorProto.FLOAT, 1)
    del proto.opset_import[1:]
    with pytest.raises(UnsupportedOpError) as info:
        netpass.read_model(proto)
    assert info.value.domain == ML and info.value.op_type == "Binarizer"
    assert "n0" in str(info.value)


def test_unknown_op_of_the_ml_domain_names_op_and_domain():
    x = np.ones((2, 3), np.float32)
    proto = _model("Scaler", {"x": x}, onnx.TensorProto.FLOAT, 1, scale=[2.0])
    with pytest.raises(UnsupportedOpError) as info:
        netpass.read_model(proto)
    assert (info.value.op_type, info.value.domain) == ("Scaler", ML)
