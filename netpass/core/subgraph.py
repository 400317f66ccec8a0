"""Ops that hold sub-graphs (OpenVINO's ``op::util::MultiSubGraphOp``): If, Loop and
TensorIterator keep their bodies as :class:`~netpass.core.model.Model` objects and say, per
body, how the node's inputs feed the body's Parameters and how the body's Results become the
node's outputs.

Input descriptions (one per body Parameter that the node feeds):

- :class:`InvariantInput`: the same value every iteration (and every value a body captures
  from the outer graph: it is an input of the node, never a hidden reference);
- :class:`MergedInput`: a loop-carried value, the input at the first iteration and the body
  Result ``body_value_index`` (the back edge) at the next ones;
- :class:`SliceInput`: iteration ``i`` sees part ``i`` of the input cut along ``axis``.

Output descriptions: :class:`BodyOutput` (a body Result's value at one iteration, the last by
default) and :class:`ConcatOutput` (the Result's values of every iteration concatenated along
``axis``). The slicing and concatenation follow OpenVINO's TensorIterator: ``start`` and
``end`` are element indices along the axis, both inclusive, negative ones counted from the
end; the range is cut into parts of ``part_size``, visited backwards when ``stride`` < 0.

The bodies are part of the node: shape inference sets the body Parameters from the node's
inputs and re-infers the body; cloning the node clones its bodies; the graph's traversal,
folding, passes and writers reach them through :func:`subgraph_ops`.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..errors import NetpassError
from .boundary import Constant, Parameter, Result
from .dimension import Dimension
from .node import Node
from .shape import PartialShape
from .types import ContainerType, Type

if TYPE_CHECKING:
    from .model import Model


@dataclass(frozen=True)
class InvariantInput:
    """Node input ``input_index`` feeds body Parameter ``body_parameter_index`` unchanged."""

    input_index: int
    body_parameter_index: int


@dataclass(frozen=True)
class MergedInput:
    """A loop-carried value: node input ``input_index`` at the first iteration, then the body
    Result ``body_value_index`` of the iteration before (OpenVINO's back edge)."""

    input_index: int
    body_parameter_index: int
    body_value_index: int


@dataclass(frozen=True)
class SliceInput:
    """Iteration ``i`` sees part ``i`` of node input ``input_index`` along ``axis``."""

    input_index: int
    body_parameter_index: int
    start: int
    stride: int
    part_size: int
    end: int
    axis: int


@dataclass(frozen=True)
class BodyOutput:
    """Node output ``output_index`` is body Result ``body_value_index`` at iteration
    ``iteration`` (-1: the last)."""

    body_value_index: int
    output_index: int
    iteration: int = -1


@dataclass(frozen=True)
class ConcatOutput:
    """Node output ``output_index`` concatenates body Result ``body_value_index`` of every
    iteration along ``axis`` (backwards when ``stride`` < 0)."""

    body_value_index: int
    output_index: int
    start: int
    stride: int
    part_size: int
    end: int
    axis: int


InputDescription = InvariantInput | MergedInput | SliceInput
OutputDescription = BodyOutput | ConcatOutput


def slice_range(desc: SliceInput | ConcatOutput, length: int) -> tuple[int, int]:
    """``(first, count)``: the first element index and the number of parts of a slicing
    ``desc`` over an axis of ``length`` elements (start and end inclusive)."""
    start = desc.start + length if desc.start < 0 else desc.start
    end = desc.end + length if desc.end < 0 else desc.end
    lo, hi = min(start, end), max(start, end)
    if lo < 0 or hi >= length and length:
        raise NetpassError(f"slice [{desc.start}, {desc.end}] lies outside an axis of "
                           f"{length} elements")
    count = (hi - lo + 1) // desc.part_size if length else 0
    return lo, count


def part(desc: SliceInput, value: np.ndarray, i: int, count: int) -> np.ndarray:
    """Part ``i`` (in iteration order) of ``value`` for a sliced input."""
    lo, _ = slice_range(desc, value.shape[desc.axis])
    k = i if desc.stride > 0 else count - 1 - i
    index = [slice(None)] * value.ndim
    index[desc.axis] = slice(lo + k * desc.part_size, lo + (k + 1) * desc.part_size)
    return value[tuple(index)]


def shape_union(a: PartialShape, b: PartialShape, keep_bounds: bool = True) -> PartialShape:
    """A shape both ``a`` and ``b`` fit: equal dims kept, others an interval covering both
    (``keep_bounds``) or fully dynamic; a dynamic rank where the ranks differ."""
    if not a.rank_is_static or not b.rank_is_static or len(a) != len(b):
        return PartialShape(None)
    dims = []
    for x, y in zip(a, b):
        if x.min == y.min and x.max == y.max:
            dims.append(x if x.symbol is y.symbol else Dimension(x.min, x.max))
        elif keep_bounds:
            dims.append(Dimension(min(x.min, y.min), max(x.max, y.max)))
        else:
            dims.append(Dimension())
    return PartialShape(dims)


def set_body_parameter(param: Node, element_type: Type, shape: PartialShape) -> None:
    """Give a body Parameter the type and shape the node feeds it (re-inferred by the caller
    with the rest of the body)."""
    param.element_type = element_type
    param.shape = shape


def infer_body(body: Model) -> None:
    """Re-infer every node of a body, producers first (no change log: the body is part of its
    node, whose own re-inference is what a log records)."""
    for node in body.get_ordered_ops():
        node._infer()


def evaluate_body(body: Model, inputs: Sequence[Any], where: str) -> list[Any]:
    """The values of ``body``'s Results for the values of its Parameters (in order); errors
    name the node inside the body and ``where`` the body sits."""
    params = body._parameters
    if len(inputs) != len(params):
        raise NetpassError(f"{where}: {len(inputs)} values for {len(params)} body Parameters")
    for i, v in enumerate(inputs):
        if v is None:
            raise NetpassError(f"{where}: body Parameter {i} ('{params[i].friendly_name}') "
                               "is fed by no input")
    values: dict[int, list[Any]] = {id(p): [v] for p, v in zip(params, inputs)}
    for node in body.get_ordered_ops():
        key = id(node)
        if key in values:
            continue
        args = [values[id(s.node)][s.index] for s in node._inputs]
        try:
            values[key] = list(node.evaluate(args))
        except NetpassError as e:
            if not str(e).startswith(where):
                e.args = (f"{where}: {e}",) + e.args[1:]
            raise
        except Exception as e:
            shapes = ", ".join(str(list(np.shape(a))) for a in args)
            raise NetpassError(f"{where}: {node.type_name} '{node.friendly_name}' failed on "
                               f"inputs [{shapes}]: {type(e).__name__}: {e}") from e
    return [values[id(r)][0] for r in body._results]


class MultiSubGraphOp(Node):
    """Base of ops with bodies: ``bodies`` (Models), and per body its input and output
    descriptions (see the module doc). Subclasses infer and evaluate; this class keeps the
    bookkeeping OpenVINO's ``MultiSubGraphOp`` and ``SubGraphOp`` offer (also the builder
    methods of OpenVINO's Python API: ``set_invariant_input``, ``set_merged_input``,
    ``set_sliced_input``, ``get_iter_value``, ``get_concatenated_slices``)."""

    ATTRS: ClassVar[dict[str, Any]] = {"bodies": [], "input_descriptions": [],
                                       "output_descriptions": []}
    # attributes that are the structure of the op (IR writes them as bodies and port maps,
    # not as <data>)
    BODY_ATTRS: ClassVar[tuple[str, ...]] = ("bodies", "input_descriptions",
                                             "output_descriptions")
    # names of the bodies, for messages and IR elements (``body``; If: then/else)
    BODY_NAMES: ClassVar[tuple[str, ...]] = ("body",)
    bodies: list[Model]
    input_descriptions: list[list[InputDescription]]
    output_descriptions: list[list[OutputDescription]]

    def __init__(self, inputs: Any = (), **attrs: Any) -> None:
        for key in ("input_descriptions", "output_descriptions"):
            if key in attrs:
                attrs[key] = [list(d) for d in attrs[key]]
        super().__init__(inputs, **attrs)
        _LIVE.add(self)

    # -- bodies ---------------------------------------------------------------------------
    def get_function(self, index: int = 0) -> Model:
        return self.bodies[index]

    def get_internal_subgraphs_size(self) -> int:
        return len(self.bodies)

    def body_name(self, index: int) -> str:
        names = self.BODY_NAMES
        return names[index] if index < len(names) else f"body{index}"

    def where(self, index: int) -> str:
        return f"{self.type_name} '{self.friendly_name}' {self.body_name(index)}"

    def clone_with_new_inputs(self, inputs: Sequence[Any]) -> Node:
        attrs = self.get_attributes()
        attrs["bodies"] = [b.clone() for b in self.bodies]
        return type(self)(inputs, **attrs)

    def set_foldable(self, value: bool) -> None:
        """Whether this node may be folded now: an instance value over the class's
        ``FOLDABLE``, since the bodies and output types decide (see :meth:`deterministic`)."""
        self.__dict__["FOLDABLE"] = value

    def deterministic(self) -> bool:
        """Whether the node may be folded at compile time: every op of every body gives the
        same values for the same inputs (no random draw, no state), and every output is a
        tensor (a Constant holds no sequence or optional)."""
        if any(isinstance(p.et, ContainerType) for p in self._outs):
            return False
        for body in self.bodies:
            for n in body.get_ordered_ops():
                if isinstance(n, (Parameter, Constant, Result)):
                    continue
                if not n.FOLDABLE:
                    return False
        return True

    # -- descriptions ---------------------------------------------------------------------
    def _ensure_body(self, index: int) -> None:
        while len(self.input_descriptions) <= index:
            self.input_descriptions.append([])
        while len(self.output_descriptions) <= index:
            self.output_descriptions.append([])

    def _add_input(self, value: Any, desc_of: Any, body: int = 0) -> None:
        from .node import as_output
        index = self.get_input_size()
        self._ensure_body(body)
        self.input_descriptions[body].append(desc_of(index))
        self.set_arguments([*self._inputs, as_output(value)])
        self.validate_and_infer_types()

    def _param_index(self, param: Node, body: int = 0) -> int:
        index = self.bodies[body].get_parameter_index(param)
        if index < 0:
            raise NetpassError(f"{self.where(body)}: {param!r} is not one of its Parameters")
        return index

    def _result_index(self, value: Any, body: int = 0) -> int:
        from .node import as_output
        index = self.bodies[body].get_result_index(as_output(value))
        if index < 0:
            raise NetpassError(f"{self.where(body)}: {value!r} does not feed one of its Results")
        return index

    def num_outputs_described(self) -> int:
        return max((d.output_index + 1 for descs in self.output_descriptions for d in descs),
                   default=0)

    def set_invariant_input(self, body_parameter: Node, value: Any) -> None:
        index = self._param_index(body_parameter)
        self._add_input(value, lambda i: InvariantInput(i, index))

    def set_merged_input(self, body_parameter: Node, initial_value: Any,
                         successive_value: Any) -> None:
        index = self._param_index(body_parameter)
        back = self._result_index(successive_value)
        self._add_input(initial_value, lambda i: MergedInput(i, index, back))

    def set_sliced_input(self, body_parameter: Node, value: Any, start: int, stride: int,
                         part_size: int, end: int, axis: int) -> None:
        index = self._param_index(body_parameter)
        self._add_input(value, lambda i: SliceInput(i, index, start, stride, part_size, end,
                                                    axis))

    def _add_output(self, desc_of: Any, body: int = 0) -> Any:
        self._ensure_body(body)
        index = self.num_outputs_described()
        self.output_descriptions[body].append(desc_of(index))
        self.validate_and_infer_types()
        return self.output(index)

    def get_iter_value(self, body_value: Any, iteration: int = -1) -> Any:
        back = self._result_index(body_value)
        return self._add_output(lambda i: BodyOutput(back, i, iteration))

    def get_concatenated_slices(self, body_value: Any, start: int, stride: int, part_size: int,
                                end: int, axis: int) -> Any:
        back = self._result_index(body_value)
        return self._add_output(lambda i: ConcatOutput(back, i, start, stride, part_size, end,
                                                       axis))

    # -- checks shared by the subclasses --------------------------------------------------
    def check_descriptions(self, complete: bool = False) -> None:
        """Every description points at an existing input, body Parameter and Result, and no
        body Parameter is fed twice; with ``complete`` (lint), every body Parameter is fed
        (the special ones aside). Shape inference does not ask that: the builder methods
        feed the Parameters one at a time."""
        n_in = self.get_input_size()
        self.check(len(self.input_descriptions) <= len(self.bodies) and
                   len(self.output_descriptions) <= len(self.bodies),
                   "has descriptions for {} bodies but {} bodies",
                   max(len(self.input_descriptions), len(self.output_descriptions)),
                   len(self.bodies))
        for b, body in enumerate(self.bodies):
            n_params, n_results = len(body._parameters), len(body._results)
            fed: set[int] = set()
            for d in self.body_inputs(b):
                self.check(0 <= d.input_index < n_in, "{}: input description {} names input "
                           "{}, the node has {} inputs", self.body_name(b), d, d.input_index, n_in)
                self.check(0 <= d.body_parameter_index < n_params, "{}: {} names Parameter {}, "
                           "the body has {}", self.body_name(b), d, d.body_parameter_index,
                           n_params)
                self.check(d.body_parameter_index not in fed, "{}: body Parameter {} is fed "
                           "twice", self.body_name(b), d.body_parameter_index)
                fed.add(d.body_parameter_index)
                if isinstance(d, MergedInput):
                    self.check(0 <= d.body_value_index < n_results, "{}: {} names Result {}, "
                               "the body has {}", self.body_name(b), d, d.body_value_index,
                               n_results)
            for o in self.body_outputs(b):
                self.check(0 <= o.body_value_index < n_results, "{}: output description {} "
                           "names Result {}, the body has {}", self.body_name(b), o,
                           o.body_value_index, n_results)
            unfed = set(range(n_params)) - fed - set(self.special_parameters(b))
            self.check(not complete or not unfed, "{}: body Parameters {} are fed by no input",
                       self.body_name(b), sorted(unfed))

    def special_ports(self) -> tuple[int, int]:
        """``(current iteration Parameter, condition Result)`` of body 0 (Loop's special
        body ports); -1 where there is none."""
        return -1, -1

    def special_parameters(self, body: int) -> tuple[int, ...]:
        """Body Parameters the op feeds itself (Loop's current iteration)."""
        return ()

    def body_inputs(self, body: int) -> list[InputDescription]:
        return self.input_descriptions[body] if body < len(self.input_descriptions) else []

    def body_outputs(self, body: int) -> list[OutputDescription]:
        return self.output_descriptions[body] if body < len(self.output_descriptions) else []

    def feed_body_parameters(self, body: int) -> None:
        """Set every fed body Parameter's type and shape from the node's inputs: a slice
        keeps ``part_size`` elements of its axis."""
        params = self.bodies[body]._parameters
        for d in self.body_inputs(body):
            src = self._inputs[d.input_index]
            ps = src.partial_shape
            if isinstance(d, SliceInput) and ps.rank_is_static:
                axis = d.axis + len(ps) if d.axis < 0 else d.axis
                self.check(0 <= axis < len(ps), "sliced input {} has rank {}, axis {}",
                           d.input_index, len(ps), d.axis)
                dims = list(ps)
                dims[axis] = Dimension(d.part_size)
                ps = PartialShape(dims)
            set_body_parameter(params[d.body_parameter_index], src.element_type, ps)

    def __repr__(self) -> str:
        base = super().__repr__()
        return base[:-1] + f" bodies={len(self.bodies)}>"


# Every op with bodies alive in the process: while there is none, walks that look for bodies
# (every GraphRewrite, ConstantFolding) cost nothing.
_LIVE: weakref.WeakSet[MultiSubGraphOp] = weakref.WeakSet()


def subgraph_ops(model: Model) -> list[MultiSubGraphOp]:
    """The ops of ``model`` (not of its bodies) that hold bodies."""
    if not _LIVE:
        return []
    return [n for n in model.get_ordered_ops() if isinstance(n, MultiSubGraphOp)]


def rewrite_bodies(model: Model, run: Callable[[Model], bool]) -> bool:
    """Run ``run`` (a pass's work on one graph, True when it changed it) on every body of
    every op of ``model``, at any depth, as OpenVINO's GraphRewrite and ConstantFolding do;
    an op whose body changed is re-inferred. True when a body changed."""
    changed = False
    for op in subgraph_ops(model):
        touched = False
        for body in op.bodies:
            touched |= bool(run(body))
            touched |= rewrite_bodies(body, run)
        if touched:
            op.validate_and_infer_types()
            changed = True
    return changed


def all_bodies(model: Model) -> Iterator[tuple[MultiSubGraphOp, int, Model]]:
    """``(op, body index, body)`` of every body at any depth under ``model``, outer first."""
    stack = [model]
    while stack:
        m = stack.pop()
        for op in subgraph_ops(m):
            for i, body in enumerate(op.bodies):
                yield op, i, body
                stack.append(body)


__all__ = ["InvariantInput", "MergedInput", "SliceInput", "BodyOutput", "ConcatOutput",
           "MultiSubGraphOp", "evaluate_body", "infer_body", "shape_union", "slice_range",
           "part", "subgraph_ops", "all_bodies", "set_body_parameter", "rewrite_bodies"]
