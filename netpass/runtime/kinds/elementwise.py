"""Elementwise ops (``netpass/ops/elementwise``): one OpenCL expression per op, run by the
``eltwise`` template and folded into a producer's kernel where they follow one (fusion).

An expression formats with its operands ``{0}``, ``{1}``...; the float one applies when the
first input is a float, the integer one otherwise (None: no kernel for integers). float16
always runs on the host (documented); NaN propagates wherever the reference (numpy) propagates
it, since OpenCL's ``fmax``/``fmin``/``sign`` drop it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

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
    fused_stages,
    size,
    work_1d,
)
from ..index_forms import Form, add, aligned, mul
from ..kernels.common import Stage, ctype, flit, nan_clamp, nan_max, nan_min
from ..kernels.eltwise import eltwise, eltwise_vec4
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
)
ROW = {row.cls: row for row in ROWS}
