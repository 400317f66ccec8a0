"""Linear quantization: QuantizeLinear / DequantizeLinear (per-tensor, per-axis, blocked; u8,
i8, u16, i16 against onnxruntime, float8 / 4-bit / 2-bit against onnx's reference),
DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv (per-tensor
and per-channel zero points and scales) against onnxruntime on random data, values halfway
between steps included (round half to even); errors; ONNX export; the runtime. Exact for
integer outputs, rtol 1e-6 for floats.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from opcheck import check_export, check_import, check_ir_round_trip, check_runtime, one_node

import netpass
from netpass import Model, opset
from netpass.core.types import Type
from netpass.errors import NetpassError

RNG = np.random.default_rng(21)
RANGES = {np.uint8: (0, 255), np.int8: (-128, 127), np.uint16: (0, 65535),
          np.int16: (-32768, 32767)}


def _x(shape=(2, 3, 4), scale=0.1):
    x = RNG.uniform(-20, 20, shape).astype(np.float32)
    x.reshape(-1)[::5] = (np.round(x.reshape(-1)[::5] / scale) + 0.5) * scale  # halfway values
    return x


@pytest.mark.parametrize("dtype", list(RANGES), ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("granularity", ["tensor", "axis", "block"])
def test_quantize_dequantize_match_onnxruntime(dtype, granularity):
    x = _x((2, 6, 4))
    lo, hi = RANGES[dtype]
    if granularity == "tensor":
        scale, zp, attrs = np.array(0.25, np.float32), np.array(lo + 3, dtype), {}
    elif granularity == "axis":
        scale = RNG.uniform(0.05, 0.5, 6).astype(np.float32)
        zp = RNG.integers(lo, lo + 10, 6).astype(dtype)
        attrs = {"axis": 1}
    else:
        scale = RNG.uniform(0.05, 0.5, (2, 3, 4)).astype(np.float32)
        zp = RNG.integers(lo, lo + 10, (2, 3, 4)).astype(dtype)
        attrs = {"axis": 1, "block_size": 2}
    feeds = {"x": x, "s": scale, "z": zp}
    model = check_import(one_node("QuantizeLinear", feeds, opset=21, **attrs), feeds)
    check_export(model, feeds)
    q = RNG.integers(lo, hi, x.shape, endpoint=True).astype(dtype)
    dfeeds = {"q": q, "s": scale, "z": zp}
    check_import(one_node("DequantizeLinear", dfeeds, opset=21, **attrs), dfeeds, rtol=1e-6)


@pytest.mark.parametrize("onnx_type", [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2,
                                       TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2,
                                       TensorProto.FLOAT4E2M1])
@pytest.mark.parametrize("saturate", [1, 0])
def test_small_types_match_reference(onnx_type, saturate):
    from onnx import helper
    dt = helper.tensor_dtype_to_np_dtype(onnx_type)
    x = _x((3, 8), scale=0.5) * (50 if onnx_type in (TensorProto.FLOAT8E4M3FN,
                                                     TensorProto.FLOAT8E5M2) else 1)
    feeds = {"x": x, "s": np.array(0.5, np.float32), "z": np.zeros((), dt)}
    attrs = {"saturate": saturate} if onnx_type in (TensorProto.FLOAT8E4M3FN,
                                                    TensorProto.FLOAT8E5M2) else {}
    model = check_import(one_node("QuantizeLinear", feeds, opset=25, **attrs), feeds,
                         engine="reference")
    assert model.results[0].input_value(0).element_type is Type.of(dt)
    qv = next(iter(netpass.reference.infer(model, feeds).values()))
    dfeeds = {"q": qv, "s": np.array(0.5, np.float32), "z": np.zeros((), dt)}
    check_import(one_node("DequantizeLinear", dfeeds, opset=25), dfeeds, engine="reference")


def test_precision_and_output_dtype_match_reference():
    x = _x((4, 5))
    feeds = {"x": x, "s": np.array(0.3, np.float16)}
    check_import(one_node("QuantizeLinear", feeds, opset=23, output_dtype=TensorProto.INT8,
                          precision=TensorProto.FLOAT), feeds, engine="reference")
    q = RNG.integers(-128, 127, (4, 5)).astype(np.int8)
    dfeeds = {"q": q, "s": np.array(0.3, np.float32)}
    check_import(one_node("DequantizeLinear", dfeeds, opset=23,
                          output_dtype=TensorProto.FLOAT16), dfeeds, engine="reference")


@pytest.mark.parametrize("spread", [(-3.0, 7.0), (0.5, 9.0), (-8.0, -1.0), (2.0, 2.0)])
def test_dynamic_quantize_matches_onnxruntime(spread):
    x = RNG.uniform(*spread, (3, 7)).astype(np.float32)
    model = check_import(one_node("DynamicQuantizeLinear", {"x": x}, n_out=3, opset=11),
                         {"x": x})
    check_export(model, {"x": x})


@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.uint8), (np.int8, np.int8),
                                           (np.uint8, np.int8)])
@pytest.mark.parametrize("per_channel", [False, True])
def test_matmul_integer_matches_onnxruntime(a_type, b_type, per_channel):
    a = RNG.integers(*RANGES[a_type], (4, 6), endpoint=True).astype(a_type)
    # a signed B in 7 bits: onnxruntime's x86 u8 x s8 kernels saturate pair sums in int16
    lo, hi = (-64, 63) if b_type == np.int8 else RANGES[b_type]
    b = RNG.integers(lo, hi, (6, 5), endpoint=True).astype(b_type)
    azp = (RNG.integers(0, 9, 4) if per_channel else RNG.integers(0, 9, ())).astype(a_type)
    bzp = (RNG.integers(0, 9, 5) if per_channel else RNG.integers(0, 9, ())).astype(b_type)
    feeds = {"a": a, "b": b, "az": azp, "bz": bzp}
    proto = one_node("MatMulInteger", feeds, opset=10)
    if not per_channel:
        check_import(proto, feeds)
        return
    # onnxruntime takes only per-tensor zero points, onnx's reference subtracts a 1-D a_zero_point
    # along the columns; the specification: one per row of A, one per column of B
    got = next(iter(netpass.reference.infer(netpass.read_model(proto), feeds).values()))
    wide = np.int32
    want = (a.astype(wide) - azp.astype(wide)[:, None]) @ (b.astype(wide) - bzp.astype(wide))
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int32


@pytest.mark.parametrize("group", [1, 2])
@pytest.mark.parametrize("per_channel", [False, True])
def test_conv_integer_matches_onnxruntime(group, per_channel):
    x = RNG.integers(0, 255, (1, 4, 6, 6)).astype(np.uint8)
    w = RNG.integers(0, 255, (6, 4 // group, 3, 3)).astype(np.uint8)
    feeds = {"x": x, "w": w, "xz": np.array(7, np.uint8),
             "wz": (RNG.integers(0, 9, 6) if per_channel else RNG.integers(0, 9, ()))
             .astype(np.uint8)}
    proto = one_node("ConvInteger", feeds, opset=10, group=group, pads=[1, 0, 1, 2],
                     strides=[1, 2])
    # (onnxruntime takes only per-tensor zero points)
    check_import(proto, feeds, engine="reference" if per_channel else "ort")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_matmul_matches_onnxruntime(dtype, per_channel):
    lo, hi = RANGES[dtype]
    a = RNG.integers(lo, hi, (2, 4, 8), endpoint=True).astype(dtype)
    b = RNG.integers(lo, hi, (8, 3), endpoint=True).astype(dtype)
    b_s = (RNG.uniform(0.01, 0.05, 3) if per_channel else np.array(0.02)).astype(np.float32)
    b_z = (np.full(3, 5) if per_channel else np.array(5)).astype(dtype)
    feeds = {"a": a, "as": np.array(0.03, np.float32), "az": np.array(3, dtype), "b": b, "bs": b_s,
             "bz": b_z, "ys": np.array(0.8, np.float32), "yz": np.array(lo + 100, dtype)}
    proto = one_node("QLinearMatMul", feeds, opset=10)
    check_import(proto, feeds, engine="reference" if per_channel else "ort")


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_qlinear_conv_matches_onnxruntime(per_channel, bias):
    x = RNG.integers(0, 255, (1, 3, 7, 7)).astype(np.uint8)
    w = RNG.integers(0, 255, (4, 3, 3, 3)).astype(np.uint8)
    w_s = (RNG.uniform(0.001, 0.01, 4) if per_channel else np.array(0.005)).astype(np.float32)
    w_z = (RNG.integers(100, 130, 4) if per_channel else np.array(120)).astype(np.uint8)
    feeds = {"x": x, "xs": np.array(0.01, np.float32), "xz": np.array(128, np.uint8), "w": w,
             "ws": w_s, "wz": w_z, "ys": np.array(0.2, np.float32), "yz": np.array(10, np.uint8)}
    if bias:
        feeds["b"] = RNG.integers(-500, 500, 4).astype(np.int32)
    proto = one_node("QLinearConv", feeds, opset=10, pads=[1, 1, 1, 1])
    check_import(proto, feeds, engine="reference" if per_channel and not bias else "auto")


def test_errors():
    x = opset.parameter([2, 3], "f32", "x")
    with pytest.raises(NetpassError, match="not a quantized type"):
        opset.quantize_linear(x, np.array(0.1, np.float32), output_type="f32")
    with pytest.raises(NetpassError, match="differs"):
        opset.quantize_linear(x, np.array(0.1, np.float32), np.int8(0), output_type="u8")
    with pytest.raises(NetpassError, match="1-D"):
        opset.quantize_linear(x, np.ones((2, 3), np.float32))


def test_runtime_export_and_ir(tmp_path):
    x = opset.parameter([3, 8], "f32", "x")
    q = opset.quantize_linear(x, np.full(8, 0.1, np.float32), np.zeros(8, np.int8), axis=1)
    d = opset.dequantize_linear(q, np.full(8, 0.1, np.float32), np.zeros(8, np.int8), axis=1)
    dyn = opset.dynamic_quantize_linear(x)
    model = Model([q.output(0), d.output(0), dyn.output(0), dyn.output(1)], [x])
    feeds = {"x": _x((3, 8))}
    check_runtime(model, feeds)
    check_export(model, feeds)
    check_ir_round_trip(model, feeds, tmp_path)
