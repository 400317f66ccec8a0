"""Registries that tie an op to the rest of netpass: op classes by type name, ONNX import rules
and ONNX export rules. Op modules fill them; the frontend and serializers read them.

Import rule: ``fn(ctx) -> Output | list[Output]`` where ``ctx`` offers ``ctx.inputs`` (Outputs,
None for omitted optional inputs), ``ctx.attr(name, default)``, ``ctx.has_attr(name)``,
``ctx.opset`` (the model's default-domain opset), ``ctx.domain`` and ``ctx.version`` (the
node's domain, "" for the default one, and the version the model imports of it), ``ctx.name``
(ONNX node name), ``ctx.num_outputs`` and ``ctx.error(message)`` (raises a netpass error naming
the node).

Export rule: ``fn(node, ectx)`` writing ONNX nodes through ``ectx.inputs(node)`` (tensor names),
``ectx.outputs(node)``, ``ectx.add_node(op_type, inputs, outputs, **attrs)``,
``ectx.constant(array) -> name``, ``ectx.fresh(hint) -> name`` and ``ectx.opset`` (the opset
being written: 17, or the highest ``opset`` a rule of the model's ops registered, for ops ONNX
added later; rules whose ONNX form changed across versions consult it).
"""
from __future__ import annotations

from collections.abc import Callable

from ..core.node import OP_TYPES, Node  # noqa: F401  (OP_TYPES re-exported: op classes by type name)
from ..errors import UnsupportedOpError

ONNX_IMPORT: dict[tuple[str, str], list[tuple[int, Callable]]] = {}
# Domains other than the default one that have import rules, with the op types of each.
ONNX_IMPORT_DOMAINS: dict[str, set[str]] = {}
ONNX_EXPORT: dict[type, Callable] = {}
# The ONNX opset an export rule needs, where it is above the default export opset (17): a
# number, or a function of the node (when it depends on its types or attributes).
ONNX_EXPORT_OPSET: dict[type, int | Callable[[Node], int]] = {}


def onnx_rule(op_type: str, since: int = 1, domain: str = "") -> Callable[[Callable], Callable]:
    """Register an ONNX import rule used where the model imports ``domain`` ("": the default
    one) at a version >= ``since``."""
    def deco(fn: Callable) -> Callable:
        if domain:
            ONNX_IMPORT_DOMAINS.setdefault(domain, set()).add(op_type)
        rules = ONNX_IMPORT.setdefault((domain, op_type), [])
        rules.append((since, fn))
        rules.sort(key=lambda r: r[0])
        return fn
    return deco


def find_onnx_rule(op_type: str, opset: int, domain: str = "") -> Callable | None:
    rules = ONNX_IMPORT.get((domain, op_type))
    if not rules:
        return None
    chosen = None
    for since, fn in rules:
        if since <= opset:
            chosen = fn
    return chosen


def onnx_export(*classes: type, opset: int | Callable[[Node], int] | None = None
                ) -> Callable[[Callable], Callable]:
    """Register an ONNX export rule for the given op classes; ``opset``: the ONNX opset the
    rule's nodes need (a model holding such an op is written at that opset), or a function of
    the node giving it."""
    def deco(fn: Callable) -> Callable:
        for c in classes:
            ONNX_EXPORT[c] = fn
            if opset is not None:
                ONNX_EXPORT_OPSET[c] = opset
        return fn
    return deco


def export_error(node: Node, reason: str) -> None:
    """Raise the error of an export rule that cannot write ``node`` (export opset 17)."""
    raise UnsupportedOpError(node.type_name, "", 17, node.friendly_name,
                             f"cannot be written as ONNX: {reason}")
