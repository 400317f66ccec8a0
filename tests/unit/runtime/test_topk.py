"""TopK on the OpenCL device (``kernels/topk.py``, the row of ``kinds/reduction.py``): float32,
int32 and int64 data over any axis, modes max / min, sorts value / index / none, against the
reference evaluator (the op's numpy ``evaluate``) on random data, values and indices exactly
equal (sort "none": the same set per row); ties keep the lower index first, NaN is the worst
element; no host fallback. Also an ONNX TopK model through ``read_model`` against onnxruntime.
"""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.runtime.kernels.topk import WIDE_LS
from netpass.testing import RUNTIME_DEVICE

SHAPE = (4, 6, 5)  # axis 0 / 1 / 2: rows of 4 / 6 / 5 elements


def _data(rng, dtype, shape, ties: bool = False) -> np.ndarray:
    """Random data of ``dtype``: integers from a small range (many ties) where ``ties`` or the
    dtype is an integer one, else normal floats."""
    if ties or np.dtype(dtype).kind == "i":
        x = rng.integers(-4, 5, shape)
        x[x == 0] = 7  # (no zeros)
        return x.astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _model(dtype, shape, k, axis: int, mode: str, sort: str, index_type=np.int32) -> Model:
    x = opset.parameter(list(shape), dtype, name="x")
    const = isinstance(k, int)
    node = opset.topk(x, np.int64(k) if const else k, axis, mode, sort,
                      index_element_type=index_type)
    params = [x] if const else [x, k]
    return Model([opset.result(node.output(0), name="values"),
                  opset.result(node.output(1), name="indices")], params)


def _compare(got: dict, want: dict, axis: int, sort: str) -> None:
    for name in ("values", "indices"):
        assert got[name].dtype == want[name].dtype, name
        assert got[name].shape == want[name].shape, (name, got[name].shape, want[name].shape)
    if sort == "none":  # any order: the same (index, value) pairs per row
        gi, wi = (np.moveaxis(a["indices"], axis, -1) for a in (got, want))
        gv, wv = (np.moveaxis(a["values"], axis, -1) for a in (got, want))
        go, wo = np.argsort(gi, axis=-1), np.argsort(wi, axis=-1)
        got = {"indices": np.take_along_axis(gi, go, -1), "values": np.take_along_axis(gv, go, -1)}
        want = {"indices": np.take_along_axis(wi, wo, -1),
                "values": np.take_along_axis(wv, wo, -1)}
    np.testing.assert_array_equal(got["indices"], want["indices"])
    np.testing.assert_array_equal(got["values"], want["values"])  # (NaN equal to NaN)


def _run(model: Model, feeds_list: list, axis: int, sort: str):
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for feeds in feeds_list:
        got = req.infer(feeds)
        with np.errstate(invalid="ignore"):
            want = netpass.reference.infer(model, feeds)
        _compare(got, want, axis, sort)
    assert req.stats["host_fallbacks"] == 0, req.stats["host_fallback_kinds"]
    return req


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("axis", [0, 1, -1], ids=["first", "middle", "last"])
@pytest.mark.parametrize("mode", ["max", "min"])
@pytest.mark.parametrize("sort", ["value", "index", "none"])
@pytest.mark.parametrize("k", [0, 1, 3, "N"])
def test_matches_reference(rng, dtype, axis, mode, sort, k):
    n = SHAPE[axis]
    k = n if k == "N" else k
    model = _model(dtype, SHAPE, k, axis, mode, sort, np.int64 if axis == 1 else np.int32)
    _run(model, [{"x": _data(rng, dtype, SHAPE)}], axis, sort)


@pytest.mark.parametrize("mode", ["max", "min"])
@pytest.mark.parametrize("sort", ["value", "index", "none"])
def test_float_ties(rng, mode, sort):
    model = _model(np.float32, (7, 9), 4, 1, mode, sort)
    _run(model, [{"x": _data(rng, np.float32, (7, 9), ties=True)}], 1, sort)


@pytest.mark.parametrize("mode", ["max", "min"])
@pytest.mark.parametrize("sort", ["value", "index", "none"])
@pytest.mark.parametrize("k", [1, 4, 9])
def test_nan_and_infinities(rng, mode, sort, k):
    """Rows with NaN (several: by index among themselves), -inf, +inf, -0.0 beside 0.0, a row
    all NaN and a row of equal values."""
    x = _data(rng, np.float32, (8, 9))
    x[0, [1, 4, 6]] = np.nan
    x[1, [0, 2]] = -np.inf
    x[1, 5] = np.nan
    x[2, [3, 7]] = np.inf
    x[2, [2, 8]] = -np.inf
    x[3] = np.nan
    x[4] = 1.5
    x[5, [2, 6]] = [-0.0, 0.0]
    x[6, ::2] = np.nan
    x[7] = -np.inf
    x[7, 4] = np.nan
    _run(_model(np.float32, (8, 9), k, 1, mode, sort), [{"x": x}], 1, sort)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("k", [0, 1])
def test_axis_of_one(rng, dtype, k):
    model = _model(dtype, (3, 1, 4), k, 1, "max", "value")
    _run(model, [{"x": _data(rng, dtype, (3, 1, 4))}], 1, "value")


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("sort", ["value", "index", "none"])
@pytest.mark.parametrize("shape,axis", [((3, 5000), 1), ((2, 5000, 3), 1)], ids=["last", "middle"])
def test_big_rows(rng, dtype, sort, shape, axis):
    """A vocabulary-sized row, k = 50 (int32: values from a small range, so ties)."""
    model = _model(dtype, shape, 50, axis, "max", sort)
    _run(model, [{"x": _data(rng, dtype, shape)}], axis, sort)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("k", [1, 7])
@pytest.mark.parametrize("rows", [1, 2])
def test_a_few_long_rows_run_in_wide_work_groups(rng, dtype, k, rows):
    """A decoder's next token: one row of a vocabulary (NaNs and, for int32, ties in it), on
    work-groups of WIDE_LS items (the device's limit if lower) instead of LS."""
    x = _data(rng, dtype, (rows, 50257))
    if dtype == np.float32:
        x[:, rng.integers(0, 50257, 40)] = np.nan
    req = _run(_model(dtype, x.shape, k, 1, "max", "value"), [{"x": x}], 1, "value")
    (impl,) = [i.impl for i in req.network.insts if i.node.kind == "TopK"]
    wide = min(WIDE_LS, req.network.engine.max_work_group_size)
    assert impl.launches[0].lws == (1 << (wide.bit_length() - 1),)


def test_int64_beyond_32_bits(rng):
    x = rng.integers(-2**40, 2**40, (5, 33)).astype(np.int64)
    x[:, ::5] = np.iinfo(np.int64).min
    x[:, 3] = np.iinfo(np.int64).max
    for mode in ("max", "min"):
        _run(_model(np.int64, (5, 33), 6, 1, mode, "value"), [{"x": x}], 1, "value")


@pytest.mark.parametrize("sort", ["value", "index", "none"])
def test_dynamic_shapes_in_one_request(rng, sort):
    """One request over changing shapes and axis lengths (one of them shorter than k: its
    whole row); k a constant, then k an input read on the host per infer."""
    shapes = [(2, 7, 11), (1, 3, 40), (3, 2, 5), (2, 9, 130)]
    model = _model(np.float32, (-1, -1, -1), 3, 1, "max", sort)
    _run(model, [{"x": _data(rng, np.float32, s)} for s in shapes], 1, sort)
    k = opset.parameter([], np.int64, name="k")
    model = _model(np.int32, (-1, -1), k, -1, "min", sort, np.int64)
    feeds = [{"x": _data(rng, np.int32, (4, n)), "k": np.array(kk, np.int64)}
             for n, kk in [(10, 3), (10, 10), (70, 0), (70, 65), (300, 1)]]
    _run(model, feeds, -1, sort)


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("axis", [0, -1])
def test_onnx_model_matches_onnxruntime(rng, largest, sorted_, axis):
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=axis, largest=largest,
                          sorted=sorted_)], "topk",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", "b"]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("values", TensorProto.FLOAT, ["c", "d"]),
         helper.make_tensor_value_info("indices", TensorProto.INT64, ["c", "d"])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    proto.ir_version = 8  # (what every onnxruntime reads)
    data = proto.SerializeToString()
    onnx.checker.check_model(proto)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    req = netpass.compile_model(netpass.read_model(data), RUNTIME_DEVICE).create_infer_request()
    for shape, k in [((6, 40), 5), ((9, 300), 9), ((3, 8), 3)]:
        feeds = {"x": _data(rng, np.float32, shape), "k": np.array([k], np.int64)}
        want = dict(zip(["values", "indices"], sess.run(None, feeds)))
        _compare(req.infer(feeds), want, axis, "value" if sorted_ else "none")
    assert req.stats["host_fallbacks"] == 0, req.stats["host_fallback_kinds"]
