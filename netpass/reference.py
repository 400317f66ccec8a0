"""Reference evaluation of a whole model with the ops' numpy ``evaluate``.

``infer(model, inputs)`` runs a model once. A stateful model (``ReadValue``/``Assign``) keeps
its variables in a request: ``create_infer_request(model)`` gives a
:class:`ReferenceInferRequest` with ``infer``, ``reset_state()`` and ``query_state()``, as
OpenVINO's infer requests.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from .core.boundary import Constant, Parameter
from .core.containers import api_value, feed_value, is_container
from .core.feeds import (
    FeedSpec,
    Outputs,
    check_feeds,
    is_device_array,
    owned_outputs,
    tensor_aliases,
)
from .core.graph_util import check_unique_names
from .core.model import Model
from .core.state_lengths import StateLength, check_rules, check_state_lengths, read_state_lengths
from .errors import InputError, NetpassError, OutOfMemoryError, StateError
from .ops.indexing.gather import strict_index_bound
from .ops.state import Assign, ReadValue, VariableInfo, model_variables


def input_specs(model: Model) -> tuple[list[FeedSpec], list[tuple[str, Any, Any]]]:
    """What :func:`check_inputs` checks ``model``'s inputs against: the arrays' specs, and
    (name, element type, partial shape) of the container inputs (a sequence, an optional).
    A compiled model keeps them: its inputs do not change."""
    specs, boxed = [], []
    named = list(zip(model.input_names, model.parameters))
    aliases = tensor_aliases((name, p.output(0).names) for name, p in named)
    for name, param in named:
        out = param.output(0)
        et = out.element_type
        if is_container(et):
            boxed.append((name, et, out.partial_shape))
        else:
            bound = strict_index_bound(out) if et.is_integral else None
            specs.append(FeedSpec(name, et.dtype, out.partial_shape, str(et), bound,
                                  tuple(a for a, n in aliases.items() if n == name)))
    return specs, boxed


def output_aliases(model: Model) -> dict[str, str]:
    """``{tensor name: output name}`` for every other tensor name of the model's outputs' ports
    (an :class:`~netpass.core.feeds.Outputs` finds an output by them)."""
    return tensor_aliases((name, r.input_value(0).names)
                          for name, r in zip(model.output_names, model.results))


def check_inputs(model: Model, inputs: Mapping[str, Any],
                 specs: tuple[list[FeedSpec], list[tuple[str, Any, Any]]] | None = None
                 ) -> dict[str, np.ndarray]:
    """Match ``inputs`` to the model's parameters by name; check dtype, rank and static dims
    (``specs``: ``input_specs(model)``, made here when not given)."""
    arrays, containers = specs if specs is not None else input_specs(model)
    if not containers:
        return check_feeds(inputs, arrays)
    boxed = {}
    for name, et, pshape in containers:  # a list for a sequence, None or a value for an optional
        if name not in inputs:
            raise InputError(name, "missing")
        boxed[name] = feed_value(name, inputs[name], et, pshape)
    feeds = check_feeds({k: v for k, v in inputs.items() if k not in boxed}, arrays)
    feeds.update(boxed)
    return feeds


def infer(model: Model, inputs: Mapping[str, Any],
          variables: MutableMapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Run ``model`` on numpy inputs (by input name, or any other tensor name of the input);
    returns ``{output name: array}`` (an :class:`~netpass.core.feeds.Outputs`: also indexable
    by every other tensor name of an output).

    ``variables`` holds the values of a stateful model's variables by id: a ReadValue reads
    its variable from there (an id missing reads the initial value), and what the Assigns
    write is stored there once the whole inference has run, so every ReadValue reads the
    value from before it. Without ``variables`` every variable reads its initial value and
    what the Assigns write is dropped. An input shorter than the past plus the new tokens
    (``model.rt_info``'s rules, :mod:`netpass.core.state_lengths`) is refused.
    """
    check_unique_names(model)  # (else one output of a shared name is silently dropped)
    feeds = check_inputs(model, inputs)
    check_state_lengths(state_length_rules(model), feeds, _lengths_in(variables))
    return _run(model, feeds, variables)


def state_length_rules(model: Model, holder: Model | None = None) -> tuple[StateLength, ...]:
    """The rules of ``model``'s rt_info (:mod:`netpass.core.state_lengths`), checked against
    its inputs and the variables of ``holder`` (default ``model``: a compiled model's requests
    hold the executable's variables, the same ids and shapes, no stage changes one)."""
    rules = read_state_lengths(model.rt_info)
    if rules:
        held = holder if holder is not None else model
        check_rules(rules, {n: p.output(0).partial_shape
                            for n, p in zip(model.input_names, model.parameters)},
                    {v: info.data_shape for v, info in model_variables(held).items()})
    return rules


def _lengths_in(variables: Mapping[str, np.ndarray] | None) -> Callable[[str, int], int | None]:
    """``length(variable, axis)`` of the values in ``variables`` (None: never set)."""
    def length(vid: str, axis: int) -> int | None:
        value = variables.get(vid) if variables is not None else None
        return None if value is None else value.shape[axis]
    return length


def _run(model: Model, feeds: Mapping[str, Any],
         variables: MutableMapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
    """:func:`infer` on ``feeds`` already checked."""
    written: dict[str, np.ndarray] = {}
    by_param = {id(p): np.asarray(feeds[n]) if is_device_array(feeds[n]) else feeds[n]
                for n, p in zip(model.input_names, model.parameters)}
    ops = model.get_ordered_ops()
    remaining: dict[int, int] = {}
    for node in ops:
        for src in node._inputs:
            remaining[id(src.node)] = remaining.get(id(src.node), 0) + 1
    values: dict[int, list[np.ndarray]] = {}
    for node in ops:
        if isinstance(node, Parameter):
            if id(node) not in by_param:
                raise NetpassError(f"Parameter '{node.friendly_name}' is not a model input")
            values[id(node)] = [by_param[id(node)]]
            continue
        args = [values[id(s.node)][s.index] for s in node._inputs]
        try:
            if variables is not None and isinstance(node, ReadValue) \
                    and node.variable_id in variables:
                outs = [variables[node.variable_id]]
            else:
                outs = node.evaluate(args)
        except NetpassError:
            raise
        except MemoryError as e:
            shapes = ", ".join(str(list(a.shape)) for a in args)
            raise OutOfMemoryError(f"{node.type_name} '{node.friendly_name}' ran out of memory "
                                   f"on inputs [{shapes}]: {e}") from e
        except Exception as e:
            shapes = ", ".join(str(list(a.shape)) for a in args)
            raise NetpassError(f"{node.type_name} '{node.friendly_name}' failed on inputs "
                               f"[{shapes}]: {type(e).__name__}: {e}") from e
        values[id(node)] = list(outs)
        if isinstance(node, Assign):
            written[node.variable_id] = outs[0]
        for s in node._inputs:
            k = id(s.node)
            remaining[k] -= 1
            if remaining[k] == 0 and not isinstance(s.node, Parameter):
                values.pop(k, None)
    result: dict[str, np.ndarray] = {}
    for name, r in zip(model.output_names, model.results):
        value = values[id(r)][0] if id(r) in values else None
        result[name] = api_value(value, r.get_output_element_type(0))
    kept = [*by_param.values(), *(variables.values() if variables is not None else ()),
            *(n.value for n in ops if isinstance(n, Constant))]
    result = Outputs(owned_outputs(result, kept), output_aliases(model))
    if variables is not None:
        # copies: an Assign's value may also be an output the caller changes
        variables.update({k: np.array(v, copy=True) for k, v in written.items()})
    return result


def check_state(info: VariableInfo, value: Any) -> np.ndarray:
    """``value`` as a state of the variable ``info``: its element type, a shape the variable's
    partial shape admits (a copy, so the caller's array stays theirs)."""
    try:
        arr = np.array(value, copy=True)
    except MemoryError as e:
        raise OutOfMemoryError(f"variable '{info.variable_id}': out of memory copying a state "
                               f"of shape {list(getattr(value, 'shape', ()))} ({e})") from e
    except (ValueError, TypeError) as e:  # (a ragged list)
        raise StateError(info.variable_id, f"cannot be made an array from a "
                                           f"{type(value).__name__}: {e}") from e
    dtype = info.data_type.dtype
    if dtype is not None and arr.dtype != dtype:
        raise StateError(info.variable_id, f"dtype {arr.dtype}, expected {dtype} "
                                           f"({info.data_type})")
    ps = info.data_shape
    if ps.rank_is_static:
        if arr.ndim != len(ps):
            raise StateError(info.variable_id, f"rank {arr.ndim} (shape {list(arr.shape)}), "
                                               f"expected {ps}")
        for axis, (d, n) in enumerate(zip(ps, arr.shape)):
            if not d.min <= n <= d.max:
                raise StateError(info.variable_id, f"dim {axis} is {n}, expected {d} "
                                                   f"(shape {ps})")
    return arr


class VariableState:
    """One variable of an infer request (OpenVINO's ``VariableState``): ``name`` is the
    variable id; ``state`` its current value (the initial value while it was never set:
    zeros whose dynamic dimensions are 0); assigning ``state`` sets it (type and shape
    checked); ``reset()`` returns it to the initial value."""

    def __init__(self, info: VariableInfo, get: Callable[[], np.ndarray | None],
                 set_: Callable[[np.ndarray], None], reset: Callable[[], object]) -> None:
        self.info = info
        self._get, self._set, self._reset = get, set_, reset

    @property
    def name(self) -> str:
        return self.info.variable_id

    @property
    def state(self) -> np.ndarray:
        value = self._get()
        return self.info.initial_value() if value is None else value

    @state.setter
    def state(self, value: Any) -> None:
        arr = check_state(self.info, value)
        try:
            self._set(arr)
        except MemoryError as e:  # (the device's copy, with room to grow)
            raise OutOfMemoryError(f"variable '{self.name}': out of memory setting a state of "
                                   f"shape {list(arr.shape)} ({e})") from e

    def reset(self) -> None:
        self._reset()

    def guarded(self, guard: Callable[[Callable[..., Any]], Callable[..., Any]]
                ) -> VariableState:
        """The same variable with its read, write and reset each wrapped by ``guard`` (an
        infer request's: refused while an inference of the request runs on another thread)."""
        return VariableState(self.info, guard(self._get), guard(self._set), guard(self._reset))

    def __repr__(self) -> str:
        return f"<VariableState '{self.name}' {list(self.state.shape)}>"


def in_variable_order(states: list[VariableState], order: Sequence[str]) -> list[VariableState]:
    """``states`` in ``order`` (variable ids, :func:`~netpass.ops.state.variable_order` of the
    user's model), any other after them as they came: a compiled model's requests list the
    variables in the order of the model compiled, not of the graph its passes made."""
    rank = {vid: i for i, vid in enumerate(order)}
    return sorted(states, key=lambda st: rank.get(st.name, len(rank)))


class ReferenceInferRequest:
    """Runs ``model`` with the reference evaluator and keeps its variables between
    inferences (one set per request)."""

    def __init__(self, model: Model) -> None:
        check_unique_names(model)
        self.model = model
        self.variables = model_variables(model)
        self._values: dict[str, np.ndarray] = {}
        self._rules = state_length_rules(model)  # (read once: checked on every infer)
        self._lengths = _lengths_in(self._values)

    def infer(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        feeds = check_inputs(self.model, inputs)
        check_state_lengths(self._rules, feeds, self._lengths)
        return _run(self.model, feeds, self._values)

    def state_length(self, variable_id: str, axis: int) -> int | None:
        """The length of a variable's state along ``axis`` (None: never set), on the host."""
        return self._lengths(variable_id, axis)

    def reset_state(self) -> None:
        """Every variable back to its initial value."""
        self._values.clear()

    def query_state(self) -> list[VariableState]:
        """One :class:`VariableState` per variable, in the order of the model's ReadValues
        (:func:`~netpass.ops.state.variable_order`)."""
        values = self._values

        def state(vid: str, info: VariableInfo) -> VariableState:
            return VariableState(info, lambda: None if vid not in values else values[vid].copy(),
                                 lambda arr: values.__setitem__(vid, arr),
                                 lambda: values.pop(vid, None))
        return [state(vid, info) for vid, info in self.variables.items()]


def create_infer_request(model: Model) -> ReferenceInferRequest:
    """A request that keeps ``model``'s variables between its inferences."""
    return ReferenceInferRequest(model)


__all__ = ["infer", "check_inputs", "check_state", "create_infer_request",
           "ReferenceInferRequest", "VariableState", "state_length_rules", "in_variable_order"]
