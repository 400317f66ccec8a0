"""ConvertSteppedSliceToMatMul: a Slice or StridedSlice that is not one contiguous window
(a step other than 1, or a negative step as ``torch.flip`` exports) becomes a selection
matrix product: ``Reshape [P, Q] -> MatMul(S) -> Reshape(output shape)``, with ``S`` a
``[Q, M]`` 0/1 matrix holding one 1 per column.

GNA has no strided copy: a CropIE is one contiguous window, and the GNA plugin itself realises
unaligned crops as affine layers with selection weights. A MatMul is such an affine layer, it
is exact (every output is ``x * 1`` plus zeros), and Gather sinking folds the layout
permutations next to it into ``S`` (zoo finding F6).

The rows ``P`` are the leading axes the slice keeps whole (at least a batch > 1), as few as
keep ``S`` under ``MAX_SELECTION_ELEMENTS``: more rows mean a smaller ``S`` but a Reshape that
Gather sinking cannot cross. When no ``S`` is small enough (a stepped slice over a large map),
the slice becomes one Gather per sliced axis instead, which Gather sinking may still move to
an edge. Chains of slices become one result: a slice whose only consumer is another
convertible slice is left to that one, which reads the whole chain.
"""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...core.node import Node, Output
from ...ops.indexing import Gather
from ...ops.matmul import MatMul
from ...ops.movement import Reshape, Slice, StridedSlice
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, const_value, make, static_shape

# Largest selection matrix built (elements); 1M f32 = 4 MiB of weights.
MAX_SELECTION_ELEMENTS = 1 << 20

SLICES = (Slice, StridedSlice)


def _params(node: Node) -> list[np.ndarray] | None:
    values = [const_value(node.input_value(i)) for i in range(1, node.get_input_size())]
    return None if any(v is None for v in values) else values


def _convertible(node: Node) -> bool:
    """A slice with Constant parameters, a static float input that is not a Constant (that
    one is folded) and a static output."""
    if not isinstance(node, SLICES) or _params(node) is None:
        return False
    data = node.input_value(0)
    return static_shape(data) is not None and data.element_type.is_real \
        and const_value(data) is None \
        and node.output(0).partial_shape.is_static


def _unit_steps(node: Node) -> bool:
    """Every step (Slice) or stride (StridedSlice) is 1: the slice keeps one contiguous box in
    order, whatever its bounds and masks (``is_window``'s answer without a probe)."""
    if node.get_input_size() < 4:
        return True
    steps = const_value(node.input_value(3))
    return steps is not None and bool(np.all(steps == 1))


def _chain(node: Node) -> list[Node]:
    """``node`` and the convertible single-consumer slices feeding it, first one first."""
    chain = [node]
    while True:
        src = chain[0].input_value(0)
        if not _convertible(src.node) or len(src.consumers()) != 1:
            return chain
        chain.insert(0, src.node)


def kept_indices(chain: list[Node]) -> np.ndarray:
    """For every output element of the chain, the flat index of the input element it copies."""
    shape = static_shape(chain[0].input_value(0))
    probe = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    for node in chain:
        probe = node.evaluate([probe, *_params(node)])[0]
    return probe


def is_window(kept: np.ndarray, in_shape: tuple[int, ...]) -> bool:
    """True when ``kept`` is one contiguous box of the input in order (a CropIE does it)."""
    if kept.size == 0:
        return True
    flat = kept.reshape(-1)
    coords = np.unravel_index(flat, in_shape)
    dims = [int(c.max()) - int(c.min()) + 1 for c in coords]
    return int(np.prod(dims)) == flat.size and bool(np.all(np.diff(flat) > 0))


def selection(kept: np.ndarray, in_shape: tuple[int, ...]) -> tuple[int, np.ndarray] | None:
    """(rows P, local column indices [M]) for the fewest leading axes kept whole (at least a
    batch > 1) whose selection matrix has at most MAX_SELECTION_ELEMENTS; None when none has."""
    for a in range(len(in_shape)):
        if tuple(kept.shape[:a]) != tuple(in_shape[:a]):
            break
        rows = int(np.prod(in_shape[:a]))
        cols = int(np.prod(in_shape[a:]))
        local = kept.reshape(rows, -1) - (np.arange(rows, dtype=np.int64) * cols)[:, None]
        if np.any(local != local[0]) or local.min() < 0 or local.max() >= cols:
            continue
        if cols * local.shape[1] <= MAX_SELECTION_ELEMENTS and (a > 0 or in_shape[0] == 1):
            return rows, local[0]
    return None


def axis_gathers(kept: np.ndarray,
                 in_shape: tuple[int, ...]) -> list[tuple[int, np.ndarray]] | None:
    """``[(axis, indices)]`` whose Gathers, in turn, select ``kept`` (before a Reshape to the
    output shape); only the axes not kept whole in order. None when the selection is not
    separable per axis."""
    flat = kept.reshape(-1)
    coords = np.unravel_index(flat, in_shape)
    probe = np.arange(int(np.prod(in_shape)), dtype=np.int64).reshape(in_shape)
    gathers = []
    for axis, values in enumerate(coords):
        _, first = np.unique(values, return_index=True)
        order = values[np.sort(first)].astype(np.int64)
        if not np.array_equal(order, np.arange(in_shape[axis])):
            gathers.append((axis, order))
            probe = np.take(probe, order, axis=axis)
    return gathers if np.array_equal(probe.reshape(-1), flat) else None


def _reshape(x: Output, shape: tuple[int, ...]) -> Node:
    return make(Reshape, [x, const(np.array(shape, np.int64))], special_zero=False)


class ConvertSteppedSliceToMatMul(MatcherPass):
    """Stepped or reversed slice -> MatMul by a 0/1 matrix."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(SLICES, predicate=lambda o: _convertible(o.node))

        def callback(m: Matcher) -> bool:
            node = m.match_root
            if self.transformation_callback(node):
                return False
            consumers = node.output(0).consumers()
            if len(consumers) == 1 and _convertible(consumers[0].node):
                return False      # the consumer converts the whole chain
            chain = _chain(node)
            if all(_unit_steps(n) for n in chain):
                return False      # a window: evaluating the chain on a probe says so too
            data = chain[0].input_value(0)
            in_shape = static_shape(data)
            kept = kept_indices(chain)
            if is_window(kept, in_shape):
                return False
            split = selection(kept, in_shape)
            new = self._matmul(data, in_shape, split) if split is not None else \
                self._gathers(data, axis_gathers(kept, in_shape))
            if not new:
                return False
            out_shape = tuple(node.output(0).shape)
            if tuple(new[-1].output(0).shape) != out_shape:
                new.append(_reshape(new[-1].output(0), out_shape))
            new[-1].friendly_name = node.friendly_name
            copy_runtime_info(chain, new)
            return replace_output_update_name(node.output(0), new[-1].output(0))

        self.register_matcher(Matcher(pattern, "ConvertSteppedSliceToMatMul"), callback)

    @staticmethod
    def _matmul(data: Output, in_shape: tuple[int, ...],
                split: tuple[int, np.ndarray]) -> list[Node]:
        """``Reshape [P, Q] -> MatMul(selection)`` (the Reshape only when the shape changes)."""
        rows, local = split
        cols = int(np.prod(in_shape)) // rows
        matrix = np.zeros((cols, local.size), data.element_type.dtype)
        matrix[local, np.arange(local.size)] = 1
        new = []
        x = data
        if in_shape != (rows, cols):
            new.append(_reshape(data, (rows, cols)))
            x = new[-1].output(0)
        new.append(make(MatMul, [x, const(matrix)]))
        return new

    @staticmethod
    def _gathers(data: Output, gathers: list[tuple[int, np.ndarray]] | None) -> list[Node]:
        """One Gather per selected axis (a selection matrix too large to build)."""
        new: list[Node] = []
        for axis, indices in gathers or ():
            src = new[-1].output(0) if new else data
            new.append(make(Gather, [src, const(indices), const(np.array(axis, np.int64))]))
        return new

