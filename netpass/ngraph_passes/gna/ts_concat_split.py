"""GNA TSConcatForward and TSSplitBackward: a Concat (Split) along its first non-1 dimension
with unsupported Transposes on its inputs (outputs) becomes a flat ``[1, N]`` Concat (Split)
plus one Gather that does all the transposes at once; the Gather then sinks to the model's edge.
"""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_node_update_name
from ...core.node import Node
from ...ops.indexing import Gather
from ...ops.movement import Concat, Reshape, Split, Transpose, VariadicSplit
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, first_valuable, make, static_shape, transpose_gather_indexes
from .limitations import const_order, is_transpose_node_supported


def _unsupported_transpose(node: Node) -> bool:
    return const_order(node) is not None and not is_transpose_node_supported(node) \
        and static_shape(node.input_value(0)) is not None


def _flat(value) -> Node:
    return make(Reshape, [value, const(np.array([1, -1], np.int64))], special_zero=False)


def _concat_applicable(out) -> bool:
    c = out.node
    shape = static_shape(c.output(0))
    if shape is None or any(static_shape(v) is None for v in c.input_values()):
        return False
    axis = c.axis + len(shape) if c.axis < 0 else c.axis
    return axis == first_valuable(shape) and any(_unsupported_transpose(v.node)
                                                 for v in c.input_values())


class TSConcatForward(MatcherPass):
    """Concat of unsupported Transposes -> flat Concat + Gather."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(Concat, predicate=_concat_applicable)

        def callback(m: Matcher) -> bool:
            concat = m.match_root
            if self.transformation_callback(concat):
                return False
            ids, flats, offset = [], [], 0
            for v in concat.input_values():
                src = v.node.input_value(0) if _unsupported_transpose(v.node) else v
                shape = static_shape(src)
                order = const_order(v.node) if src is not v else list(range(len(shape)))
                ids.append(transpose_gather_indexes(shape, order) + offset)
                offset += int(np.prod(shape, dtype=np.int64))
                flats.append(_flat(src))
            flat = make(Concat, flats, axis=1)
            gather = make(Gather,
                          [flat, const(np.concatenate(ids)), const(np.array(1, np.uint8))])
            out = make(Reshape, [gather, const(np.array(concat.output(0).shape, np.int64))],
                       special_zero=False)
            copy_runtime_info(concat, [*flats, flat, gather, out])
            return replace_node_update_name(concat, out)

        self.register_matcher(Matcher(pattern, "GnaTSConcatForward"), callback)


def _split_consumers(split: Node) -> list[Node | None] | None:
    """Per output: its single unsupported-Transpose consumer, or None when it has no Transpose
    consumer; None overall when an output mixes a Transpose with other consumers."""
    found: list[Node | None] = []
    for out in split.outputs():
        cons = out.consumers()
        ts = [c.node for c in cons if isinstance(c.node, Transpose)]
        if ts and (len(cons) != 1 or not _unsupported_transpose(ts[0])):
            return None
        found.append(ts[0] if ts else None)
    return found


def _split_applicable(out) -> bool:
    s = out.node
    shape, axis = static_shape(s.input_value(0)), s.input_value(1).value
    if shape is None or axis is None or any(static_shape(o) is None for o in s.outputs()):
        return False
    axis = int(axis.reshape(-1)[0]) % len(shape)
    if axis != first_valuable(shape):  # (the cheap test first: this runs on every Split)
        return False
    cons = _split_consumers(s)
    return cons is not None and any(c is not None for c in cons)


class TSSplitBackward(MatcherPass):
    """Split into unsupported Transposes -> Gather + flat Split."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type((Split, VariadicSplit), predicate=_split_applicable)

        def callback(m: Matcher) -> bool:
            split = m.match_root
            if self.transformation_callback(split):
                return False
            cons = _split_consumers(split)
            ids, sizes, offset = [], [], 0
            for out, t in zip(split.outputs(), cons):
                shape = out.shape
                order = const_order(t) if t is not None else list(range(len(shape)))
                ids.append(transpose_gather_indexes(shape, order) + offset)
                sizes.append(int(np.prod(shape, dtype=np.int64)))
                offset += sizes[-1]
            # [1, N] (OpenVINO's final TSSplitBackward), no Reshape when the input is [1, N] already
            src, total = split.input_value(0), int(np.sum(sizes))
            flat = src if tuple(static_shape(src)) == (1, total) else make(
                Reshape, [src, const(np.array([1, total], np.int64))], special_zero=False).output(0)
            gather = make(Gather,
                          [flat, const(np.concatenate(ids)), const(np.array(1, np.int64))])
            new = make(VariadicSplit,
                       [gather, const(np.array(1, np.int64)), const(np.array(sizes, np.int64))])
            copy_runtime_info(split, [flat.node, gather, new] if flat is not src else [gather, new])
            for out, t, piece in zip(split.outputs(), cons, new.outputs()):
                target = t.output(0) if t is not None else out
                r = make(Reshape, [piece, const(np.array(target.shape, np.int64))],
                         special_zero=False)
                if t is not None:
                    replace_node_update_name(t, r)
                else:
                    out.replace(r.output(0))
            return True

        self.register_matcher(Matcher(pattern, "GnaTSSplitBackward"), callback)
