"""Model readers and writers: ONNX and OpenVINO IR v11."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.model import Model
from ..errors import ModelFormatError, system_errors_as_netpass


def read_model(source: Any, weights: Any = None) -> Model:
    """Read a model from an ONNX path, ONNX bytes, an ``onnx.ModelProto`` or an IR ``.xml`` path.

    An ONNX graph must be valid as onnx.checker and onnxruntime require (single static
    assignment, sorted nodes, attributes of the types their op declares; see
    ``frontend.onnx_checks``). Files a model names are read as ``frontend.files`` describes."""
    with system_errors_as_netpass(f"reading {_describe(source)}"):
        return _read(source, weights)


def _describe(source: Any) -> str:
    if isinstance(source, (str, Path)):
        return str(source)
    return f"a model from {type(source).__name__}"


def _read(source: Any, weights: Any) -> Model:
    import onnx
    if isinstance(source, Model):
        return source
    if isinstance(source, (str, Path)) and str(source).endswith(".xml"):
        from .ir_reader import read_ir
        return read_ir(source, weights)
    if isinstance(source, (bytes, bytearray)) and bytes(source[:64]).lstrip().startswith(b"<"):
        from .ir_reader import read_ir
        return read_ir(source, weights)
    if isinstance(source, (str, Path, bytes, bytearray, onnx.ModelProto)):
        from .onnx_reader import read_onnx
        return read_onnx(source)
    raise ModelFormatError(f"cannot read a model from {type(source).__name__}")
