"""Operator fuzz families over arithmetic: Reduce*, Einsum, MatMul / Gemm, Softmax family,
normalizations, elementwise with broadcasting, Cast / CastLike, and the scan / search ops
CumSum, TopK, ArgMax / ArgMin, Range, OneHot (strategies returning
:class:`op_fuzz_harness.Case`)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from op_fuzz_draw import Draw, per_step
from op_fuzz_index import _broadcast_shapes, _data, _ints

REDUCES = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


@st.composite
def reduce(draw):
    """Every Reduce op: axes as attribute or input (by opset), negative, empty or omitted,
    keepdims, noop_with_empty_axes; integer data for the ops that take it."""
    d = Draw(draw)
    op = d.pick(REDUCES)
    dtype = np.float32
    if op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd") and d.flag():
        dtype = d.pick((np.int64, np.int32))
    rank = d.draw(st.integers(1, 4))
    dims = [d.size(1, 4, zero=op in ("ReduceSum", "ReduceSumSquare", "ReduceProd", "ReduceL1",
                                     "ReduceL2")) for _ in range(rank)]
    shapes = per_step(d, dims)
    arrays = [d.values(s, dtype) for s in shapes]
    if op == "ReduceProd" and dtype != np.float32:  # products that fit: mostly +-1, a few 2s
        arrays = [np.where(d.rng.random(a.shape) < 0.03, 2, np.sign(a)).astype(dtype)
                  for a in arrays]
    if op == "ReduceLogSum":
        arrays = [np.abs(a) for a in arrays]
    d.input("x", shapes, dtype, arrays=arrays)
    attrs: dict = {}
    if d.flag():
        attrs["keepdims"] = int(d.flag())
    axes = None
    if d.draw(st.integers(0, 3)):
        n = d.draw(st.integers(0, rank))
        axes = [a - rank if d.flag() else a for a in d.draw(st.permutations(range(rank)))[:n]]
    as_input = d.opset >= 18 or op == "ReduceSum"
    ins = ["x"]
    if as_input:
        if d.flag():
            attrs["noop_with_empty_axes"] = int(d.flag())
        if axes is not None:
            ins.append(_ints(d, "axes", [np.array(axes, np.int64)] * d.k, d.flag()))
    elif axes:
        attrs["axes"] = axes
    d.node(op, ins, ["y"], **attrs)
    return d.case(["y"])


@st.composite
def einsum(draw):
    """Einsum over 1-3 operands: random letters, repeated letters (diagonals), a leading
    ellipsis with broadcasting, implicit or explicit output."""
    d = Draw(draw, min_opset=13)
    letters = "abcde"
    size = {c: d.size(1, 4) for c in letters}
    ell = d.flag()
    erank = d.draw(st.integers(0, 2)) if ell else 0
    efull = [d.size(1, 3) for _ in range(erank)]
    terms = []
    used: list[str] = []
    for j in range(d.draw(st.integers(1, 3))):
        term = "".join(d.draw(st.lists(st.sampled_from(letters), min_size=0, max_size=3)))
        if not term and not ell:
            term = "a"
        used.extend(term)
        mine_e = d.draw(st.integers(0, erank)) if ell else 0
        edims = [1 if d.draw(st.integers(0, 3)) == 0 else efull[erank - mine_e + a]
                 for a in range(mine_e)]
        dims = edims + [size[c] for c in term]
        d.input(f"x{j}", per_step(d, dims))
        terms.append(("..." if ell else "") + term)
    eq = ",".join(terms)
    if d.flag():
        uniq = sorted(set(used))
        out = "".join(d.draw(st.permutations(uniq))[:d.draw(st.integers(0, len(uniq)))])
        eq += "->" + ("..." if ell else "") + out
    d.node("Einsum", [f"x{j}" for j in range(len(terms))], ["y"], equation=eq)
    return d.case(["y"])


@st.composite
def matmul(draw):
    """MatMul with broadcast batch dims and 1-D operands, or Gemm with transA / transB,
    alpha / beta and C broadcast from (), (N,), (1, N), (M, 1) or (M, N)."""
    d = Draw(draw)
    m, k, n = d.size(1, 6, zero=True), d.size(1, 6, zero=True), d.size(1, 6, zero=True)
    if d.flag():
        ta, tb = int(d.flag()), int(d.flag())
        b_const = d.flag()
        if b_const:  # a weight fixes k and n
            k, n = (k[0],) * d.k, (n[0],) * d.k
        a = [k, m] if ta else [m, k]
        b = [n, k] if tb else [k, n]
        d.input("a", per_step(d, a))
        if b_const:
            d.const("b", d.values(per_step(d, b)[0], np.float32))
        else:
            d.input("b", per_step(d, b))
        attrs: dict = {"transA": ta, "transB": tb} if d.flag() else {}
        if ta or tb:
            attrs.update(transA=ta, transB=tb)
        if d.flag():
            attrs["alpha"] = d.pick((0.5, -1.5, 2.0))
        ins = ["a", "b"]
        if d.flag():
            cshape = d.pick(([], [n], [1, n], [m, 1], [m, n]))
            d.input("c", per_step(d, cshape))
            ins.append("c")
            if d.flag():
                attrs["beta"] = d.pick((0.5, -1.0, 3.0))
        d.node("Gemm", ins, ["y"], **attrs)
        return d.case(["y"])
    batch_a, batch_b = _broadcast_shapes(d, 2, d.draw(st.integers(0, 2)))
    a = [m, k] if d.draw(st.integers(0, 4)) else [k]
    b = [k, n] if d.draw(st.integers(0, 4)) else [k]
    d.input("a", per_step(d, (batch_a if len(a) == 2 else []) + a))
    d.input("b", per_step(d, (batch_b if len(b) == 2 else []) + b))
    d.node("MatMul", ["a", "b"], ["y"])
    return d.case(["y"])


@st.composite
def softmax(draw):
    """Softmax / LogSoftmax / Hardmax over any axis (negative too)."""
    d = Draw(draw)
    op = d.pick(("Softmax", "LogSoftmax", "Hardmax"))
    rank = d.draw(st.integers(1, 4))
    _data(d, rank, 1, 5, zero=True)
    attrs = {"axis": d.draw(st.integers(-rank, rank - 1))} if d.flag() else {}
    d.node(op, ["x"], ["y"], **attrs)
    return d.case(["y"])


@st.composite
def norm(draw):
    """LayerNormalization (axis, with Mean / InvStdDev outputs), GroupNormalization (scale per
    group before opset 21, per channel after), InstanceNormalization, BatchNormalization."""
    d = Draw(draw, min_opset=13)
    op = d.pick(("LayerNormalization", "GroupNormalization", "InstanceNormalization",
                 "BatchNormalization"))
    if op == "LayerNormalization" and d.opset < 17 or op == "GroupNormalization" and \
            d.opset < 18:
        op = "InstanceNormalization"
    # (onnxruntime loses digits on groups of two close values at epsilon 1e-5: group and
    # instance norms draw a larger one)
    eps = {"epsilon": d.pick((1e-5, 1e-3, 0.1))} if d.flag() else {}
    if op in ("GroupNormalization", "InstanceNormalization"):
        eps = {"epsilon": d.pick((1e-3, 1e-2, 0.1))}
    outs = ["y"]
    if op == "LayerNormalization":
        rank = d.draw(st.integers(1, 4))
        axis = d.draw(st.integers(-rank, rank - 1))
        dims = [d.size(1, 4) for _ in range(rank)]
        for a in range(axis % rank, rank):
            dims[a] = dims[a][0]
        d.input("x", per_step(d, dims))
        ins = ["x", d.const("s", d.values(dims[axis % rank:], np.float32))]
        if d.flag():
            ins.append(d.const("b", d.values(dims[axis % rank:], np.float32)))
        if d.flag():
            outs += ["mean", "inv"][:d.draw(st.integers(1, 2))]
        d.node(op, ins, outs, axis=axis, **eps)
        return d.case(outs)
    groups = d.draw(st.integers(1, 3))
    c = groups * d.draw(st.integers(1, 3))
    spatial = [d.size(1, 4) for _ in range(d.draw(st.integers(0 if op == "BatchNormalization"
                                                               else 1, 3)))]
    d.input("x", per_step(d, [d.size(1, 3), c, *spatial]))
    if op == "GroupNormalization":
        per = c if d.opset >= 21 else groups
        ins = ["x", d.const("s", d.values([per], np.float32)),
               d.const("b", d.values([per], np.float32))]
        d.node(op, ins, outs, num_groups=groups, **eps)
    elif op == "InstanceNormalization":
        d.node(op, ["x", d.const("s", d.values([c], np.float32)),
                    d.const("b", d.values([c], np.float32))], outs, **eps)
    else:
        ins = ["x"] + [d.const(n, d.values([c], np.float32)) for n in ("s", "b", "m")]
        ins.append(d.const("v", np.abs(d.values([c], np.float32))))
        d.node(op, ins, outs, **eps)
    return d.case(outs)


BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Equal", "Less", "Greater",
          "LessOrEqual", "GreaterOrEqual", "PRelu", "And", "Or", "Xor", "Sum", "Mean", "BitShift")
INT_OK = ("Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Equal", "Less", "Greater",
          "LessOrEqual", "GreaterOrEqual", "Sum")


@st.composite
def binary(draw):
    """Binary (and variadic) elementwise ops with numpy broadcasting over dynamic dims, 0-size
    dims, integer division and Mod (fmod 0 / 1) with negative operands, Pow with integer
    exponents, comparisons and logic."""
    d = Draw(draw)
    op = d.pick(BINARY)
    n = 3 if op in ("Sum", "Mean", "Max", "Min") and d.flag() else 2
    rank = d.draw(st.integers(0, 4))
    shapes = _broadcast_shapes(d, n, rank)
    if rank and d.draw(st.integers(0, 5)) == 0:  # a 0-size axis, broadcast or not
        ax = d.draw(st.integers(0, rank - 1))
        for s in shapes:
            if len(s) > rank - 1 - ax and d.flag():
                s[len(s) - rank + ax] = 0
    attrs: dict = {}
    dtypes = [np.float32] * n
    if op in ("And", "Or", "Xor"):
        dtypes = [np.bool_] * n
    elif op == "BitShift":
        dtypes = [np.uint8] * n
        attrs["direction"] = d.pick(("LEFT", "RIGHT"))
    elif op in INT_OK and d.flag():
        dtypes = [d.pick((np.int64, np.int32))] * n
    if op == "Pow" and d.flag():
        dtypes[1] = d.pick((np.int64, np.int32, np.float32))
    if op == "Mod":
        fmod = 1 if dtypes[0] == np.float32 else int(d.flag())
        attrs["fmod"] = fmod
    for j, (s, dt) in enumerate(zip(shapes, dtypes)):
        arrays = [d.values(sh, dt) for sh in per_step(d, s)]
        if op == "Pow" and j == 1:
            arrays = [d.rng.integers(0 if dtypes[0] != np.float32 else -3, 4,
                                     a.shape).astype(dt) for a in arrays]
        if op == "Pow" and j == 0 and dt == np.float32 and dtypes[1] == np.float32:
            arrays = [np.abs(a) for a in arrays]
        if op == "BitShift" and j == 1:
            arrays = [(a % 8).astype(np.uint8) for a in arrays]
        if op == "Div" and dt != np.float32 or op == "Mod":
            arrays = [a * d.rng.integers(1, 4, a.shape).astype(dt) for a in arrays]
        d.input(f"x{j}", [a.shape for a in arrays], dt, arrays=arrays)
    d.node(op, [f"x{j}" for j in range(n)], ["y"], **attrs)
    return d.case(["y"])


UNARY = ("Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Abs", "Neg", "Sign",
         "Floor", "Ceil", "Round", "Erf", "Softplus", "Softsign", "Elu", "Selu", "HardSigmoid",
         "HardSwish", "LeakyRelu", "Celu", "Mish", "Gelu", "Not", "IsNaN", "IsInf")


@st.composite
def unary(draw):
    """Unary elementwise ops, with halves (Round's ties), NaN and inf among the values where
    the op is defined there."""
    d = Draw(draw)
    op = d.pick(UNARY)
    if op == "Gelu" and d.opset < 20 or op == "Mish" and d.opset < 18:
        op = "Erf"
    rank = d.draw(st.integers(0, 4))
    shapes = per_step(d, [d.size(1, 4, zero=True) for _ in range(rank)])
    dtype = np.bool_ if op == "Not" else np.float32
    if op in ("Abs", "Neg", "Sign") and d.flag():
        dtype = d.pick((np.int64, np.int32))
    arrays = [d.values(s, dtype) for s in shapes]
    if dtype == np.float32:
        if op in ("Round", "Floor", "Ceil"):
            arrays = [np.round(a * 4) / 2 for a in arrays]
        if op in ("Log", "Sqrt"):
            arrays = [np.abs(a) for a in arrays]
        if d.flag():
            special = np.array([np.nan, np.inf, -np.inf, 0.0], np.float32)
            arrays = [np.where(d.rng.random(a.shape) < 0.2, d.rng.choice(special, a.shape), a)
                      .astype(np.float32) for a in arrays]
    d.input("x", shapes, dtype, arrays=arrays)
    attrs = {"approximate": "tanh"} if op == "Gelu" and d.flag() else {}
    d.node(op, ["x"], ["y"], **attrs)
    return d.case(["y"])


CAST_TYPES = (np.float32, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_)


@st.composite
def cast(draw):
    """Cast / CastLike between the element types netpass has: float -> int truncation, int
    narrowing (wraps), to and from bool, NaN / inf to float types."""
    from op_fuzz_draw import ONNX_OF

    d = Draw(draw)
    src, dst = d.pick(CAST_TYPES), d.pick(CAST_TYPES)
    shapes = per_step(d, [d.size(1, 4, zero=True) for _ in range(d.draw(st.integers(0, 3)))])
    arrays = [d.values(s, src) for s in shapes]
    if np.dtype(src).kind == "f":
        arrays = [(a * d.rng.uniform(0, 60, a.shape)).astype(src) for a in arrays]
        if np.dtype(dst).kind == "u":
            arrays = [np.abs(a) for a in arrays]
        if np.dtype(dst).kind == "f" and d.flag():
            arrays = [np.where(d.rng.random(a.shape) < 0.2, np.inf, a).astype(src)
                      for a in arrays]
    elif np.dtype(src).kind == "i":
        arrays = [(a * d.rng.integers(1, 40, a.shape)).astype(src) for a in arrays]
    d.input("x", shapes, src, arrays=arrays)
    if d.opset < 15 or d.flag():
        d.node("Cast", ["x"], ["y"], to=ONNX_OF[np.dtype(dst)])
    else:
        d.node("CastLike", ["x", d.const("like", np.zeros([1], dst))], ["y"])
    return d.case(["y"])


@st.composite
def scan_search(draw):
    """CumSum (exclusive, reverse, axis as a per-step input), TopK (ties, largest, k as
    input), ArgMax / ArgMin (ties, keepdims, select_last_index)."""
    d = Draw(draw)
    op = d.pick(("CumSum", "TopK", "ArgMax", "ArgMin"))
    rank = d.draw(st.integers(1, 4))
    dtype = d.pick((np.float32, np.float32, np.int64, np.int32))
    shapes = per_step(d, [d.size(1, 5) for _ in range(rank)])
    ties = d.flag()
    arrays = [(d.rng.integers(-2, 3, s).astype(dtype) if ties else d.values(s, dtype))
              for s in shapes]
    d.input("x", shapes, dtype, arrays=arrays)
    axis = d.draw(st.integers(-rank, rank - 1))
    outs = ["y"]
    if op == "CumSum":
        attrs = {k: 1 for k in ("exclusive", "reverse") if d.flag()}
        ax = [np.array(axis, d.pick((np.int64, np.int32)))] * d.k
        d.node(op, ["x", _ints(d, "axis", ax, d.flag())], outs, **attrs)
    elif op == "TopK":
        small = min(s[axis] for s in shapes)
        kk = [np.array([d.draw(st.integers(1, small))], np.int64)] * d.k
        if d.flag():  # k per step, up to that step's size
            kk = [np.array([d.draw(st.integers(1, s[axis]))], np.int64) for s in shapes]
        outs = ["y", "i"]
        attrs = {"axis": axis} if d.flag() else {"axis": -1}
        if attrs["axis"] == -1 and axis != -1:
            kk = [np.array([d.draw(st.integers(1, s[-1]))], np.int64) for s in shapes]
        if d.flag():
            attrs["largest"] = int(d.flag())
        d.node(op, ["x", _ints(d, "k", kk, d.flag())], outs, **attrs)
    else:
        attrs = {"axis": axis}
        if d.flag():
            attrs["keepdims"] = int(d.flag())
        if d.flag():
            attrs["select_last_index"] = int(d.flag())
        d.node(op, ["x"], outs, **attrs)
    return d.case(outs)


@st.composite
def generate(draw):
    """Range (float / int64 / int32 operands per step, empty results too) and OneHot
    (negative and out-of-range indices, depth as input, any axis)."""
    d = Draw(draw)
    if d.flag():
        dtype = d.pick((np.float32, np.int64, np.int32))
        vals = []
        for _ in range(d.k):
            start = d.draw(st.integers(-6, 6))
            delta = d.draw(st.sampled_from([-3, -2, -1, 1, 2, 3]))
            limit = d.draw(st.integers(-8, 8))
            scale = 0.5 if dtype == np.float32 and d.flag() else 1
            vals.append([np.array(v * scale, dtype) for v in (start, limit, delta)])
        names = [_ints(d, nm, [v[j] for v in vals], d.flag())
                 for j, nm in enumerate(("start", "limit", "delta"))]
        d.node("Range", names, ["y"])
        return d.case(["y"])
    rank = d.draw(st.integers(1, 3))
    shapes = per_step(d, [d.size(1, 4) for _ in range(rank)])
    depth = d.draw(st.integers(1, 5))
    itype = d.pick((np.int64, np.int32, np.float32))
    arrays = [d.rng.integers(-depth - 1, depth + 1, s).astype(itype) for s in shapes]
    d.input("i", shapes, itype, arrays=arrays)
    dtype = d.pick((np.float32, np.int64))
    dep = _ints(d, "depth", [np.array(depth, d.pick((np.int64, np.float32)))] * d.k, d.flag())
    val = d.const("v", np.array([d.pick((0, -2)), d.pick((1, 3))], dtype))
    d.node("OneHot", ["i", dep, val], ["y"], axis=d.draw(st.integers(-rank - 1, rank)))
    return d.case(["y"])


FAMILIES = ["reduce", "einsum", "matmul", "softmax", "norm", "binary", "unary", "cast",
            "scan_search", "generate"]
