"""Change log: what a pass changed in a graph, recorded by the mutation primitives.

While a :class:`ChangeLog` is active (``with model.track_changes() as log:``), the primitives
that edit a graph report to it:

- an input rebound to another value (``Output.replace``, ``Input.replace_source_output``):
  the consumer is *stale* (must be re-inferred) unless the new value has the element type,
  partial shape and known value the old one had, which is what a correct rewrite produces:
  the consumer's inference cannot change then, so nothing needs re-checking;
- ``Node.set_arguments`` on a wired node, ``Node.set_attribute``: the node is stale;
- ``validate_and_infer_types()`` called on an existing node (a pass that changed it in place):
  the node itself is up to date again, and the consumers it had then are stale if its outputs
  changed (they read the earlier state; consumers added afterwards were inferred from the new
  one). A consumer rewired away from such a node is compared with the state it read;
- a friendly name set, a model's parameters, results or sinks changed: an *edit* only.

Building a node records nothing: a new node is inferred from its inputs as they are, and it
changes no graph until something is rewired to it. ``edits`` counts every report, so comparing
it before and after a callback tells whether the callback changed anything. Values rewired in
that have no inputs (Parameters, Constants) are kept too, for the check that a pass reads no
Parameter the model does not have.

Per-pass validation re-infers from the stale nodes only (:mod:`netpass.passes.validation`).
The log holds nodes weakly: a node a rewrite drops is freed as usual and skipped later.
Changes made in place without these primitives (an attribute assigned directly, rt_info,
tensor names) are not seen; a pass doing so calls ``validate_and_infer_types()`` on the node
it edited.

Logs nest: a log started while another is active hands what it recorded to the outer one when
it ends, unless ``settled()`` was called (its changes were validated and need no second look),
in which case only the edit count moves up.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .node import Node, Output, _Port


class _Tracking:
    """The active log (None: nothing records). One per process: graphs are not thread-safe."""

    __slots__ = ("log",)

    def __init__(self) -> None:
        self.log: ChangeLog | None = None


tracking = _Tracking()


def same_state(a: _Port, b: _Port) -> bool:
    """Whether two outputs look the same to shape inference: element type, known value or
    partial value, and partial shape (dims with equal bounds and the same symbol). Cheapest
    tests first: this runs once per rewire while a pass is validated."""
    if a.et is not b.et or a.val is not b.val or a.pval != b.pval:
        return False
    pa, pb = a.ps, b.ps
    if pa is pb:
        return True
    da, db = pa._dims, pb._dims
    if da is db:
        return True
    if da is None or db is None or len(da) != len(db):
        return False
    for x, y in zip(da, db):
        if x is not y and (x.min != y.min or x.max != y.max or x.symbol is not y.symbol):
            return False
    return True


class _Reinferred:
    """A node re-inferred in place with another result: its output states before the first
    such re-inference, and the ids of the consumers it had at each re-inference (they read an
    earlier state)."""

    __slots__ = ("ref", "before", "readers")

    def __init__(self, node: Node, before: list[_Port]) -> None:
        self.ref: weakref.ref[Node] = weakref.ref(node)
        self.before = before
        self.readers: set[int] = set()

    def add_readers(self, node: Node) -> None:
        readers = self.readers
        for port in node._outs:
            for key in port.cons:
                readers.add(key[0])


class ChangeLog:
    """Stale nodes and rewired-in input values of a pass (held weakly), and a count of edits."""

    __slots__ = ("_stale", "_stale_consumers", "_sources", "_refreshed", "edits",
                 "io_changed_by", "_outer", "_settled")

    def __init__(self) -> None:
        # id -> weak reference: nodes to re-infer; input-less nodes that something was rewired
        # to; nodes the pass re-inferred in place (up to date, only linted).
        self._stale: dict[int, weakref.ref[Any]] = {}
        self._sources: dict[int, weakref.ref[Any]] = {}
        self._refreshed: dict[int, weakref.ref[Any]] = {}
        # id -> _Reinferred: nodes re-inferred in place with another result.
        self._stale_consumers: dict[int, _Reinferred] = {}
        self.edits = 0
        # The first pass declaring ``changes_model_io`` that changed something while this log
        # recorded: the model's inputs and outputs may differ on purpose.
        self.io_changed_by: str | None = None
        self._outer: ChangeLog | None = None
        self._settled = False

    # -- recording (called by the primitives in node.py and model.py) --------------------
    def rewired(self, consumers: Iterable[Node], old: Output, new: Output) -> None:
        """``consumers`` read ``new`` where they read ``old``."""
        self.edits += 1
        rnode = new.node
        if not rnode._inputs:
            self._sources[id(rnode)] = weakref.ref(rnode)
        onode = old.node
        now = onode._outs[old.index]
        new_port = rnode._outs[new.index]
        entry = self._stale_consumers.get(id(onode))
        stale = self._stale
        if entry is None:
            # The consumers were inferred from ``old`` as it is now.
            if same_state(now, new_port):
                return
            for c in consumers:
                stale[id(c)] = weakref.ref(c)
            return
        # ``old`` was re-inferred in place with another result: its consumers from before
        # read the state it had then, the later ones the state it has now.
        readers = entry.readers
        seen = entry.before[old.index] if old.index < len(entry.before) else None
        for c in consumers:
            saw = now if id(c) not in readers else seen
            if saw is None or not same_state(saw, new_port):
                stale[id(c)] = weakref.ref(c)
        # A reader that no longer reads ``onode`` at all is one no more (so ``stale_readers``
        # passes over an op whose readers a sinking step moved below it, without fetching it).
        for c in consumers:
            if id(c) in readers:
                for src in c._inputs:
                    if src.node is onode:
                        break
                else:
                    readers.discard(id(c))

    def touched(self, node: Node) -> None:
        """An attribute or all the inputs of ``node`` changed: re-infer it."""
        self.edits += 1
        self._stale[id(node)] = weakref.ref(node)

    def reinferred(self, node: Node, before: list[Any]) -> None:
        """``node`` was re-inferred in place; ``before`` holds its output ports' states from
        before (see :func:`port_states`). Its consumers are stale if they differ."""
        self.refreshed(node)
        key = id(node)
        outs = node._outs
        if len(before) == len(outs):
            # (a plain loop: a generator in ``all`` cost as much as the comparisons, once per
            # op a sinking step crosses)
            for b, p in zip(before, outs):
                if not same_state(b, p):
                    break
            else:
                return
        entry = self._stale_consumers.get(key)
        if entry is None:
            entry = self._stale_consumers[key] = _Reinferred(node, before)
        entry.add_readers(node)

    def refreshed(self, node: Node) -> None:
        """``node`` was brought up to date with its inputs in place, its outputs as its
        consumers read them (``reinferred`` with no change, told without copying the states:
        TSBackwardRegions says it of every op it crosses)."""
        self.edits += 1
        key = id(node)
        # Inferred from its inputs as they are now: no longer stale, nor a reader of an
        # earlier state of its producers.
        self._stale.pop(key, None)
        if key not in self._refreshed:
            self._refreshed[key] = weakref.ref(node)
        entries = self._stale_consumers
        if entries:
            for src in node._inputs:
                entry = entries.get(id(src.node))
                if entry is not None:
                    entry.readers.discard(key)

    def edited(self) -> None:
        """An edit with nothing to re-infer: a friendly name set, a model's parameters or
        results changed."""
        self.edits += 1

    # -- reading -------------------------------------------------------------------------
    def __bool__(self) -> bool:
        return bool(self._stale or self._stale_consumers or self._sources or self._refreshed)

    def __len__(self) -> int:
        return (len(self._stale) + len(self._stale_consumers) + len(self._sources)
                + len(self._refreshed))

    @staticmethod
    def _live(table: dict[Any, Any]) -> Iterator[Node]:
        for ref in table.values():
            n = ref()
            if n is not None:
                yield n

    def stale_nodes(self) -> Iterator[Node]:
        """Live nodes to re-infer, in the order first recorded."""
        return self._live(self._stale)

    def reinferred_nodes(self) -> Iterator[Node]:
        """Live nodes re-inferred in place with a changed result."""
        for entry in self._stale_consumers.values():
            n = entry.ref()
            if n is not None:
                yield n

    def stale_readers(self) -> Iterator[Node]:
        """Live consumers of the nodes re-inferred in place with a changed result that read
        an earlier state (each node re-inferred in place had them as consumers then)."""
        for entry in self._stale_consumers.values():
            readers = entry.readers
            if not readers:
                continue
            n = entry.ref()
            if n is None:
                continue
            for port in n._outs:
                for key, ref in port.cons.items():
                    if key[0] in readers:
                        c = ref()
                        if c is not None:
                            yield c

    def refreshed_nodes(self) -> Iterator[Node]:
        """Live nodes the pass re-inferred in place (up to date with their inputs then)."""
        return self._live(self._refreshed)

    def sources(self) -> Iterator[Node]:
        """Live input-less nodes (Parameters, Constants) that an input was rewired to."""
        return self._live(self._sources)

    def settled(self) -> None:
        """The recorded changes were validated: an outer log need not look at them again."""
        self._settled = True

    # -- activation ----------------------------------------------------------------------
    def start(self) -> ChangeLog:
        """Make this the active log (the one active before becomes its outer log)."""
        self._outer = tracking.log
        tracking.log = self
        return self

    def stop(self) -> None:
        """Restore the outer log and hand it what this one recorded."""
        outer = self._outer
        tracking.log = outer
        self._outer = None
        if outer is None:
            return
        outer.edits += self.edits
        if outer.io_changed_by is None:
            outer.io_changed_by = self.io_changed_by
        if not self._settled:
            outer._stale.update(self._stale)
            outer._sources.update(self._sources)
            outer._refreshed.update(self._refreshed)
            mine = outer._stale_consumers
            for key, entry in self._stale_consumers.items():
                earlier = mine.get(key)
                if earlier is None:
                    mine[key] = entry
                else:  # the outer log's states are the older ones
                    earlier.readers |= entry.readers

    def __enter__(self) -> ChangeLog:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (f"<ChangeLog: {len(self._stale)} stale, {len(self._stale_consumers)} "
                f"re-inferred, {len(self._sources)} sources, {self.edits} edits>")


def active_log() -> ChangeLog | None:
    """The log recording now, if any."""
    return tracking.log


__all__ = ["ChangeLog", "active_log", "same_state", "tracking"]
