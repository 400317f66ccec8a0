"""Interpolate-11 and the ONNX Resize / Upsample rules: one-node ONNX models in netpass's
reference vs onnxruntime (rtol 1e-4, atol 1e-5) over modes, coordinate transforms, nearest
modes, scales/sizes, ranks 3-5, up- and downsampling; ONNX-only variants (antialias,
exclude_outside, tf_crop_and_resize, half_pixel_symmetric, keep_aspect_ratio_policy) vs the
ONNX backend suite's expected data; torch exports; partial shapes; IR and ONNX round trips."""
from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import netpass
from netpass import Dimension, PartialShape, Symbol, opset
from netpass.errors import ShapeInferenceError, UnsupportedOpError
from netpass.ops import Interpolate
from netpass.testing import RUNTIME_DEVICE

RTOL, ATOL = 1e-4, 1e-5

TRANSFORMS = ["half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn",
              "align_corners", "half_pixel_symmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def resize_model(shape: list[int], attrs: dict, scales=None, sizes=None, roi=None,
                 opset_version: int = 19, op: str = "Resize") -> onnx.ModelProto:
    """One Resize node reading X (a graph input) and constant roi/scales/sizes initializers
    (at opset 11 for tf_half_pixel_for_nn, which Resize-13 dropped)."""
    if attrs.get("coordinate_transformation_mode") == "tf_half_pixel_for_nn":
        opset_version = 11
        roi = [] if roi is None else roi
    if opset_version == 11 and sizes is not None:
        scales = []  # Resize-11's scales input is not optional
    inits, names = [], []
    for name, value, dtype in (("roi", roi, np.float32), ("scales", scales, np.float32),
                               ("sizes", sizes, np.int64)):
        if value is None:
            names.append("")
            continue
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        names.append(name)
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, ["x"] + names, ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         shape)],
                              [helper.make_empty_tensor_value_info("y")], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)],
                             ir_version=8)


def data(shape, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return x.astype(np.float32)


def run_ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def check(model: onnx.ModelProto, shape: list[int], seed: int = 0) -> netpass.Model:
    x = data(shape, seed)
    expected = run_ort(model, x)
    m = netpass.read_model(model)
    got = netpass.reference.infer(m, {"x": x})["y"]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    assert m.results[0].get_output_partial_shape(0) == PartialShape(expected.shape)
    return m


# -- ONNX Resize vs onnxruntime --------------------------------------------------------------
# (input shape, scales, sizes): up- and downsampling, integral and fractional factors.
GEOMETRY = [
    ([1, 2, 4, 5], [1, 1, 2, 3], None),
    ([1, 2, 4, 5], [1, 1, 2.5, 1.5], None),
    ([1, 2, 8, 9], [1, 1, 0.5, 0.6], None),
    ([1, 2, 4, 5], None, [1, 2, 7, 13]),
    ([2, 3, 9, 8], None, [2, 3, 4, 3]),
    ([1, 1, 6, 7], None, [1, 1, 9, 3]),
]


def _exact_length(transform: str, shape, scales) -> bool:
    """onnxruntime divides align_corners by the whole output length, ONNX's reference by the
    fractional scale * size; they agree where that product is whole."""
    if transform != "align_corners" or scales is None:
        return True
    return all(float(np.float32(s)) * n == int(float(np.float32(s)) * n)
               for s, n in zip(scales, shape))


@pytest.mark.parametrize("geometry", GEOMETRY, ids=lambda g: f"{g[0]}->{g[1] or g[2]}")
@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("nearest_mode", NEAREST)
def test_nearest_matches_onnxruntime(geometry, transform, nearest_mode):
    shape, scales, sizes = geometry
    if not _exact_length(transform, shape, scales):
        pytest.skip("onnxruntime and ONNX's reference disagree (see _exact_length)")
    if transform == "tf_half_pixel_for_nn" and scales == [1, 1, 0.5, 0.6] and \
            nearest_mode in ("round_prefer_ceil", "ceil"):
        pytest.skip("onnxruntime's 4-D nearest rounds 4.5 / 0.6f (7.4999995) up to 8")
    attrs = {"mode": "nearest", "coordinate_transformation_mode": transform,
             "nearest_mode": nearest_mode}
    check(resize_model(shape, attrs, scales=scales, sizes=sizes), shape)


@pytest.mark.parametrize("geometry", GEOMETRY, ids=lambda g: f"{g[0]}->{g[1] or g[2]}")
@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_linear_and_cubic_match_onnxruntime(geometry, transform, mode):
    shape, scales, sizes = geometry
    if not _exact_length(transform, shape, scales):
        pytest.skip("onnxruntime and ONNX's reference disagree (see _exact_length)")
    attrs = {"mode": mode, "coordinate_transformation_mode": transform}
    check(resize_model(shape, attrs, scales=scales, sizes=sizes), shape)


@pytest.mark.parametrize("a", [-0.5, -0.75])
@pytest.mark.parametrize("geometry", GEOMETRY[:4], ids=lambda g: f"{g[0]}->{g[1] or g[2]}")
def test_cubic_exclude_outside_matches_onnxruntime(geometry, a):
    shape, scales, sizes = geometry
    attrs = {"mode": "cubic", "cubic_coeff_a": a, "exclude_outside": 1}
    check(resize_model(shape, attrs, scales=scales, sizes=sizes), shape)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("extrapolation", [0.0, 10.0])
def test_tf_crop_and_resize_matches_onnxruntime(mode, extrapolation):
    shape = [1, 2, 6, 7]
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize",
             "extrapolation_value": extrapolation}
    roi = [0, 0, -0.2, 0.3, 1, 1, 0.8, 1.3]
    check(resize_model(shape, attrs, sizes=[1, 2, 5, 6], roi=roi), shape)


@settings(max_examples=25, deadline=None)
@given(rank=st.integers(3, 5), mode=st.sampled_from(["nearest", "linear", "cubic"]),
       transform=st.sampled_from(TRANSFORMS[:5]), data_seed=st.integers(0, 10**6),
       use_sizes=st.booleans(), lengths=st.lists(st.integers(1, 7), min_size=3, max_size=3),
       outs=st.lists(st.integers(1, 9), min_size=3, max_size=3))
def test_ranks_3_to_5_match_onnxruntime(rank, mode, transform, data_seed, use_sizes, lengths,
                                         outs):
    """Random spatial sizes (1 to 3 axes), up or down, sizes or whole-number scales."""
    spatial = rank - 2
    shape = [2, 3] + lengths[:spatial]
    if use_sizes:
        scales, sizes = None, [2, 3] + outs[:spatial]
    else:
        scales, sizes = [1, 1] + [float(o % 3 + 1) for o in outs[:spatial]], None
    if mode == "cubic" and rank != 4:
        mode = "linear"  # onnxruntime's cubic resizes 2-D / 4-D data only
    attrs = {"mode": mode, "coordinate_transformation_mode": transform}
    check(resize_model(shape, attrs, scales=scales, sizes=sizes), shape, data_seed)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("geometry", [([1, 2, 9, 10], [1, 1, 0.5, 0.4], None),
                                      ([1, 1, 8, 8], None, [1, 1, 3, 5])],
                         ids=["scales", "sizes"])
def test_antialias_downsampling_matches_onnxruntime(geometry, mode):
    shape, scales, sizes = geometry
    check(resize_model(shape, {"mode": mode, "antialias": 1}, scales=scales, sizes=sizes),
          shape)


def test_antialias_upsampling_is_plain_interpolate():
    m = check(resize_model([1, 1, 3, 4], {"mode": "linear", "antialias": 1},
                           scales=[1, 1, 2, 2]), [1, 1, 3, 4])
    assert [op.type_name for op in m.get_ordered_ops()].count("Interpolate") == 1


@pytest.mark.parametrize("axes", [[2, 3], [3, 2], [-1]])
def test_axes_attribute_matches_onnxruntime(axes):
    shape = [1, 2, 5, 6]
    sizes = {2: 8, 3: 3, -1: 4}
    attrs = {"mode": "linear", "axes": axes}
    check(resize_model(shape, attrs, sizes=[sizes[a] for a in axes]), shape)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_keep_aspect_ratio_policy_matches_onnxruntime(policy, mode):
    shape = [1, 2, 4, 6]
    attrs = {"mode": mode, "axes": [2, 3], "keep_aspect_ratio_policy": policy}
    check(resize_model(shape, attrs, sizes=[7, 7]), shape)


@pytest.mark.parametrize("opset_version", [10, 11, 13, 18])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.6, 0.5]])
def test_older_resize_opsets_match_onnxruntime(opset_version, mode, scales):
    """Resize-10 reads (X, scales) with asymmetric coordinates; 11 needs a roi input."""
    shape = [1, 2, 5, 6]
    roi = [] if opset_version >= 11 else None
    model = resize_model(shape, {"mode": mode}, scales=scales, roi=roi,
                         opset_version=opset_version)
    if opset_version == 10:
        model.graph.node[0].input[:] = ["x", "scales"]
    check(model, shape)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_7_matches_onnxruntime(mode):
    shape = [1, 2, 3, 4]
    node = helper.make_node("Upsample", ["x"], ["y"], mode=mode, scales=[1.0, 1.0, 2.0, 3.0])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         shape)],
                              [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 7)], ir_version=8)
    check(model, shape)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_9_matches_onnxruntime(mode):
    shape = [1, 2, 3, 4]
    model = resize_model(shape, {"mode": mode}, scales=[1, 1, 2.5, 2], op="Upsample",
                         opset_version=9)
    model.graph.node[0].input[:] = ["x", "scales"]
    check(model, shape)


def test_resize_with_runtime_scales_stays_dynamic():
    """Scales from a graph input: one Interpolate, output spatial dims unknown."""
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 4, 4]),
        helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])],
        [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=8)
    m = netpass.read_model(model)
    ps = m.results[0].get_output_partial_shape(0)
    assert str(ps) == "[?,?,?,?]"
    x, s = data([2, 2, 4, 4]), np.asarray([1, 1, 1.5, 2], np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(netpass.reference.infer(m, {"x": x, "s": s})["y"],
                               sess.run(None, {"x": x, "s": s})[0], rtol=RTOL, atol=ATOL)


def _runtime_inputs_model(attrs: dict, inputs: list[str], extra: list, inits=()):
    node = helper.make_node("Resize", inputs, ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 5]),
                      *extra], [helper.make_empty_tensor_value_info("y")],
        initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=8)


RUNTIME_VALUE_VARIANTS = [  # (attrs, name of the run-time input, values per inference)
    ({"mode": "cubic", "exclude_outside": 1}, "sz", [[1, 2, 9, 7], [1, 2, 4, 3]]),
    ({"mode": "linear", "antialias": 1}, "sc", [[1, 1, 0.5, 0.6], [1, 1, 0.75, 0.4]]),
    ({"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"}, "sc",
     [[1, 1, 1.5, 0.8], [1, 1, 0.5, 2.0]]),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, "sc",
     [[1, 1, 1.3, 0.7], [1, 1, 2.0, 1.5]]),
    ({"mode": "nearest", "keep_aspect_ratio_policy": "not_larger", "axes": [2, 3]}, "sz2",
     [[4, 8], [9, 2]]),
]


@pytest.mark.parametrize("attrs,which,values", RUNTIME_VALUE_VARIANTS)
def test_exact_variants_with_runtime_values_match_onnxruntime(attrs, which, values):
    """Variants Interpolate cannot state, scales/sizes fed at run time: a Resize op kept
    whole computes the exact taps per inference, on the reference and on the runtime."""
    slot = {"sc": ["x", "", "sc"], "sz": ["x", "", "", "sz"], "sz2": ["x", "", "", "sz2"]}
    dtype = TensorProto.FLOAT if which == "sc" else TensorProto.INT64
    extra = [helper.make_tensor_value_info(which, dtype, [len(values[0])])]
    model = _runtime_inputs_model(attrs, slot[which], extra)
    m = netpass.read_model(model)
    assert "Resize" in [n.type_name for n in m.get_ordered_ops()]
    # align_corners over a fractional scale * size: onnxruntime divides by the floored
    # length, the specification's reference (and the backend suite) by the fractional one
    if attrs.get("coordinate_transformation_mode") == "align_corners":
        from onnx.reference import ReferenceEvaluator
        engine = ReferenceEvaluator(model)
    else:
        engine = ort.InferenceSession(model.SerializeToString(),
                                      providers=["CPUExecutionProvider"])
    req = netpass.compile_model(m, device=RUNTIME_DEVICE).create_infer_request()
    for v in values:
        feeds = {"x": data([1, 2, 6, 5]),
                 which: np.asarray(v, np.float32 if which == "sc" else np.int64)}
        ref = engine.run(None, feeds)[0]
        for got in (netpass.reference.infer(m, feeds)["y"], req.infer(feeds)["y"]):
            np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)


def test_tf_crop_and_resize_with_runtime_roi():
    model = _runtime_inputs_model(
        {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
         "extrapolation_value": 5.0}, ["x", "r", "", "sz"],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [8])],
        [numpy_helper.from_array(np.asarray([1, 2, 4, 4], np.int64), "sz")])
    m = netpass.read_model(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for roi in ([0, 0, 0.2, 0.1, 1, 1, 0.9, 0.8], [0, 0, -0.2, 0.3, 1, 1, 1.3, 0.6]):
        feeds = {"x": data([1, 2, 6, 5]), "r": np.asarray(roi, np.float32)}
        np.testing.assert_allclose(netpass.reference.infer(m, feeds)["y"],
                                   sess.run(None, feeds)[0], rtol=RTOL, atol=ATOL)


# -- the ONNX backend cases, with their scales/sizes/roi as initializers ----------------------
def _backend_cases() -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases
        cases = collect_testcases(None)
    return sorted((c for c in cases if c.kind == "node" and
                   c.model.graph.node[0].op_type == "Resize"), key=lambda c: c.name)


BACKEND = _backend_cases()


@pytest.mark.parametrize("case", BACKEND, ids=[c.name for c in BACKEND])
def test_backend_case_with_constant_inputs_matches_expected(case):
    """The ONNX reference's expected outputs (rtol 1e-3, the suite's) with every input but X
    frozen into an initializer, so that the exact (constant-matrix) variants apply too."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, expected = case.data_sets[0]
    graph = model.graph
    keep = graph.input[0]
    for vi, value in list(zip(graph.input, inputs))[1:]:
        arr = value if isinstance(value, np.ndarray) else numpy_helper.to_array(value)
        graph.initializer.append(numpy_helper.from_array(arr, vi.name))
    del graph.input[1:]
    assert keep.name == graph.input[0].name
    x = inputs[0] if isinstance(inputs[0], np.ndarray) else numpy_helper.to_array(inputs[0])
    ref = expected[0] if isinstance(expected[0], np.ndarray) else \
        numpy_helper.to_array(expected[0])
    got = netpass.reference.infer(netpass.read_model(model), {keep.name: x})
    np.testing.assert_allclose(got[graph.output[0].name], ref, rtol=1e-3, atol=1e-7)


# -- torch -----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,align", [("nearest", None), ("bilinear", False),
                                        ("bilinear", True)])
def test_torch_upsample_export_matches_onnxruntime(tmp_path, mode, align):
    torch = pytest.importorskip("torch")
    net = torch.nn.Upsample(scale_factor=2, mode=mode, align_corners=align)
    path = tmp_path / "up.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.randn(1, 3, 5, 6),), str(path), input_names=["x"],
                          output_names=["y"], opset_version=17, dynamo=False)
    model = onnx.load(str(path))
    m = check(model, [1, 3, 5, 6])
    assert "Interpolate" in [op.type_name for op in m.get_ordered_ops()]


# -- shape inference -------------------------------------------------------------------------
def test_dynamic_batch_keeps_its_symbol():
    n = Symbol("N")
    x = opset.parameter(PartialShape([Dimension(symbol=n), 3, 10, 12]), np.float32, "x")
    y = opset.interpolate(x, [2.0, 0.5], "linear_onnx", "scales", axes=[2, 3])
    ps = y.get_output_partial_shape(0)
    assert [str(d) for d in ps] == ["?", "3", "20", "6"]
    assert ps[0].symbol is n


def test_interval_dims_scale_their_bounds():
    x = opset.parameter(PartialShape([1, 3, (4, 10), -1]), np.float32, "x")
    y = opset.interpolate(x, [1.0, 1.0, 1.5, 2.0], "nearest", "scales")
    assert str(y.get_output_partial_shape(0)) == "[1,3,6..15,?]"


def test_sizes_from_partial_values():
    """Sizes built from ShapeOf keep the unknown dim's symbol."""
    h = Symbol("H")
    x = opset.parameter(PartialShape([1, 3, Dimension(symbol=h), 8]), np.float32, "x")
    shape = opset.shape_of(x)
    hw = opset.gather(shape, np.asarray([2], np.int64), np.asarray(0, np.int64))
    sizes = opset.concat([hw, opset.constant(np.asarray([16], np.int64))], 0)
    y = opset.interpolate(x, sizes, "nearest", "sizes", axes=[2, 3])
    ps = y.get_output_partial_shape(0)
    assert str(ps) == "[1,3,?,16]"
    assert ps[2].symbol is h


def test_pads_widen_every_axis():
    x = opset.parameter([1, 2, 4, 4], np.float32, "x")
    y = opset.interpolate(x, [8, 8], "nearest", "sizes", pads_begin=[0, 1, 1, 0],
                          pads_end=[0, 0, 1, 0], axes=[2, 3])
    assert y.get_output_partial_shape(0) == PartialShape([1, 3, 8, 8])
    xv = data([1, 2, 4, 4])
    got = netpass.reference.infer(netpass.Model([y], [x]), {"x": xv})
    out = next(iter(got.values()))
    assert np.all(out[:, 0] == 0)  # the padded channel


def test_dynamic_rank_stays_dynamic():
    x = opset.parameter(PartialShape(None), np.float32, "x")
    y = opset.interpolate(x, [2.0, 2.0], "nearest", "scales", axes=[2, 3])
    assert not y.get_output_partial_shape(0).rank_is_static


def test_bad_mode_names_the_node():
    x = opset.parameter([1, 1, 4, 4], np.float32, "x")
    with pytest.raises(ShapeInferenceError, match="mode"):
        opset.interpolate(x, [2.0, 2.0], "bilinear", "scales", axes=[2, 3])


def test_scales_of_integer_type_are_refused():
    x = opset.parameter([1, 1, 4, 4], np.float32, "x")
    with pytest.raises(ShapeInferenceError, match="shape_calculation_mode"):
        Interpolate([x.output(0), opset.constant(np.asarray([2, 2], np.int64)).output(0),
                     opset.constant(np.asarray([2, 3], np.int64)).output(0)],
                    mode="nearest", shape_calculation_mode="scales")


def test_scales_count_must_match_axes():
    x = opset.parameter([1, 1, 4, 4], np.float32, "x")
    with pytest.raises(ShapeInferenceError, match="axes"):
        opset.interpolate(x, [2.0, 2.0, 2.0], "nearest", "scales", axes=[2, 3])


# -- OpenVINO: attribute spelling, IR round trip, CPU plugin ---------------------------------
OV_CASES = [
    dict(mode="nearest", shape_calculation_mode="sizes", nearest_mode="floor",
         coordinate_transformation_mode="asymmetric", sizes=[7, 9]),
    dict(mode="linear_onnx", shape_calculation_mode="scales",
         coordinate_transformation_mode="align_corners", sizes=[2.0, 0.5]),
    dict(mode="cubic", shape_calculation_mode="sizes", cube_coeff=-0.5, sizes=[6, 3]),
    dict(mode="linear", shape_calculation_mode="sizes", sizes=[9, 10]),
    dict(mode="linear", shape_calculation_mode="sizes", antialias=True, sizes=[3, 5]),
    dict(mode="bilinear_pillow", shape_calculation_mode="sizes", sizes=[3, 10]),
    dict(mode="bicubic_pillow", shape_calculation_mode="sizes", sizes=[9, 3]),
    dict(mode="nearest", shape_calculation_mode="sizes", pads_begin=[0, 0, 1, 0],
         pads_end=[0, 0, 0, 2], sizes=[12, 6]),
]


def _ov_model(case: dict) -> tuple[netpass.Model, np.ndarray]:
    case = dict(case)
    sizes = case.pop("sizes")
    x = opset.parameter([1, 2, 6, 7], np.float32, "x")
    y = opset.interpolate(x, sizes, axes=[2, 3], name="y", **case)
    return netpass.Model([y], [x], "m"), data([1, 2, 6, 7])


@pytest.mark.parametrize("case", OV_CASES, ids=lambda c: c["mode"])
def test_ir_round_trip(tmp_path, case):
    m, x = _ov_model(case)
    netpass.save_model(m, str(tmp_path / "m.xml"))
    back = netpass.read_model(str(tmp_path / "m.xml"))
    node = next(op for op in back.get_ordered_ops() if op.type_name == "Interpolate")
    original = next(op for op in m.get_ordered_ops() if op.type_name == "Interpolate")
    assert node.get_attributes() == original.get_attributes()
    a = next(iter(netpass.reference.infer(m, {"x": x}).values()))
    b = next(iter(netpass.reference.infer(back, {"x": x}).values()))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", [c for c in OV_CASES if not c.get("antialias")],
                         ids=lambda c: c["mode"])
def test_openvino_cpu_agrees(tmp_path, case):
    """(OpenVINO's CPU plugin ignores antialias in linear mode; that case is left out.)"""
    ov = pytest.importorskip("openvino")
    m, x = _ov_model(case)
    netpass.save_model(m, str(tmp_path / "m.xml"))
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(tmp_path / "m.xml")), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})  # not bf16
    expected = compiled({"x": x})[compiled.output(0)]
    got = next(iter(netpass.reference.infer(m, {"x": x}).values()))
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def test_ir_spelling_matches_openvino(tmp_path):
    ov = pytest.importorskip("openvino")
    import openvino.opset11 as ov_ops
    p = ov_ops.parameter([1, 3, 4, 4], np.float32, name="x")
    ref = ov_ops.interpolate(p, np.asarray([2.0, 2.0], np.float32), "linear_onnx", "scales",
                             axes=np.asarray([2, 3], np.int64))
    ov.save_model(ov.Model([ref], [p]), str(tmp_path / "ov.xml"))
    x = opset.parameter([1, 3, 4, 4], np.float32, "x")
    y = opset.interpolate(x, [2.0, 2.0], "linear_onnx", "scales", axes=[2, 3])
    netpass.save_model(netpass.Model([y], [x]), str(tmp_path / "np.xml"))

    def data_attrs(path):
        import xml.etree.ElementTree as ET
        layer = next(el for el in ET.parse(path).iter("layer")
                     if el.attrib["type"] == "Interpolate")
        return layer.attrib["version"], layer.find("data").attrib

    assert data_attrs(tmp_path / "np.xml") == data_attrs(tmp_path / "ov.xml")


# -- ONNX export -----------------------------------------------------------------------------
@pytest.mark.parametrize("case", [c for c in OV_CASES
                                  if c["mode"] in ("nearest", "linear_onnx", "cubic")
                                  or (c["mode"] == "linear" and not c.get("antialias"))],
                         ids=lambda c: c["mode"])
def test_onnx_export_runs_in_onnxruntime(tmp_path, case):
    m, x = _ov_model(case)
    netpass.save_model(m, str(tmp_path / "m.onnx"))
    exported = onnx.load(str(tmp_path / "m.onnx"))
    assert "Resize" in [n.op_type for n in exported.graph.node]
    sess = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    got = next(iter(netpass.reference.infer(m, {"x": x}).values()))
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], got, rtol=RTOL, atol=ATOL)


def test_onnx_export_refuses_pillow(tmp_path):
    m, _ = _ov_model(OV_CASES[5])
    with pytest.raises(UnsupportedOpError, match="bilinear_pillow"):
        netpass.save_model(m, str(tmp_path / "m.onnx"))
