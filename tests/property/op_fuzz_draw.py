"""Drawing helpers of the operator fuzz: sizes that change (or not) over an infer request's
steps, inputs declared with symbolic or static dims, and random non-zero feeds.

A family strategy makes a :class:`Draw` (``k`` steps), asks it for sizes (a tuple of ``k``
values each), declares inputs from per-step shapes, and returns ``d.case(...)``.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from op_fuzz_harness import Case

OPSETS = (13, 17, 18, 28)  # 28: the newest that this onnx and onnxruntime both define
NP_OF = {TensorProto.FLOAT: np.float32, TensorProto.INT64: np.int64,
         TensorProto.INT32: np.int32, TensorProto.BOOL: np.bool_,
         TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8,
         TensorProto.FLOAT16: np.float16, TensorProto.DOUBLE: np.float64}
ONNX_OF = {np.dtype(v): k for k, v in NP_OF.items()}


class Draw:
    """One case under construction: hypothesis' ``draw``, the step count, a numpy generator
    seeded by a draw, and how inputs are declared (``dyn``: every dim symbolic, ``mixed``:
    sizes that never change static, ``static``: no size changes, all static)."""

    def __init__(self, draw, min_opset: int = 13) -> None:
        self.draw = draw
        self.decl = draw(st.sampled_from(("dyn", "mixed", "static")))
        self.k = 2 if self.decl == "static" else draw(st.integers(2, 4))
        self.rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
        self.opset = draw(st.sampled_from([o for o in OPSETS if o >= min_opset]))
        self.transformations = draw(st.sampled_from(("GNA", "GNA", "COMMON", "NONE")))
        self.inputs: list = []
        self.steps: list[dict[str, np.ndarray]] = [{} for _ in range(self.k)]
        self.inits: list = []
        self.nodes: list = []

    def size(self, lo: int, hi: int, zero: bool = False) -> tuple[int, ...]:
        """``k`` sizes in [lo, hi]: one size for all steps, or (not static) one per step;
        with ``zero``, sometimes 0 (an empty tensor) at a step."""
        one = st.integers(lo, hi)
        if zero:
            one = st.one_of(st.just(0), one, one, one, one, one)
        if self.decl == "static" or self.draw(st.booleans()):
            return (self.draw(one),) * self.k
        return tuple(self.draw(one) for _ in range(self.k))

    def pick(self, options):
        return self.draw(st.sampled_from(list(options)))

    def flag(self) -> bool:
        return self.draw(st.booleans())

    def values(self, shape, dtype, kind: str = "nonzero") -> np.ndarray:
        """Random values: floats of magnitude 0.5-2 with random signs (``nonzero``), any
        normal floats (``any``), non-zero integers in [-9, 9], or booleans."""
        return np.asarray(self._values(tuple(shape), np.dtype(dtype), kind))

    def _values(self, shape, dt, kind):
        if dt == np.bool_:
            return self.rng.random(shape) < 0.5
        if dt.kind == "f":
            if kind == "any":
                return self.rng.standard_normal(shape).astype(dt)
            mag = self.rng.uniform(0.5, 2.0, shape)
            return (mag * self.rng.choice([-1.0, 1.0], shape)).astype(dt)
        lo = 1 if dt.kind == "u" else -9
        v = self.rng.integers(lo, 10, shape)
        if dt.kind != "u":
            v = np.where(v == 0, 1, v)
        return np.asarray(v).astype(dt)

    def input(self, name: str, shapes, dtype=np.float32, kind: str = "nonzero",
              arrays=None) -> str:
        """Declare input ``name`` (per-step ``shapes``; ``arrays`` overrides the values) and
        fill its feed for every step."""
        shapes = [tuple(s) for s in shapes]
        rank = len(shapes[0])
        dims: list | None = []
        for axis in range(rank):
            sizes = {s[axis] for s in shapes}
            if len(sizes) == 1 and self.decl != "dyn":
                dims.append(shapes[0][axis])
            else:
                dims.append(f"{name}_{axis}")
        if self.decl == "dyn" and self.draw(st.integers(0, 9)) == 0:
            dims = None
        self.inputs.append((name, ONNX_OF[np.dtype(dtype)], dims))
        for i, s in enumerate(shapes):
            self.steps[i][name] = np.asarray(arrays[i] if arrays is not None
                                             else self.values(s, dtype, kind))
        return name

    def const(self, name: str, value, dtype=None) -> str:
        """An initializer."""
        arr = np.asarray(value, dtype=dtype)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(self, op: str, inputs, outputs, **attrs) -> list[str]:
        self.nodes.append(helper.make_node(op, list(inputs), list(outputs), **attrs))
        return list(outputs)

    def case(self, outputs) -> Case:
        return Case(self.nodes, self.inputs, list(outputs), self.steps, self.opset, self.inits,
                    self.transformations)


def at(shapes_per_axis, i: int) -> tuple[int, ...]:
    """Step ``i``'s shape from a list of per-axis size tuples (ints are the same each step)."""
    return tuple(s if isinstance(s, int) else s[i] for s in shapes_per_axis)


def per_step(d: Draw, shapes_per_axis) -> list[tuple[int, ...]]:
    return [at(shapes_per_axis, i) for i in range(d.k)]
