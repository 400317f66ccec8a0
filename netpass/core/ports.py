"""The ports of a node: ``Output`` (a tensor a node produces) and ``Input`` (a node's use of one),
and the global topology version that mutations bump.

``Output`` and ``Input`` are light views ``(node, index)``; the per-output data lives on the
node, one small :class:`_Port` per output (names set and rt_info dict created on first use), so
a node is a handful of objects: building, ordering and freeing large graphs pays per object.
Consumers are held weakly (see :mod:`netpass.core.node`).
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import NetpassError
from .changes import tracking
from .dimension import Dimension
from .shape import PartialShape
from .types import Type, dynamic

if TYPE_CHECKING:
    from .node import Node

# Shape of an output before inference (PartialShape is immutable, so one instance serves all).
_DYNAMIC_SHAPE = PartialShape(None)


class _TopologyState:
    """Global topology version; a Model's cached op order is valid for one version.

    One instance (``_Topology``), not class attributes: every rewire bumps the version, and
    assigning a class attribute invalidates the type's attribute caches (3x slower here)."""

    __slots__ = ("version", "caches")

    def __init__(self) -> None:
        self.version = 0
        # Weak references to the models holding a cached order (dropped on the next mutation).
        # Weak, so that a model nobody uses any more is freed at once, not at the next
        # mutation of some other graph (which would charge its deallocation to an unrelated
        # pass).
        self.caches: list[Any] = []


_Topology = _TopologyState()


def topology_changed() -> None:
    _Topology.version += 1
    log = tracking.log
    if log is not None:
        log.edits += 1
    if _Topology.caches:
        for r in _Topology.caches:
            m = r()
            if m is not None:
                m._ordered = None
        _Topology.caches.clear()


class _Port:
    """Data of one output: type, shape, weak consumer table, names, rt_info and known values.

    ``cons`` maps ``(id(consumer), input index)`` to a weak reference to the consumer;
    ``names`` and ``rt`` stay None until first used.
    """

    __slots__ = ("et", "ps", "cons", "names", "rt", "val", "pval")

    def __init__(self) -> None:
        self.et: Type = dynamic
        self.ps: PartialShape = _DYNAMIC_SHAPE
        self.cons: dict[Any, Any] = {}
        self.names: set[str] | None = None
        self.rt: dict[Any, Any] | None = None
        self.val: np.ndarray | None = None
        self.pval: tuple[Any, ...] | None = None


def _connect(table: dict[Any, Any], key: tuple[int, int], ref: Any) -> None:
    """Add consumer ``key`` -> ``ref`` at the end of a consumer table. A freed consumer's entry
    stays until ``Output.consumers`` drops it, and a new node may get the freed one's id: its
    entry must not take that old place, or the consumer order (which rewrites read: the first
    consumer names a node) would depend on where nodes are allocated."""
    if key in table:
        del table[key]
    table[key] = ref


class Output:
    """Output ``index`` of ``node``: a tensor produced by the node."""

    __slots__ = ("node", "index")

    def __init__(self, node: Node, index: int) -> None:
        self.node = node
        self.index = index

    # -- type and shape -----------------------------------------------------------------
    @property
    def element_type(self) -> Type:
        return self.node._outs[self.index].et

    @property
    def partial_shape(self) -> PartialShape:
        return self.node._outs[self.index].ps

    @property
    def shape(self) -> tuple[int, ...]:
        ps = self.node._outs[self.index].ps
        if not ps.is_static:
            raise ValueError(f"output {self} has dynamic shape {ps}")
        return ps.to_shape()

    @property
    def rank(self) -> Dimension:
        return self.node._outs[self.index].ps.rank

    @property
    def names(self) -> set[str]:
        """Tensor names (mutable set)."""
        port = self.node._outs[self.index]
        if port.names is None:
            port.names = set()
        return port.names

    @property
    def any_name(self) -> str:
        names = self.node._outs[self.index].names
        if not names:
            raise ValueError(f"output {self} has no tensor names")
        return min(names)

    @property
    def rt_info(self) -> dict[Any, Any]:
        port = self.node._outs[self.index]
        if port.rt is None:
            port.rt = {}
        return port.rt

    @property
    def value(self) -> np.ndarray | None:
        """The tensor's value when known at compile time (constants, folded shape math)."""
        return self.node._outs[self.index].val

    @property
    def partial_value(self) -> tuple[Any, ...] | None:
        """Known elements of a small integer (or boolean: 0 and 1) tensor: ints, or Dimensions
        where unknown."""
        port = self.node._outs[self.index]
        v = port.val
        if v is not None:
            if v.ndim <= 1 and v.dtype.kind in "iub":
                return tuple(int(x) for x in v.reshape(-1))
            return None
        return port.pval

    # -- consumers ----------------------------------------------------------------------
    def consumers(self) -> list[Input]:
        """Inputs of live nodes fed by this output, in connection order."""
        table = self.node._outs[self.index].cons
        out = []
        dead = None
        for key, ref in table.items():
            n = ref()
            if n is None:
                dead = dead or []
                dead.append(key)
            else:
                out.append(Input(n, key[1]))
        if dead:
            for key in dead:
                del table[key]
        return out

    get_target_inputs = consumers

    def replace(self, replacement: Output) -> None:
        """Feed every consumer of this output from ``replacement`` instead.

        Consumers that belong to ``replacement``'s own node are left alone (so a node can be
        inserted after this output). Tensor names move to ``replacement``; output rt_info merges.
        """
        if type(replacement) is not Output:
            replacement = as_output(replacement)
        node, index = self.node, self.index
        rnode, rindex = replacement.node, replacement.index
        if rnode is node and rindex == index:
            return
        # Moves the consumer entries directly (rewrites run this once per match).
        port = node._outs[index]
        table = port.cons
        if table:
            rtable = rnode._outs[rindex].cons
            moved = []
            for key, ref in list(table.items()):
                consumer = ref()
                if consumer is rnode:
                    continue
                del table[key]
                if consumer is None:
                    continue
                consumer._inputs[key[1]] = replacement
                if key in rtable:  # _connect, inlined (once per match in every rewrite)
                    del rtable[key]
                rtable[key] = ref
                moved.append(consumer)
            if moved:
                topology_changed()
                log = tracking.log
                if log is not None:
                    log.rewired(moved, self, replacement)
        names = port.names
        if names:
            replacement.names.update(names)
        rt = port.rt
        if rt:
            replacement.rt_info.update(rt)

    # -- OpenVINO-style accessors -------------------------------------------------------
    def get_node(self) -> Node:
        return self.node

    def get_index(self) -> int:
        return self.index

    def get_element_type(self) -> Type:
        return self.element_type

    def get_partial_shape(self) -> PartialShape:
        return self.partial_shape

    def get_shape(self) -> tuple[int, ...]:
        return self.shape

    def get_names(self) -> set[str]:
        return self.names

    def get_any_name(self) -> str:
        return self.any_name

    def get_rt_info(self) -> dict[Any, Any]:
        return self.rt_info

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Output) and other.node is self.node and other.index == self.index

    def __hash__(self) -> int:
        return hash((id(self.node), self.index))

    def __repr__(self) -> str:
        n = self.node
        return (f"<Output: {n.type_name} '{n.friendly_name}':{self.index} "
                f"{n._outs[self.index].ps} {n._outs[self.index].et}>")


class Input:
    """Input ``index`` of ``node``: bound to exactly one producer :class:`Output`."""

    __slots__ = ("node", "index")

    def __init__(self, node: Node, index: int) -> None:
        self.node = node
        self.index = index

    @property
    def source_output(self) -> Output:
        return self.node._inputs[self.index]

    def get_source_output(self) -> Output:
        return self.node._inputs[self.index]

    def get_node(self) -> Node:
        return self.node

    def get_index(self) -> int:
        return self.index

    @property
    def element_type(self) -> Type:
        return self.source_output.element_type

    @property
    def partial_shape(self) -> PartialShape:
        return self.source_output.partial_shape

    @property
    def shape(self) -> tuple[int, ...]:
        return self.source_output.shape

    def get_element_type(self) -> Type:
        return self.element_type

    def get_partial_shape(self) -> PartialShape:
        return self.partial_shape

    def get_shape(self) -> tuple[int, ...]:
        return self.shape

    @property
    def rt_info(self) -> dict[str, Any]:
        node = self.node
        if node._in_rt is None:
            node._in_rt = {}
        return node._in_rt.setdefault(self.index, {})

    def replace_source_output(self, new_source: Output | Node) -> None:
        """Rebind this input to ``new_source``, keeping both consumer lists in sync."""
        if type(new_source) is not Output:
            new_source = as_output(new_source)
        node, i = self.node, self.index
        old = node._inputs[i]
        src = new_source.node
        if old.node is src and old.index == new_source.index:
            return
        # (the bookkeeping inlined: sinking steps rewire ~100k inputs at 100k nodes)
        key = (id(node), i)
        old.node._outs[old.index].cons.pop(key, None)
        node._inputs[i] = new_source
        table = src._outs[new_source.index].cons
        if key in table:  # _connect
            del table[key]
        table[key] = weakref.ref(node)
        topology_changed()
        log = tracking.log
        if log is not None:
            log.rewired((node,), old, new_source)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Input) and other.node is self.node and other.index == self.index

    def __hash__(self) -> int:
        return hash((id(self.node), self.index))

    def __repr__(self) -> str:
        return f"<Input: {self.node.type_name} '{self.node.friendly_name}':{self.index}>"


def as_output(value: Output | Node) -> Output:
    """An Output from an Output or a single-output Node."""
    if isinstance(value, Output):
        return value
    if getattr(value, "_outs", None) is not None:  # a Node (which this module cannot import)
        if len(value._outs) != 1:
            raise NetpassError(
                f"{value.type_name} '{value.friendly_name}' has {len(value._outs)} outputs; "
                "pass node.output(i)")
        return Output(value, 0)
    raise TypeError(f"expected a Node or Output, got {type(value).__name__}")


def port_states(node: Node) -> list[Any]:
    """Copies of ``node``'s output ports' inference state, for :meth:`ChangeLog.reinferred`."""
    # (Here, not in changes.py, which cannot import the ports that record into it.)
    states = []
    for p in node._outs:
        q = _Port.__new__(_Port)
        q.et, q.ps, q.val, q.pval = p.et, p.ps, p.val, p.pval
        states.append(q)
    return states
