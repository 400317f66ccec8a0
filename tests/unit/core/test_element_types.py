"""Element types beyond numpy's: bf16, the float8 variants, f4e2m1, i4/u4/i2/u2 and string.

- Conversions (``convert_values``, ONNX Cast) equal onnx's reference evaluator bit for bit on
  random values and the edge values (NaN, +-inf, -0, out of range, subnormals), with and
  without saturation, every f8e8m0 rounding mode; strings parse and print.
- File layouts: sub-byte types packed as ONNX packs them (element 0 in the low bits).
- ONNX in and out, IR v11 in and out (OpenVINO reads the packed constants), the runtime (host).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import netpass
from netpass import Model, opset
from netpass.core.types import (
    Type,
    bf16,
    convert_values,
    f4e2m1,
    f8e4m3,
    f8e4m3fnuz,
    f8e5m2,
    f8e5m2fnuz,
    f8e8m0,
    i2,
    i4,
    is_float_dtype,
    is_int_dtype,
    pack_elements,
    string,
    u2,
    u4,
    unpack_elements,
)
from netpass.testing import RUNTIME_DEVICE

RNG = np.random.default_rng(8)
T = TensorProto
ONNX_OF = {bf16: T.BFLOAT16, f8e4m3: T.FLOAT8E4M3FN, f8e5m2: T.FLOAT8E5M2,
           f8e4m3fnuz: T.FLOAT8E4M3FNUZ, f8e5m2fnuz: T.FLOAT8E5M2FNUZ, f8e8m0: T.FLOAT8E8M0,
           f4e2m1: T.FLOAT4E2M1, i4: T.INT4, u4: T.UINT4, i2: T.INT2, u2: T.UINT2}
EDGES = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e6, -1e6, 447.9, 448.5, 57344.0,
                  1e-9, -3e-3, 2.5, -2.5, 0.1, 3.0, 5.5, 240.0, 300.0], np.float32)


def _reference_cast(x: np.ndarray, to: int, opset: int = 25, **attrs) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator
    node = helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
        [helper.make_tensor_value_info("y", to, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    with np.errstate(all="ignore"):
        return ReferenceEvaluator(model).run(None, {"x": x})[0]


def _same_bits(a: np.ndarray, b: np.ndarray) -> None:
    """Equal types and shapes; equal bits, but any NaN equals any NaN (payloads differ between
    conversion paths) and sub-byte values compare as values (the unused high bits may differ)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype == object:
        assert a.tolist() == b.tolist()
        return
    et = Type.of(a.dtype)
    if et.bitwidth < 8:
        wide = np.float32 if et.is_real else np.int8
        np.testing.assert_array_equal(a.astype(wide), b.astype(wide))
        return
    if is_float_dtype(a.dtype):
        nan_a, nan_b = np.isnan(a.astype(np.float32)), np.isnan(b.astype(np.float32))
        np.testing.assert_array_equal(nan_a, nan_b)
        a, b = a[~nan_a], b[~nan_b]
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize]
    np.testing.assert_array_equal(a.view(bits), b.view(bits))


def _floats(n: int = 200) -> np.ndarray:
    return np.concatenate([EDGES, (RNG.standard_normal(n) * 10 ** RNG.uniform(-3, 3, n))
                           .astype(np.float32)])


@pytest.mark.parametrize("et", [f8e4m3, f8e5m2, f8e4m3fnuz, f8e5m2fnuz],
                         ids=lambda t: t.name)
@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("src", [np.float32, np.float16])
def test_float8_from_float_equals_onnx(et, saturate, src):
    x = _floats().astype(src)
    ours = convert_values(x, et, saturate=saturate)
    _same_bits(ours, _reference_cast(x, ONNX_OF[et], saturate=int(saturate)))


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [True, False])
def test_e8m0_rounding_equals_onnx(mode, saturate):
    x = np.abs(_floats())
    x = np.concatenate([x, np.float32([1.5, 3.0, 0.75, 2 ** 127 * 1.9, 2.0 ** -127])])
    ours = convert_values(x, f8e8m0, saturate=saturate, round_mode=mode)
    _same_bits(ours, _reference_cast(x, T.FLOAT8E8M0, saturate=int(saturate), round_mode=mode))


@pytest.mark.parametrize("et", [bf16, f4e2m1, i4, u4, i2, u2], ids=lambda t: t.name)
def test_small_types_from_float_equal_onnx(et):
    x = _floats()
    if et.is_integral:  # out of range is undefined for floats to integers: stay in range
        info = ml_dtypes.iinfo(et.dtype)
        x = RNG.uniform(info.min - 0.99, info.max + 0.99, 100).astype(np.float32)
    _same_bits(convert_values(x, et), _reference_cast(x, ONNX_OF[et]))


@pytest.mark.parametrize("et", [bf16, f8e4m3, f8e5m2, f8e4m3fnuz, f8e5m2fnuz, f8e8m0, f4e2m1,
                                i4, u4, i2, u2], ids=lambda t: t.name)
@pytest.mark.parametrize("dst", [np.float32, np.float16, np.int8, np.uint8, np.bool_])
def test_small_types_to_numpy_types_equal_onnx(et, dst):
    """Every code of the 8-bit and smaller types (random ones for bf16) to numpy's types."""
    if et is bf16:
        x = RNG.integers(0, 1 << 16, 300).astype(np.uint16).view(et.dtype)
    elif et.bitwidth == 8:
        x = np.arange(256, dtype=np.uint8).view(et.dtype)
    else:
        codes = np.arange(1 << et.bitwidth, dtype=np.uint8)
        x = unpack_elements(bytes(_pack_codes(codes, et.bitwidth)), et, len(codes))
    if is_float_dtype(x.dtype) and np.dtype(dst).kind in "iu":  # out of range is undefined
        wide = x.astype(np.float32)  # negatives too for unsigned: 255 on Zen 3, 0 on Zen 5
        x = x[np.isfinite(wide) & (np.abs(wide) < 100) & ((wide > -1) | (np.dtype(dst).kind == "i"))]
    to = helper.np_dtype_to_tensor_dtype(np.dtype(dst))
    _same_bits(convert_values(x, Type.of(dst)), _reference_cast(x, to))


def _pack_codes(codes: np.ndarray, bits: int) -> list[int]:
    per = 8 // bits
    codes = list(codes) + [0] * (-len(codes) % per)
    return [sum(int(codes[i + k]) << (k * bits) for k in range(per))
            for i in range(0, len(codes), per)]


@pytest.mark.parametrize("et", [i4, u4, i2, u2, f4e2m1], ids=lambda t: t.name)
@pytest.mark.parametrize("n", [1, 2, 5, 8, 33])
def test_packing_matches_onnx(et, n):
    codes = RNG.integers(0, 1 << et.bitwidth, n).astype(np.uint8)
    x = unpack_elements(bytes(_pack_codes(codes, et.bitwidth)), et, n)
    tensor = numpy_helper.from_array(x, "t")
    assert pack_elements(x, et) == tensor.raw_data
    _same_bits(numpy_helper.to_array(tensor), x)


def test_strings_parse_and_print():
    s = np.array(["1.5", "-INF", "+inf", "NaN", "1e-5", "-7"], dtype=object)
    f = convert_values(s, Type.of("f32"))
    np.testing.assert_array_equal(f, np.float32([1.5, -np.inf, np.inf, np.nan, 1e-5, -7]))
    np.testing.assert_array_equal(convert_values(np.array(["12", "-3"], object),
                                                 Type.of("i64")), [12, -3])
    x = np.float32([0.1, 3.0, -2.5e-7])
    out = convert_values(x, string)
    assert out.dtype == object and out.tolist() == _reference_cast(x, T.STRING).tolist()


def test_type_lookup():
    for et, dt in ((bf16, ml_dtypes.bfloat16), (f8e4m3, ml_dtypes.float8_e4m3fn),
                   (i4, ml_dtypes.int4), (string, object)):
        assert Type.of(np.dtype(dt)) is et and Type.of(et.name) is et
    assert Type.of("float8_e4m3fn") is f8e4m3 and Type.of("int2") is i2
    assert f8e5m2.is_real and f8e8m0.is_real and not f8e8m0.is_signed and i4.is_signed
    assert u2.is_integral and not u2.is_signed and i4.is_quantized and not string.is_real
    assert is_float_dtype(ml_dtypes.bfloat16) and is_int_dtype(ml_dtypes.uint4)
    assert not is_float_dtype(ml_dtypes.int4) and not is_int_dtype(np.float32)


@pytest.mark.parametrize("et", [bf16, f8e4m3, f8e5m2fnuz, f4e2m1, i4, u2],
                         ids=lambda t: t.name)
def test_onnx_and_ir_round_trip(et, tmp_path):
    x = opset.parameter([3, 5], "f32", "x")
    weights = convert_values(RNG.uniform(-3, 3, (3, 5)).astype(np.float32), et)
    w = opset.constant(weights, et)
    y = opset.add(x, opset.convert(w, "f32"))
    low = opset.convert(x, et)
    model = Model([y, low], [x])
    feeds = {"x": RNG.uniform(-3, 3, (3, 5)).astype(np.float32)}
    ref = netpass.reference.infer(model, feeds)
    # ONNX: written at the opset that has the type, read back the same
    from netpass.frontend.onnx_writer import to_onnx
    proto = to_onnx(model)
    onnx.checker.check_model(proto)
    back = netpass.reference.infer(netpass.read_model(proto), feeds)
    for name in model.output_names:
        _same_bits(back[name].reshape(-1), ref[name].reshape(-1)) if back[name].dtype != \
            np.float32 else np.testing.assert_array_equal(back[name], ref[name])
    # IR v11: constants packed as OpenVINO holds them
    netpass.save_model(model, str(tmp_path / "m.xml"))
    again = netpass.reference.infer(netpass.read_model(str(tmp_path / "m.xml")), feeds)
    np.testing.assert_array_equal(again[model.output_names[0]], ref[model.output_names[0]])


@pytest.mark.parametrize("et", [bf16, f8e4m3, f8e5m2, i4, u4], ids=lambda t: t.name)
def test_openvino_reads_the_constants(et, tmp_path):
    ov = pytest.importorskip("openvino")
    values = convert_values(RNG.uniform(-7, 7, (4, 3)).astype(np.float32), et)
    model = Model([opset.convert(opset.constant(values, et), "f32")], [])
    netpass.save_model(model, str(tmp_path / "m.xml"))
    compiled = ov.Core().compile_model(str(tmp_path / "m.xml"), "CPU")
    got = compiled({})[compiled.output(0)]
    np.testing.assert_array_equal(got, values.astype(np.float32))


def test_runtime_runs_small_types_on_the_host():
    x = opset.parameter([2, 6], "f32", "x")
    y = opset.convert(opset.convert(x, f8e4m3), "f32")
    s = opset.convert(x, string)
    model = Model([y, s], [x])
    feeds = {"x": RNG.uniform(-500, 500, (2, 6)).astype(np.float32)}
    req = netpass.compile_model(model, device=RUNTIME_DEVICE).create_infer_request()
    got = req.infer(feeds)
    ref = netpass.reference.infer(model, feeds)
    for name in model.output_names:
        assert got[name].dtype == ref[name].dtype
        assert got[name].tolist() == ref[name].tolist()
    assert np.abs(got[model.output_names[0]]).max() <= 448
