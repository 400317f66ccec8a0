"""OpenVINO FakeQuantize-1 (the op of quantized IR): netpass's reference against OpenVINO's CPU
plugin on the IR netpass writes (per-tensor and per-channel bounds, inverted ranges, 2 to 256
levels, values outside the range), IR written by OpenVINO read back, the IR round trip, the
runtime's kernel on each broadcast path, and the errors. Tolerance rtol 1e-4, atol 1e-5
(opcheck); the random data keeps away from rounding ties, where float evaluation orders may
round to neighbouring levels."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_ir_round_trip, check_openvino, check_runtime

import netpass
from netpass import Model, opset
from netpass.errors import NetpassError
from netpass.ops.quantization import FakeQuantize

RNG = np.random.default_rng(31)


def _model(x_shape, bounds, levels, auto_broadcast="numpy"):
    x = opset.parameter(list(x_shape), "f32", "x")
    node = opset.fake_quantize(x, *bounds, levels=levels, auto_broadcast=auto_broadcast)
    return Model([node.output(0)], [x])


def _x(*shape):
    return (RNG.standard_normal(shape) * 2).astype(np.float32)


def _per_channel(c, lo, hi):
    a = RNG.uniform(lo, hi, (1, c, 1, 1)).astype(np.float32)
    return a


CASES = {
    "per_tensor_256": ((2, 3, 5, 4), lambda: [np.float32(-1.5), np.float32(1.2),
                                                np.float32(-1.5), np.float32(1.2)], 256),
    "unsigned_output": ((2, 3, 5, 4), lambda: [np.float32(0), np.float32(2.5),
                                                np.float32(0), np.float32(255)], 256),
    "per_channel": ((2, 4, 3, 3), lambda: [_per_channel(4, -2, -0.5), _per_channel(4, 0.5, 2),
                                           _per_channel(4, -1, 0), _per_channel(4, 0, 1)], 255),
    "inverted_output": ((6, 7), lambda: [np.float32(-1), np.float32(1),
                                         np.float32(3), np.float32(-3)], 16),
    "binary": ((3, 8), lambda: [np.float32(0), np.float32(0.001),
                                np.float32(-1), np.float32(1)], 2),
    "full_size_bounds": ((4, 8), lambda: [np.full((4, 8), -1, np.float32), _x(4, 8) ** 2 + 1,
                                          np.full((4, 8), -2, np.float32),
                                          np.full((4, 8), 2, np.float32)], 64),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_matches_openvino(name, tmp_path):
    shape, bounds, levels = CASES[name]
    model = _model(shape, bounds(), levels)
    check_openvino(model, {"x": _x(*shape)}, tmp_path)


@pytest.mark.parametrize("name", sorted(CASES))
def test_runtime_matches_reference(name):
    shape, bounds, levels = CASES[name]
    model = _model(shape, bounds(), levels)
    stats = check_runtime(model, {"x": _x(*shape)})
    assert stats["host_fallbacks"] == 0


@pytest.mark.parametrize("name", ["per_channel", "inverted_output"])
def test_ir_round_trip(name, tmp_path):
    shape, bounds, levels = CASES[name]
    back = check_ir_round_trip(_model(shape, bounds(), levels), {"x": _x(*shape)}, tmp_path)
    fq = [n for n in back.get_ordered_ops() if isinstance(n, FakeQuantize)]
    assert len(fq) == 1 and fq[0].levels == levels


def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1 as ops
    x = ops.parameter([2, 4, 3, 3], ov.Type.f32, name="x")
    x.output(0).get_tensor().set_names({"x"})
    bounds = [_per_channel(4, -2, -0.5), _per_channel(4, 0.5, 2), np.float32(0),
              np.float32(255)]
    node = ops.fake_quantize(x, *[ops.constant(b) for b in bounds], 256)
    path = tmp_path / "fq.xml"
    ov.save_model(ov.Model([node], [x], "fq"), path, compress_to_fp16=False)
    feed = _x(2, 4, 3, 3)
    want = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})([feed])[0]
    model = netpass.read_model(path)
    got = netpass.reference.infer(model, {"x": feed})[model.output_names[0]]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert len(np.unique(got)) > 20  # quantized, not clipped to a few values


def test_levels_quantize_to_that_many_values():
    model = _model((4000,), [np.float32(-1), np.float32(1), np.float32(-1), np.float32(1)], 5)
    got = netpass.reference.infer(model, {"x": _x(4000)})[model.output_names[0]]
    np.testing.assert_array_equal(np.unique(got), np.array([-1, -0.5, 0, 0.5, 1], np.float32))


def test_auto_broadcast_none_needs_equal_shapes():
    ok = [np.full((2, 3), v, np.float32) for v in (-1, 1, -1, 1)]
    _model((2, 3), ok, 8, auto_broadcast="none")
    with pytest.raises(NetpassError, match="auto_broadcast none"):
        _model((2, 3), [np.float32(-1)] + ok[1:], 8, auto_broadcast="none")


@pytest.mark.parametrize("bounds,levels,match", [
    ([np.float32(-1), np.float32(1), np.float32(-1), np.float32(1)], 1, "levels"),
    ([np.zeros((3,), np.float32), np.float32(1), np.float32(-1), np.float32(1)], 4,
     "does not broadcast"),
])
def test_bad_attributes_and_shapes(bounds, levels, match):
    with pytest.raises(NetpassError, match=match):
        _model((2, 5), bounds, levels)


def test_onnx_export_is_refused_naming_the_node():
    from netpass.frontend.onnx_writer import to_onnx
    model = _model((2, 3), [np.float32(-1), np.float32(1), np.float32(-1), np.float32(1)], 8)
    with pytest.raises(NetpassError, match="FakeQuantize"):
        to_onnx(model)
