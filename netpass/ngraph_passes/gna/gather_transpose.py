"""Transposes GNA cannot run, next to Reshapes that transpose sinking cannot cross, become
Gathers over the flattened tensor (``flat(transpose(x, order)) == flat(x)[idx]``):

- GatherSinkingTransposeReshapeForward: ``Transpose -> Reshape`` => ``Reshape [1, N] ->
  Gather(idx, axis 1) -> Reshape``; GatherSinkingTransposeReshapeBackward: ``Reshape ->
  Transpose`` likewise. When both keep a batch > 1 in front, the flat shape is ``[batch, -1]``
  and the indices are per sample (so a following MatMul can still absorb them).
- GatherSinkingTranspose: ``flat Gather [-> Reshape] -> Transpose`` (forward) and
  ``Transpose [-> Reshape] -> flat Gather`` (backward) merge into one Gather with combined
  indices (``gather_ids[transpose_ids]`` resp. ``transpose_ids[gather_ids]``).
"""
from __future__ import annotations

from itertools import compress, repeat

import numpy as np

from ...core.boundary import Constant
from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...core.node import Node, Output
from ...core.subgraph import MultiSubGraphOp
from ...ops.indexing import Gather
from ...ops.movement import Reshape, Transpose
from ...passes import MatcherPass
from ...passes.base import ModelPass
from ...pattern import Matcher, any_input, optional, wrap_type
from ..utils import const, make, nested_manager, static_shape, transpose_gather_indexes
from .gather_utils import flat_gather
from .limitations import const_order, is_transpose_supported


def unsupported_transpose(out: Output) -> bool:
    """A Transpose of a constant order and a static input shape that GNA cannot run (the
    order is read last: most Transposes fail a cheaper test first)."""
    shape = static_shape(out.node.input_value(0))
    return shape is not None and not is_transpose_supported(shape) and \
        const_order(out.node) is not None


def _flat_gather_chain(p: MatcherPass, src: Output, indices: np.ndarray, out: Output,
                      nodes: list[Node], batch: int = 1, reshape: Node | None = None) -> bool:
    """``out`` := Reshape(Gather(Reshape(src, [batch, -1]), indices, 1), out shape) (Reshapes
    only where the shape changes); names kept; the new nodes are registered so the same
    traversal sinks the Gather further. Identity indices (a Transpose that only moves 1s, or
    transposes that cancel) leave just the Reshape."""
    if np.array_equal(indices, np.arange(indices.size)):
        if src.shape == out.shape:
            return replace_output_update_name(out, src)
        reshape = make(Reshape, [src, const(np.array(out.shape, np.int64))], special_zero=False)
        copy_runtime_info(nodes, reshape)
        return replace_output_update_name(out, reshape.output(0))
    new = []
    flat_shape = (batch, int(np.prod(src.shape)) // batch)
    if src.shape != flat_shape:  # Reshapes only where the shape changes
        # A Reshape to the flat shape already in the graph is reused as it is (OpenVINO clones it).
        reuse = reshape is not None and tuple(reshape.output(0).shape) == flat_shape
        target = reshape.input_value(1) if reuse else const(np.array(flat_shape, np.int64))
        new.append(make(Reshape, [src, target],
                        special_zero=reshape.special_zero if reshape is not None else False))
        src = new[-1].output(0)
    new.append(make(Gather, [src, const(indices.astype(np.int64)), const(np.array(1, np.int64))]))
    if out.shape != flat_shape:
        new.append(make(Reshape, [new[-1], const(np.array(out.shape, np.int64))],
                        special_zero=False))
    copy_runtime_info(nodes, new)
    if not replace_output_update_name(out, new[-1].output(0)):
        return False
    for n in new:
        p.register_new_node(n)
    return True


def _transpose_indexes(t: Node, out: Output) -> tuple[np.ndarray, int]:
    """Gather indices standing for Transpose ``t`` (then reshaped to ``out``), and the batch
    they apply to: a Transpose and Reshape that keep a batch > 1 in front act per sample."""
    shape, order = static_shape(t.input_value(0)), const_order(t)
    if order[0] == 0 and shape[0] > 1 and out.shape[0] == shape[0]:
        return transpose_gather_indexes(shape[1:], [o - 1 for o in order[1:]]), shape[0]
    return transpose_gather_indexes(shape, order), 1


class GatherSinkingTransposeReshapeForward(MatcherPass):
    """Transpose -> Reshape becomes a Gather of the flat data."""

    def __init__(self) -> None:
        super().__init__()
        transpose = wrap_type(Transpose, [any_input(), wrap_type(Constant)],
                              unsupported_transpose)
        reshape = wrap_type(Reshape, [transpose, any_input()],
                            lambda o: o.partial_shape.is_static)

        def callback(m: Matcher) -> bool:
            r, t = m.match_root, m.pattern_value_map[transpose].node
            if self.transformation_callback(t):
                return False
            ids, batch = _transpose_indexes(t, r.output(0))
            return _flat_gather_chain(self, t.input_value(0), ids, r.output(0), [t, r], batch, r)

        self.register_matcher(Matcher(reshape, "GatherSinkingTransposeReshapeForward"), callback)


class GatherSinkingTransposeReshapeBackward(MatcherPass):
    """Reshape -> Transpose becomes a Gather of the flat data."""

    def __init__(self) -> None:
        super().__init__()
        reshape = wrap_type(Reshape, [any_input(), any_input()],
                            lambda o: o.partial_shape.is_static)
        transpose = wrap_type(Transpose, [reshape, wrap_type(Constant)],
                              unsupported_transpose)

        def callback(m: Matcher) -> bool:
            t, r = m.match_root, m.pattern_value_map[reshape].node
            if self.transformation_callback(t):
                return False
            ids, batch = _transpose_indexes(t, r.input_value(0))
            return _flat_gather_chain(self, r.input_value(0), ids, t.output(0), [r, t], batch)

        self.register_matcher(Matcher(transpose, "GatherSinkingTransposeReshapeBackward"), callback)


def _is_flat_gather(o: Output) -> bool:
    return flat_gather(o.node) is not None


class GatherSinkingTransposeForward(MatcherPass):
    """Flat Gather -> Transpose merge into one Gather."""

    def __init__(self) -> None:
        super().__init__()
        gather = wrap_type(Gather, predicate=_is_flat_gather)
        reshape = optional(Reshape, [gather, any_input()])
        transpose = wrap_type(Transpose, [reshape, wrap_type(Constant)],
                              lambda o: const_order(o.node) is not None
                              and o.partial_shape.is_static)

        def callback(m: Matcher) -> bool:
            t, g = m.match_root, m.pattern_value_map[gather].node
            if self.transformation_callback(t):
                return False
            t_ids = transpose_gather_indexes(static_shape(t.input_value(0)), const_order(t))
            return _flat_gather_chain(self, g.input_value(0), flat_gather(g).indices[t_ids],
                                      t.output(0), [g, t])

        self.register_matcher(Matcher(transpose, "GatherSinkingTransposeForward"), callback)


class GatherSinkingTransposeBackward(MatcherPass):
    """Transpose -> flat Gather merge into one Gather."""

    def __init__(self) -> None:
        super().__init__()
        transpose = wrap_type(Transpose, [any_input(), wrap_type(Constant)],
                              lambda o: const_order(o.node) is not None
                              and o.partial_shape.is_static
                              and o.node.input_value(0).partial_shape.is_static)
        reshape = optional(Reshape, [transpose, any_input()])
        gather = wrap_type(Gather, [reshape, any_input(), any_input()], _is_flat_gather)

        def callback(m: Matcher) -> bool:
            g, t = m.match_root, m.pattern_value_map[transpose].node
            if self.transformation_callback(g):
                return False
            t_ids = transpose_gather_indexes(static_shape(t.input_value(0)), const_order(t))
            return _flat_gather_chain(self, t.input_value(0), t_ids[flat_gather(g).indices],
                                      g.output(0), [t, g])

        self.register_matcher(Matcher(gather, "GatherSinkingTransposeBackward"), callback)


class GatherSinkingTranspose(ModelPass):
    """Merges Transposes into adjacent flat Gathers, both ways.

    Both members start from a flat Gather (and the Gathers the forward one makes come from
    one), so a model holding none is not traversed (a model with bodies is)."""

    def run_on_model(self, model) -> bool:
        if not _may_start(model.cached_order()):
            return False
        manager = nested_manager(self.get_pass_config(), "GatherSinkingTranspose")
        manager.register_pass(GatherSinkingTransposeForward())
        manager.register_pass(GatherSinkingTransposeBackward())
        return manager.run_passes(model)


def _may_start(ops: list[Node]) -> bool:
    """``ops`` hold an op with bodies or a flat Gather. (The Gathers picked out at C level,
    and one whose data has two dims other than 1, or a dynamic one, passed over without
    ``flat_gather``: this looks at every node of the model, and on the GNA flow at every
    Gather of its blocks, none of them flat.)"""
    if any(issubclass(k, MultiSubGraphOp) for k in set(map(type, ops))):
        return True
    for g in compress(ops, map(isinstance, ops, repeat(Gather))):
        data = g._inputs[0]
        ps = data.node._outs[data.index].ps
        if not ps.is_static:
            continue
        wide = 0
        for d in ps.to_shape():
            if d != 1:
                wide += 1
        if wide < 2 and flat_gather(g) is not None:
            return True
    return False
