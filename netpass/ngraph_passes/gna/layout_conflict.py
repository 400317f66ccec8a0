"""Transposes GNA cannot run that the GNA pipeline leaves inside because the graph reads one value
in two layouts, and the warning that names them.

``x + T(f(x))``, where ``T(f(x))`` happens to have ``x``'s shape (NHWC and NCHW of a
[N, 3, 3, 3] map), adds each element of ``x`` to an element of ``f(x)`` from another
position: whichever way the Transpose is sunk, its inverse lands on the other operand, which
comes from the same value. Only a data movement inside the graph lines the two up (a Transpose,
a Gather, or a MatMul with permutation weights). Where ``f`` is the identity and ``x`` a model
input, split_pre_post_processing feeds the main model ``x`` in both layouts (two inputs) and
nothing is left; a value computed inside cannot be fed so.
"""
from __future__ import annotations

import logging
from collections import deque

from ...core.boundary import Constant
from ...core.node import Node
from ...ops.base import BinaryElementwiseArithmetic
from ..utils import graph_consumers
from .limitations import is_transpose_node_supported

log = logging.getLogger("netpass.gna")


def _ancestors(node: Node) -> set[Node]:
    """``node`` and every op it reads, Constants left out."""
    seen: set[Node] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen or isinstance(n, Constant):
            continue
        seen.add(n)
        stack.extend(v.node for v in n.input_values())
    return seen


def _nearest_common(node: Node, ancestors: set[Node]) -> Node | None:
    """The first op of ``ancestors`` met walking up from ``node`` (breadth first)."""
    seen: set[Node] = set()
    queue = deque([node])
    while queue:
        n = queue.popleft()
        if n in seen or isinstance(n, Constant):
            continue
        if n in ancestors:
            return n
        seen.add(n)
        queue.extend(v.node for v in n.input_values())
    return None


def layout_conflict(transpose: Node) -> tuple[Node, Node] | None:
    """(op, source): an elementwise ``op`` reading ``transpose`` also reads, on another
    input, a value computed from ``source``, which ``transpose`` reads too. None when no
    consumer of ``transpose`` does."""
    ancestors: set[Node] | None = None
    for c in transpose.output(0).consumers():
        op = c.node
        if not isinstance(op, BinaryElementwiseArithmetic):
            continue
        if ancestors is None:
            ancestors = _ancestors(transpose.input_value(0).node)
        for i, v in enumerate(op.input_values()):
            source = None if i == c.index else _nearest_common(v.node, ancestors)
            if source is not None:
                return op, source
    return None


def warn_layout_conflicts(transposes: list[Node]) -> set[Node]:
    """Log a warning for each Transpose of ``transposes`` (left inside, GNA cannot run them)
    that a layout conflict keeps there; returns those Transposes."""
    warned: set[Node] = set()
    for t in transposes:
        if is_transpose_node_supported(t):
            continue
        conflict = layout_conflict(t)
        if conflict is None:
            continue
        op, source = conflict
        log.warning(
            "GNA pipeline: Transpose '%s' of %s stays inside the graph: %s '%s' joins it with "
            "a value computed from '%s', which the Transpose reads too, in another layout; "
            "only a data movement lines the two up (docs/transformations.md, 'One value in two "
            "layouts')", t.friendly_name, list(t.input_value(0).partial_shape.to_shape()),
            op.type_name, op.friendly_name, source.friendly_name)
        warned.add(t)
    return warned


def warn_interior_layout_ops(ops: list[Node], warned: set[Node]) -> None:
    """Log a warning for each layout op of ``ops`` (Transposes GNA cannot run and Gathers left
    inside a static graph) that ``warn_layout_conflicts`` did not explain: no sinking rule took
    it to the model's edge or into weights (a real data reorder between two layers, as a
    2-D conv's NHWC map reshaped to a 1-D conv's channels), so the model is not one GNA runs
    whole; its outputs are still exact. Integer data (shape arithmetic: ShapeOf, Gather,
    Concat into a Reshape's target, which constant folding or the host computes) is not GNA's
    to run: no warning."""
    for n in ops:
        data = n.input_value(0)
        if n in warned or not data.partial_shape.is_static or not data.element_type.is_real:
            continue
        shape = data.partial_shape
        # (graph_consumers: a node a rewrite replaced may still be listed among the readers)
        readers = ", ".join(f"{c.node.type_name} '{c.node.friendly_name}'"
                            for c in graph_consumers(n.output(0)))
        source = n.input_value(0).node
        log.warning(
            "GNA pipeline: %s '%s' of %s stays inside the graph, between %s '%s' and %s: no "
            "transpose or gather sinking rule moves it to the model's edge or into weights, and "
            "GNA cannot run it (netpass check --target gna lists what is left)",
            n.type_name, n.friendly_name, list(shape.to_shape()), source.type_name,
            source.friendly_name, readers or "nothing")
