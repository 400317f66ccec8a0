"""Loop (OpenVINO opset5) and TensorIterator (opset1): a body run again and again.

Both feed their body through input descriptions (invariant, merged = loop-carried with a back
edge, sliced) and build outputs from it (one iteration's value, or every iteration's
concatenated); see :mod:`netpass.core.subgraph`. TensorIterator runs once per part of its
sliced inputs. Loop's inputs 0 and 1 are the trip count (-1: no limit) and the condition to run
the first iteration; ``special_body_ports`` = ``[current_iteration_input_idx,
body_condition_output_idx]`` name the body Parameter that receives the iteration number (-1:
none) and the body Result that decides whether another iteration runs (-1: always).

Shape inference gives a loop-carried Parameter the shape of its initial value and, where the
back edge differs, makes the differing dimensions dynamic (the rank too where it differs) until
the body settles. The number of iterations is known where the trip count is a constant and
both conditions are constant true (TensorIterator: where the sliced dims are static); a
concatenated output is then sized, otherwise dynamic along its axis.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ...core.containers import box
from ...core.dimension import INF, Dimension
from ...core.model import Model
from ...core.node import as_output
from ...core.shape import PartialShape
from ...core.subgraph import (
    ConcatOutput,
    MergedInput,
    MultiSubGraphOp,
    SliceInput,
    evaluate_body,
    infer_body,
    part,
    shape_union,
    slice_range,
)
from ...core.types import OptionalType, Type
from ...errors import NetpassError
from ..base import set_name

# Shape inference rounds of a loop body whose loop-carried shapes change before they settle
# (each round makes a dimension or a rank dynamic, so a body settles within its rank's reach).
MAX_SETTLE_ROUNDS = 32


def _carries(param: Type, back: Type) -> bool:
    """Whether a loop-carried Parameter of type ``param`` takes values of type ``back``: the
    same type, or the value of an optional (present)."""
    if param.merge(back) is not None:
        return True
    return isinstance(param, OptionalType) and param.element.merge(back) is not None


class SubGraphOp(MultiSubGraphOp):
    """One body run per iteration (OpenVINO's ``op::util::SubGraphOp``)."""

    # the number of iterations (and so the concatenated outputs' sizes) may depend on data:
    # the runtime runs these on the host and sizes what follows from the result
    DATA_DEPENDENT_SHAPE = True

    def set_function(self, body: Model) -> None:
        self.bodies = [body]
        self._ensure_body(0)
        self.validate_and_infer_types()

    set_body = set_function

    def get_body(self) -> Model:
        return self.bodies[0]

    # -- shape inference ----------------------------------------------------------------
    def settle_body(self) -> None:
        """Infer the body with loop-carried Parameters general enough for every iteration."""
        body = self.bodies[0]
        self.feed_body_parameters(0)
        params = body._parameters
        merged = [d for d in self.body_inputs(0) if isinstance(d, MergedInput)]
        for _ in range(MAX_SETTLE_ROUNDS):
            infer_body(body)
            changed = False
            for d in merged:
                p = params[d.body_parameter_index]
                back = body._results[d.body_value_index]._inputs[0]
                self.check(_carries(p.element_type, back.element_type),
                           "loop-carried body Parameter {} is {} but its back edge (Result {}) "
                           "gives {}", d.body_parameter_index, p.element_type,
                           d.body_value_index, back.element_type)
                general = shape_union(p.shape, back.partial_shape, keep_bounds=False)
                if general != p.shape:
                    p.shape = general
                    changed = True
            if not changed:
                return
        self.check(False, "the body's loop-carried shapes do not settle")

    def iteration_count(self) -> tuple[int | None, int]:
        """``(exact number of iterations or None, upper bound)`` known at compile time."""
        raise NotImplementedError

    def infer_outputs(self) -> None:
        body = self.bodies[0]
        exact, bound = self.iteration_count()
        initial = {d.body_value_index: self._inputs[d.input_index]
                   for d in self.body_inputs(0) if isinstance(d, MergedInput)}
        self.set_output_size(self.num_outputs_described())
        for o in self.body_outputs(0):
            src = body._results[o.body_value_index]._inputs[0]
            et, ps = src.element_type, src.partial_shape
            if isinstance(o, ConcatOutput):
                ps = self._concat_shape(o, ps, exact, bound)
            elif o.body_value_index in initial and exact in (None, 0):
                # no iteration may run: the output is then the loop-carried initial value
                first = initial[o.body_value_index].partial_shape
                ps = first if exact == 0 else shape_union(ps, first, keep_bounds=False)
            self.set_output_type(o.output_index, et, ps)

    def _concat_shape(self, d: ConcatOutput, ps: PartialShape, exact: int | None,
                      bound: int) -> PartialShape:
        if not ps.rank_is_static:
            return ps
        axis = d.axis + len(ps) if d.axis < 0 else d.axis
        self.check(0 <= axis < len(ps), "concatenated output {}: axis {} of a rank {} value",
                   d.output_index, d.axis, len(ps))
        dims = list(ps)
        one = dims[axis]
        if exact is not None and one.is_static:
            dims[axis] = Dimension(exact * one.min)
        elif bound < INF and one.max < INF:
            dims[axis] = Dimension(0, bound * one.max)
        else:
            dims[axis] = Dimension()
        return PartialShape(dims)

    def sliced_count(self) -> int | None:
        """The number of parts every sliced input has (None: unknown or none sliced)."""
        counts = set()
        for d in self.body_inputs(0):
            if isinstance(d, SliceInput):
                ps = self._inputs[d.input_index].partial_shape
                if not ps.rank_is_static:
                    return None
                dim = ps[d.axis]
                if not dim.is_static:
                    return None
                counts.add(slice_range(d, dim.min)[1])
        self.check(len(counts) <= 1, "sliced inputs have different numbers of parts: {}",
                   sorted(counts))
        return counts.pop() if counts else None

    # -- evaluation -----------------------------------------------------------------------
    def run(self, inputs: Sequence[Any], limit: int | None, condition: bool) -> list[Any]:
        """Iterate the body at most ``limit`` times (None: no limit) while ``condition`` and
        the body's condition Result hold; returns the node's outputs."""
        body = self.bodies[0]
        params = body._parameters
        where = self.where(0)
        current, cond_index = self.special_ports()
        feeds: list[Any] = [None] * len(params)
        sliced = []
        for d in self.body_inputs(0):
            if isinstance(d, SliceInput):
                value = np.asarray(inputs[d.input_index])
                sliced.append((d, value, slice_range(d, value.shape[d.axis])[1]))
            else:
                feeds[d.body_parameter_index] = inputs[d.input_index]
        outs = self.body_outputs(0)
        merged = [m for m in self.body_inputs(0) if isinstance(m, MergedInput)]
        # an optional loop-carried value whose back edge gives the value itself (ONNX allows
        # it): the value is wrapped into a present optional
        wrap = {d for d in merged
                if isinstance(params[d.body_parameter_index].element_type, OptionalType) and
                not isinstance(body._results[d.body_value_index].get_output_element_type(0),
                               OptionalType)}
        picked: dict[int, Any] = {}
        parts: dict[int, list] = {d.output_index: [] for d in outs if isinstance(d, ConcatOutput)}
        i = 0
        while condition and (limit is None or i < limit):
            for d, value, count in sliced:
                if i >= count:
                    raise NetpassError(f"{where}: iteration {i} needs part {i} of input "
                                       f"{d.input_index}, which has {count} parts")
                feeds[d.body_parameter_index] = part(d, value, i, count)
            if current >= 0:
                p = params[current]
                shape = (1,) if p.shape.rank_is_static and len(p.shape) == 1 else ()
                feeds[current] = np.full(shape, i, dtype=p.element_type.dtype)
            results = evaluate_body(body, feeds, where)
            for o in outs:
                if isinstance(o, ConcatOutput):
                    parts[o.output_index].append(results[o.body_value_index])
                elif o.iteration in (-1, i):
                    picked[o.output_index] = results[o.body_value_index]
            for d in merged:
                value = results[d.body_value_index]
                feeds[d.body_parameter_index] = box(value) if d in wrap else value
            if cond_index >= 0:
                condition = bool(np.asarray(results[cond_index]).reshape(-1)[0])
            i += 1
        initial = {d.body_value_index: inputs[d.input_index] for d in merged}
        values: list[Any] = [None] * self.get_output_size()
        for o in outs:
            k = o.output_index
            if isinstance(o, ConcatOutput):
                values[k] = self._concatenate(o, parts[k], body)
            elif k in picked:
                values[k] = picked[k]
            elif i == 0 and o.body_value_index in initial:
                values[k] = initial[o.body_value_index]
            else:
                raise NetpassError(f"{where}: output {k} wants iteration {o.iteration}, but "
                                   f"{i} iterations ran")
        return values

    def _concatenate(self, d: ConcatOutput, values: list, body: Model) -> np.ndarray:
        if values:
            ordered = values if d.stride > 0 else values[::-1]
            return np.concatenate([np.asarray(v) for v in ordered], axis=d.axis)
        src = body._results[d.body_value_index]._inputs[0]
        ps = src.partial_shape
        shape = [dim.min if dim.is_static else 0 for dim in ps] if ps.rank_is_static else [0]
        shape[d.axis] = 0
        return np.zeros(shape, dtype=src.element_type.dtype)


class Loop(SubGraphOp):
    """OpenVINO's Loop-5: inputs ``trip_count``, ``execution_condition``, then the described
    ones."""

    type_name = "Loop"
    version = "opset5"
    ATTRS: ClassVar[dict[str, Any]] = {**MultiSubGraphOp.ATTRS, "special_body_ports": [-1, -1]}
    BODY_ATTRS = (*MultiSubGraphOp.BODY_ATTRS, "special_body_ports")

    def special_ports(self) -> tuple[int, int]:
        current, cond = self.special_body_ports
        return int(current), int(cond)

    def special_parameters(self, body: int) -> tuple[int, ...]:
        current = self.special_ports()[0]
        return (current,) if current >= 0 else ()

    def set_special_body_ports(self, ports: Any) -> None:
        self.special_body_ports = [int(p) for p in ports]
        self.validate_and_infer_types()

    def get_special_body_ports(self) -> list[int]:
        return list(self.special_body_ports)

    def infer_types(self) -> None:
        self.check(self.get_input_size() >= 2, "needs trip_count and execution_condition "
                   "inputs, got {}", self.get_input_size())
        trip, cond = self._inputs[0], self._inputs[1]
        self.check(trip.element_type.is_integral or trip.element_type.is_dynamic,
                   "trip_count must be an integer, got {}", trip.element_type)
        self.check(cond.element_type.name in ("boolean", "dynamic"),
                   "execution_condition must be boolean, got {}", cond.element_type)
        for what, o in (("trip_count", trip), ("execution_condition", cond)):
            ps = o.partial_shape
            self.check(not ps.rank_is_static or len(ps) == 0 or
                       (len(ps) == 1 and ps[0].compatible(1)),
                       "{} must be a scalar or hold one element, got shape {}", what, ps)
        if not self.bodies:  # being built (set_function)
            self.set_output_size(0)
            return
        self.check_descriptions()
        body = self.bodies[0]
        current, cond_index = self.special_ports()
        if current >= 0:
            self.check(current < len(body._parameters), "current_iteration Parameter {} of a "
                       "body with {}", current, len(body._parameters))
            p = body._parameters[current]
            self.check(p.element_type.is_integral and (not p.shape.rank_is_static or
                                                       len(p.shape) <= 1),
                       "the current iteration Parameter must be an integer scalar or "
                       "[1], got {} {}", p.element_type, p.shape)
        self.settle_body()
        if cond_index >= 0:
            self.check(cond_index < len(body._results), "body_condition Result {} of a body "
                       "with {}", cond_index, len(body._results))
            out = body._results[cond_index]._inputs[0]
            self.check(out.element_type.name in ("boolean", "dynamic"),
                       "the body condition must be boolean, got {}", out.element_type)
        self.infer_outputs()
        # a Loop without a known bound would spin forever if folded on a constant condition
        self.set_foldable(self.deterministic() and self.iteration_count()[1] < INF)

    def iteration_count(self) -> tuple[int | None, int]:
        trip = self.input_constant(0)
        cond = self.input_constant(1)
        bound = INF
        if trip is not None:
            t = int(np.asarray(trip).reshape(-1)[0])
            bound = t if t >= 0 else INF
        if cond is not None and not bool(np.asarray(cond).reshape(-1)[0]):
            return 0, 0
        _, cond_index = self.special_ports()
        body_true = cond_index < 0 or self._condition_stays_true(cond_index)
        sliced = self.sliced_count()
        if sliced is not None:
            bound = min(bound, sliced)
        if cond is not None and body_true and bound < INF:
            return bound, bound
        return None, bound

    def _condition_stays_true(self, cond_index: int) -> bool:
        """Whether the body's condition is true at every iteration: a true constant, or the
        loop-carried value it feeds back unchanged, starting true (ONNX's ``cond_out =
        cond_in``)."""
        body = self.bodies[0]
        src = body._results[cond_index]._inputs[0]
        if src.value is not None:
            return bool(np.all(src.value))
        param = body.get_parameter_index(src.node)
        for d in self.body_inputs(0):
            if isinstance(d, MergedInput) and d.body_parameter_index == param >= 0 and \
                    d.body_value_index == cond_index:
                first = self.input_constant(d.input_index)
                return first is not None and bool(np.all(first))
        return False

    def evaluate(self, inputs: Sequence[Any]) -> list[Any]:
        trip = int(np.asarray(inputs[0]).reshape(-1)[0])
        cond = bool(np.asarray(inputs[1]).reshape(-1)[0])
        return self.run(inputs, trip if trip >= 0 else None, cond)


class TensorIterator(SubGraphOp):
    """OpenVINO's TensorIterator-1: one iteration per part of its sliced inputs."""

    type_name = "TensorIterator"
    version = "opset1"

    def infer_types(self) -> None:
        if not self.bodies:  # being built (set_body)
            self.set_output_size(0)
            return
        self.check_descriptions()
        self.settle_body()
        self.infer_outputs()
        self.set_foldable(self.deterministic())

    def iteration_count(self) -> tuple[int | None, int]:
        n = self.sliced_count()
        return (n, n) if n is not None else (None, INF)

    def evaluate(self, inputs: Sequence[Any]) -> list[Any]:
        counts = {slice_range(d, np.shape(inputs[d.input_index])[d.axis])[1]
                  for d in self.body_inputs(0) if isinstance(d, SliceInput)}
        if len(counts) != 1:
            raise NetpassError(f"{self.where(0)}: sliced inputs give {sorted(counts)} parts "
                               "(a TensorIterator needs one count from at least one)")
        return self.run(inputs, counts.pop(), True)


def loop(trip_count: Any, execution_condition: Any, name: str | None = None) -> Loop:
    """A Loop without a body yet (OpenVINO's ``opset5.loop``): then ``set_function``,
    ``set_special_body_ports``, ``set_*_input``, ``get_iter_value`` /
    ``get_concatenated_slices``."""
    return set_name(Loop([as_output(trip_count), as_output(execution_condition)]), name)


def tensor_iterator(name: str | None = None) -> TensorIterator:
    """A TensorIterator without a body yet (OpenVINO's ``opset1.tensor_iterator``)."""
    return set_name(TensorIterator([]), name)


__all__ = ["loop", "tensor_iterator"]
