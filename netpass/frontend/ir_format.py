"""The tables of OpenVINO IR version 11 that its writer (:class:`netpass.passes.Serialize`) and
its reader (:mod:`netpass.frontend.ir_reader`) share: IR type names, attribute spellings and the
escaping of tensor names.

netpass attribute names are OpenVINO's and values are written as the op holds them (OpenVINO
reads enum spellings case-insensitively, so they round-trip unchanged). Where a netpass op names
or spells an attribute differently, the per-type table ``ATTR_RULES`` translates it on the way
out and back.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

IR_VERSION = 11

# netpass/OpenVINO type name -> the name IR files use (and back, for the reader).
IR_TYPE_NAMES = {"Constant": "Const", "Relu": "ReLU", "PRelu": "PReLU", "Softmax": "SoftMax"}
TYPE_NAMES_FROM_IR = {v: k for k, v in IR_TYPE_NAMES.items()}


class AttrRule(NamedTuple):
    """How one attribute is spelled in IR: its IR name and value converters both ways."""

    ir_name: str
    to_ir: Callable[[Any], Any] | None = None
    from_ir: Callable[[str], Any] | None = None


# Attributes holding an element type (written by name: "f32", "i64", "boolean").
TYPE_ATTRS = {"element_type", "destination_type", "output_type", "index_element_type"}


def _from_ceil_torch(text: str) -> str:
    return "ceil" if text.lower() == "ceil_torch" else text


# Per-type renames and value translations: {type name: {netpass attr: AttrRule}}. netpass ops
# declare OpenVINO's attribute names (``exclude-pad`` included) and OpenVINO reads enum values
# case-insensitively, so few need an entry; an op that stores an attribute under another name
# or spelling adds one here and both directions follow.
ATTR_RULES: dict[str, dict[str, AttrRule]] = {
    # Written as ceil_torch where netpass's ceil differs from OpenVINO's (see ``LAYER_RULES`` in
    # netpass.passes.serialize).
    "MaxPool": {"rounding_type": AttrRule("rounding_type", from_ir=_from_ceil_torch)},
    "AvgPool": {"rounding_type": AttrRule("rounding_type", from_ir=_from_ceil_torch)},
    # ONNX Cast's float8 options: written only where they differ from the default (which is
    # what OpenVINO's Convert does), so OpenVINO reads every Convert it can run.
    "Convert": {"saturate": AttrRule("saturate", to_ir=lambda v: None if v else False),
                "round_mode": AttrRule("round_mode", to_ir=lambda v: None if v == "up" else v)},
}


def attr_from_ir_name(type_name: str, ir_name: str) -> tuple[str, AttrRule | None]:
    """The netpass attribute written as ``ir_name`` for ``type_name``, with its rule if any."""
    for attr, rule in ATTR_RULES.get(type_name, {}).items():
        if rule.ir_name == ir_name:
            return attr, rule
    return ir_name, None


def escape_names(names: set[str]) -> str:
    return ",".join(n.replace(",", "\\,") for n in sorted(names))


def split_names(text: str) -> set[str]:
    """Inverse of :func:`escape_names`: split on commas not preceded by a backslash."""
    return {p.replace("\\,", ",") for p in re.split(r"(?<!\\),", text) if p}


