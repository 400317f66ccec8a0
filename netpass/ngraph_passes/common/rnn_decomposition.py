"""LSTM/GRU cells -> MatMul, Add, Split and activations; LSTM/GRU sequences -> unrolled cells.

After these passes a recurrent model holds only ops a layout-strict target runs (MatMul, Add,
Multiply, Sigmoid, Tanh, Split, Squeeze/Unsqueeze, Concat). Gate orders are OpenVINO's:
LSTM f, i, c, o and GRU z, r, h. The cell's outputs take the names ``<cell>.0`` (H) and
``<cell>.1`` (C), as OpenVINO's decomposition does.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_node
from ...core.node import Node, Output
from ...ops.elementwise import Add, Clamp, Multiply, Relu, Sigmoid, Subtract, Tanh
from ...ops.matmul import MatMul
from ...ops.movement import Concat, Reshape, Split, Squeeze, Transpose, Unsqueeze, VariadicSplit
from ...ops.recurrent import GRUCell, GRUSequence, LSTMCell, LSTMSequence
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, make

_ACTIVATIONS: dict[str, type[Node]] = {"sigmoid": Sigmoid, "tanh": Tanh, "relu": Relu}


class _Builder:
    """Creates nodes and remembers them, so rt_info can be copied to all of them at once."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def __call__(self, cls: type[Node], inputs: Sequence[Any], **attrs: Any) -> Node:
        n = make(cls, inputs, **attrs)
        self.nodes.append(n)
        return n

    def act(self, name: str, x: Output) -> Output:
        return self(_ACTIVATIONS[name], [x]).output(0)

    def clip(self, x: Output, clip: float) -> Output:
        """``Clamp(x, -clip, clip)`` for a clip that asks for clipping: 0 and +inf mean none
        (the cell specs), a negative or NaN clip bounds nothing (as OpenVINO's)."""
        return self(Clamp, [x], min=-clip, max=clip).output(0) \
            if 0 < clip < float("inf") else x

    def split(self, x: Output, axis: int, parts: int) -> list[Output]:
        return self(Split, [x, const(np.int64(axis))], num_splits=parts).outputs()

    def peephole(self, gate: Output, p: Output, c: Output) -> Output:
        return self(Add, [gate, self(Multiply, [p, c])]).output(0)


def _supported(cell: Node) -> bool:
    return all(a in _ACTIVATIONS for a in cell.activations)


def _finish(cell: Node, b: _Builder, outs: list[Output]) -> None:
    for i, o in enumerate(outs):
        o.node.friendly_name = f"{cell.friendly_name}.{i}"
    copy_runtime_info(cell, b.nodes)
    replace_node(cell, outs)


class LSTMCellDecomposition(MatcherPass):
    """LSTMCell -> MatMuls, Split into four gates, activations.

    LSTMCell -> ``Split(X W^T + B + H R^T, 4)`` -> f, i, c, o -> ``Ct = f*C + i*c``,
    ``Ht = o * h(Ct)``; peepholes P (i, o, f) add ``P_f*C``, ``P_i*C`` and ``P_o*Ct`` to the
    gates before their activations."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(LSTMCell, predicate=lambda o: _supported(o.node))

        def callback(m: Matcher) -> bool:
            cell = m.match_root
            if self.transformation_callback(cell):
                return False
            x, h, c, w, r, bias, *peepholes = cell.input_values()
            f_act, g_act, h_act = cell.activations
            b = _Builder()
            xw = b(MatMul, [x, w], transpose_a=False, transpose_b=True)
            hr = b(MatMul, [h, r], transpose_a=False, transpose_b=True)
            gates = b(Add, [hr, b(Add, [xw, bias])])
            f, i, g, o = b.split(gates.output(0), 1, 4)
            if peepholes:
                p_i, p_o, p_f = b.split(peepholes[0], 0, 3)
                f, i = b.peephole(f, p_f, c), b.peephole(i, p_i, c)
            f, i, g = (b.act(a, b.clip(v, cell.clip)) for a, v in ((f_act, f), (f_act, i),
                                                                     (g_act, g)))
            c_t = b(Add, [b(Multiply, [f, c]), b(Multiply, [i, g])]).output(0)
            if peepholes:
                o = b.peephole(o, p_o, c_t)
            o = b.act(f_act, b.clip(o, cell.clip))
            h_t = b(Multiply, [o, b.act(h_act, c_t)])
            _finish(cell, b, [h_t.output(0), c_t])
            return True

        self.register_matcher(Matcher(pattern, "LSTMCellDecomposition"), callback)


class GRUCellDecomposition(MatcherPass):
    """GRUCell -> MatMuls, Split, gates and activations.

    GRUCell -> ``z, r`` from ``X W^T + H R_zr^T + B``, candidate ``h~`` (reset applied before
    or after the recurrence MatMul per ``linear_before_reset``), ``Ht = (1 - z) h~ + z H``."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(GRUCell, predicate=lambda o: _supported(o.node))

        def callback(m: Matcher) -> bool:
            cell = m.match_root
            if self.transformation_callback(cell):
                return False
            x, h, w, r, bias = cell.input_values()
            f_act, g_act = cell.activations
            hs = cell.hidden_size
            b = _Builder()
            xz, xr, xh = b.split(b(MatMul, [x, w], transpose_a=False, transpose_b=True).output(0),
                                 1, 3)
            r_zr, r_h = b(VariadicSplit,
                          [r, const(np.int64(0)), const(np.array([2 * hs, hs]))]).outputs()
            hz, hr = b.split(b(MatMul, [h, r_zr], transpose_a=False, transpose_b=True).output(0),
                             1, 2)
            blocks = b.split(bias, 0, 4 if cell.linear_before_reset else 3)
            z = b.act(f_act, b.clip(b(Add, [b(Add, [xz, hz]), blocks[0]]).output(0), cell.clip))
            rg = b.act(f_act,
                       b.clip(b(Add, [b(Add, [xr, hr]), blocks[1]]).output(0), cell.clip))
            if cell.linear_before_reset:
                hr_h = b(Add,
                         [b(MatMul, [h, r_h], transpose_a=False, transpose_b=True), blocks[3]])
                pre = b(Add, [b(Add, [xh, blocks[2]]), b(Multiply, [rg, hr_h])])
            else:
                rh = b(MatMul, [b(Multiply, [rg, h]), r_h], transpose_a=False, transpose_b=True)
                pre = b(Add, [b(Add, [xh, rh]), blocks[2]])
            cand = b.act(g_act, b.clip(pre.output(0), cell.clip))
            one = const(np.array(1, dtype=x.element_type.dtype))
            h_t = b(Add, [b(Multiply, [b(Subtract, [one, z]), cand]), b(Multiply, [z, h])])
            _finish(cell, b, [h_t.output(0)])
            return True

        self.register_matcher(Matcher(pattern, "GRUCellDecomposition"), callback)


def _full_length(seq: Node, states: int) -> bool:
    """True when every batch row runs the whole (static) sequence length."""
    x = seq.get_input_partial_shape(0)
    lens = seq.input_value(1 + states).value
    if not x.rank_is_static or not x[1].is_static or lens is None:
        return False
    return bool(np.all(lens == x[1].get_length()))


class _SequenceUnrolling(MatcherPass):
    """Unrolls a sequence into one cell per time step and direction (Split X over time,
    Squeeze per step; Y built time-major, see ``_time_major_y``). Needs a static sequence
    length that every batch row runs in full; otherwise the sequence stays."""

    SEQUENCE: type[Node]
    CELL: type[Node]
    STATES: int

    def __init__(self) -> None:
        super().__init__()
        states = self.STATES
        pattern = wrap_type(self.SEQUENCE,
                            predicate=lambda o: _full_length(o.node, states))

        def callback(m: Matcher) -> bool:
            seq = m.match_root
            if self.transformation_callback(seq):
                return False
            self._unroll(seq)
            return True

        self.register_matcher(Matcher(pattern, type(self).__name__), callback)

    def _unroll(self, seq: Node) -> None:
        n = self.STATES
        ins = seq.input_values()
        x, init, (w, r, bias, *peepholes) = ins[0], ins[1:1 + n], ins[2 + n:]
        steps = seq.get_input_partial_shape(0)[1].get_length()
        nd = 2 if seq.direction == "bidirectional" else 1
        b = _Builder()

        def take(value: Output, axis: int, parts: int) -> list[Output]:
            if parts == 1:
                return [b(Squeeze, [value, const(np.array([axis]))]).output(0)]
            return [b(Squeeze, [p, const(np.array([axis]))]).output(0)
                    for p in b.split(value, axis, parts)]

        xs = take(x, 1, steps)
        attrs = {k: getattr(seq, k) for k in ("hidden_size", "activations", "activations_alpha",
                                               "activations_beta", "clip")}
        if self.CELL is GRUCell:
            attrs["linear_before_reset"] = seq.linear_before_reset
        ws, rs, bs = take(w, 0, nd), take(r, 0, nd), take(bias, 0, nd)
        ps = [take(p, 0, nd) for p in peepholes]
        state_parts = [take(s, 1, nd) for s in init]
        hs, finals = [[None] * steps for _ in range(nd)], [[] for _ in range(n)]
        for d in range(nd):
            reverse = seq.direction == "reverse" or d == 1
            st = [sp[d] for sp in state_parts]
            for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
                cell = b(self.CELL, [xs[t], *st, ws[d], rs[d], bs[d], *(p[d] for p in ps)],
                         **attrs)
                st = cell.outputs()
                hs[d][t] = st[0]
            for k in range(n):
                finals[k].append(b(Unsqueeze, [st[k], const(np.array([1]))]).output(0))
        outs = [self._time_major_y(b, hs, seq.hidden_size)]
        outs += [f[0] if nd == 1 else b(Concat, f, axis=1).output(0) for f in finals]
        _finish(seq, b, outs)
        for n in b.nodes:  # so a cell decomposition in the same traversal sees the cells
            if isinstance(n, self.CELL):
                self.register_new_node(n)

    @staticmethod
    def _time_major_y(b: _Builder, hs: list[list[Output]], hidden: int) -> Output:
        """Y ``[B, dir, T, H]`` from the per-step states ``hs[d][t]`` (``[B, H]``), built
        time-major: per step ``Concat(directions, axis 1)`` (``[B, dir*H]``), the steps
        concatenated on axis 0 (``[T*B, dir*H]``), then ``Reshape [T, B, dir, H]`` and a Transpose
        to batch-major. Every Concat joins whole rows (for batch 1, along the first non-1
        axis), and the Transposes ONNX puts around Y (``[T, dir, B, H]``, then the exporter's
        ``[T, B, dir*H]``) fuse with that Transpose into Reshapes, instead of reordering time
        against direction and batch (zoo finding F5)."""
        nd, steps = len(hs), len(hs[0])
        per_step = [hs[0][t] if nd == 1 else b(Concat, [h[t] for h in hs], axis=1).output(0)
                    for t in range(steps)]
        y = per_step[0] if steps == 1 else b(Concat, per_step, axis=0).output(0)
        y = b(Reshape, [y, const(np.array([steps, -1, nd, hidden], np.int64))],
              special_zero=False)
        return b(Transpose, [y, const(np.array([1, 2, 0, 3], np.int64))]).output(0)


class LSTMSequenceUnrolling(_SequenceUnrolling):
    """LSTMSequence run in full by every row -> an LSTMCell per step."""

    SEQUENCE, CELL, STATES = LSTMSequence, LSTMCell, 2


class GRUSequenceUnrolling(_SequenceUnrolling):
    """GRUSequence run in full by every row -> a GRUCell per step."""

    SEQUENCE, CELL, STATES = GRUSequence, GRUCell, 1
