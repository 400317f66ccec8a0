"""Data movement ops: one-node ONNX models in netpass's reference vs onnxruntime (exact: these
ops only move data), StridedSlice vs OpenVINO itself, partial shapes and symbols, factories,
errors and the ONNX export rules."""
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
from netpass.errors import NetpassError, ShapeInferenceError, UnsupportedOpError
from netpass.frontend.onnx_writer import to_onnx

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def make(op: str, args: list, attrs: dict | None = None, opset_version: int = 17,
         n_out: int = 1) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One-node model. ``args``: (name, array, "in" | "init") in input order, or None for an
    omitted optional input. Graph inputs are fed with the given arrays."""
    names, inputs, inits, feeds = [], [], [], {}
    for a in args:
        if a is None:
            names.append("")
            continue
        name, arr, kind = a
        arr = np.asarray(arr)
        names.append(name)
        if kind == "in":
            inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape))
            feeds[name] = arr
        else:
            inits.append(numpy_helper.from_array(arr, name))
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)],
                              ir_version=8)
    return model, feeds


def run_both(model: onnx.ModelProto, feeds: dict) -> tuple[list, list]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, feeds)
    m = netpass.read_model(model)
    got = netpass.reference.infer(m, feeds)
    return [got[o.name] for o in model.graph.output], expected


def check_exact(model: onnx.ModelProto, feeds: dict) -> netpass.Model:
    got, expected = run_both(model, feeds)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        assert g.shape == e.shape
        np.testing.assert_array_equal(g, e)
    m = netpass.read_model(model)
    for r, e in zip(m.results, expected):
        # Inferred shapes are exact where static and cover the run-time shape otherwise.
        assert PartialShape(e.shape).refines(r.output(0).partial_shape)
    return m


def rand(shape, seed: int = 0, dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 0.1).astype(dtype)


def i64(v) -> np.ndarray:
    return np.asarray(v, dtype=np.int64)


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4)


# -- Reshape / Flatten ----------------------------------------------------------------------
@SETTINGS
@given(shape=shapes, data=st.data())
def test_reshape_special_zero_and_minus_one_match_onnxruntime(shape, data):
    rank = len(shape)
    keep = data.draw(st.integers(0, rank - 1))  # leading dims copied with 0
    rest = int(np.prod(shape[keep:]))
    pattern = [0] * keep + data.draw(st.sampled_from([[-1], [rest], [1, -1], [-1, 1]]))
    check_exact(*make("Reshape", [("x", rand(shape), "in"), ("s", i64(pattern), "init")]))


def test_reshape_allowzero_keeps_zero_dims():
    model, feeds = make("Reshape", [("x", rand([0, 3]), "in"), ("s", i64([3, 0]), "init")],
                        {"allowzero": 1}, opset_version=14)
    check_exact(model, feeds)


def test_reshape_from_shape_input_computed_at_runtime():
    model, feeds = make("Reshape", [("x", rand([2, 3, 4]), "in"), ("s", i64([4, -1]), "in")])
    m = check_exact(model, feeds)
    assert m.results[0].output(0).partial_shape == PartialShape.dynamic(2)


def test_reshape_element_count_mismatch_names_node():
    x = opset.parameter([2, 3], np.float32)
    with pytest.raises(ShapeInferenceError, match="Reshape.*6 elements"):
        opset.reshape(x, [4, 2], False)


def test_reshape_minus_one_cancels_equal_symbols():
    b = Symbol("b")
    x = opset.parameter(PartialShape([Dimension(symbol=b), Dimension(), 64]), np.float32)
    r = opset.reshape(x, [0, -1], True)
    assert r.output(0).partial_shape[0].symbol is b
    ps = opset.reshape(x, opset.concat([opset.gather(opset.shape_of(x), [0], 0), [-1, 8]], 0),
                       False).output(0).partial_shape
    assert ps[0].symbol is b and ps[2] == 8 and ps[1].is_dynamic


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten_matches_onnxruntime(axis):
    check_exact(*make("Flatten", [("x", rand([2, 3, 4]), "in")], {"axis": axis}))


def test_flatten_dynamic_batch_keeps_symbol():
    proto = helper.make_model(helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["y"], axis=1)], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", 3, 4])],
        [helper.make_empty_tensor_value_info("y")]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    ps = netpass.read_model(proto).results[0].output(0).partial_shape
    assert ps[0].symbol is not None and ps[0].symbol.name == "b" and ps[1] == 12


def test_flatten_dynamic_dims_on_both_sides():
    proto = helper.make_model(helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["y"], axis=2)], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", 3, "s", 2])],
        [helper.make_empty_tensor_value_info("y")]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    m = netpass.read_model(proto)
    x = rand([2, 3, 5, 2])
    np.testing.assert_array_equal(netpass.reference.infer(m, {"x": x})["y"], x.reshape(6, 10))


# -- Squeeze / Unsqueeze / Transpose / Concat -----------------------------------------------
@pytest.mark.parametrize("opset_version", [11, 13])
@pytest.mark.parametrize("axes", [None, [0], [-1], [0, 2]])
def test_squeeze_matches_onnxruntime(opset_version, axes):
    x = ("x", rand([1, 3, 1, 1]), "in")
    if axes is None:
        model, feeds = make("Squeeze", [x], opset_version=opset_version)
    elif opset_version < 13:
        model, feeds = make("Squeeze", [x], {"axes": axes}, opset_version)
    else:
        model, feeds = make("Squeeze", [x, ("a", i64(axes), "init")], None, opset_version)
    check_exact(model, feeds)


def test_squeeze_with_empty_axes_removes_every_one():
    node = opset.squeeze(opset.parameter([1, 3, 1], np.float32), np.zeros(0, np.int64))
    assert node.output(0).partial_shape == PartialShape([3])
    assert node.evaluate([rand([1, 3, 1]), np.zeros(0, np.int64)])[0].shape == (3,)


def test_squeeze_keeps_a_listed_axis_not_of_size_one():
    """OpenVINO's Squeeze-1 (since 2024.3; its torch frontend writes ``x.squeeze(0)`` so): a
    listed axis of a static size other than 1 is kept, a dynamic one that may be 1 removed."""
    node = opset.squeeze(opset.parameter([2, -1, 1], np.float32), [0, 1, 2])
    assert node.output(0).partial_shape == PartialShape([2])
    assert node.evaluate([rand([2, 1, 1]), np.array([0, 1, 2])])[0].shape == (2,)


def test_onnx_squeeze_of_non_one_dim_is_an_error():
    """ONNX, unlike OpenVINO, makes a listed axis of another size an error."""
    model, _ = make("Squeeze", [("x", rand([2, 3]), "in"), ("a", i64([0]), "init")], None, 13)
    with pytest.raises(NetpassError, match="removes only axes of size 1"):
        netpass.read_model(model)


@pytest.mark.parametrize("opset_version", [11, 13])
@pytest.mark.parametrize("axes", [[0], [-1], [0, 3], [1, -1]])
def test_unsqueeze_matches_onnxruntime(opset_version, axes):
    x = ("x", rand([2, 3]), "in")
    if opset_version < 13:
        model, feeds = make("Unsqueeze", [x], {"axes": axes}, opset_version)
    else:
        model, feeds = make("Unsqueeze", [x, ("a", i64(axes), "init")], None, opset_version)
    check_exact(model, feeds)


@SETTINGS
@given(shape=shapes, data=st.data())
def test_transpose_matches_onnxruntime(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    check_exact(*make("Transpose", [("x", rand(shape), "in")], {"perm": list(perm)}))


def test_transpose_without_perm_reverses_axes():
    check_exact(*make("Transpose", [("x", rand([2, 3, 4]), "in")]))


def test_transpose_keeps_symbols():
    b = Symbol("b")
    x = opset.parameter(PartialShape([Dimension(symbol=b), 3, 5]), np.float32)
    ps = opset.transpose(x, [2, 0, 1]).output(0).partial_shape
    assert ps == PartialShape([5, -1, 3]) and ps[1].symbol is b


def test_concat_of_mismatched_dims_names_node_and_input():
    a, b = opset.parameter([2, 3], np.float32), opset.parameter([4, 3], np.float32)
    with pytest.raises(ShapeInferenceError, match=r"Concat .*input 1 dim 0 is 4"):
        opset.concat([a, b], 1)


def test_split_of_indivisible_dim_is_an_error():
    with pytest.raises(ShapeInferenceError, match="not divisible into 2"):
        opset.split(opset.parameter([3, 4], np.float32), 0, 2)


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_concat_matches_onnxruntime(axis):
    shapes3 = [[2, 3], [2, 3], [2, 3]]
    for s in shapes3:
        s[axis] += len(s)
    args = [(f"x{i}", rand(s, i), "in") for i, s in enumerate(shapes3)]
    check_exact(*make("Concat", args, {"axis": axis}))


def test_concat_sums_dynamic_axis_and_merges_others():
    a = opset.parameter(PartialShape([-1, 4]), np.float32)
    b = opset.parameter(PartialShape([3, -1]), np.float32)
    assert opset.concat([a, b], 0).output(0).partial_shape == PartialShape([Dimension(3, -1), 4])
    assert opset.concat([a, b], 1).output(0).partial_shape == PartialShape([3, Dimension(4, -1)])


# -- Split ----------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_split_equal_matches_onnxruntime(axis):
    check_exact(*make("Split", [("x", rand([6, 6, 6]), "in")], {"axis": axis}, n_out=3))


def test_split_attribute_before_opset_13():
    check_exact(*make("Split", [("x", rand([4, 7]), "in")], {"axis": 1, "split": [2, 0, 5]},
                      11, n_out=3))


@SETTINGS
@given(data=st.data())
def test_split_input_lengths_match_onnxruntime(data):
    lengths = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    shape = [2, sum(lengths), 3]
    check_exact(*make("Split", [("x", rand(shape), "in"), ("s", i64(lengths), "init")],
                      {"axis": 1}, 13, n_out=len(lengths)))


@pytest.mark.parametrize("n", [2, 3, 4])
def test_split_num_outputs_uneven_last_chunk(n):
    check_exact(*make("Split", [("x", rand([3, 7]), "in")], {"axis": 1, "num_outputs": n}, 18,
                      n_out=n))


def test_variadic_split_minus_one_and_dynamic_dim():
    x = opset.parameter(PartialShape([Dimension(5, 10), 3]), np.float32)
    s = opset.variadic_split(x, 0, [2, -1])
    assert s.output(0).partial_shape == PartialShape([2, 3])
    assert s.output(1).partial_shape == PartialShape([Dimension(3, 8), 3])
    y = rand([7, 3])
    m = Model([s.output(0), s.output(1)], [x])
    outs = list(netpass.reference.infer(m, {m.input_names[0]: y}).values())
    np.testing.assert_array_equal(outs[0], y[:2])
    np.testing.assert_array_equal(outs[1], y[2:])


# -- Slice ----------------------------------------------------------------------------------
bound = st.one_of(st.integers(-6, 6), st.sampled_from([2**31 - 1, -2**31, 2**63 - 1, -2**63]))


@SETTINGS
@given(shape=shapes, data=st.data())
def test_slice_matches_onnxruntime(shape, data):
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                              unique_by=lambda a: a % rank))
    n = len(axes)
    starts = data.draw(st.lists(bound, min_size=n, max_size=n))
    ends = data.draw(st.lists(bound, min_size=n, max_size=n))
    steps = data.draw(st.lists(st.sampled_from([1, 2, 3, -1, -2]), min_size=n, max_size=n))
    # onnxruntime reads an INT_MAX end with a negative step as "to the front", against the ONNX
    # spec and its own shape inference (the spec clamps it to dim - 1, as netpass does).
    ends = [100 if s < 0 and e >= 2**31 - 1 else e for e, s in zip(ends, steps)]
    args = [("x", rand(shape), "in"), ("b", i64(starts), "init"), ("e", i64(ends), "init"),
            ("a", i64(axes), "init"), ("s", i64(steps), "init")]
    check_exact(*make("Slice", args))


def test_slice_without_axes_and_steps():
    args = [("x", rand([4, 5]), "in"), ("b", i64([1, -3]), "init"), ("e", i64([3, 100]), "init")]
    check_exact(*make("Slice", args, opset_version=13))


def test_slice_attributes_before_opset_10():
    check_exact(*make("Slice", [("x", rand([4, 5, 6]), "in")],
                      {"starts": [1, -4], "ends": [1000, -1], "axes": [0, 2]}, 9))


def test_slice_with_runtime_bounds():
    args = [("x", rand([4, 5]), "in"), ("b", i64([1]), "in"), ("e", i64([-1]), "in"),
            ("a", i64([1]), "init")]
    m = check_exact(*make("Slice", args))
    assert m.results[0].output(0).partial_shape == PartialShape([4, Dimension(0, 5)])


def test_slice_of_dynamic_dim_keeps_symbol_or_bounds():
    s = Symbol("s")
    x = opset.parameter(PartialShape([Dimension(symbol=s), Dimension(2, 10)]), np.float32)
    full = opset.slice(x, [0], [2**63 - 1], [1], [0]).output(0).partial_shape
    assert full[0].symbol is s
    inner = opset.slice(x, [1], [-1], [1], [1]).output(0).partial_shape
    assert inner[1] == Dimension(0, 8)
    head = opset.slice(x, [0], [3], [1], [0]).output(0).partial_shape
    assert head[0] == Dimension(0, 3)
    rev = opset.slice(x, [-1], [-2**63], [-1], [0]).output(0).partial_shape
    assert rev[0].symbol is s


@SETTINGS
@given(lo=st.integers(0, 8), span=st.one_of(st.integers(1, 8), st.just(None)),
       start=bound, stop=bound, step=st.sampled_from([1, 2, 3, -1, -2, -3]))
def test_slice_of_interval_dim_is_exact_bounds(lo, span, start, stop, step):
    d = Dimension(lo, -1 if span is None else lo + span)
    x = opset.parameter(PartialShape([d]), np.float32)
    out = opset.slice(x, [start], [stop], [step]).output(0).partial_shape[0]
    hi = lo + span if span is not None else 64
    lengths = [len(range(n)[slice(*_onnx_slice(n, start, stop, step))]) for n in range(lo, hi + 1)]
    if span is not None:  # exact over a bounded interval
        assert (out.min, out.max) == (min(lengths), max(lengths))
    else:  # sound over the first dims of an unbounded one (huge dims may differ)
        assert out.min <= min(lengths) and out.max >= max(lengths)


def _onnx_slice(n: int, start: int, stop: int, step: int) -> tuple:
    """The ONNX spec's clamping, as a python slice over range(n)."""
    start = start + n if start < 0 else start
    stop = stop + n if stop < 0 else stop
    if step > 0:
        start, stop = min(max(start, 0), n), min(max(stop, 0), n)
    else:
        start, stop = min(max(start, 0), n - 1), min(max(stop, -1), n - 1)
    return start, (stop if stop >= 0 else None), step


# -- StridedSlice vs OpenVINO ---------------------------------------------------------------
def _openvino_strided_slice(x, begin, end, strides, masks):
    """OpenVINO's own shape inference and reference evaluate (its CPU plugin mis-executes
    some mask combinations, e.g. a new axis before a shrunk one)."""
    import openvino as ov
    import openvino.opset8 as ov8
    args = [i64(begin), i64(end), i64(strides)]
    node = ov8.strided_slice(ov8.parameter(list(x.shape), np.float32),
                             *[ov8.constant(a) for a in args], *masks)
    shape = list(node.get_output_partial_shape(0).to_shape())
    out = ov.Tensor(np.zeros(shape, np.float32))
    assert node.evaluate([out], [ov.Tensor(x)] + [ov.Tensor(a) for a in args])
    return shape, out.data.copy()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes, data=st.data())
def test_strided_slice_matches_openvino(shape, data):
    n = data.draw(st.integers(1, len(shape) + 1))
    ints = st.lists(st.integers(-6, 6), min_size=n, max_size=n)
    bits = st.lists(st.integers(0, 1), min_size=n, max_size=n)  # OpenVINO: equal mask sizes
    begin, end = data.draw(ints), data.draw(ints)
    strides = data.draw(st.lists(st.sampled_from([1, 2, -1, -2]), min_size=n, max_size=n))
    bm, em, nm, sm = (data.draw(bits) for _ in range(4))
    ell = [0] * n
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, n - 1))
        ell[at], nm[at], sm[at] = 1, 0, 0  # OpenVINO disagrees with itself on mixed bits
    real = sum(1 for i in range(n) if not ell[i] and not nm[i])
    if real > len(shape):
        return
    for i in range(n):  # OpenVINO requires shrink indices in range
        if sm[i] and not ell[i] and not nm[i]:
            begin[i] = data.draw(st.integers(-1, 0))
    x = rand(shape)
    ov_shape, ov_out = _openvino_strided_slice(x, begin, end, strides, (bm, em, nm, sm, ell))
    node = opset.strided_slice(opset.parameter(shape, np.float32), begin, end, strides, bm, em,
                               nm, sm, ell)
    assert node.output(0).partial_shape == PartialShape(ov_shape)
    got = node.evaluate([x, i64(begin), i64(end), i64(strides)])[0]
    assert list(got.shape) == ov_shape
    np.testing.assert_array_equal(got, ov_out.reshape(got.shape))


def test_strided_slice_ellipsis_new_and_shrink_axes():
    x = rand([2, 3, 4, 5])
    node = opset.strided_slice(opset.parameter([2, 3, 4, 5], np.float32), [0, 0, 1, 0],
                               [0, 0, 3, 0], [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0],
                               new_axis_mask=[0, 1, 0, 0], shrink_axis_mask=[0, 0, 0, 1],
                               ellipsis_mask=[1, 0, 0, 0])
    assert node.output(0).partial_shape == PartialShape([2, 3, 1, 2])
    got = node.evaluate([x, i64([0, 0, 1, 0]), i64([0, 0, 3, 0]), i64([1, 1, 1, 1])])[0]
    np.testing.assert_array_equal(got, x[..., None, 1:3, 0])


def test_strided_slice_partial_value_of_shape():
    b = Symbol("b")
    x = opset.parameter(PartialShape([Dimension(symbol=b), 7, 9]), np.float32)
    ss = opset.strided_slice(opset.shape_of(x), [0], [2], [1], [0], [0])
    pv = ss.output(0).partial_value
    assert pv[0].symbol is b and pv[1] == 7


# -- Expand / Broadcast / Tile --------------------------------------------------------------


def test_expand_to_the_shape_of_a_one_row_slice():
    """Expand of 6 rows to the shape of a slice of a dynamic tensor's first row (its length
    0..1: 1 at run time, as broadcasting needs; JetMoE's attention) reads and runs."""
    nodes = [helper.make_node("Slice", ["y", "zero", "one", "zero"], ["row"]),
             helper.make_node("Shape", ["row"], ["s"]),
             helper.make_node("Expand", ["x", "s"], ["out"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [6, 8]),
                     helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", 8])],
        [helper.make_empty_tensor_value_info("out")],
        [numpy_helper.from_array(i64([0]), "zero"), numpy_helper.from_array(i64([1]), "one")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    m = check_exact(model, {"x": rand([6, 8]), "y": rand([3, 8], seed=1)})
    assert m.results[0].output(0).partial_shape == PartialShape([6, 8])


@pytest.mark.parametrize("shape,target", [([3, 1], [2, 3, 4]), ([1], [5]), ([2, 1, 4], [3, 1]),
                                          ([4], [1, 1]), ([2, 3], [2, 3])])
def test_expand_matches_onnxruntime(shape, target):
    check_exact(*make("Expand", [("x", rand(shape), "in"), ("s", i64(target), "init")]))


def test_broadcast_explicit_mode():
    x = rand([3, 4])
    node = opset.broadcast(opset.parameter([3, 4], np.float32), [3, 2, 4], [0, 2], "explicit")
    assert node.output(0).partial_shape == PartialShape([3, 2, 4])
    got = node.evaluate([x, i64([3, 2, 4]), i64([0, 2])])[0]
    np.testing.assert_array_equal(got, np.broadcast_to(x[:, None, :], (3, 2, 4)))


def test_broadcast_numpy_mode_rejects_shrinking():
    with pytest.raises(ShapeInferenceError, match="does not broadcast"):
        opset.broadcast(opset.parameter([5, 3], np.float32), [2, 1, 3])


def test_broadcast_to_shape_of_keeps_symbols():
    b = Symbol("b")
    x = opset.parameter(PartialShape([Dimension(symbol=b), 4]), np.float32)
    ps = opset.broadcast(opset.constant(np.float32(1)), opset.shape_of(x)).output(0).partial_shape
    assert ps[0].symbol is b and ps[1] == 4


@pytest.mark.parametrize("shape,reps", [([2, 3], [1, 2]), ([2, 3], [3, 1]), ([1, 2, 3], [2, 1, 2])])
def test_tile_matches_onnxruntime(shape, reps):
    check_exact(*make("Tile", [("x", rand(shape), "in"), ("r", i64(reps), "init")]))


def test_broadcast_and_tile_of_a_dim_keep_its_symbol():
    s = Symbol("s")
    x = opset.parameter(PartialShape([Dimension(symbol=s), 3]), np.float32)
    dim = opset.gather(opset.shape_of(x), [0], 0)
    for node in (opset.broadcast(dim, [3]), opset.tile(dim, [3])):
        pv = node.output(0).partial_value
        assert len(pv) == 3 and all(d.symbol is s for d in pv)


def test_tile_with_more_repeats_than_rank():
    node = opset.tile(opset.parameter([2, 3], np.float32), [2, 1, 2])
    assert node.output(0).partial_shape == PartialShape([2, 2, 6])


# -- Pad ------------------------------------------------------------------------------------
pad_amount = st.integers(-1, 2)


@SETTINGS
@given(shape=st.lists(st.integers(3, 4), min_size=1, max_size=3), data=st.data(),
       mode=st.sampled_from(["constant", "edge", "reflect"]))
def test_pad_matches_onnxruntime(shape, data, mode):
    rank = len(shape)
    pads = data.draw(st.lists(pad_amount, min_size=2 * rank, max_size=2 * rank))
    if mode == "reflect":  # onnxruntime crops before reflecting and then rejects some pads
        pads = [max(p, 0) for p in pads]
    args = [("x", rand(shape), "in"), ("p", i64(pads), "init")]
    if mode == "constant":
        args.append(("v", np.float32(2.5), "init"))
    check_exact(*make("Pad", args, {"mode": mode}))


def test_pad_attributes_before_opset_11():
    check_exact(*make("Pad", [("x", rand([2, 3]), "in")],
                      {"pads": [1, 0, 0, 2], "value": 1.5, "mode": "constant"}, 2))


def test_pad_axes_opset_18():
    args = [("x", rand([2, 3, 4]), "in"), ("p", i64([1, 2, 0, 1]), "init"), None,
            ("a", i64([-1, 0]), "init")]
    check_exact(*make("Pad", args, {"mode": "edge"}, 18))


def test_pad_runtime_pads():
    args = [("x", rand([2, 3]), "in"), ("p", i64([1, 0, 0, 2]), "in")]
    m = check_exact(*make("Pad", args, {"mode": "reflect"}))
    assert m.results[0].output(0).partial_shape == PartialShape.dynamic(2)


@pytest.mark.parametrize("runtime_pads", [False, True])
def test_pad_wrap_matches_onnxruntime(runtime_pads):
    args = [("x", rand([3, 4]), "in"), ("p", i64([2, -1, 1, 5]), "in" if runtime_pads else "init")]
    check_exact(*make("Pad", args, {"mode": "wrap"}, 19))


def test_pad_symmetric_matches_numpy():
    x = rand([3, 4])
    node = opset.pad(opset.parameter([3, 4], np.float32), [2, 1], [1, 3], "symmetric")
    got = node.evaluate([x, i64([2, 1]), i64([1, 3])])[0]
    np.testing.assert_array_equal(got, np.pad(x, [(2, 1), (1, 3)], mode="symmetric"))


def test_pad_dynamic_dim_bounds():
    x = opset.parameter(PartialShape([Dimension(2, 8), -1]), np.float32)
    ps = opset.pad(x, [1, 0], [-1, 0], "constant").output(0).partial_shape
    assert ps[0] == Dimension(2, 8) and ps[1].symbol is None


# -- Reverse --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,axes", [("index", [0, -1]), ("mask", [True, False, True]),
                                       ("index", [])])
def test_reverse_flips_axes_and_exports_as_slice(mode, axes):
    x = opset.parameter([2, 3, 4], np.float32, "x")
    m = Model([opset.reverse(x, axes, mode)], [x])
    feeds = {"x": rand([2, 3, 4])}
    got = list(netpass.reference.infer(m, feeds).values())[0]
    flip = [i for i, a in enumerate(axes) if a] if mode == "mask" else [a % 3 for a in axes]
    np.testing.assert_array_equal(got, np.flip(feeds["x"], flip))
    sess = ort.InferenceSession(to_onnx(m).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(sess.run(None, feeds)[0], got)


# -- DepthToSpace / SpaceToDepth ------------------------------------------------------------
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_matches_onnxruntime(mode):
    check_exact(*make("DepthToSpace", [("x", rand([2, 8, 3, 2]), "in")],
                      {"blocksize": 2, "mode": mode}))


def test_space_to_depth_matches_onnxruntime():
    check_exact(*make("SpaceToDepth", [("x", rand([2, 3, 4, 6]), "in")], {"blocksize": 2}))


@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
def test_space_to_depth_inverts_depth_to_space(mode):
    x = rand([1, 3, 4, 2, 6])
    s2d = opset.space_to_depth(opset.parameter(x.shape, np.float32), mode, 2)
    y = s2d.evaluate([x])[0]
    d2s = opset.depth_to_space(opset.parameter(y.shape, np.float32), mode, 2)
    assert s2d.output(0).partial_shape == PartialShape([1, 24, 2, 1, 3])
    np.testing.assert_array_equal(d2s.evaluate([y])[0], x)


# -- export ---------------------------------------------------------------------------------
def _roundtrip(model: onnx.ModelProto, feeds: dict) -> None:
    m = netpass.read_model(model)
    back = to_onnx(m)
    sess = ort.InferenceSession(back.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = netpass.reference.infer(m, feeds)
    for name, got in zip([o.name for o in back.graph.output], sess.run(None, feeds)):
        np.testing.assert_array_equal(got, expected[name])


@pytest.mark.parametrize("op,args,attrs,n_out", [
    ("Reshape", [("x", rand([2, 3, 4]), "in"), ("s", i64([0, -1]), "init")], {}, 1),
    ("Transpose", [("x", rand([2, 3, 4]), "in")], {"perm": [1, 2, 0]}, 1),
    ("Squeeze", [("x", rand([1, 3, 1]), "in"), ("a", i64([0]), "init")], {}, 1),
    ("Unsqueeze", [("x", rand([3]), "in"), ("a", i64([0, 2]), "init")], {}, 1),
    ("Concat", [("x", rand([2, 3]), "in"), ("z", rand([2, 1]), "in")], {"axis": -1}, 1),
    ("Split", [("x", rand([2, 6]), "in"), ("s", i64([1, 5]), "init")], {"axis": 1}, 2),
    ("Split", [("x", rand([2, 6]), "in")], {"axis": 1}, 3),
    ("Slice", [("x", rand([5, 6]), "in"), ("b", i64([4]), "init"), ("e", i64([0]), "init"),
               ("a", i64([1]), "init"), ("s", i64([-2]), "init")], {}, 1),
    ("Expand", [("x", rand([3, 1]), "in"), ("s", i64([2, 1, 4]), "init")], {}, 1),
    ("Tile", [("x", rand([2, 3]), "in"), ("r", i64([2, 2]), "init")], {}, 1),
    ("Pad", [("x", rand([3, 3]), "in"), ("p", i64([1, 0, 0, 2]), "init")], {"mode": "edge"}, 1),
    ("DepthToSpace", [("x", rand([1, 8, 2, 2]), "in")], {"blocksize": 2, "mode": "CRD"}, 1),
    ("SpaceToDepth", [("x", rand([1, 2, 4, 4]), "in")], {"blocksize": 2}, 1),
])
def test_export_roundtrip_in_onnxruntime(op, args, attrs, n_out):
    _roundtrip(*make(op, args, attrs, n_out=n_out))


def test_strided_slice_exports_as_slice_squeeze_unsqueeze():
    x = opset.parameter([4, 5, 6], np.float32, "x")
    node = opset.strided_slice(x, [1, 0, 0, -1], [3, 0, 0, 0], [1, 1, 1, -2], [0, 1, 0, 1],
                               [0, 1, 0, 1], new_axis_mask=[0, 0, 1], shrink_axis_mask=[1])
    m = Model([node], [x])
    back = to_onnx(m)
    feeds = {"x": rand([4, 5, 6])}
    sess = ort.InferenceSession(back.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = list(netpass.reference.infer(m, feeds).values())[0]
    np.testing.assert_array_equal(sess.run(None, feeds)[0], expected)


def test_symmetric_pad_export_is_refused():
    x = opset.parameter([3, 3], np.float32, "x")
    with pytest.raises(UnsupportedOpError, match="symmetric"):
        to_onnx(Model([opset.pad(x, [1, 1], [1, 1], "symmetric")], [x]))


def _source(shape, value):
    """A Constant of ``value`` where given, else a Parameter of ``shape``: the input of a
    ``.of`` construction test."""
    if value is not None:
        return opset.constant(value.astype(np.float32)).output(0)
    return opset.parameter(PartialShape(shape), np.float32).output(0)


def _assert_same_output(a, b, symbols: bool) -> None:
    """Two output ports alike: type, shape, partial value, symbols (``symbols``), value."""
    assert a.et is b.et and a.ps == b.ps and a.pval == b.pval
    if symbols:
        assert [d.symbol for d in a.ps] == [d.symbol for d in b.ps]
    assert (a.val is None and b.val is None) or np.array_equal(a.val, b.val)


@pytest.mark.parametrize("shape, value", [
    ([2, 3, 5], None),
    ([Dimension(symbol=Symbol("b")), Dimension(2, 9), 4], None),
    (None, None),                           # dynamic rank: the generic way
    ([2, 3], np.arange(6.0).reshape(2, 3)),  # known elements: the generic way
])
def test_transpose_of_equals_the_generic_construction(shape, value):
    from netpass.ops.movement import Transpose
    x = _source(shape, value)
    order = [1, 0] if value is not None else [2, 0, 1]
    order_value = opset.constant(np.array(order, np.int64)).output(0)
    fast, ref = Transpose.of(x, order_value, order), Transpose([x, order_value])
    _assert_same_output(fast._outs[0], ref._outs[0], shape is not None)
    assert fast.input_values() == ref.input_values()
    assert {c.node for c in x.consumers()} == {fast, ref}


@pytest.mark.parametrize("shape,value,axis,lengths", [
    ([1, 8, 8, 8], None, 3, [2, 5, 1]),
    ([2, (1, 6), 4], None, 2, [1, 3]),     # a dynamic dim off the axis
    ([Dimension(symbol=Symbol("n")), 6], None, 1, [6]),  # a symbol off the axis
    ([(1, 6), 4], None, 0, [1, 3]),        # a dynamic dim on the axis: the generic way
    (None, None, 0, [1, 1]),               # dynamic rank: the generic way
    ([4], np.arange(4.0), 0, [1, 3]),      # known elements: the generic way
])
def test_variadic_split_of_equals_the_generic_construction(shape, value, axis, lengths):
    from netpass.ops.movement import VariadicSplit
    x = _source(shape, value)
    axis_value = opset.constant(np.array(axis, np.int64)).output(0)
    lengths_value = opset.constant(np.array(lengths, np.int64)).output(0)
    fast = VariadicSplit.of(x, axis_value, lengths_value, axis, lengths)
    ref = VariadicSplit([x, axis_value, lengths_value])
    assert len(fast._outs) == len(ref._outs) == len(lengths)
    for a, b in zip(fast._outs, ref._outs):
        _assert_same_output(a, b, shape is not None)
    assert fast.input_values() == ref.input_values()
    assert {c.node for c in x.consumers()} == {fast, ref}
    assert {c.node for c in lengths_value.consumers()} == {fast, ref}


def test_slice_like_starts_with_the_state_of_the_slice_it_replaces():
    from netpass.ops.movement import Slice
    x = opset.parameter([4, 6], np.float32).output(0)
    ints = [opset.constant(np.array(v, np.int64)).output(0) for v in ([1], [3], [1], [1])]
    main = Slice([x, *ints[:3]])          # rows 1:3 -> [2, 6]
    new = Slice.like(main, [x, *ints])    # columns 1:3 -> [4, 2] once inferred
    assert new._outs[0].ps == main._outs[0].ps == PartialShape([2, 6])
    assert new._outs[0].et is main._outs[0].et
    assert {c.node for c in x.consumers()} == {main, new}
    new.validate_and_infer_types()
    assert new._outs[0].ps == PartialShape([4, 2])
    # known elements: inferred (the generic way)
    v = opset.constant(np.arange(4, dtype=np.int64)).output(0)
    known = Slice([v, *ints[:3]])
    assert Slice.like(known, [v, *ints[:3]])._outs[0].val.tolist() == [1, 2]
