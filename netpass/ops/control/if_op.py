"""If (OpenVINO opset8): runs its then-body or its else-body on the values it is given.

Input 0 is the condition (a boolean scalar or one-element tensor); the other inputs feed body
Parameters (``InvariantInput``, one list per body); output ``k`` is a then-body Result and an
else-body Result (``BodyOutput``). With a condition known at compile time the outputs are the
chosen body's; otherwise each output's shape covers both bodies' (``shape_union``) and their
element types must agree.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.model import Model
from ...core.node import Node, as_output
from ...core.subgraph import (
    BodyOutput,
    InvariantInput,
    MultiSubGraphOp,
    evaluate_body,
    infer_body,
    shape_union,
)
from ...core.types import boolean
from ..base import set_name

THEN, ELSE = 0, 1


class If(MultiSubGraphOp):
    """OpenVINO's If-8: ``bodies`` = [then_body, else_body]."""

    type_name = "If"
    version = "opset8"
    BODY_NAMES = ("then_body", "else_body")
    # the chosen body decides the output shapes: the runtime computes them on the host
    DATA_DEPENDENT_SHAPE = True

    def infer_types(self) -> None:
        self.check(self.get_input_size() >= 1, "needs a condition input")
        cond = self._inputs[0]
        self.check(cond.element_type in (boolean,) or cond.element_type.is_dynamic,
                   "condition must be boolean, got {}", cond.element_type)
        ps = cond.partial_shape
        self.check(not ps.rank_is_static or len(ps) == 0 or
                   (len(ps) == 1 and ps[0].compatible(1)),
                   "condition must be a scalar or hold one element, got shape {}", ps)
        if len(self.bodies) < 2:  # being built (set_then_body / set_else_body)
            self.set_output_size(0)
            return
        self.check_descriptions()
        for b in (THEN, ELSE):
            for d in self.body_inputs(b):
                self.check(isinstance(d, InvariantInput), "{}: If feeds its bodies with "
                           "invariant inputs only, got {}", self.body_name(b), d)
            self.feed_body_parameters(b)
            infer_body(self.bodies[b])
        known = self.input_constant(0)
        chosen = None if known is None else (THEN if bool(np.asarray(known).reshape(-1)[0])
                                             else ELSE)
        n_out = self.num_outputs_described()
        self.set_output_size(n_out)
        by_body = [{o.output_index: o for o in self.body_outputs(b)} for b in (THEN, ELSE)]
        for k in range(n_out):
            types = []
            for b in (THEN, ELSE):
                o = by_body[b].get(k)
                if o is None:
                    self.check(chosen is not None and chosen != b,
                               "output {} has no {} Result", k, self.body_name(b))
                    continue
                src = self.bodies[b]._results[o.body_value_index]._inputs[0]
                types.append((b, src.element_type, src.partial_shape))
            if chosen is not None:
                _, et, shape = next(t for t in types if t[0] == chosen)
            else:
                (_, et, shape), (_, et2, shape2) = types
                merged = et.merge(et2)
                if merged is None:
                    self.check(False, "output {}: then_body gives {}, else_body {}", k, et, et2)
                else:
                    et, shape = merged, shape_union(shape, shape2)
            self.set_output_type(k, et, shape)
        self.set_foldable(self.deterministic())

    def evaluate(self, inputs: Sequence[Any]) -> list[Any]:
        cond = bool(np.asarray(inputs[0]).reshape(-1)[0])
        b = THEN if cond else ELSE
        body = self.bodies[b]
        feeds: list[Any] = [None] * len(body._parameters)
        for d in self.body_inputs(b):
            feeds[d.body_parameter_index] = inputs[d.input_index]
        results = evaluate_body(body, feeds, self.where(b))
        outs: list[Any] = [None] * self.get_output_size()
        for o in self.body_outputs(b):
            outs[o.output_index] = results[o.body_value_index]
        return outs

    # -- OpenVINO's builder API -------------------------------------------------------------
    def _set_body(self, index: int, body: Model) -> None:
        bodies: list[Model | None] = list(self.bodies)
        while len(bodies) <= index:
            bodies.append(None)
        bodies[index] = body
        self.bodies = bodies  # type: ignore[assignment]  # complete once both are set
        self._ensure_body(index)
        if all(b is not None for b in bodies) and len(bodies) == 2:
            self.validate_and_infer_types()

    def set_then_body(self, body: Model) -> None:
        self._set_body(THEN, body)

    def set_else_body(self, body: Model) -> None:
        self._set_body(ELSE, body)

    def get_then_body(self) -> Model:
        return self.bodies[THEN]

    def get_else_body(self) -> Model:
        return self.bodies[ELSE]

    def set_input(self, value: Any, then_parameter: Node | None,
                  else_parameter: Node | None) -> None:
        """Feed ``value`` to a Parameter of either body (or both; None for neither)."""
        index = self.get_input_size()
        for b, param in ((THEN, then_parameter), (ELSE, else_parameter)):
            if param is not None:
                self.input_descriptions[b].append(
                    InvariantInput(index, self._param_index(param, b)))
        self.set_arguments([*self._inputs, as_output(value)])
        self.validate_and_infer_types()

    def set_output(self, then_result: Node, else_result: Node) -> Any:
        """A new output: ``then_result`` (a then-body Result) or ``else_result``."""
        index = self.num_outputs_described()
        for b, result in ((THEN, then_result), (ELSE, else_result)):
            r = self.bodies[b].results.index(result) if result in self.bodies[b].results \
                else -1
            self.check(r >= 0, "{}: {!r} is not one of its Results", self.body_name(b), result)
            self.output_descriptions[b].append(BodyOutput(r, index))
        self.validate_and_infer_types()
        return self.output(index)


def if_op(condition: Any, name: str | None = None) -> If:
    """An If on ``condition`` without bodies yet (OpenVINO's ``opset8.if_op``): then
    ``set_then_body``, ``set_else_body``, ``set_input``, ``set_output``."""
    return set_name(If([as_output(condition)]), name)


__all__ = ["if_op"]
