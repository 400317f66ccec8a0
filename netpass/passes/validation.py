"""Per-pass validation: the contract a pass keeps, checked from what the pass changed.

After a pass, a Manager with per-pass validation on checks, from the pass's
:class:`~netpass.core.changes.ChangeLog`:

1. **Inference**: the nodes the pass left stale are re-inferred (an input rewired to a value
   of another element type, shape or known value, an attribute set, a consumer that read a
   node before the pass re-inferred it in place with another result), and from them every
   consumer whose inputs changed: a stale
   shape the pass left is pushed down to the outputs, and a node that no longer fits its
   inputs fails here. A rewrite that keeps the shapes where it rewires (most do) leaves
   nothing to re-infer.
   A node the pass re-inferred in place itself is up to date and only linted.
2. **Invariants** of those nodes (``lint`` restricted to them): every input listed among its
   producer's consumers and no stale consumer, a known element type; no Parameter the model
   does not have among the values the pass rewired inputs to; the model's own input and output
   lists.
3. **Interface**: the model's inputs and outputs keep their names, element types and shapes
   (the new shape must be compatible with the old one: refining ``?`` to 4 is fine, 4 to 3 is
   not), unless the pass declares ``changes_model_io = True``.

The cost is that of the nodes the pass touched, not of the model: a pass rewriting a few
nodes of a large model is validated in microseconds. ``Validate`` (and ``netpass.core.lint``)
still check the whole graph.
"""
from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..core.boundary import Parameter, Result
from ..core.changes import ChangeLog
from ..core.model import parameter_name, result_name
from ..core.node import Node
from ..errors import LintError, PassValidationError, ShapeInferenceError

if TYPE_CHECKING:
    from ..core.model import Model

# Re-inferences of one node in one validation beyond which inference is taken not to settle
# (a cycle the pass created feeds a node its own output).
MAX_REINFERENCES = 64


class Port(NamedTuple):
    """One model input or output as the interface check sees it."""

    name: str | None
    element_type: Any
    partial_shape: Any


class Interface(NamedTuple):
    """A model's inputs and outputs: names, element types, partial shapes."""

    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]

    @classmethod
    def of(cls, model: Model) -> Interface:
        ins = tuple(Port(parameter_name(p), p._outs[0].et, p._outs[0].ps)
                    for p in model._parameters)
        outs = []
        for r in model._results:
            src = r._inputs[0]
            port = src.node._outs[src.index]
            # An output named by nobody (no Result name, no tensor name) is called after its
            # producer, which a rewrite replaces: that name is not the interface's.
            name = result_name(r) if r._friendly is not None or port.names else None
            outs.append(Port(name, port.et, port.ps))
        return cls(ins, tuple(outs))

    def differences(self, after: Interface) -> list[str]:
        """How ``after`` breaks this interface, in words (empty when it keeps it)."""
        problems: list[str] = []
        for kind, old, new in (("input", self.inputs, after.inputs),
                               ("output", self.outputs, after.outputs)):
            if len(old) != len(new) or any(
                    a.name is not None and a.name != b.name for a, b in zip(old, new)):
                problems.append(f"model {kind}s {[p.name for p in old]} became "
                                f"{[p.name for p in new]}")
                continue
            for i, (a, b) in enumerate(zip(old, new)):
                label = f"'{a.name}'" if a.name is not None else str(i)
                if a.element_type is not b.element_type:
                    problems.append(f"{kind} {label} element type {a.element_type} became "
                                    f"{b.element_type}")
                if not a.partial_shape.compatible(b.partial_shape):
                    problems.append(f"{kind} {label} shape {a.partial_shape} became "
                                    f"{b.partial_shape}")
        return problems


def check_interface(pass_name: str, before: Interface, model: Model) -> None:
    """Raise :class:`PassValidationError` when ``model``'s inputs or outputs differ from
    ``before``."""
    problems = before.differences(Interface.of(model))
    if problems:
        raise PassValidationError(
            pass_name, message=f"pass '{pass_name}' changed the model's interface: "
            + "; ".join(problems) + " (a pass that means to sets changes_model_io = True)")


def validate_changes(pass_name: str, model: Model, log: ChangeLog) -> int:
    """Re-infer and lint what ``log`` recorded (checks 1 and 2 of the module doc); returns the
    number of re-inferences. Raises :class:`PassValidationError` naming the pass and node."""
    in_graph = _InModel(model)
    seeds = [n for n in log.stale_nodes() if in_graph(n)]
    seeds.extend(n for n in log.stale_readers() if in_graph(n))
    try:
        checked = _reinfer(seeds, in_graph)
    except ShapeInferenceError as e:
        raise PassValidationError(pass_name, e, e.node) from e
    seen = {id(n) for n in checked}
    # (the refreshed nodes are asked whether they are in the model as they are linted: one
    # fetch of each from memory, not two, for the tens of thousands after a sinking stage)
    linted = checked + [n for n in log.refreshed_nodes() if id(n) not in seen]
    # (only the Parameters among the sources are linted: the Constants rewired in, thousands
    # after a sinking stage, are not asked whether they are in the model)
    problems = _lint_nodes(model, linted, [n for n in log.sources()
                                           if isinstance(n, Parameter) and in_graph(n)],
                           in_graph)
    if problems:
        lint_error = LintError(problems)
        raise PassValidationError(pass_name, lint_error) from lint_error
    return len(checked)


def _consumers(node: Node) -> list[Any]:
    return [inp for i in range(len(node._outs)) for inp in node.output(i).consumers()]


def _port_state(node: Node) -> list[tuple[Any, ...]]:
    return [(p.et, p.ps, p.val, p.pval) for p in node._outs]


def _same_state(before: list[tuple[Any, ...]], node: Node) -> bool:
    outs = node._outs
    if len(before) != len(outs):
        return False
    for (et, ps, val, pval), port in zip(before, outs):
        if port.et is not et or not (port.ps is ps or port.ps == ps) or port.pval != pval:
            return False
        new = port.val
        if new is not val and (new is None or val is None or new.shape != val.shape
                               or new.dtype != val.dtype or not np.array_equal(new, val)):
            return False
    return True


def _reinfer(seeds: list[Node], in_graph: _InModel) -> list[Node]:
    """Re-infer ``seeds``, then the consumers (still in the model: a node a rewrite dropped but
    someone still holds stays among its producers' consumers) of every node whose outputs
    changed; returns the nodes re-inferred (each once)."""
    queued: set[int] = set()
    queue: collections.deque[Any] = collections.deque()
    for n in seeds:  # a node reading several re-inferred values is listed once per value
        if id(n) not in queued:
            queued.add(id(n))
            queue.append(n)
    counts: dict[int, int] = {}
    done: dict[int, Node] = {}
    while queue:
        node = queue.popleft()
        key = id(node)
        queued.discard(key)
        count = counts[key] = counts.get(key, 0) + 1
        if count > MAX_REINFERENCES:
            raise ShapeInferenceError("shape inference does not settle (does the graph have a "
                                      "cycle through this node?)", node)
        before = _port_state(node)
        try:
            node._infer()
        except ShapeInferenceError:
            # A node the model does not reach, that something else keeps alive with a consumer
            # of its own, may not fit the inputs a rewrite left it: not the model's problem.
            if in_graph.reaches_output(node):
                raise
            continue
        done[key] = node
        if _same_state(before, node):
            continue
        for inp in _consumers(node):
            c = inp.node
            if id(c) not in queued and in_graph(c):
                queued.add(id(c))
                queue.append(c)
    return list(done.values())


class _InModel:
    """Whether a recorded node is part of ``model``: it has live consumers, or it is one of
    the model's Results, sinks or Parameters (a node a rewrite dropped has none of these)."""

    def __init__(self, model: Model) -> None:
        self.roots = {id(n) for n in (*model._results, *model._sinks, *model._parameters)}
        self.outputs = {id(n) for n in (*model._results, *model._sinks)}

    def reaches_output(self, node: Node) -> bool:
        """Whether a path of consumers leads from ``node`` to one of the model's Results or
        sinks (exact, and as costly as the walk: used only where the cheap test is unsure)."""
        seen, stack = {id(node)}, [node]
        while stack:
            n = stack.pop()
            if id(n) in self.outputs:
                return True
            for port in n._outs:
                for r in port.cons.values():
                    c = r()
                    if c is not None and id(c) not in seen:
                        seen.add(id(c))
                        stack.append(c)
        return False

    def __call__(self, node: Node) -> bool:
        if id(node) in self.roots:
            return True
        for port in node._outs:
            for r in port.cons.values():
                if r() is not None:
                    return True
        return False


def _lint_nodes(model: Model, nodes: list[Node], sources: list[Node],
                in_graph: _InModel | None = None) -> list[str]:
    """``lint``'s per-node invariants on ``nodes`` (those ``in_graph`` says are in the model,
    when given), the Parameters among ``sources`` (values rewired in) and the model's input
    and output lists. The entries of freed consumers it meets in the nodes' consumer tables
    are dropped (as ``Output.consumers`` drops them: no consumer changes)."""
    problems: list[str] = []
    params = {id(p) for p in model._parameters}
    for p in sources:
        if isinstance(p, Parameter) and id(p) not in params:
            users = ", ".join(f"{i.node.type_name} '{i.node.friendly_name}'" for i in _consumers(p))
            problems.append(f"Parameter '{p.friendly_name}' is not a model parameter but feeds "
                            f"{users}")
    # (Runs on every node a validated pass touched: plain loops, messages only on failure.)
    for node in nodes:
        if in_graph is not None and not in_graph(node):
            continue
        me = id(node)
        for i, src in enumerate(node._inputs):
            producer = src.node
            outs = producer._outs
            if src.index >= len(outs):
                problems.append(f"{node.type_name} '{node.friendly_name}' input {i} reads missing "
                                f"output {src.index} of '{producer.friendly_name}'")
            else:
                ref = outs[src.index].cons.get((me, i))
                if ref is None or ref() is not node:
                    problems.append(f"{node.type_name} '{node.friendly_name}' input {i} is not "
                                    f"listed among the consumers of '{producer.friendly_name}'")
        for k, port in enumerate(node._outs):
            dead = None
            for key, ref in port.cons.items():
                c = ref()
                if c is None:
                    dead = dead or []
                    dead.append(key)
                    continue
                ins = c._inputs
                at = key[1]
                read = ins[at] if at < len(ins) else None
                if read is None or read.node is not node or read.index != k:
                    problems.append(f"'{node.friendly_name}' lists a stale consumer "
                                    f"'{c.friendly_name}':{at}")
            if dead:
                # A freed consumer's entry, dropped as ``Output.consumers`` drops it: the
                # sinking stages free a Transpose per step, and the walks after them (the
                # next stages' consumer tests, the rescue's shadow) passed over ~60k such
                # entries at 100k nodes.
                table = port.cons
                for key in dead:
                    del table[key]
            if port.et.name == "dynamic" and not isinstance(node, Result):
                problems.append(f"{node.type_name} '{node.friendly_name}' output {k} "
                                "has no element type")
    for r in model._results:
        if not isinstance(r, Result):
            problems.append(f"model result {r!r} is not a Result")
    for p in model._parameters:
        if not isinstance(p, Parameter):
            problems.append(f"model parameter {p!r} is not a Parameter")
    for kind, names in (("output", model.output_names), ("input", model.input_names)):
        if len(set(names)) != len(names):
            problems.append(f"model {kind} names are not unique: {names}")
    return problems


def validate_model(model: Model) -> None:
    """The whole-model check (the ``Validate`` pass): shape inference over every node, then
    :func:`netpass.core.lint`."""
    from ..core.graph_util import lint
    model.validate_nodes_and_infer_types()
    lint(model)


__all__ = ["Interface", "Port", "check_interface", "validate_changes", "validate_model"]
