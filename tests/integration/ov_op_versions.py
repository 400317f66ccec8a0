"""Builders of every op factory of OpenVINO's Python opsets (``openvino.opset1`` ..
``openvino.opset16``), for ``test_ir_op_versions.py``: each builds the op with small valid
arguments (several attribute settings where they change its semantics) in a model whose inputs
are Parameters fed random non-zero data. The (type, version) each creates is what OpenVINO
writes in IR, so the table covers every version an IR written by this OpenVINO can hold.

``BUILDERS`` maps ``"opsetN.factory"`` (the module that defines the factory) or
``"opsetN.factory:variant"`` to a function of a :class:`Case` that returns the op's node.
``NOT_BUILT`` names the factories of op types netpass has no class for at all (their IR is
refused by type), with those types, so that a new netpass op makes the table ask for a builder.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import openvino as ov
import openvino.opset1 as o1
import openvino.opset2 as o2
import openvino.opset3 as o3
import openvino.opset4 as o4
import openvino.opset5 as o5
import openvino.opset6 as o6
import openvino.opset7 as o7
import openvino.opset8 as o8
import openvino.opset9 as o9
import openvino.opset10 as o10
import openvino.opset11 as o11
import openvino.opset12 as o12
import openvino.opset13 as o13
import openvino.opset14 as o14
import openvino.opset15 as o15
import openvino.opset16 as o16

F32, I32, I64 = np.float32, np.int32, np.int64


class Case:
    """The Parameters of one model and the feeds drawn for them (random, non-zero)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.params: list[Any] = []
        self.feeds: list[np.ndarray] = []

    def p(self, shape, dtype=F32, lo: float = 0.5, hi: float = 2.0, signed: bool = True,
          value: np.ndarray | None = None):
        """A Parameter of ``shape`` fed ``value`` or random values in [lo, hi] (a random sign
        when ``signed``; integers drawn in [lo, hi] as given; bool at random)."""
        dtype = np.dtype(dtype)
        if value is not None:
            feed = np.asarray(value, dtype)
        elif dtype == np.bool_:
            feed = self.rng.random(shape) < 0.5
        elif dtype.kind in "iu":
            feed = self.rng.integers(int(lo), int(hi) + 1, shape).astype(dtype)
        else:
            feed = self.rng.uniform(lo, hi, shape)
            if signed:
                feed = feed * self.rng.choice([-1.0, 1.0], shape)
            feed = feed.astype(dtype)
        param = o1.parameter(list(np.shape(feed)), dtype, name=f"in{len(self.params)}")
        self.params.append(param)
        self.feeds.append(feed)
        return param

    def w(self, *shape: int, lo: float = -1.0, hi: float = 1.0):
        """A float Constant of random values."""
        return o1.constant(self.rng.uniform(lo, hi, shape).astype(F32))

    def model(self, built) -> ov.Model:
        """The model around what a builder returned: a node (its outputs are the results) or
        (node, sink, output) for state ops; a Result is the model's own."""
        if isinstance(built, tuple):
            return ov.Model([o1.result(built[2])], [built[1]], self.params, "case")
        if built.get_type_name() == "Result":
            return ov.Model([built], self.params, "case")
        return ov.Model([o1.result(o) for o in built.outputs()], self.params, "case")


def c(value, dtype=I64):
    return o1.constant(np.array(value, dtype))


B = Callable[[Case], Any]
BUILDERS: dict[str, B] = {}


def unary(key: str, fn, lo=0.5, hi=2.0, signed=True, dtype=F32, shape=(2, 3, 4)) -> None:
    BUILDERS[key] = lambda k: fn(k.p(shape, dtype, lo, hi, signed))


def binary(key: str, fn, dtype=F32, lo=0.5, hi=2.0, signed=True, **kw) -> None:
    BUILDERS[key] = lambda k: fn(k.p((2, 3, 4), dtype, lo, hi, signed),
                                 k.p((3, 1), dtype, lo, hi, signed), **kw)


for _name in ("absolute", "atan", "ceiling", "cos", "cosh", "erf", "exp", "floor", "negative",
              "relu", "sigmoid", "sign", "sin", "sinh", "tan", "tanh"):
    unary(f"opset1.{_name}", getattr(o1, _name))
for _name in ("acos", "asin"):
    unary(f"opset1.{_name}", getattr(o1, _name), 0.05, 0.95)
for _name in ("log", "sqrt"):
    unary(f"opset1.{_name}", getattr(o1, _name), signed=False)
unary("opset1.logical_not", o1.logical_not, dtype=np.bool_)
unary("opset4.acosh", o4.acosh, 1.1, 3.0, signed=False)
unary("opset4.asinh", o4.asinh)
unary("opset4.atanh", o4.atanh, 0.05, 0.95)
for _name in ("hswish", "mish", "softplus"):
    unary(f"opset4.{_name}", getattr(o4, _name), 0.1, 4.0)
unary("opset5.hsigmoid", o5.hsigmoid, 0.1, 4.0)
unary("opset2.gelu", o2.gelu)
unary("opset9.softsign", o9.softsign)
unary("opset13.bitwise_not", o13.bitwise_not, -50, 50, dtype=I32)
unary("opset16.identity", o16.identity)
for _name in ("is_finite", "is_nan"):
    unary(f"opset10.{_name}", getattr(o10, _name))
BUILDERS["opset10.is_inf"] = lambda k: o10.is_inf(
    k.p((2, 5), value=np.array([[1, np.inf, -np.inf, 2, 3], [np.inf, 1, 2, -np.inf, 4]])),
    {"detect_positive": False})
for _mode in ("half_to_even", "half_away_from_zero"):
    BUILDERS[f"opset5.round:{_mode}"] = lambda k, m=_mode: o5.round(
        k.p((2, 4), value=[[0.5, 1.5, 2.5, -0.5], [-1.5, 1.2, -2.7, 3.5]]), m)
for _mode in ("erf", "tanh"):
    BUILDERS[f"opset7.gelu:{_mode}"] = lambda k, m=_mode: o7.gelu(k.p((2, 3, 4)), m)
BUILDERS["opset4.swish"] = lambda k: o4.swish(k.p((2, 3)), o1.constant(F32(1.3)))

for _name in ("add", "divide", "maximum", "minimum", "multiply", "subtract",
              "squared_difference", "equal", "not_equal", "greater", "greater_equal", "less",
              "less_equal"):
    binary(f"opset1.{_name}", getattr(o1, _name))
binary("opset1.power", o1.power, signed=False)
for _name in ("floor_mod", "mod"):
    binary(f"opset1.{_name}", getattr(o1, _name))
    binary(f"opset1.{_name}:int", getattr(o1, _name), dtype=I32, lo=1, hi=9)
binary("opset1.divide:int", o1.divide, dtype=I32, lo=1, hi=20)
for _name in ("logical_and", "logical_or", "logical_xor"):
    binary(f"opset1.{_name}", getattr(o1, _name), dtype=np.bool_)
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    binary(f"opset13.{_name}", getattr(o13, _name), dtype=I32, lo=-50, hi=50)
for _name in ("bitwise_left_shift", "bitwise_right_shift"):
    binary(f"opset15.{_name}", getattr(o15, _name), dtype=I32, lo=0, hi=5)
BUILDERS["opset14.convert_promote_types"] = lambda k: o14.convert_promote_types(
    k.p((2, 3), I32, 1, 9), k.p((3,)), True)
BUILDERS["opset1.add:none"] = lambda k: o1.add(k.p((2, 3)), k.p((2, 3)), "none")
BUILDERS["opset1.select"] = lambda k: o1.select(k.p((2, 3), np.bool_), k.p((2, 3)), k.p((3,)))
BUILDERS["opset1.prelu"] = lambda k: o1.prelu(k.p((2, 3, 4)), c([0.1, 0.2, 0.3], F32))


# -- movement, shapes, indexing -------------------------------------------------------------
BUILDERS.update({
    "opset1.clamp": lambda k: o1.clamp(k.p((2, 3)), -1.0, 1.2),
    "opset1.concat": lambda k: o1.concat([k.p((2, 3)), k.p((2, 2))], 1),
    "opset1.constant": lambda k: o1.add(k.p((2,)), c([1.5, 2.5], F32)),
    "opset1.convert": lambda k: o1.convert(k.p((2, 3), lo=0.5, hi=20), "i32"),
    "opset1.convert_like": lambda k: o1.convert_like(k.p((2, 3), I32, 1, 9), k.p((1,))),
    "opset1.parameter": lambda k: k.p((2, 3)),
    "opset1.result": lambda k: o1.result(k.p((2, 3))),
    "opset13.result": lambda k: o13.result(k.p((2, 3))),
    "opset1.broadcast": lambda k: o1.broadcast(k.p((3, 1)), c([2, 3, 4])),
    "opset1.broadcast:explicit": lambda k: o1.broadcast(k.p((3,)), c([3, 2]), c([0]),
                                                        "explicit"),
    "opset3.broadcast": lambda k: o3.broadcast(k.p((3, 1)), c([2, 1, 4]), None, "bidirectional"),
    "opset1.depth_to_space": lambda k: o1.depth_to_space(k.p((1, 8, 2, 3)), "blocks_first", 2),
    "opset1.depth_to_space:depth": lambda k: o1.depth_to_space(k.p((1, 8, 2, 3)), "depth_first",
                                                               2),
    "opset1.space_to_depth": lambda k: o1.space_to_depth(k.p((1, 2, 4, 6)), "blocks_first", 2),
    "opset1.gather": lambda k: o1.gather(k.p((4, 3)), c([[2, 0], [1, 3]]), c(0)),
    "opset7.gather": lambda k: o7.gather(k.p((2, 4, 3)), c([[1, -1], [0, 2]]), c(1), 1),
    "opset7.gather:input": lambda k: o7.gather(k.p((4, 3)), k.p((2, 2), I64, -4, 3), c(0)),
    "opset1.gather:negative": lambda k: o1.gather(k.p((4, 3)), c([-1, 2, -4]), c(-2)),
    "opset8.gather": lambda k: o8.gather(k.p((2, 4, 3)), c([[1, -1], [0, 2]]), c(1), 1),
    "opset5.gather_nd": lambda k: o5.gather_nd(k.p((2, 3, 4, 5)),
                                               c([[[1], [2], [0]], [[0], [1], [3]]]), 2),
    "opset8.gather_nd": lambda k: o8.gather_nd(k.p((2, 3, 4, 5)),
                                               c([[[1], [2], [0]], [[0], [1], [3]]]), 2),
    "opset6.gather_elements": lambda k: o6.gather_elements(k.p((3, 4)),
                                                           c([[0, 2], [1, 1], [3, 0]]), 1),
    "opset1.gather_tree": lambda k: o1.gather_tree(
        c([[[1, 2]], [[3, 4]], [[5, 6]]], F32), c([[[0, 0]], [[1, 0]], [[0, 1]]], F32),
        c([3], F32), c(9.0, F32)),
    "opset1.one_hot": lambda k: o1.one_hot(c([[1, 3], [0, 5]]), c(4), c(2.0, F32),
                                           c(-1.0, F32), 1),
    "opset16.one_hot": lambda k: o16.one_hot(c([[1, -1], [0, 5]]), c(4), c(2.0, F32),
                                             c(-1.0, F32), -1, "normalize"),
    "opset1.pad": lambda k: o1.pad(k.p((2, 3)), c([1, 0]), c([0, 2]), "constant", c(1.5, F32)),
    "opset1.pad:reflect": lambda k: o1.pad(k.p((3, 4)), c([1, 2]), c([2, 1]), "reflect"),
    "opset12.pad": lambda k: o12.pad(k.p((3, 4)), c([-1, 2]), c([2, -1]), "symmetric"),
    "opset1.reshape": lambda k: o1.reshape(k.p((2, 3, 4)), c([0, -1]), True),
    "opset1.reverse_sequence": lambda k: o1.reverse_sequence(k.p((3, 4, 2)), c([4, 1, 3]), 0, 1),
    "opset1.shape_of": lambda k: o1.shape_of(k.p((2, 3, 4))),
    "opset3.shape_of": lambda k: o3.shape_of(k.p((2, 3, 4)), "i32"),
    "opset1.split": lambda k: o1.split(k.p((2, 6)), c(1), 3),
    "opset1.variadic_split": lambda k: o1.variadic_split(k.p((2, 6)), c(1), c([1, -1, 2])),
    "opset1.squeeze": lambda k: o1.squeeze(k.p((1, 3, 1)), c([0, 2])),
    "opset15.squeeze": lambda k: o15.squeeze(k.p((1, 3, 1)), c([0, 1, 2]), True),
    "opset1.unsqueeze": lambda k: o1.unsqueeze(k.p((2, 3)), c([0, 3])),
    "opset1.strided_slice": lambda k: o1.strided_slice(
        k.p((4, 5, 6)), c([1, 0, 5]), c([3, 0, 0]), c([1, 1, -2]), [0, 1, 0], [0, 1, 1],
        [0, 0, 0], [0, 0, 0], [0, 0, 0]),
    "opset8.slice": lambda k: o8.slice(k.p((4, 5)), c([3, 1]), c([0, 5]), c([-1, 2]), c([0, 1])),
    "opset1.tile": lambda k: o1.tile(k.p((2, 3)), c([2, 1, 2])),
    "opset1.transpose": lambda k: o1.transpose(k.p((2, 3, 4)), c([2, 0, 1])),
    "opset2.batch_to_space": lambda k: o2.batch_to_space(k.p((4, 1, 2, 3)), c([1, 1, 2, 2]),
                                                         c([0, 0, 0, 1]), c([0, 0, 1, 0])),
    "opset2.space_to_batch": lambda k: o2.space_to_batch(k.p((1, 1, 2, 3)), c([1, 1, 2, 2]),
                                                         c([0, 0, 1, 0]), c([0, 0, 1, 1])),
    "opset3.shuffle_channels": lambda k: o3.shuffle_channels(k.p((1, 6, 2, 2)), 1, 3),
    "opset3.non_zero": lambda k: o3.non_zero(k.p((3, 4), value=[[0, 1, 0, 2], [3, 0, 0, 0],
                                                                [0, 0, 4, 5]]), "i32"),
    "opset3.scatter_update": lambda k: o3.scatter_update(k.p((4, 3)), c([2, 0]), k.p((2, 3)),
                                                         c(0)),
    "opset3.scatter_elements_update": lambda k: o3.scatter_elements_update(
        k.p((3, 3)), c([[1, 0], [2, 1], [0, 2]]), k.p((3, 2)), c(1)),
    "opset12.scatter_elements_update": lambda k: o12.scatter_elements_update(
        k.p((3, 3)), c([[1, 1], [2, 1], [0, 2]]), k.p((3, 2)), c(1), "mean", False),
    "opset4.scatter_nd_update": lambda k: o4.scatter_nd_update(k.p((4, 3)), c([[1], [3]]),
                                                               k.p((2, 3))),
    "opset15.scatter_nd_update": lambda k: o15.scatter_nd_update(
        k.p((4, 3)), c([[1], [3], [1]]), k.p((3, 3)), "sum"),
    "opset7.roll": lambda k: o7.roll(k.p((3, 4)), c([1, -2]), c([0, 1])),
    "opset7.einsum": lambda k: o7.einsum([k.p((2, 3)), k.p((3, 4))], "ij,jk->ik"),
    "opset15.slice_scatter": lambda k: o15.slice_scatter(k.p((4, 5)), k.p((2, 5)), c([0]),
                                                         c([4]), c([2]), c([0])),
    "opset15.search_sorted": lambda k: o15.search_sorted(
        c([[1, 2, 4, 8]], F32), k.p((1, 5), value=[[0.5, 2, 3, 8, 9]]), True),
    "opset4.range": lambda k: o4.range(c(1.0, F32), c(7.0, F32), c(1.5, F32), "f32"),
    "opset1.range": lambda k: o1.range(c(1.0, F32), c(7.0, F32), c(1.5, F32)),
    "opset9.eye": lambda k: o9.eye(c(3), c(4), c(1), "f32", c([2])),
    "opset3.bucketize": lambda k: o3.bucketize(k.p((2, 3), lo=0, hi=5, signed=False),
                                               c([1.0, 2.5, 4.0], F32), "i32", False),
    "opset3.cum_sum": lambda k: o3.cum_sum(k.p((2, 4)), c(1), True, True),
    "opset10.unique": lambda k: o10.unique(k.p((6,), value=[3, 1, 3, 2, 1, 5]), None, True),
    "opset16.segment_max": lambda k: o16.segment_max(k.p((5, 2)), c([0, 0, 2, 2, 3], I32),
                                                     c(5, I32), "ZERO"),
})

# -- reductions, normalization, activations with attributes -----------------------------------
for _name, _fn in (("reduce_max", o1.reduce_max), ("reduce_mean", o1.reduce_mean),
                   ("reduce_min", o1.reduce_min), ("reduce_prod", o1.reduce_prod),
                   ("reduce_sum", o1.reduce_sum), ("reduce_l1", o4.reduce_l1),
                   ("reduce_l2", o4.reduce_l2)):
    _op = "opset4" if _name in ("reduce_l1", "reduce_l2") else "opset1"
    BUILDERS[f"{_op}.{_name}"] = lambda k, f=_fn: f(k.p((2, 3, 4)), c([0, 2]), True)
for _name in ("reduce_logical_and", "reduce_logical_or"):
    BUILDERS[f"opset1.{_name}"] = lambda k, n=_name: getattr(o1, n)(k.p((2, 3), np.bool_),
                                                                    c([1]), False)
BUILDERS.update({
    "opset1.softmax": lambda k: o1.softmax(k.p((2, 3, 4)), 1),
    "opset8.softmax": lambda k: o8.softmax(k.p((2, 3, 4)), -1),
    "opset5.log_softmax": lambda k: o5.log_softmax(k.p((2, 3, 4)), -2),
    "opset1.elu": lambda k: o1.elu(k.p((2, 3)), 0.7),
    "opset1.selu": lambda k: o1.selu(k.p((2, 3)), c([1.6], F32), c([1.05], F32)),
    "opset1.hard_sigmoid": lambda k: o1.hard_sigmoid(k.p((2, 3)), c(0.3, F32), c(0.4, F32)),
    "opset1.grn": lambda k: o1.grn(k.p((1, 3, 2, 2)), 0.5),
    "opset1.lrn": lambda k: o1.lrn(k.p((1, 4, 3, 3)), c([1]), 0.1, 0.75, 1.0, 3),
    "opset1.normalize_l2": lambda k: o1.normalize_l2(k.p((2, 3, 4)), c([1]), 1e-6, "add"),
    "opset1.batch_norm_inference": lambda k: o1.batch_norm_inference(
        k.p((2, 3, 4)), c([1.5, 0.5, 2.0], F32), c([0.1, -0.2, 0.3], F32),
        c([0.3, -0.1, 0.2], F32), c([0.5, 1.5, 2.5], F32), 1e-3),
    "opset5.batch_norm_inference": lambda k: o5.batch_norm_inference(
        k.p((2, 3, 4)), c([1.5, 0.5, 2.0], F32), c([0.1, -0.2, 0.3], F32),
        c([0.3, -0.1, 0.2], F32), c([0.5, 1.5, 2.5], F32), 1e-3),
    "opset12.group_normalization": lambda k: o12.group_normalization(
        k.p((2, 4, 3)), k.w(4), k.w(4), 2, 1e-5),
    "opset6.mvn": lambda k: o6.mvn(k.p((2, 3, 4)), c([1, 2]), True, 1e-5, "outside_sqrt"),
    "opset1.fake_quantize": lambda k: o1.fake_quantize(
        k.p((2, 3)), c(-1.0, F32), c(1.0, F32), c(-0.5, F32), c(0.5, F32), 5),
    "opset13.fake_quantize": lambda k: o13.fake_quantize(
        k.p((2, 3)), c(-1.0, F32), c(1.0, F32), c(-0.5, F32), c(0.5, F32), 5),
    "opset1.matmul": lambda k: o1.matmul(k.p((2, 4, 3)), k.p((2, 4)), True, True),
    "opset14.inverse": lambda k: o14.inverse(k.p((2, 3, 3), value=np.eye(3)[None] * 2 +
                                                  np.arange(18).reshape(2, 3, 3) / 20), True),
    "opset1.region_yolo": lambda k: o1.region_yolo(k.p((1, 8, 2, 2)), 2, 1, 2, True, [0, 1],
                                                   1, 3),
    "opset2.reorg_yolo": lambda k: o2.reorg_yolo(k.p((1, 4, 4, 4)), [2]),
})
for _across in (False, True):
    for _norm in (False, True):
        BUILDERS[f"opset2.mvn:{int(_across)}{int(_norm)}"] = lambda k, a=_across, n=_norm: \
            o2.mvn(k.p((2, 3, 4, 2)), a, n, 0.05)
for _mode, _sort in (("max", "value"), ("min", "index"), ("max", "none")):
    for _fn, _op in ((o1.topk, "opset1"), (o3.topk, "opset3"), (o11.topk, "opset11")):
        BUILDERS[f"{_op}.topk:{_mode}-{_sort}"] = lambda k, f=_fn, m=_mode, s=_sort: f(
            k.p((3, 5), value=np.arange(15)[::-1].reshape(3, 5) % 7 + 0.5), c(3), 1, m, s)

# -- interpolation --------------------------------------------------------------------------
for _mode in ("nearest", "linear", "cubic", "area"):
    for _align in (False, True):
        BUILDERS[f"opset1.interpolate:{_mode}-{int(_align)}"] = lambda k, m=_mode, a=_align: \
            o1.interpolate(k.p((1, 2, 4, 6)), c([6, 4]),
                           {"axes": [2, 3], "mode": m, "align_corners": a})
for _shape, _axes, _mode in (((1, 3, 4, 5), [1, 3], "linear"), ((2, 4, 5), [1], "linear"),
                              ((1, 1, 3, 4, 4), [2, 3, 4], "linear"), ((2, 4, 5), [2], "cubic")):
    BUILDERS[f"opset1.interpolate:{_mode}-{len(_shape)}d-axes{''.join(map(str, _axes))}"] = \
        lambda k, s=_shape, a=_axes, m=_mode: o1.interpolate(
            k.p(s), c([s[i] + 2 for i in a]), {"axes": a, "mode": m, "align_corners": False})
BUILDERS["opset1.interpolate:pads"] = lambda k: o1.interpolate(
    k.p((1, 2, 4, 6)), c([5, 4]), {"axes": [2, 3], "mode": "linear", "align_corners": False,
                                   "pads_begin": [0, 0, 1, 0], "pads_end": [0, 0, 0, 2]})
for _mode, _calc, _ctm, _near in (
        ("nearest", "sizes", "asymmetric", "floor"),
        ("nearest", "scales", "half_pixel", "round_prefer_ceil"),
        ("linear", "scales", "align_corners", "floor"),
        ("linear_onnx", "sizes", "pytorch_half_pixel", "floor"),
        ("cubic", "scales", "tf_half_pixel_for_nn", "floor"),
        ("linear_onnx", "scales", "half_pixel", "floor")):
    BUILDERS[f"opset10.interpolate:{_mode}-{_calc}-{_ctm}"] = \
        lambda k, m=_mode, s=_calc, t=_ctm, n=_near: o10.interpolate(
            k.p((1, 2, 4, 6)), c([6, 3]), c([1.5, 0.5], F32), m, s,
            coordinate_transformation_mode=t, nearest_mode=n, axes=c([2, 3]))
BUILDERS["opset10.interpolate:pads"] = lambda k: o10.interpolate(
    k.p((1, 2, 4, 6)), c([1, 2, 9, 8]), c([1, 1, 1.5, 1], F32), "linear_onnx", "sizes",
    pads_begin=[0, 0, 1, 0], pads_end=[0, 0, 1, 2])
BUILDERS["opset11.interpolate"] = lambda k: o11.interpolate(
    k.p((1, 2, 4, 6)), c([1.5, 0.5], F32), "bilinear_pillow", "scales", axes=c([2, 3]))
BUILDERS["opset9.grid_sample"] = lambda k: o9.grid_sample(
    k.p((1, 2, 3, 4)), k.p((1, 2, 2, 2), lo=0.1, hi=0.9),
    {"align_corners": False, "mode": "bilinear", "padding_mode": "border"})

# -- convolution and pooling ----------------------------------------------------------------
BUILDERS.update({
    "opset1.convolution": lambda k: o1.convolution(k.p((1, 2, 5, 5)), k.w(3, 2, 3, 3), [2, 1],
                                                   [1, 0], [0, 1], [1, 2]),
    "opset1.group_convolution": lambda k: o1.group_convolution(
        k.p((1, 4, 5, 5)), k.w(2, 3, 2, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1]),
    "opset1.convolution_backprop_data": lambda k: o1.convolution_backprop_data(
        k.p((1, 2, 3, 3)), k.w(2, 3, 3, 3), [2, 2], None, [1, 0], [0, 1], [1, 1],
        output_padding=[1, 0]),
    "opset1.group_convolution_backprop_data": lambda k: o1.group_convolution_backprop_data(
        k.p((1, 4, 3, 3)), k.w(2, 2, 3, 3, 3), [2, 2], None, [1, 1], [1, 1], [1, 1]),
    "opset1.deformable_convolution": lambda k: o1.deformable_convolution(
        k.p((1, 2, 4, 4)), k.p((1, 18, 2, 2), lo=0.1, hi=0.9), k.w(3, 2, 3, 3), [1, 1],
        [0, 0], [0, 0], [1, 1]),
    "opset8.deformable_convolution": lambda k: o8.deformable_convolution(
        k.p((1, 2, 4, 4)), k.p((1, 18, 2, 2), lo=0.1, hi=0.9), k.w(3, 2, 3, 3), [1, 1],
        [0, 0], [0, 0], [1, 1], k.p((1, 9, 2, 2), lo=0.1, hi=0.9, signed=False)),
    "opset1.max_pool": lambda k: o1.max_pool(k.p((1, 2, 5, 5)), [2, 2], [1, 0], [0, 1], [3, 2],
                                             "ceil"),
    "opset8.max_pool": lambda k: o8.max_pool(k.p((1, 2, 5, 5)), [2, 2], [1, 2], [1, 0], [0, 1],
                                             [2, 2], "floor", None, "i32", 2),
    "opset14.max_pool": lambda k: o14.max_pool(k.p((1, 2, 5, 5)), [2, 2], [1, 1], [0, 0],
                                               [0, 0], [2, 2], "ceil_torch", None, "i64"),
    "opset1.avg_pool": lambda k: o1.avg_pool(k.p((1, 2, 5, 5)), [2, 2], [1, 0], [0, 1], [3, 2],
                                             True, "ceil"),
    "opset1.avg_pool:include": lambda k: o1.avg_pool(k.p((1, 2, 5, 5)), [2, 1], [1, 1],
                                                     [1, 1], [3, 3], False),
    "opset14.avg_pool": lambda k: o14.avg_pool(k.p((1, 2, 5, 5)), [2, 2], [0, 0], [0, 0],
                                               [2, 2], True, "ceil_torch"),
    "opset16.avg_pool": lambda k: o16.avg_pool(k.p((1, 2, 6, 6)), [1, 1], [0, 0], [0, 0],
                                               [2, 2], True, dilations=[2, 2]),
    "opset8.adaptive_avg_pool": lambda k: o8.adaptive_avg_pool(k.p((1, 2, 5, 7)), c([2, 3])),
    "opset8.adaptive_max_pool": lambda k: o8.adaptive_max_pool(k.p((1, 2, 5, 7)), c([2, 3]),
                                                               "i32"),
    "opset3.extract_image_patches": lambda k: o3.extract_image_patches(
        k.p((1, 2, 5, 5)), [2, 2], [2, 2], [1, 1], "same_upper"),
    "opset15.col2im": lambda k: o15.col2im(k.p((1, 8, 6)), c([4, 5]), c([2, 2]), [2, 2],
                                           [1, 1], [0, 1], [0, 0]),
    "opset2.roi_pooling": lambda k: o2.roi_pooling(
        k.p((1, 2, 6, 6)), c([[0, 1, 1, 4, 5]], F32), [2, 2], 1.0, "max"),
    "opset1.psroi_pooling": lambda k: o1.psroi_pooling(
        k.p((1, 8, 6, 6)), c([[0, 1, 1, 4, 5]], F32), 2, 2, 1.0, 1, 1, "average"),
    "opset3.roi_align": lambda k: o3.roi_align(
        k.p((1, 2, 6, 6)), c([[1, 1, 4, 5]], F32), c([0], I32), 2, 2, 2, 1.0, "avg"),
    "opset9.roi_align": lambda k: o9.roi_align(
        k.p((1, 2, 6, 6)), c([[1, 1, 4, 5]], F32), c([0], I32), 2, 2, 2, 1.0, "avg",
        "half_pixel"),
    "opset1.prior_box_clustered": lambda k: o1.prior_box_clustered(
        c([2, 3]), c([32, 32]), {"width": [1.0, 2.0], "height": [2.0, 1.0], "clip": True,
                                 "offset": 0.5}),
    "opset1.prior_box": lambda k: o1.prior_box(
        c([2, 3]), c([32, 32]), {"min_size": [4.0], "max_size": [9.0], "aspect_ratio": [2.0],
                                 "flip": True, "clip": True, "offset": 0.5}),
    "opset8.prior_box": lambda k: o8.prior_box(
        c([2, 3]), c([32, 32]), {"min_size": [4.0, 5.0], "max_size": [9.0, 10.0],
                                 "aspect_ratio": [2.0], "flip": True, "offset": 0.5,
                                 "min_max_aspect_ratios_order": False}),
})

# -- recurrent, signal, attention, state ----------------------------------------------------
H = 3
BUILDERS.update({
    "opset3.rnn_cell": lambda k: o3.rnn_cell(k.p((2, 4)), k.p((2, H)), k.w(H, 4), k.w(H, H),
                                             k.w(H), H, ["tanh"], [], [], 0.0),
    "opset3.gru_cell": lambda k: o3.gru_cell(k.p((2, 4)), k.p((2, H)), k.w(3 * H, 4),
                                             k.w(3 * H, H), k.w(3 * H), H),
    "opset3.gru_cell:lbr": lambda k: o3.gru_cell(k.p((2, 4)), k.p((2, H)), k.w(3 * H, 4),
                                                 k.w(3 * H, H), k.w(4 * H), H,
                                                 linear_before_reset=True),
    "opset1.lstm_cell": lambda k: o1.lstm_cell(k.p((2, 4)), k.p((2, H)), k.p((2, H)),
                                               k.w(4 * H, 4), k.w(4 * H, H), k.w(4 * H), H),
    "opset1.lstm_cell:clip": lambda k: o1.lstm_cell(
        k.p((2, 4)), k.p((2, H)), k.p((2, H)), k.w(4 * H, 4), k.w(4 * H, H), k.w(4 * H), H,
        ["sigmoid", "tanh", "relu"], clip=0.5),
    "opset4.lstm_cell": lambda k: o4.lstm_cell(k.p((2, 4)), k.p((2, H)), k.p((2, H)),
                                               k.w(4 * H, 4), k.w(4 * H, H), k.w(4 * H), H),
    "opset5.lstm_sequence": lambda k: o5.lstm_sequence(
        k.p((2, 3, 4)), k.p((2, 1, H)), k.p((2, 1, H)), c([3, 2], I32), k.w(1, 4 * H, 4),
        k.w(1, 4 * H, H), k.w(1, 4 * H), H, "forward"),
    "opset5.gru_sequence": lambda k: o5.gru_sequence(
        k.p((2, 3, 4)), k.p((2, 2, H)), c([3, 2], I32), k.w(2, 3 * H, 4), k.w(2, 3 * H, H),
        k.w(2, 3 * H), H, "bidirectional"),
    "opset5.rnn_sequence": lambda k: o5.rnn_sequence(
        k.p((2, 3, 4)), k.p((2, 1, H)), c([3, 2], I32), k.w(1, H, 4), k.w(1, H, H), k.w(1, H),
        H, "reverse"),
    "opset7.dft": lambda k: o7.dft(k.p((2, 4, 2)), c([0])),
    "opset7.idft": lambda k: o7.idft(k.p((2, 4, 2)), c([1]), c([6])),
    "opset9.rdft": lambda k: o9.rdft(k.p((2, 6)), c([1])),
    "opset9.irdft": lambda k: o9.irdft(k.p((2, 4, 2)), c([1]), c([6])),
    "opset15.stft": lambda k: o15.stft(k.p((1, 16)), k.w(4), c(4), c(3), True),
    "opset13.scaled_dot_product_attention": lambda k: o13.scaled_dot_product_attention(
        k.p((1, 2, 3, 4)), k.p((1, 2, 5, 4)), k.p((1, 2, 5, 4)), k.p((1, 1, 3, 5)),
        c(0.3, F32), causal=False),
    "opset6.ctc_greedy_decoder_seq_len": lambda k: o6.ctc_greedy_decoder_seq_len(
        k.p((2, 5, 4)), c([5, 3], I32), c(3, I32), True),
    "opset1.ctc_greedy_decoder": lambda k: o1.ctc_greedy_decoder(
        k.p((5, 2, 4)), c([[1, 1], [1, 1], [1, 1], [1, 0], [1, 0]], F32)),
})


def _state(read, assign) -> Callable[[Case], Any]:
    def build(k: Case):
        x = k.p((2, 3))
        rv = read(x, "v")
        out = o1.add(rv, x)
        return rv, assign(out, "v"), out
    return build


BUILDERS["opset3.read_value"] = _state(o3.read_value, o3.assign)
BUILDERS["opset3.assign"] = BUILDERS["opset3.read_value"]

# Factories of op types netpass has no class for: their IR is refused by type.
NOT_BUILT = {
    "opset1.binary_convolution": "BinaryConvolution",
    "opset1.deformable_psroi_pooling": "DeformablePSROIPooling",
    "opset1.detection_output": "DetectionOutput",
    "opset8.detection_output": "DetectionOutput",
    "opset1.proposal": "Proposal",
    "opset4.proposal": "Proposal",
    "opset4.ctc_loss": "CTCLoss",
    "opset8.matrix_nms": "MatrixNms",
    "opset8.multiclass_nms": "MulticlassNms",
    "opset9.multiclass_nms": "MulticlassNms",
    "opset9.generate_proposals": "GenerateProposals",
    "opset8.random_uniform": "RandomUniform",
    "opset13.multinomial": "Multinomial",
    "opset13.nms_rotated": "NMSRotated",
    "opset13.fake_convert": "FakeConvert",
    "opset15.roi_align_rotated": "ROIAlignRotated",
    "opset15.string_tensor_pack": "StringTensorPack",
    "opset15.string_tensor_unpack": "StringTensorUnpack",
    "opset16.istft": "ISTFT",
    "opset16.sparse_fill_empty_rows": "SparseFillEmptyRows",
    "opset8.i420_to_bgr": "I420toBGR",
    "opset8.i420_to_rgb": "I420toRGB",
    "opset8.nv12_to_bgr": "NV12toBGR",
    "opset8.nv12_to_rgb": "NV12toRGB",
}

# -- embeddings, non-max suppression --------------------------------------------------------
BUILDERS.update({
    "opset3.embedding_bag_offsets_sum": lambda k: o3.embedding_bag_offsets_sum(
        k.p((5, 2)), c([0, 2, 3, 4], I32), c([0, 2, 2], I32), c(1, I32), k.w(4)),
    "opset3.embedding_bag_packed_sum": lambda k: o3.embedding_bag_packed_sum(
        k.p((5, 2)), c([[0, 2], [3, 4]], I32), k.w(2, 2)),
    "opset3.embedding_segments_sum": lambda k: o3.embedding_segments_sum(
        k.p((5, 2)), c([0, 2, 3, 4], I32), c([0, 0, 2, 2], I32), c(4, I32), c(1, I32),
        k.w(4)),
    "opset15.embedding_bag_offsets": lambda k: o15.embedding_bag_offsets(
        k.p((5, 2)), c([0, 2, 3, 4], I32), c([0, 2, 2], I32), c(1, I32), None, "mean"),
    "opset15.embedding_bag_packed": lambda k: o15.embedding_bag_packed(
        k.p((5, 2)), c([[0, 2], [3, 4]], I32), None, "mean"),
})
_BOXES = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11],
                    [0, 10.1, 1, 11.1], [0, 100, 1, 101]]], F32)
_SCORES = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [0.1, 0.8, 0.4, 0.2, 0.7, 0.6]]], F32)


def _nms(fn, *extra, **kw) -> Callable[[Case], Any]:
    return lambda k: fn(k.p(_BOXES.shape, value=_BOXES), k.p(_SCORES.shape, value=_SCORES),
                        c(3), c(0.5, F32), c(0.0, F32), *extra, **kw)


BUILDERS["opset1.non_max_suppression"] = _nms(o1.non_max_suppression, "corner", True)
BUILDERS["opset3.non_max_suppression"] = _nms(o3.non_max_suppression, "corner", False, "i32")
BUILDERS["opset4.non_max_suppression"] = _nms(o4.non_max_suppression, "corner", True, "i64")
BUILDERS["opset5.non_max_suppression"] = _nms(o5.non_max_suppression, c(0.0, F32), "corner",
                                              True, "i64")
BUILDERS["opset9.non_max_suppression"] = _nms(o9.non_max_suppression, c(0.0, F32), "corner",
                                              True, "i32")
