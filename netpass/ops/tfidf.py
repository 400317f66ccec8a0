"""TfIdfVectorizer (ONNX 9): counts of the n-grams of a pool in each row of an integer or
string input, weighted as TF, IDF or TFIDF. OpenVINO has no such op; netpass keeps it whole.

The pool (``pool_int64s`` or ``pool_strings``) holds the 1-grams, then the 2-grams... from the
offsets ``ngram_counts``; n-gram ``k`` of the pool (counting every size) goes to output column
``ngram_indexes[k]``; only sizes from ``min_gram_length`` to ``max_gram_length`` are counted.
An n-gram is read at every start position with gaps of up to ``max_skip_count`` items between
its items (n-grams of one item once, whatever the gap). IDF gives the n-gram's weight (pool
n-gram ``k`` has ``weights[k]``; 1 without weights) where the count is not zero; TFIDF
multiplies the count by it. (onnx's reference evaluator reads the weight of column ``c`` as
``weights[c]`` instead; onnxruntime follows the specification, and so does netpass.)
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import f32, i32, i64, string
from .base import NETPASS_OPSET, set_name, to_output
from .registry import onnx_export, onnx_rule

__all__ = ["tfidf_vectorizer"]


class TfIdfVectorizer(Node):
    type_name = "TfIdfVectorizer"
    version = NETPASS_OPSET
    ATTRS = {"max_gram_length": 1, "max_skip_count": 0, "min_gram_length": 1, "mode": "TF",
             "ngram_counts": [], "ngram_indexes": [], "pool_int64s": [], "pool_strings": [],
             "weights": []}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et in (i32, i64, string) or et.is_dynamic,
                   "input must be i32, i64 or strings, got {}", et)
        self.check(self.mode in ("TF", "IDF", "TFIDF"), "mode must be TF, IDF or TFIDF, got "
                   "'{}'", self.mode)
        self.check(bool(self.ngram_indexes), "ngram_indexes must not be empty")
        self.check(bool(self.pool_int64s) != bool(self.pool_strings),
                   "exactly one of pool_int64s and pool_strings must be given")
        self.check(1 <= self.min_gram_length <= self.max_gram_length,
                   "min_gram_length {} / max_gram_length {} out of order",
                   self.min_gram_length, self.max_gram_length)
        width = Dimension(max(self.ngram_indexes) + 1)
        ps = self.get_input_partial_shape(0)
        self.check(not ps.rank_is_static or len(ps) <= 2, "input must be [C] or [B, C], got {}",
                   ps)
        if ps.rank_is_static and len(ps) == 2:
            self.set_output_type(0, f32, PartialShape([ps[0], width]))
        elif ps.rank_is_static:
            self.set_output_type(0, f32, PartialShape([width]))
        else:
            self.set_output_type(0, f32, PartialShape(None))

    def grams(self) -> dict[tuple[Any, ...], int]:
        """Each counted n-gram of the pool and its output column."""
        pool = list(self.pool_int64s) or list(self.pool_strings)
        out: dict[tuple[Any, ...], int] = {}
        k = 0
        for i, start in enumerate(self.ngram_counts):
            n = i + 1
            end = self.ngram_counts[i + 1] if i + 1 < len(self.ngram_counts) else len(pool)
            for j in range((end - start) // n):
                if self.min_gram_length <= n <= self.max_gram_length:
                    out[tuple(pool[start + j * n:start + (j + 1) * n])] = self.ngram_indexes[k]
                k += 1
        return out

    def evaluate(self, inputs: Sequence[Any]) -> list[Any]:
        x = np.asarray(inputs[0])
        rows = x.reshape(1, -1) if x.ndim < 2 else x
        width = max(self.ngram_indexes) + 1
        weights = np.ones(width, dtype=np.float32)
        if self.weights:  # the weight of pool n-gram k goes to its column ngram_indexes[k]
            weights = np.zeros(width, dtype=np.float32)
            weights[np.asarray(self.ngram_indexes)] = self.weights
        # TFIDF adds the weight once per occurrence, in float32 (as onnxruntime sums it)
        step = weights if self.mode == "TFIDF" else np.ones(width, dtype=np.float32)
        y = np.zeros((rows.shape[0], width), dtype=np.float32)
        grams = self.grams()
        lo_gram, hi_gram = self.min_gram_length, self.max_gram_length
        for r, row in enumerate(rows):
            items = [v if isinstance(v, str) else int(v) for v in row.tolist()]
            for gap in range(1, self.max_skip_count + 2):
                lo = lo_gram if gap == 1 else max(lo_gram, 2)  # 1-grams once only
                for start in range(len(items)):
                    for n in range(lo, hi_gram + 1):
                        last = start + (n - 1) * gap
                        if last >= len(items):
                            break
                        column = grams.get(tuple(items[start:last + 1:gap]))
                        if column is not None:
                            y[r, column] += step[column]
        if self.mode == "IDF":
            y = np.where(y > 0, weights, np.float32(0))
        return [y if x.ndim == 2 else y.reshape(width)]


def tfidf_vectorizer(data: Any, name: str | None = None, **attrs: Any) -> Node:
    """TfIdfVectorizer (ONNX): n-gram counts of the rows of ``data`` over the attributes'
    pool, weighted as TF, IDF or TFIDF (ONNX's attribute names)."""
    return set_name(TfIdfVectorizer([to_output(data)], **attrs), name)


@onnx_rule("TfIdfVectorizer", since=9)
def _import_tfidf(ctx):
    attrs = {k: ctx.attr(k, v) for k, v in TfIdfVectorizer.ATTRS.items()}
    return TfIdfVectorizer(ctx.inputs[:1], **attrs)


@onnx_export(TfIdfVectorizer)
def _export_tfidf(node, ectx):
    attrs = {k: (v if v != [] else None) for k, v in node.get_attributes().items()}
    ectx.add_node("TfIdfVectorizer", ectx.inputs(node), ectx.outputs(node), **attrs)
