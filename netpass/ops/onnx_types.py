"""ONNX element types as netpass types: the table the ONNX reader and the import rules that take
a data type attribute (EyeLike's ``dtype``) share."""
from __future__ import annotations

import onnx

from ..core.types import Type
from ..errors import ModelFormatError, UnsupportedTypeError

_ONNX_TYPES = {
    onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.FLOAT16: "f16", onnx.TensorProto.DOUBLE: "f64",
    onnx.TensorProto.BFLOAT16: "bf16", onnx.TensorProto.INT64: "i64", onnx.TensorProto.INT32: "i32",
    onnx.TensorProto.INT16: "i16", onnx.TensorProto.INT8: "i8", onnx.TensorProto.UINT64: "u64",
    onnx.TensorProto.UINT32: "u32", onnx.TensorProto.UINT16: "u16", onnx.TensorProto.UINT8: "u8",
    onnx.TensorProto.BOOL: "boolean",
}


def onnx_element_type(elem_type: int, where: str) -> Type:
    name = _ONNX_TYPES.get(elem_type)
    if name is None:
        if elem_type in onnx.TensorProto.DataType.values():
            raise UnsupportedTypeError(
                f"{where}: unsupported ONNX element type {onnx.TensorProto.DataType.Name(elem_type)}")
        raise ModelFormatError(f"{where}: bad element type {elem_type}")
    return Type.of(name)
