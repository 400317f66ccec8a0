"""Matrix products: MatMul (opset1) and Einsum (opset7), with the ONNX MatMul, Gemm and Einsum
rules.

MatMul follows numpy: batch dims broadcast, a 1-D first operand is a row ``[1, K]`` and a 1-D
second operand a column ``[K, 1]`` whose unit dim is dropped again; ``transpose_a`` and
``transpose_b`` swap the last two axes of operands of rank >= 2 (1-D operands ignore them).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..errors import UnsupportedOpError
from .base import merged_input_type, set_name, to_output
from .elementwise import Add, Multiply
from .registry import onnx_export, onnx_rule

__all__ = ["matmul", "einsum"]


class MatMul(Node):
    """``A @ B`` with numpy broadcasting of batch dims."""

    type_name = "MatMul"
    version = "opset1"
    ATTRS = {"transpose_a": False, "transpose_b": False}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 2, "expects inputs (A, B)")
        et = merged_input_type(self)
        a, b = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        if not a.rank_is_static or not b.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        self.check(len(a) >= 1 and len(b) >= 1, "scalars cannot be multiplied: A {}, B {}", a, b)
        da, db = list(a), list(b)
        if len(da) == 1:
            da = [Dimension(1)] + da
        elif self.transpose_a:
            da[-2], da[-1] = da[-1], da[-2]
        if len(db) == 1:
            db = db + [Dimension(1)]
        elif self.transpose_b:
            db[-2], db[-1] = db[-1], db[-2]
        self.check(da[-1].compatible(db[-2]),
                   "inner dims differ: A {} gives K={}, B {} gives K={}"
                   " (transpose_a={}, transpose_b={})",
                   a, da[-1], b, db[-2], self.transpose_a, self.transpose_b)
        batch = PartialShape(da[:-2]).broadcast_merge(PartialShape(db[:-2]))
        if batch is None:
            self.fail("batch dims of A {} and B {} do not broadcast", a, b)
        dims = list(batch)
        if len(a) > 1:
            dims.append(da[-2])
        if len(b) > 1:
            dims.append(db[-1])
        self.set_output_type(0, et, PartialShape(dims))

    def evaluate(self, inputs):
        a, b = (_computable(v) for v in inputs)
        if self.transpose_a and a.ndim > 1:
            a = np.swapaxes(a, -1, -2)
        if self.transpose_b and b.ndim > 1:
            b = np.swapaxes(b, -1, -2)
        out = np.matmul(a, b)
        return [np.asarray(out).astype(self._outs[0].et.dtype or inputs[0].dtype, copy=False)]


def _computable(x: np.ndarray) -> np.ndarray:
    """``x`` in a type numpy's matmul and einsum take (bfloat16 arrays become f32)."""
    return x.astype(np.float32) if x.dtype.kind == "V" else x


# -- Einsum ----------------------------------------------------------------------------------
_TERM = re.compile(r"^(?:[A-Za-z]|\.\.\.)*$")


def parse_equation(equation: str, n_inputs: int | None = None) -> tuple[list[list[str]], list[str]]:
    """Input terms and output term of an einsum equation as token lists (letters, ``...``).

    Implicit mode (no ``->``) outputs ``...`` (when any input has it), then the letters that
    appear once overall, in alphabetical order, as numpy and ONNX do.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = [_tokens(t) for t in lhs.split(",")]
    if n_inputs is not None and len(terms) != n_inputs:
        raise ValueError(f"equation {equation!r} has {len(terms)} input terms for {n_inputs} "
                         "inputs")
    if arrow:
        out = _tokens(rhs)
        letters = {t for term in terms for t in term}
        for t in out:
            if t != "..." and t not in letters:
                raise ValueError(f"output label {t!r} of {equation!r} is in no input")
        if "..." in out and not any("..." in term for term in terms):
            raise ValueError(f"output of {equation!r} has an ellipsis no input has")
    else:
        counts: dict[str, int] = {}
        for term in terms:
            for t in term:
                counts[t] = counts.get(t, 0) + 1
        out = (["..."] if "..." in counts else []) + \
            sorted(t for t, c in counts.items() if c == 1 and t != "...")
    if len(set(out)) != len(out):
        raise ValueError(f"output of {equation!r} repeats a label")
    return terms, out


def _tokens(term: str) -> list[str]:
    if not _TERM.match(term) or term.count("...") > 1:
        raise ValueError(f"bad einsum term {term!r}")
    toks: list[str] = []
    i = 0
    while i < len(term):
        if term.startswith("...", i):
            toks.append("...")
            i += 3
        else:
            toks.append(term[i])
            i += 1
    return toks


def explicit_equation(equation: str, n_inputs: int | None = None) -> str:
    """The equation with its output term spelled out (``ij,jk`` -> ``ij,jk->ik``)."""
    terms, out = parse_equation(equation, n_inputs)
    return ",".join("".join(t) for t in terms) + "->" + "".join(out)


class Einsum(Node):
    """Einstein summation over any number of inputs, ``equation`` as in numpy (with ``...``)."""

    type_name = "Einsum"
    version = "opset7"
    ATTRS = {"equation": ""}

    def infer_types(self) -> None:
        n = self.get_input_size()
        self.check(n >= 1, "expects at least one input")
        et = merged_input_type(self)
        try:
            terms, out = parse_equation(self.equation, n)
        except ValueError as e:
            self.check(False, str(e))
        labels: dict[str, Dimension] = {}
        ellipsis: PartialShape | None = PartialShape([])
        for i, term in enumerate(terms):
            ps = self.get_input_partial_shape(i)
            letters = [t for t in term if t != "..."]
            if not ps.rank_is_static:
                if "..." in term:
                    ellipsis = None
                continue
            if "..." in term:
                self.check(len(ps) >= len(letters),
                           f"input {i} of shape {ps} has fewer dims than term {''.join(term)!r}")
            else:
                self.check(len(ps) == len(letters),
                           "input {} of shape {} does not match term {!r}", i, ps, ''.join(term))
            k = term.index("...") if "..." in term else len(term)
            n_ell = len(ps) - len(letters)
            dims = list(ps)
            for j, t in enumerate(term[:k]):
                labels[t] = self._merge_label(labels, t, dims[j], i)
            for j, t in enumerate(term[k + 1:]):
                labels[t] = self._merge_label(labels, t, dims[k + n_ell + j], i)
            if "..." in term and ellipsis is not None:
                merged = ellipsis.broadcast_merge(PartialShape(dims[k:k + n_ell]))
                if merged is None:
                    self.fail(f"ellipsis dims of input {i} ({ps}) do not broadcast with the "
                              "other inputs'")
                ellipsis = merged
        if "..." in out and ellipsis is None:
            self.set_output_type(0, et, PartialShape(None))
            return
        dims = []
        for t in out:
            if t == "...":
                dims.extend(ellipsis if ellipsis is not None else ())  # (None: returned above)
            else:
                dims.append(labels.get(t, Dimension()))
        self.set_output_type(0, et, PartialShape(dims))

    def _merge_label(self, labels: dict[str, Dimension], label: str, d: Dimension,
                     i: int) -> Dimension:
        if label not in labels:
            return d
        merged = labels[label].merge(d)
        if merged is None:
            self.fail("label {!r} is {} elsewhere but {} in input {}", label, labels[label], d, i)
        return merged

    def evaluate(self, inputs):
        out = np.einsum(self.equation.replace(" ", ""), *(_computable(v) for v in inputs),
                        optimize=len(inputs) > 2)
        return [np.asarray(out).astype(self._outs[0].et.dtype or inputs[0].dtype, copy=False)]


# -- factories -------------------------------------------------------------------------------
def matmul(data_a: Any, data_b: Any, transpose_a: bool, transpose_b: bool,
           name: str | None = None) -> Node:
    """MatMul-1: ``data_a @ data_b`` with numpy's rules (1-D operands are promoted and the added
    dim removed, batch dims broadcast); ``transpose_a`` / ``transpose_b`` swap the last two dims
    of an operand first."""
    return set_name(MatMul([to_output(data_a), to_output(data_b)], transpose_a=bool(transpose_a),
                           transpose_b=bool(transpose_b)), name)


def einsum(inputs: Sequence[Any], equation: str, name: str | None = None) -> Node:
    """Einsum-7: the Einstein summation ``equation`` (e.g. "ij,jk->ik", with "..." for broadcast
    dims) over ``inputs``."""
    return set_name(Einsum([to_output(v) for v in inputs], equation=equation), name)


# -- ONNX import -----------------------------------------------------------------------------
def _scalar_like(value: float, like: Output) -> Output:
    dtype = like.element_type.dtype or np.float32
    return to_output(np.asarray(value, dtype=dtype))


@onnx_rule("MatMul")
def _import_matmul(ctx):
    return MatMul(ctx.inputs[:2]).output(0)


@onnx_rule("Gemm")
def _import_gemm(ctx):
    a, b = ctx.inputs[0], ctx.inputs[1]
    c = ctx.input(2)
    alpha = ctx.attr("alpha", 1.0)
    beta = ctx.attr("beta", 1.0)
    y = MatMul([a, b], transpose_a=bool(ctx.attr("transA", 0)),
               transpose_b=bool(ctx.attr("transB", 0))).output(0)
    if alpha != 1.0:
        y = Multiply([y, _scalar_like(alpha, y)]).output(0)
    if c is None or beta == 0.0:
        return y
    if beta != 1.0:
        if c.value is not None:
            c = to_output(np.asarray(c.value * np.asarray(beta, dtype=c.value.dtype)))
        else:
            c = Multiply([c, _scalar_like(beta, c)]).output(0)
    return Add([y, c]).output(0)


@onnx_rule("Einsum")
def _import_einsum(ctx):
    try:
        equation = explicit_equation(ctx.attr("equation", ""), len(ctx.inputs))
    except ValueError as e:
        ctx.error(str(e))
    return Einsum(ctx.inputs, equation=equation).output(0)


# -- ONNX export -----------------------------------------------------------------------------
def _transposed(node: Node, ectx, names: list[str], i: int) -> str:
    """Input ``i`` with its last two axes swapped (an ONNX Transpose)."""
    ps = node.get_input_partial_shape(i)
    if not ps.rank_is_static:
        raise UnsupportedOpError(node.type_name, node_name=node.friendly_name,
                                 reason=f"transposed input {i} needs a static rank, got {ps}")
    r = len(ps)
    if r < 2:
        return names[i]
    out = ectx.fresh(f"{node.friendly_name}/transpose_{'ab'[i]}")
    ectx.add_node("Transpose", [names[i]], [out], perm=list(range(r - 2)) + [r - 1, r - 2])
    return out


@onnx_export(MatMul)
def _export_matmul(node, ectx):
    names = ectx.inputs(node)
    if node.transpose_a:
        names[0] = _transposed(node, ectx, names, 0)
    if node.transpose_b:
        names[1] = _transposed(node, ectx, names, 1)
    ectx.add_node("MatMul", names, ectx.outputs(node))


@onnx_export(Einsum)
def _export_einsum(node, ectx):
    ectx.add_node("Einsum", ectx.inputs(node), ectx.outputs(node), equation=node.equation)
