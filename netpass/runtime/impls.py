"""Implementations: for one primitive and one set of concrete shapes, the kernels to enqueue
(source, global/local sizes, argument spec) or a host function. Built by :func:`create_impl`
and kept in the program's LRU implementations cache, keyed by the kernel parameters.

Argument specs are lists whose items are ``("i", j)`` (input tensor j: buffer, offset),
``("o", j)`` (output j), ``("e", j)`` (fused post-op input j), ``("b", k)`` (impl-owned buffer
k: an index map) or an int (a scalar argument).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from . import kernels
from .kernels import mma
from .kernels import Stage, ctype, flit

# -- elementwise expressions ---------------------------------------------------------------------
_F_BINARY = {
    "Add": "({0} + {1})", "Subtract": "({0} - {1})", "Multiply": "({0} * {1})",
    "Divide": "({0} / {1})", "Power": "pow({0}, {1})", "Maximum": kernels.nan_max("{0}", "{1}"),
    "Minimum": kernels.nan_min("{0}", "{1}"), "SquaredDifference": "(({0} - {1}) * ({0} - {1}))",
    # fmod keeps numpy's result for infinite divisors, where x - floor(x / y) * y is NaN
    "FloorMod": "((fmod({0}, {1}) != 0 && ((fmod({0}, {1}) < 0) != ({1} < 0))) ? "
                "fmod({0}, {1}) + {1} : fmod({0}, {1}))", "Mod": "fmod({0}, {1})",
    "PRelu": "({0} < 0 ? {0} * {1} : {0})",
}
_I_BINARY = {
    "Add": "({0} + {1})", "Subtract": "({0} - {1})", "Multiply": "({0} * {1})",
    "Maximum": "max({0}, {1})", "Minimum": "min({0}, {1})",
    "SquaredDifference": "(({0} - {1}) * ({0} - {1}))",
    "Divide": "({0} / {1} - ((({0} % {1}) != 0) && ((({0}) < 0) != (({1}) < 0))))",
    "FloorMod": "((({0} % {1}) + {1}) % {1})", "Mod": "({0} % {1})",
}
_COMPARE = {"Equal": "==", "NotEqual": "!=", "Less": "<", "Greater": ">", "LessEqual": "<=",
            "GreaterEqual": ">="}
_LOGICAL = {"LogicalAnd": "({0} && {1})", "LogicalOr": "({0} || {1})",
            "LogicalXor": "(({0} != 0) != ({1} != 0))", "LogicalNot": "(!{0})"}
# NaN propagates wherever the reference (numpy) propagates it: OpenCL's fmax/fmin/sign drop it
_F_UNARY = {
    "Relu": "(isnan({0}) ? {0} : fmax({0}, 0.0f))", "Sigmoid": "(1.0f / (1.0f + exp(-{0})))",
    "Tanh": "tanh({0})",
    "Exp": "exp({0})", "Log": "log({0})", "Sqrt": "sqrt({0})", "Abs": "fabs({0})",
    "Negative": "(-{0})", "Erf": "erf({0})", "Floor": "floor({0})", "Ceiling": "ceil({0})",
    "Sign": "(isnan({0}) ? {0} : sign({0}))", "Sin": "sin({0})", "Cos": "cos({0})",
    "Tan": "tan({0})",
    "Asin": "asin({0})", "Acos": "acos({0})", "Atan": "atan({0})", "Sinh": "sinh({0})",
    "Cosh": "cosh({0})", "Asinh": "asinh({0})", "Acosh": "acosh({0})", "Atanh": "atanh({0})",
    "SoftSign": "({0} / (1.0f + fabs({0})))",
    "HSwish": "({0} * fmin(fmax({0} + 3.0f, 0.0f), 6.0f) / 6.0f)",
    "HSigmoid": f"({kernels.nan_clamp('{0} + 3.0f', '0.0f', '6.0f')} / 6.0f)",
    "SoftPlus": "({0} > 20.0f ? {0} : log1p(exp({0})))",
    "Mish": "({0} * tanh({0} > 20.0f ? {0} : log1p(exp({0}))))",
    "IsNaN": "isnan({0})",
}
_I_UNARY = {"Abs": "abs({0})", "Negative": "(-{0})", "Relu": "max({0}, ({T})0)",
            "Sign": "(({0} > 0) - ({0} < 0))"}


def _float_unary(kind: str, attrs: dict, n_in: int) -> str | None:
    if kind in _F_UNARY:
        return _F_UNARY[kind]
    if kind == "Gelu":
        if str(attrs.get("approximation_mode", "ERF")).upper() == "TANH":
            return "(0.5f * {0} * (1.0f + tanh(0.7978845608028654f * ({0} + 0.044715f * {0} * {0} * {0}))))"
        return "(0.5f * {0} * (1.0f + erf({0} * 0.7071067811865476f)))"
    if kind == "Round":
        return "rint({0})" if attrs.get("mode", "half_to_even") == "half_to_even" else "round({0})"
    if kind == "Clamp":
        return kernels.nan_clamp("{0}", flit(attrs["min"]), flit(attrs["max"]))
    if kind == "Elu":
        return f"({{0}} > 0.0f ? {{0}} : {flit(attrs['alpha'])} * (exp({{0}}) - 1.0f))"
    if kind == "Swish":
        return "({0} / (1.0f + exp(-{0} * {1})))" if n_in == 2 else "({0} / (1.0f + exp(-{0})))"
    if kind == "HardSigmoid":
        return kernels.nan_clamp("({1} * {0} + {2})", "0.0f", "1.0f")
    if kind == "Selu":
        return "({2} * ({0} > 0.0f ? {0} : {1} * (exp({0}) - 1.0f)))"
    if kind == "IsInf":
        pos, neg = attrs.get("detect_positive", True), attrs.get("detect_negative", True)
        return f"(isinf({{0}}) && (({{0}} > 0) ? {int(bool(pos))} : {int(bool(neg))}))"
    return None


def eltwise_expr(kind: str, attrs: dict, in_dtypes: Sequence[np.dtype], out_dtype: np.dtype) -> str | None:
    """The OpenCL expression of an elementwise op (operands ``{0}``, ``{1}``...), or None."""
    if any(np.dtype(d) == np.float16 for d in list(in_dtypes) + [out_dtype]):
        return None  # float16 runs on the host (documented)
    n = len(in_dtypes)
    first = np.dtype(in_dtypes[0]) if n else np.dtype(out_dtype)
    if kind == "Convert":
        return "({0} != 0)" if np.dtype(out_dtype) == np.bool_ else "{0}"
    if kind in _COMPARE and n == 2:
        return f"({{0}} {_COMPARE[kind]} {{1}})"
    if kind in _LOGICAL:
        return _LOGICAL[kind]
    if kind == "Select" and n == 3:
        return "({0} ? {1} : {2})"
    floaty = first.kind == "f"
    if n == 2 and kind in (_F_BINARY if floaty else _I_BINARY):
        if not floaty and kind == "Divide" and not attrs.get("m_pythondiv", True):
            return "({0} / {1})"
        return (_F_BINARY if floaty else _I_BINARY)[kind]
    if floaty:
        return _float_unary(kind, attrs, n)
    if n == 1 and kind in _I_UNARY:
        return _I_UNARY[kind].replace("{T}", ctype(first))
    return None


ELTWISE_KINDS = set(_F_BINARY) | set(_I_BINARY) | set(_COMPARE) | set(_LOGICAL) | set(_F_UNARY) | {
    "Gelu", "Round", "Clamp", "Elu", "Swish", "HardSigmoid", "Selu", "IsInf", "Convert", "Select"}

MOVEMENT_KINDS = {"Transpose", "Slice", "StridedSlice", "Split", "VariadicSplit", "Broadcast",
                  "Tile", "Pad", "DepthToSpace", "SpaceToDepth", "ShuffleChannels", "Reverse",
                  "Roll", "Squeeze", "Unsqueeze", "Reshape", "CropIE", "Crop"}
REDUCE_KINDS = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
                "ReduceProd": "prod", "ReduceL1": "l1", "ReduceL2": "l2",
                "ReduceLogicalAnd": "and", "ReduceLogicalOr": "or"}


# -- strides ---------------------------------------------------------------------------------------
def contiguous_strides(shape: Sequence[int]) -> list[int]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return out[::-1]


def reshape_strides(shape: Sequence[int], strides: Sequence[int], new_shape: Sequence[int]) -> list[int] | None:
    """Strides under which ``new_shape`` walks the elements of a tensor of ``shape`` read
    with ``strides`` in the same row-major order (a view), or None when no strides can: the
    dims merged into one must be contiguous among themselves (numpy's no-copy reshape)."""
    if _size(shape) == 0:
        return contiguous_strides(new_shape)
    old = [(d, st) for d, st in zip(shape, strides) if d != 1]
    keep = [i for i, d in enumerate(new_shape) if d != 1]
    out = [0] * len(new_shape)
    oi = ni = 0
    while ni < len(keep) and oi < len(old):
        n_prod, o_prod = new_shape[keep[ni]], old[oi][0]
        nj, oj = ni + 1, oi + 1
        while n_prod != o_prod:
            if n_prod < o_prod:
                n_prod *= new_shape[keep[nj]]
                nj += 1
            else:
                o_prod *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        st = old[oj - 1][1]
        for k in range(nj - 1, ni - 1, -1):
            out[keep[k]] = st
            st *= new_shape[keep[k]]
        ni, oi = nj, oj
    return out


def broadcast_strides(in_shape: Sequence[int], out_shape: Sequence[int],
                      strides: Sequence[int] | None = None) -> list[int]:
    """Strides of ``in_shape`` (contiguous, or read with ``strides``) read over ``out_shape``
    with numpy broadcasting (0 on broadcast)."""
    cs = contiguous_strides(in_shape) if strides is None else strides
    pad = len(out_shape) - len(in_shape)
    out = [0] * pad
    for d, s in zip(in_shape, cs):
        out.append(0 if d == 1 else s)
    return out


def collapse(dims: Sequence[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that every tensor walks contiguously."""
    keep = [k for k, d in enumerate(dims) if d != 1]
    d2 = [dims[k] for k in keep]
    s2 = [[s[k] for k in keep] for s in strides]
    if not d2:
        return [], [[] for _ in strides]
    od, os_ = [d2[0]], [[s[0]] for s in s2]
    for k in range(1, len(d2)):
        if all(s[k - 1] == s[k] * d2[k] for s in s2):
            od[-1] *= d2[k]
            for t, s in enumerate(s2):
                os_[t][-1] = s[k]
        else:
            od.append(d2[k])
            for t, s in enumerate(s2):
                os_[t].append(s[k])
    return od, os_


def _size(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


WG = 64  # fixed 1-D work-group size: PoCL specialises kernels per local size, so never vary it


def _1d(n: int) -> tuple[tuple[int], tuple[int]]:
    """(global, local) sizes for ``n`` work-items (kernels bound-check ``gid < n``)."""
    return ((max(n, 1) + WG - 1) // WG * WG,), (WG,)


# -- impl objects ----------------------------------------------------------------------------------
class Launch:
    """One kernel enqueue: source, global/local sizes and the argument spec (tensor refs
    ``("i"|"o"|"e", j[, element offset])``, impl buffers ``("b", j)``, int32 scalars). The
    kernel takes the spec's buffers in order, then its ints packed in one struct (a tensor
    contributes its buffer and, among the ints, its element offset): kernels.pack_scalars."""

    __slots__ = ("source", "gws", "lws", "spec", "_plan", "cdims")

    def __init__(self, source: kernels.Source, gws: tuple, lws: tuple | None, spec: list) -> None:
        self.source, self.gws, self.lws, self.spec = source, gws, lws, spec
        self._plan: tuple | None = None
        self.cdims: tuple | None = None  # the work sizes as C arrays (launcher.DirectLauncher)

    def template(self) -> tuple[int, list, list]:
        """(buffer count, the ints with the tensor offsets left 0, the slots to fill:
        (buffer position, int position or -1, "i" | "o" | "e" | "b", index, element offset))."""
        plan = self._plan
        if plan is None:
            ints: list = []
            slots = []
            nb = 0
            for item in self.spec:
                if type(item) is tuple:
                    if item[0] == "b":
                        slots.append((nb, -1, "b", item[1], 0))
                    else:
                        slots.append((nb, len(ints), item[0], item[1], item[2] if len(item) > 2 else 0))
                        ints.append(0)
                    nb += 1
                else:
                    ints.append(int(item))
            plan = self._plan = (nb, ints, slots)
        return plan

    def args(self, ins: list, outs: list, extras: list, bufs: list | None = None) -> tuple[list, list]:
        """(buffers, ints) of the kernel for these tensors."""
        nb, template, slots = self.template()
        buffers = [None] * nb
        ints = template.copy()
        for b, i, kind, j, off in slots:
            if kind == "b":
                buffers[b] = bufs[j].buffer
                continue
            t = ins[j] if kind == "i" else outs[j] if kind == "o" else extras[j]
            buffers[b] = t.alloc.buffer
            ints[i] = t.offset + off
        return buffers, ints


class Impl:
    """Kernels for one primitive at one set of shapes (or a host function)."""

    __slots__ = ("key", "launches", "buffers", "host", "used_inputs", "sources")

    def __init__(self, key, launches: list[Launch] | None = None, buffers: list | None = None,
                 host: bool = False) -> None:
        self.key = key
        self.launches = launches or []
        self.buffers = buffers or []  # np arrays uploaded once per impl (index maps), or Scratch
        self.host = host  # True: runs the op's numpy reference (host fallback)
        # inputs the kernels read (shape-only inputs are never uploaded)
        self.used_inputs = frozenset(it[1] for ln in self.launches for it in ln.spec
                                     if type(it) is tuple and it[0] == "i")
        # what picks kernel objects: impls of other shapes mostly share it
        self.sources = tuple(ln.source.text for ln in self.launches)

    @property
    def is_host(self) -> bool:
        return self.host


class Scratch:
    """An impl buffer the kernels only write and read back within one primitive (a split-K
    GEMM's partial products): never uploaded; a request hands every Scratch of a size class
    the same device buffer (its queue runs one launch after the other)."""

    __slots__ = ("nbytes",)

    def __init__(self, nbytes: int) -> None:
        self.nbytes = int(nbytes)


class FusedDesc:
    """An elementwise op folded into a producer's kernel: its kind, attributes, what each of
    its inputs reads, and its side inputs (kernel ``extra`` tensors).

    ``refs`` has one item per input of the op: an int ``s`` reads stage value ``s`` (0 is the
    producer's own value, ``t + 1`` the value after fused op ``t``), None reads the next of
    ``others``. A chain reads the previous value; a region such as tanh-GELU reads the
    producer's value several times."""

    __slots__ = ("kind", "attrs", "refs", "others", "out_dtype", "in_dtypes", "node")

    def __init__(self, kind: str, attrs: dict, refs: tuple, others: list, in_dtypes: list,
                 out_dtype, node=None) -> None:
        self.kind, self.attrs, self.refs, self.others = kind, attrs, tuple(refs), others
        self.in_dtypes, self.out_dtype = in_dtypes, out_dtype
        self.node = node  # the fused ProgramNode (host fallbacks evaluate it)

    def key(self) -> tuple:
        return (self.kind, tuple(sorted((k, str(v)) for k, v in self.attrs.items())), self.refs)

    def shifted(self, k: int) -> "FusedDesc":
        """This op with its stage references moved ``k`` stages on (``k`` ops put before)."""
        refs = tuple(None if r is None else r + k for r in self.refs)
        return FusedDesc(self.kind, self.attrs, refs, self.others, self.in_dtypes, self.out_dtype, self.node)


def chained(n_inputs: int, primary: int, stage: int) -> tuple:
    """``refs`` of an op reading stage ``stage`` at input ``primary``, side inputs elsewhere."""
    return tuple(stage if pos == primary else None for pos in range(n_inputs))


def fused_stages(fused: list[FusedDesc], first_extra: int) -> list[Stage]:
    """Stages applying ``fused`` ops after a value ``x``; their side inputs are numbered from
    ``first_extra`` in the kernel's input list."""
    stages, j = [], first_extra
    for f in fused:
        ops = []
        for r in f.refs:
            if r is None:
                ops.append(("in", j))
                j += 1
            else:
                ops.append(("v", r))
        expr = fusable_expr(f.kind, f.attrs, f.in_dtypes, f.out_dtype)
        stages.append(Stage(expr, ops, ctype(f.out_dtype)))
    return stages


def evaluate_fused(fused: list[FusedDesc], value, side_value: Callable, evaluate: Callable):
    """Host evaluation of fused ops after ``value``: ``side_value(src, k)`` gives a side
    input's array, ``evaluate(node, arrays)`` runs an op's reference."""
    vals = [value]
    for f in fused:
        sides = iter(f.others)
        ins = [vals[r] if r is not None else side_value(*next(sides)) for r in f.refs]
        vals.append(evaluate(f.node, ins)[0])
    return vals[-1]


class Params:
    """What an impl is built from (and keyed by): kind, attributes, input/output shapes and
    dtypes, host values of shape-infer inputs, fused ops, the node's id for errors, and the
    compiled model's ``precision`` ("f32" or "tf32": INFERENCE_PRECISION_HINT)."""

    __slots__ = ("kind", "attrs", "in_shapes", "in_dtypes", "out_shapes", "out_dtypes", "values",
                 "fused", "extra_shapes", "extra_dtypes", "node", "engine", "memo", "in_strides",
                 "precision")

    def __init__(self, **kw: Any) -> None:
        for k in self.__slots__:
            setattr(self, k, kw.get(k))
        if self.memo is None:
            self.memo = {}

    def cached(self, key: tuple, make: Callable) -> Any:
        """``make()`` once per primitive and ``key`` (stages, sources): a new shape of the same
        primitive rebuilds only its launch arguments."""
        v = self.memo.get(key)
        if v is None:
            v = self.memo[key] = make()
        return v


def _epilogue(p: Params, out_shape: Sequence[int], first_extra: int = 0):
    """(stages, extra count, extra dtypes, collapsed dims, per-extra strides) of fused ops."""
    if not p.fused:
        return [], 0, [], [], []
    stages = p.cached(("epilogue", first_extra), lambda: fused_stages(p.fused, first_extra))
    strides = [broadcast_strides(s, out_shape) for s in p.extra_shapes]
    dims, st = collapse(list(out_shape), strides)
    return stages, len(p.extra_shapes), list(p.extra_dtypes), dims, st


# -- factories -------------------------------------------------------------------------------------
_EW_OPERATION = {"sum": "Add", "prod": "Multiply", "max": "Maximum", "min": "Minimum",
                 "sub": "Subtract", "div": "Divide"}


def _legacy_expr(kind: str, attrs: dict, in_dtypes, out_dtype) -> str | None:
    if any(np.dtype(d) != np.float32 for d in list(in_dtypes) + [out_dtype]):
        return None
    if kind == "PowerIE":
        base = f"({{0}} * {flit(attrs.get('scale', 1.0))} + {flit(attrs.get('shift', 0.0))})"
        power = float(attrs.get("power", 1.0))
        return base if power == 1.0 else f"pow({base}, {flit(power)})"
    if kind == "ReLUIE":
        return f"({{0}} > 0.0f ? {{0}} : {{0}} * {flit(attrs.get('negative_slope', 0.0))})"
    if kind == "Eltwise":
        op = _EW_OPERATION.get(str(attrs.get("operation", "sum")).lower())
        return _F_BINARY.get(op) if op else None
    if kind == "ScaleShiftIE":
        return "({0} * {1} + {2})"
    if kind == "BatchNormInference":
        return f"((({{0}} - {{3}}) / sqrt({{4}} + {flit(attrs.get('epsilon', 1e-5))})) * {{1}} + {{2}})"
    return None


def fusable_expr(kind: str, attrs: dict, in_dtypes, out_dtype) -> str | None:
    """Expression of an op that may be fused as a post-op (numpy-broadcast elementwise)."""
    expr = eltwise_expr(kind, attrs, in_dtypes, out_dtype)
    if expr is None and kind in ("PowerIE", "ReLUIE", "Eltwise"):
        expr = _legacy_expr(kind, attrs, in_dtypes, out_dtype)
    return expr


def _per_channel(kind: str, shapes: list) -> list:
    """ScaleShiftIE / BatchNormInference: 1-D side inputs broadcast along axis 1."""
    if kind not in ("ScaleShiftIE", "BatchNormInference"):
        return shapes
    rank = len(shapes[0])
    out = [shapes[0]]
    for s in shapes[1:]:
        out.append(tuple(s) + (1,) * (rank - 2) if len(s) == 1 and rank > 1 else s)
    return out


def _eltwise_stages(p: Params) -> list[Stage] | bool:
    """The primitive's own expression then its fused ops; False when there is no kernel."""
    expr = eltwise_expr(p.kind, p.attrs, p.in_dtypes, p.out_dtypes[0])
    if expr is None:
        expr = _legacy_expr(p.kind, p.attrs, p.in_dtypes, p.out_dtypes[0])
    if expr is None:
        return False
    n_in = len(p.in_dtypes)
    stages = [Stage(expr, [("in", j) for j in range(n_in)], ctype(p.out_dtypes[0]))]
    return stages + fused_stages(p.fused or [], n_in)


def eltwise_impl(p: Params, key) -> Impl | None:
    n_in = len(p.in_shapes)
    stages = p.cached(("stages",), lambda: _eltwise_stages(p))
    if stages is False:
        return None
    p.in_shapes = _per_channel(p.kind, list(p.in_shapes))
    out_shape = p.out_shapes[0]
    shapes = list(p.in_shapes) + list(p.extra_shapes or [])
    dtypes = list(p.in_dtypes) + list(p.extra_dtypes or [])
    n = _size(out_shape)
    spec_io: list = [("o", 0)] + [("i", j) for j in range(n_in)] + \
        [("e", j) for j in range(len(shapes) - n_in)]
    full = [tuple(s) == tuple(out_shape) or _size(s) == n and len(s) <= len(out_shape)
            and tuple(s) == tuple(out_shape[len(out_shape) - len(s):]) for s in shapes]
    scalar = [_size(s) == 1 for s in shapes]
    f32 = np.dtype(np.float32)
    if all(full) and all(np.dtype(d) == f32 for d in dtypes + [p.out_dtypes[0]]):
        src = p.cached(("vec4",), lambda: kernels.eltwise_vec4(len(shapes), stages))
        return Impl(key, [Launch(src, *_1d((n + 3) // 4), spec_io + [n])])
    if all(f or s for f, s in zip(full, scalar)):
        src = p.cached(("flat",), lambda: kernels.eltwise(dtypes, p.out_dtypes[0], stages, 0, True))
        return Impl(key, [Launch(src, *_1d(n), spec_io + [n] + [int(s and not f) for f, s in zip(full, scalar)])])
    strides = [contiguous_strides(out_shape)] + [broadcast_strides(s, out_shape) for s in shapes]
    dims, st = collapse(list(out_shape), strides)
    src = p.cached(("strided", len(dims)), lambda: kernels.eltwise(dtypes, p.out_dtypes[0], stages, len(dims), False))
    args = spec_io + [n] + dims + [x for s in st for x in s]
    return Impl(key, [Launch(src, *_1d(n), args)])


_COPY_SOURCES: dict = {}


def bits_dtype(dtype) -> np.dtype:
    """The dtype a pure copy moves ``dtype`` as: float16 as its 16 bits (``ushort``), so
    copies need no ``cl_khr_fp16``."""
    dt = np.dtype(dtype)
    return np.dtype(np.uint16) if dt == np.float16 else dt


def strided_copy(dtype, shape: Sequence[int], in_strides: Sequence[int], in_off: int,
                 out_strides: Sequence[int], out_off: int, in_idx: int, out_idx: int) -> Launch:
    """Copy input ``in_idx`` (walked with ``in_strides`` from ``in_off``) into output
    ``out_idx`` (``out_strides`` from ``out_off``) over ``shape``."""
    dims, st = collapse(list(shape), [list(out_strides), list(in_strides)])
    dtype = bits_dtype(dtype)
    src = _COPY_SOURCES.get((dtype, len(dims)))
    if src is None:
        src = _COPY_SOURCES[(dtype, len(dims))] = kernels.eltwise(
            [dtype], dtype, [Stage("{0}", [("in", 0)], ctype(dtype))], len(dims), False)
    n = _size(shape)
    return Launch(src, *_1d(n),
                  [("o", out_idx, out_off), ("i", in_idx, in_off), n] + dims + [x for s in st for x in s])


def transpose_impl(p: Params, key) -> Impl:
    shape = p.in_shapes[0]
    order = [int(v) for v in np.asarray(p.values[1]).reshape(-1)] if p.values.get(1) is not None \
        and np.asarray(p.values[1]).size else list(range(len(shape)))[::-1]
    # a strided input (a variable's capacity view, netpass.runtime.state) is walked as it lies
    cs = p.in_strides[0] if p.in_strides and p.in_strides[0] is not None \
        else contiguous_strides(shape)
    out_shape = p.out_shapes[0]
    return Impl(key, [strided_copy(p.in_dtypes[0], out_shape, [cs[o] for o in order], 0,
                                   contiguous_strides(out_shape), 0, 0, 0)])


def concat_impl(p: Params, key) -> Impl:
    out_shape = p.out_shapes[0]
    axis = p.attrs.get("axis", 0)
    axis = axis + len(out_shape) if axis < 0 else axis
    os_ = contiguous_strides(out_shape)
    launches, pos = [], 0
    for j, s in enumerate(p.in_shapes):
        if _size(s):
            launches.append(strided_copy(p.in_dtypes[j], s, contiguous_strides(s), 0, os_,
                                         pos * os_[axis], j, 0))
        pos += s[axis]
    return Impl(key, launches)


def _ints(v) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)]


def split_impl(p: Params, key) -> Impl | None:
    """Split / VariadicSplit: one launch writing every output (kernels.split), the sizes along
    the axis as scalar arguments."""
    if p.values.get(1) is None:
        return None
    shape = p.in_shapes[0]
    axis = _ints(p.values[1])[0] % len(shape)
    n = _size(shape)
    if not n:
        return Impl(key, [])
    bounds, pos = [], 0
    for out in p.out_shapes[:-1]:
        pos += out[axis]
        bounds.append(pos)
    src = kernels.split(bits_dtype(p.in_dtypes[0]), len(p.out_shapes))
    spec = [("i", 0)] + [("o", j) for j in range(len(p.out_shapes))]
    spec += [n, shape[axis], _size(shape[axis + 1:])] + bounds
    return Impl(key, [Launch(src, *_1d(n), spec)])


def slice_view(shape: Sequence[int], strides: Sequence[int], values: dict) -> tuple[int, list[int]]:
    """(element offset, strides) of a Slice's output in its input of ``shape`` read with
    ``strides``, from the Slice's start/stop/step(/axes) ``values`` (negative steps are
    negative strides)."""
    starts, stops, steps = _ints(values[1]), _ints(values[2]), _ints(values[3])
    axes = _ints(values[4]) if 4 in values else list(range(len(starts)))
    out, off = list(strides), 0
    for a, b, e, st in zip(axes, starts, stops, steps):
        a %= len(shape)
        off += slice(b, e, st).indices(shape[a])[0] * strides[a]
        out[a] = strides[a] * st
    return off, out


def slice_impl(p: Params, key) -> Impl | None:
    """Slice (opset 8): a strided view of the input (negative steps are negative strides)."""
    if any(p.values.get(j) is None for j in range(1, len(p.in_shapes))):
        return None
    shape = p.in_shapes[0]
    off, strides = slice_view(shape, contiguous_strides(shape), p.values)
    out = p.out_shapes[0]
    if not _size(out):
        return Impl(key, [])
    return Impl(key, [strided_copy(p.in_dtypes[0], out, strides, off, contiguous_strides(out), 0, 0, 0)])


def _index_map_outputs(p: Params) -> list[np.ndarray] | None:
    """Source element of each output element, from the op's numpy reference run on indices."""
    from ..ops.io import Constant, Parameter
    from .shape_infer import op_class
    cls = op_class(p.node) if p.node is not None else None
    if cls is None:
        return None
    shape0 = tuple(p.in_shapes[0])
    ins = [Parameter([], shape=shape0, element_type="i64")]
    vals = []
    for j in range(1, len(p.in_shapes)):
        v = p.values.get(j)
        if v is None:
            return None
        if p.kind == "Pad" and j == 3:
            v = np.asarray(-1, dtype=np.int64)
        ins.append(Constant([], value=np.asarray(v)))
        vals.append(np.asarray(v))
    if p.kind == "Pad" and len(p.in_shapes) == 3:  # no pad value: mark the padding all the same
        ins.append(Constant([], value=np.asarray(-1, dtype=np.int64)))
        vals.append(np.asarray(-1, dtype=np.int64))
    try:
        op = cls(ins, **p.attrs)
        idx = np.arange(_size(shape0), dtype=np.int64).reshape(shape0)
        outs = op.evaluate([idx] + vals)
    except Exception:
        return None
    res = []
    for o, want in zip(outs, p.out_shapes):
        o = np.asarray(o)
        if o.dtype.kind not in "iu" or tuple(o.shape) != tuple(want):
            return None
        res.append(o)
    return res


def _affine(idx: np.ndarray) -> tuple[int, list[int]] | None:
    """(offset, strides) when ``idx`` is an affine function of the coordinates."""
    if idx.size == 0:
        return 0, [0] * idx.ndim
    flat0 = int(idx.reshape(-1)[0])
    if flat0 < 0:
        return None
    strides = []
    for k in range(idx.ndim):
        if idx.shape[k] > 1:
            sl = [0] * idx.ndim
            sl[k] = 1
            strides.append(int(idx[tuple(sl)]) - flat0)
        else:
            strides.append(0)
    grid = flat0
    for k, s in enumerate(strides):
        shape = [1] * idx.ndim
        shape[k] = idx.shape[k]
        grid = grid + np.arange(idx.shape[k], dtype=np.int64).reshape(shape) * s
    return (flat0, strides) if np.array_equal(np.broadcast_to(grid, idx.shape), idx) else None


def _through_strides(m: np.ndarray, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """An index map of flat indices into a contiguous ``shape`` as element offsets of the same
    elements read with ``strides`` (negative entries, Pad's padding marks, stay)."""
    coords = np.unravel_index(np.maximum(m, 0), tuple(shape))
    out = sum(c * int(st) for c, st in zip(coords, strides))
    return np.where(m < 0, m, out).astype(np.int64)

def _broadcast_strides(p: Params, st: Sequence[int]) -> list[int] | None:
    """Broadcast: the input's element stride along each output axis (0 where it repeats),
    from the shapes, the input's strides ``st`` and the axes mapping; None for a mode without
    a rule here."""
    mode = p.attrs.get("mode", "numpy")
    shape, out = list(p.in_shapes[0]), list(p.out_shapes[0])
    if mode == "explicit":
        if p.values.get(2) is None:
            return None
        axes = [int(a) for a in np.asarray(p.values[2]).reshape(-1)]
    elif mode in ("numpy", "bidirectional"):
        axes = list(range(len(out) - len(shape), len(out)))
    else:
        return None
    strides = [0] * len(out)
    for i, a in enumerate(axes):
        if shape[i] != 1:
            strides[a] = st[i]
    return strides


def _repeat_copy(p: Params) -> Launch | None:
    """Broadcast and Tile as one strided copy, without an index map (which would be as large
    as the output): Tile of ``s`` by ``r`` walks the output as [r0, s0, r1, s1, ...] with input
    strides [0, st0, 0, st1, ...]. A strided input (``in_strides``) is read as it lies."""
    dt, out = p.in_dtypes[0], list(p.out_shapes[0])
    given = p.in_strides[0] if p.in_strides else None
    st = list(given) if given is not None else contiguous_strides(p.in_shapes[0])
    if p.kind == "Broadcast":
        strides = _broadcast_strides(p, st)
        if strides is None:
            return None
        return strided_copy(dt, out, strides, 0, contiguous_strides(out), 0, 0, 0)
    reps = [int(r) for r in np.asarray(p.values[1]).reshape(-1)] if p.values.get(1) is not None else None
    if reps is None:
        return None
    rank = max(len(reps), len(p.in_shapes[0]))
    shape = [1] * (rank - len(p.in_shapes[0])) + list(p.in_shapes[0])
    reps = [1] * (rank - len(reps)) + reps
    st = [0] * (rank - len(st)) + st
    dims = [d for r, s in zip(reps, shape) for d in (r, s)]
    in_st = [x for s in st for x in (0, s)]
    return strided_copy(dt, dims, in_st, 0, contiguous_strides(dims), 0, 0, 0)


def movement_impl(p: Params, key) -> Impl | None:
    if p.kind in ("Broadcast", "Tile"):
        ln = _repeat_copy(p)
        if ln is not None:
            return Impl(key, [ln] if _size(p.out_shapes[0]) else [])
    maps = _index_map_outputs(p)
    if maps is None:
        return None
    dt = p.in_dtypes[0]
    pad = None
    if p.kind == "Pad":  # without a pad-value input the padding is 0
        pad = float(np.asarray(p.values[3]).reshape(-1)[0]) if p.values.get(3) is not None else 0.0
        if np.dtype(dt) == np.float16:  # copied as bits: the pad value's bit pattern
            pad = float(np.asarray(pad, np.float16).view(np.uint16))
    strides = p.in_strides[0] if p.in_strides else None
    launches, buffers = [], []
    for i, m in enumerate(maps):
        if m.size == 0:
            continue
        if strides is not None:  # a strided input (netpass.runtime.state): elements as they lie
            m = _through_strides(m, p.in_shapes[0], strides)
        aff = _affine(m)
        if aff is not None:
            launches.append(strided_copy(dt, m.shape, aff[1], aff[0], contiguous_strides(m.shape), 0, 0, i))
            continue
        buffers.append(m.reshape(-1).astype(np.int32))
        src = kernels.imap(bits_dtype(dt), pad)
        launches.append(Launch(src, *_1d(m.size), [("i", 0), ("o", i), ("b", len(buffers) - 1), m.size]))
    return Impl(key, launches, buffers)


def _axes_block(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, int, int] | None:
    """(outer, R, inner) when ``axes`` (ignoring size-1 dims) are one contiguous block."""
    axes = sorted(set(axes))
    real = [a for a in axes if shape[a] != 1]
    if not real:
        return _size(shape), 1, 1
    lo, hi = real[0], real[-1]
    if any(shape[k] != 1 and k not in axes for k in range(lo, hi + 1)):
        return None
    return _size(shape[:lo]), _size(shape[lo:hi + 1]), _size(shape[hi + 1:])


def _row_launch(src: kernels.Source, rows: int, R: int, inner: int, n_extra: int = 0,
                edims: list = (), est: list = ()) -> Launch:
    spec = [("i", 0), ("o", 0), R, inner] + [("e", j) for j in range(n_extra)]
    if n_extra:
        spec += list(edims) + [v for s in est for v in s]
    return Launch(src, (max(rows, 1) * kernels.LS,), (kernels.LS,), spec)


def _rowop_fused(p: Params, kind: str, params: dict, rows: int, R: int, inner: int) -> Impl:
    """A softmax / MVN rowop with the node's fused elementwise ops as its epilogue."""
    stages, n_extra, edt, edims, est = _epilogue(p, p.out_shapes[0])
    src = p.cached(("rowop", len(edims)),
                   lambda: kernels.rowop(kind, p.in_dtypes[0], p.out_dtypes[0], params, stages, edt, len(edims)))
    return Impl(None, [_row_launch(src, rows, R, inner, n_extra, edims, est)])


def reduce_impl(p: Params, key) -> Impl | None:
    shape = p.in_shapes[0]
    axes_v = p.values.get(1)
    if axes_v is None:
        return None
    rank = len(shape)
    axes = [int(a) % max(rank, 1) for a in np.asarray(axes_v).reshape(-1)]
    blk = _axes_block(shape, axes)
    if blk is None or np.dtype(p.in_dtypes[0]) == np.float16:
        return None
    outer, R, inner = blk
    src = kernels.rowop(REDUCE_KINDS[p.kind], p.in_dtypes[0], p.out_dtypes[0], {})
    return Impl(key, [_row_launch(src, outer * inner, R, inner)])


def softmax_impl(p: Params, key) -> Impl | None:
    shape = p.in_shapes[0]
    if np.dtype(p.in_dtypes[0]).kind != "f" or np.dtype(p.in_dtypes[0]) == np.float16:
        return None
    axis = int(p.attrs.get("axis", 1)) % max(len(shape), 1)
    outer, R, inner = _size(shape[:axis]), shape[axis] if shape else 1, _size(shape[axis + 1:])
    impl = _rowop_fused(p, "softmax" if p.kind == "Softmax" else "logsoftmax", {}, outer * inner, R, inner)
    impl.key = key
    return impl


def mvn_impl(p: Params, key) -> Impl | None:
    shape = p.in_shapes[0]
    if np.dtype(p.in_dtypes[0]) != np.float32:
        return None
    rank = len(shape)
    if len(p.in_shapes) > 1:
        if p.values.get(1) is None:
            return None
        axes = [int(a) % rank for a in np.asarray(p.values[1]).reshape(-1)]
        inside = str(p.attrs.get("eps_mode", "inside_sqrt")).lower() == "inside_sqrt"
    else:
        start = 1 if p.attrs.get("across_channels", False) else 2
        axes = list(range(start, rank))
        if p.attrs.get("reduction_axes"):
            axes = [int(a) % rank for a in p.attrs["reduction_axes"]]
        inside = False
    blk = _axes_block(shape, axes)
    if blk is None or blk[2] != 1:
        return None
    outer, R, _ = blk
    params = {"eps": p.attrs.get("eps", 1e-9), "inside_sqrt": inside,
              "normalize_variance": p.attrs.get("normalize_variance", True)}
    impl = _rowop_fused(p, "mvn", params, outer, R, 1)
    impl.key = key
    return impl


def gather_impl(p: Params, key) -> Impl | None:
    if p.attrs.get("batch_dims", 0) or p.values.get(2) is None:
        return None
    shape = p.in_shapes[0]
    axis = int(np.asarray(p.values[2]).reshape(-1)[0]) % len(shape)
    nidx = _size(p.in_shapes[1])
    n = _size(p.out_shapes[0])
    src = kernels.gather(bits_dtype(p.in_dtypes[0]), p.in_dtypes[1])
    return Impl(key, [Launch(src, *_1d(n),
                             [("i", 0), ("i", 1), ("o", 0), n, nidx, shape[axis], _size(shape[axis + 1:])])])


def gemm_config(engine, M: int, N: int, K_: int, batch: int) -> kernels.GemmConfig:
    if engine is not None and engine.is_gpu and M >= 512 and N >= 512:
        return kernels.GEMM_LARGE
    if M >= 64 and N >= 64:
        return kernels.GEMM_MEDIUM
    return kernels.GEMM_SMALL


SKINNY_MAX_M = 64          # M up to which the skinny GEMM wins over up to 4 tiled groups per CU
SKINNY_TALL_M = 256        # M up to which it wins while the tiled groups do not fill the CUs
SKINNY_GROUPS_PER_CU = 4


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def skinny_width(engine, M: int, N: int, batch: int, tiled_groups: int) -> int | None:
    """Columns per work-group (TN) of the skinny GEMM (kernels.gemm_skinny), or None when the
    tiled kernels fit the problem better (or there is no engine).

    The tiled kernels give ``tiled_groups`` = ceil(M/tsm) x ceil(N/tsn) x batch work-groups,
    each walking K serially with two barriers per 16-wide K block, so a decoder's M <= 128
    rows leave most compute units of a GPU idle. The skinny kernel reads B once per 8 rows
    (from L2 for weights that fit there), so on a GPU it is taken for M <= 8 (B read once),
    for M <= SKINNY_MAX_M while the tiled kernels give fewer than SKINNY_GROUPS_PER_CU
    work-groups per compute unit, and for M <= SKINNY_TALL_M while they give fewer than one.
    On PoCL it measured 2-8x faster than the tiled kernels for every M <= 256 (decoder
    shapes, docs/runtime.md). TN starts at 64 and halves, down to 8 (a warp then still reads
    whole 32-byte sectors of B), while N fits in half the width and, on a GPU, while there
    are fewer than SKINNY_GROUPS_PER_CU skinny work-groups per compute unit; PoCL keeps the
    width fixed per N because it compiles a kernel per local size."""
    if engine is None or M > SKINNY_TALL_M or not M or not N:
        return None
    gpu = engine.is_gpu
    cus = int(engine.device.max_compute_units)
    if gpu and M > kernels.SKINNY_RM:
        enough = SKINNY_GROUPS_PER_CU * cus if M <= SKINNY_MAX_M else cus
        if tiled_groups >= enough:
            return None
    rows = _cdiv(M, kernels.SKINNY_RM) * batch
    tn = 64
    while tn > 8 and (tn // 2 >= N or (gpu and rows * _cdiv(N, tn) < SKINNY_GROUPS_PER_CU * cus)):
        tn //= 2
    return tn


def _gemm_launch(p: Params, a_shape, b_shape, ta: bool, tb: bool, b_idx: tuple, out_shape,
                 a_strides=None, b_strides=None, extra_refs: list | None = None,
                 norm: tuple | None = None, norm_first: int = 2) -> tuple[list, list] | None:
    """(launches, impl buffers) for out = op(A) @ op(B) with numpy-style batch broadcasting:
    one GEMM launch, or a split-K GEMM into a scratch buffer and its reduction
    (``kernels.mma.k_splits``); ``norm``: A's rows are normalized as they are loaded
    (norm_gemm; gamma and beta are the inputs from ``norm_first`` on, in order)."""
    a, b = list(a_shape), list(b_shape)
    sa = list(a_strides) if a_strides is not None else contiguous_strides(a)
    sb = list(b_strides) if b_strides is not None else contiguous_strides(b)
    if len(a) == 1:
        a, sa, ta = [1] + a, [0] + sa, False
    if len(b) == 1:
        b, sb, tb = b + [1], sb + [0], False
    if ta:
        a[-1], a[-2], sa[-1], sa[-2] = a[-2], a[-1], sa[-2], sa[-1]
    if tb:
        b[-1], b[-2], sb[-1], sb[-2] = b[-2], b[-1], sb[-2], sb[-1]
    M, Ka, Kb, N = a[-2], a[-1], b[-2], b[-1]
    if Ka != Kb:
        return None
    ab, bb = a[:-2], b[:-2]
    rank = max(len(ab), len(bb))
    ab, bb = [1] * (rank - len(ab)) + ab, [1] * (rank - len(bb)) + bb
    sab = [0] * (rank - len(sa[:-2])) + sa[:-2]
    sbb = [0] * (rank - len(sb[:-2])) + sb[:-2]
    batch = [max(x, y) for x, y in zip(ab, bb)]
    sab = [0 if x == 1 else s for x, s in zip(ab, sab)]
    sbb = [0 if x == 1 else s for x, s in zip(bb, sbb)]
    dims, (sab, sbb) = collapse(batch, [sab, sbb])
    if len(dims) > 2:
        return None
    while len(dims) < 2:
        dims, sab, sbb = [1] + dims, [0] + sab, [0] + sbb
    nb = dims[0] * dims[1]
    stages, n_extra, edt, edims, est = _epilogue(p, out_shape)
    aligned = M % 128 == 0 and N % 128 == 0 and Ka % 16 == 0 and sa[-1] == 1 and sb[-1] == 1 \
        and sa[-2] % 4 == 0 and sb[-2] % 4 == 0 and np.dtype(p.out_dtypes[0]) == np.float32
    gpu = p.engine is not None and p.engine.is_gpu
    cfg = gemm_config(p.engine, M, N, Ka, nb)
    tiled_groups = _cdiv(M, 128) * _cdiv(N, 128) * nb if aligned and gpu else \
        _cdiv(M, cfg.tsm) * _cdiv(N, cfg.tsn) * nb
    tn = skinny_width(p.engine, M, N, nb, tiled_groups)
    f32 = np.dtype(p.out_dtypes[0]) == np.float32
    pre: list[Launch] = []  # (the normalization of A ahead of a tensor-core GEMM)
    buffers: list = []
    a_ref: list = [("i", b_idx[0])]
    tc_plan = None
    if norm is not None and f32 and nb == 1 and sa[-1] == 1 and sa[-2] == Ka:
        tc_plan = mma.plan(p.engine, p.precision, M, N, Ka, nb, sa, sb, sab, sbb, None)
        if tc_plan is not None:  # normalized rows into a scratch copy the GEMM reads
            pre, buffers, a_ref = [_normalize_rows(p, norm, norm_first, b_idx[0], M, Ka)], \
                [Scratch(4 * M * Ka)], [("b", 0), 0]
            norm = None
    if tc_plan is None and f32:
        tc_plan = mma.plan(p.engine, p.precision, M, N, Ka, nb, sa, sb, sab, sbb, norm)
    splits, slice_k = mma.k_splits(tc_plan[0], M, N, Ka, nb, int(p.engine.device.max_compute_units)) \
        if tc_plan is not None else (1, Ka)
    if splits > 1:
        launches, more = _split_k_gemm(p, tc_plan, norm, norm_first, a_ref + [("i", b_idx[1])], (M, N, Ka, nb),
                                       (splits, slice_k), [dims[1], sab[0], sab[1], sa[-2], sa[-1], sbb[0],
                                                           sbb[1], sb[-2], sb[-1]],
                                       extra_refs, (stages, n_extra, edt, edims, est), len(buffers))
        return pre + launches, buffers + more
    if tc_plan is not None:  # tensor cores (TF32, or 3xTF32 for float32)
        src = p.cached(("gemm_mma", tc_plan, len(edims), norm),
                       lambda: mma.source(tc_plan, stages, n_extra, edt, len(edims), norm))
        gws, (lx, ly, _) = mma.work_sizes(tc_plan[0], M, N, nb)
    elif tn is not None:
        src = p.cached(("gemm_skinny", len(edims), norm),
                       lambda: kernels.gemm_skinny(p.out_dtypes[0], stages, n_extra, edt, len(edims), norm))
        lx, ly = tn, kernels.SKINNY_WG // tn
        gws = (_cdiv(N, tn) * lx, _cdiv(M, kernels.SKINNY_RM) * ly, max(nb, 1))
    elif aligned and gpu and norm is None and getattr(p.engine, "cp_async", False):
        src = p.cached(("gemm_pipelined", len(edims)),
                       lambda: kernels.gemm_pipelined(stages, n_extra, edt, len(edims), True))
        lx, ly = 16, 16
        gws = (N // 8, M // 8, max(nb, 1))
    elif aligned and gpu:
        src = p.cached(("gemm_aligned", len(edims), norm),
                       lambda: kernels.gemm_aligned(stages, n_extra, edt, len(edims), norm))
        lx, ly = 16, 16
        gws = (N // 8, M // 8, max(nb, 1))
    else:
        src = p.cached(("gemm", cfg, len(edims), norm),
                       lambda: kernels.gemm(p.out_dtypes[0], cfg, stages, n_extra, edt, len(edims), norm))
        lx, ly = cfg.local
        gws = (_cdiv(N, cfg.tsn) * lx, _cdiv(M, cfg.tsm) * ly, max(nb, 1))
    spec = a_ref + [("i", b_idx[1]), ("o", 0)]
    if norm is not None:
        spec += [("i", norm_first + j) for j in range(int(norm[3]) + int(norm[4]))]
    spec += [M, N, Ka, dims[1], sab[0], sab[1], sa[-2], sa[-1], sbb[0], sbb[1], sb[-2], sb[-1]]
    spec += extra_refs if extra_refs is not None else [("e", j) for j in range(n_extra)]
    if n_extra:
        spec += edims + [x for s in est for x in s]
    return pre + [Launch(src, gws, (lx, ly, 1), spec)], buffers


def _normalize_rows(p: Params, norm: tuple, norm_first: int, a_idx: int, rows: int, k: int) -> Launch:
    """MVN of the ``rows`` contiguous rows of input ``a_idx`` (times gamma, plus beta, the
    inputs from ``norm_first`` on) into impl buffer 0: a folded LayerNorm ahead of a
    tensor-core GEMM, whose inner loop would otherwise normalize every fragment it reads
    (2.3 ms more over GPT-2's 24 folded GEMMs on the H100 than this pass)."""
    eps, inside, variance, gamma, beta = norm
    vecs = int(gamma) + int(beta)
    ops = ([Stage("({0} * {1})", [("x", None), ("in", 0)], "float")] if gamma else []) + \
        ([Stage("({0} + {1})", [("x", None), ("in", vecs - 1)], "float")] if beta else [])
    src = p.cached(("norm_rows", norm), lambda: kernels.rowop(
        "mvn", np.float32, np.float32, {"eps": eps, "inside_sqrt": inside, "normalize_variance": variance},
        ops, [np.float32] * vecs, 2))
    spec: list = [("i", a_idx), ("b", 0), 0, k, 1] + [("i", norm_first + j) for j in range(vecs)]
    if vecs:
        spec += [rows, k] + [0, 1] * vecs
    return Launch(src, (max(rows, 1) * kernels.LS,), (kernels.LS,), spec)


def _split_k_gemm(p: Params, tc_plan: tuple, norm: tuple | None, norm_first: int, ab_refs: list,
                  mnkb: tuple, split: tuple, strides: list, extra_refs: list | None,
                  epilogue: tuple, slot: int = 0) -> tuple[list, list]:
    """The tensor-core GEMM in ``split = (slices, K per slice)`` K slices (A and B read
    through ``ab_refs``), each writing its partial product to impl buffer ``slot`` (a
    Scratch), then their reduction (:func:`_with_reduction`)."""
    M, N, Ka, nb = mnkb
    splits, slice_k = split
    src = p.cached(("gemm_mma_splitk", tc_plan, norm), lambda: mma.source(tc_plan, [], 0, [], 0, norm, True))
    gws, lws = mma.work_sizes(tc_plan[0], M, N, nb, splits)
    spec: list = ab_refs + [("b", slot), 0]  # (C: the scratch, offset 0)
    if norm is not None:
        spec += [("i", norm_first + j) for j in range(int(norm[3]) + int(norm[4]))]
    spec += [M, N, Ka] + strides + [slice_k, splits]
    return _with_reduction(p, Launch(src, gws, lws, spec), max(nb, 1) * M * N, splits, extra_refs, epilogue,
                           slot)


def _with_reduction(p: Params, gemm: Launch, total: int, splits: int, extra_refs: list | None,
                    epilogue: tuple, slot: int = 0) -> tuple[list, list]:
    """A split-K GEMM launch (its partial products in impl buffer ``slot``, a Scratch) and
    ``kernels.mma.splitk_reduce`` summing them into the output through the epilogue."""
    stages, n_extra, edt, edims, est = epilogue
    red = p.cached(("splitk_reduce", len(edims)), lambda: mma.splitk_reduce(stages, n_extra, edt, len(edims)))
    spec = [("b", slot), ("o", 0), total, splits]
    spec += extra_refs if extra_refs is not None else [("e", j) for j in range(n_extra)]
    if n_extra:
        spec += edims + [x for s in est for x in s]
    return [gemm, Launch(red, *_1d(total), spec)], [Scratch(4 * splits * total)]


def matmul_impl(p: Params, key) -> Impl | None:
    if np.dtype(p.out_dtypes[0]) != np.float32 or any(np.dtype(d) != np.float32 for d in p.in_dtypes):
        return None
    if _size(p.out_shapes[0]) == 0:
        return Impl(key, [])
    st = p.in_strides or (None, None)  # permuted views (Program._fold_input_permutes)
    desc = getattr(p.node, "subgraph", None)  # a normalized A (norm_gemm.NormDesc)
    g = _gemm_launch(p, p.in_shapes[0], p.in_shapes[1], bool(p.attrs.get("transpose_a")),
                     bool(p.attrs.get("transpose_b")), (0, 1), p.out_shapes[0],
                     a_strides=st[0], b_strides=st[1],
                     norm=desc.kernel_params() if desc is not None else None)
    return Impl(key, *g) if g is not None else None


def _with_bias(p: Params, bias_shape, bias_dtype, activation: str | None = None) -> Params:
    """``p`` with a bias add (reading input 2) and an optional activation ahead of its fused ops."""
    f32 = np.dtype(np.float32)
    pre = [FusedDesc("Add", {}, (0, None), [], [f32, bias_dtype], f32)]
    if activation:
        pre.append(FusedDesc(activation, {}, (1,), [], [f32], f32))
    q = Params(**{k: getattr(p, k) for k in Params.__slots__})
    q.fused = pre + [f.shifted(len(pre)) for f in p.fused or []]
    q.extra_shapes = [tuple(bias_shape)] + list(p.extra_shapes or [])
    q.extra_dtypes = [bias_dtype] + list(p.extra_dtypes or [])
    return q


def fully_connected_impl(p: Params, key) -> Impl | None:
    """FullyConnected: X[..., K] @ W^T + bias (W is [N, K], or [K, N] once reordered)."""
    if any(np.dtype(d) != np.float32 for d in p.in_dtypes):
        return None
    x = p.in_shapes[0]
    kdim = x[-1]
    m = _size(x[:-1])
    w = p.in_shapes[1]
    reordered = p.attrs.get("_weights_reordered", False)
    n = w[0]
    q = _with_bias(p, (_size(p.in_shapes[2]),), p.in_dtypes[2])
    refs = [("i", 2)] + [("e", j) for j in range(len(p.extra_shapes or []))]
    desc = getattr(p.node, "subgraph", None)  # a normalized A (norm_gemm.NormDesc)
    # the epilogue indexes side inputs over the real output shape (the GEMM's flat index is
    # the same): a residual [b, s, n] broadcasts as it does in the graph
    g = _gemm_launch(q, (m, kdim), (kdim, n) if reordered else (n, kdim), False, not reordered,
                     (0, 1), tuple(p.out_shapes[0]), extra_refs=refs,
                     norm=desc.kernel_params() if desc is not None else None, norm_first=3)
    return Impl(key, *g) if g is not None else None


def _pads(p: Params, in_sp: Sequence[int], out_sp: Sequence[int], kernel: Sequence[int],
          strides: Sequence[int], dil: Sequence[int]) -> tuple[list[int], list[int]]:
    ap = str(p.attrs.get("auto_pad", "explicit")).lower()
    nd = len(in_sp)
    if ap in ("same_upper", "same_lower"):
        pb, pe = [], []
        for i in range(nd):
            total = max((out_sp[i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in_sp[i], 0)
            lo = total // 2 if ap == "same_upper" else (total + 1) // 2
            pb.append(lo)
            pe.append(total - lo)
        return pb, pe
    if ap == "valid":
        return [0] * nd, [0] * nd
    pb = list(p.attrs.get("pads_begin") or [0] * nd)
    pe = list(p.attrs.get("pads_end") or [0] * nd)
    return pb, pe


def _as2d(vals: Sequence[int], nd: int, fill: int) -> list[int]:
    v = list(vals) if vals else [fill] * nd
    return [fill] + v if nd == 1 else v


_GNA_ACT = {"NO_ACTIVATION": None, "RELU": "Relu", "SIGMOID": "Sigmoid", "TANH": "Tanh", "ABS": "Abs",
            "LOG": "Log", "EXP": "Exp", "SIGN": "Sign"}


def conv_impl(p: Params, key, nhwc: bool = False) -> Impl | None:
    if any(np.dtype(d) != np.float32 for d in p.in_dtypes):
        return None
    x, w, y = p.in_shapes[0], p.in_shapes[1], p.out_shapes[0]
    nd = len(x) - 2
    if nd not in (1, 2):
        return None
    grouped = p.kind == "GroupConvolution"
    if grouped:
        G, Og, Cg = w[0], w[1], w[2]
        ksp = w[3:]
    elif nhwc:  # OHWI filters
        G, Og, Cg = 1, w[0], w[-1]
        ksp = w[1:-1]
    else:
        G, Og, Cg = 1, w[0], w[1]
        ksp = w[2:]
    if nhwc:
        sp_in, sp_out = x[1:-1], y[1:-1]
        C, O = x[-1], y[-1]
    else:
        sp_in, sp_out = x[2:], y[2:]
        C, O = x[1], y[1]
    strides = list(p.attrs.get("strides") or [1] * nd)
    dil = list(p.attrs.get("dilations") or [1] * nd)
    pb, _ = _pads(p, sp_in, sp_out, ksp, strides, dil)
    H, W_ = _as2d(sp_in, nd, 1)
    OH, OW = _as2d(sp_out, nd, 1)
    KH, KW = _as2d(ksp, nd, 1)
    sh, sw = _as2d(strides, nd, 1)
    dh, dw = _as2d(dil, nd, 1)
    ph, pw = _as2d(pb, nd, 0)
    xs = contiguous_strides(x)
    ys = contiguous_strides(y)
    if nhwc:
        xsn, xsc = xs[0], xs[-1]
        ysn, ysc = ys[0], ys[-1]
        xsp, ysp = xs[1:-1], ys[1:-1]
    else:
        xsn, xsc, xsp = xs[0], xs[1], xs[2:]
        ysn, ysc, ysp = ys[0], ys[1], ys[2:]
    xsh, xsw = _as2d(xsp, nd, 0)
    ysh, ysw = _as2d(ysp, nd, 0)
    if G * Cg != C or G * Og != O:
        return None
    n = _size(y)
    ws = contiguous_strides(w)
    if nhwc:
        wso, wsc, wsk = ws[0], ws[-1], ws[1:-1]
    else:
        wso, wsc, wsk = _size(w[-(nd + 1):]), ws[-(nd + 1)], ws[-nd:]
    wsh, wsw = _as2d(wsk, nd, 0)
    refs = None
    if nhwc and len(p.in_shapes) > 2:
        act = _GNA_ACT.get(str(p.attrs.get("activation", "NO_ACTIVATION")).upper(), False)
        if act is False:
            return None
        p = _with_bias(p, p.in_shapes[2], p.in_dtypes[2], act)
        refs = [("i", 2)] + [("e", j) for j in range(len(p.extra_shapes) - 1)]
    elif nhwc and str(p.attrs.get("activation", "NO_ACTIVATION")).upper() != "NO_ACTIVATION":
        return None
    if not nhwc and G == 1 and (KH, KW, sh, sw, ph, pw) == (1, 1, 1, 1, 0, 0) and (OH, OW) == (H, W_):
        # a pointwise convolution is a batched GEMM: W [O, C] @ X[n] [C, H W] (any GEMM kernel)
        g = _gemm_launch(p, (O, C), (x[0], C, H * W_), False, False, (1, 0), y)
        if g is not None:
            return Impl(key, *g)
    if not nhwc and G == 1 and not p.in_strides:
        g = _implicit_gemm_conv(p, x, y, (KH, KW, sh, sw, ph, pw, dh, dw, H, W_, OH, OW))
        if g is not None:
            return Impl(key, *g)
    stages, n_extra, edt, edims, est = _epilogue(p, y)
    src = kernels.conv(p.out_dtypes[0], stages, n_extra, edt, len(edims))
    spec = [("i", 0), ("i", 1), ("o", 0), n, Cg, H, W_, Og, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw,
            xsn, xsc, xsh, xsw, ysn, ysc, ysh, ysw, O, wso, wsc, wsh, wsw]
    spec += refs if refs is not None else [("e", j) for j in range(n_extra)]
    if n_extra:
        spec += edims + [v for s in est for v in s]
    return Impl(key, [Launch(src, *_1d(n), spec)])


def _implicit_gemm_conv(p: Params, x, y, geo: tuple) -> tuple[list, list] | None:
    """(launches, impl buffers) of a dense NCHW convolution as the tensor-core GEMM W [O, C KH
    KW] @ im2col(X[n]) [C KH KW, OH OW] (kernels.mma ``conv``: B gathered from the image as
    the stages fill), in K slices where its tiles leave compute units idle (the late layers
    of a ResNet: few channels' tiles over 7x7 images), where the device has tensor cores; None
    elsewhere (the direct kernel runs)."""
    KH, KW, sh, sw, ph, pw, dh, dw, H, W_, OH, OW = geo
    O, C, batch = y[1], x[1], x[0]
    M, N, K_ = O, OH * OW, C * KH * KW
    kind = getattr(p.engine, "mma", "") if p.engine is not None else ""
    split = 1 if p.precision == "tf32" else mma.F32_SPLIT
    if not kind or split is None or M < mma.MIN_CONV_M or N < mma.MIN_CONV_N or not K_:
        return None
    cus = int(p.engine.device.max_compute_units)
    cfg = mma.choose_config(M, N, K_, batch, cus, int(getattr(p.engine.device, "local_mem_size", 48 << 10)), False)
    copy = "cp_async" if K_ % 4 == 0 else "plain"
    stages, n_extra, edt, edims, est = _epilogue(p, y)
    splits, slice_k = mma.k_splits(cfg, M, N, K_, batch, cus)
    sk = splits > 1
    src = p.cached(("conv_mma", cfg, split, kind, copy, len(edims), sk),
                   lambda: mma.gemm_mma(cfg, True, split, kind == "ptx", copy, mma.ALIGN, [] if sk else stages,
                                       0 if sk else n_extra, [] if sk else edt, 0 if sk else len(edims),
                                       None, mma.HI_ROUND, True, sk))
    gws, lws = mma.work_sizes(cfg, M, N, batch, splits)
    geometry = [KH * KW, KW, OW, sh, sw, ph, pw, dh, dw, H, W_, H * W_, W_, 1]
    spec = [("i", 1), ("i", 0)] + ([("b", 0), 0] if sk else [("o", 0)])
    spec += [M, N, K_, 1, 0, 0, K_, 1, C * H * W_, 0, 0, 1]
    if sk:
        return _with_reduction(p, Launch(src, gws, lws, spec + geometry + [slice_k, splits]),
                               batch * M * N, splits, None, (stages, n_extra, edt, edims, est))
    spec += [("e", j) for j in range(n_extra)]
    if n_extra:
        spec += edims + [v for st in est for v in st]
    return [Launch(src, gws, lws, spec + geometry)], []


def pool_impl(p: Params, key, nhwc: bool = False) -> Impl | None:
    if np.dtype(p.in_dtypes[0]) != np.float32:
        return None
    if len(p.out_shapes) > 1 and p.node is not None and any(p.node.users[1:]):
        return None  # MaxPool indices are consumed: host
    x, y = p.in_shapes[0], p.out_shapes[0]
    nd = len(x) - 2
    if nd not in (1, 2):
        return None
    sp_in, sp_out = (x[1:-1], y[1:-1]) if nhwc else (x[2:], y[2:])
    C = x[-1] if nhwc else x[1]
    kern = list(p.attrs.get("kernel") or p.attrs.get("kernel_shape") or [])
    strides = list(p.attrs.get("strides") or [1] * nd)
    dil = list(p.attrs.get("dilations") or [1] * nd)
    pb, pe = _pads(p, sp_in, sp_out, kern, strides, dil)
    xs, ys = contiguous_strides(x), contiguous_strides(y)
    if nhwc:
        xsn, xsc, xsp, ysn, ysc, ysp = xs[0], xs[-1], xs[1:-1], ys[0], ys[-1], ys[1:-1]
    else:
        xsn, xsc, xsp, ysn, ysc, ysp = xs[0], xs[1], xs[2:], ys[0], ys[1], ys[2:]
    kind = "max" if "Max" in p.kind else "avg"
    src = kernels.pool(p.in_dtypes[0], kind, bool(p.attrs.get("exclude-pad", p.attrs.get("exclude_pad", False))))
    n = _size(y)
    H, W_ = _as2d(sp_in, nd, 1)
    OH, OW = _as2d(sp_out, nd, 1)
    KH, KW = _as2d(kern, nd, 1)
    sh, sw = _as2d(strides, nd, 1)
    dh, dw = _as2d(dil, nd, 1)
    ph, pw = _as2d(pb, nd, 0)
    peh, pew = _as2d(pe, nd, 0)
    xsh, xsw = _as2d(xsp, nd, 0)
    ysh, ysw = _as2d(ysp, nd, 0)
    spec = [("i", 0), ("o", 0), n, C, H, W_, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw, peh, pew,
            xsn, xsc, xsh, xsw, ysn, ysc, ysh, ysw]
    return Impl(key, [Launch(src, *_1d(n), spec)])


_RNN_KINDS = {"LSTMSequence": ("lstm", False), "GRUSequence": ("gru", False),
              "RNNSequence": ("rnn", False), "LSTMCell": ("lstm", True), "GRUCell": ("gru", True),
              "RNNCell": ("rnn", True)}


def recurrent_impl(p: Params, key) -> Impl | None:
    """Recurrent cells and sequences in one launch (kernels.recurrent); int32 sequence
    lengths; default-style activations without alpha/beta."""
    cell, is_cell = _RNN_KINDS[p.kind]
    a = p.attrs
    hs = int(a.get("hidden_size", 0))
    acts = tuple(str(x).lower() for x in (a.get("activations") or
                                          {"lstm": ["sigmoid", "tanh", "tanh"], "gru": ["sigmoid", "tanh"],
                                           "rnn": ["tanh"]}[cell]))
    states = 2 if cell == "lstm" else 1
    lens_idx = None if is_cell else 1 + states
    if any(np.dtype(d) != np.float32 for i, d in enumerate(p.in_dtypes) if i != lens_idx) \
            or a.get("activations_alpha") or a.get("activations_beta") \
            or any(x not in kernels.RNN_ACTIVATIONS for x in acts) or not 0 < hs <= 1024:
        return None
    x = p.in_shapes[0]
    lens_ct = "int"
    if is_cell:
        batch, T, I, nd, rev = x[0], 1, x[1], 1, 0
    else:
        batch, T, I = x
        direction = a.get("direction", "forward")
        nd, rev = (2 if direction == "bidirectional" else 1), int(direction == "reverse")
        if np.dtype(p.in_dtypes[lens_idx]) not in (np.dtype(np.int32), np.dtype(np.int64)):
            return None
        lens_ct = ctype(p.in_dtypes[lens_idx])
    src = p.cached(("rnn",), lambda: kernels.recurrent(cell, hs, acts, float(a.get("clip", 0.0) or 0.0),
                                                 bool(a.get("linear_before_reset", False)), is_cell,
                                                 lens_ct))
    spec: list = [("i", 0)] + [("i", 1 + s) for s in range(states)]
    w0 = 1 + states if is_cell else 2 + states
    lens: list = [] if is_cell else [("i", 1 + states)]
    spec += lens + [("i", w0), ("i", w0 + 1), ("i", w0 + 2)]
    spec += [] if is_cell else [("o", 0)]
    spec += [("o", s if is_cell else 1 + s) for s in range(states)]
    spec += [T, I, nd, rev, 0 if is_cell else 1]
    return Impl(key, [Launch(src, (max(batch * nd, 1) * kernels.RNN_LS,), (kernels.RNN_LS,), spec)])


FACTORIES: dict[str, Callable] = {
    "MatMul": matmul_impl, "FullyConnected": fully_connected_impl,
    "Convolution": conv_impl, "GroupConvolution": conv_impl,
    "GNAConvolution": lambda p, k: conv_impl(p, k, nhwc=True),
    "MaxPool": pool_impl, "AvgPool": pool_impl,
    "GNAMaxPool": lambda p, k: pool_impl(p, k, nhwc=True),
    "Softmax": softmax_impl, "LogSoftmax": softmax_impl, "MVN": mvn_impl,
    "Gather": gather_impl, "Transpose": transpose_impl, "Concat": concat_impl,
    "Split": split_impl, "VariadicSplit": split_impl, "Slice": slice_impl,
    **{k: recurrent_impl for k in _RNN_KINDS},
}
for _k in REDUCE_KINDS:
    FACTORIES[_k] = reduce_impl


# kinds whose kernels only copy elements, so float16 moves as ushort (bits_dtype)
_COPY_KINDS = {"Transpose", "Concat", "Split", "VariadicSplit", "Slice", "Gather"}


def _needs_fp16(p: Params) -> bool:
    """True when ``p``'s kernel would do float16 arithmetic on a device without cl_khr_fp16."""
    if p.engine is None or getattr(p.engine, "fp16", True):
        return False
    if p.kind in _COPY_KINDS or (p.kind in MOVEMENT_KINDS and not p.fused):
        return False
    f16 = np.dtype(np.float16)
    return any(np.dtype(d) == f16 for d in list(p.in_dtypes) + list(p.out_dtypes) + list(p.extra_dtypes or []))


def extras_fit(extra_shapes: Sequence[Sequence[int]], out_shape: Sequence[int]) -> bool:
    """Whether every fused side input broadcasts into the producer's output without growing
    it (what Program.may_fit could not decide from partial shapes)."""
    for s in extra_shapes:
        if len(s) > len(out_shape) or any(d != 1 and d != o for d, o in zip(s[::-1], out_shape[::-1])):
            return False
    return True


def create_device_impl(p: Params, key) -> Impl | None:
    """A kernel impl for ``p``, or None when this kind/shape/dtype has no kernel."""
    if _needs_fp16(p):
        return None  # the host runs it (docs/runtime.md: float16 without cl_khr_fp16)
    if any(np.dtype(d) not in kernels.CTYPES for d in list(p.in_dtypes) + list(p.out_dtypes)):
        return None  # no OpenCL type (bfloat16): the host runs it
    if p.extra_shapes and not extras_fit(p.extra_shapes, p.out_shapes[0]):
        return None  # a fused op would grow the output: the host applies it (numpy broadcasting)
    f = FACTORIES.get(p.kind)
    if f is not None:
        impl = f(p, key)
        if impl is not None or p.kind not in MOVEMENT_KINDS:
            return impl
    if p.kind in ELTWISE_KINDS or p.kind in LEGACY_ELTWISE:
        return eltwise_impl(p, key)
    if p.kind in MOVEMENT_KINDS and not p.fused:
        return movement_impl(p, key)
    return None


LEGACY_ELTWISE = {"PowerIE", "ReLUIE", "Eltwise", "ScaleShiftIE", "BatchNormInference"}
HAS_KERNEL = set(FACTORIES) | ELTWISE_KINDS | MOVEMENT_KINDS | LEGACY_ELTWISE


def host_only_reason(kind: str, dtypes: Sequence[Any]) -> str | None:
    """Why a primitive of ``kind`` over ``dtypes`` can only run on the host (no kernel for the
    kind; an element type OpenCL has no type for), or None when a kernel may run it."""
    if kind not in HAS_KERNEL:
        return "no kernel"
    odd = sorted({np.dtype(d).name for d in dtypes if np.dtype(d) not in kernels.CTYPES})
    return f"no OpenCL type for {', '.join(odd)}" if odd else None
FUSABLE_PRODUCERS = {"MatMul", "FullyConnected", "Convolution", "GroupConvolution",
                     "GNAConvolution", "Softmax", "LogSoftmax", "MVN"} | ELTWISE_KINDS | LEGACY_ELTWISE
