"""ConvertPromoteTypes (OpenVINO opset14, what OpenVINO's PyTorch frontend writes where torch
promotes the operands of an op to one type): both inputs converted to their common type."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Node
from ...core.types import Type, boolean, convert_values, f32
from ..base import set_name, to_output

__all__ = ["convert_promote_types"]

# Significand digits: the widest integers a float holds exactly.
_DIGITS = {"f16": 11, "bf16": 8, "f32": 24, "f64": 53}


def _float_pair(a: Type, b: Type, unsafe: bool) -> Type | None:
    if a.bitwidth == b.bitwidth and a is not b:  # f16 and bf16: neither holds the other
        return f32 if unsafe else None
    return a if a.bitwidth > b.bitwidth else b


def _int_pair(a: Type, b: Type, unsafe: bool, u64_target: Type) -> Type | None:
    if a.is_signed == b.is_signed:
        return a if a.bitwidth >= b.bitwidth else b
    signed, unsigned = (a, b) if a.is_signed else (b, a)
    if signed.bitwidth > unsigned.bitwidth:
        return signed
    if not unsafe:
        return None
    if unsigned.bitwidth == 64:
        return u64_target
    return Type.of(f"i{2 * unsigned.bitwidth}")


def _mixed(integer: Type, real: Type, unsafe: bool) -> Type | None:
    return real if unsafe or integer.bitwidth <= _DIGITS.get(real.name, 0) else None


def promote(a: Type, b: Type, a_scalar: bool, b_scalar: bool, unsafe: bool,
            pytorch_scalar: bool, u64_target: Type) -> Type | None:
    """The common type of ``a`` and ``b`` by OpenVINO's rules, None where promote_unsafe
    would be needed (checked against OpenVINO's shape inference for every pair of its
    numeric types)."""
    if a is b or b is boolean:
        return a
    if a is boolean:
        return b
    if pytorch_scalar and a_scalar != b_scalar and a.is_real == b.is_real:
        # torch: a scalar of the tensor's kind takes the tensor's type
        tensor, scalar = (b, a) if a_scalar else (a, b)
        if unsafe:
            return tensor
        if tensor.is_real or tensor.is_signed == scalar.is_signed:
            return tensor if scalar.bitwidth <= tensor.bitwidth else None
        return tensor if tensor.is_signed and scalar.bitwidth <= 2 * tensor.bitwidth else None
    if a.is_real and b.is_real:
        return _float_pair(a, b, unsafe)
    if a.is_real or b.is_real:
        integer, real = (b, a) if a.is_real else (a, b)
        return _mixed(integer, real, unsafe)
    return _int_pair(a, b, unsafe, u64_target)


class ConvertPromoteTypes(Node):
    """ConvertPromoteTypes-14: inputs ``(a, b)``, both converted to their common type. Same
    kinds take the wider type; a signed integer takes an unsigned one only when wider, a
    float an integer only when its significand holds every value; otherwise
    ``promote_unsafe`` picks the doubled signed type (``u64_integer_promotion_target`` for
    u64) or the float, and without it the op is refused. ``pytorch_scalar_promotion``: a
    scalar of the tensor's kind (integer or float) takes the tensor's type."""

    type_name = "ConvertPromoteTypes"
    version = "opset14"
    ATTRS = {"promote_unsafe": False, "pytorch_scalar_promotion": False,
             "u64_integer_promotion_target": f32}
    u64_integer_promotion_target: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (a, b)")
        self.u64_integer_promotion_target = Type.of(self.u64_integer_promotion_target)
        a, b = self.get_input_element_type(0), self.get_input_element_type(1)
        shapes = [self.get_input_partial_shape(i) for i in (0, 1)]
        if a.is_dynamic or b.is_dynamic:
            et = a if b.is_dynamic else b
        else:
            for t in (a, b):
                self.check(t is boolean or t.is_real or t.is_integral, "cannot promote {}", t)
            scalar = [s.rank_is_static and len(s) == 0 for s in shapes]
            found = promote(a, b, scalar[0], scalar[1], bool(self.promote_unsafe),
                            bool(self.pytorch_scalar_promotion),
                            self.u64_integer_promotion_target)
            if found is None:
                self.fail("{} and {} have no common type without promote_unsafe", a, b)
            et = found
        self.set_output_type(0, et, shapes[0])
        self.set_output_type(1, et, shapes[1])

    def evaluate(self, inputs):
        et = self.get_output_element_type(0)
        return [convert_values(np.asarray(x), et) for x in inputs]


def convert_promote_types(left_node: Any, right_node: Any, promote_unsafe: bool = False,
                          pytorch_scalar_promotion: bool = False,
                          u64_integer_promotion_target: Any = "f32",
                          name: str | None = None) -> Node:
    """ConvertPromoteTypes-14: ``left_node`` and ``right_node`` converted to their common type
    (outputs 0 and 1)."""
    return set_name(ConvertPromoteTypes(
        [to_output(left_node), to_output(right_node)], promote_unsafe=bool(promote_unsafe),
        pytorch_scalar_promotion=bool(pytorch_scalar_promotion),
        u64_integer_promotion_target=Type.of(u64_integer_promotion_target)), name)


