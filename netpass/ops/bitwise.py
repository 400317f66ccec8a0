"""Bitwise ops with OpenVINO's names: BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot (opset13)
and BitwiseLeftShift, BitwiseRightShift (opset15); ONNX BitwiseAnd/Or/Xor/Not (18) and BitShift
(11: unsigned; 28: signed too) map onto them.

Shifts follow ONNX-28, which defines every case: a right shift of a signed value is arithmetic;
a shift by a negative amount or by the bit width or more gives what the sign fill alone gives
(-1 for a right shift of a negative value, 0 otherwise). OpenVINO leaves those cases undefined,
so this is one of its valid results.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.node import Node
from ..core.types import Type, boolean
from .base import BinaryElementwiseArithmetic, set_name, to_output
from .elementwise.common import binary_factory_doc
from .registry import export_error, onnx_export, onnx_rule

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
           "bitwise_right_shift"]


def _check_integral(node: Node, allow_bool: bool) -> Type:
    et = node.get_input_element_type(0)
    ok = et.is_dynamic or et.is_integral or (allow_bool and et is boolean)
    node.check(ok, "{} needs integer{} inputs, got {}", node.type_name,
               " or boolean" if allow_bool else "", et)
    return et


class _BitwiseBinary(BinaryElementwiseArithmetic):
    version = "opset13"
    allow_bool = True

    def _out_type(self) -> Type:
        _check_integral(self, self.allow_bool)
        return super()._out_type()


class BitwiseAnd(_BitwiseBinary):
    """a & b (integer or boolean inputs)."""

    type_name = "BitwiseAnd"
    commutative = True
    fn = staticmethod(np.bitwise_and)


class BitwiseOr(_BitwiseBinary):
    """a | b (integer or boolean inputs)."""

    type_name = "BitwiseOr"
    commutative = True
    fn = staticmethod(np.bitwise_or)


class BitwiseXor(_BitwiseBinary):
    """a ^ b (integer or boolean inputs)."""

    type_name = "BitwiseXor"
    commutative = True
    fn = staticmethod(np.bitwise_xor)


def _shift(x: np.ndarray, y: np.ndarray, left: bool) -> np.ndarray:
    x, y = np.broadcast_arrays(x, y)
    bits = x.dtype.itemsize * 8
    amount = np.asarray(y).astype(np.int64)
    in_range = (amount >= 0) & (amount < bits)
    safe = np.where(in_range, amount, 0).astype(x.dtype)
    shifted = np.left_shift(x, safe) if left else np.right_shift(x, safe)
    fill = np.zeros((), x.dtype)
    if not left and x.dtype.kind == "i":
        fill = np.where(x < 0, x.dtype.type(-1), x.dtype.type(0))
    return np.where(in_range, shifted, fill).astype(x.dtype)


class BitwiseLeftShift(_BitwiseBinary):
    """``x << y``, bits past the top discarded."""

    type_name = "BitwiseLeftShift"
    version = "opset15"
    allow_bool = False
    fn = staticmethod(lambda x, y: _shift(x, y, left=True))


class BitwiseRightShift(_BitwiseBinary):
    """``x >> y``, arithmetic (sign-filling) for signed ``x``."""

    type_name = "BitwiseRightShift"
    version = "opset15"
    allow_bool = False
    fn = staticmethod(lambda x, y: _shift(x, y, left=False))


class BitwiseNot(Node):
    """~x for integers, logical not for booleans."""

    type_name = "BitwiseNot"
    version = "opset13"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.set_output_type(0, _check_integral(self, True), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        return [np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)]


# -- factories ---------------------------------------------------------------------------------

def _factory(cls: type[Node]) -> Callable:
    def factory(left_node: Any, right_node: Any, auto_broadcast: str = "numpy",
                name: str | None = None) -> Node:
        return set_name(cls([to_output(left_node), to_output(right_node)],
                            auto_broadcast=auto_broadcast.lower()), name)
    factory.__name__ = cls.type_name
    factory.__doc__ = binary_factory_doc(cls)
    return factory


bitwise_and = _factory(BitwiseAnd)
bitwise_or = _factory(BitwiseOr)
bitwise_xor = _factory(BitwiseXor)
bitwise_left_shift = _factory(BitwiseLeftShift)
bitwise_right_shift = _factory(BitwiseRightShift)


def bitwise_not(node: Any, name: str | None = None) -> Node:
    """BitwiseNot-13: ``~x`` for integer ``node``, logical not for boolean."""
    return set_name(BitwiseNot([to_output(node)]), name)


# -- ONNX import -------------------------------------------------------------------------------

_cls: type[Node]  # (the registration loops below share it)
for _op, _cls in (("BitwiseAnd", BitwiseAnd), ("BitwiseOr", BitwiseOr),
                  ("BitwiseXor", BitwiseXor)):
    onnx_rule(_op, since=18)(lambda ctx, _c=_cls: _c(ctx.inputs[:2]))
onnx_rule("BitwiseNot", since=18)(lambda ctx: BitwiseNot(ctx.inputs[:1]))


def _import_bit_shift(ctx: Any, signed_ok: bool):
    x, y = ctx.inputs[:2]
    et = x.element_type
    if not signed_ok and et.is_signed and not et.is_dynamic:
        ctx.error(f"BitShift before opset 28 takes unsigned integers, got {et}")
    direction = ctx.attr("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        ctx.error(f"direction must be LEFT or RIGHT, got '{direction}'")
    return (BitwiseLeftShift if direction == "LEFT" else BitwiseRightShift)([x, y])


onnx_rule("BitShift", since=11)(lambda ctx: _import_bit_shift(ctx, False))
onnx_rule("BitShift", since=28)(lambda ctx: _import_bit_shift(ctx, True))


# -- ONNX export -------------------------------------------------------------------------------

def _export_plain(op_type: str) -> Callable:
    def rule(node, ectx):
        if node.get_input_element_type(0) is boolean:  # ONNX's bitwise ops take integers
            logical = {"BitwiseAnd": "And", "BitwiseOr": "Or", "BitwiseXor": "Xor",
                       "BitwiseNot": "Not"}[op_type]
            ectx.add_node(logical, ectx.inputs(node), ectx.outputs(node))
        else:
            ectx.add_node(op_type, ectx.inputs(node), ectx.outputs(node))
    return rule


for _cls in (BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot):
    onnx_export(_cls, opset=18)(_export_plain(_cls.type_name))


def _export_shift(direction: str) -> Callable:
    def rule(node, ectx):
        if node.get_input_element_type(0).is_signed:
            export_error(node, "shifts of signed integers need ONNX opset 28, above what "
                               "netpass writes")
        ectx.add_node("BitShift", ectx.inputs(node), ectx.outputs(node), direction=direction)
    return rule


onnx_export(BitwiseLeftShift)(_export_shift("LEFT"))
onnx_export(BitwiseRightShift)(_export_shift("RIGHT"))
