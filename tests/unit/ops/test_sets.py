"""NonZero, Unique and Compress (outputs sized by the data): import vs onnxruntime on random
data (ranks 0-3, bool/int/float, many repeats, sorted and first-occurrence order, axis None /
0 / 1, conditions shorter than the axis); bounded partial shapes; one runtime request whose
output sizes change from one inference to the next; IR v11 round trip read by OpenVINO. Exact.
"""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_export, check_import, check_ir_round_trip, check_openvino, one_node

import netpass
from netpass import Model, opset
from netpass.core.dimension import Dimension
from netpass.core.shape import PartialShape
from netpass.testing import RUNTIME_DEVICE

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.float32])
def test_non_zero_matches_onnxruntime(shape, dtype):
    x = (RNG.random(shape) < 0.4).astype(dtype) * (RNG.integers(1, 5, shape) if shape else 3)
    x = np.asarray(x, dtype)
    # a scalar gives [0, count] by the specification; onnxruntime gives [1, count]
    engine = "reference" if not shape else "auto"
    model = check_import(one_node("NonZero", {"x": x}, opset=13), {"x": x}, engine=engine)
    check_export(model, {"x": x}, engine=engine)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("sorted_", [0, 1])
def test_unique_matches_onnxruntime(axis, sorted_):
    x = RNG.integers(0, 3, (6, 3)).astype(np.float32)
    x[4] = x[1]  # a repeated row
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    model = check_import(one_node("Unique", {"x": x}, n_out=4, opset=11, **attrs), {"x": x})
    check_export(model, {"x": x})


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("cond_len", [2, 4])
def test_compress_matches_onnxruntime(axis, cond_len):
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    cond = RNG.random(cond_len) < 0.6
    cond[0] = True
    feeds = {"x": x, "c": cond}
    attrs = {} if axis is None else {"axis": axis}
    check_import(one_node("Compress", feeds, opset=11, **attrs), feeds)


def test_bounded_partial_shapes():
    x = opset.parameter(PartialShape([Dimension(1, 4), 5]), "f32", "x")
    assert opset.non_zero(x).output(0).partial_shape == PartialShape([2, Dimension(0, 20)])
    u = opset.unique(x, axis=0)
    assert u.output(0).partial_shape == PartialShape([Dimension(1, 4), 5])
    assert u.output(2).partial_shape == PartialShape([Dimension(1, 4)])
    flat = opset.unique(x)
    assert flat.output(0).partial_shape == PartialShape([Dimension(1, 20)])


def test_runtime_sizes_follow_the_data():
    x = opset.parameter([-1], "f32", "x")
    nz = opset.non_zero(x)
    u = opset.unique(x, sorted=False)
    doubled = opset.add(u.output(0), u.output(0))  # a consumer sized by the data-sized output
    model = Model([nz.output(0), doubled, u.output(3)], [x])
    req = netpass.compile_model(model, device=RUNTIME_DEVICE).create_infer_request()
    for n, ones in ((6, 2), (9, 7), (3, 0), (9, 1)):
        feed = np.zeros(n, np.float32)
        feed[RNG.choice(n, ones, replace=False)] = RNG.integers(1, 4, ones)
        got = req.infer({"x": feed})
        ref = netpass.reference.infer(model, {"x": feed})
        for name in model.output_names:
            np.testing.assert_array_equal(got[name], ref[name])


def test_ir_round_trip_and_openvino(tmp_path):
    x = opset.parameter([3, 4], "f32", "x")
    model = Model([opset.non_zero(x, "i64").output(0),
                   opset.unique(x, axis=None, sorted=True).output(0)], [x])
    feeds = {"x": RNG.integers(0, 3, (3, 4)).astype(np.float32)}
    check_ir_round_trip(model, feeds, tmp_path)
    check_openvino(model, feeds, tmp_path, rtol=0, atol=0)
