"""Shape ops: ShapeOf and Range, plus the ONNX ops built from them and the data-movement
family (Shape with start/end, Size, ConstantOfShape, Trilu, EyeLike).

ShapeOf is where shape sub-graphs start: its partial value holds the input's static dims as
ints and its dynamic dims as the Dimension objects themselves, so that Gather/Concat/Reshape
downstream resolve to static shapes for static inputs and keep symbols otherwise.
"""
from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np
import onnx

from ..core.dimension import INF, Dimension
from ..core.node import OP_TYPES, Node, Output
from ..core.types import Type, i32, i64
from ..errors import UnsupportedOpError
from .base import set_name, to_output
from .elementwise import add, divide, equal, greater_equal, less_equal, select, subtract
from .indexing import Gather
from .movement import Broadcast, Concat, Reshape, Slice, Split, Unsqueeze, VariadicSplit
from .onnx_types import onnx_element_type
from .reduction import reduce_prod
from .registry import onnx_export, onnx_rule
from .shape_inputs import i64_operand

__all__ = ["shape_of", "range"]  # ``range`` (OpenVINO's name) hides the builtin here


class ShapeOf(Node):
    """ShapeOf v3: the input's shape as a 1-D ``output_type`` (i64 or i32) tensor."""

    type_name = "ShapeOf"
    version = "opset3"
    IR_VERSIONS = ("opset1", "opset3")  # v1: no output_type, i64 (v3's default)
    ATTRS = {"output_type": i64}
    output_type: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = Type.of(self.output_type)
        self.check(et in (i64, i32), "output_type must be i64 or i32, got {}", et)
        self.output_type = et
        data = self.get_input_partial_shape(0)
        self.set_output_type(0, et, [len(data) if data.rank_is_static else Dimension()])

    def infer_values(self) -> None:
        data = self.get_input_partial_shape(0)
        if data.rank_is_static:
            self.set_output_partial_value(0, list(data.dims))

    def evaluate(self, inputs):
        return [np.asarray(inputs[0].shape, dtype=self._outs[0].et.dtype)]


class Range(Node):
    """Range v4: ``start, start + step, ...`` below ``stop`` (above it for a negative step),
    as ``output_type``; the length is ``max(ceil((stop - start) / step), 0)``."""

    type_name = "Range"
    version = "opset4"
    ATTRS = {"output_type": i64}
    output_type: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 3, "expects inputs (start, stop, step)")
        et = Type.of(self.output_type)
        self.output_type = et
        for i, what in enumerate(("start", "stop", "step")):
            ps = self.get_input_partial_shape(i)
            self.check(not ps.rank_is_static or len(ps) == 0 or (len(ps) == 1 and ps[0] == 1),
                       "{} must be a scalar, got shape {}", what, ps)
        vals = [self.input_constant(i) for i in builtins.range(3)]
        if any(v is None for v in vals):
            self.set_output_type(0, et, [self._symbolic_length(vals)])
            return
        start, stop, step = (np.asarray(v).reshape(-1)[0] for v in vals)
        self.check(step != 0, "step must not be zero")
        self.set_output_type(0, et, [self._length(start, stop, step)])

    def _symbolic_length(self, vals: list) -> Dimension:
        """Length from a stop that is a known dim: ``Range(0, d, 1)`` has length ``d`` (symbol
        included); other constant starts and steps give the matching interval."""
        stop = self.input_partial_value(1)
        if vals[0] is None or vals[2] is None or stop is None or len(stop) != 1:
            return Dimension()
        start, step = (np.asarray(v).reshape(-1)[0] for v in (vals[0], vals[2]))
        if not all(isinstance(v, (int, np.integer)) for v in (start, step)) or step == 0:
            return Dimension()
        d = Dimension.of(stop[0])
        if start == 0 and step == 1:
            return d
        lo = self._length(int(start), d.min, int(step))
        hi = None if d.max == INF else self._length(int(start), d.max, int(step))
        if step < 0:
            lo, hi = (hi, lo) if hi is not None else (0, lo)
            return Dimension(lo, hi)
        return Dimension(lo, -1 if hi is None else hi)

    @staticmethod
    def _length(start: Any, stop: Any, step: Any) -> int:
        if all(isinstance(v, (int, np.integer)) for v in (start, stop, step)):
            n = -(-(int(stop) - int(start)) // int(step))
        else:
            # ONNX and OpenVINO compute the span in the inputs' own precision.
            dt = np.result_type(start, stop, step)
            n = math.ceil(float((dt.type(stop) - dt.type(start)) / dt.type(step)))
        return max(n, 0)

    def evaluate(self, inputs):
        start, stop, step = (np.asarray(v).reshape(-1)[0] for v in inputs)
        n = self._length(start, stop, step)
        dt = self._outs[0].et.dtype
        if dt.kind in "iu" and all(isinstance(v, (int, np.integer)) for v in (start, stop, step)):
            return [(int(start) + int(step) * np.arange(n, dtype=np.int64)).astype(dt)]
        src = np.result_type(start, stop, step)
        return [(start + step * np.arange(n, dtype=src)).astype(dt)]


class Range1(Range):
    """Range v1: as Range v4, its output of the inputs' own element type (v1 has no
    ``output_type``; OpenVINO requires the three inputs to share that type)."""

    type_name = "Range"
    version = "opset1"
    ATTRS = dict[str, Any]()

    def infer_types(self) -> None:
        types = {self.get_input_element_type(i) for i in builtins.range(self.get_input_size())}
        self.check(len(types) == 1, "start, stop and step must have one element type, got {}",
                   sorted(map(str, types)))
        self.output_type = types.pop()
        super().infer_types()


# The newer version stays the class ``netpass.ops.Range`` names; IR reading picks the exact
# version by (type, opset).
OP_TYPES["Range"] = Range


# -- factories ------------------------------------------------------------------------------
def shape_of(data: Any, output_type: Any = "i64", name: str | None = None) -> Node:
    """ShapeOf-3: the shape of ``data`` as a 1-D ``output_type`` tensor (i64 or i32); its known
    dims stay known to shape inference downstream."""
    return set_name(ShapeOf([to_output(data)], output_type=Type.of(output_type)), name)


def range(start: Any, stop: Any, step: Any, output_type: Any,
          name: str | None = None) -> Node:
    """Range-4: ``start, start + step, ...`` below ``stop`` (above it for a negative step), as
    ``output_type``; the three are scalars or scalar graph values."""
    return set_name(Range([to_output(start), to_output(stop), to_output(step)],
                          output_type=Type.of(output_type)), name)


# -- ONNX import ----------------------------------------------------------------------------


@onnx_rule("Shape")
def _import_shape(ctx):
    shape = ShapeOf([ctx.inputs[0]]).output(0)
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    if start == 0 and end is None:
        return shape
    stop = end if end is not None else (1 << 63) - 1
    return Slice([shape, i64_operand([start]), i64_operand([stop]), i64_operand([1])]).output(0)


@onnx_rule("Size")
def _import_size(ctx):
    x = ctx.inputs[0]
    if x.partial_shape.is_static:
        return i64_operand(math.prod(x.partial_shape.to_shape()))
    return to_output(reduce_prod(ShapeOf([x]).output(0), [0], False))


@onnx_rule("Flatten")
def _import_flatten(ctx):
    x = ctx.inputs[0]
    ps = x.partial_shape
    if not ps.rank_is_static:
        ctx.error("Flatten needs an input of static rank")
    axis = ctx.attr("axis", 1)
    rank = len(ps)
    if not -rank <= axis <= rank:
        ctx.error(f"axis {axis} out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    head, tail = ps.dims[:axis], ps.dims[axis:]
    if all(d.is_static for d in tail):
        pattern = [-1, math.prod(d.min for d in tail)]
    elif all(d.is_static for d in head):
        pattern = [math.prod(d.min for d in head), -1]
    elif axis == 1:
        return Reshape([x, i64_operand([0, -1])], special_zero=True).output(0)
    else:
        shape = ShapeOf([x]).output(0)
        head_dims = Slice([shape, i64_operand([0]), i64_operand([axis]), i64_operand([1])])
        first = reduce_prod(head_dims, [0], True)
        return Reshape([x, Concat([to_output(first), i64_operand([-1])], axis=0).output(0)],
                       special_zero=False).output(0)
    return Reshape([x, i64_operand(pattern)], special_zero=False).output(0)


@onnx_rule("Split")
def _import_split(ctx):
    """ONNX Split. Given lengths (the ``split`` input, an attribute before opset 13) make a
    VariadicSplit. Otherwise ``num_outputs`` (opset 18; else the number of outputs) parts:
    equal ones (Split) where the axis dim divides, else ONNX 18's chunks of ceil(d / n) with a
    smaller last one, empty where d = (n - 1) * chunk and refused where d is smaller (as
    onnxruntime does): a VariadicSplit of lengths [ceil(d / n)] * (n - 1) + [-1], computed
    from the input's ShapeOf when d is dynamic (hence this rule's place: Split's family is
    below the ShapeOf and arithmetic it builds)."""
    x = ctx.inputs[0]
    axis = ctx.attr("axis", 0)
    n = ctx.num_outputs
    if ctx.opset >= 13:
        lengths = ctx.input(1)
    else:
        lengths = ctx.input(1) if ctx.opset < 2 and ctx.input(1) is not None else (
            i64_operand(ctx.attr("split")) if ctx.has_attr("split") else None)
    if lengths is not None:
        return VariadicSplit([x, i64_operand(axis), lengths]).outputs()
    chunks = ctx.opset >= 18 and ctx.has_attr("num_outputs")
    if chunks:
        n = ctx.attr("num_outputs", 0)
        if n < 1 or n != ctx.num_outputs:
            ctx.error(f"num_outputs {n} does not match the node's {ctx.num_outputs} outputs")
    ps = x.partial_shape
    d = ps[axis] if ps.rank_is_static and -len(ps) <= axis < len(ps) else None
    if not chunks or n == 1 or (d is not None and d.is_static and d.min % n == 0):
        return Split([x, i64_operand(axis)], num_splits=n).outputs()
    if d is not None and d.is_static:
        chunk = -(-d.min // n)
        if d.min < (n - 1) * chunk:
            ctx.error(f"dimension {d.min} on axis {axis} cannot be split into {n} chunks of "
                      f"ceil({d.min} / {n}) = {chunk}: the last would be negative")
        sizes: Any = i64_operand([chunk] * (n - 1) + [d.min - (n - 1) * chunk])
    else:
        dim = Gather([ShapeOf([x]).output(0), i64_operand([axis]), i64_operand(0)]).output(0)
        chunk = to_output(divide(add(dim, i64_operand([n - 1])), i64_operand([n])))
        sizes = Concat([chunk] * (n - 1) + [i64_operand([-1])], axis=0).output(0)
    return VariadicSplit([x, i64_operand(axis), sizes]).outputs()


@onnx_rule("ConstantOfShape", since=9)
def _import_constant_of_shape(ctx):
    value = ctx.attr("value", None)
    value = np.zeros((), np.float32) if value is None else np.asarray(value).reshape(())
    return Broadcast([to_output(value), ctx.inputs[0]], mode="numpy").output(0)


@onnx_rule("Range", since=11)
def _import_range(ctx):
    start, stop, step = ctx.inputs
    if start.element_type.dtype is None:
        ctx.error(f"element type {start.element_type} is not supported")
    return Range([start, stop, step], output_type=start.element_type).output(0)


def _dim(x: Output, axis: int) -> Output:
    """Dim ``axis`` of ``x`` as an i64 scalar: a Constant when static, else ShapeOf math."""
    ps = x.partial_shape
    if ps.rank_is_static and ps[axis].is_static:
        return i64_operand(ps[axis].min)
    return Gather([ShapeOf([x]).output(0), i64_operand(axis), i64_operand(0)]).output(0)


def _index_grid(x: Output) -> Output:
    """``col - row`` over the last two dims of ``x``, as an i64 [H, W] tensor."""
    rows = Range([i64_operand(0), _dim(x, -2), i64_operand(1)], output_type=i64).output(0)
    cols = Range([i64_operand(0), _dim(x, -1), i64_operand(1)], output_type=i64).output(0)
    rows = Unsqueeze([rows, i64_operand([1])]).output(0)
    return to_output(subtract(cols, rows))


@onnx_rule("Trilu", since=14)
def _import_trilu(ctx):
    x = ctx.inputs[0]
    ps = x.partial_shape
    if not ps.rank_is_static or len(ps) < 2:
        ctx.error("Trilu needs an input of static rank >= 2")
    compare = greater_equal if ctx.attr("upper", 1) else less_equal
    k = ctx.input(1)
    k = i64_operand(0) if k is None else Reshape([k, i64_operand([])], special_zero=False).output(0)
    mask = compare(_index_grid(x), k)
    zero = to_output(np.zeros((), dtype=x.element_type.dtype))
    return to_output(select(mask, x, zero))


@onnx_rule("EyeLike", since=9)
def _import_eye_like(ctx):
    x = ctx.inputs[0]
    dtype = ctx.attr("dtype", None)
    if dtype is not None:
        et = onnx_element_type(dtype, f"EyeLike '{ctx.name}'")
    else:
        et = x.element_type
    k = ctx.attr("k", 0)
    ps = x.partial_shape
    if ps.is_static:
        h, w = ps.to_shape()
        return to_output(np.eye(h, w, k=k, dtype=et.dtype), et)
    if not ps.rank_is_static or len(ps) != 2:
        ctx.error("EyeLike needs a 2-D input")
    mask = equal(_index_grid(x), i64_operand(k))
    return to_output(select(mask, to_output(np.ones((), et.dtype), et),
                            to_output(np.zeros((), et.dtype), et)))


# -- ONNX export (opset 17) -----------------------------------------------------------------
@onnx_export(ShapeOf)
def _export_shape_of(node, ectx):
    outs = ectx.outputs(node)
    if node.output_type is i64:
        ectx.add_node("Shape", ectx.inputs(node), outs)
        return
    tmp = ectx.fresh("shape")
    ectx.add_node("Shape", ectx.inputs(node), [tmp])
    ectx.add_node("Cast", [tmp], outs, to=int(onnx.TensorProto.INT32))


@onnx_export(Range)
def _export_range(node, ectx):
    et = node.output_type
    if et.dtype is None:
        raise UnsupportedOpError("Range", "", 17, node.friendly_name,
                                 f"output type {et} has no ONNX equivalent")
    to = onnx.helper.np_dtype_to_tensor_dtype(et.dtype)
    names = []
    for i, name in enumerate(ectx.inputs(node)):
        ps = node.get_input_partial_shape(i)
        if not ps.rank_is_static or len(ps) != 0:
            # netpass takes one-element tensors; ONNX's Range wants scalars
            scalar = ectx.fresh("range_scalar")
            ectx.add_node("Reshape", [name, ectx.constant(np.zeros(0, np.int64), "scalar")],
                          [scalar])
            name = scalar
        if node.get_input_element_type(i) is not et:
            cast = ectx.fresh("range_arg")
            ectx.add_node("Cast", [name], [cast], to=int(to))
            name = cast
        names.append(name)
    ectx.add_node("Range", names, ectx.outputs(node))
