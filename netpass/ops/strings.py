"""String ops of ONNX: StringConcat (20), StringSplit (20), StringNormalizer (10) and
RegexFullMatch (20), over ``string`` tensors (numpy object arrays of ``str``). OpenVINO's core
has no string ops; netpass keeps them whole and the runtime runs them on the host.

RegexFullMatch uses Python's ``re`` for the RE2 patterns ONNX names: the two agree on the
common syntax (classes, repetition, alternation, groups); RE2-only constructs are refused
with the pattern named.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import boolean, i64, string
from .base import NETPASS_OPSET, set_name, to_output
from .registry import onnx_export, onnx_rule

__all__ = ["string_concat", "string_split", "string_normalizer", "regex_full_match"]


def _check_strings(node: Node, *indices: int) -> None:
    for i in indices:
        et = node.get_input_element_type(i)
        node.check(et.is_dynamic or et is string, "input {} must be strings, got {}", i, et)


def _str(v: Any) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


class StringConcat(Node):
    """Elementwise ``x + y`` with numpy broadcasting."""

    type_name = "StringConcat"
    version = NETPASS_OPSET

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (X, Y)")
        _check_strings(self, 0, 1)
        a, b = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        out = a.broadcast_merge(b)
        self.check(out is not None, "shapes {} and {} do not broadcast", a, b)
        self.set_output_type(0, string, out)

    def evaluate(self, inputs):
        a, b = np.broadcast_arrays(*inputs)
        out = np.empty(a.shape, object)
        out.reshape(-1)[:] = [_str(x) + _str(y) for x, y in zip(a.reshape(-1), b.reshape(-1))]
        return [out]


class StringSplit(Node):
    """Split each element on ``delimiter`` (None or "": runs of whitespace, trimmed) at most
    ``maxsplit`` times (None: all); outputs the substrings padded with "" to the longest row
    (one more axis) and the substring counts (i64)."""

    type_name = "StringSplit"
    version = NETPASS_OPSET
    ATTRS = {"delimiter": None, "maxsplit": None}
    DATA_DEPENDENT_SHAPE = True

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        _check_strings(self, 0)
        self.check(self.maxsplit is None or self.maxsplit >= 0, "maxsplit must be >= 0, got {}",
                   self.maxsplit)
        ps = self.get_input_partial_shape(0)
        parts = Dimension() if self.maxsplit is None else Dimension(0, self.maxsplit + 1)
        y = PartialShape(list(ps) + [parts]) if ps.rank_is_static else PartialShape(None)
        self.set_output_type(0, string, y)
        self.set_output_type(1, i64, ps)

    def evaluate(self, inputs):
        x = inputs[0]
        sep = self.delimiter or None  # "" splits on whitespace, as str.split(None)
        limit = -1 if self.maxsplit is None else self.maxsplit
        rows = [_str(v).split(sep, limit) for v in x.reshape(-1)]
        width = max((len(r) for r in rows), default=0)
        y = np.full((len(rows), width), "", object)
        for i, r in enumerate(rows):
            y[i, :len(r)] = r
        counts = np.array([len(r) for r in rows], np.int64).reshape(x.shape)
        return [y.reshape(x.shape + (width,)), counts]


class StringNormalizer(Node):
    """Drop ``stopwords`` (case-insensitively unless ``is_case_sensitive``) from a ``[C]`` or
    ``[1, C]`` tensor, then change case (``LOWER``, ``UPPER`` or ``NONE``); all dropped gives
    one empty string."""

    type_name = "StringNormalizer"
    version = NETPASS_OPSET
    ATTRS = {"case_change_action": "NONE", "is_case_sensitive": False, "stopwords": [],
             "locale": ""}
    DATA_DEPENDENT_SHAPE = True

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        _check_strings(self, 0)
        self.check(self.case_change_action in ("LOWER", "UPPER", "NONE"),
                   "case_change_action must be LOWER, UPPER or NONE, got '{}'",
                   self.case_change_action)
        ps = self.get_input_partial_shape(0)
        if ps.rank_is_static:
            self.check(len(ps) == 1 or (len(ps) == 2 and ps[0].compatible(1)),
                       "input must be [C] or [1, C], got {}", ps)
            c = ps[-1]
            kept = Dimension(min(c.min, 1) if self.stopwords else c.min, max(c.max, 1))
            self.set_output_type(0, string, PartialShape([*([1] if len(ps) == 2 else []), kept]))
        else:
            self.set_output_type(0, string, PartialShape(None))

    def evaluate(self, inputs):
        x = inputs[0]
        words = [_str(v) for v in x.reshape(-1)]
        if self.stopwords:
            if self.is_case_sensitive:
                stop = set(self.stopwords)
                words = [w for w in words if w not in stop]
            else:
                stop = {s.lower() for s in self.stopwords}
                words = [w for w in words if w.lower() not in stop]
        if self.case_change_action == "LOWER":
            words = [w.lower() for w in words]
        elif self.case_change_action == "UPPER":
            words = [w.upper() for w in words]
        if not words:
            words = [""]
        out = np.array(words, dtype=object)
        return [out.reshape(1, -1) if x.ndim == 2 else out]


# RE2 syntax Python's re reads differently or not at all
_RE2_ONLY = re.compile(r"\\[pPCzQE]|\(\?P=|\[\[:")


class RegexFullMatch(Node):
    """True where an element matches ``pattern`` as a whole."""

    type_name = "RegexFullMatch"
    version = NETPASS_OPSET
    ATTRS = {"pattern": ""}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        _check_strings(self, 0)
        self.check(not _RE2_ONLY.search(self.pattern), "pattern '{}' uses RE2 syntax netpass "
                   "does not read", self.pattern)
        try:
            re.compile(self.pattern)
        except re.error as e:
            self.check(False, "pattern '{}' is not a valid regex: {}", self.pattern, e)
        self.set_output_type(0, boolean, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        rx = re.compile(self.pattern)
        flat = [rx.fullmatch(_str(v)) is not None for v in x.reshape(-1)]
        return [np.array(flat, bool).reshape(x.shape)]


# -- factories ---------------------------------------------------------------------------------

def string_concat(x: Any, y: Any, name: str | None = None) -> Node:
    """StringConcat: ``x + y`` element by element over string tensors, numpy broadcasting."""
    return set_name(StringConcat([to_output(x), to_output(y)]), name)


def string_split(x: Any, delimiter: str | None = None, maxsplit: int | None = None,
                 name: str | None = None) -> Node:
    """StringSplit: each string split on ``delimiter`` (None: runs of whitespace) at most
    ``maxsplit`` times; outputs the substrings padded with "" and their counts."""
    return set_name(StringSplit([to_output(x)], delimiter=delimiter, maxsplit=maxsplit), name)


def string_normalizer(x: Any, case_change_action: str = "NONE", is_case_sensitive: bool = False,
                      stopwords: list[str] | None = None, name: str | None = None) -> Node:
    """StringNormalizer: drop ``stopwords`` from a ``[C]`` or ``[1, C]`` string tensor, then
    change case (LOWER, UPPER or NONE)."""
    return set_name(StringNormalizer([to_output(x)], case_change_action=case_change_action,
                                     is_case_sensitive=is_case_sensitive,
                                     stopwords=list(stopwords or [])), name)


def regex_full_match(x: Any, pattern: str, name: str | None = None) -> Node:
    """RegexFullMatch: True where a string matches the regex ``pattern`` as a whole."""
    return set_name(RegexFullMatch([to_output(x)], pattern=pattern), name)


# -- ONNX import and export ----------------------------------------------------------------------

onnx_rule("StringConcat", since=20)(lambda ctx: StringConcat(ctx.inputs[:2]))


@onnx_rule("StringSplit", since=20)
def _import_string_split(ctx):
    maxsplit = ctx.attr("maxsplit", 0) if ctx.has_attr("maxsplit") else None
    return StringSplit(ctx.inputs[:1], delimiter=ctx.attr("delimiter", "") or None,
                       maxsplit=maxsplit).outputs()


@onnx_rule("StringNormalizer", since=10)
def _import_string_normalizer(ctx):
    return StringNormalizer(ctx.inputs[:1], case_change_action=ctx.attr("case_change_action",
                                                                        "NONE"),
                            is_case_sensitive=bool(ctx.attr("is_case_sensitive", 0)),
                            stopwords=ctx.attr("stopwords", []), locale=ctx.attr("locale", ""))


onnx_rule("RegexFullMatch", since=20)(
    lambda ctx: RegexFullMatch(ctx.inputs[:1], pattern=ctx.attr("pattern", "")))


@onnx_export(StringConcat, opset=20)
def _export_string_concat(node, ectx):
    ectx.add_node("StringConcat", ectx.inputs(node), ectx.outputs(node))


@onnx_export(StringSplit, opset=20)
def _export_string_split(node, ectx):
    attrs: dict[str, Any] = {}
    if node.delimiter:
        attrs["delimiter"] = node.delimiter
    if node.maxsplit is not None:
        attrs["maxsplit"] = int(node.maxsplit)
    ectx.add_node("StringSplit", ectx.inputs(node), ectx.outputs(node), **attrs)


@onnx_export(StringNormalizer)
def _export_string_normalizer(node, ectx):
    attrs: dict[str, Any] = {"case_change_action": node.case_change_action,
                             "is_case_sensitive": int(node.is_case_sensitive)}
    if node.stopwords:
        attrs["stopwords"] = list(node.stopwords)
    if node.locale:
        attrs["locale"] = node.locale
    ectx.add_node("StringNormalizer", ectx.inputs(node), ectx.outputs(node), **attrs)


@onnx_export(RegexFullMatch, opset=20)
def _export_regex_full_match(node, ectx):
    ectx.add_node("RegexFullMatch", ectx.inputs(node), ectx.outputs(node), pattern=node.pattern)
