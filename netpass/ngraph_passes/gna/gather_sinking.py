"""Forward members of the Gather sinking group (the backward ones are in
gather_sinking_backward.py, the drivers in gather_general.py). They move Gathers (1-D constant
indices along one axis, as GatherSinkingTransposeReshape and the GNA Concat/Split rewrites
create) through elementwise ops, MatMul (a Gather on the contracted axis is absorbed into the
other input's weights), Reshapes that only add or drop 1s or split the gathered axis into
axes of which the permutation reorders one (zoo finding F4), Split along another axis, and
fuse consecutive Gathers."""
from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...core.node import Node
from ...ops.elementwise import PRelu
from ...ops.gna import GNAConvolution, GNAMaxPool
from ...ops.indexing import Gather
from ...ops.matmul import MatMul
from ...ops.movement import Reshape, Split, Squeeze, Transpose, Unsqueeze, VariadicSplit
from ...passes import MatcherPass
from ...pattern import Matcher, any_input, wrap_type
from ..transpose_sinking.elementwise import BINARY_TYPES, UNARY_TYPES
from ..utils import static_rank, static_shape
from .gather_utils import (
    GatherInfo,
    aligned_axis,
    feeds_outputs,
    first_gather_input,
    gather_info,
    gather_sinking_disabled,
    gathered,
    insert_output_gather,
    mark_no_gather_sinking,
)

_FORWARD_OK = (Gather, Reshape, Squeeze, Unsqueeze, MatMul, Split, VariadicSplit, Transpose,
               GNAConvolution, GNAMaxPool)


def _after_forward(g: Node) -> Node:
    """Mark a Gather forward sinking cannot move further, or that it brought to the model's
    outputs (``feeds_outputs``: post-processing takes it there), so the backward group leaves
    it: unmarked, a Gather sunk below a Clamp to an output's Reshape went back above the
    Clamp, inside."""
    fwd = (*UNARY_TYPES, *BINARY_TYPES, *_FORWARD_OK)
    if not all(isinstance(c.node, fwd) for c in g.output(0).consumers()) or feeds_outputs(g):
        mark_no_gather_sinking(g)
    return g


class _Forward(MatcherPass):
    TYPES: ClassVar[tuple[type[Node], ...]] = ()

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(self.TYPES,
                            predicate=lambda o: first_gather_input(o.node) is not None)

        def callback(m: Matcher) -> bool:
            main = m.match_root
            found = first_gather_input(main)
            if found is None or self.transformation_callback(main):
                return False
            new = self.sink(main, *found)
            for n in new or ():
                self.register_new_node(n)
            return new is not None

        self.register_matcher(Matcher(pattern, type(self).__name__), callback)

    def sink(self, main: Node, index: int, info: GatherInfo) -> list[Node] | None:
        raise NotImplementedError


class GatherSinkingUnaryForward(_Forward):
    """Moves a Gather below a unary elementwise op."""

    TYPES = UNARY_TYPES

    def sink(self, main, index, info):
        if index != 0 or hasattr(main, "axis"):
            return None
        main.input(0).replace_source_output(info.gather.input_value(0))
        main.validate_and_infer_types()
        return [_after_forward(insert_output_gather(main, info.indices, info.axis))]


class GatherSinkingBinaryForward(_Forward):
    """Moves a Gather below a binary op; others get its inverse.

    The other inputs get the inverse permutation on the same axis of the broadcast output
    (inputs of lower rank, or with a 1 there, need none). The gathered input may have a lower
    rank than the output when it is not broadcast along the gathered axis."""

    TYPES = BINARY_TYPES

    def sink(self, main, index, info):
        rank, src_rank = static_rank(main.output(0)), static_rank(main.input_value(index))
        out_shape = static_shape(main.output(0))
        if isinstance(main, PRelu) or out_shape is None or src_rank is None \
                or not info.is_permutation():
            return None
        axis = info.axis + rank - src_rank
        others = [i for i in range(main.get_input_size()) if i != index]
        if out_shape[axis] != info.indices.size or any(static_shape(main.input_value(i)) is None
                                                       for i in others):
            return None
        main.input(index).replace_source_output(info.gather.input_value(0))
        new = []
        for i in others:
            a = aligned_axis(main.input_value(i), axis, rank)
            if a is not None:
                g = gathered(main.input_value(i), info.inverse(), a, main)
                main.input(i).replace_source_output(g)
                if isinstance(g.node, Gather):
                    new.append(g.node)
        main.validate_and_infer_types()
        return new + [_after_forward(insert_output_gather(main, info.indices, axis))]


def _matmul_axes(mm: Node, index: int, rank: int) -> tuple[int, int]:
    """(contracted axis, free axis) of MatMul input ``index`` of rank ``rank``."""
    flip = mm.transpose_a if index == 0 else mm.transpose_b
    k, free = (rank - 1, rank - 2) if index == 0 else (rank - 2, rank - 1)
    return (free, k) if flip else (k, free)


class GatherSinkingMatmulForward(_Forward):
    """Moves a Gather on a MatMul input after it or into weights.

    A Gather on the contracted axis moves to the other input as its inverse (absorbed when
    that input is a Constant), whatever the ranks (a per-frame MatMul of a [1, T, C] map);
    on the free axis of a 2-D input it moves after the MatMul."""

    TYPES = (MatMul,)

    def sink(self, main, index, info):
        ranks = [static_rank(v) for v in main.input_values()]
        if None in ranks or min(ranks) < 2:
            return None
        k, _ = _matmul_axes(main, index, ranks[index])
        if (info.axis == k and not info.is_permutation()) or (info.axis != k and ranks != [2, 2]):
            return None
        main.input(index).replace_source_output(info.gather.input_value(0))
        if info.axis == k:
            other = 1 - index
            ok, _ = _matmul_axes(main, other, ranks[other])
            main.input(other).replace_source_output(gathered(main.input_value(other),
                                                             info.inverse(), ok, main))
            main.validate_and_infer_types()
            return []
        main.validate_and_infer_types()
        return [_after_forward(insert_output_gather(main, info.indices, 0 if index == 0 else 1))]


def _squeezy_reshape(reshape: Node, axis_in: int | None, axis_out: int | None) -> bool:
    """The Reshape keeps a single non-1 dim, the gathered one, in place of 1s."""
    a, b = static_shape(reshape.input_value(0)), static_shape(reshape.output(0))
    if a is None or b is None:
        return False
    ra, rb = [i for i, d in enumerate(a) if d != 1], [i for i, d in enumerate(b) if d != 1]
    return len(ra) == 1 and len(rb) == 1 and (axis_in is None or ra[0] == axis_in) \
        and (axis_out is None or rb[0] == axis_out)


def block_axis(indices: np.ndarray, shape: Sequence[int]) -> tuple[int, np.ndarray] | None:
    """``(k, q)`` when the flat permutation ``indices`` of a tensor of ``shape`` only reorders
    axis ``k``: ``indices[(o*D + d)*B + j] == (o*D + q[d])*B + j`` with ``D = shape[k]`` and
    ``B`` the size of the axes after it (the block-periodic indices of a Transpose that keeps
    the outer axes in place, seen through a flattening Reshape); None otherwise."""
    n = indices.size
    for k, d in enumerate(shape):
        if d == 1:
            continue
        inner = int(np.prod(shape[k + 1:], dtype=np.int64))
        blocks = indices.reshape(n // (d * inner), d, inner)
        q = blocks[0, :, 0] // inner
        outer = np.arange(blocks.shape[0], dtype=np.int64)[:, None, None] * d * inner
        if np.array_equal(blocks,
                          outer + (q * inner)[None, :, None] + np.arange(inner)[None, None, :]):
            return k, q
    return None


def _ones_only_axis(reshape: Node, axis: int) -> int | None:
    """Where gathered ``axis`` lands when ``reshape`` only adds or drops 1s (the other dims
    keep their order); None for any other reshape."""
    src, dst = static_shape(reshape.input_value(0)), static_shape(reshape.output(0))
    if src is None or dst is None or src[axis] == 1:
        return None
    kept_src = [i for i, d in enumerate(src) if d != 1]
    kept_dst = [i for i, d in enumerate(dst) if d != 1]
    if [src[i] for i in kept_src] != [dst[i] for i in kept_dst]:
        return None
    return kept_dst[kept_src.index(axis)]


def _split_axis(reshape: Node, info: GatherInfo) -> tuple[int, np.ndarray] | None:
    """(axis, indices) of the Gather after ``reshape`` when the Reshape keeps the axes before
    and after the gathered one and splits that one into axes of which the permutation
    reorders only one (``block_axis``)."""
    src, dst = static_shape(reshape.input_value(0)), static_shape(reshape.output(0))
    if src is None or dst is None:
        return None
    a, tail = info.axis, len(src) - info.axis - 1
    if len(dst) < len(src) or tuple(dst[:a]) != tuple(src[:a]) or \
            tuple(dst[len(dst) - tail:]) != tuple(src[a + 1:]):
        return None
    found = block_axis(info.indices, dst[a:len(dst) - tail])
    return None if found is None else (a + found[0], found[1])


def _merged_axis(reshape: Node, info: GatherInfo) -> tuple[int, np.ndarray] | None:
    """(axis, indices) of the Gather after ``reshape`` when the Reshape keeps the axes before
    and after a run of axes holding the gathered one and merges that run into one axis (a
    conv net's ``Flatten`` before its FullyConnected head): the permutation of one axis of the
    run is a permutation of the merged axis, by blocks of the axes after it in the run."""
    src, dst = static_shape(reshape.input_value(0)), static_shape(reshape.output(0))
    if src is None or dst is None or len(dst) >= len(src):
        return None
    a, merged = info.axis, len(src) - len(dst) + 1
    for lo in range(max(0, a - merged + 1), a + 1):
        hi = lo + merged
        if hi <= len(src) and tuple(dst[:lo]) == tuple(src[:lo]) and \
                tuple(dst[lo + 1:]) == tuple(src[hi:]):
            run = tuple(src[lo:hi])
            flat = np.arange(int(np.prod(run)), dtype=np.int64).reshape(run)
            return lo, np.take(flat, info.indices, axis=a - lo).reshape(-1)
    return None


class GatherSinkingReshapeForward(_Forward):
    """Moves a Gather below a Reshape that keeps its axis.

    A Gather over the only non-1 axis moves through a Reshape that keeps that axis alone
    (adds or drops 1s), or, for a permutation, through a Reshape that keeps the other axes and
    splits the gathered one into axes of which the permutation reorders one (``block_axis``):
    the Gather then acts on that axis; or through one that merges a run of axes holding the
    gathered one into one axis (``_merged_axis``), where it becomes a permutation of blocks."""

    TYPES = (Reshape, Squeeze, Unsqueeze)

    def sink(self, main, index, info):
        if index != 0:
            return None
        ones_axis = _ones_only_axis(main, info.axis)
        if ones_axis is not None and (not isinstance(main, Reshape) or info.is_permutation()):
            axis, indices = ones_axis, info.indices
        else:
            found = ((_split_axis(main, info) or _merged_axis(main, info))
                     if isinstance(main, Reshape) and info.is_permutation() else None)
            if found is None:
                return None
            axis, indices = found
        main.input(0).replace_source_output(info.gather.input_value(0))
        main.validate_and_infer_types()
        return [_after_forward(insert_output_gather(main, indices, axis))]


class GatherSinkingSplitForward(_Forward):
    """Moves a Gather below a Split on another axis.

    A Gather on an axis other than the split axis moves after a Split/VariadicSplit: every
    output gets the same Gather (named ``<split>.<i>``, taking the output's names)."""

    TYPES = (Split, VariadicSplit)

    def sink(self, main, index, info):
        axis = main.input_value(1).value
        rank = static_rank(main.input_value(0))
        if index != 0 or axis is None or rank is None \
                or int(axis.reshape(-1)[0]) % rank == info.axis:
            return None
        main.input(0).replace_source_output(info.gather.input_value(0))
        main.validate_and_infer_types()
        new = []
        for i, out in enumerate(main.outputs()):
            if not out.consumers():
                continue
            g = gathered(out, info.indices, info.axis).node
            out.replace(g.output(0))
            out.names.clear()   # the output's tensor names now belong to the Gather
            g.friendly_name = f"{main.friendly_name}.{i}"
            copy_runtime_info(main, g)
            new.append(_after_forward(g))
        return new


class GatherSinkingFuse(MatcherPass):
    """Fuses consecutive Gathers on one axis; drops identities.

    ``Gather(Gather(x, i1, a), i2, a)`` -> ``Gather(x, i1[i2], a)``; removed when identity.
    """

    def __init__(self) -> None:
        super().__init__()
        first = wrap_type(Gather, predicate=lambda o: gather_info(o.node) is not None)
        second = wrap_type(Gather, [first, any_input(), any_input()],
                           predicate=lambda o: gather_info(o.node) is not None)

        def callback(m: Matcher) -> bool:
            g2 = m.match_root
            g1 = m.pattern_value_map[first].node
            i1, i2 = gather_info(g1), gather_info(g2)
            if i1 is None or i2 is None or i1.axis != i2.axis or self.transformation_callback(g2):
                return False
            fused = i1.indices[i2.indices]
            x = g1.input_value(0)
            if fused.size == x.partial_shape[i1.axis].get_length() \
                    and np.array_equal(fused, np.arange(fused.size)):
                return replace_output_update_name(g2.output(0), x)
            new = gathered(x, fused, i1.axis).node
            copy_runtime_info([g1, g2], new)
            if gather_sinking_disabled(g2):
                mark_no_gather_sinking(new)
            if not replace_output_update_name(g2.output(0), new.output(0)):
                return False
            self.register_new_node(new)
            return True

        self.register_matcher(Matcher(second, "GatherSinkingFuse"), callback)
