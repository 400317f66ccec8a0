"""MatcherPass, GraphRewrite and BackwardGraphRewrite: pattern rewrites in one traversal.

A GraphRewrite walks ``model.get_ordered_ops()`` once (reversed for BackwardGraphRewrite) and
offers each node to the matchers whose pattern root can be that node's type: candidates are
looked up per concrete op class (base classes of the op count, so ``wrap_type`` of a family
hits its members), so matchers whose root types are absent from the graph cost nothing.
Matchers whose root is not typed (``any_input``, an ``Or`` with untyped branches) are
candidates for every node. Candidates run in registration order until one callback returns
True. Nodes a callback registers with ``register_new_node`` go to the front of the queue, in
registration order, and meet all matchers again. The queue holds nodes weakly and the order
is released at the first change of the graph, so replaced nodes are freed and skipped; nodes
that left the graph (no consumers, not a Result, sink or parameter) are skipped too (checked
when a pattern matches, before its callback runs). A traversal that changes nothing leaves the
model's cached order in place for the next pass. The bodies of ops that hold sub-graphs (If,
Loop, TensorIterator) get a traversal of their own after the model's, as in OpenVINO; an op
whose body changed is re-inferred.

Matching uses each Matcher's compiled function when its pattern has one
(:mod:`netpass.pattern.compiled`), called inline here: this is the hot loop of every rewrite.
"""
from __future__ import annotations

import collections
import itertools
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from ..core.changes import tracking
from ..core.gc_pause import gc_paused
from ..core.model import topological_sort
from ..core.node import Node, Output, _Topology
from ..core.subgraph import rewrite_bodies
from ..errors import PassError, PassValidationError, describe_node
from ..pattern.matcher import Matcher
from .base import ModelPass, PassBase
from .pass_config import PassConfig
from .validation import validate_changes

if TYPE_CHECKING:
    from ..core.model import Model

MatcherCallback = Callable[[Matcher], bool]


class MatcherPass(PassBase):
    """One pattern and the callback that rewrites its matches.

    Subclass it and call :meth:`register_matcher` in ``__init__``, or build one inline:
    ``MatcherPass(Matcher(pattern, "Name"), callback)``. The callback returns True when it
    changed the graph.
    """

    def __init__(self, matcher: Matcher | None = None,
                 callback: MatcherCallback | None = None) -> None:
        super().__init__()
        self.matcher: Matcher | None = None
        self.callback: MatcherCallback | None = None
        self._new_nodes: list[Node] = []
        self._root_types: tuple[type[Node], ...] | None = None
        self._root_index = 0
        self._containers: tuple[type[Any], ...] = ()
        if matcher is not None:
            self.register_matcher(matcher, callback)

    def register_matcher(self, matcher: Any, callback: MatcherCallback | None) -> None:
        """Use ``matcher`` (a Matcher or a pattern) with ``callback``; an inline MatcherPass
        takes the matcher's name."""
        if not isinstance(matcher, Matcher):
            matcher = Matcher(matcher)
        if callback is None:
            raise TypeError(f"{self.name}: register_matcher needs a callback")
        self.matcher = matcher
        self.callback = callback
        self._root_types = matcher.root_types()
        self._root_index = matcher.pattern.root_index()
        if type(self) is MatcherPass and self._name is None:
            self._name = matcher.name

    def register_new_node(self, node: Node) -> Node:
        """Queue ``node`` so the running traversal offers it to the matchers next."""
        self._new_nodes.append(node)
        return node

    def is_enabled(self) -> bool:
        """Neither this pass's class nor a GraphRewrite it was flattened from is disabled in
        its PassConfig (what decides whether a traversal runs it)."""
        disabled = self.pass_config._disabled
        return not disabled or (type(self) not in disabled
                                and not any(c in disabled for c in self._containers))

    def get_new_nodes(self) -> list[Node]:
        return list(self._new_nodes)

    def clear_new_nodes(self) -> None:
        self._new_nodes.clear()

    def apply(self, node: Node) -> bool:
        """Match at ``node`` and run the callback; True when the callback changed the graph."""
        self._new_nodes.clear()
        m = self.matcher
        if m is None:
            raise TypeError(f"{self.name}: no matcher registered")
        log = tracking.log
        edits = log.edits if log is not None else 0
        try:
            if self._root_index >= len(node._outs) or not m.match(Output(node, self._root_index)):
                return False
            applied = bool(self.callback(m))  # type: ignore[misc]
        except PassError:
            raise
        except Exception as e:
            raise PassError(self.name, node, e) from e
        finally:
            m.clear_state()
        if applied and log is not None:
            reported_change(self, node, log, edits)
        return applied

    def run_on_model(self, model: Model) -> bool:
        """Run this matcher alone over ``model`` (as a Manager does: in a GraphRewrite)."""
        return wrap_matcher_pass(self).run_on_model(model)


def reported_change(mp: MatcherPass, node: Node, log: Any, edits_before: int) -> None:
    """A callback returned True: check that it changed something (``log`` recorded an edit
    since ``edits_before``), and note a declared change of the model's inputs or outputs."""
    if log.edits == edits_before:
        raise PassValidationError(
            mp.name, node=node,
            message=f"pass '{mp.name}': its callback returned True on {describe_node(node)} "
                    "but changed nothing in the graph (return True only after a change; "
                    "replace_node_update_name and replace_output_update_name return False "
                    "when they refuse)")
    if mp.changes_model_io and log.io_changed_by is None:
        log.io_changed_by = mp.name


def wrap_matcher_pass(mp: MatcherPass) -> GraphRewrite:
    """A GraphRewrite holding just ``mp`` and sharing its PassConfig."""
    gr = GraphRewrite()
    gr.set_name(mp.name)
    gr.pass_config = mp.pass_config
    gr._matchers.append(mp)
    return gr


class GraphRewrite(ModelPass):
    """Several MatcherPasses sharing one forward traversal (see the module docstring)."""

    backward = False

    def __init__(self, *matchers: Any) -> None:
        super().__init__()
        self._matchers: list[MatcherPass] = []
        for p in matchers:
            self.add_matcher(p)

    def add_matcher(self, matcher: Any, *args: Any, enabled: bool = True, **kwargs: Any) -> Any:
        """Add a MatcherPass (instance or class, built with ``args``), or the matchers of a
        GraphRewrite (flattened; disabling that GraphRewrite's class still disables them).
        ``enabled=False`` registers it disabled unless the config force-enables it.
        Returns the instance."""
        if isinstance(matcher, type):
            matcher = matcher(*args, **kwargs)
        if isinstance(matcher, GraphRewrite):
            self.pass_config.add_disabled_passes(matcher.pass_config)
            outer = type(matcher)
            for mp in matcher._matchers:
                mp._containers = (outer, *mp._containers)
                mp.set_pass_config(self.pass_config)
                self._matchers.append(mp)
        elif isinstance(matcher, MatcherPass):
            if matcher.matcher is None:
                raise TypeError(f"{matcher.name}: MatcherPass has no registered matcher")
            matcher.set_pass_config(self.pass_config)
            self._matchers.append(matcher)
        else:
            raise TypeError(f"GraphRewrite.add_matcher expects a MatcherPass or GraphRewrite, "
                            f"got {matcher!r}")
        if not enabled:
            self.pass_config.disable_by_default(type(matcher))
        return matcher

    @property
    def matchers(self) -> list[MatcherPass]:
        return list(self._matchers)

    def set_pass_config(self, config: PassConfig) -> None:
        super().set_pass_config(config)
        for mp in self._matchers:
            mp.set_pass_config(config)

    def _active(self) -> list[MatcherPass]:
        disabled = self.pass_config._disabled
        if not disabled:
            return list(self._matchers)
        return [mp for mp in self._matchers
                if type(mp) not in disabled and not any(c in disabled for c in mp._containers)]

    def run_on_model(self, model: Model) -> bool:
        active = self._active()
        if not active:
            return False
        # The IR holds no reference cycles (consumers are weak), so nodes a rewrite drops are
        # freed by reference counting; pausing the cyclic collector saves it from scanning the
        # whole graph again and again while callbacks allocate. The nodes the rewrite made go
        # to the collector's oldest generation on resuming, or the first allocation after the
        # pass (in whatever code comes next) would pay for scanning them all.
        with gc_paused():
            changed = self._traverse(model, active)
            # the bodies of If, Loop and TensorIterator too, as OpenVINO's GraphRewrite does
            return rewrite_bodies(model, lambda body: self._rewrite_body(body, active)) \
                or changed

    def _rewrite_body(self, body: Model, active: list[MatcherPass]) -> bool:
        """One traversal of a body; under per-pass validation its changes are validated
        here, against the body (its owner is re-inferred by ``rewrite_bodies``)."""
        if tracking.log is None:
            return self._traverse(body, active)
        with body.track_changes() as log:
            changed = self._traverse(body, active)
            if changed:
                validate_changes(self.name, body, log)
            log.settled()
        return changed

    def _traverse(self, model: Model, active: list[MatcherPass]) -> bool:
        if probe.node_id >= 0:
            probe.watcher.traversal(self, active)
        table: dict[type, list[Any]] = {}  # op class -> candidate matchers (registration order)

        def candidates(cls: type) -> list[Any]:
            found = table[cls] = [
                (mp, m, mp._root_index, mp._new_nodes, m._compile() if m._compiled is None
                 else m._compiled, mp.callback)
                for mp in active for m in (cast(Matcher, mp.matcher),)
                if mp._root_types is None or issubclass(cls, mp._root_types)]
            return found

        order = model._ordered
        if order is None:
            order = topological_sort([*model._results, *model._sinks, *model._parameters])
            model.set_cached_order(order)
        # The order stays cached (for the passes after this one) while the graph is unchanged;
        # the first change drops the model's copy and this local one, so that from then on
        # replaced nodes are freed at once (a weak queue skips them, and they must not linger
        # among their producers' consumers).
        version = _Topology.version
        ref = weakref.ref
        # Nodes no matcher can take are left out of the queue: popping them would do nothing.
        kinds = set(map(type, order))
        for cls in kinds:
            candidates(cls)
        queue = _weak_queue(order, self.backward, {cls for cls in kinds if table[cls]}, kinds)
        if not queue:
            return False
        get = table.get
        for p in active:
            p._new_nodes.clear()
        popleft, pushleft = queue.popleft, queue.appendleft
        in_graph = _InGraph(model)
        # With a change log recording (per-pass validation), a callback returning True must
        # have changed something.
        log = tracking.log
        edits = 0
        changed = False
        watched = probe.node_id  # -1 unless netpass.passes.explain watches a node
        mp: MatcherPass | None = None
        m: Matcher | None = None
        node: Node | None = None
        try:
            while queue:
                node = popleft()()
                if node is None:
                    continue
                mp = None
                cands = get(node.__class__)
                if cands is None:
                    cands = candidates(node.__class__)
                if not cands:
                    continue
                outs = node._outs
                n_out = len(outs)
                for mp, m, idx, new, fast, callback in cands:
                    if idx >= n_out:
                        continue
                    # The compiled match (Matcher.match's fast path, inlined: this runs for
                    # every candidate node; it sets the match's state, or leaves it empty);
                    # None sends the generic matcher.
                    found = fast(m, node, idx) if fast else None
                    if not found and (found is not None or not m._match_at(Output(node, idx))):
                        if node._id == watched:
                            probe.watcher.missed(mp, Output(node, idx))
                        continue
                    # In the graph: a live consumer (inlined: once per match), else a Result,
                    # a sink or a parameter.
                    live = False
                    for port in outs:
                        for r in port.cons.values():
                            if r() is not None:
                                live = True
                                break
                        if live:
                            break
                    if not live and not in_graph(node):
                        # Left the graph but kept alive elsewhere: no matcher applies to it.
                        m.clear_state()
                        if node._id == watched:
                            probe.watcher.left_graph(mp)
                        break
                    if log is not None:
                        edits = log.edits
                    applied = callback(m)
                    # Matcher.clear_state, inlined (once per match)
                    m.pattern_value_map = {}
                    if m._symbols:
                        m._symbols = {}
                    m.match_value = m.match_root = None
                    if node._id == watched:
                        probe.watcher.answered(mp, applied)
                    if order is not None and _Topology.version != version:
                        order = None
                    if new:
                        for n in reversed(new):
                            pushleft(ref(n))
                        new.clear()
                    if applied:
                        if log is not None and (log.edits == edits or mp.changes_model_io):
                            reported_change(mp, node, log, edits)
                        changed = True
                        break
        except PassError:
            raise
        except Exception as e:  # inside a callback or a predicate: name that matcher pass
            if mp is None or m is None:
                raise PassError(self.name, node, e) from e
            m.clear_state()
            raise PassError(mp.name, node, e) from e
        return changed


def _weak_queue(order: list[Node], backward: bool, taken: set[type],
                kinds: set[type]) -> collections.deque[weakref.ref[Node]]:
    """Weak references to the nodes of ``order`` (reversed when ``backward``) whose class is
    in ``taken`` (of the ``kinds`` in the order), filtered with C-level iterators: this looks
    at every node of the model. Holds no reference to the order when it returns."""
    ref = weakref.ref
    if not taken:
        return collections.deque()
    if len(taken) == len(kinds):
        return collections.deque(map(ref, reversed(order) if backward else order))
    keep = map(taken.__contains__, map(type, reversed(order) if backward else order))
    return collections.deque(map(ref, itertools.compress(
        reversed(order) if backward else order, keep)))


class _Probe:
    """The node ``netpass.passes.explain`` watches: its unique id (``Node._id``; -1 for none)
    and the recorder told what each matcher made of it. Holding the id, not the node, keeps
    the watched run the same as an unwatched one."""

    __slots__ = ("node_id", "watcher")

    def __init__(self) -> None:
        self.node_id = -1
        self.watcher: Any = None

    def watch(self, node_id: int, watcher: Any) -> tuple[int, Any]:
        previous = (self.node_id, self.watcher)
        self.node_id, self.watcher = node_id, watcher
        return previous

    def restore(self, previous: tuple[int, Any]) -> None:
        self.node_id, self.watcher = previous


probe = _Probe()


class BackwardGraphRewrite(GraphRewrite):
    """A GraphRewrite walking from the results towards the parameters."""

    backward = True


class _InGraph:
    """Whether a visited node is still part of the model: it has consumers, or it is a
    Result, a sink or a parameter (checked only when a matcher could apply)."""

    __slots__ = ("model", "result_cls")

    def __init__(self, model: Model) -> None:
        from ..ops.io import Result
        self.model = model
        self.result_cls = Result

    def __call__(self, node: Node) -> bool:
        for port in node._outs:
            for r in port.cons.values():
                if r() is not None:
                    return True
        if isinstance(node, self.result_cls):
            return True
        model = self.model
        return any(s is node for s in model._sinks) or any(p is node for p in model._parameters)
