"""BatchToSpace and SpaceToBatch (OpenVINO opset2, TensorFlow's ops of the same names): blocks
of the batch moved into the spatial dims (then cropped), and back (after padding). ONNX has
neither. ``block_shape``, the crops and the pads have one element per dim of ``data``; the
batch's own (element 0) must be 1 for the block and 0 for crops and pads."""
from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node
from ...core.shape import PartialShape
from ..base import set_name, to_output
from ..shape_inputs import check_shape_input, const_ints, i64_operand

__all__ = ["batch_to_space", "space_to_batch"]


class _BlockOp(Node):
    """Inputs ``(data, block_shape, begin, end)``: the checks both ops share."""

    SECOND = ("crops_begin", "crops_end")

    def _params(self) -> tuple[list[int], list[int], list[int]] | None:
        """block_shape, begin and end when constant (after checking them), else None."""
        self.check(self.get_input_size() == 4, "expects inputs (data, block_shape, {}, {})",
                   *self.SECOND)
        data = self.get_input_partial_shape(0)
        if data.rank_is_static:
            self.check(len(data) >= 2, "data must have rank 2 or more, got {}", data)
        for i, what in zip((1, 2, 3), ("block_shape",) + self.SECOND):
            check_shape_input(self, i, what)
            ps = self.get_input_partial_shape(i)
            self.check(not (ps.rank_is_static and data.rank_is_static and len(ps) == 1)
                       or ps[0].compatible(len(data)), "{} has shape {}: one element per dim "
                       "of data {}", what, ps, data)
        block, begin, end = (const_ints(self, i) for i in (1, 2, 3))
        if block is None or begin is None or end is None:
            return None
        self.check(len(block) == len(begin) == len(end), "block_shape {}, {} {} and {} {} "
                   "differ in length", block, self.SECOND[0], begin, self.SECOND[1], end)
        self.check(all(b >= 1 for b in block) and block[0] == 1,
                   "block_shape {} must be >= 1, and 1 for the batch", block)
        self.check(min(begin + end) >= 0, "{} {} and {} {} must be >= 0", self.SECOND[0],
                   begin, self.SECOND[1], end)
        return block, begin, end

    def _known(self) -> tuple[PartialShape, Any, tuple[list[int], list[int], list[int]]] | None:
        """(data shape, element type, constant parameters) where the output's dims can be
        computed; otherwise sets a dynamic output (of data's rank when known) and gives None."""
        params = self._params()
        data = self.get_input_partial_shape(0)
        et = self.get_input_element_type(0)
        if params is None or not data.rank_is_static:
            rank = data.rank if data.rank_is_static else None
            shape = PartialShape.dynamic(rank.get_length() if rank is not None else None)
            self.set_output_type(0, et, shape)
            return None
        self.check(len(params[0]) == len(data), "block_shape {} needs one element per dim of "
                   "data {}", params[0], data)
        return data, et, params


class BatchToSpace(_BlockOp):
    """BatchToSpace-2: ``[N, D1, ...] -> [N / prod(B), D1 * B1 - crops_begin1 - crops_end1,
    ...]``: batch index ``((b1 * B2 + b2) ...) * N' + n`` becomes position ``(d1 * B1 + b1,
    ...)`` of batch ``n``, then the crops cut each dim."""

    type_name = "BatchToSpace"
    version = "opset2"

    def infer_types(self) -> None:
        known = self._known()
        if known is None:
            return
        data, et, (block, begin, end) = known
        n, total = data[0], prod(block)
        self.check(not n.is_static or n.min % total == 0, "batch {} is not a multiple of the "
                   "block product {}", n, total)
        dims = [n // total if n.is_static else Dimension()]
        for d, b, lo, hi in zip(list(data)[1:], block[1:], begin[1:], end[1:]):
            if d.is_static:
                size = d.min * b - lo - hi
                self.check(size >= 0, "crops {} + {} exceed dim {} * block {}", lo, hi, d, b)
                dims.append(Dimension(size))
            else:
                dims.append(Dimension())
        self.set_output_type(0, et, PartialShape(dims))

    def evaluate(self, inputs):
        x = inputs[0]
        block, begin, end = ([int(v) for v in np.asarray(a).reshape(-1)] for a in inputs[1:])
        r = x.ndim
        total = prod(block)
        self.check(x.shape[0] % total == 0, "batch {} is not a multiple of the block product "
                   "{}", x.shape[0], total)
        y = x.reshape(block[1:] + [x.shape[0] // total] + list(x.shape[1:]))
        order = [r - 1] + [i for k in range(1, r) for i in (r - 1 + k, k - 1)]
        y = y.transpose(order).reshape([x.shape[0] // total] +
                                       [d * b for d, b in zip(x.shape[1:], block[1:])])
        return [y[tuple(slice(lo, y.shape[i] - hi) for i, (lo, hi) in
                        enumerate(zip(begin, end)))].copy()]


class SpaceToBatch(_BlockOp):
    """SpaceToBatch-2: the inverse: ``data`` padded with zeros (``pads_begin``,
    ``pads_end``), each padded dim split into ``[D / B, B]`` and the block offsets moved in
    front of the batch: ``[N * prod(B), (D1 + pads1) / B1, ...]``."""

    type_name = "SpaceToBatch"
    version = "opset2"
    SECOND = ("pads_begin", "pads_end")

    def infer_types(self) -> None:
        known = self._known()
        if known is None:
            return
        data, et, (block, begin, end) = known
        n = data[0]
        dims = [n * prod(block) if n.is_static else Dimension()]
        for d, b, lo, hi in zip(list(data)[1:], block[1:], begin[1:], end[1:]):
            if d.is_static:
                self.check((d.min + lo + hi) % b == 0, "dim {} padded by {} + {} is not a "
                           "multiple of block {}", d, lo, hi, b)
                dims.append(Dimension((d.min + lo + hi) // b))
            else:
                dims.append(Dimension())
        self.set_output_type(0, et, PartialShape(dims))

    def evaluate(self, inputs):
        x = inputs[0]
        block, begin, end = ([int(v) for v in np.asarray(a).reshape(-1)] for a in inputs[1:])
        padded = np.pad(x, list(zip(begin, end)))
        r = x.ndim
        for d, b in zip(padded.shape[1:], block[1:]):
            self.check(d % b == 0, "padded dim {} is not a multiple of block {}", d, b)
        split = [padded.shape[0]] + [v for d, b in zip(padded.shape[1:], block[1:])
                                     for v in (d // b, b)]
        order = [2 * k for k in range(1, r)] + [0] + [2 * k - 1 for k in range(1, r)]
        y = padded.reshape(split).transpose(order)
        return [y.reshape([padded.shape[0] * prod(block)] +
                          [d // b for d, b in zip(padded.shape[1:], block[1:])])]


def batch_to_space(data: Any, block_shape: Any, crops_begin: Any, crops_end: Any,
                   name: str | None = None) -> Node:
    """BatchToSpace-2: blocks of the batch of ``data`` moved into its spatial dims, then
    ``crops_begin``/``crops_end`` cut; python values become i64 Constants."""
    ins = [to_output(data)] + [i64_operand(v) for v in (block_shape, crops_begin, crops_end)]
    return set_name(BatchToSpace(ins), name)


def space_to_batch(data: Any, block_shape: Any, pads_begin: Any, pads_end: Any,
                   name: str | None = None) -> Node:
    """SpaceToBatch-2: ``data`` zero-padded, then blocks of its spatial dims moved into the
    batch; python values become i64 Constants."""
    ins = [to_output(data)] + [i64_operand(v) for v in (block_shape, pads_begin, pads_end)]
    return set_name(SpaceToBatch(ins), name)
