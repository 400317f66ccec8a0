"""Compiled matchers: one generated Python function per tree-shaped pattern.

Matching a pattern node by node (:meth:`Pattern._match`) costs a method call, a dict
``setdefault`` and a few branches per pattern node; a rewrite over a large model runs it for
every candidate node. For the common pattern shape (``wrap_type`` nodes with fixed inputs,
``any_input`` leaves, optional predicates, each pattern node used once) the whole match is
generated as one straight-line function: a type test, an input count test and an attribute
read per pattern node, and the bindings written in the same order the generic matcher writes
them (pre-order), so predicates see the same partial map and the result is the same map.

The generated function ``match(m, node, index, value=None)`` matches output ``index`` of
``node`` (``value``, when the caller has that Output already). On success it sets the matcher's
``pattern_value_map``, ``match_value`` and ``match_root`` and returns True; otherwise it leaves
the matcher's state empty and returns False, or None when it meets a case only the generic
matcher handles (a commutative node with several inputs, which needs the argument-order
retries). The root's Output view is built only when the match binds it: most nodes a rewrite
visits fail at a type test, and an object costs more than the tests. Patterns of any other
shape (``Or``, ``optional``, pattern outputs, labels bound twice, wrapped labels) are not
compiled. An explaining matcher always matches generically (it records failures).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from ..core.ports import Output
from .op import Label, Pattern, WrapType

CompiledMatch = Callable[..., "bool | None"]


def _reject(m: Any, found: bool | None) -> bool | None:
    """A match with predicates failed after binding: leave the matcher's state empty."""
    m.pattern_value_map.clear()
    if m._symbols:
        m._symbols.clear()
    return found


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
    env: dict[str, Any] = {"Output": Output, "R": _reject}
    # Bindings go into the map as soon as a node is accepted (predicates may read it);
    # without predicates they are written at once at the end, after all tests passed, and a
    # failure has nothing to undo.
    incremental = any(p.predicate is not None for p in nodes)
    lines = ["def match(m, n0, i0, o0=None):"]
    if incremental:
        lines.append("    vm = m.pattern_value_map")
    view = "    if o0 is None: o0 = Output(n0, i0)"
    # Once a predicate ran (it may bind symbols) or a binding was written, a failure clears.
    state = {"dirty": False}

    def fail(value: str) -> str:
        return f"R(m, {value})" if state["dirty"] else value

    def bind(p: WrapType | Label, i: int) -> None:
        if p.predicate is not None:
            env[f"F{i}"] = p._pred
            state["dirty"] = True
            lines.append(f"    if not F{i}(o{i}, m): return {fail('False')}")
        if incremental:
            state["dirty"] = True
            lines.append(f"    vm[P{i}] = o{i}")

    def emit(p: WrapType | Label) -> None:
        i = index[id(p)]
        env[f"P{i}"] = p
        if isinstance(p, Label):
            if i == 0:
                lines.append(view)
            bind(p, i)
            return
        env[f"T{i}"] = p.types
        if i:
            lines.append(f"    n{i} = o{i}.node")
        lines.append(f"    if not isinstance(n{i}, T{i}): return {fail('False')}")
        if i == 0 and incremental:
            lines.append(view)
        bind(p, i)
        if p.inputs is None:
            return
        k = len(p.inputs)
        lines.append(f"    a{i} = n{i}._inputs")
        lines.append(f"    if len(a{i}) != {k}: return {fail('False')}")
        if k > 1:
            lines.append(f"    if n{i}.commutative: return {fail('None')}")
        for j, child in enumerate(p.inputs):
            lines.append(f"    o{index[id(child)]} = a{i}[{j}]")
            emit(cast("WrapType | Label", child))

    emit(nodes[0])
    if not incremental:
        if isinstance(nodes[0], WrapType):
            lines.append(view)
        pairs = ", ".join(f"P{i}: o{i}" for i in range(len(nodes)))
        lines.append(f"    m.pattern_value_map = {{{pairs}}}")
    lines.append("    m.match_value = o0")
    lines.append("    m.match_root = n0")
    lines.append("    return True")
    code = compile("\n".join(lines), f"<compiled pattern {root.label()}>", "exec")
    exec(code, env)
    match: CompiledMatch = env["match"]
    return match


__all__ = ["compile_pattern"]
