"""Bags of embeddings (OpenVINO's sparse ops; ``torch.nn.functional.embedding_bag`` becomes
EmbeddingBagOffsets-15): rows of an embedding table gathered by index, weighted, and summed
(or averaged) per bag, without the gathered rows as an intermediate tensor. ONNX has none.

- EmbeddingBagOffsetsSum-3 / EmbeddingBagOffsets-15: 1-D ``indices`` cut into bags by
  ``offsets`` (bag ``b`` is ``indices[offsets[b]:offsets[b+1]]``, the last one to the end).
- EmbeddingBagPackedSum-3 / EmbeddingBagPacked-15: 2-D ``indices``, one bag per row.
- EmbeddingSegmentsSum-3: each index's bag named by ``segment_ids``, ``num_segments`` bags.

An empty bag is the ``default_index`` row of the table, or zeros without one (or with -1).
``per_sample_weights`` (the indices' shape) scales each row, with the ``sum`` reduction only.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from .base import merged_input_type, set_name, to_output
from .shape_inputs import as_dim, shape_values

__all__ = ["embedding_bag_offsets_sum", "embedding_bag_offsets", "embedding_bag_packed_sum",
           "embedding_bag_packed", "embedding_segments_sum"]


class _EmbeddingBag(Node):
    """Shared checks and the reduction; subclasses name their inputs (``INPUTS``) and where
    the optional default index and weights are."""

    INPUTS: ClassVar[tuple[str, ...]] = ()
    REQUIRED: ClassVar[int] = 0
    INDEX_INPUTS: ClassVar[tuple[int, ...]] = ()  # integer inputs besides default_index
    DEFAULT_AT: ClassVar[int] = 0  # 0: the op has no default_index input
    WEIGHTS_AT: ClassVar[int] = 0
    INDICES_RANK: ClassVar[int] = 1

    def _check_inputs(self) -> PartialShape:
        """Checks what every variant shares; returns the table's shape."""
        n = self.get_input_size()
        self.check(self.REQUIRED <= n <= len(self.INPUTS), "expects inputs ({}), got {}",
                   ", ".join(self.INPUTS), n)
        reduction = getattr(self, "reduction", "sum")
        self.check(reduction in ("sum", "mean"), "reduction must be sum or mean, got {}",
                   reduction)
        for i in (1,) + self.INDEX_INPUTS + ((self.DEFAULT_AT,) if self._has(self.DEFAULT_AT)
                                              else ()):
            et = self.get_input_element_type(i)
            self.check(et.is_dynamic or et.is_integral, "{} (input {}) must be integer, got {}",
                       self.INPUTS[i], i, et)
        indices = self.get_input_partial_shape(1)
        self.check(not indices.rank_is_static or len(indices) == self.INDICES_RANK,
                   "indices must be {}-D, got shape {}", self.INDICES_RANK, indices)
        if self._has(self.DEFAULT_AT):
            ps = self.get_input_partial_shape(self.DEFAULT_AT)
            self.check(not ps.rank_is_static or len(ps) == 0, "default_index must be a scalar, "
                       "got shape {}", ps)
        if self._has(self.WEIGHTS_AT):
            self.check(reduction == "sum", "per_sample_weights need the sum reduction, not {}",
                       reduction)
            merged_input_type(self, [self.WEIGHTS_AT])
            ps = self.get_input_partial_shape(self.WEIGHTS_AT)
            self.check(ps.compatible(indices), "per_sample_weights shape {} differs from the "
                       "indices' {}", ps, indices)
        table = self.get_input_partial_shape(0)
        self.check(not table.rank_is_static or len(table) >= 1, "emb_table must have rank 1 "
                   "or more, got {}", table)
        return table

    def _has(self, i: int) -> bool:
        return 0 < i < self.get_input_size()

    def _output(self, bags: Dimension, table: PartialShape) -> None:
        rest = list(table)[1:] if table.rank_is_static else None
        shape = PartialShape([bags] + rest) if rest is not None else PartialShape(None)
        self.set_output_type(0, self.get_input_element_type(0), shape)

    def _reduce(self, inputs: list[np.ndarray], bags: list[np.ndarray],
                flat_indices: np.ndarray) -> np.ndarray:
        """The output from each bag's positions into ``flat_indices``."""
        table = np.asarray(inputs[0])
        weights = (np.asarray(inputs[self.WEIGHTS_AT]).reshape(-1)
                   if self._has(self.WEIGHTS_AT) else None)
        default = (int(inputs[self.DEFAULT_AT]) if self._has(self.DEFAULT_AT) else -1)
        self.check(-1 <= default < table.shape[0], "default_index {} out of range for {} "
                   "embeddings", default, table.shape[0])
        bad = (flat_indices < 0) | (flat_indices >= table.shape[0])
        self.check(not bad.any(), "indices {} out of range for {} embeddings",
                   flat_indices[bad][:5].tolist(), table.shape[0])
        out = np.zeros((len(bags),) + table.shape[1:], table.dtype)
        wide = table.astype(np.float64) if table.dtype.kind == "f" else table
        for b, pos in enumerate(bags):
            if not len(pos):
                if default >= 0:
                    out[b] = table[default]
                continue
            rows = wide[flat_indices[pos]]
            if weights is not None:
                rows = rows * weights[pos].reshape((-1,) + (1,) * (table.ndim - 1))
            total = rows.sum(axis=0)
            out[b] = total / len(pos) if getattr(self, "reduction", "sum") == "mean" else total
        return out


class EmbeddingBagOffsetsSum(_EmbeddingBag):
    """EmbeddingBagOffsetsSum-3: inputs ``(emb_table, indices, offsets[, default_index[,
    per_sample_weights]])``; output ``[len(offsets), *emb_table.shape[1:]]``, each bag summed."""

    type_name = "EmbeddingBagOffsetsSum"
    version = "opset3"
    INPUTS = ("emb_table", "indices", "offsets", "default_index", "per_sample_weights")
    REQUIRED = 3
    INDEX_INPUTS = (2,)
    DEFAULT_AT = 3
    WEIGHTS_AT = 4

    def infer_types(self) -> None:
        table = self._check_inputs()
        offsets = self.get_input_partial_shape(2)
        self.check(not offsets.rank_is_static or len(offsets) == 1,
                   "offsets must be 1-D, got shape {}", offsets)
        self._output(offsets[0] if offsets.rank_is_static else Dimension(), table)

    def evaluate(self, inputs):
        indices = np.asarray(inputs[1]).reshape(-1)
        offsets = [int(o) for o in np.asarray(inputs[2]).reshape(-1)]
        ends = offsets[1:] + [len(indices)]
        self.check(all(0 <= s <= e <= len(indices) for s, e in zip(offsets, ends)),
                   "offsets {} must rise within the {} indices", offsets, len(indices))
        bags = [np.arange(s, e) for s, e in zip(offsets, ends)]
        return [self._reduce(inputs, bags, indices)]


class EmbeddingBagOffsets(EmbeddingBagOffsetsSum):
    """EmbeddingBagOffsets-15: EmbeddingBagOffsetsSum with ``reduction`` "sum" or "mean"."""

    type_name = "EmbeddingBagOffsets"
    version = "opset15"
    ATTRS = {"reduction": "sum"}


class EmbeddingBagPackedSum(_EmbeddingBag):
    """EmbeddingBagPackedSum-3: inputs ``(emb_table, indices[, per_sample_weights])`` with 2-D
    ``indices`` ``[batch, bag_size]``; output ``[batch, *emb_table.shape[1:]]``."""

    type_name = "EmbeddingBagPackedSum"
    version = "opset3"
    INPUTS = ("emb_table", "indices", "per_sample_weights")
    REQUIRED = 2
    WEIGHTS_AT = 2
    INDICES_RANK = 2

    def infer_types(self) -> None:
        table = self._check_inputs()
        indices = self.get_input_partial_shape(1)
        self._output(indices[0] if indices.rank_is_static else Dimension(), table)

    def evaluate(self, inputs):
        indices = np.asarray(inputs[1])
        width = indices.shape[1]
        bags = [np.arange(b * width, (b + 1) * width) for b in range(indices.shape[0])]
        return [self._reduce(inputs, bags, indices.reshape(-1))]


class EmbeddingBagPacked(EmbeddingBagPackedSum):
    """EmbeddingBagPacked-15: EmbeddingBagPackedSum with ``reduction`` "sum" or "mean"."""

    type_name = "EmbeddingBagPacked"
    version = "opset15"
    ATTRS = {"reduction": "sum"}


class EmbeddingSegmentsSum(_EmbeddingBag):
    """EmbeddingSegmentsSum-3: inputs ``(emb_table, indices, segment_ids, num_segments[,
    default_index[, per_sample_weights]])``; index ``i`` goes to bag ``segment_ids[i]``; output
    ``[num_segments, *emb_table.shape[1:]]``."""

    type_name = "EmbeddingSegmentsSum"
    version = "opset3"
    INPUTS = ("emb_table", "indices", "segment_ids", "num_segments", "default_index",
              "per_sample_weights")
    REQUIRED = 4
    INDEX_INPUTS = (2, 3)
    DEFAULT_AT = 4
    WEIGHTS_AT = 5
    SHAPE_INFER_INPUTS = (3,)

    def infer_types(self) -> None:
        table = self._check_inputs()
        ids, indices = self.get_input_partial_shape(2), self.get_input_partial_shape(1)
        self.check(ids.compatible(indices), "segment_ids shape {} differs from the indices' {}",
                   ids, indices)
        num = self.get_input_partial_shape(3)
        self.check(not num.rank_is_static or len(num) == 0, "num_segments must be a scalar, "
                   "got shape {}", num)
        value = shape_values(self, 3)
        if value and isinstance(value[0], int):
            self.check(value[0] >= 0, "num_segments must be >= 0, got {}", value[0])
        self._output(as_dim(value[0]) if value else Dimension(), table)

    def evaluate(self, inputs):
        ids = np.asarray(inputs[2]).reshape(-1)
        num = int(inputs[3])
        self.check(bool(((ids >= 0) & (ids < num)).all()), "segment_ids must lie in [0, {}), "
                   "got {}", num, ids.tolist()[:10])
        bags = [np.flatnonzero(ids == s) for s in range(num)]
        return [self._reduce(inputs, bags, np.asarray(inputs[1]).reshape(-1))]


def _optional(indices: Any, default_index: Any, per_sample_weights: Any) -> list:
    """The optional inputs given: weights without a default index get -1 (none) before them,
    in the indices' type."""
    if per_sample_weights is None:
        return [] if default_index is None else [to_output(default_index)]
    if default_index is None:
        dtype = to_output(indices).element_type.dtype or np.int64
        default_index = np.asarray(-1, dtype)
    return [to_output(default_index), to_output(per_sample_weights)]


def embedding_bag_offsets_sum(emb_table: Any, indices: Any, offsets: Any,
                              default_index: Any = None, per_sample_weights: Any = None,
                              name: str | None = None) -> Node:
    """EmbeddingBagOffsetsSum-3: the sum of ``emb_table`` rows per bag of ``indices`` cut at
    ``offsets`` (an empty bag: the ``default_index`` row, or zeros), rows scaled by
    ``per_sample_weights``."""
    ins = [to_output(emb_table), to_output(indices), to_output(offsets)]
    ins += _optional(ins[1], default_index, per_sample_weights)
    return set_name(EmbeddingBagOffsetsSum(ins), name)


def embedding_bag_offsets(emb_table: Any, indices: Any, offsets: Any, default_index: Any = None,
                          per_sample_weights: Any = None, reduction: str = "sum",
                          name: str | None = None) -> Node:
    """EmbeddingBagOffsets-15: EmbeddingBagOffsetsSum with ``reduction`` "sum" or "mean"."""
    ins = [to_output(emb_table), to_output(indices), to_output(offsets)]
    ins += _optional(ins[1], default_index, per_sample_weights)
    return set_name(EmbeddingBagOffsets(ins, reduction=reduction), name)


def embedding_bag_packed_sum(emb_table: Any, indices: Any, per_sample_weights: Any = None,
                             name: str | None = None) -> Node:
    """EmbeddingBagPackedSum-3: the sum of ``emb_table`` rows per row of the 2-D ``indices``,
    scaled by ``per_sample_weights``."""
    ins = [to_output(emb_table), to_output(indices)]
    ins += [to_output(per_sample_weights)] if per_sample_weights is not None else []
    return set_name(EmbeddingBagPackedSum(ins), name)


def embedding_bag_packed(emb_table: Any, indices: Any, per_sample_weights: Any = None,
                         reduction: str = "sum", name: str | None = None) -> Node:
    """EmbeddingBagPacked-15: EmbeddingBagPackedSum with ``reduction`` "sum" or "mean"."""
    ins = [to_output(emb_table), to_output(indices)]
    ins += [to_output(per_sample_weights)] if per_sample_weights is not None else []
    return set_name(EmbeddingBagPacked(ins, reduction=reduction), name)


def embedding_segments_sum(emb_table: Any, indices: Any, segment_ids: Any, num_segments: Any,
                           default_index: Any = None, per_sample_weights: Any = None,
                           name: str | None = None) -> Node:
    """EmbeddingSegmentsSum-3: the sum of ``emb_table`` rows per segment: index ``i`` in
    segment ``segment_ids[i]``, ``num_segments`` segments (an empty one: the
    ``default_index`` row, or zeros), rows scaled by ``per_sample_weights``."""
    ins = [to_output(emb_table), to_output(indices), to_output(segment_ids),
           to_output(num_segments)]
    ins += _optional(ins[1], default_index, per_sample_weights)
    return set_name(EmbeddingSegmentsSum(ins), name)
