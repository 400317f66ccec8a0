"""Reductions (ReduceSum, ReduceMean, ... over an axes input, OpenVINO semantics: empty axes
reduce nothing), TopK, and CumSum; ONNX ReduceLogSum* by decomposition (ArgMax/ArgMin: see
``argminmax``)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..core.types import Type, boolean, i32, i64, is_float_dtype
from ..errors import UnsupportedOpError
from .base import (
    ArithmeticReductionKeepDims,
    LogicalReductionKeepDims,
    normalize_axis,
    set_name,
    to_output,
)
from .elementwise import Add, Exp, IsInf, Log, Multiply, Select, Subtract, const_like
from .registry import onnx_export, onnx_rule

__all__ = [
    "reduce_mean", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1",
    "reduce_l2", "reduce_logical_and", "reduce_logical_or", "topk", "cumsum",
]


def _lowest(dtype: np.dtype) -> Any:
    if is_float_dtype(dtype):
        return dtype.type(-np.inf) if dtype.kind == "V" else -np.inf
    return np.iinfo(dtype).min if dtype.kind in "iu" else False


def _highest(dtype: np.dtype) -> Any:
    if is_float_dtype(dtype):
        return dtype.type(np.inf) if dtype.kind == "V" else np.inf
    return np.iinfo(dtype).max if dtype.kind in "iu" else True


def _max(x: np.ndarray, axis: tuple, keepdims: bool) -> np.ndarray:
    # ``initial`` makes the maximum of an empty set the type's lowest value (OpenVINO's result).
    return np.max(x, axis=axis, keepdims=keepdims, initial=_lowest(x.dtype))


def _min(x: np.ndarray, axis: tuple, keepdims: bool) -> np.ndarray:
    return np.min(x, axis=axis, keepdims=keepdims, initial=_highest(x.dtype))


def _mean(x: np.ndarray, axis: tuple, keepdims: bool) -> np.ndarray:
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu":
            count = int(np.prod([x.shape[a] for a in axis])) if axis else 1
            s = np.sum(x, axis=axis, keepdims=keepdims, dtype=np.int64)
            return s // count if count else s
        return np.mean(x, axis=axis, keepdims=keepdims)


def _l2(x: np.ndarray, axis: tuple, keepdims: bool) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.sqrt(np.sum(np.square(x), axis=axis, keepdims=keepdims))


class ReduceSum(ArithmeticReductionKeepDims):
    """Sum."""

    type_name = "ReduceSum"
    fn = staticmethod(np.sum)


class ReduceMean(ArithmeticReductionKeepDims):
    """Mean; integer data divides the integer sum by the count (floor)."""

    type_name = "ReduceMean"
    fn = staticmethod(_mean)


class ReduceMax(ArithmeticReductionKeepDims):
    """Maximum."""

    type_name = "ReduceMax"
    fn = staticmethod(_max)


class ReduceMin(ArithmeticReductionKeepDims):
    """Minimum."""

    type_name = "ReduceMin"
    fn = staticmethod(_min)


class ReduceProd(ArithmeticReductionKeepDims):
    """Product."""

    type_name = "ReduceProd"
    fn = staticmethod(np.prod)


class ReduceL1(ArithmeticReductionKeepDims):
    """Sum of absolute values."""

    type_name = "ReduceL1"
    version = "opset4"
    fn = staticmethod(lambda x, axis, keepdims: np.sum(np.abs(x), axis=axis, keepdims=keepdims))


class ReduceL2(ArithmeticReductionKeepDims):
    """Square root of the sum of squares."""

    type_name = "ReduceL2"
    version = "opset4"
    fn = staticmethod(_l2)


class _LogicalReduction(LogicalReductionKeepDims):
    def infer_types(self) -> None:
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et is boolean, "data must be boolean, got {}", et)
        super().infer_types()


class ReduceLogicalAnd(_LogicalReduction):
    """True where all are true (boolean data)."""

    type_name = "ReduceLogicalAnd"
    fn = staticmethod(np.all)


class ReduceLogicalOr(_LogicalReduction):
    """True where any is true (boolean data)."""

    type_name = "ReduceLogicalOr"
    fn = staticmethod(np.any)


def _scalar_of(node: Node, i: int) -> int | None:
    """The single integer held by input ``i`` (a scalar or one-element tensor), when known."""
    value = node.input_constant(i)
    if value is None:
        return None
    node.check(np.asarray(value).size == 1, "input {} must hold one value, got {}", i, value)
    return int(np.asarray(value).reshape(()))


class TopK(Node):
    """The k largest (``mode=max``) or smallest values along ``axis`` and their indices.

    ``sort``: ``value`` (best first), ``index`` (ascending index) or ``none``; equal values keep
    the lower index first. ``k`` is a scalar (a one-element 1-D tensor is accepted too).
    """

    type_name = "TopK"
    version = "opset11"
    # v1, v3: no ``stable`` attribute (v11's default, false); v3 only widens k's types
    IR_VERSIONS = ("opset1", "opset3", "opset11")
    ATTRS = {"axis": -1, "mode": "max", "sort": "value", "index_element_type": i32,
             "stable": False}
    index_element_type: Any

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (data, k)")
        self.check(self.mode in ("max", "min"), "mode must be max or min, got {}", self.mode)
        self.check(self.sort in ("value", "index", "none"),
                   "sort must be value, index or none, got {}", self.sort)
        self.index_element_type = Type.of(self.index_element_type)
        self.check(self.index_element_type in (i32, i64),
                   "index_element_type must be i32 or i64, got {}", self.index_element_type)
        kps = self.get_input_partial_shape(1)
        self.check(not kps.rank_is_static or len(kps) == 0 or
                   (len(kps) == 1 and kps[0].compatible(1)), "k must be a scalar, got {}", kps)
        et = self.get_input_element_type(0)
        data = self.get_input_partial_shape(0)
        if not data.rank_is_static:
            out = PartialShape(None)
        else:
            self.check(len(data) > 0, "data must have rank >= 1")
            axis = normalize_axis(self, self.axis, len(data))
            k = _scalar_of(self, 1)
            self.check(k is None or k >= 0, "k must be non-negative, got {}", k)
            d = data[axis]
            dims = list(data)
            dims[axis] = Dimension(0, d.get_max_length()) if k is None else \
                Dimension(min(k, d.min), k if d.max > k else d.max)
            out = PartialShape(dims)
        self.set_output_type(0, et, out)
        self.set_output_type(1, self.index_element_type, out)

    def evaluate(self, inputs):
        x, k = inputs
        k = int(np.asarray(k).reshape(()))
        axis = self.axis % x.ndim
        xm = np.moveaxis(x, axis, -1)
        if self.mode == "max":  # keys in reverse order: ~x for integers (-x wraps at the minimum)
            keys = ~xm if xm.dtype.kind in "biu" else -xm
        else:
            keys = xm
        order = np.argsort(keys, axis=-1, kind="stable")
        idx = order[..., :k]
        if self.sort == "index":
            idx = np.sort(idx, axis=-1)
        values = np.take_along_axis(xm, idx, axis=-1)
        return [np.moveaxis(values, -1, axis),
                np.moveaxis(idx, -1, axis).astype(self.index_element_type.dtype)]


class CumSum(Node):
    """Cumulative sum along the axis input (default 0); ``exclusive`` leaves out the current
    element, ``reverse`` sums from the end."""

    type_name = "CumSum"
    version = "opset3"
    ATTRS = {"exclusive": False, "reverse": False}
    accumulate: Any = staticmethod(np.cumsum)  # CumProd: np.cumprod, starting from 1
    identity = 0

    def infer_types(self) -> None:
        self.check(self.get_input_size() in (1, 2), "expects inputs (data[, axis])")
        if self.get_input_size() == 2:
            aps = self.get_input_partial_shape(1)
            self.check(not aps.rank_is_static or len(aps) == 0 or
                       (len(aps) == 1 and aps[0].compatible(1)),
                       "axis must be a scalar, got {}", aps)
            aet = self.get_input_element_type(1)
            self.check(aet.is_dynamic or aet.is_integral, "axis must be an integer, got {}", aet)
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        axis = int(np.asarray(inputs[1]).reshape(())) if len(inputs) > 1 else 0
        axis = axis % max(x.ndim, 1)
        y = np.moveaxis(x, axis, 0)
        y = y[::-1] if self.reverse else y
        out = type(self).accumulate(y, axis=0, dtype=x.dtype)
        if self.exclusive:
            shifted = np.full_like(out, self.identity)
            shifted[1:] = out[:-1]
            out = shifted
        return [np.moveaxis(out[::-1] if self.reverse else out, 0, axis)]


# -- factories ---------------------------------------------------------------------------------

def _axes(value: Any) -> Output:
    if isinstance(value, (Node, Output)):
        return to_output(value)
    return to_output(np.asarray(value, dtype=np.int64).reshape(-1))


def _reduce_factory(cls: type[Node]) -> Callable:
    def factory(node: Any, reduction_axes: Any, keep_dims: bool = False,
                name: str | None = None) -> Node:
        return set_name(cls([to_output(node), _axes(reduction_axes)], keep_dims=bool(keep_dims)),
                        name)
    factory.__name__ = cls.type_name
    what = (cls.__dict__.get("__doc__") or "").strip()
    factory.__doc__ = (f"{cls.type_name}: {what} Reduces ``node`` over ``reduction_axes`` "
                       "(ints, negative from the end, or a graph value); ``keep_dims`` keeps "
                       "the reduced axes as 1s. ``name`` sets the friendly name.")
    return factory


reduce_mean = _reduce_factory(ReduceMean)
reduce_sum = _reduce_factory(ReduceSum)
reduce_max = _reduce_factory(ReduceMax)
reduce_min = _reduce_factory(ReduceMin)
reduce_prod = _reduce_factory(ReduceProd)
reduce_l1 = _reduce_factory(ReduceL1)
reduce_l2 = _reduce_factory(ReduceL2)
reduce_logical_and = _reduce_factory(ReduceLogicalAnd)
reduce_logical_or = _reduce_factory(ReduceLogicalOr)


def topk(data: Any, k: Any, axis: int, mode: str, sort: str, index_element_type: Any = i32,
         stable: bool = False, name: str | None = None) -> Node:
    """TopK-11: the ``k`` largest (``mode`` "max") or smallest ("min") elements along ``axis``,
    ordered by value (``sort`` "value"), by index ("index") or not ("none"); ``stable`` keeps
    equal elements in input order. Outputs: values, and their indices as
    ``index_element_type``."""
    return set_name(TopK([to_output(data), _i64(k)], axis=int(axis), mode=mode.lower(),
                         sort=sort.lower(), index_element_type=Type.of(index_element_type),
                         stable=stable), name)


def cumsum(arg: Any, axis: Any, exclusive: bool = False, reverse: bool = False,
           name: str | None = None) -> Node:
    """CumSum-3: running sum of ``arg`` along ``axis`` (an int or a scalar graph value);
    ``exclusive`` leaves each element out of its own sum (the first is 0), ``reverse`` runs from the
    end."""
    return set_name(CumSum([to_output(arg), _i64(axis)], exclusive=exclusive, reverse=reverse),
                    name)


# -- ONNX import ------------------------------------------------------------------------------

def _i64(values: Any) -> Output:
    """Graph values pass through; python values become i64 Constants."""
    if isinstance(values, (Node, Output)):
        return to_output(values)
    return to_output(np.asarray(values, dtype=np.int64))


def _onnx_axes(ctx: Any, axes_input: bool) -> tuple[Output | None, bool]:
    """(axes, empty): the reduction axes of an ONNX Reduce node and whether none were given."""
    if axes_input:
        axes = ctx.input(1)
        if axes is None:
            return None, True
        ps = axes.partial_shape
        if ps.rank_is_static and ps.is_static and int(np.prod(ps.to_shape())) == 0:
            return None, True
        if not (ps.rank_is_static and len(ps) == 1 and ps[0].min > 0) and \
                not ctx.attr("noop_with_empty_axes", 0):
            ctx.error("axes of unknown length: an empty tensor would mean 'reduce all' in ONNX "
                      "but 'reduce nothing' in OpenVINO")
        return axes, False
    values = ctx.attr("axes", [])
    return (_i64(values), False) if values else (None, True)


def _reduce_inputs(ctx: Any, axes_input: bool) -> tuple[Output, Output, bool]:
    """(data, axes, keepdims) in OpenVINO terms, where empty axes reduce nothing."""
    x = ctx.inputs[0]
    keep = bool(ctx.attr("keepdims", 1))
    axes, empty = _onnx_axes(ctx, axes_input)
    if empty:
        if ctx.attr("noop_with_empty_axes", 0):
            # Composite reductions still apply their elementwise steps (ReduceL1 -> |x|).
            return x, _i64(np.zeros((0,), np.int64)), keep
        ps = x.partial_shape
        if not ps.rank_is_static:
            ctx.error("reducing over all axes needs data of known rank")
        axes = _i64(np.arange(len(ps)))
    return x, axes, keep


def _register_reduce(onnx_op: str, build: Callable[[Output, Output, bool], Output],
                     axes_input_since: int) -> None:
    onnx_rule(onnx_op)(lambda ctx: build(*_reduce_inputs(ctx, False)))
    onnx_rule(onnx_op, since=axes_input_since)(lambda ctx: build(*_reduce_inputs(ctx, True)))


def _simple(cls: type[Node]) -> Callable[[Output, Output, bool], Output]:
    return lambda x, axes, keep: cls([x, axes], keep_dims=keep).output(0)


def _sum_square(x: Output, axes: Output, keep: bool) -> Output:
    return ReduceSum([Multiply([x, x]), axes], keep_dims=keep).output(0)


def _log_sum(x: Output, axes: Output, keep: bool) -> Output:
    return Log([ReduceSum([x, axes], keep_dims=keep)]).output(0)


def _log_sum_exp(x: Output, axes: Output, keep: bool) -> Output:
    """m + log(sum(exp(x - m))) with m the max, or 0 where the max is infinite: the plain form
    overflows for inputs above ~88 in f32, and an infinite shift would give inf - inf."""

    def finite_max(keep_dims: bool) -> Output:
        m = ReduceMax([x, axes], keep_dims=keep_dims).output(0)
        return Select([IsInf([m]), const_like(0, x), m]).output(0)
    shift = finite_max(True)
    s = ReduceSum([Exp([Subtract([x, shift])]), axes], keep_dims=keep)
    return Add([Log([s]), shift if keep else finite_max(False)]).output(0)


for _op, _build, _since in (("ReduceSum", _simple(ReduceSum), 13),
                            ("ReduceMean", _simple(ReduceMean), 18),
                            ("ReduceMax", _simple(ReduceMax), 18),
                            ("ReduceMin", _simple(ReduceMin), 18),
                            ("ReduceProd", _simple(ReduceProd), 18),
                            ("ReduceL1", _simple(ReduceL1), 18),
                            ("ReduceL2", _simple(ReduceL2), 18),
                            ("ReduceSumSquare", _sum_square, 18),
                            ("ReduceLogSum", _log_sum, 18),
                            ("ReduceLogSumExp", _log_sum_exp, 18)):
    _register_reduce(_op, _build, _since)


def _scalar_k(ctx: Any, k: Output) -> Output:
    value = k.value
    if value is not None:
        if value.size != 1:
            ctx.error(f"k must hold one value, got shape {list(value.shape)}")
        return _i64(int(value.reshape(())))
    return k


@onnx_rule("TopK")
def _import_topk_attr(ctx):
    return _topk(ctx, _i64(ctx.attr("k", 0)))


@onnx_rule("TopK", since=10)
def _import_topk(ctx):
    return _topk(ctx, _scalar_k(ctx, ctx.inputs[1]))


def _topk(ctx: Any, k: Output) -> list[Output]:
    largest = ctx.attr("largest", 1)
    sort = "value" if ctx.attr("sorted", 1) else "none"
    node = TopK([ctx.inputs[0], k], axis=ctx.attr("axis", -1), mode="max" if largest else "min",
                sort=sort, index_element_type=i64)
    return [node.output(0), node.output(1)]


@onnx_rule("CumSum")
def _import_cumsum(ctx):
    axis = ctx.inputs[1]
    if axis.value is not None:
        axis = _i64(int(np.asarray(axis.value).reshape(())))
    return CumSum([ctx.inputs[0], axis], exclusive=bool(ctx.attr("exclusive", 0)),
                  reverse=bool(ctx.attr("reverse", 0)))


# -- ONNX export (opset 17) -------------------------------------------------------------------

def _constant_axes(node: Node) -> list[int]:
    axes = node.input_constant(1)
    if axes is None:
        raise UnsupportedOpError(node.type_name, "", 17, node.friendly_name,
                                 "ONNX opset 17 needs constant reduction axes")
    return [int(a) for a in np.asarray(axes).reshape(-1)]


def _export_reduce(onnx_op: str) -> Callable:
    def rule(node, ectx):
        data = ectx.inputs(node)[0]
        axes = _constant_axes(node)
        if not axes:  # OpenVINO: empty axes reduce nothing
            ectx.add_node("Identity", [data], ectx.outputs(node))
            return
        ectx.add_reduce(onnx_op, data, ectx.outputs(node), axes, node.keep_dims)
    return rule



for _cls, _op in ((ReduceMean, "ReduceMean"), (ReduceMax, "ReduceMax"),
                  (ReduceMin, "ReduceMin"), (ReduceProd, "ReduceProd"), (ReduceL1, "ReduceL1"),
                  (ReduceL2, "ReduceL2")):
    onnx_export(_cls)(_export_reduce(_op))


@onnx_export(ReduceSum)
def _export_reduce_sum(node, ectx):
    # ReduceSum takes axes as an input from opset 13; noop keeps OpenVINO's empty-axes meaning.
    data, axes = ectx.inputs(node)
    ectx.add_node("ReduceSum", [data, axes], ectx.outputs(node), keepdims=int(node.keep_dims),
                  noop_with_empty_axes=1)


def _export_logical(onnx_op: str) -> Callable:
    # ONNX has no boolean reductions: reduce 0/1 integers (min = all, max = any).
    def rule(node, ectx):
        data = ectx.inputs(node)[0]
        axes = _constant_axes(node)
        as_int, reduced = ectx.fresh("as_int"), ectx.fresh("reduced")
        ectx.add_node("Cast", [data], [as_int], to=6)  # INT32
        if axes:
            ectx.add_reduce(onnx_op, as_int, [reduced], axes, node.keep_dims)
        else:
            ectx.add_node("Identity", [as_int], [reduced])
        ectx.add_node("Cast", [reduced], ectx.outputs(node), to=9)  # BOOL
    return rule


onnx_export(ReduceLogicalAnd)(_export_logical("ReduceMin"))
onnx_export(ReduceLogicalOr)(_export_logical("ReduceMax"))


@onnx_export(TopK)
def _export_topk(node, ectx):
    if node.sort == "index":
        raise UnsupportedOpError("TopK", "", 17, node.friendly_name,
                                 "sort=index has no ONNX TopK equivalent")
    data, k = ectx.inputs(node)
    k1 = ectx.fresh("k")
    ectx.add_node("Reshape", [k, ectx.constant(np.array([1], np.int64))], [k1])
    values, indices = ectx.outputs(node)
    idx64 = indices
    if node.index_element_type is not i64:
        idx64 = ectx.fresh("indices_i64")
    ectx.add_node("TopK", [data, k1], [values, idx64], axis=int(node.axis),
                  largest=int(node.mode == "max"), sorted=int(node.sort == "value"))
    if idx64 != indices:
        ectx.add_node("Cast", [idx64], [indices], to=6)  # INT32


@onnx_export(CumSum)
def _export_cumsum(node, ectx):
    names = ectx.inputs(node)
    axis = names[1] if len(names) > 1 else ectx.constant(np.array(0, np.int64))
    ectx.add_node("CumSum", [names[0], axis], ectx.outputs(node),
                  exclusive=int(node.exclusive), reverse=int(node.reverse))
