"""Broadcast (to a target shape) and Tile (repeat)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import OP_TYPES, VALUE_PROPAGATION_LIMIT, Node
from ...core.shape import PartialShape
from ..base import set_name, to_output
from ..registry import onnx_export, onnx_rule
from ..shape_inputs import (
    as_dim,
    check_shape_input,
    const_ints,
    export_const_ints,
    export_error,
    export_vector_length,
    i64_operand,
    shape_values,
    vector_length,
)

__all__ = ["broadcast", "tile"]


class Broadcast(Node):
    """Broadcast v3: ``numpy`` (data right-aligned to target_shape), ``bidirectional`` (numpy
    broadcasting of both shapes) or ``explicit`` (data axis i goes to ``axes_mapping[i]``)."""

    type_name = "Broadcast"
    version = "opset3"
    ATTRS = {"mode": "numpy"}
    NON_EXPLICIT_INPUTS: tuple[int, ...] = (2,)  # input counts of the other modes
    mode: Any

    def infer_types(self) -> None:
        mode = self.mode
        self.check(mode in ("numpy", "bidirectional", "explicit"),
                   "unsupported broadcast mode '{}'", mode)
        n_in = self.get_input_size()
        self.check(n_in == 3 if mode == "explicit" else n_in in self.NON_EXPLICIT_INPUTS,
                   "expects inputs (data, target_shape" + (", axes_mapping)" if mode == "explicit"
                                                           else ")"))
        check_shape_input(self, 1, "target_shape")
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        target = shape_values(self, 1)
        if target is None:
            n = vector_length(self, 1)
            if mode == "bidirectional" and n is not None and data.rank_is_static:
                n = max(n, len(data))
            self.set_output_type(0, et, PartialShape.dynamic(n))
            return
        tdims = [as_dim(v) if not isinstance(v, int) or v >= 0 else None for v in target]
        self.check(all(d is not None for d in tdims), "invalid target shape {}", target)
        if mode == "bidirectional":
            out = data.broadcast_merge(PartialShape(tdims))
            self.check(out is not None, "shapes {} and {} do not broadcast", data, target)
            self.set_output_type(0, et, out)
            return
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(tdims))
            return
        if mode == "numpy":
            self.check(len(data) <= len(tdims), f"target shape {target} has lower rank than {data}")
            off = len(tdims) - len(data)
            out = list(tdims)
            for i, d in enumerate(data):
                t = tdims[off + i]
                if d == 1:
                    continue
                if t.is_static and d.is_static:
                    m = t if t.min == d.min else None
                else:
                    m = t.merge(d)
                self.check(m is not None, "data dim {} ({}) does not broadcast to {}", i, d, t)
                out[off + i] = t if t.is_static else m
            self.set_output_type(0, et, PartialShape(out))
            return
        mapping = const_ints(self, 2)
        if mapping is not None:
            self.check(len(mapping) == len(data),
                       "axes_mapping {} must have {} elements", mapping, len(data))
            self.check(mapping == sorted(mapping), "axes_mapping {} must be increasing", mapping)
            for i, a in enumerate(mapping):
                self.check(0 <= a < len(tdims), "axes_mapping {} out of range", mapping)
                d, t = data[i], tdims[a]
                self.check(d == 1 or d.compatible(t),
                           "data dim {} ({}) does not match target dim {} ({})", i, d, a, t)
        self.set_output_type(0, et, PartialShape(tdims))

    def infer_values(self) -> None:
        # A broadcast scalar of a shape computation (e.g. [d] * n) keeps its dim.
        pv = self.input_partial_value(0)
        ps = self.get_output_partial_shape(0)
        if pv is not None and len(pv) == 1 and ps.is_static and len(ps) <= 1 \
                and (ps[0].min if len(ps) else 1) <= VALUE_PROPAGATION_LIMIT:
            self.set_output_partial_value(0, list(pv) * (ps[0].min if len(ps) else 1))

    def evaluate(self, inputs):
        x, target = inputs[0], [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
        if self.mode == "bidirectional":
            shape = np.broadcast_shapes(x.shape, tuple(target))
            return [np.array(np.broadcast_to(x, shape))]
        if self.mode == "explicit":
            mapping = [int(a) for a in np.asarray(inputs[2]).reshape(-1)]
            shape = [1] * len(target)
            for i, a in enumerate(mapping):
                shape[a] = x.shape[i]
            x = x.reshape(shape)
        return [np.array(np.broadcast_to(x, tuple(target)))]


class Broadcast1(Broadcast):
    """Broadcast v1: as v3 without ``bidirectional``; OpenVINO spells its explicit mode "none"
    and gives the op an ``axes_mapping`` input in every mode (unused outside explicit)."""

    type_name = "Broadcast"
    version = "opset1"
    NON_EXPLICIT_INPUTS = (2, 3)

    def infer_types(self) -> None:
        if self.mode == "none":
            self.mode = "explicit"
        self.check(self.mode != "bidirectional", "Broadcast-1 has no bidirectional mode")
        super().infer_types()

    def evaluate(self, inputs):
        return super().evaluate(inputs if self.mode == "explicit" else inputs[:2])


# The newer version stays the class ``netpass.ops.Broadcast`` names; IR reading picks the exact
# version by (type, opset).
OP_TYPES["Broadcast"] = Broadcast


class Tile(Node):
    """Tile v0: repeat ``data`` ``repeats[i]`` times along axis i (shorter side padded with 1s
    on the left)."""

    type_name = "Tile"
    version = "opset1"

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, repeats)")
        check_shape_input(self, 1, "repeats")
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        reps = shape_values(self, 1)
        if not data.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        if reps is None:
            n = vector_length(self, 1)
            rank = None if n is None else max(n, len(data))
            self.set_output_type(0, et, PartialShape.dynamic(rank))
            return
        self.check(all(isinstance(r, Dimension) or r >= 0 for r in reps),
                   "repeats {} must be non-negative", reps)
        rank = max(len(reps), len(data))
        dims = [Dimension(1)] * (rank - len(data)) + list(data.dims)
        reps = [1] * (rank - len(reps)) + list(reps)
        # A repeat of 1 keeps the dim itself, symbol included.
        self.set_output_type(0, et, PartialShape(
            [d if isinstance(r, int) and r == 1 else d * as_dim(r) for d, r in zip(dims, reps)]))

    def infer_values(self) -> None:
        pv = self.input_partial_value(0)
        data = self.get_input_partial_shape(0)
        reps = const_ints(self, 1)
        if pv is not None and reps is not None and data.rank_is_static and len(data) == 1 \
                and len(reps) == 1 and len(pv) * reps[0] <= VALUE_PROPAGATION_LIMIT:
            self.set_output_partial_value(0, list(pv) * reps[0])

    def evaluate(self, inputs):
        x, reps = inputs
        return [np.tile(x, [int(r) for r in np.asarray(reps).reshape(-1)])]


def broadcast(data: Any, target_shape: Any, axes_mapping: Any = None, mode: str = "numpy",
              name: str | None = None, broadcast_spec: str | None = None) -> Node:
    """Broadcast-3: ``data`` stretched to ``target_shape`` (a list or a graph value). ``mode``
    "numpy" aligns the trailing dims, "bidirectional" broadcasts both ways (the output may be
    larger than ``target_shape``), "explicit" puts the dims of ``data`` at ``axes_mapping``;
    ``broadcast_spec`` is OpenVINO's keyword for ``mode``."""
    mode = str(broadcast_spec or mode).lower()
    inputs = [to_output(data), i64_operand(target_shape)]
    if mode == "explicit":
        inputs.append(i64_operand(axes_mapping))
    return set_name(Broadcast(inputs, mode=mode), name)


def tile(data: Any, repeats: Any, name: str | None = None) -> Node:
    """Tile-1: ``data`` repeated ``repeats[i]`` times along each dim (``repeats`` longer than the
    rank adds leading dims)."""
    return set_name(Tile([to_output(data), i64_operand(repeats)]), name)


@onnx_rule("Expand", since=8)
def _import_expand(ctx):
    return Broadcast([ctx.inputs[0], ctx.inputs[1]], mode="bidirectional").output(0)


@onnx_rule("Tile", since=6)
def _import_tile(ctx):
    return Tile([ctx.inputs[0], ctx.inputs[1]]).output(0)


@onnx_export(Broadcast)
def _export_broadcast(node, ectx):
    ins = ectx.inputs(node)
    data = ins[0]
    if node.mode == "explicit":
        mapping = export_const_ints(node, 2)
        target_rank = export_vector_length(node, 1)
        shape = node.get_input_partial_shape(0)
        ones = [a for a in range(target_rank) if a not in mapping]
        if not shape.rank_is_static:
            export_error(node, "data rank must be static")
        data = ectx.fresh("unsqueezed")
        ectx.add_node("Unsqueeze", [ins[0], ectx.constant(np.asarray(ones, dtype=np.int64))],
                      [data])
    ectx.add_node("Expand", [data, ins[1]], ectx.outputs(node))


@onnx_export(Tile)
def _export_tile(node, ectx):
    reps = export_const_ints(node, 1)
    data = node.get_input_partial_shape(0)
    if not data.rank_is_static:
        export_error(node, "data rank must be static")
    name = ectx.inputs(node)[0]
    rank = len(data)
    if len(reps) > rank:
        name2 = ectx.fresh("unsqueezed")
        ectx.add_node("Unsqueeze", [name, ectx.constant(
            np.arange(len(reps) - rank, dtype=np.int64))], [name2])
        name = name2
    reps = [1] * (rank - len(reps)) + reps
    ectx.add_node("Tile", [name, ectx.constant(np.asarray(reps, dtype=np.int64))],
                  ectx.outputs(node))
