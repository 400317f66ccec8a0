"""Values that are not tensors: ONNX sequences (an ordered list of tensors of one element
type) and optionals (a value or nothing).

Their types are :class:`~netpass.core.types.SequenceType` (``seq<f32>``) and
:class:`~netpass.core.types.OptionalType` (``opt<f32>``, ``opt<seq<f32>>``); an output of such a
type keeps, as its partial shape, the shape every element (or the optional's value) fits.

Inside netpass a container value is a *box*: a 0-d numpy object array holding a Python list of
element values (a sequence) or None / the value (an optional). Every evaluator (the reference,
a body, the runtime's host fallback) then moves it like any other array, and the sequence and
optional ops unbox what they read. At the API, callers feed and get plain Python values: a
list of arrays for a sequence, None or the value for an optional (:func:`feed_value`,
:func:`api_value`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from .shape import PartialShape
from .types import ContainerType, OptionalType, SequenceType, Type


def box(value: Any) -> np.ndarray:
    """``value`` (a list of element values, None, or an optional's value) as a 0-d object
    array."""
    b = np.empty((), dtype=object)
    b[()] = value
    return b


def unbox(value: Any) -> Any:
    """The content of a box (a value that is not a box is returned as it is). Only for values
    whose type is a container: a 0-d string tensor looks like a box too."""
    if isinstance(value, np.ndarray) and value.dtype == object and value.ndim == 0:
        return value[()]
    return value


def is_container(et: Type) -> bool:
    return isinstance(et, ContainerType)


def sequence_items(value: Any, where: str) -> list[Any]:
    """The elements of a sequence box (a list; a copy, so the caller may change it)."""
    items = unbox(value)
    if not isinstance(items, list):
        raise TypeError(f"{where}: expected a sequence, got {type(items).__name__}")
    return list(items)


def feed_value(name: str, value: Any, et: Type, shape: PartialShape) -> np.ndarray:
    """A caller's value for a container input as a box, after checking it: a list (or tuple)
    of values of the element type for a sequence, None or a value of the inner type for an
    optional."""
    if isinstance(et, SequenceType):
        if isinstance(unbox(value), list):  # already a box
            value = unbox(value)
        if not isinstance(value, (list, tuple)):
            raise InputError(name, f"expected a sequence (a list of arrays) for {et}, got "
                                   f"{type(value).__name__}")
        return box([_element(name, f"[{i}]", v, et.element, shape)
                    for i, v in enumerate(value)])
    assert isinstance(et, OptionalType)
    if value is None:
        return box(None)
    return box(_element(name, "", value, et.element, shape))


def _element(name: str, where: str, value: Any, et: Type, shape: PartialShape) -> Any:
    if isinstance(et, ContainerType):
        return feed_value(f"{name}{where}", value, et, shape)
    arr = np.asarray(value)
    if et.dtype is not None and arr.dtype != et.dtype:
        raise InputError(name, f"element{where} has dtype {arr.dtype}, expected {et.dtype} "
                               f"({et})")
    if shape.rank_is_static and (arr.ndim != len(shape) or any(
            not d.min <= n <= d.max for d, n in zip(shape, arr.shape))):
        raise InputError(name, f"element{where} has shape {list(arr.shape)}, expected {shape}")
    return arr


def api_value(value: Any, et: Type) -> Any:
    """A container value as callers get it: a list for a sequence (elements unboxed in turn),
    None or the value for an optional."""
    if not isinstance(et, ContainerType):
        return value
    inner = unbox(value)
    if isinstance(et, SequenceType):
        return [api_value(v, et.element) for v in inner]
    return None if inner is None else api_value(inner, et.element)


__all__ = ["box", "unbox", "is_container", "sequence_items", "feed_value", "api_value"]
