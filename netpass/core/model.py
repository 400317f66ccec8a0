"""Model: parameters, results and sinks, with a cached topological order."""
from __future__ import annotations

import copy
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputError, NetpassError
from .boundary import Parameter, Result
from .changes import ChangeLog, tracking
from .dimension import INF, Dimension
from .node import Node, Output, _Topology, as_output, topology_changed
from .shape import PartialShape


def topological_sort(roots: Sequence[Node],
                     visit: Callable[[Node], object] | None = None) -> list[Node]:
    """Producers before consumers, in OpenVINO's order; ``visit`` (when given) is called on
    each node as it joins the order.

    Iterative DFS post-order: roots are pushed in the given order (so the last is expanded
    first) and a node's input 0 subtree is emitted before its input 1 subtree. The path is
    kept as two parallel stacks (the nodes, and the iterators over their inputs where the walk
    resumes), so every edge is looked at once and no tuple is built per node; leaves are
    emitted without a stack entry (this runs before every graph rewrite). Visit state is a mark
    on the node (this sort's epoch: done; epoch + 1: on the DFS path), cheaper than sets.

    ``visit`` lets a whole-graph scan that needs no order of its own ride on the sort (it must
    not change the graph): the sort waits on fetching every node from memory, and a second walk
    over the order fetched them all again (~40 ms at 128k nodes, against ~10 ms for the calls).
    """
    global _epoch
    _epoch += 2
    done = _epoch
    on_path = done + 1
    order: list[Node] = []
    append = order.append
    for root in reversed(roots):
        if root._mark == done:
            continue
        root._mark = on_path
        path = [root]  # the nodes on the DFS path
        resume: list[Iterator[Output]] = []  # the input iterators of path[:-1]
        push_node, pop_node = path.append, path.pop
        push_it, pop_it = resume.append, resume.pop
        it = iter(root._inputs)
        while True:
            for src in it:
                p = src.node
                mark = p._mark
                if mark == done:
                    continue
                ins = p._inputs
                if not ins:
                    p._mark = done
                    append(p)
                    if visit is not None:
                        visit(p)
                    continue
                if mark == on_path:
                    n = path[-1]
                    raise NetpassError(f"cycle detected through {n.type_name} '{n.friendly_name}'")
                p._mark = on_path
                push_it(it)
                push_node(p)
                it = iter(ins)
                break
            else:
                n = pop_node()
                n._mark = done
                append(n)
                if visit is not None:
                    visit(n)
                if not path:
                    break
                it = pop_it()
    return order


# Epoch of the last topological_sort (its visit marks); even, and grows by two per sort.
_epoch = 0


class Model:
    """A graph with named inputs (Parameters) and outputs (Results).

    ``results`` may hold Result nodes, other nodes or Outputs (wrapped into Results).
    """

    def __init__(self, results: Any, parameters: Iterable[Any] = (),
                 name: str = "Model", sinks: Iterable[Node] = ()) -> None:
        res: list[Result] = []
        for r in (results if isinstance(results, (list, tuple)) else [results]):
            if isinstance(r, Result):
                res.append(r)
            else:
                res.append(Result([as_output(r)]))
        params = list(parameters)
        for p in params:
            if not isinstance(p, Parameter):
                raise NetpassError(f"model parameters must be Parameter nodes, got {p!r}")
        self._results: list[Result] = res
        self._parameters: list[Parameter] = params
        self._sinks: list[Node] = list(sinks)
        self.friendly_name = name
        self.rt_info: dict[Any, Any] = {}
        self._ordered: list[Node] | None = None

    # -- structure ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.friendly_name

    @property
    def parameters(self) -> list[Parameter]:
        return list(self._parameters)

    @property
    def results(self) -> list[Result]:
        return list(self._results)

    @property
    def sinks(self) -> list[Node]:
        return list(self._sinks)

    def get_parameters(self) -> list[Parameter]:
        return self.parameters

    def get_results(self) -> list[Result]:
        return self.results

    @property
    def inputs(self) -> list[Output]:
        return [p.output(0) for p in self._parameters]

    @property
    def outputs(self) -> list[Output]:
        return [r.input_value(0) for r in self._results]

    def input(self, key: int | str = 0) -> Output:
        if isinstance(key, int):
            if not -len(self._parameters) <= key < len(self._parameters):
                raise InputError(str(key), f"no input at index {key}; inputs are "
                                           f"{self.input_names}")
            return self._parameters[key].output(0)
        for p in self._parameters:
            if p.friendly_name == key or key in p.output(0).names:
                return p.output(0)
        raise InputError(key, f"no such input; inputs are {self.input_names}")

    def output(self, key: int | str = 0) -> Output:
        if isinstance(key, int):
            return self._results[key].input_value(0)
        for r, name in zip(self._results, self.output_names):
            if name == key or key in r.input_value(0).names:
                return r.input_value(0)
        raise NetpassError(f"no output '{key}'; outputs are {self.output_names}")

    @property
    def input_names(self) -> list[str]:
        return [parameter_name(p) for p in self._parameters]

    @property
    def output_names(self) -> list[str]:
        return [result_name(r) for r in self._results]

    def get_parameter_index(self, param: Node) -> int:
        for i, p in enumerate(self._parameters):
            if p is param:
                return i
        return -1

    def get_result_index(self, value: Any) -> int:
        for i, r in enumerate(self._results):
            if r is value or (isinstance(value, Output) and r.input_value(0) == value):
                return i
        return -1

    def add_parameters(self, params: Iterable[Parameter]) -> None:
        self._parameters.extend(params)
        topology_changed()

    def remove_parameter(self, param: Node) -> None:
        self._parameters = [p for p in self._parameters if p is not param]
        topology_changed()

    def replace_parameter(self, index: int, param: Parameter) -> None:
        self._parameters[index] = param
        topology_changed()

    def add_results(self, results: Iterable[Result]) -> None:
        self._results.extend(results)
        topology_changed()

    def remove_result(self, result: Node) -> None:
        self._results = [r for r in self._results if r is not result]
        topology_changed()

    def add_sinks(self, sinks: Iterable[Node]) -> None:
        self._sinks.extend(sinks)
        topology_changed()

    # -- order --------------------------------------------------------------------------
    def get_ordered_ops(self) -> list[Node]:
        """All ops reachable from results and sinks, producers first (cached)."""
        return list(self.cached_order())

    get_ops = get_ordered_ops

    def cached_order(self, visit: Callable[[Node], object] | None = None) -> list[Node]:
        """``get_ordered_ops()``'s order itself, not a copy, for a walk that neither changes
        the list nor keeps it (netpass's whole-graph scans: copying it touched every node's
        reference count once more to copy and once to free). A graph change drops the cache,
        not the list, so a walk that rewires keeps going over the order it started with.

        ``visit`` (when given) is called on every node of the order, in order: by the sort
        as it goes when the order is not cached (see ``topological_sort``), else by a walk
        over the cached one."""
        order = self._ordered
        if order is None:
            order = self._ordered = topological_sort(
                [*self._results, *self._sinks, *self._parameters], visit)
            _Topology.caches.append(weakref.ref(self))
        elif visit is not None:
            for node in order:
                visit(node)
        return order

    def drop_cached_order(self) -> None:
        """Release the cached order (and the strong references it holds)."""
        self._ordered = None

    def set_cached_order(self, order: list[Node]) -> None:
        """Cache ``order`` (this model's topological order, computed since the last graph
        change) as the model's order; a pass that walked the model without changing it hands
        its order back this way instead of making the next pass sort again."""
        self._ordered = order
        _Topology.caches.append(weakref.ref(self))

    def is_dynamic(self) -> bool:
        return any(not o.partial_shape.is_static for n in self.get_ordered_ops()
                   for o in n.outputs())

    def validate_nodes_and_infer_types(self) -> None:
        """Re-infer every node, producers first. Every node ends consistent with its inputs,
        so an active change log counts one edit and has nothing left to re-check."""
        for node in self.get_ordered_ops():
            node._infer()
        log = tracking.log
        if log is not None:
            log.edited()

    def track_changes(self) -> ChangeLog:
        """A new :class:`~netpass.core.changes.ChangeLog`: ``with model.track_changes() as
        log:`` records what the block changes (in any graph: nodes do not know their model;
        the Manager checks what a pass changed this way)."""
        return ChangeLog()

    # -- copies and shapes --------------------------------------------------------------
    def clone(self) -> Model:
        """A deep copy: new nodes with the same friendly names, tensor names and rt_info."""
        mapping: dict[Node, Node] = {}
        for node in self.get_ordered_ops():
            new_inputs = [mapping[o.node].output(o.index) for o in node._inputs]
            new = node.clone_with_new_inputs(new_inputs)
            # Friendly names are kept even when defaulted, so output names survive the copy;
            # a Result keeps "unset" so its name still follows its producer.
            new._friendly = node._friendly if isinstance(node, Result) else node.friendly_name
            if node._rt is not None:
                new.rt_info = copy.copy(node._rt)
            if node._in_rt:
                new._in_rt = {k: dict(v) for k, v in node._in_rt.items()}
            for port, new_port in zip(node._outs, new._outs):
                if port.names:
                    new_port.names = set(port.names)
                if port.rt:
                    new_port.rt = dict(port.rt)
            mapping[node] = new
        m = Model([mapping[r] for r in self._results], [mapping[p] for p in self._parameters],
                  self.friendly_name, [mapping[s] for s in self._sinks])
        m.rt_info = copy.deepcopy(self.rt_info)
        return m

    def reshape(self, shapes: Mapping[Any, Any] | Sequence[Any] | str | PartialShape) -> None:
        """Set new input shapes (by input name, index or Output; a model of one input also
        takes its shape alone: a list of dims, a string, a PartialShape) and re-infer, as
        OpenVINO's. A shape that is no shape, or that the graph refuses, raises with the
        model as it was: its inputs' shapes are restored (they stayed changed, the model
        unusable with the feeds it took before)."""
        if len(self._parameters) == 1 and _one_shape(shapes):
            shapes = {0: shapes}
        elif not isinstance(shapes, Mapping):
            if not isinstance(shapes, Iterable):
                raise InputError(", ".join(self.input_names), f"reshape takes a mapping of "
                                 f"input -> shape or a list of shapes, got {shapes!r}")
            shapes = dict(enumerate(shapes))
        new = []
        for key, shape in shapes.items():
            param = key.node if isinstance(key, Output) else self.input(key).node
            new.append((param, _input_shape(parameter_name(param), shape)))
        old = [(param, param.shape) for param, _ in new]
        try:
            for param, ps in new:
                param.shape = ps
            self.validate_nodes_and_infer_types()
        except BaseException:
            for param, ps in old:
                param.shape = ps
            self.validate_nodes_and_infer_types()
            raise

    def __repr__(self) -> str:
        ins = ", ".join(f"{n}{p.output(0).partial_shape}"
                        for n, p in zip(self.input_names, self._parameters))
        outs = ", ".join(f"{n}{r.input_value(0).partial_shape}"
                         for n, r in zip(self.output_names, self._results))
        return f"<Model '{self.friendly_name}': ({ins}) -> ({outs})>"


def _one_shape(value: Any) -> bool:
    """Whether ``value`` is one shape, not a list or mapping of shapes: a string, a
    PartialShape, or a sequence of dims (ints, Dimensions, strings such as ``"1..4"``; as
    a list of shapes for one input, a one-item list of a string is the same shape)."""
    if isinstance(value, (str, PartialShape)):
        return True
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        return False
    return all(isinstance(d, (int, np.integer, Dimension, str)) and not isinstance(d, bool)
               for d in value)


def _input_shape(name: str, shape: Any) -> PartialShape:
    """``shape`` as the PartialShape of input ``name``; an InputError naming it when it is no
    shape (a negative dim, a dim past 2^63-1, not a sequence)."""
    try:
        ps = PartialShape(shape)
    except (ValueError, TypeError, OverflowError) as e:
        raise InputError(name, f"new shape {shape!r} is not a shape: {e}") from e
    if ps.rank_is_static and any(d.min > INF for d in ps.dims):
        raise InputError(name, f"new shape {shape!r} has a dim past {INF}")
    return ps


def parameter_name(param: Node) -> str:
    """An input's name: its friendly name (ONNX graph input name on import)."""
    return param.friendly_name


def result_name(result: Node) -> str:
    """An output's name: the Result's own friendly name when set (ONNX graph output name on
    import; Results are never replaced, so it survives rewrites), else the smallest tensor name
    of the value it returns, else its producer's friendly name."""
    if result._friendly is not None:
        return result._friendly
    src = result.input_value(0)
    if src.names:
        return min(src.names)
    return src.node.friendly_name if src.node.get_output_size() == 1 \
        else f"{src.node.friendly_name}.{src.index}"
