"""Matcher: matches a pattern against a graph value and exposes what it bound.

``Matcher(pattern, name, explain=False)``. ``match(value)`` starts from a graph Output (or a
Node: its output ``pattern.root_index()``); on success ``match_root`` / ``match_value`` and
``pattern_value_map`` (pattern node -> Output) describe the match. The map handed out by a
successful match is not reused by the next match, so callbacks may keep it.

Why-no-match: with ``explain=True`` or ``NETPASS_MATCHER_LOGGING=1`` every failed match leaves
a :class:`MatchFailure` (the deepest partial match and the first pattern node that failed
there, with the reason) in ``last_failure`` and ``failures``; with the environment variable
each report is also logged on the ``netpass.pattern`` logger at DEBUG. Reports format only
when printed, and a matcher that does not explain records nothing.
"""
from __future__ import annotations

import collections
import logging
import os
import sys
import weakref
from typing import Any

from ..core.node import Node, Output
from . import op as _op
from .compiled import compile_pattern
from .op import Pattern, as_pattern

logger = logging.getLogger("netpass.pattern")

# Reports an explaining matcher keeps (they hold the graph values they describe).
MAX_FAILURES = 1000


def matcher_logging_enabled() -> bool:
    """NETPASS_MATCHER_LOGGING (or OpenVINO's OV_MATCHER_LOGGING) is set to a true value."""
    for key in ("NETPASS_MATCHER_LOGGING", "OV_MATCHER_LOGGING"):
        v = os.environ.get(key, "").strip().lower()
        if v and v not in ("0", "false", "off", "no"):
            return True
    return False


_logger_ready = False


def _ensure_logger() -> None:
    """Show DEBUG reports on stderr when the env var asks for them and logging is unconfigured."""
    global _logger_ready
    if _logger_ready:
        return
    _logger_ready = True
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[netpass.pattern] %(message)s"))
        logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.DEBUG:
        logger.setLevel(logging.DEBUG)


def _pattern_nodes(root: Pattern) -> list[Pattern]:
    seen: dict[int, Pattern] = {}
    stack = [root]
    while stack:
        p = stack.pop()
        if id(p) in seen:
            continue
        seen[id(p)] = p
        if isinstance(p, _op.PatternOutput):
            stack.append(p.owner)
        elif isinstance(p, _op.WrapType) and p.inputs:
            stack.extend(p.inputs)
        elif isinstance(p, _op.Or):
            stack.extend(p.patterns)
        elif isinstance(p, _op.Label) and p.wrapped is not None:
            stack.append(p.wrapped)
    return list(seen.values())


def _describe_value(out: Output) -> str:
    n = out.node
    ps = n._outs[out.index].ps if out.index < len(n._outs) else "?"
    et = n._outs[out.index].et if out.index < len(n._outs) else "?"
    return f"{n.type_name} '{n.friendly_name}':{out.index} {ps} {et}"


class MatchFailure:
    """Why one match attempt failed. ``str()`` formats it; building it costs two tuples."""

    __slots__ = ("matcher_name", "pattern", "root", "depth", "failed", "value", "reason",
                 "detail", "partial")

    def __init__(self, matcher_name: str, pattern: Pattern, root: Output,
                 best: tuple[Any, ...]) -> None:
        self.matcher_name = matcher_name
        self.pattern = pattern
        self.root = root
        self.depth, self.failed, self.value, self.reason, self.detail, self.partial = best

    def reason_text(self) -> str:
        """The failure reason in words."""
        r, d, v = self.reason, self.detail, self.value
        if r == _op.WRONG_TYPE:
            return f"wrong type: expected {_op._join_types(d)}, got {v.node.type_name}"
        if r == _op.PREDICATE:
            return f"predicate {d}"
        if r == _op.INPUT_COUNT:
            return f"input count {d[1]} != {d[0]} (pattern expects {d[0]})"
        if r == _op.BOUND_OTHER:
            return f"already bound to {_describe_value(d)}, met {_describe_value(v)}"
        if r == _op.WRONG_OUTPUT:
            return f"output index {v.index} != {d}"
        if r == _op.NO_BRANCH:
            return "no branch matched"
        return str(r)

    def __str__(self) -> str:
        total = len(_pattern_nodes(self.pattern))
        lines = [f"Matcher '{self.matcher_name}' did not match {_describe_value(self.root)}",
                 f"  deepest partial match: {self.depth} of {total} pattern nodes bound"]
        for p, out in self.partial:
            lines.append(f"    {p.label()} -> {_describe_value(out)}")
        lines.append(f"  first failing pattern node: {self.failed.label()} "
                     f"against {_describe_value(self.value)}")
        lines.append(f"  reason: {self.reason_text()}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<MatchFailure {self.matcher_name}: {self.failed.label()}: {self.reason}>"


class Matcher:
    """Matches ``pattern`` (its root pattern node) against graph values."""

    # The results are plain slots, not properties: callbacks read them on every match.
    __slots__ = ("pattern", "name", "_explain", "_log", "pattern_value_map", "match_value",
                 "match_root", "_symbols", "_best", "last_failure", "failures", "_compiled",
                 "_missed", "__weakref__")

    def __init__(self, pattern: Any, name: str | None = None, explain: bool = False) -> None:
        self.pattern: Pattern = as_pattern(pattern)
        self.name = name or self.pattern.label()
        self._log = matcher_logging_enabled()
        self._explain = bool(explain) or self._log
        if self._log:
            _ensure_logger()
        self.pattern_value_map: dict[Pattern, Output] = {}  # pattern node -> matched Output
        # The matched value and its node. None outside a match, but callbacks only ever run
        # after one, so they are typed for them (DESIGN 4: after a match, a Node).
        self.match_value: Output = None  # type: ignore[assignment]
        self.match_root: Node = None  # type: ignore[assignment]
        self._symbols: dict[Any, Any] = {}
        self._best: tuple[Any, ...] | None = None
        self.last_failure: MatchFailure | None = None
        self.failures: collections.deque[Any] = collections.deque(maxlen=MAX_FAILURES)
        # The pattern's generated match function (see compiled.py): built on the first match,
        # False when the pattern's shape has none or the matcher explains.
        self._compiled: Any = None
        # The value the last failed ``match`` call met (node held weakly, and index), so that
        # ``explain()`` can tell why even when the matcher was not explaining.
        self._missed: tuple[Any, ...] | None = None

    # -- matching -----------------------------------------------------------------------
    def match(self, value: Output | Node) -> bool:
        """Match the pattern rooted at ``value``; True on success (state kept until the
        next match or :meth:`clear_state`). After a failure :meth:`explain` tells why."""
        if type(value) is not Output:
            value = self._as_value(value)
        if self._match_at(value):
            self._missed = None
            return True
        self._missed = (weakref.ref(value.node), value.index)
        return False

    def _match_at(self, value: Output) -> bool:
        """``match`` without remembering the value for ``explain`` (GraphRewrite's path)."""
        if self.match_value is not None:
            self.clear_state()
        fast = self._compiled
        if fast is None:
            fast = self._compile()
        if fast:
            # sets the match's state on success, leaves it empty otherwise (compiled.py)
            found = fast(self, value.node, value.index, value)
            if found is not None:
                return bool(found)
        if self._explain:
            self._best = None
            self.last_failure = None
        if self.pattern._match(self, value):
            self.match_value = value
            self.match_root = value.node
            if self._log:
                logger.debug("Matcher '%s' matched %s", self.name, value)
            return True
        if self.pattern_value_map:
            self.pattern_value_map.clear()
        if self._symbols:
            self._symbols.clear()
        if self._explain:
            self._record(value)
        return False

    def _compile(self) -> Any:
        fast = False if self._explain else compile_pattern(self.pattern) or False
        self._compiled = fast
        return fast

    def _as_value(self, value: Any) -> Output:
        if isinstance(value, Output):
            return value
        if isinstance(value, Node):
            return Output(value, self.pattern.root_index())
        raise TypeError(f"Matcher.match expects an Output or a Node, got {type(value).__name__}")

    def clear_state(self) -> None:
        """Forget the last match (the map handed out stays with whoever holds it)."""
        self.pattern_value_map = {}
        if self._symbols:
            self._symbols = {}
        self.match_value = None  # type: ignore[assignment]
        self.match_root = None  # type: ignore[assignment]

    # -- state used by pattern nodes ------------------------------------------------------
    def _mark(self) -> tuple[int, int]:
        return len(self.pattern_value_map), len(self._symbols)

    def _rollback(self, mark: tuple[int, int]) -> None:
        # Bindings are only ever added during a match: undo by dropping the newest ones.
        n, ns = mark
        vm, syms = self.pattern_value_map, self._symbols
        while len(vm) > n:
            vm.popitem()
        while len(syms) > ns:
            syms.popitem()

    def _fail(self, pattern: Pattern, value: Output, reason: str, detail: Any) -> None:
        vm = self.pattern_value_map
        depth = len(vm)
        if self._best is None or depth > self._best[0]:
            self._best = (depth, pattern, value, reason, detail, list(vm.items()))

    def _record(self, root: Output) -> None:
        best = self._best
        if best is None:
            return
        self._best = None
        report = MatchFailure(self.name, self.pattern, root, best)
        self.last_failure = report
        self.failures.append(report)
        if self._log:
            logger.debug("%s", report)

    # -- results ------------------------------------------------------------------------
    @property
    def explaining(self) -> bool:
        return self._explain

    def explain(self, value: Output | Node | None = None) -> str:
        """Why the pattern does not match ``value``, or, without one, why the last ``match``
        call failed: the report as text ("" when it matched). Works on any matcher: one that
        was not explaining matches the value again, explaining, to write the report."""
        if value is None:
            if self._explain or self._missed is None:
                return "" if self.last_failure is None else str(self.last_failure)
            node = self._missed[0]()
            if node is None:
                return ""
            value = Output(node, self._missed[1])
        elif type(value) is not Output:
            value = self._as_value(value)
        report = self.why_not(value)
        return "" if report is None else str(report)

    def why_not(self, value: Output | Node) -> MatchFailure | None:
        """The :class:`MatchFailure` of matching ``value`` (None when it matches). Leaves this
        matcher's state as it was (a separate explaining matcher does the work)."""
        probe = Matcher(self.pattern, self.name, explain=True)
        if probe.match(value):
            return None
        return probe.last_failure

    @property
    def pattern_map(self) -> dict[Any, Any]:
        """Pattern node -> matched graph Node."""
        return {p: o.node for p, o in self.pattern_value_map.items()}

    @property
    def symbols(self) -> dict[Any, Any]:
        """Names bound by ``shape_matches`` predicates: name -> length, Symbol or Dimension;
        and ``binds`` predicates -> their values."""
        return self._symbols

    def get_match_root(self) -> Node:
        return self.match_root

    def get_match_value(self) -> Output:
        return self.match_value

    def get_pattern_value_map(self) -> dict[Any, Any]:
        return self.pattern_value_map

    def get_pattern_map(self) -> dict[Any, Any]:
        return self.pattern_map

    def get_name(self) -> str:
        return self.name

    def get_pattern(self) -> Pattern:
        return self.pattern

    def root_types(self) -> tuple[type[Node], ...] | None:
        return self.pattern.root_types()

    def __repr__(self) -> str:
        return f"<Matcher '{self.name}': {self.pattern.label()}>"
