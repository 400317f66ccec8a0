"""The ONNX LSTM/GRU/RNN machinery the three share: ONNX's ``[num_directions, ...]`` seq-first
tensors to OpenVINO's batch-first Sequence inputs and back, gate block reordering, bias
combination, and the export writer."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node, Output
from ...errors import UnsupportedOpError
from .. import elementwise, indexing, movement, shape_ops
from ..base import to_output
from .common import ACTIVATIONS, DIRECTIONS, _num_directions, _Sequence

# Position of each OpenVINO gate block in ONNX's block order (LSTM: ONNX i,o,f,c -> f,i,c,o).
_LSTM_FROM_ONNX = [2, 0, 3, 1]


_LSTM_TO_ONNX = [1, 3, 0, 2]


_ONNX_ACT_NAMES = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu"}


def _reorder_blocks(value: Output, order: list[int], axis: int) -> Output:
    """Reorder equal gate blocks of ``value`` along ``axis`` (in numpy when it is known)."""
    if order == sorted(order):
        return value
    known = value.value
    if known is not None:
        parts = np.split(known, len(order), axis=axis)
        return to_output(np.concatenate([parts[i] for i in order], axis=axis))
    split = movement.split(value, axis, len(order))
    return _single(movement.concat([split.output(i) for i in order], axis))


def _single(node: Any) -> Output:
    return node if isinstance(node, Output) else node.output(0)


class _OnnxRecurrent:
    """Translation of one ONNX LSTM/GRU/RNN node into an OpenVINO-style Sequence op."""

    def __init__(self, ctx: Any, gates: int, n_acts: int, default_acts: list[str]) -> None:
        self.ctx = ctx
        self.gates = gates
        direction = ctx.attr("direction", "forward")
        if direction not in DIRECTIONS:
            ctx.error(f"direction '{direction}' is not one of {DIRECTIONS}")
        self.direction = direction
        self.nd = _num_directions(direction)
        self.layout = ctx.attr("layout", 0)
        if self.layout not in (0, 1):
            ctx.error(f"layout must be 0 or 1, got {self.layout}")
        x, w, r = ctx.input(0), ctx.input(1), ctx.input(2)
        if x is None or w is None or r is None:
            ctx.error("inputs X, W and R are required")
        self.w, self.r = w, r
        hs = ctx.attr("hidden_size", 0)
        if not hs:
            rps = r.partial_shape
            if not (rps.rank_is_static and len(rps) == 3 and rps[2].is_static):
                ctx.error("hidden_size is not given and R's shape is not static")
            hs = rps[2].get_length()
        self.hs = hs
        self.acts = self._activations(n_acts, default_acts)
        self.clip = float(ctx.attr("clip", 0.0))
        # ONNX layout 0 is [seq, batch, input]; netpass sequences are batch-first.
        self.x = self._transpose(x, [1, 0, 2]) if self.layout == 0 else x

    def _transpose(self, value: Output, order: list[int]) -> Output:
        return _single(movement.transpose(value, np.array(order, dtype=np.int64)))

    def _activations(self, n: int, default: list[str]) -> list[str]:
        names = self.ctx.attr("activations", [])
        if not names:
            return list(default)
        names = [a.lower() for a in names]
        if len(names) != n * self.nd:
            self.ctx.error(f"expects {n * self.nd} activations, got {names}")
        if self.nd == 2 and names[:n] != names[n:]:
            self.ctx.error(f"different activations per direction are not supported: {names}")
        for a in names[:n]:
            if a not in ACTIVATIONS:
                self.ctx.error(f"activation '{a}' is not supported "
                               f"(supported: {', '.join(_ONNX_ACT_NAMES.values())})")
        return names[:n]

    def batch_size_vector(self) -> Output:
        """A 1-D i64 tensor [batch] from X's shape (batch is dim 0 after the layout transpose)."""
        shape = shape_ops.shape_of(self.x, "i64")
        return _single(indexing.gather(shape, np.array([0], dtype=np.int64),
                                    np.array(0, dtype=np.int64)))

    def initial_state(self, index: int) -> Output:
        """ONNX state input ``index`` as [batch, nd, hs], zeros when omitted."""
        value = self.ctx.input(index)
        if value is not None:
            return self._transpose(value, [1, 0, 2]) if self.layout == 0 else value
        dims = _single(movement.concat([self.batch_size_vector(),
                                     to_output(np.array([self.nd, self.hs], dtype=np.int64))], 0))
        zero = to_output(np.array(0, dtype=self.x.element_type.dtype or np.float32))
        return _single(movement.broadcast(zero, dims))

    def sequence_lengths(self) -> Output:
        value = self.ctx.input(4)
        if value is not None:
            return value
        shape = shape_ops.shape_of(self.x, "i64")
        seq = indexing.gather(shape, np.array([1], dtype=np.int64), np.array(0, dtype=np.int64))
        return _single(movement.broadcast(seq, self.batch_size_vector()))

    def bias(self, combine: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
             order: list[int] | None = None) -> Output:
        """OpenVINO's B from ONNX's [nd, 2*G*hs] (W bias then R bias); zeros when omitted."""
        b = self.ctx.input(3)
        g, hs = self.gates, self.hs
        dtype = self.x.element_type.dtype or np.float32
        if b is None:
            blocks = g + (1 if combine is not None else 0)
            return to_output(np.zeros((self.nd, blocks * hs), dtype=dtype))
        if b.value is not None:
            wb, rb = b.value[:, :g * hs], b.value[:, g * hs:]
            arr = combine(wb, rb) if combine is not None else wb + rb
            out = to_output(arr.astype(dtype))
        else:
            if combine is not None:
                self.ctx.error("linear_before_reset=1 needs a constant B")
            halves = movement.split(b, 1, 2)
            out = _single(elementwise.add(halves.output(0), halves.output(1)))
        return _reorder_blocks(out, order, 1) if order else out

    def outputs(self, seq: Node, n_states: int) -> list[Output]:
        """ONNX outputs (Y, Y_h[, Y_c]) from the Sequence op's batch-first outputs."""
        y = seq.output(0)  # [batch, nd, seq, hs]
        if self.layout == 0:
            y = self._transpose(y, [2, 1, 0, 3])   # [seq, nd, batch, hs]
        else:
            y = self._transpose(y, [0, 2, 1, 3])   # [batch, seq, nd, hs]
        outs = [y]
        for s in range(n_states):
            st = seq.output(1 + s)
            outs.append(self._transpose(st, [1, 0, 2]) if self.layout == 0 else st)
        return outs[:max(self.ctx.num_outputs, 1)]


def _unsupported(node: Node, reason: str) -> UnsupportedOpError:
    return UnsupportedOpError(node.type_name, "", 17, node.friendly_name, reason)


def _export_reorder(ectx: Any, node: Node, index: int, name: str, order: list[int] | None,
                    axis: int) -> str:
    """ONNX name of input ``index`` with its gate blocks reordered to ONNX's order."""
    value = node.input_value(index)
    if not order:
        return name
    if value.value is not None:
        parts = np.split(value.value, len(order), axis=axis)
        return ectx.constant(np.concatenate([parts[i] for i in order], axis=axis))
    dim = value.partial_shape[axis] if value.partial_shape.rank_is_static else Dimension()
    if not dim.is_static:
        raise _unsupported(node, f"input {index} is not constant and its gate axis is dynamic")
    size = dim.get_length() // len(order)
    pieces = [ectx.fresh(f"{name}_gate") for _ in order]
    ectx.add_node("Split", [name, ectx.constant(np.array([size] * len(order), dtype=np.int64))],
                  pieces, axis=axis)
    out = ectx.fresh(f"{name}_onnx_order")
    ectx.add_node("Concat", [pieces[i] for i in order], [out], axis=axis)
    return out


def _onnx_bias_array(node: Node, arr: np.ndarray, order: list[int] | None) -> np.ndarray:
    """ONNX B [nd, 2*G*hs] from OpenVINO's [nd, blocks*hs]: W bias = B and R bias = 0 (only
    their sum matters), except GRU linear_before_reset, whose h-gate biases stay apart."""
    hs = node.hidden_size
    if getattr(node, "linear_before_reset", False):
        wb = arr[:, :3 * hs]
        rb = np.concatenate([np.zeros_like(arr[:, :2 * hs]), arr[:, 3 * hs:]], 1)
        return np.concatenate([wb, rb], axis=1)
    if order:
        parts = np.split(arr, len(order), axis=1)
        arr = np.concatenate([parts[i] for i in order], axis=1)
    return np.concatenate([arr, np.zeros_like(arr)], axis=1)


def _export_bias(ectx: Any, node: Node, index: int, name: str, order: list[int] | None,
                 is_cell: bool) -> str:
    """ONNX B from the op's B input ``index``, named ``name`` (already [nd, ...] shaped for
    cells)."""
    b = node.input_value(index)
    if b.value is not None:
        arr = b.value[None] if is_cell else b.value
        return ectx.constant(_onnx_bias_array(node, arr, order))
    if getattr(node, "linear_before_reset", False) or (order and is_cell):
        raise _unsupported(node, "a non-constant B of this op cannot be exported")
    wb = _export_reorder(ectx, node, index, name, order, 1)
    zeros = ectx.fresh("zero_bias")
    ectx.add_node("Sub", [wb, wb], [zeros])
    out = ectx.fresh("onnx_bias")
    ectx.add_node("Concat", [wb, zeros], [out], axis=1)
    return out


def _transpose(ectx: Any, name: str, perm: list[int], hint: str) -> str:
    out = ectx.fresh(hint)
    ectx.add_node("Transpose", [name], [out], perm=perm)
    return out


def _export_recurrent(node: Node, ectx: Any, onnx_type: str, order: list[int] | None) -> None:
    """Write a cell or sequence as one ONNX node (layout 0) with Transposes (sequences) or
    Unsqueeze/Squeeze (cells: a sequence of length 1) around it."""
    names = ectx.inputs(node)
    outs = ectx.outputs(node)
    is_seq = isinstance(node, _Sequence)
    states = node.STATES
    w_i = 1 + states + (1 if is_seq else 0)
    axes = "" if is_seq else ectx.constant(np.array([0], dtype=np.int64), "axis0")

    def unsqueeze(name: str, hint: str) -> str:
        out = ectx.fresh(hint)
        ectx.add_node("Unsqueeze", [name, axes], [out])
        return out

    if is_seq:
        x = _transpose(ectx, names[0], [1, 0, 2], "x_seq_first")
        inits = [_transpose(ectx, names[1 + s], [1, 0, 2], "state_dir_first")
                 for s in range(states)]
        lens = ectx.fresh("sequence_lens")
        ectx.add_node("Cast", [names[1 + states]], [lens], to=6)  # ONNX wants int32 lengths
        w = _export_reorder(ectx, node, w_i, names[w_i], order, 1)
        r = _export_reorder(ectx, node, w_i + 1, names[w_i + 1], order, 1)
        b = _export_bias(ectx, node, w_i + 2, names[w_i + 2], order, False)
    else:
        x = unsqueeze(names[0], "x_seq1")
        inits = [unsqueeze(names[1 + s], "state_dir1") for s in range(states)]
        lens = ""
        w = unsqueeze(_export_reorder(ectx, node, w_i, names[w_i], order, 0), "W")
        r = unsqueeze(_export_reorder(ectx, node, w_i + 1, names[w_i + 1], order, 0), "R")
        b = _export_bias(ectx, node, w_i + 2, unsqueeze(names[w_i + 2], "B"), order, True)
    attrs: dict[str, Any] = {"hidden_size": node.hidden_size}
    nd = _num_directions(node.direction) if is_seq else 1
    attrs["direction"] = node.direction if is_seq else "forward"
    if node.activations != node.DEFAULT_ACTIVATIONS:
        attrs["activations"] = [_ONNX_ACT_NAMES[a] for a in node.activations] * nd
    if node.clip > 0:
        attrs["clip"] = float(node.clip)
    if getattr(node, "linear_before_reset", False):
        attrs["linear_before_reset"] = 1
    peepholes = []
    if node.get_input_size() > w_i + 3:  # LSTM's P, in ONNX's order already
        p = names[w_i + 3]
        peepholes = [p if is_seq else unsqueeze(p, "P")]
    y = ectx.fresh("Y")
    state_outs = [ectx.fresh("Y_state") for _ in range(states)]
    ectx.add_node(onnx_type, [x, w, r, b, lens] + inits + peepholes, [y] + state_outs, **attrs)
    if is_seq:
        ectx.add_node("Transpose", [y], [outs[0]], perm=[2, 1, 0, 3])
        for s in range(states):
            ectx.add_node("Transpose", [state_outs[s]], [outs[1 + s]], perm=[1, 0, 2])
    else:
        for s in range(states):
            ectx.add_node("Squeeze", [state_outs[s], axes], [outs[s]])
