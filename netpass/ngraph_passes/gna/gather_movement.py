"""Gather sinking through data movement: Concat, Split along the gathered axis, Transpose and
reductions, and the removal of identity Gathers.

A Gather along the axis a Concat joins (or a Split cuts) is a reordering of the pieces: it is
absorbed into the Concat/Split instead of moved across it. The inputs are cut (VariadicSplit)
where the gathered indices jump, and the new Concat takes the pieces in the gathered order, so
no Gather is left; GNA runs Concat and Split along the first non-1 dimension as memory copies.
A Gather along another axis crosses them like an elementwise op. Across a Transpose a Gather
only changes axis; across a reduction it keeps or (a permutation of a reduced axis, which every
reduction ignores) disappears.
"""
from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence

import numpy as np

from ...core.boundary import Constant
from ...core.dimension import Dimension
from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...core.node import Node, Output, made_up_name
from ...core.shape import PartialShape
from ...ops.base import ArithmeticReductionKeepDims, LogicalReductionKeepDims
from ...ops.elementwise import PRelu
from ...ops.indexing import Gather
from ...ops.movement import Concat, Reshape, Split, Squeeze, Transpose, Unsqueeze, VariadicSplit
from ...passes import MatcherPass
from ...pattern import Matcher, any_input, wrap_type
from ..transpose_sinking.elementwise import BINARY_TYPES, UNARY_TYPES
from ..transpose_sinking.utils import transpose_order
from ..utils import (
    const,
    const_value,
    graph_consumers,
    make,
    reverse_order,
    static_rank,
    static_shape,
)
from .gather_sinking import _after_forward, _Forward
from .gather_sinking_backward import _Backward, takes_shape
from .gather_utils import GatherInfo, flat_gather, gather_info, gathered, insert_output_gather

REDUCTIONS = (ArithmeticReductionKeepDims, LogicalReductionKeepDims)


def runs(indices: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs ``[start, stop)`` of consecutive increasing values in ``indices``."""
    values = indices.tolist()  # (Python ints: numpy scalars made this loop ~10x slower)
    out, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[i - 1] + 1:
            out.append((values[start], values[i - 1] + 1))
            start = i
    return out


def _pieces(value: Output, axis: int, cuts: Sequence[int], rt_source: Node) -> dict[int, Output]:
    """``value`` cut along ``axis`` at ``cuts`` (sorted, with 0 and the size): piece start ->
    piece. One piece: ``value`` itself."""
    if len(cuts) == 2:
        return {cuts[0]: value}
    lengths = [b - a for a, b in zip(cuts, cuts[1:])]
    split = VariadicSplit.of(value, const(np.array(axis, np.int64)),
                             const(np.array(lengths, np.int64)), axis, lengths)
    copy_runtime_info(rt_source, split)
    return {c: split.output(i) for i, c in enumerate(cuts[:-1])}


def reordered(sources: Sequence[Output], axis: int, indices: np.ndarray,
              rt_source: Node) -> list[Output]:
    """The pieces of ``sources`` (joined along ``axis``) that, concatenated, are
    ``gather(concat(sources), indices, axis)``."""
    sizes = [static_shape(s)[axis] for s in sources]
    offsets = list(itertools.accumulate(sizes, initial=0))
    wanted = []      # (source, local start, local stop) per run, split at source borders
    for start, stop in runs(indices):
        while start < stop:
            k = bisect.bisect_right(offsets, start) - 1
            end = min(stop, offsets[k + 1])
            wanted.append((k, start - offsets[k], end - offsets[k]))
            start = end
    cuts: list[set[int]] = [{0, n} for n in sizes]
    for k, s, e in wanted:
        cuts[k] |= {s, e}
    used = {w[0] for w in wanted}
    pieces = [_pieces(src, axis, sorted(c), rt_source) if k in used else {}
              for k, (src, c) in enumerate(zip(sources, cuts))]
    out: list[Output] = []
    for k, s, e in wanted:
        bounds = sorted(c for c in cuts[k] if s <= c < e)
        out.extend(pieces[k][b] for b in bounds)
    return out


def _concat(values: list[Output], axis: int, rt_source: Node) -> Output:
    if len(values) == 1:
        return values[0]
    node = make(Concat, values, axis=axis)
    copy_runtime_info(rt_source, node)
    return node.output(0)


def _static(main: Node) -> bool:
    return all(static_shape(v) is not None for v in main.input_values()) and \
        all(static_shape(o) is not None for o in main.outputs())


class GatherConcatAbsorbBackward(_Backward):
    """A Concat takes in the Gather after it, on its axis.

    ``Gather(Concat(xs, a), idx, a)`` -> ``Concat(pieces of xs in idx order, a)``."""

    TYPES = (Concat,)
    TAKES_GATHER_SHAPE = True

    def sink(self, main, info):
        if not _static(main) or info.axis != main.axis % static_rank(main.output(0)):
            return None
        main.set_arguments(reordered(main.input_values(), info.axis, info.indices, main))
        return []


class GatherConcatAbsorbForward(_Forward):
    """A Concat takes in a Gather on an input, on its axis.

    ``Concat(..., Gather(x, idx, a), ..., a)``: ``x`` cut into the gathered order in place."""

    TYPES = (Concat,)

    def sink(self, main, index, info):
        if not _static(main) or info.axis != main.axis % static_rank(main.output(0)):
            return None
        pieces = reordered([info.gather.input_value(0)], info.axis, info.indices, main)
        main.set_arguments([*main.input_values()[:index], *pieces,
                            *main.input_values()[index + 1:]])
        main.validate_and_infer_types()
        return []


class GatherSinkingConcatBackward(_Backward):
    """Moves a Gather after a Concat, other axis, onto its inputs.

    A Gather after a Concat, on another axis, moves onto every input."""

    TYPES = (Concat,)

    def sink(self, main, info):
        if not _static(main) or info.axis == main.axis % static_rank(main.output(0)):
            return None
        new = []
        for i, v in enumerate(main.input_values()):
            g = gathered(v, info.indices, info.axis, main)
            main.input(i).replace_source_output(g)
            if isinstance(g.node, Gather):
                new.append(g.node)
        return new


class GatherSinkingConcatForward(_Forward):
    """Moves a Gather on a Concat input, other axis, below it.

    A permutation on a Concat input along another axis moves after the Concat; the other
    inputs get the inverse permutation."""

    TYPES = (Concat,)

    def sink(self, main, index, info):
        if not _static(main) or info.axis == main.axis % static_rank(main.output(0)) \
                or not info.is_permutation():
            return None
        new = []
        for i, v in enumerate(main.input_values()):
            if i == index:
                main.input(i).replace_source_output(info.gather.input_value(0))
                continue
            g = gathered(v, info.inverse(), info.axis, main)
            main.input(i).replace_source_output(g)
            if isinstance(g.node, Gather):
                new.append(g.node)
        main.validate_and_infer_types()
        return new + [_after_forward(insert_output_gather(main, info.indices, info.axis))]


class GatherSplitAbsorb(_Forward):
    """A Split takes in the Gather before it, on its axis.

    ``Split(Gather(x, idx, a), a)``: each output is the pieces of ``x`` it takes, cut from
    ``x`` and concatenated, so the Gather disappears."""

    TYPES = (Split, VariadicSplit)

    def sink(self, main, index, info):
        axis_value = const_value(main.input_value(1))
        if index != 0 or axis_value is None or not _static(main):
            return None
        axis = int(axis_value.reshape(-1)[0]) % static_rank(main.input_value(0))
        if axis != info.axis:
            return None
        src = info.gather.input_value(0)
        bounds = np.cumsum([0, *(static_shape(o)[axis] for o in main.outputs())])
        parts = [info.indices[bounds[j]:bounds[j + 1]] for j in range(main.get_output_size())]
        cuts = {0, static_shape(src)[axis]}
        for part in parts:
            for s, e in runs(part):
                cuts |= {s, e}
        pieces = _pieces(src, axis, sorted(cuts), main)
        ordered = sorted(cuts)
        for out, part in zip(main.outputs(), parts):
            if not graph_consumers(out):
                continue
            values = [pieces[c] for s, e in runs(part) for c in ordered if s <= c < e]
            value = _concat(values, axis, main)
            for c in graph_consumers(out):
                c.node.input(c.index).replace_source_output(value)
            if out.names:
                value.names.update(out.names)
                out.names.clear()
        return []


class GatherSinkingTransposeAxisForward(_Forward):
    """Moves a Gather below a Transpose, renumbering its axis.

    ``Transpose(Gather(x, idx, a), order)`` -> ``Gather(Transpose(x, order), idx,
    order.index(a))``: the Gather moves below the Transpose on the axis its data went to."""

    TYPES = (Transpose,)

    def sink(self, main, index, info):
        order = transpose_order(main)
        if index != 0 or order is None:
            return None
        main.input(0).replace_source_output(info.gather.input_value(0))
        main.validate_and_infer_types()
        return [_after_forward(insert_output_gather(main, info.indices,
                                                    reverse_order(order)[info.axis]))]


class GatherSinkingTransposeAxisBackward(_Backward):
    """Moves a Gather above a Transpose, renumbering its axis.

    ``Gather(Transpose(x, order), idx, a)`` -> ``Transpose(Gather(x, idx, order[a]), order)``."""

    TYPES = (Transpose,)
    TAKES_GATHER_SHAPE = True

    def __init__(self) -> None:
        super().__init__()
        # RemoveIdentityGather and GatherConcatAbsorbBackward of the same traversal, when they
        # come first there among the matchers rooted at a Gather (GatherAbsorb sets them): the
        # Gather this step builds above the Transpose is visited right after it, and where
        # the Concat above takes it in, the step does that itself instead of building it.
        self.absorb: tuple[MatcherPass | None, MatcherPass] | None = None

    def sink(self, main, info):
        order = transpose_order(main)
        if order is None or static_rank(main.input_value(0)) is None:
            return None
        axis = order[info.axis]
        if self._absorbed(main.input_value(0), info.indices, axis):
            return []
        g = gathered(main.input_value(0), info.indices, axis, main)
        main.input(0).replace_source_output(g)
        return [g.node] if isinstance(g.node, Gather) else []

    def _absorbed(self, value: Output, indices: np.ndarray, axis: int) -> bool:
        """What the traversal does next to ``Gather(value, indices, axis)`` when it is built
        (its first visit): GatherConcatAbsorbBackward takes it into the Concat ``value``
        comes from, which is then named after it (a made-up name: the Gather is not built).
        Done here where the Gather would be a non-Constant's whose only reader is the
        Transpose, and the matchers that would see it first answer as they did for the Gather
        below the Transpose (RemoveIdentityGather: the same indices on an axis of the same
        size) or cannot match (GatherSinkingFuse: no Gather under it); False: nothing done.
        On the GNA layout blocks this spares a Gather and two Constants per block with a
        channel shuffle (5.5k of each at 100k nodes)."""
        if self.absorb is None:
            return False
        identity, absorb = self.absorb
        concat = value.node
        if not isinstance(concat, Concat) or not absorb.is_enabled() or \
                absorb.pass_config.has_callback(type(absorb)) or \
                identity is not None and identity.is_enabled() and \
                identity.pass_config.has_callback(type(identity)):
            return False
        cons = graph_consumers(value)
        dims = static_shape(value)
        if len(cons) != 1 or concat.get_output_size() != 1 or dims is None or \
                not _static(concat) or axis != concat.axis % len(dims):
            return False
        # (the Gather's shape, as ``Gather.of`` gives it, which the Concat takes)
        d = concat._outs[value.index].ps._dims
        shape = PartialShape.of_dims((*d[:axis], Dimension.of(indices.size), *d[axis + 1:]))
        concat.set_arguments(reordered(concat.input_values(), axis, indices, concat))
        if not takes_shape(concat, shape):
            concat.validate_and_infer_types()
        concat.friendly_name = made_up_name(Gather.type_name)
        return True


def _reduced_axes(main: Node) -> list[int] | None:
    axes, rank = const_value(main.input_value(1)), static_rank(main.input_value(0))
    if axes is None or rank is None:
        return None
    return sorted({int(a) % rank for a in axes.reshape(-1)})


class GatherSinkingReduceForward(_Forward):
    """Moves a Gather below a reduction, or drops it there.

    A Gather before a reduction: on a kept axis it moves after it (renumbered when the
    reduced axes go); a permutation of a reduced axis is dropped (a reduction does not depend
    on the order of what it reduces)."""

    TYPES = REDUCTIONS

    def sink(self, main, index, info):
        axes = _reduced_axes(main)
        if index != 0 or axes is None or (info.axis in axes and not info.is_permutation()):
            return None
        main.input(0).replace_source_output(info.gather.input_value(0))
        main.validate_and_infer_types()
        if info.axis in axes:
            return []
        axis = info.axis if main.keep_dims else info.axis - sum(1 for a in axes if a < info.axis)
        return [_after_forward(insert_output_gather(main, info.indices, axis))]


class GatherSinkingReduceBackward(_Backward):
    """Moves a Gather on a kept axis above a reduction.

    A Gather after a reduction, on a kept axis, moves before it."""

    TYPES = REDUCTIONS

    def sink(self, main, info):
        axes = _reduced_axes(main)
        if axes is None:
            return None
        kept = [a for a in range(static_rank(main.input_value(0))) if main.keep_dims
                or a not in axes]
        axis = kept[info.axis]
        if axis in axes:   # keep_dims: a Gather over a reduced axis of size 1
            return None
        g = gathered(main.input_value(0), info.indices, axis, main)
        main.input(0).replace_source_output(g)
        return [g.node] if isinstance(g.node, Gather) else []


class RemoveIdentityGather(MatcherPass):
    """Removes a Gather that keeps every element in place.

    A Gather whose indices are ``0..n-1`` along its axis is removed."""

    def __init__(self) -> None:
        super().__init__()

        def identity(o: Output) -> bool:
            # (asked of every Gather each Gather sinking traversal visits) Indices that are
            # not a 1-D Constant, or whose first one is above 0 with none below, are no
            # identity whatever ``gather_info`` makes of the rest: told without it.
            idx = o.node._inputs[1].node
            if not isinstance(idx, Constant) or idx.value.ndim != 1:
                return False
            raw = idx.value.tolist()
            if raw and raw[0] > 0 and min(raw) >= 0:
                return False
            info = gather_info(o.node)
            if info is None:
                return False
            dim = info.gather.input_value(0).partial_shape[info.axis]
            size = info.indices.size
            return dim.is_static and dim.get_length() == size and \
                info.indices.tolist() == list(range(size))

        pattern = wrap_type(Gather, [any_input(), any_input(), any_input()],
                            predicate=identity)

        def callback(m: Matcher) -> bool:
            g = m.match_root
            if self.transformation_callback(g):
                return False
            return replace_output_update_name(g.output(0), g.input_value(0))

        self.register_matcher(Matcher(pattern, "RemoveIdentityGather"), callback)


_RESHAPES = (Reshape, Squeeze, Unsqueeze)


def reshaped_flat_gather(value: Output) -> GatherInfo | None:
    """The flat Gather (over its data's only non-1 axis) that ``value`` is, seen through one or
    more single-consumer Reshapes: a reordering of the tensor's memory that elementwise ops
    commute with whatever shape the Reshapes give it."""
    v, through = value, False
    while isinstance(v.node, _RESHAPES) and len(graph_consumers(v)) == 1:
        v, through = v.node.input_value(0), True
    if not through or len(graph_consumers(v)) != 1:
        return None
    return flat_gather(v.node)


def _flat_operand(value: Output, out_shape: Sequence[int], flat_shape: Sequence[int],
                  inverse: np.ndarray, axis: int, rt_source: Node) -> Output | None:
    """``value`` (broadcast to ``out_shape``) in the flat gathered domain: reshaped to
    ``flat_shape`` and permuted by ``inverse``; a Constant is computed at once; None for a
    non-constant that broadcasts."""
    v = const_value(value)
    if v is not None:
        full = np.broadcast_to(v, out_shape).reshape(flat_shape)
        return const(np.take(full, inverse, axis=axis), value.element_type)
    shape = static_shape(value)
    if shape is None or tuple(shape) != tuple(out_shape):
        return None
    r = make(Reshape, [value, const(np.array(flat_shape, np.int64))], special_zero=False)
    copy_runtime_info(rt_source, r)
    return gathered(r.output(0), inverse, axis, rt_source)


class GatherSinkingReshapedForward(_Forward):
    """Elementwise ops run before a flat Gather behind Reshapes.

    An elementwise op reading a flat Gather through Reshapes (``Reshape(Gather(u))``) runs
    on ``u`` instead: ``op(Reshape(Gather(u))) == Reshape(Gather(op(u)))``, the other inputs
    flattened and inversely permuted. The Gather then continues on its way (a Reshape does not
    stop a permutation of the whole tensor)."""

    TYPES = (*UNARY_TYPES, *BINARY_TYPES)

    def __init__(self) -> None:
        MatcherPass.__init__(self)
        pattern = wrap_type(self.TYPES,
                            predicate=lambda o: self._find(o.node) is not None)

        def callback(m: Matcher) -> bool:
            main = m.match_root
            found = self._find(main)
            if found is None or self.transformation_callback(main):
                return False
            new = self.sink(main, *found)
            for n in new or ():
                self.register_new_node(n)
            return new is not None

        self.register_matcher(Matcher(pattern, "GatherSinkingReshapedForward"), callback)

    @staticmethod
    def _find(main: Node) -> tuple[int, GatherInfo] | None:
        if hasattr(main, "axis") or isinstance(main, PRelu) or static_shape(main.output(0)) is None:
            return None
        indices = (0,) if isinstance(main, UNARY_TYPES) or main.get_input_size() == 1 else \
            range(main.get_input_size())
        for i in indices:
            info = reshaped_flat_gather(main.input_value(i))
            if info is not None and info.is_permutation():
                return i, info
        return None

    def sink(self, main, index, info):
        out_shape = static_shape(main.output(0))
        u = info.gather.input_value(0)
        flat_shape = static_shape(u)
        if int(np.prod(out_shape)) != int(np.prod(flat_shape)) or \
                tuple(static_shape(main.input_value(index))) != tuple(out_shape):
            return None
        unary = isinstance(main, UNARY_TYPES) or main.get_input_size() == 1
        others = [] if unary else [i for i in range(main.get_input_size()) if i != index]
        operands = {i: _flat_operand(main.input_value(i), out_shape, flat_shape, info.inverse(),
                                     info.axis, main)
                    for i in others}
        if any(v is None for v in operands.values()):
            return None
        main.input(index).replace_source_output(u)
        new = []
        for i, v in operands.items():
            main.input(i).replace_source_output(v)
            if isinstance(v.node, Gather):
                new.append(v.node)
        main.validate_and_infer_types()
        g = _after_forward(insert_output_gather(main, info.indices, info.axis))
        back = make(Reshape, [g.output(0), const(np.array(out_shape, np.int64))],
                    special_zero=False)
        g.output(0).replace(back.output(0))
        names = g.output(0).names
        if names:
            back.output(0).names.update(names)
            names.clear()
        back.friendly_name, g.friendly_name = g.friendly_name, back.name
        copy_runtime_info(main, back)
        return new + [g, back]
