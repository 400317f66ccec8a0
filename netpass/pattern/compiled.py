"""Compiled matchers: one generated Python function per tree-shaped pattern.

Matching a pattern node by node (:meth:`Pattern._match`) costs a method call, a dict
``setdefault`` and a few branches per pattern node; a rewrite over a large model runs it for
every candidate node. For the common pattern shape (``wrap_type`` nodes with fixed inputs,
``any_input`` leaves, optional predicates, each pattern node used once) the whole match is
generated as one straight-line function: a type test, an input count test and an attribute
read per pattern node, and the bindings written in the same order the generic matcher writes
them (pre-order), so predicates see the same partial map and the result is the same map.

The generated function returns True or False like ``pattern._match``, or None when it meets a
case only the generic matcher handles (a commutative node with several inputs, which needs the
argument-order retries); the caller then clears the state and matches generically. Patterns of
any other shape (``Or``, ``optional``, pattern outputs, labels bound twice, wrapped labels) are
not compiled. An explaining matcher always matches generically (it records failures).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from .op import Label, Pattern, WrapType

CompiledMatch = Callable[[Any, Any], "bool | None"]


def _tree_nodes(root: Pattern) -> list[WrapType | Label] | None:
    """Pre-order pattern nodes when ``root`` is a tree of plain WrapType and Label nodes."""
    order: list[WrapType | Label] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        p = stack.pop()
        if id(p) in seen:
            return None  # a shared node: the generic matcher checks it binds one value
        seen.add(id(p))
        if type(p) is WrapType:
            if p.inputs:
                stack.extend(reversed(p.inputs))
        elif type(p) is Label:
            if p.wrapped is not None:
                return None
        else:
            return None
        order.append(p)
    return order


def compile_pattern(root: Pattern) -> CompiledMatch | None:
    """The generated match function of ``root``, or None when its shape is not supported."""
    nodes = _tree_nodes(root)
    if nodes is None:
        return None
    index = {id(p): i for i, p in enumerate(nodes)}
    env: dict[str, Any] = {}
    # Bindings go into the map as soon as a node is accepted (predicates may read it);
    # without predicates they are written at once at the end, after all tests passed.
    incremental = any(p.predicate is not None for p in nodes)
    lines = ["def match(m, o0):"]
    if incremental:
        lines.append("    vm = m.pattern_value_map")

    def emit(p: WrapType | Label, depth: int) -> None:
        i = index[id(p)]
        ind = "    "
        env[f"P{i}"] = p
        if p.predicate is not None:
            env[f"F{i}"] = p._pred
        if isinstance(p, Label):
            if p.predicate is not None:
                lines.append(f"{ind}if not F{i}(o{i}, m): return False")
            if incremental:
                lines.append(f"{ind}vm[P{i}] = o{i}")
            return
        env[f"T{i}"] = p.types
        lines.append(f"{ind}n{i} = o{i}.node")
        lines.append(f"{ind}if not isinstance(n{i}, T{i}): return False")
        if p.predicate is not None:
            lines.append(f"{ind}if not F{i}(o{i}, m): return False")
        if incremental:
            lines.append(f"{ind}vm[P{i}] = o{i}")
        if p.inputs is None:
            return
        k = len(p.inputs)
        lines.append(f"{ind}a{i} = n{i}._inputs")
        lines.append(f"{ind}if len(a{i}) != {k}: return False")
        if k > 1:
            lines.append(f"{ind}if n{i}.commutative: return None")
        for j, child in enumerate(p.inputs):
            lines.append(f"{ind}o{index[id(child)]} = a{i}[{j}]")
            emit(cast("WrapType | Label", child), depth + 1)

    emit(nodes[0], 0)
    if not incremental:
        pairs = ", ".join(f"P{i}: o{i}" for i in range(len(nodes)))
        lines.append(f"    m.pattern_value_map = {{{pairs}}}")
    lines.append("    return True")
    code = compile("\n".join(lines), f"<compiled pattern {root.label()}>", "exec")
    exec(code, env)
    match: CompiledMatch = env["match"]
    return match


__all__ = ["compile_pattern"]
