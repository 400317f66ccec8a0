"""Random small graphs built identically in netpass and OpenVINO, for the pattern differential.

A graph is drawn once as a list of :class:`GNode` (kind, input values, attributes) and then
built by :func:`build` in either library, every node named ``n<i>`` so that matches compare by
name: Parameters (some with dynamic dims, f32 or f16), Constants, unary and binary elementwise
ops, MatMul, Transpose, Reshape, Concat, Split with two outputs, values with several
consumers, and a Result on every unused value plus a few on used ones.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

UNARY = ("Relu", "Abs", "Negative", "Sigmoid")
COMMUTATIVE = ("Add", "Multiply", "Maximum")
ORDERED = ("Subtract", "MatMul")  # binary, argument order matters
_SHAPES = ([2, 2], [2, 4], [4, 2], [-1, 2], [2, -1], [4, 4])


@dataclass
class GNode:
    """One drawn node: ``kind`` is the OpenVINO type name; ``inputs`` are (node, output)."""

    kind: str
    inputs: list[tuple[int, int]] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Value:
    node: int
    index: int
    shape: list[int]
    dtype: str


def n_outputs(g: GNode) -> int:
    if g.kind == "Result":
        return 0
    return 2 if g.kind == "Split" else 1


def draw_graph(rng: random.Random, size: int) -> list[GNode]:
    """About ``size`` op nodes over 1-3 Parameters; every value is read by something."""
    nodes: list[GNode] = []
    values: list[Value] = []

    def add(kind: str, inputs: list[Value], shapes: list[list[int]], et: str,
            **attrs: Any) -> list[Value]:
        nodes.append(GNode(kind, [(v.node, v.index) for v in inputs], attrs))
        outs = [Value(len(nodes) - 1, i, s, et) for i, s in enumerate(shapes)]
        values.extend(outs)
        return outs

    def const(shape: list[int], dtype: str) -> Value:
        data = rng.choice([-1.5, -0.5, 0.5, 2.0]) * np.ones(shape) + \
            np.arange(int(np.prod(shape))).reshape(shape) * 0.25
        return add("Constant", [], [shape], dtype, value=data.astype(dtype))[0]

    def int_const(data: Any) -> Value:
        arr = np.asarray(data, dtype=np.int64)
        return add("Constant", [], [list(arr.shape)], "int64", value=arr)[0]

    dtype = rng.choice(["float32", "float32", "float16"])
    for _ in range(rng.randint(1, 3)):
        shape = list(rng.choice(_SHAPES))
        add("Parameter", [], [shape], dtype, shape=shape, dtype=dtype)
    for _ in range(size):
        floats = [v for v in values if v.dtype == dtype]
        v = rng.choice(floats)
        kind = rng.choice(("unary", "unary", "binary", "binary", "MatMul", "Transpose",
                           "Reshape", "Concat", "Split"))
        static = -1 not in v.shape
        if kind == "unary":
            add(rng.choice(UNARY), [v], [v.shape], dtype)
        elif kind == "binary":
            same = [w for w in floats if w.shape == v.shape]
            w = rng.choice(same) if same and rng.random() < 0.8 else const(
                [d if d > 0 else 2 for d in v.shape], dtype) if static else v
            args = [v, w] if rng.random() < 0.5 else [w, v]
            add(rng.choice(COMMUTATIVE + ("Subtract",)), args, [v.shape], dtype)
        elif kind == "MatMul" and v.shape[1] > 0:
            k = v.shape[1]
            partners = [w for w in floats if w.shape[0] == k]
            w = rng.choice(partners) if partners and rng.random() < 0.7 else const([k, 2], dtype)
            add("MatMul", [v, w], [[v.shape[0], w.shape[1]]], dtype,
                transpose_a=False, transpose_b=False)
        elif kind == "Transpose":
            add("Transpose", [v, int_const([1, 0])], [v.shape[::-1]], dtype)
        elif kind == "Reshape" and static:
            add("Reshape", [v, int_const(v.shape[::-1])], [v.shape[::-1]], dtype,
                special_zero=False)
        elif kind == "Concat":
            same = [w for w in floats if w.shape == v.shape]
            parts = [v] + rng.sample(same, min(len(same), rng.randint(1, 2)))
            axis = rng.choice([ax for ax in (0, 1) if v.shape[ax] > 0] or [0])
            shape = list(v.shape)
            shape[axis] *= len(parts)
            add("Concat", parts, [shape], dtype, axis=axis)
        elif kind == "Split":
            axes = [ax for ax in (0, 1) if v.shape[ax] > 0 and v.shape[ax] % 2 == 0]
            if not axes:
                continue
            axis = rng.choice(axes)
            shape = list(v.shape)
            shape[axis] //= 2
            add("Split", [v, int_const(axis)], [shape, shape], dtype, num_splits=2)
    used = {i for g in nodes for i in g.inputs}
    for v in list(values):
        if (v.node, v.index) not in used or (nodes[v.node].kind != "Constant"
                                             and rng.random() < 0.15):
            add("Result", [v], [], v.dtype)
    return nodes


def build(graph: list[GNode], lib: str) -> tuple[Any, list[Any]]:
    """(model, nodes) in ``lib`` ("np" or "ov"); node ``i`` is named ``n<i>``, its output
    ``k`` has the tensor name ``t<i>_<k>``."""
    if lib == "np":
        from netpass import Model
        from netpass import opset as o
    else:
        import openvino.opset13 as o
        from openvino import Model
    built: list[Any] = []
    for i, g in enumerate(graph):
        args = [built[n].output(k) for n, k in g.inputs]
        a = g.attrs
        if g.kind == "Parameter":
            node = o.parameter(a["shape"], np.dtype(a["dtype"]))
        elif g.kind == "Constant":
            node = o.constant(a["value"])
        elif g.kind == "MatMul":
            node = o.matmul(args[0], args[1], False, False)
        elif g.kind == "Transpose":
            node = o.transpose(*args)
        elif g.kind == "Reshape":
            node = o.reshape(args[0], args[1], False)
        elif g.kind == "Concat":
            node = o.concat(args, a["axis"])
        elif g.kind == "Split":
            node = o.split(args[0], args[1], 2)
        elif g.kind == "Result":
            node = o.result(args[0])
        else:
            fn = {"Relu": o.relu, "Abs": o.abs, "Negative": o.negative, "Sigmoid": o.sigmoid,
                  "Add": o.add, "Multiply": o.multiply, "Maximum": o.maximum,
                  "Subtract": o.subtract}[g.kind]
            node = fn(*args)
        # tensor names before the Model: OpenVINO's names an unnamed output after its Result
        if lib == "np":
            node.friendly_name = f"n{i}"
            for k in range(n_outputs(g)):
                node.output(k).names.add(f"t{i}_{k}")
        else:
            node.set_friendly_name(f"n{i}")
            for k in range(n_outputs(g)):
                node.output(k).get_tensor().set_names({f"t{i}_{k}"})
        built.append(node)
    results = [n for n, g in zip(built, graph) if g.kind == "Result"]
    params = [n for n, g in zip(built, graph) if g.kind == "Parameter"]
    return Model(results, params, "fuzz"), built
