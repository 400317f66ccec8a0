"""Why a pass did not fire on a node: run it on a copy of the model and watch that node.

``explain_pass(pass_, model, node_name)`` runs ``pass_`` (any pass: a MatcherPass, a
GraphRewrite, a composite ModelPass with nested Managers) over a clone of ``model``. Every
GraphRewrite traversal that meets the clone of the node records, for each matcher whose pattern
root fits the node's type, why its pattern did not match (the why-no-match report of
:mod:`netpass.pattern.matcher`) or what its callback answered; and every traversal records which
matchers it held, so a node no matcher could start at is explained too. The original model is
not changed.

The watched node is recognised by its unique id (``Node._id``), so watching holds no reference
to it and the pass runs exactly as it would (a reference would keep a replaced node among its
producers' consumers and change what ``consumers_count`` sees).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.node import Node, Output
from ..errors import NetpassError, PassError, describe_node
from .graph_rewrite import probe

if TYPE_CHECKING:
    from ..core.model import Model
    from .base import PassBase


@dataclass
class Attempt:
    """One matcher meeting the watched node: ``outcome`` is ``no match``, ``declined`` (the
    callback returned False), ``rewrote`` or ``left the graph``; ``report`` the why-no-match
    text for ``no match``."""

    pass_name: str
    outcome: str
    report: str = ""


@dataclass
class PassExplanation:
    """What ``explain_pass`` saw; ``str()`` is the report the CLI prints."""

    pass_name: str
    node: str
    attempts: list[Attempt] = field(default_factory=list)
    # (GraphRewrite name, [(matcher pass name, root type names or "any")]) per traversal
    traversals: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    error: str = ""

    @property
    def fired(self) -> bool:
        return any(a.outcome == "rewrote" for a in self.attempts)

    def __str__(self) -> str:
        lines = [f"pass '{self.pass_name}' on {self.node}:"]
        for a in self.attempts:
            if a.outcome == "no match":
                lines.append(f"  {a.pass_name}: no match")
                lines.extend("    " + line for line in a.report.splitlines())
            elif a.outcome == "declined":
                lines.append(f"  {a.pass_name}: the pattern matches; the callback declined "
                             "(returned False: a condition of the pass or the transformation "
                             "callback of the PassConfig refused)")
            elif a.outcome == "rewrote":
                lines.append(f"  {a.pass_name}: the pattern matches and the callback rewrote "
                             "the node (the pass fires here)")
            else:
                lines.append(f"  {a.pass_name}: {a.outcome}")
        if not self.attempts:
            if not self.traversals:
                lines.append("  the pass ran no pattern matching (a pass without matchers, or "
                             "one that found nothing to do on this model)")
            else:
                lines.append("  no matcher of the pass can start at this node; they start at:")
                seen: set[tuple[str, str]] = set()
                for _, matchers in self.traversals:
                    for name, roots in matchers:
                        if (name, roots) not in seen:
                            seen.add((name, roots))
                            lines.append(f"    {name}: {roots}")
        if self.error:
            lines.append(f"  the pass failed: {self.error}")
        lines.append("  => the pass fires on this node" if self.fired else
                     "  => the pass does not fire on this node")
        return "\n".join(lines)


class _Watch:
    """What ``probe`` calls while watching (see ``GraphRewrite._traverse``)."""

    def __init__(self, explanation: PassExplanation) -> None:
        self.explanation = explanation

    def traversal(self, rewrite: Any, active: list[Any]) -> None:
        matchers = []
        for mp in active:
            types = mp._root_types
            roots = "any op" if types is None else ", ".join(t.__name__ for t in types)
            matchers.append((mp.name, roots))
        self.explanation.traversals.append((rewrite.name, matchers))

    def missed(self, mp: Any, out: Output) -> None:
        report = mp.matcher.why_not(out)
        self.explanation.attempts.append(
            Attempt(mp.name, "no match", "" if report is None else str(report)))

    def answered(self, mp: Any, applied: bool) -> None:
        self.explanation.attempts.append(Attempt(mp.name, "rewrote" if applied else "declined"))

    def left_graph(self, mp: Any) -> None:
        self.explanation.attempts.append(
            Attempt(mp.name, "left the graph (an earlier rewrite replaced the node)"))


def find_node(model: Model, name: str) -> Node:
    """The node of ``model`` whose friendly name (or unique name) is ``name``."""
    found = [n for n in model.get_ordered_ops() if n.friendly_name == name]
    if not found:
        found = [n for n in model.get_ordered_ops() if n.name == name]
    if not found:
        names = sorted(n.friendly_name for n in model.get_ordered_ops())
        shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
        raise NetpassError(f"no node named '{name}' in model '{model.friendly_name}'; "
                           f"nodes: {shown}")
    if len(found) > 1:
        raise NetpassError(f"{len(found)} nodes are named '{name}': "
                           + ", ".join(describe_node(n) for n in found))
    return found[0]


def explain_pass(pass_: PassBase, model: Model, node_name: str) -> PassExplanation:
    """Run ``pass_`` on a clone of ``model`` and report what its matchers made of the node
    named ``node_name`` (see the module doc). ``model`` is not changed."""
    from .manager import Manager
    find_node(model, node_name)  # a clear error before any work
    work = model.clone()
    node = find_node(work, node_name)
    explanation = PassExplanation(pass_.name, describe_node(node))
    manager = Manager(pass_.get_pass_config())
    manager.register_pass(pass_)
    previous = probe.watch(node._id, _Watch(explanation))
    try:
        manager.run_passes(work)
    except PassError as e:
        explanation.error = str(e)
    finally:
        probe.restore(previous)
    return explanation


__all__ = ["explain_pass", "PassExplanation", "Attempt", "find_node"]
