"""The runtime op table (DESIGN.md §11): per op family, mirroring ``netpass/ops/<family>``, one row
(:class:`OpKind`) per op class saying everything the runtime knows of the op: shape-infer
dependencies, concrete shape rule, kernel or host impl, copy-only, view and skip rules, and its
legacy layer name (read from the legacy stage's table). ``program``, ``network``, ``impls``
and ``shape_infer`` read the rows through each program node's ``row``; nothing else in the
runtime names an op by string. An op without a row runs on the host with its own shape
inference (:func:`row_of` gives it a default row).

Adding an op: docs/adding-an-op.md.
"""
from __future__ import annotations

from ...core.node import OP_TYPES
from ...errors import UnsupportedOpError
from . import (  # noqa: F401
    attention,
    convolution,
    elementwise,
    fused_elementwise,
    gna,
    indexing,
    interpolate,
    io,
    legacy,
    matmul,
    movement,
    normalization,
    onnx_attention,
    pad,
    pooling,
    recurrent,
    reduction,
    shape_ops,
)
from .attention import FusedAttention
from .base import TABLE, OpClass, OpKind
from .fused_elementwise import GatedActivation, Rotary, Unaries
from .indexing import GatherSum
from .matmul import ExpertMatMul
from .normalization import RmsNorm

# kinds the runtime makes itself (no op class of ``netpass.ops``), by name
RUNTIME_KINDS: dict[str, type] = {k.type_name: k for k in (ExpertMatMul, FusedAttention,
                                                            GatedActivation, GatherSum, RmsNorm,
                                                            Rotary, Unaries)}
_DEFAULT: dict[type, OpKind] = {}  # op classes without a row


def op_class(kind: str) -> type:
    """The class of op kind ``kind`` (an OpenVINO or legacy type name, or a runtime kind)."""
    cls = OP_TYPES.get(kind) or RUNTIME_KINDS.get(kind)
    if cls is None:
        raise UnsupportedOpError(kind, reason="no op class of that type name")
    return cls


def row_of(cls: type[OpClass]) -> OpKind:
    """The row of op class ``cls``: its own, or that of the version it refines (a subclass with
    the same type name, as OneHot-16 of OneHot), else a default row (no kernel: the host runs
    it; its own shape inference)."""
    for c in cls.__mro__:
        if getattr(c, "type_name", None) != cls.type_name:
            break
        row = TABLE.get(c)
        if row is not None:
            return row
    row = _DEFAULT.get(cls)
    if row is None:
        row = _DEFAULT[cls] = OpKind(cls)
    return row


__all__ = ["OpKind", "TABLE", "RUNTIME_KINDS", "ExpertMatMul", "FusedAttention", "GatedActivation",
           "GatherSum", "RmsNorm", "Rotary", "Unaries", "op_class", "row_of"]
