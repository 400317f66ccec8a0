"""Small OpenVINO ops ONNX lacks: Eye-9 (``torch.eye``), ShuffleChannels-1, GRN-1 and
Identity-16. netpass's reference against OpenVINO's CPU plugin on the IR netpass writes and on
IR OpenVINO writes (its builders; ``torch.eye`` converted), the IR round trip, the runtime,
shape inference, and the errors. Tolerance rtol 1e-4, atol 1e-5 for GRN (opcheck), the others
exact."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import (
    check_export,
    check_ir_round_trip,
    check_openvino,
    check_reads_openvino_ir,
    check_runtime,
    check_torch_ir,
)

import netpass
from netpass import Model, opset
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError
from netpass.ops.eye import Eye
from netpass.ops.movement import Identity, ShuffleChannels
from netpass.ops.normalization import GRN

RNG = np.random.default_rng(16)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _unary(factory, shape, dtype="f32", **attrs):
    x = opset.parameter(list(shape), dtype, "x")
    return Model([factory(x, **attrs).output(0)], [x])


# -- Eye ---------------------------------------------------------------------------------------

def _eye_model(rows, cols, k, out="f32", batch=None):
    """Eye over Parameters r, c, k (and b): the sizes are run-time values."""
    params = [opset.parameter([], "i64", n) for n in ("r", "c", "k")]
    b = opset.parameter([len(batch)], "i32", "b") if batch is not None else None
    node = opset.eye(*params, out, batch_shape=b)
    return Model([node.output(0)], params + ([b] if b is not None else []))


def _eye_feeds(rows, cols, k, batch=None):
    feeds = {"r": np.int64(rows), "c": np.int64(cols), "k": np.int64(k)}
    if batch is not None:
        feeds["b"] = np.asarray(batch, np.int32)
    return feeds


@pytest.mark.parametrize("rows,cols,k,out,batch", [
    (4, 4, 0, "f32", None), (3, 6, 2, "f32", None), (5, 3, -1, "i32", None),
    (3, 4, 7, "f32", None), (2, 5, 1, "i64", [2, 3]), (1, 1, 0, "f32", [4]),
])
def test_eye_matches_openvino(rows, cols, k, out, batch, tmp_path):
    check_openvino(_eye_model(rows, cols, k, out, batch), _eye_feeds(rows, cols, k, batch),
                   tmp_path, 0, 0)


def test_eye_values():
    model = Model([opset.eye(3, 4, -1, "f32", batch_shape=[2]).output(0)], [])
    got = netpass.reference.infer(model, {})[model.output_names[0]]
    np.testing.assert_array_equal(got, np.broadcast_to(np.eye(3, 4, -1, np.float32), (2, 3, 4)))


def test_eye_reads_torch_eye_converted_by_openvino(tmp_path):
    torch = pytest.importorskip("torch")
    model = check_torch_ir(lambda t: torch.eye(t.shape[0], 5) + t, [_x(3, 1)], tmp_path, 0, 0)
    assert any(isinstance(n, Eye) for n in model.get_ordered_ops())


def test_eye_shape_inference():
    assert opset.eye(3, 5, 0, "f32").get_output_partial_shape(0) == PartialShape([3, 5])
    n = opset.parameter([], "i64", "n")
    node = opset.eye(n, 5, 1, "f16", batch_shape=[2, 4])
    assert node.get_output_partial_shape(0) == PartialShape([2, 4, -1, 5])
    assert node.get_output_element_type(0).name == "f16"
    b = opset.parameter([3], "i64", "b")
    assert opset.eye(2, 2, 0, "f32", batch_shape=b).get_output_partial_shape(0) == \
        PartialShape([-1, -1, -1, 2, 2])


def test_eye_errors():
    with pytest.raises(NetpassError, match="Eye.*num_rows must be >= 0"):
        opset.eye(-2, 3, 0, "f32")
    with pytest.raises(NetpassError, match="Eye.*batch_shape must be 1-D"):
        opset.eye(2, 3, 0, "f32", batch_shape=[[1, 2]])
    with pytest.raises(NetpassError, match="Eye.*diagonal_index .* must be integer"):
        opset.eye(2, 3, opset.constant(np.float32(1)), "f32")


# -- ShuffleChannels ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis,group", [
    ((2, 6, 3, 3), 1, 3), ((2, 6, 3, 3), 1, 6), ((3, 8), -1, 2), ((12,), 0, 4),
    ((2, 3, 10, 2), 2, 5), ((2, 4, 3), 1, 1),
])
def test_shuffle_channels_matches_openvino(shape, axis, group, tmp_path):
    model = _unary(opset.shuffle_channels, shape, axis=axis, group=group)
    check_openvino(model, {"x": _x(*shape)}, tmp_path, 0, 0)


def test_shuffle_channels_is_torch_channel_shuffle():
    torch = pytest.importorskip("torch")
    x = _x(2, 12, 3, 2)
    model = _unary(opset.shuffle_channels, x.shape, axis=1, group=4)
    got = netpass.reference.infer(model, {"x": x})[model.output_names[0]]
    want = torch.nn.functional.channel_shuffle(torch.from_numpy(x), 4).numpy()
    np.testing.assert_array_equal(got, want)


def test_shuffle_channels_errors():
    x = opset.parameter([2, 6, 3], "f32", "x")
    with pytest.raises(NetpassError, match="ShuffleChannels.*not a multiple of group 4"):
        opset.shuffle_channels(x, 1, 4)
    with pytest.raises(NetpassError, match="ShuffleChannels.*axis 3 out of range"):
        opset.shuffle_channels(x, 3, 1)
    with pytest.raises(NetpassError, match="ShuffleChannels.*group must be >= 1"):
        opset.shuffle_channels(x, 1, 0)


# -- GRN ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,bias", [((3, 5), 0.0), ((2, 4, 7), 1.5), ((2, 3, 4, 5), 0.25)])
def test_grn_matches_openvino(shape, bias, tmp_path):
    check_openvino(_unary(opset.grn, shape, bias=bias), {"x": _x(*shape)}, tmp_path)


def test_grn_values():
    x = _x(2, 3, 4)
    model = _unary(opset.grn, x.shape, bias=0.5)
    got = netpass.reference.infer(model, {"x": x})[model.output_names[0]]
    np.testing.assert_allclose(got, x / np.sqrt((x ** 2).sum(1, keepdims=True) + 0.5),
                               rtol=1e-6)


def test_grn_errors():
    with pytest.raises(NetpassError, match="GRN.*rank 2 to 4"):
        _unary(opset.grn, (2, 3, 4, 5, 6), bias=0.0)
    with pytest.raises(NetpassError, match="GRN.*must be a float tensor"):
        _unary(opset.grn, (2, 3), "i32", bias=0.0)


# -- Identity ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["f32", "i64", "boolean"])
def test_identity_matches_openvino(dtype, tmp_path):
    feed = _x(3, 4) > 0 if dtype == "boolean" else (_x(3, 4) * 10).astype(
        np.dtype(netpass.core.types.Type.of(dtype).dtype))
    check_openvino(_unary(opset.identity, (3, 4), dtype), {"x": feed}, tmp_path, 0, 0)


def test_identity_exports_to_onnx():
    proto = check_export(_unary(opset.identity, (2, 5)), {"x": _x(2, 5)}, engine="ort")
    assert [n.op_type for n in proto.graph.node] == ["Identity"]


def test_identity_keeps_shape_values():
    x = opset.parameter(PartialShape([-1, 4]), "f32", "x")
    shape = opset.identity(opset.shape_of(x))
    y = opset.reshape(opset.parameter([8, 4], "f32", "y"), shape, special_zero=False)
    assert y.get_output_partial_shape(0) == PartialShape([-1, 4])


# -- shared: IR both ways, runtime -------------------------------------------------------------

def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset3, opset9, opset16
    x = opset1.parameter([2, 6, 3], ov.Type.f32, name="x")
    eye = opset9.eye(opset1.constant(np.int32(3)), opset1.constant(np.int32(3)),
                     opset1.constant(np.int32(1)), "f32", opset1.constant(np.array([2], np.int64)))
    outs = [opset3.shuffle_channels(x, 1, 2).output(0), opset1.grn(x, 0.7).output(0),
            opset16.identity(x).output(0),
            eye.output(0)]
    check_reads_openvino_ir(ov.Model(outs, [x]), {"x": _x(2, 6, 3)}, tmp_path)


@pytest.mark.parametrize("factory,cls,attrs", [
    (opset.shuffle_channels, ShuffleChannels, {"axis": 1, "group": 3}),
    (opset.grn, GRN, {"bias": 0.3}), (opset.identity, Identity, {}),
])
def test_ir_round_trip_and_runtime(factory, cls, attrs, tmp_path):
    model = _unary(factory, (2, 6, 4), **attrs)
    feeds = {"x": _x(2, 6, 4)}
    back = check_ir_round_trip(model, feeds, tmp_path)
    assert sum(isinstance(n, cls) for n in back.get_ordered_ops()) == 1
    stats = check_runtime(model, feeds)
    if cls is Identity:  # an elementwise copy kernel
        assert stats["host_fallbacks"] == 0


def test_eye_ir_round_trip_and_runtime(tmp_path):
    model = _eye_model(3, 5, 1, "f32", [2])
    feeds = _eye_feeds(3, 5, 1, [2])
    back = check_ir_round_trip(model, feeds, tmp_path)
    assert sum(isinstance(n, Eye) for n in back.get_ordered_ops()) == 1
    check_runtime(model, feeds)
