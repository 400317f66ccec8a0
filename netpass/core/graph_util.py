"""Graph mutation helpers with OpenVINO's naming and rt_info rules, and the ``lint`` checker."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..errors import LintError, NetpassError, ShapeInferenceError, describe_node
from .boundary import Constant, Parameter, Result
from .node import Node, Output, as_output
from .rt_info import RuntimeAttribute
from .subgraph import MultiSubGraphOp

if TYPE_CHECKING:
    from .model import Model


def replace_node(target: Node, replacement: Node | Sequence[Output],
                 output_order: Sequence[int] | None = None) -> None:
    """Rewire every consumer of ``target`` to ``replacement`` (a node or one Output per output).

    Friendly names are not touched; tensor names move with ``Output.replace``.
    """
    if isinstance(target, Result):
        raise NetpassError(f"replace_node: cannot replace Result '{target.friendly_name}'")
    if isinstance(replacement, Node):
        n = target.get_output_size()
        if replacement.get_output_size() != n:
            raise NetpassError(
                f"replace_node: {target.type_name} '{target.friendly_name}' has {n} outputs, "
                f"replacement {replacement.type_name} has {replacement.get_output_size()}")
        order = list(output_order) if output_order is not None else list(range(n))
        repl = [replacement.output(order[i]) for i in range(n)]
    else:
        repl = [as_output(r) for r in replacement]
        if len(repl) != target.get_output_size():
            raise NetpassError("replace_node: need one replacement output per target output")
    for i, r in enumerate(repl):
        target.output(i).replace(r)


def replace_output_update_name(output: Output, replacement: Output) -> bool:
    """Replace ``output`` by ``replacement``; when ``output`` feeds a Result, the replacement's
    node takes the old producer's friendly name so the model output keeps its name.

    Returns False and changes nothing (OpenVINO's rule) when ``output`` feeds a Result and the
    replacement's node cannot take that name: it has several outputs (or the old producer
    has), it is a Parameter (its name is a model input's), or it already feeds a Result. A
    callback must then return False too (or use :func:`replace_output_keep_names`, which
    always succeeds).
    """
    replacement = as_output(replacement)
    if any(isinstance(c.node, Result) for c in output.consumers()):
        rnode = replacement.node
        if (output.node.get_output_size() != 1 or rnode.get_output_size() != 1
                or isinstance(rnode, Parameter)
                or any(isinstance(c.node, Result) for c in replacement.consumers())):
            return False
        rnode.friendly_name = output.node.friendly_name
    output.replace(replacement)
    copy_runtime_info([replacement.node, output.node], replacement.node)
    return True


def replace_node_update_name(target: Node, replacement: Node) -> bool:
    """``replace_node`` + the replacement takes the target's friendly name and rt_info.

    Returns False and changes nothing (OpenVINO's rule) when the replacement's first input is
    a Parameter and the target feeds a Result: folding ``Parameter -> A -> B -> Result`` into
    ``Parameter -> C -> Result`` is refused. A callback must then return False (a callback
    returning True after a refusal is reported by per-pass validation), or use
    :func:`replace_node_keep_names`, which always succeeds.
    """
    if (replacement.get_input_size() and isinstance(replacement.input_value(0).node, Parameter)
            and any(isinstance(c.node, Result) for o in target.outputs() for c in o.consumers())):
        return False
    replace_node(target, replacement)
    replacement.friendly_name = target.friendly_name
    copy_runtime_info(target, replacement)
    return True


def copy_runtime_info(sources: Node | Iterable[Node], targets: Node | Iterable[Node]) -> None:
    """Merge the copyable rt_info of ``sources`` into every target (OpenVINO's rules).

    An attribute held by one source is copied; held by several, RuntimeAttributes merge and
    plain values are kept only when equal. Non-copyable attributes and ``opset`` never move.
    Constant inputs of a target with empty rt_info receive the same attributes.
    """
    merged: dict[Any, Any] = {}
    if isinstance(sources, Node):
        # One source (most rewrites): its copyable attributes, nothing to merge.
        if not sources._rt:
            return
        for k, v in sources._rt.items():
            if k == "opset" or (isinstance(v, RuntimeAttribute) and not v.is_copyable()):
                continue
            merged[k] = v
    else:
        gathered: dict[str, list[Any]] = {}
        for s in cast("Iterable[Node]", sources):
            if not s._rt:
                continue
            for k, v in s._rt.items():
                if k == "opset" or (isinstance(v, RuntimeAttribute) and not v.is_copyable()):
                    continue
                gathered.setdefault(k, []).append(v)
        for k, values in gathered.items():
            first = values[0]
            if len(values) == 1:
                merged[k] = first
            elif isinstance(first, RuntimeAttribute):
                m = first.merge(values[1:])
                if m is not None:
                    merged[k] = m
            elif all(v == first for v in values[1:]):
                merged[k] = first
    if not merged:
        return
    tgts = (targets,) if isinstance(targets, Node) else list(targets)
    extra = []
    for t in tgts:
        for src in t._inputs:
            n = src.node
            if isinstance(n, Constant) and not n._rt:
                extra.append(n)
    for t in (*tgts, *extra):
        rt = t._rt
        if rt is None:
            t._rt = dict(merged)
        else:
            rt.update(merged)


def name_clash_problems(model: Model) -> list[str]:
    """Inputs (outputs) of ``model`` that share a name, each clash naming both nodes: feeds
    and results are matched by name, so one of the two could not be fed (its result would
    be dropped)."""
    problems = []
    for kind, names, nodes in (("input", model.input_names, model.parameters),
                               ("output", model.output_names, model.results)):
        seen: dict[str, int] = {}
        for i, (name, node) in enumerate(zip(names, nodes)):
            if name in seen:
                j = seen[name]
                problems.append(f"model {kind}s {j} and {i} share the name '{name}' "
                                f"({describe_node(nodes[j])} and {describe_node(node)})")
            seen.setdefault(name, i)
    return problems


def check_unique_names(model: Model) -> None:
    """Raise LintError where two inputs or two outputs of ``model`` share a name (what
    :func:`name_clash_problems` lists)."""
    problems = name_clash_problems(model)
    if problems:
        raise LintError(problems)


def lint_problems(model: Model) -> list[str]:
    """Invariant violations of ``model``; empty when the graph is well formed."""
    problems: list[str] = []
    try:
        ops = model.get_ordered_ops()
    except NetpassError as e:
        return [str(e)]
    params = set(model.parameters)
    names: dict[str, Node] = {}
    in_graph = set(ops)
    for r in model.results:
        if not isinstance(r, Result):
            problems.append(f"model result {r!r} is not a Result")
    for p in model.parameters:
        if not isinstance(p, Parameter):
            problems.append(f"model parameter {p!r} is not a Parameter")
    for node in ops:
        if node.name in names and names[node.name] is not node:
            problems.append(f"duplicate node name '{node.name}'")
        names[node.name] = node
        if isinstance(node, Parameter) and node not in params:
            problems.append(f"Parameter '{node.friendly_name}' is used but not a model parameter")
        for i, src in enumerate(node._inputs):
            outs = src.node._outs
            table = outs[src.index].cons if src.index < len(outs) else None
            if table is None:
                problems.append(f"{node.type_name} '{node.friendly_name}' input {i} reads missing "
                                f"output {src.index} of '{src.node.friendly_name}'")
                continue
            ref = table.get((id(node), i))
            if ref is None or ref() is not node:
                problems.append(f"{node.type_name} '{node.friendly_name}' input {i} is not listed "
                                f"among the consumers of '{src.node.friendly_name}'")
        if isinstance(node, Result) and node.has_consumers():
            problems.append(f"Result '{node.friendly_name}' feeds other nodes")
        for o in node.outputs():
            for c in o.consumers():
                if c.node.input_value(c.index) != o:
                    problems.append(f"'{node.friendly_name}' lists a stale consumer "
                                    f"'{c.node.friendly_name}':{c.index}")
            if o.element_type.is_dynamic and not isinstance(node, Result):
                problems.append(f"{node.type_name} '{node.friendly_name}' output {o.index} "
                                "has no element type")
        if not isinstance(node, (Result,)) and node not in params and not node.has_consumers() \
                and node not in model.sinks:
            problems.append(f"{node.type_name} '{node.friendly_name}' is in the graph but has no "
                            "consumers")
    problems += name_clash_problems(model)
    del in_graph
    problems += _body_problems(ops)
    return problems


def _body_problems(ops: list[Node]) -> list[str]:
    """The problems of the bodies of ``ops`` that hold sub-graphs (their descriptions, then
    each body as a model of its own), prefixed with where the body is."""
    problems: list[str] = []
    for node in ops:
        if not isinstance(node, MultiSubGraphOp):
            continue
        try:
            node.check_descriptions(complete=True)
        except ShapeInferenceError as e:
            problems.append(str(e))
        for i, body in enumerate(node.bodies):
            problems += [f"{node.where(i)}: {p}" for p in lint_problems(body)]
    return problems


def lint(model: Model) -> None:
    """Raise :class:`LintError` listing every broken invariant of ``model``."""
    problems = lint_problems(model)
    if problems:
        raise LintError(problems)
