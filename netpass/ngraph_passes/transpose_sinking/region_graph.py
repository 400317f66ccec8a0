"""The shadow graph of TSBackwardRegions: the model's Transposes and those its sweep moves, as
orders on edges (VT), over the model's other nodes, with the consumer lists and input sources
the sweep has changed; the model itself is untouched until the sweep is written back."""
from __future__ import annotations

import numpy as np

from ...core.boundary import Result
from ...core.node import Node, Output
from ...core.ports import _Port
from ...core.types import Type
from ...ops.movement import Transpose
from ..utils import const, in_graph
from .utils import transpose_order


class Order:
    """The order Constant of the Transposes one step builds (a step reuses the matched
    Transpose's): the model's own, or made on first use."""

    __slots__ = ("order", "type", "value")

    def __init__(self, order: list[int], type_: Type, value: Output | None = None) -> None:
        self.order, self.type, self.value = order, type_, value

    def get(self) -> Output:
        if self.value is None:
            self.value = const(np.array(self.order), self.type)
        return self.value


class VT:
    """A Transpose of the shadow graph: ``consumers`` (input slots ``(node, i)`` or VTs) read
    ``src`` (an output ``(node, k)`` or a VT) through ``order``. ``real``: the model's
    Transpose it is, if any; ``name``/``names``: the friendly name (None: one a step would
    make up) and tensor names it carries; ``rt``: the node whose rt_info it takes."""

    __slots__ = ("order", "const", "src", "consumers", "real", "name", "names", "rt", "alive",
                 "built")

    def __init__(self, order: list[int], const_: Order, src: Value, consumers: list[Ref],
                 real: Node | None, name: str | None, names: set[str] | frozenset[str],
                 rt: Node) -> None:
        self.order, self.const, self.src, self.consumers = order, const_, src, consumers
        self.real, self.name, self.names, self.rt = real, name, names, rt
        self.alive = True
        self.built: Node | None = None


Slot = tuple[Node, int]  # an input (node, index), or an output (node, index) as a Value
Value = Slot | VT
Ref = Slot | VT


def feeds_result(refs: list[Ref]) -> bool:
    for r in refs:  # noqa: SIM110 (a loop: no generator, once per VT the sweep drops)
        if not isinstance(r, VT) and isinstance(r[0], Result):
            return True
    return False


class ShadowGraph:
    """The model's Transposes of a constant order as VTs (``reals``: with their nodes), and
    what the sweep changed: consumer lists (``cons``, per output, made on first use), input
    sources (``srcs``) and tensor names gained (``names``)."""

    def __init__(self, ops: list[Node]) -> None:
        self.ops = ops
        # (keyed by the objects themselves, hashed by identity: a key ``(id(node), k)`` built
        # a tuple and an int per look-up, hundreds of thousands in a sweep at 100k nodes)
        self.cons: dict[_Port, list[Ref]] = {}
        self.srcs: dict[tuple[Node, int], tuple[Node, int, Value]] = {}
        self.names: dict[_Port, tuple[Node, int, set[str]]] = {}
        self.vts: dict[Node, VT] = {}
        self.reals: list[tuple[Node, VT]] = []
        for n in ops:
            order = transpose_order(n) if isinstance(n, Transpose) else None
            if order is not None:
                value = n._inputs[1]
                vt = VT(order, Order(order, value.element_type, value), (n, 0), [], n,
                        n.friendly_name, set(n._outs[0].names or ()), n)
                self.vts[n] = vt
                self.reals.append((n, vt))
        for n, vt in self.reals:
            vt.src = self.input_value(n, 0)
            vt.consumers = self.consumers((n, 0))

    def input_value(self, node: Node, i: int) -> Value:
        changed = self.srcs.get((node, i))
        if changed is not None:
            return changed[2]
        o = node._inputs[i]
        return self.vts.get(o.node) or (o.node, o.index)

    def consumers(self, value: Value) -> list[Ref]:
        """The consumers of ``value`` in the graph, in the order of its consumer table."""
        if isinstance(value, VT):
            return value.consumers
        node, k = value
        port = node._outs[k]
        found = self.cons.get(port)
        if found is None:
            found = self.cons[port] = []
            for (_, i), ref in port.cons.items():
                c = ref()
                if c is not None and in_graph(c):
                    vt = self.vts.get(c) if i == 0 else None
                    found.append(vt if vt is not None else (c, i))
        return found

    def set_src(self, ref: Ref, value: Value) -> None:
        if isinstance(ref, VT):
            ref.src = value
        else:
            self.srcs[ref] = (ref[0], ref[1], value)

    def replace_consumer(self, value: Value, old: Ref, new: list[Ref]) -> None:
        """``old`` stops reading ``value`` and ``new`` start, at the end (as a new consumer
        goes to the end of its producer's consumer table, the order rewrites read)."""
        refs = self.consumers(value)
        for j, r in enumerate(refs):
            if r is old or (not isinstance(r, VT) and not isinstance(old, VT)
                            and r[0] is old[0] and r[1] == old[1]):
                del refs[j]
                break
        refs.extend(new)

    def add_names(self, value: Value, names: set[str] | frozenset[str]) -> None:
        if not names:
            return
        if isinstance(value, VT):
            value.names = value.names | names  # (a set of its own: VTs share an empty one)
            return
        node, k = value
        self.names.setdefault(node._outs[k], (node, k, set()))[2].update(names)

    def release(self) -> None:
        """Breaks the VTs' reference cycles (a VT reads the one above it, which lists it as a
        consumer), so that the Transposes they hold are freed now, not by the cyclic collector
        (paused through the GNA pipeline): a dropped Transpose kept alive stays in its
        producer's consumer table."""
        for refs in self.cons.values():
            refs.clear()
        for vt in self.vts.values():
            vt.consumers.clear()

    @staticmethod
    def rank_of(value: Value) -> int | None:
        if isinstance(value, VT):
            return len(value.order)
        dims = value[0]._outs[value[1]].ps._dims
        return None if dims is None else len(dims)
