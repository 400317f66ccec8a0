"""Indexing ops: Gather, GatherElements, GatherND, ScatterUpdate, ScatterElementsUpdate,
ScatterNDUpdate and OneHot: one-node ONNX models in netpass's reference vs onnxruntime (exact
for gathers and plain scatters, rtol 1e-5 for reductions), Gather batch_dims vs OpenVINO,
partial values, factories and the export rules."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

import netpass
from netpass import Dimension, Model, PartialShape, Symbol, opset
from netpass.errors import ShapeInferenceError
from netpass.frontend.onnx_writer import to_onnx

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def make(op: str, args: list, attrs: dict | None = None,
         opset_version: int = 17) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One-node model; ``args``: (name, array, "in" | "init") in input order."""
    names, inputs, inits, feeds = [], [], [], {}
    for name, arr, kind in args:
        arr = np.asarray(arr)
        names.append(name)
        if kind == "in":
            inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape))
            feeds[name] = arr
        else:
            inits.append(numpy_helper.from_array(arr, name))
    node = helper.make_node(op, names, ["y"], **(attrs or {}))
    graph = helper.make_graph([node], "g", inputs, [helper.make_empty_tensor_value_info("y")],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)],
                             ir_version=8), feeds


def check(model: onnx.ModelProto, feeds: dict, rtol: float = 0.0) -> netpass.Model:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, feeds)[0]
    m = netpass.read_model(model)
    got = netpass.reference.infer(m, feeds)["y"]
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if rtol:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, expected)
    assert PartialShape(expected.shape).refines(m.results[0].output(0).partial_shape)
    return m


def rand(shape, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) + 0.1).astype(np.float32)


def i64(v) -> np.ndarray:
    return np.asarray(v, dtype=np.int64)


# -- Gather ---------------------------------------------------------------------------------
@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data())
def test_gather_matches_onnxruntime(shape, data):
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1))
    dim = shape[axis]
    idx_shape = data.draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    idx = np.asarray(data.draw(st.lists(st.integers(-dim, dim - 1), min_size=int(np.prod(
        idx_shape)), max_size=int(np.prod(idx_shape))))).reshape(idx_shape).astype(np.int64)
    check(*make("Gather", [("x", rand(shape), "in"), ("i", idx, "in")], {"axis": axis}))


def test_gather_int32_indices():
    check(*make("Gather", [("x", rand([3, 4]), "in"), ("i", np.int32([[2, -1]]), "init")],
                {"axis": 1}))


def test_gather_out_of_range_index_gives_zeros():
    x = rand([3, 2])
    g = opset.gather(opset.parameter([3, 2], np.float32), [1, 5], 0)
    got = g.evaluate([x, i64([1, 5]), i64(0)])[0]
    np.testing.assert_array_equal(got, np.stack([x[1], np.zeros(2, np.float32)]))


@pytest.mark.parametrize("batch_dims,axis", [(1, 1), (1, 2), (2, 2), (-1, 2)])
def test_gather_batch_dims_matches_openvino(batch_dims, axis):
    import openvino as ov
    import openvino.opset8 as ov8
    x, idx = rand([2, 3, 4]), i64(np.random.default_rng(1).integers(-3, 3, (2, 3, 2)))
    p = ov8.parameter([2, 3, 4], np.float32)
    ref = ov8.gather(p, ov8.constant(idx), ov8.constant(np.int64(axis)), batch_dims)
    expected = ov.Core().compile_model(ov.Model([ref], [p]), "CPU")([x])[0]
    node = opset.gather(opset.parameter([2, 3, 4], np.float32), idx, axis, batch_dims)
    assert node.output(0).partial_shape == PartialShape(list(ref.get_output_partial_shape(0)
                                                             .to_shape()))
    np.testing.assert_array_equal(node.evaluate([x, idx, i64(axis)])[0], expected)


def test_gather_partial_value_picks_symbols():
    b, s = Symbol("b"), Symbol("s")
    x = opset.parameter(PartialShape([Dimension(symbol=b), Dimension(symbol=s), 8]), np.float32)
    pv = opset.gather(opset.shape_of(x), [1, 0, -1], 0).output(0).partial_value
    assert pv[0].symbol is s and pv[1].symbol is b and pv[2] == 8
    scalar = opset.gather(opset.shape_of(x), 2, 0).output(0)
    assert scalar.partial_shape == PartialShape([]) and scalar.value == 8


def test_gather_axis_below_batch_dims_is_an_error():
    with pytest.raises(ShapeInferenceError, match="batch_dims"):
        opset.gather(opset.parameter([2, 3], np.float32), np.zeros((2, 1), np.int64), 0, 1)


# -- GatherElements / GatherND --------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_matches_onnxruntime(axis):
    x = rand([3, 4])
    shape = [3, 4]
    shape[axis] = 2
    dim = x.shape[axis]
    idx = i64(np.random.default_rng(2).integers(-dim, dim, shape))
    check(*make("GatherElements", [("x", x, "in"), ("i", idx, "in")], {"axis": axis}))


@pytest.mark.parametrize("batch_dims,idx_shape", [(0, [2, 1]), (0, [2, 2]), (0, [3, 2, 3]),
                                                  (1, [2, 1]), (1, [2, 3, 2])])
def test_gather_nd_matches_onnxruntime(batch_dims, idx_shape):
    x = rand([2, 3, 4])
    dims = x.shape[batch_dims:batch_dims + idx_shape[-1]]
    rng = np.random.default_rng(3)
    idx = np.stack([rng.integers(-d, d, idx_shape[:-1]) for d in dims], -1).astype(np.int64)
    check(*make("GatherND", [("x", x, "in"), ("i", idx, "in")], {"batch_dims": batch_dims}))


# -- Scatter family -------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1])
def test_scatter_elements_matches_onnxruntime(reduction, axis):
    x = rand([4, 5])
    rng = np.random.default_rng(4)
    shape = [3, 3]
    if reduction == "none":  # distinct targets: onnxruntime leaves duplicates unordered
        idx = np.stack([rng.permutation(x.shape[axis])[:3] for _ in range(3)],
                       1 - axis).astype(np.int64)
    else:
        idx = rng.integers(-x.shape[axis], x.shape[axis], shape).astype(np.int64)
    args = [("x", x, "in"), ("i", idx, "in"), ("u", rand(shape, 5), "in")]
    check(*make("ScatterElements", args, {"axis": axis, "reduction": reduction}, 18), rtol=1e-5)


def test_scatter_opset_9_is_scatter_elements():
    args = [("x", rand([3, 3]), "in"), ("i", i64([[1, 0, 2]]), "init"),
            ("u", rand([1, 3], 1), "in")]
    check(*make("Scatter", args, {"axis": 0}, 10))


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_matches_onnxruntime(reduction):
    x = rand([4, 3, 2])
    idx = i64([[1, 2], [3, 0], [1, 2]] if reduction != "none" else [[1, 2], [3, 0], [0, 1]])
    args = [("x", x, "in"), ("i", idx, "in"), ("u", rand([3, 2], 6), "in")]
    check(*make("ScatterND", args, {"reduction": reduction}, 18), rtol=1e-5)


def test_scatter_update_replaces_slices_along_axis():
    x, upd = rand([3, 4, 2]), rand([3, 2, 2], 1)
    node = opset.scatter_update(opset.parameter([3, 4, 2], np.float32), [3, -4], upd, 1)
    got = node.evaluate([x, i64([3, -4]), upd, i64(1)])[0]
    expected = x.copy()
    expected[:, 3], expected[:, 0] = upd[:, 0], upd[:, 1]
    np.testing.assert_array_equal(got, expected)
    assert node.output(0).partial_shape == PartialShape([3, 4, 2])


@pytest.mark.parametrize("use_init_val", [True, False])
def test_scatter_elements_mean_reduction(use_init_val):
    x, upd = rand([4]), rand([3], 1)
    idx = i64([1, 1, 3])
    node = opset.scatter_elements_update(opset.parameter([4], np.float32), idx, upd, 0, "mean",
                                         use_init_val)
    got = node.evaluate([x, idx, upd, i64(0)])[0]
    expected = x.copy()
    if use_init_val:
        expected[1] = (x[1] + upd[0] + upd[1]) / 3
        expected[3] = (x[3] + upd[2]) / 2
    else:
        expected[1], expected[3] = (upd[0] + upd[1]) / 2, upd[2]
    np.testing.assert_allclose(got, expected, rtol=1e-5)


# -- OneHot ---------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_matches_onnxruntime(axis):
    idx = i64([[1, -1, 4], [0, 2, -5]])
    args = [("i", idx, "in"), ("d", i64(5), "init"), ("v", np.float32([-1.5, 2.0]), "init")]
    check(*make("OneHot", args, {"axis": axis}, 11))


def test_one_hot_shape_and_ignored_negatives():
    node = opset.one_hot(opset.parameter([2], np.int64), 3, np.float32(1), np.float32(0), 0)
    assert node.output(0).partial_shape == PartialShape([3, 2])
    got = node.evaluate([i64([2, -1]), i64(3), np.float32(1), np.float32(0)])[0]
    np.testing.assert_array_equal(got, np.float32([[0, 0], [0, 0], [1, 0]]))


# -- export ---------------------------------------------------------------------------------
def _roundtrip(model: onnx.ModelProto, feeds: dict) -> None:
    m = netpass.read_model(model)
    back = to_onnx(m)
    sess = ort.InferenceSession(back.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, feeds)[0], netpass.reference.infer(m, feeds)["y"],
                               rtol=1e-5)


@pytest.mark.parametrize("op,args,attrs", [
    ("Gather", [("x", rand([3, 4]), "in"), ("i", i64([2, 0]), "init")], {"axis": 1}),
    ("GatherElements", [("x", rand([3, 4]), "in"), ("i", i64([[0], [3], [1]]), "init")],
     {"axis": 1}),
    ("GatherND", [("x", rand([3, 4]), "in"), ("i", i64([[2, 1], [0, 3]]), "init")], {}),
    ("ScatterElements", [("x", rand([3, 4]), "in"), ("i", i64([[1, 1]]), "init"),
                         ("u", rand([1, 2], 1), "in")], {"axis": 0, "reduction": "add"}),
    ("ScatterND", [("x", rand([3, 4]), "in"), ("i", i64([[2], [0]]), "init"),
                   ("u", rand([2, 4], 1), "in")], {}),
    ("OneHot", [("i", i64([1, -2]), "in"), ("d", i64(3), "init"),
                ("v", np.float32([0, 5]), "init")], {"axis": 0}),
])
def test_export_roundtrip_in_onnxruntime(op, args, attrs):
    _roundtrip(*make(op, args, attrs, 18 if op == "ScatterElements" else 17))


def test_scatter_update_exports_as_scatter_nd():
    x = opset.parameter([3, 2], np.float32, "x")
    u = opset.parameter([1, 2], np.float32, "u")
    m = Model([opset.scatter_update(x, [2], u, 0)], [x, u])
    feeds = {"x": rand([3, 2]), "u": rand([1, 2], 1)}
    sess = ort.InferenceSession(to_onnx(m).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(sess.run(None, feeds)[0],
                                  list(netpass.reference.infer(m, feeds).values())[0])


@pytest.mark.parametrize("shape,value,indices,axis", [
    ([1, 8, 8, 8], None, [3, 1, 2], 3),
    ([Dimension(symbol=Symbol("n")), 6, (1, 9)], None, [5, 0], 1),  # symbols, intervals
    ([4, 6], None, [[1, 2]], 0),           # 2-D indices: the generic way
    (None, None, [0, 1], 0),               # dynamic rank: the generic way
    ([4], np.arange(4.0), [3, 0], 0),      # known elements: the generic way
])
def test_gather_of_equals_the_generic_construction(shape, value, indices, axis):
    from netpass.ops.indexing import Gather
    if value is not None:
        x = opset.constant(value.astype(np.float32)).output(0)
    else:
        x = opset.parameter(PartialShape(shape), np.float32).output(0)
    idx = opset.constant(np.array(indices, np.int64)).output(0)
    axis_value = opset.constant(np.array(axis, np.int64)).output(0)
    fast = Gather.of(x, idx, axis_value, axis, int(np.size(indices)))
    ref = Gather([x, idx, axis_value])
    a, b = fast._outs[0], ref._outs[0]
    assert a.et is b.et and a.ps == b.ps and a.pval == b.pval
    if shape is not None:
        assert [d.symbol for d in a.ps] == [d.symbol for d in b.ps]
    assert (a.val is None and b.val is None) or np.array_equal(a.val, b.val)
    assert fast.get_attributes() == ref.get_attributes()
    assert fast.input_values() == ref.input_values()
    assert {c.node for c in idx.consumers()} == {fast, ref}
