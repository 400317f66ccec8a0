"""ONNX element types as netpass types: the table the ONNX reader and the import rules that take
a data type attribute (EyeLike's ``dtype``) share."""
from __future__ import annotations

from typing import Any

import onnx

from ..core.dimension import Dimension, Symbol
from ..core.shape import PartialShape
from ..core.types import Type, optional_of, sequence_of
from ..errors import ModelFormatError, NetpassError, UnsupportedTypeError

_T = onnx.TensorProto
_ONNX_TYPES: dict[int, str] = {
    _T.FLOAT: "f32", _T.FLOAT16: "f16", _T.DOUBLE: "f64", _T.BFLOAT16: "bf16", _T.INT64: "i64",
    _T.INT32: "i32", _T.INT16: "i16", _T.INT8: "i8", _T.UINT64: "u64", _T.UINT32: "u32",
    _T.UINT16: "u16", _T.UINT8: "u8", _T.BOOL: "boolean", _T.FLOAT8E4M3FN: "f8e4m3",
    _T.FLOAT8E5M2: "f8e5m2", _T.FLOAT8E4M3FNUZ: "f8e4m3fnuz", _T.FLOAT8E5M2FNUZ: "f8e5m2fnuz",
    _T.FLOAT8E8M0: "f8e8m0", _T.FLOAT4E2M1: "f4e2m1", _T.INT4: "i4", _T.UINT4: "u4",
    _T.INT2: "i2", _T.UINT2: "u2", _T.STRING: "string",
}
_TO_ONNX = {name: code for code, name in _ONNX_TYPES.items()}


def onnx_element_type(elem_type: int, where: str) -> Type:
    """The netpass element type of an ONNX TensorProto data type; ``where`` names what declared
    it in the error (an unsupported type or a code ONNX does not have)."""
    name = _ONNX_TYPES.get(elem_type)
    if name is None:
        if elem_type in onnx.TensorProto.DataType.values():
            name = onnx.TensorProto.DataType.Name(elem_type)
            raise UnsupportedTypeError(f"{where}: unsupported ONNX element type {name}")
        raise ModelFormatError(f"{where}: bad element type {elem_type}")
    return Type.of(name)


def attribute_element_type(elem_type: int, ctx: Any) -> Type:
    """:func:`onnx_element_type` of a data type an import rule read from a node attribute (Cast's
    ``to``, ``stash_type``): a code it cannot take is that node's error (``ctx.error``)."""
    try:
        return onnx_element_type(elem_type, f"node '{ctx.name}'")
    except NetpassError as e:
        ctx.error(str(e))
        raise


def onnx_type_code(et: Type, where: str) -> int:
    """The ONNX TensorProto data type of ``et``."""
    code = _TO_ONNX.get(et.name)
    if code is None:
        raise ModelFormatError(f"{where}: element type {et} has no ONNX equivalent")
    return code


# The ONNX opset that introduced each newer element type (a model holding one is written at it).
_TYPE_OPSET = {"f8e4m3": 19, "f8e5m2": 19, "f8e4m3fnuz": 19, "f8e5m2fnuz": 19, "i4": 21,
               "u4": 21, "f4e2m1": 23, "f8e8m0": 24, "i2": 25, "u2": 25}


def type_opset(et: Type) -> int:
    """The lowest ONNX opset that has ``et`` (1 for the long-standing types)."""
    return _TYPE_OPSET.get(et.name, 1)


def onnx_value_type(tp: onnx.TypeProto, where: str, symbols: dict[str, Symbol] | None = None
                    ) -> tuple[Type, PartialShape]:
    """The netpass type and partial shape of an ONNX value type: a tensor's element type and
    shape (``dim_param`` names become symbols, one per name in ``symbols``), or a sequence or
    optional type with the shape of what it holds."""
    kind = tp.WhichOneof("value")
    if kind == "sequence_type":
        et, ps = onnx_value_type(tp.sequence_type.elem_type, f"{where} (sequence element)",
                                 symbols)
        return sequence_of(et), ps
    if kind == "optional_type":
        et, ps = onnx_value_type(tp.optional_type.elem_type, f"{where} (optional element)",
                                 symbols)
        return optional_of(et), ps
    if kind is None:
        raise ModelFormatError(f"{where} has no type")
    if kind != "tensor_type":
        raise UnsupportedTypeError(f"{where}: a {kind} is not a tensor, sequence or optional")
    tt = tp.tensor_type
    if not tt.elem_type:
        raise ModelFormatError(f"{where} has no element type")
    et = onnx_element_type(tt.elem_type, where)
    if not tt.HasField("shape"):
        return et, PartialShape(None)
    symbols = symbols if symbols is not None else {}
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(Dimension(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(Dimension(symbol=symbols.setdefault(d.dim_param, Symbol(d.dim_param))))
        else:
            dims.append(Dimension())
    return et, PartialShape(dims)
