"""Backward members of the Gather sinking group: a Gather below an op (all of whose consumers
are that same Gather) moves above it."""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ...core.boundary import Constant
from ...core.graph_util import copy_runtime_info
from ...core.node import Node
from ...core.shape import PartialShape
from ...ops.elementwise import PRelu
from ...ops.indexing import Gather
from ...ops.matmul import MatMul
from ...ops.movement import Reshape, Split, Squeeze, Unsqueeze, VariadicSplit
from ...passes import MatcherPass
from ...pattern import Matcher, any_input, binds, wrap_type
from ..transpose_sinking.elementwise import BINARY_TYPES, UNARY_TYPES
from ..utils import (
    const,
    first_valuable,
    graph_consumers,
    make,
    static_rank,
    static_shape,
)
from .gather_sinking import _matmul_axes, _squeezy_reshape
from .gather_utils import (
    GatherInfo,
    aligned_axis,
    consumers_gather,
    gather_info,
    gather_sinking_disabled,
    gathered,
    remove_gather_consumers,
)


class _Backward(MatcherPass):
    TYPES: ClassVar[tuple[type[Node], ...]] = ()
    # ``sink`` makes the op compute what the Gather below it did, on the op's own output
    # (absorbed into a Concat, moved above a Transpose): the op takes the Gather's shape
    # instead of being inferred again (a Concat of many pieces), see ``takes_gather_shape``.
    TAKES_GATHER_SHAPE: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        # The predicate's Gather, bound in the match for the callback (gone with the match:
        # a cache of the pass's own kept the replaced Gather alive, among its producers'
        # consumers, where the next match saw it as a reader).
        gathered_consumers = binds(lambda o: consumers_gather(o.node), "gathered_consumers")
        main_p = wrap_type(self.TYPES, predicate=gathered_consumers)
        root = wrap_type(Gather,
                         [main_p, wrap_type(Constant), wrap_type(Constant)])

        def callback(m: Matcher) -> bool:
            main = m.pattern_value_map[main_p].node
            info: GatherInfo | None = m.symbols.get(gathered_consumers)
            if info is None or self.transformation_callback(main):
                return False
            new = self.sink(main, info)
            if new is None:
                return False
            if not (self.TAKES_GATHER_SHAPE and takes_gather_shape(main, info.gather)):
                main.validate_and_infer_types()
            remove_gather_consumers(main)
            for n in new:
                self.register_new_node(n)
            return True

        self.register_matcher(Matcher(root, type(self).__name__), callback)

    def sink(self, main: Node, info: GatherInfo) -> list[Node] | None:
        """Put the Gather on ``main``'s inputs; return the new Gathers (None: not applicable)."""
        raise NotImplementedError


def takes_gather_shape(main: Node, gather: Node) -> bool:
    """Re-infer ``main``, now computing what ``gather`` did, by giving it ``gather``'s shape:
    when that is static, of rank >= 2 (no partial values) and an input of ``main`` has no
    known value (nothing to compute), which is then what inference gives. False: nothing
    done."""
    return takes_shape(main, gather._outs[0].ps)


def takes_shape(main: Node, ps: PartialShape) -> bool:
    """``takes_gather_shape`` with the Gather's shape ``ps`` (a step that does not build the
    Gather it stands for)."""
    if not ps.is_static or len(ps) < 2 or \
            all(src.node._outs[src.index].val is not None for src in main._inputs):
        return False
    main.set_inferred_shapes([ps])
    return True


def _gather_inputs(main: Node, plan: dict[int, int], info: GatherInfo) -> list[Node]:
    new: list[Node] = []
    for i, axis in plan.items():
        g = gathered(main.input_value(i), info.indices, axis, main)
        main.input(i).replace_source_output(g)
        if isinstance(g.node, Gather):
            new.append(g.node)
    return new


class GatherSinkingUnaryBackward(_Backward):
    """Moves a Gather above a unary elementwise op."""

    TYPES = UNARY_TYPES

    def sink(self, main, info):
        return None if hasattr(main, "axis") else _gather_inputs(main, {0: info.axis}, info)


class GatherSinkingBinaryBackward(_Backward):
    """Moves a Gather above a binary op, onto the inputs with its axis.

    An input 1 along the axis broadcasts and takes no Gather; when no input has the axis and
    the Gather changes its size (indices [0, 0] of a 1-long axis), the Gather stays: nothing
    would carry the new size."""

    TYPES = BINARY_TYPES

    def sink(self, main, info):
        rank = static_rank(main.output(0))
        if isinstance(main, PRelu) or rank is None or any(static_shape(v) is None
                                                            for v in main.input_values()):
            return None
        plan = {i: aligned_axis(v, info.axis, rank) for i, v in enumerate(main.input_values())}
        plan = {i: a for i, a in plan.items() if a is not None}
        if not plan and static_shape(info.gather.output(0)) != static_shape(main.output(0)):
            return None  # (every input broadcasts along the axis: none carries the new size)
        return _gather_inputs(main, plan, info)


class GatherSinkingMatmulBackward(_Backward):
    """Moves a Gather on a MatMul output into its inputs.

    A Gather on a MatMul output's row (column) axis selects rows of A (columns of B); with a
    constant B this is absorbed into the weights."""

    TYPES = (MatMul,)

    def sink(self, main, info):
        ranks = [static_rank(v) for v in main.input_values()]
        if ranks != [2, 2]:
            return None
        index = 0 if info.axis == 0 else 1
        _, free = _matmul_axes(main, index, 2)
        return _gather_inputs(main, {index: free}, info)


class GatherSinkingReshapeBackward(_Backward):
    """Moves a Gather above a Reshape that keeps its axis."""

    TYPES = (Reshape, Squeeze, Unsqueeze)

    def sink(self, main, info):
        if not _squeezy_reshape(main, None, info.axis):
            return None
        out_shape = list(main.output(0).shape)
        new = _gather_inputs(main, {0: first_valuable(main.input_value(0).shape)}, info)
        if isinstance(main, Reshape):  # the gathered dim may change size
            out_shape[info.axis] = info.indices.size
            main.input(1).replace_source_output(const(np.array(out_shape, np.int64)))
        return new


class GatherSinkingSplitBackward(MatcherPass):
    """Gathers on a Split's outputs -> one Gather before it.

    - along the split axis: one Gather (the pieces' indices, offset) before a VariadicSplit
      with the gathered lengths;
    - along another axis, the same Gather on every used output: that Gather before the split.
    """

    def __init__(self) -> None:
        super().__init__()
        split_p = wrap_type((Split, VariadicSplit),
                            predicate=lambda o: self._same_axis_plan(o.node) is not None
                            or self._other_axis_plan(o.node) is not None)
        # Rooted at the Gather, so that a Gather this pass moves above one Split meets the next
        pattern = wrap_type(Gather, [split_p, any_input(), any_input()])

        def callback(m: Matcher) -> bool:
            split = m.pattern_value_map[split_p].node
            if self.transformation_callback(split):
                return False
            other = self._other_axis_plan(split)
            if other is not None:
                g = gathered(split.input_value(0), other.indices, other.axis, split)
                split.input(0).replace_source_output(g)
                split.validate_and_infer_types()
                for out in split.outputs():
                    for c in graph_consumers(out):
                        c.node.output(0).replace(out)
                if isinstance(g.node, Gather):
                    self.register_new_node(g.node)
                return True
            plan = self._same_axis_plan(split)
            if plan is None:
                return False
            axis, gathers = plan
            ids, lengths, offset = [], [], 0
            for out, g in zip(split.outputs(), gathers):
                n = out.shape[axis]
                ids.append((g.indices if g is not None else np.arange(n)) + offset)
                lengths.append(ids[-1].size)
                offset += n
            g = gathered(split.input_value(0), np.concatenate(ids), axis)
            new = make(VariadicSplit,
                       [g, const(np.array(axis, np.int64)), const(np.array(lengths, np.int64))])
            new.friendly_name = split.friendly_name
            copy_runtime_info(split, [g.node, new])
            for out, gi, piece in zip(split.outputs(), gathers, new.outputs()):
                (gi.gather.output(0) if gi is not None else out).replace(piece)
            if isinstance(g.node, Gather):
                self.register_new_node(g.node)
            return True

        self.register_matcher(Matcher(pattern, "GatherSinkingSplitBackward"), callback)

    @staticmethod
    def _split_axis(split: Node) -> int | None:
        axis = split.input_value(1).value
        rank = static_rank(split.input_value(0))
        if axis is None or rank is None or any(static_shape(o) is None for o in split.outputs()):
            return None
        return int(axis.reshape(-1)[0]) % rank

    @classmethod
    def _same_axis_plan(cls, split: Node):
        axis = cls._split_axis(split)
        if axis is None:
            return None
        gathers = []
        for out in split.outputs():
            infos = [gather_info(c.node) for c in graph_consumers(out)]
            known = [i for i in infos if i is not None]
            if known and (len(infos) != 1 or known[0].axis != axis
                          or gather_sinking_disabled(known[0].gather)):
                return None
            gathers.append(infos[0] if infos and infos[0] is not None else None)
        return (axis, gathers) if any(g is not None for g in gathers) else None

    @classmethod
    def _other_axis_plan(cls, split: Node) -> GatherInfo | None:
        """The Gather every consumer of every used output is, on one axis other than the
        split axis (unused outputs need none)."""
        axis = cls._split_axis(split)
        if axis is None:
            return None
        found = None
        for out in split.outputs():
            for c in graph_consumers(out):
                info = gather_info(c.node)
                if info is None or c.index != 0 or info.axis == axis \
                        or gather_sinking_disabled(c.node):
                    return None
                if found is not None and (found.axis != info.axis
                                          or not np.array_equal(found.indices, info.indices)):
                    return None
                found = found or info
        return found
