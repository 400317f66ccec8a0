"""Runtime shape inference on concrete shapes: fast numpy rules for the common kinds, the
ops' own partial-shape inference (on a clone fed static Parameters and value Constants) for
everything else, memoised per node and input signature."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..core.node import OP_TYPES
from ..core.types import Type
from ..errors import ShapeInferenceError
from . import impls

_SAME = {"Softmax", "LogSoftmax", "MVN", "Convert", "Result", "CumSum", "NormalizeL2"} | (
    impls.ELTWISE_KINDS - {"Select"})


def _ints(v) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)]


def _fast_movement(kind: str, attrs: dict, shapes: list[tuple], values: dict) -> list[tuple] | None:
    """Squeeze, Unsqueeze, Slice, Split, VariadicSplit and Range from their value inputs."""
    s = shapes[0]
    if kind == "Unsqueeze" and 1 in values:
        rank = len(s) + len(_ints(values[1]))
        axes = sorted(a % rank for a in _ints(values[1]))
        out, it = [], iter(s)
        for i in range(rank):
            out.append(1 if i in axes else next(it))
        return [tuple(out)]
    if kind == "Squeeze":
        if len(shapes) > 1 and 1 in values:
            axes = {a % max(len(s), 1) for a in _ints(values[1])}
            return [tuple(d for i, d in enumerate(s) if not (i in axes and d == 1))]
        if len(shapes) == 1:
            return [tuple(d for d in s if d != 1)]
        return None
    if kind == "Slice" and all(j in values for j in range(1, len(shapes))):
        starts, stops, steps = _ints(values[1]), _ints(values[2]), _ints(values[3])
        axes = _ints(values[4]) if len(shapes) > 4 else list(range(len(starts)))
        out = list(s)
        for a, b, e, st in zip(axes, starts, stops, steps):
            a %= len(s)
            out[a] = len(range(*slice(b, e, st).indices(s[a])))
        return [tuple(out)]
    if kind == "VariadicSplit" and 1 in values and 2 in values:
        axis = _ints(values[1])[0] % len(s)
        lengths = _ints(values[2])
        if lengths.count(-1) == 1:
            lengths[lengths.index(-1)] = s[axis] - (sum(lengths) + 1)
        return [s[:axis] + (n,) + s[axis + 1:] for n in lengths]
    if kind == "Split" and 1 in values:
        axis = _ints(values[1])[0] % len(s)
        n = int(attrs.get("num_splits", 1))
        return [s[:axis] + (s[axis] // n,) + s[axis + 1:]] * n
    if kind == "Range" and all(j in values for j in range(3)):
        a, b, st = (np.asarray(values[j]).reshape(-1)[0].item() for j in range(3))
        return [(max(int(np.ceil((b - a) / st)), 0),)]
    return None


def _broadcast(shapes: list[tuple]) -> list[tuple] | None:
    """numpy broadcasting of concrete shapes (plain Python: np.broadcast_shapes costs more
    than the whole rule for the two or three short shapes elementwise ops have)."""
    out = list(shapes[0])
    for s in shapes[1:]:
        if len(s) > len(out):
            out = [1] * (len(s) - len(out)) + out
        off = len(out) - len(s)
        for i, d in enumerate(s):
            o = out[off + i]
            if o != d:
                if o == 1:
                    out[off + i] = d
                elif d != 1:
                    return None
    return [tuple(out)]


def _fast(kind: str, attrs: dict, shapes: list[tuple], values: dict) -> list[tuple] | None:
    if kind in _SAME and (len(shapes) == 1 or kind in ("MVN", "NormalizeL2", "CumSum")):
        return [shapes[0]]
    if kind in ("Unsqueeze", "Squeeze", "Slice", "VariadicSplit", "Split", "Range"):
        return _fast_movement(kind, attrs, shapes, values)
    if kind in impls.ELTWISE_KINDS or kind == "Select":
        if attrs.get("auto_broadcast", "numpy") != "numpy":
            return None
        return _broadcast(shapes)
    if kind == "MatMul":
        a, b = list(shapes[0]), list(shapes[1])
        if len(a) < 2 or len(b) < 2:
            return None
        if attrs.get("transpose_a"):
            a[-1], a[-2] = a[-2], a[-1]
        if attrs.get("transpose_b"):
            b[-1], b[-2] = b[-2], b[-1]
        if a[-1] != b[-2]:
            return None
        batch = _broadcast([tuple(a[:-2]), tuple(b[:-2])])
        if batch is None:
            return None
        return [batch[0] + (a[-2], b[-1])]
    if kind == "ShapeOf":
        return [(len(shapes[0]),)]
    if kind == "Reshape" and 1 in values:
        target = [int(v) for v in np.asarray(values[1]).reshape(-1)]
        src = shapes[0]
        out = []
        for i, t in enumerate(target):
            out.append(src[i] if t == 0 and attrs.get("special_zero") else t)
        if out.count(-1) == 1:
            known = 1
            for d in out:
                if d != -1:
                    known *= d
            total = int(np.prod(src, dtype=np.int64))
            out[out.index(-1)] = total // known if known else 0
        return [tuple(out)]
    if kind == "Concat":
        axis = attrs.get("axis", 0)
        axis = axis + len(shapes[0]) if axis < 0 else axis
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        return [tuple(out)]
    if kind == "Transpose" and 1 in values:
        order = [int(v) for v in np.asarray(values[1]).reshape(-1)]
        if not order:
            order = list(range(len(shapes[0])))[::-1]
        return [tuple(shapes[0][o] for o in order)]
    if kind == "Gather" and 2 in values and not attrs.get("batch_dims", 0):
        axis = int(np.asarray(values[2]).reshape(-1)[0]) % len(shapes[0])
        s = shapes[0]
        return [tuple(s[:axis]) + tuple(shapes[1]) + tuple(s[axis + 1:])]
    return None


class ShapeInfer:
    """Output shapes of a program node from concrete input shapes and shape-infer values."""

    def __init__(self, pnode: Any, capacity: int = 512) -> None:
        self.pnode = pnode
        self._memo: dict = {}
        self._capacity = capacity

    def __call__(self, shapes: list[tuple], values: dict[int, np.ndarray]) -> list[tuple]:
        p = self.pnode
        if p.subgraph is not None:
            return p.subgraph.infer_shapes(shapes)
        fast = _fast(p.kind, p.attrs, shapes, values)
        if fast is not None:
            return fast
        key = (tuple(shapes), tuple((i, v.dtype.str, v.shape, v.tobytes()) for i, v in sorted(values.items())))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        out = self._generic(shapes, values)
        if len(self._memo) >= self._capacity:
            self._memo.clear()
        self._memo[key] = out
        return out

    def _generic(self, shapes: list[tuple], values: dict[int, np.ndarray]) -> list[tuple]:
        from ..ops.io import Constant, Parameter
        p = self.pnode
        cls = op_class(p)
        if cls is None:
            raise ShapeInferenceError(f"no op class for kind '{p.kind}' (node '{p.id}')")
        ins = []
        for j, (src, k) in enumerate(p.inputs):
            dt = src.out_dtypes[k]
            if j in values or src.kind == "Constant":
                v = values.get(j, src.value)
                ins.append(Constant([], value=np.asarray(v, dtype=dt)))
            else:
                ins.append(Parameter([], shape=shapes[j], element_type=_element_type(dt)))
        op = cls(ins, **p.attrs)
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


def op_class(pnode: Any) -> type | None:
    """The op class of a program node: its source op's own class (the right version of a
    type name with several opsets), else the class registered under its kind."""
    return type(pnode.op) if pnode.op is not None else OP_TYPES.get(pnode.kind)


def infer_host(pnode: Any, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run a node's numpy reference (shape_of sub-graphs, host fallbacks)."""
    if getattr(pnode, "subgraph", None) is not None:
        return pnode.subgraph.evaluate(arrays)
    op = pnode.op
    if op is None:
        from ..ops.io import Parameter
        cls = OP_TYPES.get(pnode.kind)
        if cls is None:
            raise ShapeInferenceError(f"no op class for kind '{pnode.kind}' (node '{pnode.id}')")
        ins = [Parameter([], shape=a.shape, element_type=_element_type(a.dtype)) for a in arrays]
        op = cls(ins, **pnode.attrs)
    return [np.asarray(o) for o in op.evaluate(list(arrays))]
