"""MakeStateful: Parameter/Result pairs become ReadValue/Assign variables (OpenVINO's
``ov::pass::MakeStateful``), and the helpers that prepare a decoder's key/value cache for it.

A decoder exported with ``past_key_values`` takes the cache as inputs (``past_key_values.N.key``)
and returns the grown cache as outputs (``present.N.key``); the caller feeds each step's
outputs back as the next step's inputs. ``MakeStateful`` turns every such pair into one
variable that the infer request keeps: the Parameter becomes a ``ReadValue`` (keeping its
tensor names and rt_info), the value the Result returned goes to an ``Assign``, and both leave
the model's inputs and outputs.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...core.boundary import Parameter, Result
from ...core.graph_util import copy_runtime_info
from ...core.model import Model, parameter_name, result_name
from ...core.node import Node
from ...errors import NetpassError
from ...ops.indexing import Gather
from ...ops.movement import Broadcast, Concat
from ...ops.shape_ops import ShapeOf
from ...ops.state import Assign, ReadValue
from ...passes.base import ModelPass
from ..utils import const, make


def variable_name(param_name: str, result_name: str) -> str:
    """A pair's variable id, as OpenVINO's MakeStateful derives it: the two names joined."""
    return param_name + result_name


def _find_parameter(model: Model, name: str) -> Parameter:
    for p in model.parameters:
        if parameter_name(p) == name or name in p.output(0).names:
            return p
    raise NetpassError(f"MakeStateful: '{name}' is not the name of a model input; inputs are "
                       f"{model.input_names}")


def _find_result(model: Model, name: str, taken: set[int]) -> Result:
    """The output named ``name``: the Result of that name, else one returning a tensor of
    that name. Several Results may return one tensor: the first not ``taken`` by an earlier
    pair is used (OpenVINO's MakeStateful: "the order is not important, data is the same")."""
    named = [r for r in model.results if result_name(r) == name] or \
        [r for r in model.results if name in r.input_value(0).names]
    if not named:
        raise NetpassError(f"MakeStateful: '{name}' is not the name of a model output; "
                           f"outputs are {model.output_names}")
    for r in named:
        if id(r) not in taken:
            taken.add(id(r))
            return r
    raise NetpassError(f"MakeStateful: every output named '{name}' is already in a pair")


class MakeStateful(ModelPass):
    """Turns (Parameter, Result) pairs into ReadValue/Assign state.

    Turn each (Parameter, Result) pair into one variable: ``pairs`` maps an input name to an
    output name (or is a sequence of ``(Parameter, Result)`` node pairs), as OpenVINO's
    ``MakeStateful``. The variable id is the two names joined (the nodes' friendly names for
    node pairs); its type and partial shape are the Parameter's. The Parameter's consumers
    read a ``ReadValue`` without an initial value (a new request reads zeros whose dynamic
    dimensions are 0: an empty past); the Result's value feeds an ``Assign`` (with the
    Result's rt_info), added to the model's sinks; the Parameter and the Result leave the model."""

    changes_model_io = True  # the pairs leave the model's inputs and outputs

    def __init__(self, pairs: Mapping[str, str] | Sequence[tuple[Node, Node]]) -> None:
        super().__init__()
        self.pairs = dict(pairs) if isinstance(pairs, Mapping) else list(pairs)

    def _resolve(self, model: Model) -> list[tuple[Parameter, Result, str]]:
        if isinstance(self.pairs, dict):
            taken: set[int] = set()
            found = [(_find_parameter(model, p), _find_result(model, r, taken),
                      variable_name(p, r)) for p, r in self.pairs.items()]
        else:
            found = []
            for p, r in self.pairs:
                if not (isinstance(p, Parameter) and isinstance(r, Result)):
                    raise NetpassError(f"MakeStateful: pairs must be (Parameter, Result), got "
                                       f"({type(p).__name__}, {type(r).__name__})")
                found.append((p, r, variable_name(p.friendly_name, r.friendly_name)))
        for kind, index in (("input", 0), ("output", 1)):
            nodes = [f[index] for f in found]
            if len({id(n) for n in nodes}) != len(nodes):
                raise NetpassError(f"MakeStateful: an {kind} appears in two pairs")
        return found

    def run_on_model(self, model: Model) -> bool:
        found = self._resolve(model)
        sinks = []
        for param, res, var_id in found:
            if model.get_parameter_index(param) < 0 or model.get_result_index(res) < 0:
                raise NetpassError(f"MakeStateful: '{param.friendly_name}' / "
                                   f"'{res.friendly_name}' is not an input / output of the model")
            out = param.output(0)
            value = res.input_value(0)
            if not out.element_type.compatible(value.element_type) or \
                    not out.partial_shape.compatible(value.partial_shape):
                raise NetpassError(
                    f"MakeStateful: input '{parameter_name(param)}' is {out.element_type}"
                    f"{out.partial_shape} but output '{result_name(res)}' is "
                    f"{value.element_type}{value.partial_shape}: they cannot be one variable")
            read = ReadValue([], variable_id=var_id, variable_type=out.element_type,
                             variable_shape=out.partial_shape)
            copy_runtime_info(param, read)
            out.replace(read.output(0))
            assign = Assign([value], variable_id=var_id)
            copy_runtime_info(res, assign)  # (fused names: the Assign stands for the Result)
            sinks.append(assign)
            model.remove_parameter(param)
            model.remove_result(res)
        model.add_sinks(sinks)
        return bool(found)


# Input and output name prefixes of a transformers export's key/value cache, longest first.
_PAST = re.compile(r"^(past_key_values|past)[._]?(.+)$")
_PRESENT = re.compile(r"^(present_key_values|present)[._]?(.+)$")


def _cache_key(pattern: re.Pattern, name: str) -> tuple[str, ...] | None:
    m = pattern.match(name)
    return tuple(re.split(r"[._]", m.group(2))) if m else None


def find_kv_cache_pairs(model: Model) -> dict[str, str]:
    """The past/present pairs of a decoder exported with its key/value cache, as
    ``{input name: output name}`` for :class:`MakeStateful`, in input order.

    An input named ``past_key_values<sep>REST`` or ``past<sep>REST`` pairs with the output
    named ``present<sep>REST`` or ``present_key_values<sep>REST`` whose REST has the same parts
    (``.`` and ``_`` both separate): ``past_key_values.0.key`` / ``present.0.key`` (optimum,
    transformers), ``past_key_0`` / ``present_key_0``, ``past.0.value`` / ``present.0.value``.
    A pair must agree in element type and rank. An empty dict when there is none."""
    outputs: dict[tuple[str, ...], str] = {}
    for name in model.output_names:
        key = _cache_key(_PRESENT, name)
        if key is not None:
            if key in outputs:
                raise NetpassError(f"find_kv_cache_pairs: outputs '{outputs[key]}' and '{name}' "
                                   "name the same cache entry")
            outputs[key] = name
    pairs: dict[str, str] = {}
    for name, param in zip(model.input_names, model.parameters):
        key = _cache_key(_PAST, name)
        if key is None or key not in outputs:
            continue
        out = model.output(outputs[key])
        mine = param.output(0)
        if mine.element_type.compatible(out.element_type) and \
                mine.partial_shape.rank.compatible(out.partial_shape.rank):
            pairs[name] = outputs.pop(key)
    return pairs


class BuildStateInitializer(ModelPass):
    """Gives empty ReadValues zeros whose batch follows an input.

    Give every ReadValue without an initial value one whose batch follows an input, so
    that a decoder exported with a dynamic batch runs at any batch (as optimum-intel's
    ``build_state_initializer``): the variable's dimension ``state_axis`` becomes
    ``input_name``'s dimension ``input_axis``, its other dynamic dimensions 0. Variables whose
    ``state_axis`` is static are left alone (their zeros already have the right batch)."""

    def __init__(self, input_name: str = "input_ids", input_axis: int = 0,
                 state_axis: int = 0) -> None:
        super().__init__()
        self.input_name, self.input_axis, self.state_axis = input_name, input_axis, state_axis

    def run_on_model(self, model: Model) -> bool:
        source = model.input(self.input_name)
        batch: Any = None
        changed = False
        for node in model.get_ordered_ops():
            if not isinstance(node, ReadValue) or node.get_input_size():
                continue
            ps = node.get_output_partial_shape(0)
            if not ps.rank_is_static or ps[self.state_axis].is_static:
                continue
            if batch is None:
                shape = make(ShapeOf, [source]).output(0)
                batch = make(Gather, [shape, const(np.array([self.input_axis], np.int64)),
                                        const(np.array(0, np.int64))]).output(0)
            dims = [batch if axis == self.state_axis else
                    const(np.array([d.min], np.int64)) for axis, d in enumerate(ps)]
            target = make(Concat, dims, axis=0).output(0)
            zero = const(np.zeros((), node.get_output_element_type(0).dtype))
            init = make(Broadcast, [zero, target]).output(0)
            node.set_arguments([init])
            node.validate_and_infer_types()
            changed = True
        if changed:
            model.validate_nodes_and_infer_types()
        return changed


__all__ = ["MakeStateful", "BuildStateInitializer", "find_kv_cache_pairs", "variable_name"]
