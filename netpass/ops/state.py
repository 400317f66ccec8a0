"""State: ``ReadValue`` and ``Assign`` (OpenVINO opset6), the ops of stateful models.

A *variable* is a tensor that an infer request keeps from one inference to the next (the key
and value cache of a decoder). ``ReadValue`` reads it; ``Assign`` writes the value the request
keeps for the next inference. Both name the variable by ``variable_id``; the ReadValue also
carries the variable's element type and partial shape (OpenVINO's ``VariableInfo``), which is
its output type and shape.

A variable never set (a new request, or after ``reset_state()``) reads as its initial value:
the ReadValue's input when it has one (an init sub-graph), else zeros whose dynamic
dimensions are 0 (interval dimensions take their lower bound): an empty past.

``Assign`` is a *sink* (``netpass.core.boundary.Sink``): nothing in the model reads it, so a
``Model`` lists it in ``sinks`` to keep it in ``get_ordered_ops()``. Neither op may be
folded: their values change at run time. The reference ``evaluate`` of a ReadValue is the
initial value and an Assign's is its input; holding variables across inferences is the job
of the infer requests (``netpass.reference.ReferenceInferRequest``, the runtime's requests).

ONNX has no state, so there are no import rules and the export rule refuses them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.boundary import Sink
from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import Type, dynamic
from ..errors import NetpassError, UnsupportedOpError
from .base import set_name, to_output
from .registry import onnx_export

__all__ = ["read_value", "assign"]


@dataclass(frozen=True)
class VariableInfo:
    """A variable's id, element type and partial shape (OpenVINO's ``VariableInfo``)."""

    variable_id: str
    data_type: Type
    data_shape: PartialShape

    def initial_value(self) -> np.ndarray:
        """Zeros of the variable's type whose dynamic dimensions are 0 (interval dimensions
        their lower bound): what a variable never set reads as, without an init sub-graph."""
        if not self.data_shape.rank_is_static:
            raise NetpassError(f"variable '{self.variable_id}' has a dynamic rank and no init "
                               "sub-graph: its initial value has no shape")
        if self.data_type.dtype is None:
            raise NetpassError(f"variable '{self.variable_id}' has element type "
                               f"{self.data_type}, which has no initial value")
        return np.zeros([d.min for d in self.data_shape], dtype=self.data_type.dtype)


class ReadValue(Node):
    """Reads variable ``variable_id``; optional input 0 is the initial value (the init
    sub-graph). Output: the variable's type and shape (``variable_type``,
    ``variable_shape``); where those are dynamic and an init input exists (IR written by
    OpenVINO's opset3 ReadValue), the init input's."""

    type_name = "ReadValue"
    version = "opset6"
    # v3: no variable_type / variable_shape (the initial value's, as v6 without them)
    IR_VERSIONS = ("opset3", "opset6")
    ATTRS = {"variable_id": "", "variable_type": dynamic,
             "variable_shape": PartialShape(None)}
    variable_shape: Any
    variable_type: Any
    FOLDABLE = False

    def infer_types(self) -> None:
        self.check(self.get_input_size() <= 1, "expects at most 1 input (the initial value), "
                                              "got {}", self.get_input_size())
        self.check(bool(self.variable_id), "needs a variable_id")
        self.variable_type = Type.of(self.variable_type)
        self.variable_shape = PartialShape(self.variable_shape)
        et, ps = self.variable_type, self.variable_shape
        if self.get_input_size():
            init_et = self.get_input_element_type(0)
            init_ps = self.get_input_partial_shape(0)
            self.check(et.compatible(init_et), "variable '{}' is {}, its initial value {}",
                       self.variable_id, et, init_et)
            self.check(init_ps.refines(ps) or not init_ps.rank_is_static,
                       "variable '{}' has shape {}, which does not include its initial value's "
                       "{}", self.variable_id, ps, init_ps)
            if et.is_dynamic:
                et = init_et
            if not ps.rank_is_static:
                ps = init_ps
        self.set_output_type(0, et, ps)

    @property
    def variable_info(self) -> VariableInfo:
        return VariableInfo(self.variable_id, self.get_output_element_type(0),
                            self.get_output_partial_shape(0))

    def initial_value(self, inputs: list[np.ndarray]) -> np.ndarray:
        """The value of a variable never set: the init input, else zeros of an empty past."""
        if inputs:
            return np.asarray(inputs[0])
        return self.variable_info.initial_value()

    def evaluate(self, inputs):
        return [self.initial_value(list(inputs))]


class Assign(Sink):
    """Writes input 0 into variable ``variable_id`` for the next inference; its output is
    that value (as OpenVINO's, which nothing reads)."""

    type_name = "Assign"
    version = "opset6"
    IR_VERSIONS = ("opset3", "opset6")  # v3: the variable of a ReadValue-3 (no type attributes)
    ATTRS = {"variable_id": ""}
    FOLDABLE = False

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input, got {}", self.get_input_size())
        self.check(bool(self.variable_id), "needs a variable_id")
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        return [inputs[0]]


def variable_order(model: Any) -> list[str]:
    """The ids of ``model``'s variables in the order of their first ReadValues in
    ``get_ordered_ops()`` (OpenVINO's order of a model's variables): the order in which every
    request's ``query_state()`` lists them, whatever the device."""
    order = dict.fromkeys(n.variable_info.variable_id for n in model.get_ordered_ops()
                          if isinstance(n, ReadValue))
    return list(order)


def model_variables(model: Any) -> dict[str, VariableInfo]:
    """The variables of ``model`` by id, from its ReadValues, in :func:`variable_order`.
    Checked: every Assign writes a variable some ReadValue reads, with a compatible type and
    shape, and at most one Assign writes each variable."""
    infos: dict[str, VariableInfo] = {}
    assigns: dict[str, Assign] = {}
    ops = model.get_ordered_ops()
    for node in ops:
        if isinstance(node, ReadValue):
            info = node.variable_info
            seen = infos.get(info.variable_id)
            if seen is not None and (seen.data_type != info.data_type
                                     or seen.data_shape != info.data_shape):
                raise NetpassError(f"ReadValue '{node.friendly_name}': variable "
                                   f"'{info.variable_id}' is read as {info.data_type}"
                                   f"{info.data_shape} and elsewhere as {seen.data_type}"
                                   f"{seen.data_shape}")
            infos[info.variable_id] = info
    for node in ops:
        if not isinstance(node, Assign):
            continue
        vid = node.variable_id
        if vid in assigns:
            raise NetpassError(f"Assign '{node.friendly_name}' and Assign "
                               f"'{assigns[vid].friendly_name}' both write variable '{vid}'")
        assigns[vid] = node
        read = infos.get(vid)
        if read is None:
            raise NetpassError(f"Assign '{node.friendly_name}' writes variable '{vid}', which "
                               "no ReadValue of the model reads")
        et, ps = node.get_input_element_type(0), node.get_input_partial_shape(0)
        if not (read.data_type.compatible(et) and read.data_shape.compatible(ps)):
            raise NetpassError(f"Assign '{node.friendly_name}' writes {et}{ps} into variable "
                               f"'{vid}' of {read.data_type}{read.data_shape}")
    return infos


def read_value(init_value: Any = None, variable_id: str | None = None,
               variable_type: Any = None, variable_shape: Any = None,
               name: str | None = None) -> ReadValue:
    """OpenVINO's ``opset6.read_value``: ``read_value(init_value, variable_id, variable_type,
    variable_shape)``, or without an init value ``read_value(variable_id, variable_type,
    variable_shape)`` (type and shape are then required)."""
    if isinstance(init_value, str):
        init_value, variable_id, variable_type, variable_shape = \
            None, init_value, variable_id, variable_type
    if not variable_id:
        raise NetpassError("read_value needs a variable_id")
    inputs = [] if init_value is None else [to_output(init_value)]
    if not inputs and (variable_type is None or variable_shape is None):
        raise NetpassError(f"read_value('{variable_id}') without an initial value needs "
                           "variable_type and variable_shape")
    attrs: dict[str, Any] = {"variable_id": variable_id}
    if variable_type is not None:
        attrs["variable_type"] = Type.of(variable_type)
    if variable_shape is not None:
        attrs["variable_shape"] = PartialShape(variable_shape)
    return set_name(ReadValue(inputs, **attrs), name)


def assign(new_value: Any, variable_id: str, name: str | None = None) -> Assign:
    """OpenVINO's ``opset6.assign``: write ``new_value`` into ``variable_id``."""
    return set_name(Assign([to_output(new_value)], variable_id=variable_id), name)


@onnx_export(ReadValue, Assign)
def _export_state(node, ectx):
    raise UnsupportedOpError(node.type_name, node_name=node.friendly_name,
                             reason="ONNX has no model state (save the model as IR instead)")
