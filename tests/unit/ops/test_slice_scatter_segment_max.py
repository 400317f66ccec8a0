"""OpenVINO SliceScatter-15 and SegmentMax-16: netpass's reference against OpenVINO's CPU
plugin on the IR netpass writes (SliceScatter: positive and negative steps, clamped bounds,
axes in any order, default axes; SegmentMax: both fill modes, given and inferred segment
counts, ids past the count, float and integer data), against numpy/torch, on IR OpenVINO
writes, the IR round trip, the runtime (host fallback), shape inference, and the errors.
Exact (selected and moved elements)."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import (
    check_ir_round_trip,
    check_openvino,
    check_reads_openvino_ir,
    check_runtime,
)

import netpass
from netpass import Model, opset
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError
from netpass.ops.movement import SliceScatter
from netpass.ops.segment_max import SegmentMax

RNG = np.random.default_rng(1516)


def _x(*shape, dtype=np.float32):
    if np.dtype(dtype).kind == "i":
        return RNG.integers(-100, 100, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


# -- SliceScatter ------------------------------------------------------------------------------

SCATTER = {
    "one_axis": ((5, 6, 4), [1], [4], [2], [1]),
    "negative_steps": ((5, 6, 4), [-1, 0], [-6, 10], [-2, 3], [0, 2]),
    "clamped": ((5, 6, 4), [-100], [100], [1], [2]),
    "default_axes": ((7, 5), [1, 4], [6, 0], [2, -1], None),
    "empty_region": ((4, 3), [2], [2], [1], [0]),
}


def _region_shape(shape, start, stop, step, axes):
    index = [slice(None)] * len(shape)
    for b, e, s, a in zip(start, stop, step, axes if axes is not None else range(len(start))):
        index[a] = slice(b, e if not (s < 0 and e < -shape[a]) else None, s)
    return np.empty(shape)[tuple(index)].shape, tuple(index)


def _scatter_model(shape, upd_shape, start, stop, step, axes, dtype="f32"):
    x = opset.parameter(list(shape), dtype, "x")
    u = opset.parameter(list(upd_shape), dtype, "u")
    node = opset.slice_scatter(x, u, start, stop, step, axes)
    return Model([node.output(0)], [x, u])


@pytest.mark.parametrize("name", sorted(SCATTER))
def test_slice_scatter_matches_openvino_and_numpy(name, tmp_path):
    shape, start, stop, step, axes = SCATTER[name]
    upd_shape, index = _region_shape(shape, start, stop, step, axes)
    feeds = {"x": _x(*shape), "u": _x(*upd_shape)}
    model = _scatter_model(shape, upd_shape, start, stop, step, axes)
    if 0 not in upd_shape:  # OpenVINO's CPU plugin refuses empty updates
        check_openvino(model, feeds, tmp_path, 0, 0)
    want = feeds["x"].copy()
    want[index] = feeds["u"]
    got = netpass.reference.infer(model, feeds)[model.output_names[0]]
    np.testing.assert_array_equal(got, want)


def test_slice_scatter_integer_matches_openvino(tmp_path):
    shape, start, stop, step, axes = SCATTER["negative_steps"]
    upd_shape, _ = _region_shape(shape, start, stop, step, axes)
    model = _scatter_model(shape, upd_shape, start, stop, step, axes, "i32")
    check_openvino(model, {"x": _x(*shape, dtype=np.int32), "u": _x(*upd_shape, dtype=np.int32)},
                   tmp_path, 0, 0)


def test_slice_scatter_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset15

    def c(v):
        return opset1.constant(np.array(v, np.int32))
    x = opset1.parameter([3, 6, 2], ov.Type.f32, name="x")
    u = opset1.parameter([3, 2, 2], ov.Type.f32, name="u")
    node = opset15.slice_scatter(x, u, c([-1]), c([0]), c([-3]), c([1]))
    model = check_reads_openvino_ir(ov.Model([node], [x, u]), {"x": _x(3, 6, 2),
                                                              "u": _x(3, 2, 2)}, tmp_path, 0, 0)
    assert any(isinstance(n, SliceScatter) for n in model.get_ordered_ops())


def test_slice_scatter_errors():
    x = opset.parameter([5, 6], "f32", "x")
    with pytest.raises(NetpassError, match="SliceScatter.*updates shape \\[2,6\\] differs"):
        opset.slice_scatter(x, opset.parameter([2, 6], "f32", "u"), [0], [3], [1], [0])
    with pytest.raises(NetpassError, match="SliceScatter.*step must be non-zero"):
        opset.slice_scatter(x, opset.parameter([3, 6], "f32", "u"), [0], [3], [0], [0])
    with pytest.raises(NetpassError, match="SliceScatter.*updates type i32 differs"):
        opset.slice_scatter(x, opset.parameter([3, 6], "i32", "u"), [0], [3], [1], [0])
    with pytest.raises(NetpassError, match="SliceScatter.*repeated axis"):
        opset.slice_scatter(x, opset.parameter([3, 6], "f32", "u"), [0, 0], [3, 3], [1, 1],
                            [0, -2])


# -- SegmentMax --------------------------------------------------------------------------------

def _segment_model(shape, n_ids, num_segments, fill_mode, dtype="f32"):
    x = opset.parameter(list(shape), dtype, "x")
    ids = opset.parameter([n_ids], "i32", "ids")
    num = np.int32(num_segments) if num_segments is not None else None
    node = opset.segment_max(x, ids, num, fill_mode)
    return Model([node.output(0)], [x, ids])


def _ids(n, top):
    return np.sort(RNG.integers(0, top, n)).astype(np.int32)


@pytest.mark.parametrize("fill_mode", ["zero", "lowest"])
@pytest.mark.parametrize("shape,num_segments,top", [
    ((9, 3), 6, 6), ((9, 3), 4, 6), ((7,), 10, 5), ((8, 2, 3), 5, 5),
])
def test_segment_max_matches_openvino(shape, num_segments, top, fill_mode, tmp_path):
    model = _segment_model(shape, shape[0], num_segments, fill_mode)
    check_openvino(model, {"x": _x(*shape), "ids": _ids(shape[0], top)}, tmp_path, 0, 0)


def test_segment_max_integer_matches_openvino(tmp_path):
    model = _segment_model((8, 3), 8, 6, "lowest", "i32")
    check_openvino(model, {"x": _x(8, 3, dtype=np.int32), "ids": _ids(8, 6)}, tmp_path, 0, 0)


def test_segment_max_without_count():
    x, ids = _x(6, 2), np.array([0, 0, 2, 2, 2, 4], np.int32)
    model = _segment_model((6, 2), 6, None, "lowest")
    got = netpass.reference.infer(model, {"x": x, "ids": ids})[model.output_names[0]]
    low = np.finfo(np.float32).min
    np.testing.assert_array_equal(got, [x[:2].max(0), [low, low], x[2:5].max(0), [low, low],
                                        x[5]])


def test_segment_max_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset16
    x = opset1.parameter([7, 4], ov.Type.f32, name="x")
    ids = opset1.constant(np.array([0, 1, 1, 3, 3, 3, 4], np.int64))
    outs = [opset16.segment_max(x, ids, opset1.constant(np.int64(6)), "zero").output(0),
            opset16.segment_max(x, ids, None, "lowest").output(0)]
    model = check_reads_openvino_ir(ov.Model(outs, [x]), {"x": _x(7, 4)}, tmp_path, 0, 0)
    assert model.outputs[1].partial_shape == PartialShape([5, 4])


def test_segment_max_errors():
    x = opset.parameter([5, 3], "f32", "x")
    with pytest.raises(NetpassError, match="SegmentMax.*fill_mode must be zero or lowest"):
        opset.segment_max(x, np.zeros(5, np.int32), None, "max")
    with pytest.raises(NetpassError, match="SegmentMax.*one id per row"):
        opset.segment_max(x, opset.parameter([4], "i32", "ids"))
    model = _segment_model((4, 3), 4, 3, "zero")
    with pytest.raises(NetpassError, match="SegmentMax.*sorted"):
        netpass.reference.infer(model, {"x": _x(4, 3), "ids": np.array([0, 2, 1, 2], np.int32)})


# -- shared ------------------------------------------------------------------------------------

def test_ir_round_trip_and_runtime(tmp_path):
    shape, start, stop, step, axes = SCATTER["negative_steps"]
    upd_shape, _ = _region_shape(shape, start, stop, step, axes)
    model = _scatter_model(shape, upd_shape, start, stop, step, axes)
    feeds = {"x": _x(*shape), "u": _x(*upd_shape)}
    back = check_ir_round_trip(model, feeds, tmp_path)
    assert sum(isinstance(n, SliceScatter) for n in back.get_ordered_ops()) == 1
    check_runtime(model, feeds)
    model = _segment_model((9, 3), 9, 7, "lowest")
    feeds = {"x": _x(9, 3), "ids": _ids(9, 6)}
    back = check_ir_round_trip(model, feeds, tmp_path)
    assert [n.fill_mode for n in back.get_ordered_ops() if isinstance(n, SegmentMax)] == \
        ["lowest"]
    check_runtime(model, feeds)
