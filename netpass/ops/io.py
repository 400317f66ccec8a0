"""Factories and ONNX rules of the graph boundary ops (the classes are in
:mod:`netpass.core.boundary`, re-exported here): ``parameter``, ``constant``, ``result``."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.boundary import Constant, Parameter, Result
from ..core.shape import PartialShape, ShapeLike
from ..core.types import Type, f32
from .base import set_name, to_output
from .registry import onnx_export, onnx_rule

# The classes are re-exported for ``from netpass.ops.io import Parameter`` (older code).
__all__ = ["parameter", "constant", "result"]


def parameter(shape: ShapeLike, dtype: Any = f32, name: str | None = None) -> Parameter:
    """A model input (Parameter-1) of partial ``shape`` (ints, -1 or ``(lo, hi)`` intervals,
    Dimensions, or a PartialShape) and element type ``dtype``; ``name`` becomes its friendly name
    and tensor name, which is the model's input name."""
    p = Parameter([], shape=PartialShape(shape), element_type=Type.of(dtype))
    if name:
        p.friendly_name = name
        p.output(0).names.add(name)
    return p


def constant(value: Any, dtype: Any = None, name: str | None = None) -> Constant:
    """Constant-1 holding ``value`` (a python value or numpy array) as ``dtype`` (an element type,
    numpy dtype or name such as "i64"); without ``dtype`` the array's own type is kept, except
    that float64 becomes f32 (as OpenVINO's Python API does)."""
    arr = np.asarray(value)
    if dtype is None and arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    return set_name(Constant([], value=arr, element_type=dtype), name)


def result(data: Any, name: str | None = None) -> Result:
    """A model output (Result-1) returning ``data``; ``name`` sets its friendly name, which is then
    the model's output name (otherwise the value's tensor name, or its producer's name)."""
    return set_name(Result([to_output(data)]), name)


# -- ONNX rules ------------------------------------------------------------------------------


@onnx_rule("Constant")
def _import_constant(ctx):
    for key, conv in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                      ("value_int", np.int64), ("value_ints", np.int64)):
        if ctx.has_attr(key):
            v = ctx.attr(key)
            arr = np.asarray(v) if conv is None else np.asarray(v, dtype=conv)
            return Constant([], value=arr).output(0)
    ctx.error("only tensor, float(s) and int(s) Constant values are supported")


@onnx_rule("Identity")
def _import_identity(ctx):
    return ctx.inputs[0]


@onnx_export(Constant)
def _export_constant(node, ectx):
    ectx.add_node("Constant", [], ectx.outputs(node), value=node.value)
