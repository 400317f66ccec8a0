"""Helpers of the Gather sinking passes: which Gathers they move (1-D constant indices, a
constant axis, static rank), inverse permutations, and moving a Gather across an op."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.boundary import Constant, Result
from ...core.graph_util import copy_runtime_info
from ...core.node import Node, Output
from ...core.rt_info import NonCopyable
from ...ops.indexing import Gather
from ...ops.movement import Reshape, Squeeze, Transpose, Unsqueeze
from ..utils import const, const_value, graph_consumers, static_shape

NO_GATHER_SINKING = "no_gather_sinking"


@dataclass
class GatherInfo:
    gather: Node
    indices: np.ndarray
    axis: int  # normalized against the Gather's data rank

    def is_permutation(self) -> bool:
        dim = self.gather.input_value(0).partial_shape[self.axis]
        return dim.is_static and self.indices.size == dim.get_length() and \
            np.array_equal(np.sort(self.indices), np.arange(self.indices.size))

    def inverse(self) -> np.ndarray:
        return np.argsort(self.indices).astype(np.int64)


def gather_info(node: Node) -> GatherInfo | None:
    # (Inputs read off the node directly: the Gather sinking predicates ask this of every
    # candidate's inputs and consumers, ~20% of those traversals.)
    if not isinstance(node, Gather) or getattr(node, "batch_dims", 0) != 0:
        return None
    ins = node._inputs
    idx_node, axis_node = ins[1].node, ins[2].node
    if not isinstance(idx_node, Constant) or not isinstance(axis_node, Constant):
        return None
    idx, axis = idx_node.value, axis_node.value
    data = ins[0]
    dims = data.node._outs[data.index].ps._dims
    if dims is None or idx.ndim != 1 or axis.size != 1:
        return None
    a = int(axis.item()) % len(dims)
    dim = dims[a]
    if not dim.is_static:
        return None
    indices = idx if idx.dtype == np.int64 else idx.astype(np.int64)
    # negative indices count from the end (a Python min: numpy's costs more on a few items)
    if indices.size and (min(indices.tolist()) if indices.size <= 64 else indices.min()) < 0:
        indices = indices % dim.get_length()
    return GatherInfo(node, indices, a)


def first_gather_input(node: Node, indices=None) -> tuple[int, GatherInfo] | None:
    for i in (range(node.get_input_size()) if indices is None else indices):
        info = gather_info(node.input_value(i).node)
        if info is not None:
            return i, info
    return None


def mark_no_gather_sinking(node: Node) -> None:
    node.rt_info[NO_GATHER_SINKING] = NonCopyable(NO_GATHER_SINKING)


def gather_sinking_disabled(node: Node) -> bool:
    return NO_GATHER_SINKING in node.rt_info


def gathered(value: Output, indices: np.ndarray, axis: int,
             rt_source: Node | None = None) -> Output:
    """``Gather(value, indices, axis)``, computed at once when ``value`` is a Constant; a new
    Gather takes ``rt_source``'s rt_info."""
    v = const_value(value)
    if v is not None:
        return const(np.take(v, indices, axis=axis), value.element_type)
    g = Gather.of(value, const(indices.astype(np.int64)), const(np.array(axis, np.int64)), axis,
                  indices.size)
    if rt_source is not None:
        copy_runtime_info(rt_source, g)
    return g.output(0)


def insert_output_gather(main: Node, indices: np.ndarray, axis: int) -> Node:
    """A Gather after ``main``'s single output; it takes the output's names (as a forward
    Transpose does)."""
    out = main.output(0)
    g = gathered(out, indices, axis).node
    out.replace(g.output(0))
    out.names.clear()
    name = main.friendly_name
    main.friendly_name = g.name
    g.friendly_name = name
    copy_runtime_info(main, g)
    return g


def aligned_axis(value: Output, axis: int, out_rank: int) -> int | None:
    """``axis`` of an ``out_rank`` tensor as an axis of the numpy-broadcast ``value``; None
    when ``value`` does not have that axis or has it as 1 (nothing to gather then)."""
    shape = static_shape(value)
    a = axis - (out_rank - len(shape)) if shape is not None else -1
    return None if shape is None or a < 0 or shape[a] == 1 else a


def consumers_gather(node: Node) -> GatherInfo | None:
    """The common Gather when every consumer of ``node``'s single output is an unmarked Gather
    with the same indices and axis on its data input (``graph_consumers``: a replaced Gather
    something keeps alive is no reader)."""
    if node.get_output_size() != 1:
        return None
    found = None
    for c in graph_consumers(node.output(0)):
        info = gather_info(c.node)
        if info is None or c.index != 0 or gather_sinking_disabled(c.node):
            return None
        if found is not None and (found.axis != info.axis
                                  or not np.array_equal(found.indices, info.indices)):
            return None
        found = found or info
    return found


# Ops post-processing cuts in a chain before an output.
_EDGE_CHAIN = (Reshape, Squeeze, Unsqueeze, Gather, Transpose)


def feeds_outputs(node: Node) -> bool:
    """``node`` feeds only Results, through single-consumer reshapes, Gathers and Transposes
    (a chain post-processing cuts out whole)."""
    cons = graph_consumers(node.output(0))
    while len(cons) == 1 and isinstance(cons[0].node, _EDGE_CHAIN):
        cons = graph_consumers(cons[0].node.output(0))
    return bool(cons) and all(isinstance(c.node, Result) for c in cons)


def remove_gather_consumers(main: Node) -> None:
    """``main``'s Gather consumers read ``main`` instead; ``main`` takes the name of the one
    feeding a Result (else the first's)."""
    name = None
    for c in graph_consumers(main.output(0)):
        g = c.node
        if name is None or any(isinstance(x.node, Result) for x in g.output(0).consumers()):
            name = g.friendly_name
        g.output(0).replace(main.output(0))
    if name is not None:
        main.friendly_name = name


def flat_gather(node: Node) -> GatherInfo | None:
    """A Gather over the only non-1 axis of its data (a reordering of the flat tensor)."""
    info = gather_info(node)
    shape = static_shape(node.input_value(0)) if info is not None else None
    if info is None or shape is None or any(d != 1 for i, d in enumerate(shape) if i != info.axis):
        return None
    return info
