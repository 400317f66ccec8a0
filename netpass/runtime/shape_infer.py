"""Runtime shape inference on concrete shapes: the op table row's shape rule where it has one
(:mod:`netpass.runtime.kinds`), else the op's own partial-shape inference on a clone fed static
Parameters and value Constants, memoised per node and input signature; and the host evaluation
of a node's numpy reference (shape_of sub-graphs, host fallbacks)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.boundary import Constant, Parameter
from ..core.node import Node
from ..core.types import Type
from ..errors import ShapeInferenceError


class ShapeInfer:
    """Output shapes of a program node from concrete input shapes and shape-infer values."""

    def __init__(self, pnode: Any, capacity: int = 512) -> None:
        self.pnode = pnode
        self.rule = pnode.row.shape
        self._memo: dict = {}
        self._capacity = capacity

    def __call__(self, shapes: list[tuple], values: dict[int, np.ndarray]) -> list[tuple]:
        out = self._infer(shapes, values)
        grown = self.pnode.grown_by
        if grown:  # (an elementwise region grown by constants: ``ProgramNode.grown_by``)
            return [tuple(np.broadcast_shapes(out[0], *grown))] + out[1:]
        return out

    def _infer(self, shapes: list[tuple], values: dict[int, np.ndarray]) -> list[tuple]:
        p = self.pnode
        if p.subgraph is not None:
            return p.subgraph.infer_shapes(shapes, values)
        if self.rule is not None:
            fast = self.rule(p.attrs, shapes, values)
            if fast is not None:
                return fast
        key = (tuple(shapes),
               tuple((i, v.dtype.str, v.shape, v.tobytes()) for i, v in sorted(values.items())))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        out = self._generic(shapes, values)
        if len(self._memo) >= self._capacity:
            self._memo.clear()
        self._memo[key] = out
        return out

    def _generic(self, shapes: list[tuple], values: dict[int, np.ndarray]) -> list[tuple]:
        p = self.pnode
        ins: list[Node] = []
        for j, (src, k) in enumerate(p.inputs):
            dt = src.out_dtypes[k]
            if j in values or src.is_constant:
                v = values.get(j, src.value)
                ins.append(Constant([], value=np.asarray(v, dtype=dt)))
            else:
                ins.append(Parameter([], shape=shapes[j], element_type=_element_type(dt)))
        op = p.op_class(ins, **p.attrs)
        out = []
        for ps in (op.get_output_partial_shape(i) for i in range(op.get_output_size())):
            if not ps.is_static:
                raise ShapeInferenceError(
                    f"{p.kind} '{p.name}': output shape {ps} is not static for input shapes "
                    f"{[list(s) for s in shapes]}")
            out.append(tuple(int(d) for d in ps.to_shape()))
        return out


def _element_type(dt: np.dtype) -> Type:
    """The element type of a numpy dtype; ml_dtypes' bfloat16 (no numpy dtype in Type) by name."""
    return Type.of("bf16" if np.dtype(dt).name == "bfloat16" else dt)


def infer_host(pnode: Any, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run a node's numpy reference (shape_of sub-graphs, host fallbacks)."""
    if getattr(pnode, "subgraph", None) is not None:
        return pnode.subgraph.evaluate(arrays)
    op = pnode.op
    if op is None:
        ins = [Parameter([], shape=a.shape, element_type=_element_type(a.dtype)) for a in arrays]
        op = pnode.op_class(ins, **pnode.attrs)
    return [np.asarray(o) for o in op.evaluate(list(arrays))]


def fully_connected_shapes(node_id: str, shapes: Sequence[tuple]) -> list[tuple]:
    """A plain FullyConnected's output shape from its input's and weights' [N, K] (the shape
    rule of a projection whose node carries a fold's inputs after its own three)."""
    x, w = shapes[0], shapes[1]
    if len(w) != 2 or not x or x[-1] != w[1]:
        raise ShapeInferenceError(f"FullyConnected '{node_id}': input {list(x)} does not fit "
                                  f"weights {list(w)}")
    return [tuple(x[:-1]) + (w[0],)]
