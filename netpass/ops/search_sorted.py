"""Positions in sorted sequences: Bucketize (OpenVINO opset3, ``torch.bucketize``) and
SearchSorted (opset15, ``torch.searchsorted``). ONNX has neither."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import Type, i32, i64
from .base import set_name, to_output

__all__ = ["bucketize", "search_sorted"]


def _index_type(node: Node, attr: str) -> Type:
    et = Type.of(getattr(node, attr))
    node.check(et in (i32, i64), "{} must be i32 or i64, got {}", attr, et)
    setattr(node, attr, et)
    return et


def _numeric(node: Node, i: int, what: str) -> None:
    et = node.get_input_element_type(i)
    node.check(et.is_dynamic or et.is_real or et.is_integral, "{} must be numeric, got {}",
               what, et)


class Bucketize(Node):
    """Bucketize-3: for each element of ``data`` the index of its bucket among the sorted 1-D
    ``buckets``: ``i`` with ``buckets[i-1] < x <= buckets[i]`` (``with_right_bound``), or
    ``buckets[i-1] <= x < buckets[i]`` (not); 0 below the first boundary, ``len(buckets)``
    above the last."""

    type_name = "Bucketize"
    version = "opset3"
    ATTRS = {"output_type": i64, "with_right_bound": True}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, buckets)")
        et = _index_type(self, "output_type")
        _numeric(self, 0, "data")
        _numeric(self, 1, "buckets")
        buckets = self.get_input_partial_shape(1)
        self.check(not buckets.rank_is_static or len(buckets) == 1,
                   "buckets must be 1-D, got shape {}", buckets)
        self.set_output_type(0, et, self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x, buckets = inputs
        side = "left" if self.with_right_bound else "right"
        return [np.searchsorted(buckets, x, side=side).astype(self.output_type.dtype)]


class SearchSorted(Node):
    """SearchSorted-15: for each of ``values`` its insertion index in ``sorted_sequence``: the
    first ``i`` with ``v <= sorted[i]`` (``v < sorted[i]`` with ``right_mode``). A 1-D
    sequence serves every value; otherwise the sequence has the values' rank and leading dims,
    and each row of values searches its own row."""

    type_name = "SearchSorted"
    version = "opset15"
    ATTRS = {"right_mode": False, "output_type": i64}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (sorted_sequence, values)")
        et = _index_type(self, "output_type")
        _numeric(self, 0, "sorted_sequence")
        _numeric(self, 1, "values")
        seq, values = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        if seq.rank_is_static:
            self.check(len(seq) >= 1, "sorted_sequence must have rank 1 or more, got {}", seq)
        if seq.rank_is_static and values.rank_is_static and len(seq) > 1:
            self.check(len(seq) == len(values) and PartialShape(list(seq)[:-1]).compatible(
                PartialShape(list(values)[:-1])), "sorted_sequence {} and values {} must have "
                "the same rank and leading dims (or a 1-D sequence)", seq, values)
            merged = PartialShape(list(seq)[:-1]).merge(PartialShape(list(values)[:-1]))
            assert merged is not None
            values = PartialShape(list(merged) + [values[-1]])
        self.set_output_type(0, et, values)

    def evaluate(self, inputs):
        seq, values = (np.asarray(a) for a in inputs)
        side = "right" if self.right_mode else "left"
        dt = self.output_type.dtype
        if seq.ndim == 1:
            return [np.searchsorted(seq, values, side=side).astype(dt)]
        self.check(seq.shape[:-1] == values.shape[:-1], "sorted_sequence {} and values {} "
                   "differ in their leading dims", seq.shape, values.shape)
        rows = seq.reshape(-1, seq.shape[-1])
        vals = values.reshape(-1, values.shape[-1])
        out = np.empty(vals.shape, dt)
        for r in range(rows.shape[0]):
            out[r] = np.searchsorted(rows[r], vals[r], side=side)
        return [out.reshape(values.shape)]


def bucketize(data: Any, buckets: Any, output_type: Any = "i64", with_right_bound: bool = True,
              name: str | None = None) -> Node:
    """Bucketize-3: the bucket index of each element of ``data`` among the sorted boundaries
    ``buckets`` (right-closed buckets with ``with_right_bound``), of ``output_type``."""
    return set_name(Bucketize([to_output(data), to_output(buckets)],
                              output_type=Type.of(output_type),
                              with_right_bound=bool(with_right_bound)), name)


def search_sorted(sorted_sequence: Any, values: Any, right_mode: bool = False,
                  output_type: Any = "i64", name: str | None = None) -> Node:
    """SearchSorted-15: the index at which each of ``values`` would be inserted into
    ``sorted_sequence`` (after equal elements with ``right_mode``), of ``output_type``."""
    return set_name(SearchSorted([to_output(sorted_sequence), to_output(values)],
                                 right_mode=bool(right_mode), output_type=Type.of(output_type)),
                    name)
