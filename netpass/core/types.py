"""Element types (OpenVINO names) over numpy dtypes."""
from __future__ import annotations

from typing import Any

import numpy as np


class Type:
    """An element type: ``f32``, ``i64``, ``boolean``... ``dynamic`` means not yet known."""

    __slots__ = ("name", "dtype", "bitwidth", "ir_precision")
    _by_name: dict[str, "Type"] = {}
    _by_dtype: dict[np.dtype, "Type"] = {}

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
        return self.name in ("f16", "bf16", "f32", "f64")

    @property
    def is_integral(self) -> bool:
        return self.name[0] in "iu"

    @property
    def is_signed(self) -> bool:
        return self.name[0] in "if" or self.name == "bf16"

    @property
    def is_dynamic(self) -> bool:
        return self.name == "dynamic"

    @property
    def size(self) -> int:
        """Bytes per element (rounded up)."""
        return (self.bitwidth + 7) // 8

    def compatible(self, other: "Type") -> bool:
        return self is other or self.is_dynamic or other.is_dynamic

    def merge(self, other: "Type") -> "Type | None":
        if self.is_dynamic:
            return other
        if other.is_dynamic or other is self:
            return self
        return None

    @staticmethod
    def of(value: Any) -> "Type":
        """Coerce a Type, a name ('f32', 'float32'), a numpy dtype or a python type."""
        if isinstance(value, Type):
            return value
        if isinstance(value, str):
            t = Type._by_name.get(value) or _ALIASES.get(value.lower())
            if t is not None:
                return t
        try:
            dt = np.dtype(value)
        except TypeError:
            raise TypeError(f"unknown element type {value!r}") from None
        t = Type._by_dtype.get(dt)
        if t is None:
            raise TypeError(f"unsupported element type {dt}")
        return t

    def __repr__(self) -> str:
        return f"<Type: {self.name}>"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self):
        return (Type.of, (self.name,))


dynamic = Type("dynamic", None, 0, "UNSPECIFIED")
f32 = Type("f32", np.float32, 32, "FP32")
f16 = Type("f16", np.float16, 16, "FP16")
f64 = Type("f64", np.float64, 64, "FP64")
bf16 = Type("bf16", None, 16, "BF16")
i64 = Type("i64", np.int64, 64, "I64")
i32 = Type("i32", np.int32, 32, "I32")
i16 = Type("i16", np.int16, 16, "I16")
i8 = Type("i8", np.int8, 8, "I8")
u64 = Type("u64", np.uint64, 64, "U64")
u32 = Type("u32", np.uint32, 32, "U32")
u16 = Type("u16", np.uint16, 16, "U16")
u8 = Type("u8", np.uint8, 8, "U8")
boolean = Type("boolean", np.bool_, 8, "BOOL")

_ALIASES = {
    "float32": f32, "float16": f16, "float64": f64, "bfloat16": bf16, "int64": i64,
    "int32": i32, "int16": i16, "int8": i8, "uint64": u64, "uint32": u32, "uint16": u16,
    "uint8": u8, "bool": boolean, "undefined": dynamic,
}

ALL_TYPES = tuple(Type._by_name.values())
