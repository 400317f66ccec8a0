"""Symbolic shapes: what the compiled graph's partial shapes already say about run-time shapes.

Import and shape inference keep a :class:`~netpass.core.dimension.Symbol` on dimensions proven
equal to a model input's dimension (``seq`` of ``ids [1, seq]`` reaches ``Reshape``'s target
``[1, seq, 4, 64]`` through ShapeOf -> Gather -> Concat). Once an infer request binds each such
symbol to the value in the user's arrays, a node whose output dims are all static or bound has
its shapes by substitution, and a shape-infer input whose partial value is all static or bound
has its value the same way: the ShapeOf sub-graph that computed it need not run at all.

Derived symbols (``past + seq`` of a decoder's grown cache, :class:`~netpass.core.dimension.Symbol`)
take part when every named symbol they are made of is bound: the binding holds their values
too, computed once per inference.

This plays the role of OpenVINO's symbolic shape optimizations (which rewrite such sub-graphs
at compile time) without changing the program: the runtime keeps the full path for inputs that
bind a symbol inconsistently, and checks the substitution against real shape inference on the
first infers of every compiled model (see :class:`~netpass.runtime.network.Network`).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

Expr = tuple  # items: int, or a Symbol to look up in the binding


def dims_expr(dims: Iterable[Any], bound: set) -> Expr | None:
    """``dims`` (ints or Dimensions) as a substitution template, or None when a dim is neither
    static nor a symbol whose named symbols are all bound."""
    out: list = []
    for d in dims:
        if isinstance(d, (int, np.integer)):
            out.append(int(d))
        elif d.min == d.max:
            out.append(d.min)
        elif d.symbol is not None and (d.symbol in bound or d.symbol.is_derived
                                       and all(s in bound for s in d.symbol.named())):
            out.append(d.symbol)
        else:
            return None
    return tuple(out)


def substitute(expr: Expr, binding: dict) -> tuple:
    return tuple([d if type(d) is int else binding[d] for d in expr])


class SymbolicShapes:
    """Per program: the input dims that bind each symbol, ``node.sym_out`` / ``node.sym_deps``
    templates, and the exec order of what still has to run when the binding holds."""

    def __init__(self, program: Any) -> None:
        # (symbol, position, axis): positions index the inputs, then the ReadValues (whose
        # shapes, the variables', are known when an inference starts)
        self.bindings: list[tuple[Any, int, int]] = []
        # an input of dynamic rank binds nothing, so a binding would not tell its shapes apart:
        # records and step plans keyed by it replayed one shape's kernels for another
        unranked = False
        for pos, p in enumerate([*program.inputs, *program.reads]):
            ps = p.out_pshapes[0]
            if not ps.rank_is_static:
                unranked = True
                continue
            for axis, d in enumerate(ps):
                if d.min != d.max and d.symbol is not None:
                    self.bindings.append((d.symbol, pos, axis))
        bound = {s for s, _, _ in self.bindings}
        any_expr = False
        for n in program.nodes:
            n.sym_out, n.sym_deps = None, {}
            if not bound or n.is_parameter or n.is_constant:
                continue
            outs = [dims_expr(ps, bound) if ps.rank_is_static else None for ps in n.out_pshapes]
            if outs and all(o is not None for o in outs):
                n.sym_out = outs
            for j in n.get_shape_infer_dependencies():
                src, k = n.inputs[j]
                pv = src.out_pvalues[k] if src.out_pvalues else None
                ps = src.out_pshapes[k]
                # the source may not run: its shapes must be known without it
                if src.is_constant or pv is None or \
                        not all(q.is_static for q in src.out_pshapes):
                    continue
                shape = tuple(ps.to_shape())
                expr = dims_expr(pv, bound)
                if expr is not None and len(expr) == int(np.prod(shape)):
                    n.sym_deps[j] = (expr, shape, src.out_dtypes[k])
            any_expr = any_expr or n.sym_out is not None or bool(n.sym_deps)
        # the derived symbols the templates use, evaluated by bind()
        self.derived = list(dict.fromkeys(
            d for n in program.nodes
            for expr in [*(n.sym_out or ()), *(e for e, _, _ in n.sym_deps.values())]
            for d in expr if type(d) is not int and d.is_derived))
        self.active = any_expr and not unranked
        self.order = self._live_order(program) if self.active else list(program.exec_order)

    @staticmethod
    def _live_order(program: Any) -> list:
        """``exec_order`` without the nodes whose outputs only feed shape-infer inputs known
        by substitution."""
        live: set[int] = set()
        stack = [*program.outputs, *program.sinks]
        while stack:
            n = stack.pop()
            if id(n) in live:
                continue
            live.add(id(n))
            for j, (s, _) in enumerate(n.inputs):
                if j not in n.sym_deps:
                    stack.append(s)
            stack.extend(s for s, _ in n.fused_inputs)
        return [n for n in program.exec_order if id(n) in live]

    @staticmethod
    def static_shapes(node: Any) -> list[tuple]:
        return [tuple(ps.to_shape()) for ps in node.out_pshapes]

    def bind(self, shapes: list[tuple | None]) -> dict | None:
        """Symbol -> int from the shapes of the inputs and the ReadValues (``program.inputs``
        then ``program.reads`` order); None when one symbol gets two values (the full path then
        reports what is wrong) or a shape is not known (None: a variable's init sub-graph
        decides it)."""
        b: dict = {}
        for sym, pos, axis in self.bindings:
            shape = shapes[pos]
            if shape is None:
                return None
            v = shape[axis]
            if b.setdefault(sym, v) != v:
                return None
        for sym in self.derived:
            b[sym] = sym.evaluate(b)
        return b

    @staticmethod
    def value(dep: tuple, binding: dict) -> np.ndarray:
        expr, shape, dtype = dep
        return np.array(substitute(expr, binding), dtype=dtype).reshape(shape)
