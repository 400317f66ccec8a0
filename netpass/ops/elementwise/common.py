"""Helpers the elementwise modules share: class and factory makers for unary and binary ops,
constants of a value's type, and the ONNX import/export rule makers."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...core.node import Node, Output
from ..base import UnaryElementwiseArithmetic, set_name, to_output
from ..movement import unsqueeze
from ..registry import onnx_rule


def _quiet(fn: Callable) -> Callable:
    """Run a numpy kernel without floating point warnings (inf/nan results are the semantics)."""
    def wrapped(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args)
    return wrapped


def _is_int(arr: np.ndarray) -> bool:
    return arr.dtype.kind in "iu"


def _unary(name: str, fn: Callable, doc: str = "") -> type[UnaryElementwiseArithmetic]:
    doc = doc or f"``numpy.{fn.__name__}`` of each element."
    cls = type(name, (UnaryElementwiseArithmetic,),
               {"type_name": name, "fn": staticmethod(_quiet(fn)), "__doc__": doc,
                "__module__": __name__})
    return cls


def binary_factory_doc(cls: type[Node]) -> str:
    """The docstring of a binary elementwise factory, from the op class's own."""
    what = (cls.__dict__.get("__doc__") or "").strip()
    return (f"{cls.type_name}: {what} ``left_node`` and ``right_node`` are Nodes, Outputs or "
            "python/numpy values (which become Constants); they broadcast as numpy does "
            "(``auto_broadcast='none'`` asks for equal shapes). ``name`` sets the friendly "
            "name.")


def unary_factory_doc(cls: type[Node]) -> str:
    """The docstring of a unary elementwise factory, from the op class's own."""
    what = (cls.__dict__.get("__doc__") or "").strip()
    return (f"{cls.type_name}: {what} ``node`` is a Node, Output or python/numpy value; the "
            "result has its shape and element type. ``name`` sets the friendly name.")


def _erf(x: np.ndarray) -> np.ndarray:
    """math.erf per element, in float64 (numpy has no erf; mapping over a list is ~3x faster
    than np.vectorize)."""
    flat = np.asarray(x, dtype=np.float64).ravel().tolist()
    return np.fromiter(map(math.erf, flat), np.float64, len(flat)).reshape(np.shape(x))


def _binary_factory(cls: type[Node]) -> Callable:
    def factory(left_node: Any, right_node: Any, auto_broadcast: str = "numpy",
                name: str | None = None) -> Node:
        return set_name(cls([to_output(left_node), to_output(right_node)],
                            auto_broadcast=auto_broadcast.lower()), name)
    factory.__name__ = cls.type_name
    factory.__doc__ = binary_factory_doc(cls)
    return factory


def _unary_factory(cls: type[Node]) -> Callable:
    def factory(node: Any, name: str | None = None) -> Node:
        return set_name(cls([to_output(node)]), name)
    factory.__name__ = cls.type_name
    factory.__doc__ = unary_factory_doc(cls)
    return factory


def const_like(value: Any, ref: Output) -> Output:
    """A constant holding ``value`` in ``ref``'s element type (used by other op families)."""
    et = ref.element_type
    # element_type keeps f64 constants f64 (to_output narrows untyped float64 to f32); a type
    # without a numpy dtype (bf16) holds its values as f32.
    return to_output(np.asarray(value, dtype=et.dtype or np.float32), element_type=et)


def _like(value: Any, data: Output) -> Output:
    """A graph value, or a python value as a constant of ``data``'s element type."""
    return to_output(value) if isinstance(value, (Node, Output)) else const_like(value, data)


def _binary_operands(ctx: Any) -> tuple[Output, Output]:
    """A binary node's two inputs. Before opset 7, ``broadcast=1`` with an explicit ``axis``
    aligns the right operand's dims with the left's from ``axis`` on (not from the end, as numpy
    does): the right operand gets trailing dims of 1 so that numpy broadcasting agrees.
    Without ``axis`` it is suffix matching, which numpy rules cover."""
    a, b = ctx.inputs[0], ctx.inputs[1]
    if not (ctx.opset < 7 and ctx.attr("broadcast", 0) and ctx.has_attr("axis")):
        return a, b
    ash, bsh = a.partial_shape, b.partial_shape
    if not (ash.rank_is_static and bsh.rank_is_static):
        ctx.error("legacy broadcast with an explicit axis needs inputs of known rank")
    axis = ctx.attr("axis")
    axis = axis + len(ash) if axis < 0 else axis
    trailing = len(ash) - axis - len(bsh)
    if axis < 0 or trailing < 0:
        ctx.error(f"legacy broadcast: axis {ctx.attr('axis')} does not place a rank-{len(bsh)} "
                  f"right operand inside the left operand's rank {len(ash)}")
    if trailing and len(bsh):
        b = unsqueeze(b, list(range(len(bsh), len(bsh) + trailing))).output(0)
    return a, b


def _register_binary(onnx_op: str, cls: type[Node]) -> None:
    onnx_rule(onnx_op)(lambda ctx: cls(list(_binary_operands(ctx))))


def _register_unary(onnx_op: str, cls: type[Node]) -> None:
    onnx_rule(onnx_op)(lambda ctx: cls([ctx.inputs[0]]))


def _export_simple(onnx_op: str, **attrs: Any) -> Callable:
    def rule(node, ectx):
        ectx.add_node(onnx_op, ectx.inputs(node), ectx.outputs(node), **attrs)
    return rule
