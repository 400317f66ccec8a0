"""Element types (OpenVINO names) over numpy dtypes.

Besides numpy's own, the types ONNX added for small and low-precision data hold ml_dtypes
arrays (the dtypes onnx's numpy_helper gives): ``bf16``, the float8 variants ``f8e4m3``
(E4M3FN), ``f8e5m2``, ``f8e4m3fnuz``, ``f8e5m2fnuz``, ``f8e8m0``, ``f4e2m1`` and the packed
integers ``i4``, ``u4``, ``i2``, ``u2`` (one element per byte in memory; packed two or four to a
byte in files: :func:`pack_elements` / :func:`unpack_elements`). ``string`` holds numpy object
arrays of ``str``. No OpenCL kernel takes these; the runtime runs their ops on the host.

``SequenceType`` and ``OptionalType`` (``seq<f32>``, ``opt<seq<f32>>``; :func:`sequence_of`,
:func:`optional_of`) type ONNX's sequence and optional values (:mod:`netpass.core.containers`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np


class Type:
    """An element type: ``f32``, ``i64``, ``boolean``... ``dynamic`` means not yet known."""

    __slots__ = ("name", "dtype", "bitwidth", "ir_precision")
    _by_name: dict[str, Type] = {}
    _by_dtype: dict[np.dtype, Type] = {}

    def __init__(self, name: str, dtype: Any, bitwidth: int, ir_precision: str) -> None:
        self.name = name
        self.dtype = np.dtype(dtype) if dtype is not None else None
        self.bitwidth = bitwidth
        self.ir_precision = ir_precision
        Type._by_name[name] = self
        if self.dtype is not None and self.dtype not in Type._by_dtype:
            Type._by_dtype[self.dtype] = self

    @property
    def is_real(self) -> bool:
        return self.name in _REAL

    @property
    def is_integral(self) -> bool:
        return self.name[0] in "iu"

    @property
    def is_signed(self) -> bool:
        return (self.name[0] in "if" and self.name != "f8e8m0") or self.name == "bf16"

    @property
    def is_quantized(self) -> bool:
        """Narrower than a byte, or a float of 8 bits or less (the ml_dtypes types)."""
        return self.name in _ML_TYPES

    @property
    def is_dynamic(self) -> bool:
        return self.name == "dynamic"

    @property
    def size(self) -> int:
        """Bytes per element (rounded up)."""
        return (self.bitwidth + 7) // 8

    def compatible(self, other: Type) -> bool:
        return self is other or self.is_dynamic or other.is_dynamic

    def merge(self, other: Type) -> Type | None:
        if self.is_dynamic:
            return other
        if other.is_dynamic or other is self:
            return self
        return None

    @staticmethod
    def of(value: Any) -> Type:
        """Coerce a Type, a name ('f32', 'float32'), a numpy dtype or a python type."""
        if isinstance(value, Type):
            return value
        if isinstance(value, str):
            t = Type._by_name.get(value) or _ALIASES.get(value.lower())
            if t is not None:
                return t
            if value.endswith(">") and value[:4] in ("seq<", "opt<"):
                inner = Type.of(value[4:-1])
                return sequence_of(inner) if value[0] == "s" else optional_of(inner)
        try:
            dt = np.dtype(value)
        except (TypeError, ValueError):  # (ValueError: a string numpy reads as a record)
            raise TypeError(f"unknown element type {value!r}") from None
        t = Type._by_dtype.get(dt)
        if t is None:
            raise TypeError(f"unsupported element type {dt}")
        return t

    def __repr__(self) -> str:
        return f"<Type: {self.name}>"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple[Callable[[Any], Type], tuple[str]]:
        return (Type.of, (self.name,))


dynamic = Type("dynamic", None, 0, "UNSPECIFIED")
f32 = Type("f32", np.float32, 32, "FP32")
f16 = Type("f16", np.float16, 16, "FP16")
f64 = Type("f64", np.float64, 64, "FP64")
bf16 = Type("bf16", ml_dtypes.bfloat16, 16, "BF16")
i64 = Type("i64", np.int64, 64, "I64")
i32 = Type("i32", np.int32, 32, "I32")
i16 = Type("i16", np.int16, 16, "I16")
i8 = Type("i8", np.int8, 8, "I8")
u64 = Type("u64", np.uint64, 64, "U64")
u32 = Type("u32", np.uint32, 32, "U32")
u16 = Type("u16", np.uint16, 16, "U16")
u8 = Type("u8", np.uint8, 8, "U8")
boolean = Type("boolean", np.bool_, 8, "BOOL")
f8e4m3 = Type("f8e4m3", ml_dtypes.float8_e4m3fn, 8, "F8E4M3")
f8e5m2 = Type("f8e5m2", ml_dtypes.float8_e5m2, 8, "F8E5M2")
f8e4m3fnuz = Type("f8e4m3fnuz", ml_dtypes.float8_e4m3fnuz, 8, "F8E4M3FNUZ")
f8e5m2fnuz = Type("f8e5m2fnuz", ml_dtypes.float8_e5m2fnuz, 8, "F8E5M2FNUZ")
f8e8m0 = Type("f8e8m0", ml_dtypes.float8_e8m0fnu, 8, "F8E8M0")
f4e2m1 = Type("f4e2m1", ml_dtypes.float4_e2m1fn, 4, "F4E2M1")
i4 = Type("i4", ml_dtypes.int4, 4, "I4")
u4 = Type("u4", ml_dtypes.uint4, 4, "U4")
i2 = Type("i2", ml_dtypes.int2, 2, "I2")
u2 = Type("u2", ml_dtypes.uint2, 2, "U2")
string = Type("string", object, 0, "STRING")

_REAL = {"f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz",
         "f8e8m0", "f4e2m1"}
_ML_TYPES = {"bf16", "f8e4m3", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e8m0", "f4e2m1", "i4",
             "u4", "i2", "u2"}
# float8 types whose conversions saturate (ONNX Cast's ``saturate``)
FLOAT8 = (f8e4m3, f8e5m2, f8e4m3fnuz, f8e5m2fnuz)

_ALIASES = {
    "float32": f32, "float16": f16, "float64": f64, "bfloat16": bf16, "int64": i64,
    "int32": i32, "int16": i16, "int8": i8, "uint64": u64, "uint32": u32, "uint16": u16,
    "uint8": u8, "bool": boolean, "undefined": dynamic, "float8_e4m3fn": f8e4m3,
    "f8e4m3fn": f8e4m3, "float8_e5m2": f8e5m2, "float8_e4m3fnuz": f8e4m3fnuz,
    "float8_e5m2fnuz": f8e5m2fnuz, "float8_e8m0fnu": f8e8m0, "float4_e2m1fn": f4e2m1,
    "int4": i4, "uint4": u4, "int2": i2, "uint2": u2, "str": string,
}

ALL_TYPES = tuple(Type._by_name.values())


class ContainerType(Type):
    """The type of a value that is not a tensor (:mod:`netpass.core.containers`): ``element``
    is the type of what it holds. One instance per name, so types compare by identity; numpy
    sees such a value as a 0-d object array (its box)."""

    __slots__ = ("element",)
    KIND = ""

    def __init__(self, element: Type) -> None:
        super().__init__(f"{self.KIND}<{element.name}>", object, 0, "UNSPECIFIED")
        self.element = element


class SequenceType(ContainerType):
    """An ONNX sequence: a list of values of ``element``'s type (``seq<f32>``)."""

    __slots__ = ()
    KIND = "seq"


class OptionalType(ContainerType):
    """An ONNX optional: a value of ``element``'s type, or none (``opt<f32>``)."""

    __slots__ = ()
    KIND = "opt"


def sequence_of(element: Type) -> SequenceType:
    """The sequence type of ``element`` (one instance per element type)."""
    t = Type._by_name.get(f"seq<{element.name}>")
    return t if isinstance(t, SequenceType) else SequenceType(element)


def optional_of(element: Type) -> OptionalType:
    """The optional type of ``element`` (a tensor or sequence type)."""
    t = Type._by_name.get(f"opt<{element.name}>")
    return t if isinstance(t, OptionalType) else OptionalType(element)


def is_float_dtype(dtype: Any) -> bool:
    """True for numpy's floats and ml_dtypes' (bfloat16, float8, float4: numpy kind 'V')."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return True
    t = Type._by_dtype.get(dt)
    return t is not None and t.is_real


def is_int_dtype(dtype: Any) -> bool:
    """True for numpy's integers and ml_dtypes' int4/uint4/int2/uint2."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return True
    t = Type._by_dtype.get(dt)
    return t is not None and t.is_integral


def pack_elements(arr: np.ndarray, et: Type) -> bytes:
    """The file layout of ``arr``: sub-byte integers and floats packed, lowest bits first
    (ONNX's and OpenVINO's layout: element 0 in bits 0..n-1 of byte 0); others as in memory."""
    if et.bitwidth >= 8:
        return np.ascontiguousarray(arr, dtype=et.dtype).tobytes()
    per_byte = 8 // et.bitwidth
    codes = np.ascontiguousarray(arr, dtype=et.dtype).reshape(-1).view(np.uint8) & \
        np.uint8((1 << et.bitwidth) - 1)
    codes = np.concatenate([codes, np.zeros(-len(codes) % per_byte, np.uint8)])
    packed = np.zeros(len(codes) // per_byte, np.uint8)
    for k in range(per_byte):
        packed |= codes[k::per_byte] << np.uint8(k * et.bitwidth)
    return packed.tobytes()


def unpack_elements(data: bytes, et: Type, count: int) -> np.ndarray:
    """Inverse of :func:`pack_elements`: ``count`` elements of ``et`` (flat)."""
    if et.bitwidth >= 8:
        return np.asarray(np.frombuffer(data, dtype=et.dtype, count=count).copy())
    per_byte = 8 // et.bitwidth
    raw = np.frombuffer(data, dtype=np.uint8, count=packed_size(et, count))
    mask = np.uint8((1 << et.bitwidth) - 1)
    codes = np.stack([(raw >> np.uint8(k * et.bitwidth)) & mask for k in range(per_byte)],
                     axis=1).reshape(-1)[:count]
    if et.is_signed and et.is_integral:  # sign-extend the two's complement code into the byte
        sign = np.uint8(1 << (et.bitwidth - 1))
        codes = np.where(codes & sign, codes | np.uint8(0xFF ^ mask), codes).astype(np.uint8)
    return np.asarray(codes.view(et.dtype).copy())


def packed_size(et: Type, count: int) -> int:
    """Bytes ``count`` elements of ``et`` take in a file."""
    return (count * et.bitwidth + 7) // 8


# -- conversions (ONNX Cast's rules; numpy and ml_dtypes underneath) ---------------------------

def convert_values(x: np.ndarray, et: Type, saturate: bool = True,
                   round_mode: str = "up") -> np.ndarray:
    """``x`` converted to ``et`` as ONNX Cast defines it.

    Floats to integers truncate toward zero (out of range is undefined; integers wrap);
    anything to boolean is ``!= 0``. To the float8 types with ``saturate`` (the default),
    out-of-range values and infinities become the largest finite value of their sign, NaN
    stays NaN; without it they become NaN (or inf for f8e5m2). To f8e8m0 the float32 exponent
    is kept and ``round_mode`` (``up``, ``down``, ``nearest``) decides on the mantissa;
    ``saturate`` stops at the largest exponent. Rounding is to nearest even otherwise.
    Strings parse as numbers ("INF", "-inf", "NaN" included) and numbers print in their
    shortest round-trip form.
    """
    x = np.asarray(x)
    dt = et.dtype
    if et is string:
        return x if x.dtype == object else x.astype(np.str_).astype(object)
    if x.dtype == object:
        x = _parse_numbers(x, et)
    if x.dtype == dt:
        return np.asarray(x.copy())
    src_float = is_float_dtype(x.dtype)
    with np.errstate(all="ignore"):
        if Type._by_dtype.get(x.dtype) is not None and Type._by_dtype[x.dtype].is_quantized:
            x = x.astype(np.float32 if src_float else np.int64)  # numpy's own types from here
        if dt == np.bool_:
            return np.asarray(x != 0)
        if et in FLOAT8:
            wide = x.astype(np.float64 if x.dtype == np.float64 else np.float32)
            if saturate:
                top = float(ml_dtypes.finfo(dt).max)  # type: ignore[no-untyped-call]
                wide = np.where(np.isnan(wide), wide, np.clip(wide, -top, top))
            return np.asarray(wide.astype(dt))
        if et is f8e8m0:
            return _to_e8m0(x, saturate, round_mode)
        if src_float and et.is_integral:
            return np.asarray(np.trunc(x).astype(dt))
        return np.asarray(x.astype(dt))


def _parse_numbers(x: np.ndarray, et: Type) -> np.ndarray:
    def parse(text: Any) -> Any:
        s = text.decode() if isinstance(text, bytes) else str(text)
        try:
            return int(s) if et.is_integral else float(s)
        except ValueError:
            return float(s)  # "+INF", "NaN", "1e-5" (float() takes them in any case)
    values = [parse(v) for v in x.reshape(-1)]
    if et.is_integral and all(isinstance(v, int) for v in values):
        return np.array(values, np.int64).reshape(x.shape)
    return np.array(values, np.float64).reshape(x.shape)


def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """float8 e8m0 (a bare biased exponent) from float32's exponent bits; NaN and inf -> NaN."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    exponent = ((bits >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int32)
    mantissa = bits & np.uint32(0x7FFFFF)
    if round_mode == "up":
        bump = mantissa != 0
    elif round_mode == "nearest":  # half way and above rounds up, ties to an odd exponent too
        half = (mantissa & np.uint32(0x400000)) != 0
        bump = half & (((mantissa & np.uint32(0x3FFFFF)) != 0) | (exponent > 0))
    elif round_mode == "down":
        bump = np.zeros(bits.shape, bool)
    else:
        raise ValueError(f"unknown round_mode '{round_mode}'")
    if saturate:
        bump &= exponent != 0xFE
    special = exponent == 0xFF
    out = np.where(special, 0xFF, exponent + bump).astype(np.uint8)
    return out.view(ml_dtypes.float8_e8m0fnu)
