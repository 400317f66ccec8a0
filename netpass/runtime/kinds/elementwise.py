"""Elementwise ops (``netpass/ops/elementwise``): one OpenCL expression per op, run by the
``eltwise`` template and folded into a producer's kernel where they follow one (fusion).

An expression formats with its operands ``{0}``, ``{1}``...; the float one applies when the
first input is a float, the integer one otherwise (None: no kernel for integers). float16
always runs on the host (documented); NaN propagates wherever the reference (numpy) propagates
it, since OpenCL's ``fmax``/``fmin``/``sign`` drop it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ...errors import ShapeInferenceError
from ...ops.elementwise import (
    Abs,
    Acos,
    Acosh,
    Add,
    Asin,
    Asinh,
    Atan,
    Atanh,
    Ceiling,
    Clamp,
    Convert,
    Cos,
    Cosh,
    Divide,
    Elu,
    Equal,
    Erf,
    Exp,
    Floor,
    FloorMod,
    Gelu,
    Greater,
    GreaterEqual,
    HardSigmoid,
    HSigmoid,
    HSwish,
    IsFinite,
    IsInf,
    IsNaN,
    Less,
    LessEqual,
    Log,
    LogicalAnd,
    LogicalNot,
    LogicalOr,
    LogicalXor,
    Maximum,
    Minimum,
    Mish,
    Mod,
    Multiply,
    Negative,
    NotEqual,
    Power,
    PRelu,
    Relu,
    Round,
    Select,
    Selu,
    Sigmoid,
    Sign,
    Sin,
    Sinh,
    SoftPlus,
    SoftSign,
    Sqrt,
    SquaredDifference,
    Subtract,
    Swish,
    Tan,
    Tanh,
)
from ...ops.movement import Identity
from ...ops.quantization import FakeQuantize
from .. import mask_bounds
from ..impls import (
    FusedDesc,
    Impl,
    Launch,
    Params,
    broadcast_strides,
    collapse,
    contiguous_strides,
    evaluate_fused,
    fused_stages,
    size,
    work_1d,
)
from ..index_forms import Form, add, aligned, mul
from ..kernels.common import Stage, ctype, flit, nan_clamp, nan_max, nan_min
from ..kernels.eltwise import eltwise, eltwise_vec4, gated_activation, rotary, unaries
from ..shape_infer import infer_host
from .base import ExprRule, OpKind, broadcast_shape, same_as, table

F32 = np.dtype(np.float32)


def _half(in_dtypes: Sequence[Any], out_dtype: Any) -> bool:
    return any(np.dtype(d) == np.float16 for d in list(in_dtypes) + [out_dtype])


def _floaty(in_dtypes: Sequence[Any], out_dtype: Any) -> bool:
    return np.dtype(in_dtypes[0] if len(in_dtypes) else out_dtype).kind == "f"


def binary(f: str | None, i: str | Callable[[dict], str] | None = None) -> ExprRule:
    """Two operands: ``f`` for floats, ``i`` (or ``i(attrs)``) for integers."""
    def expr(attrs: dict, in_dtypes: Sequence[Any], out_dtype: Any) -> str | None:
        if len(in_dtypes) != 2 or _half(in_dtypes, out_dtype):
            return None
        if _floaty(in_dtypes, out_dtype):
            return f
        return i(attrs) if callable(i) else i
    return expr


def unary(f: str | Callable[[dict, int], str], i: str | None = None) -> ExprRule:
    """``f`` (or ``f(attrs, inputs)``: an activation with parameter inputs) for floats; ``i``
    for one integer operand, ``{T}`` standing for its C type."""
    def expr(attrs: dict, in_dtypes: Sequence[Any], out_dtype: Any) -> str | None:
        if _half(in_dtypes, out_dtype):
            return None
        if _floaty(in_dtypes, out_dtype):
            return f(attrs, len(in_dtypes)) if callable(f) else f
        if i is not None and len(in_dtypes) == 1:
            return i.replace("{T}", ctype(in_dtypes[0]))
        return None
    return expr


def anytype(e: str, arity: int | None = None) -> ExprRule:
    """The same expression for every dtype (comparisons, logic, select)."""
    def expr(attrs: dict, in_dtypes: Sequence[Any], out_dtype: Any) -> str | None:
        if _half(in_dtypes, out_dtype) or (arity is not None and len(in_dtypes) != arity):
            return None
        return e
    return expr


def _convert(attrs: dict, in_dtypes: Sequence[Any], out_dtype: Any) -> str | None:
    if _half(in_dtypes, out_dtype):
        return None
    return "({0} != 0)" if np.dtype(out_dtype) == np.bool_ else "{0}"


def _gelu(attrs: dict, n: int) -> str:
    if str(attrs.get("approximation_mode", "ERF")).upper() == "TANH":
        return ("(0.5f * {0} * (1.0f + tanh(0.7978845608028654f * "
                "({0} + 0.044715f * {0} * {0} * {0}))))")
    return "(0.5f * {0} * (1.0f + erf({0} * 0.7071067811865476f)))"


def _is_inf(attrs: dict, n: int) -> str:
    pos, neg = attrs.get("detect_positive", True), attrs.get("detect_negative", True)
    return f"(isinf({{0}}) && (({{0}} > 0) ? {int(bool(pos))} : {int(bool(neg))}))"


def _fake_quantize(attrs: dict, n: int) -> str:
    """FakeQuantize over (x, input_low, input_high, output_low, output_high); NaN x stays NaN
    (it fails both comparisons, as in the reference)."""
    steps = flit(int(attrs["levels"]) - 1)
    inside = (f"(rint(({{0}} - {{1}}) / ({{2}} - {{1}}) * {steps}) / {steps}"
              " * ({4} - {3}) + {3})")
    return (f"(({{0}} <= fmin({{1}}, {{2}})) ? {{3}} : "
            f"(({{0}} > fmax({{1}}, {{2}})) ? {{4}} : {inside}))")


def _int_divide(attrs: dict) -> str:
    """Python's floor division, or C's truncating one without ``m_pythondiv``."""
    if not attrs.get("m_pythondiv", True):
        return "({0} / {1})"
    return "({0} / {1} - ((({0} % {1}) != 0) && ((({0}) < 0) != (({1}) < 0))))"


# -- the eltwise template --------------------------------------------------------------------------
def _stages(p: Params) -> list[Stage] | None:
    """The primitive's own expression (in its own dtype, where its fused ops end in another)
    then its fused ops; None when there is no kernel."""
    own = p.out_dtypes[0] if p.node is None or p.node.op_dtype is None else p.node.op_dtype
    expr = p.row.expr(p.attrs, p.in_dtypes, own)
    if expr is None:
        return None
    n_in = len(p.in_dtypes)
    stages = [Stage(expr, [("in", j) for j in range(n_in)], ctype(own))]
    return stages + fused_stages(p.fused or [], n_in)


def eltwise_impl(p: Params, key: Any, in_shapes: Sequence[tuple] | None = None) -> Impl | None:
    """The ``eltwise`` kernel of ``p``'s expression and fused ops: float4 when every tensor is
    a flat float32 of the output's size, flat when the others are scalars, else strided.
    ``in_shapes``: the inputs as they broadcast, where that differs from their own shapes."""
    n_in = len(p.in_shapes)
    stages = p.cached(("stages",), lambda: _stages(p))
    if stages is None:
        return None
    out_shape = p.out_shapes[0]
    shapes = list(in_shapes or p.in_shapes) + list(p.extra_shapes or [])
    dtypes = list(p.in_dtypes) + list(p.extra_dtypes or [])
    n = size(out_shape)
    spec_io: list = [("o", 0)] + [("i", j) for j in range(n_in)] + \
        [("e", j) for j in range(len(shapes) - n_in)]
    full = [tuple(s) == tuple(out_shape) or size(s) == n and len(s) <= len(out_shape)
            and tuple(s) == tuple(out_shape[len(out_shape) - len(s):]) for s in shapes]
    scalar = [size(s) == 1 for s in shapes]
    if all(full) and all(np.dtype(d) == F32 for d in dtypes + [p.out_dtypes[0]]) \
            and all(st.ctype == "float" for st in stages):
        src = p.cached(("vec4",), lambda: eltwise_vec4(len(shapes), stages))
        return Impl(key, [Launch(src, *work_1d((n + 3) // 4), spec_io + [n])])
    if all(f or s for f, s in zip(full, scalar)):
        src = p.cached(("flat",), lambda: eltwise(dtypes, p.out_dtypes[0], stages, 0, True))
        flags = [int(s and not f) for f, s in zip(full, scalar)]
        return Impl(key, [Launch(src, *work_1d(n), spec_io + [n] + flags)])
    strides = [contiguous_strides(out_shape)] + [broadcast_strides(s, out_shape) for s in shapes]
    dims, st = collapse(list(out_shape), strides)
    src = p.cached(("strided", len(dims)),
                   lambda: eltwise(dtypes, p.out_dtypes[0], stages, len(dims), False))
    args = spec_io + [n] + dims + [x for s in st for x in s]
    return Impl(key, [Launch(src, *work_1d(n), args)])


def per_channel_impl(p: Params, key: Any) -> Impl | None:
    """ScaleShiftIE / BatchNormInference: ``eltwise`` with their 1-D side inputs broadcast
    along axis 1."""
    rank = len(p.in_shapes[0])
    shapes = [p.in_shapes[0]] + [tuple(s) + (1,) * (rank - 2) if len(s) == 1 and rank > 1 else s
                                 for s in p.in_shapes[1:]]
    return eltwise_impl(p, key, shapes)


def _prelu_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    """PRelu: data's shape under a per-channel slope (``PRelu.per_channel``), else numpy
    broadcasting."""
    if PRelu.per_channel(tuple(shapes[0]), tuple(shapes[1])):
        return [tuple(shapes[0])]
    return broadcast_shape(attrs, shapes, values)


def _prelu_impl(p: Params, key: Any) -> Impl | None:
    """PRelu: a per-channel slope along axis 1, else ``eltwise`` as every binary op."""
    if PRelu.per_channel(tuple(p.in_shapes[0]), tuple(p.in_shapes[1])):
        return per_channel_impl(p, key)
    return eltwise_impl(p, key)


def with_bias(p: Params, bias_shape: Sequence[int], bias_dtype: Any,
              activation: type | None = None) -> Params:
    """``p`` with a bias add (reading input 2) and an optional activation (an op class of
    this family) ahead of its fused ops: FullyConnected, GNAConvolution."""
    pre = [FusedDesc(ROW[Add], {}, (0, None), [], [F32, bias_dtype], F32)]
    if activation is not None:
        pre.append(FusedDesc(ROW[activation], {}, (1,), [], [F32], F32))
    q = Params(**{k: getattr(p, k) for k in Params.__slots__})
    q.fused = pre + [f.shifted(len(pre)) for f in p.fused or []]
    q.extra_shapes = [tuple(bias_shape)] + list(p.extra_shapes or [])
    q.extra_dtypes = [bias_dtype] + list(p.extra_dtypes or [])
    return q


def elementwise(cls: type, expr: ExprRule, fusable: bool = True,
                affine: Callable[[Any, list], Form | None] | None = None,
                literal_expr: Callable[[dict, dict], str | None] | None = None,
                truth_inputs: tuple[int, ...] = (),
                identity: Callable[[Any], int | None] | None = None,
                mask_bound: Callable[[Any, list], Any] | None = None) -> OpKind:
    """The row of an elementwise op: numpy-broadcast shapes, the ``eltwise`` kernel (uniform
    over sizes), folded into producers (``fusable``) and taking fused ops after it; ``affine``:
    its rule of index forms (``index_forms``); ``literal_expr``, ``truth_inputs``,
    ``identity``, ``mask_bound``: ``OpKind``'s."""
    return OpKind(cls, shape=broadcast_shape, impl=eltwise_impl, expr=expr, fusable=fusable,
                  epilogue=True, uniform=True, affine=affine, literal_expr=literal_expr,
                  truth_inputs=truth_inputs, identity=identity, mask_bound=mask_bound)


def _power_by_literal(attrs: dict, literals: dict) -> str | None:
    """Squares and cubes as products (tanh-GELU cubes its input): ``pow``'s general path is
    tens of instructions per element, and the product is as accurate."""
    exponent = literals.get(1)
    return {2.0: "({0} * {0})", 3.0: "({0} * {0} * {0})"}.get(exponent) \
        if exponent is not None else None


def _times_ones(n: Any) -> int | None:
    """The other factor of a Multiply by a constant of ones that it provably equals
    (``same_as``: the ones broadcast nothing): ``x * 1`` is ``x`` for every float, NaN and
    -0 included (LLaMA's rotary tables times an ``attention_scaling`` of 1)."""
    for j, (c, _) in enumerate(n.inputs):
        if c.is_constant and c.value is not None and c.value.size and np.all(c.value == 1) \
                and same_as(n, 1 - j):
            return 1 - j
    return None


# -- index forms (``index_forms``): integer arithmetic on affine values ----------------------------
def _affine_sum(sign: int) -> Callable[[Any, list], Form | None]:
    def rule(node: Any, forms: list) -> Form | None:
        al = aligned(node, forms)
        if al is None or len(al) != 2:
            return None
        a, b = al
        return Form(add(a.base, mul(sign, b.base)),
                    tuple(add(x, mul(sign, y)) for x, y in zip(a.slopes, b.slopes)))
    return rule


def _affine_product(node: Any, forms: list) -> Form | None:
    """A product where one factor is one value over the grid (its slopes 0)."""
    al = aligned(node, forms)
    if al is None or len(al) != 2:
        return None
    a, b = al if all(s == 0 for s in al[1].slopes) else al[::-1]
    if any(s != 0 for s in b.slopes):
        return None
    return Form(mul(a.base, b.base), tuple(mul(s, b.base) for s in a.slopes))


def _affine_convert(node: Any, forms: list) -> Form | None:
    """An integer Convert to 32 bits or more (an index the form proves in range keeps its
    value)."""
    src, k = node.inputs[0]
    if np.dtype(src.out_dtypes[k]).kind not in "iu" or np.dtype(node.out_dtypes[0]).itemsize < 4:
        return None
    return forms[0]


class Rotary:
    """The kind of ``x * cos + rotate(x) * sin`` over the last axis (rotary position
    embeddings), made by ``netpass.runtime.rotary``, never an op of a model; inputs ``x``,
    ``cos``, ``sin`` (the latter two broadcast into ``x``), and optionally a second tensor
    rotated alike as input 3, its result output 1 (a layer's queries and keys in one launch);
    its node's ``subgraph`` is a :class:`RotaryDesc`."""

    type_name: ClassVar[str] = "Rotary"


class RotaryDesc:
    """What a Rotary computes, and the nodes it replaced (for messages). ``rotated``: the
    width of the last axis's leading part it rotates, the rest passing as it is (partial
    rotary: GPT-NeoX, Phi, StableLM), or None for the whole axis. ``interleaved``: an
    element's partner is its neighbour (GPT-J's ``rotate_every_two``: ``-x[j + 1]`` at even
    ``j``, ``x[j - 1]`` at odd), else half the rotated part away (``rotate_half``)."""

    def __init__(self, nodes: list, rotated: int | None = None,
                 interleaved: bool = False) -> None:
        self.nodes, self.rotated, self.interleaved = nodes, rotated, interleaved

    def key(self) -> tuple:
        return ("rotary", self.rotated, self.interleaved)

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        # (the kernel reads cos and sin through broadcast strides: one that does not broadcast
        # into a rotated part would be read past its buffer; position_ids of another length)
        for x in [shapes[0], *shapes[3:]]:
            part = tuple(x[:-1]) + (self.rotated or (x[-1] if x else 0),)
            for j in (1, 2):
                if len(shapes[j]) > len(part) or any(
                        c not in (1, p) for c, p in zip(shapes[j][::-1], part[::-1])):
                    names = ", ".join(f"'{n.name}'" for n in self.nodes[-2:])
                    raise ShapeInferenceError(
                        f"rotary embedding (the nodes {names}): cos and sin of shapes "
                        f"{list(shapes[1])} and {list(shapes[2])} do not broadcast into the "
                        f"rotated part {list(part)} of {list(x)}")
        return rotary_shapes({}, list(shapes), {})

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        cos, sin = np.asarray(arrays[1]), np.asarray(arrays[2])
        out = []
        for x in [np.asarray(arrays[0])] + [np.asarray(a) for a in arrays[3:]]:
            w = self.rotated or x.shape[-1]
            part, h = x[..., :w], w // 2
            if self.interleaved:
                rot = np.stack([-part[..., 1::2], part[..., ::2]], axis=-1).reshape(part.shape)
            else:
                rot = np.concatenate([-part[..., h:], part[..., :h]], axis=-1)
            y = np.array(x, copy=True)
            y[..., :w] = part * cos + rot * sin
            out.append(y.astype(x.dtype))
        return out


def rotary_shapes(attrs: dict, shapes: list, values: dict) -> list[tuple]:
    """A Rotary's outputs: the shapes of its rotated inputs (0, and 3 where there is one)."""
    return [tuple(shapes[0])] + [tuple(s) for s in shapes[3:]]


def _rotary_args(p: Params, j: int, out: tuple, k: int,
                 rotated: int | None) -> tuple[list, int] | None:
    """(spec, rank) of rotated input ``j`` into output ``k`` (module docstring of
    kernels.eltwise.rotary): ``x`` through its strides where it is a view, ``cos`` and
    ``sin`` broadcast into the rotated part (``rotated`` wide, or the whole last axis); the
    last axis kept apart (an element's partner is half the rotated part away)."""
    w = rotated or (out[-1] if out else 0)
    if not out or w % 2 or w > out[-1]:
        return None
    x_st = p.in_strides[j] if p.in_strides else None
    part = tuple(out[:-1]) + (w,)
    strides = [broadcast_strides(p.in_shapes[j], out, x_st)] + \
        [broadcast_strides(p.in_shapes[i], part) for i in (1, 2)]
    dims, lead = collapse(list(out[:-1]), [st[:-1] for st in strides])
    dims = dims + [out[-1]]
    strides = [ls + [st[-1]] for ls, st in zip(lead, strides)]
    spec: list = [("i", j), ("i", 1), ("i", 2), ("o", k), size(out), w // 2] + dims
    return spec + [s for st in strides for s in st], len(dims)


def rotary_impl(p: Params, key: Any) -> Impl | None:
    """One ``rotary`` launch over the output(s) (:func:`_rotary_args` per rotated tensor)."""
    if any(np.dtype(d) != F32 for d in p.in_dtypes):
        return None
    fold, desc = p.node.rotary_fold, getattr(p.node, "subgraph", None)
    if fold is not None and fold.skips(p.node, p.out_shapes[0]):
        return Impl(key, [])  # (its attention's decode kernel rotates: rotary_fold)
    parts, rotated = [], getattr(desc, "rotated", None)
    for k, (j, out) in enumerate(zip([0, 3], p.out_shapes)):
        part = _rotary_args(p, j, tuple(out), k, rotated)
        if part is None:
            return None
        parts.append(part)
    n = sum(size(out) for out in p.out_shapes)
    if not n:
        return Impl(key, [])
    spec = [x for part in parts for x in part[0]]
    interleaved = getattr(desc, "interleaved", False)
    ranks = [part[1] for part in parts] + [None] * (2 - len(parts))
    src = rotary(*ranks, interleaved)
    return Impl(key, [Launch(src, *work_1d(n), spec)])


class GatedActivation:
    """The kind of ``act(x[..., :h]) * x[..., h:]`` over the last axis of 2h (a gated MLP's
    activation of its gate times its up projection, the two projections' columns side by side
    in one GEMM; ``act`` any elementwise function of one tensor: SiLU, GELU, ReLU...), made by
    ``netpass.runtime.parallel_gemms.merge_gated_mlps`` (and folded into a FullyConnected that
    reads it: ``fold_gated_inputs``), never an op of a model; its node's ``subgraph`` is a
    :class:`GatedActivationDesc`."""

    type_name: ClassVar[str] = "GatedActivation"


class GatedActivationDesc:
    """What a GatedActivation computes: ``act``, the activation's ops as the graph holds them
    (fused ops over the gate's value, stage 0, their other inputs literals), and ``product``,
    the Multiply of its value by the up projection's (its one side input); ``nodes``: the
    nodes it replaced (for messages). ``stages``: the kernels' code of both over loads 0 (the
    gate's value) and 1 (the up projection's), the product last (each op's expression its
    row's, as a fused region's)."""

    def __init__(self, act: Sequence[FusedDesc], product: FusedDesc, nodes: list) -> None:
        self.act, self.product, self.nodes = tuple(act), product, nodes
        self.stages = [Stage("{0}", [("in", 0)], "float")] + fused_stages(list(self.act), 2) \
            + fused_stages([product], 1)

    def key(self) -> tuple:
        return ("gated_activation", tuple(f.key() for f in self.act), self.product.key())

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        return gated_activation_shapes({}, list(shapes), {})

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The replaced ops' references: the activation's of the gate's half, then the
        product's with the up projection's half."""
        x = np.asarray(arrays[0])
        h = x.shape[-1] // 2
        a = evaluate_fused(list(self.act), x[..., :h], lambda src, k: src.value, infer_host)
        ins = [a if r is not None else x[..., h:] for r in self.product.refs]
        return [np.asarray(infer_host(self.product.node, ins)[0]).astype(x.dtype)]


def gated_activation_shapes(attrs: dict, shapes: list, values: dict) -> list[tuple]:
    """A GatedActivation's output: its input with the last axis halved."""
    return [tuple(shapes[0][:-1]) + (shapes[0][-1] // 2,)]


def gated_activation_impl(p: Params, key: Any) -> Impl | None:
    """One ``gated_activation`` launch over the output (float32, contiguous rows of 2h)."""
    out = tuple(p.out_shapes[0])
    if np.dtype(p.in_dtypes[0]) != F32 or not out or (p.in_strides and p.in_strides[0]):
        return None
    n = size(out)
    if not n:
        return Impl(key, [])
    src = gated_activation(p.node.subgraph.stages)
    return Impl(key, [Launch(src, *work_1d(n), [("i", 0), ("o", 0), n, out[-1]])])


class Unaries:
    """The kind of several one-input elementwise ops of one tensor, one output each, made by
    ``netpass.runtime.unaries``, never an op of a model (a rotary table's Cos and Sin: one
    launch instead of two); its node's ``subgraph`` is a :class:`UnariesDesc`."""

    type_name: ClassVar[str] = "Unaries"


class UnariesDesc:
    """The ops a Unaries computes (in output order) and their float32 expressions."""

    def __init__(self, nodes: list) -> None:
        self.nodes = nodes
        self.exprs = tuple(n.row.expr(n.attrs, [F32], F32) for n in nodes)

    def key(self) -> tuple:
        return ("unaries",) + self.exprs

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        return unaries_shapes({"outputs": len(self.nodes)}, list(shapes), {})

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [infer_host(n, arrays)[0] for n in self.nodes]


def unaries_shapes(attrs: dict, shapes: list, values: dict) -> list[tuple]:
    """A Unaries' outputs (``attrs["outputs"]`` of them): its input's shape each."""
    return [tuple(shapes[0])] * attrs["outputs"]


def unaries_impl(p: Params, key: Any) -> Impl | None:
    """One ``unaries`` launch over a contiguous float32 input."""
    exprs = p.node.subgraph.exprs
    if np.dtype(p.in_dtypes[0]) != F32 or (p.in_strides and p.in_strides[0]) \
            or any(e is None for e in exprs):
        return None
    n = size(p.out_shapes[0])
    if not n:
        return Impl(key, [])
    spec: list = [("i", 0)] + [("o", k) for k in range(len(exprs))] + [n]
    return Impl(key, [Launch(unaries(exprs), *work_1d(n), spec)])


def _compare(op: str) -> ExprRule:
    return anytype(f"({{0}} {op} {{1}})", 2)


_FLOOR_MOD = ("((fmod({0}, {1}) != 0 && ((fmod({0}, {1}) < 0) != ({1} < 0))) ? "
              "fmod({0}, {1}) + {1} : fmod({0}, {1}))")  # numpy's result for infinite divisors

ROWS = table(
    # arithmetic
    elementwise(Add, binary("({0} + {1})", "({0} + {1})"), affine=_affine_sum(1)),
    elementwise(Subtract, binary("({0} - {1})", "({0} - {1})"), affine=_affine_sum(-1)),
    elementwise(Multiply, binary("({0} * {1})", "({0} * {1})"), affine=_affine_product,
                identity=_times_ones),
    elementwise(Divide, binary("({0} / {1})", _int_divide)),
    elementwise(Power, binary("pow({0}, {1})"), literal_expr=_power_by_literal),
    elementwise(Maximum, binary(nan_max("{0}", "{1}"), "max({0}, {1})")),
    elementwise(Minimum, binary(nan_min("{0}", "{1}"), "min({0}, {1})")),
    elementwise(SquaredDifference,
                binary("(({0} - {1}) * ({0} - {1}))", "(({0} - {1}) * ({0} - {1}))")),
    elementwise(FloorMod, binary(_FLOOR_MOD, "((({0} % {1}) + {1}) % {1})")),
    elementwise(Mod, binary("fmod({0}, {1})", "({0} % {1})")),
    # comparisons, logic, selection, conversion
    elementwise(Equal, _compare("==")), elementwise(NotEqual, _compare("!=")),
    elementwise(Less, _compare("<"), mask_bound=mask_bounds.compare("<")),
    elementwise(Greater, _compare(">"), mask_bound=mask_bounds.compare(">")),
    elementwise(LessEqual, _compare("<="), mask_bound=mask_bounds.compare("<=")),
    elementwise(GreaterEqual, _compare(">="), mask_bound=mask_bounds.compare(">=")),
    elementwise(LogicalAnd, anytype("({0} && {1})"), truth_inputs=(0, 1),
                mask_bound=mask_bounds.conjunction),
    elementwise(LogicalOr, anytype("({0} || {1})"), truth_inputs=(0, 1),
                mask_bound=mask_bounds.disjunction),
    elementwise(LogicalXor, anytype("(({0} != 0) != ({1} != 0))"), truth_inputs=(0, 1)),
    elementwise(LogicalNot, anytype("(!{0})"), truth_inputs=(0,), mask_bound=mask_bounds.negation),
    elementwise(Select, anytype("({0} ? {1} : {2})", 3), truth_inputs=(0,),
                mask_bound=mask_bounds.selection),
    elementwise(Convert, _convert, affine=_affine_convert),
    # unary math
    elementwise(Abs, unary("fabs({0})", "abs({0})")),
    elementwise(Negative, unary("(-{0})", "(-{0})")),
    elementwise(Sign, unary("(isnan({0}) ? {0} : sign({0}))", "(({0} > 0) - ({0} < 0))")),
    elementwise(Exp, unary("exp({0})")), elementwise(Log, unary("log({0})")),
    elementwise(Sqrt, unary("sqrt({0})")), elementwise(Erf, unary("erf({0})")),
    elementwise(Floor, unary("floor({0})")), elementwise(Ceiling, unary("ceil({0})")),
    elementwise(Round, unary(lambda a, n: "rint({0})"
                             if a.get("mode", "half_to_even") == "half_to_even" else "round({0})")),
    elementwise(Sin, unary("sin({0})")), elementwise(Cos, unary("cos({0})")),
    elementwise(Tan, unary("tan({0})")), elementwise(Asin, unary("asin({0})")),
    elementwise(Acos, unary("acos({0})")), elementwise(Atan, unary("atan({0})")),
    elementwise(Sinh, unary("sinh({0})")), elementwise(Cosh, unary("cosh({0})")),
    elementwise(Asinh, unary("asinh({0})")), elementwise(Acosh, unary("acosh({0})")),
    elementwise(Atanh, unary("atanh({0})")),
    elementwise(IsNaN, unary("isnan({0})")), elementwise(IsInf, unary(_is_inf)),
    elementwise(IsFinite, unary("isfinite({0})")), elementwise(Identity, anytype("{0}", 1)),
    # activations
    elementwise(Relu, unary("(isnan({0}) ? {0} : fmax({0}, 0.0f))", "max({0}, ({T})0)")),
    elementwise(Sigmoid, unary("(1.0f / (1.0f + exp(-{0})))")),
    elementwise(Tanh, unary("tanh({0})")),
    elementwise(SoftSign, unary("({0} / (1.0f + fabs({0})))")),
    elementwise(HSwish, unary("({0} * fmin(fmax({0} + 3.0f, 0.0f), 6.0f) / 6.0f)")),
    elementwise(HSigmoid, unary(f"({nan_clamp('{0} + 3.0f', '0.0f', '6.0f')} / 6.0f)")),
    elementwise(SoftPlus, unary("({0} > 20.0f ? {0} : log1p(exp({0})))")),
    elementwise(Mish, unary("({0} * tanh({0} > 20.0f ? {0} : log1p(exp({0}))))")),
    elementwise(Gelu, unary(_gelu)),
    elementwise(Clamp, unary(lambda a, n: nan_clamp("{0}", flit(a["min"]), flit(a["max"])))),
    elementwise(Elu, unary(lambda a, n:
                           f"({{0}} > 0.0f ? {{0}} : {flit(a['alpha'])} * (exp({{0}}) - 1.0f))")),
    elementwise(Swish, unary(lambda a, n: "({0} / (1.0f + exp(-{0} * {1})))" if n == 2
                             else "({0} / (1.0f + exp(-{0})))")),
    elementwise(HardSigmoid, unary(nan_clamp("({1} * {0} + {2})", "0.0f", "1.0f"))),
    elementwise(Selu, unary("({2} * ({0} > 0.0f ? {0} : {1} * (exp({0}) - 1.0f)))")),
    # (not folded into producers: a per-channel slope does not broadcast numpy-style)
    OpKind(PRelu, shape=_prelu_shape, impl=_prelu_impl, expr=binary("({0} < 0 ? {0} * {1} : {0})"),
           epilogue=True),
    # quantization
    elementwise(FakeQuantize, unary(_fake_quantize)),
    OpKind(Rotary, shape=rotary_shapes, impl=rotary_impl),
    OpKind(GatedActivation, shape=gated_activation_shapes, impl=gated_activation_impl),
    OpKind(Unaries, shape=unaries_shapes, impl=unaries_impl),
)
ROW = {row.cls: row for row in ROWS}
