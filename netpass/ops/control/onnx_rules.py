"""ONNX If, Loop and Scan onto OpenVINO's If, Loop and TensorIterator (as OpenVINO's ONNX
frontend maps them).

- **If**: the condition, then every outer value either branch captures (one input each,
  shared where both read it); each branch maps its captured Parameters to those inputs. A
  condition known at import (a constant, or shape math folded) keeps only the chosen branch,
  converted into the graph itself: ONNX does not require the other branch to fit the shapes.
- **Loop** (M, cond, v_initial...): Loop(trip_count = M or -1, execution_condition = cond or
  true, cond again for the body's ``cond_in``, v_initial..., captures...). The body's
  ``iteration_num`` is the current-iteration port and its first output the condition port;
  ``cond_in`` and the loop-carried values are merged inputs whose back edges are the body's
  ``cond_out`` and ``v_out``; each scan output is unsqueezed in the body and concatenated on
  axis 0.
- **Scan-9+** (states..., scan inputs...): a TensorIterator whose states are merged inputs and
  whose scan inputs are sliced one element at a time along ``scan_input_axes`` (backwards for a
  reverse direction); the body receives the slice with the axis kept (a Squeeze inside gives the
  ONNX body its value) and each scan output is unsqueezed and concatenated along
  ``scan_output_axes``.
- **Scan-8** (sequence_lens, states..., scan inputs..., all with a batch axis first): a
  TensorIterator over the batch whose body runs the Scan-9 TensorIterator on one batch item.
  ``sequence_lens`` must be absent or a constant equal to the sequence length.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.boundary import Constant, Parameter, Result
from ...core.dimension import Dimension
from ...core.model import Model
from ...core.node import Output
from ...core.shape import PartialShape
from ...core.subgraph import (
    BodyOutput,
    ConcatOutput,
    InputDescription,
    InvariantInput,
    MergedInput,
    SliceInput,
)
from ...core.types import boolean, i64
from ...errors import ModelFormatError
from ..movement import Squeeze, Unsqueeze
from ..registry import onnx_rule
from .if_op import If
from .loop import Loop, TensorIterator


def _const(value: Any, dtype: Any) -> Output:
    return Constant([], value=np.asarray(value, dtype=dtype)).output(0)


def _spec(value: Output) -> tuple[Any, PartialShape]:
    return value.element_type, value.partial_shape


class _Inputs:
    """A node's input list that shares one input per outer value."""

    def __init__(self, first: list[Output]) -> None:
        self.values: list[Output] = list(first)
        self._index: dict[tuple[int, int], int] = {}

    def add(self, value: Output, share: bool = True) -> int:
        key = (id(value.node), value.index)
        if share and key in self._index:
            return self._index[key]
        self.values.append(value)
        self._index[key] = len(self.values) - 1
        return len(self.values) - 1


@onnx_rule("If", since=1)
def _import_if(ctx) -> list[Output]:
    known = ctx.input(0).value
    if known is not None and np.asarray(known).size == 1:
        # decided at import: the other branch may not even fit these shapes (ONNX leaves it
        # unchecked), so only the chosen one is converted, into the graph itself
        chosen = "then_branch" if bool(np.asarray(known).reshape(-1)[0]) else "else_branch"
        return ctx.inline_subgraph(chosen)
    inputs = _Inputs([ctx.input(0)])
    bodies, descs, n_outs = [], [], []
    for attr in ("then_branch", "else_branch"):
        body, captured = ctx.subgraph(attr, [])
        bodies.append(body)
        descs.append([InvariantInput(inputs.add(v), j) for j, v in enumerate(captured)])
        n_outs.append(len(body.results))
    if n_outs[0] != n_outs[1]:
        raise ModelFormatError(f"then_branch has {n_outs[0]} outputs, else_branch "
                               f"{n_outs[1]}")
    outs = [[BodyOutput(k, k) for k in range(n_outs[0])] for _ in bodies]
    node = If(inputs.values, bodies=bodies, input_descriptions=descs, output_descriptions=outs)
    return node.outputs()


@onnx_rule("Loop", since=1)
def _import_loop(ctx) -> list[Output]:
    trip = ctx.input(0) if ctx.input(0) is not None else _const(-1, np.int64)
    cond = ctx.input(1) if ctx.input(1) is not None else _const(True, np.bool_)
    carried = list(ctx.inputs[2:])
    if any(v is None for v in carried):
        ctx.error("a loop-carried initial value is omitted")
    n = len(carried)
    specs = [(i64, PartialShape([])), (boolean, PartialShape([])), *map(_spec, carried)]
    body, captured = ctx.subgraph("body", specs)
    k = len(body.results) - 1 - n
    if k < 0:
        raise ModelFormatError(f"the body has {len(body.results)} outputs, fewer than 1 + {n} "
                               "loop-carried")
    for j in range(k):
        _unsqueeze_result(body, 1 + n + j, 0)
    inputs = _Inputs([trip, cond])
    descs: list[InputDescription] = [MergedInput(inputs.add(cond, share=False), 1, 0)]
    descs += [MergedInput(inputs.add(v, share=False), 2 + j, 1 + j) for j, v in enumerate(carried)]
    descs += [InvariantInput(inputs.add(v), 2 + n + j) for j, v in enumerate(captured)]
    outs: list = [BodyOutput(1 + j, j) for j in range(n)]
    outs += [ConcatOutput(1 + n + j, n + j, 0, 1, 1, -1, 0) for j in range(k)]
    node = Loop(inputs.values, bodies=[body], input_descriptions=[descs],
                output_descriptions=[outs], special_body_ports=[0, 0])
    return node.outputs()


def _unsqueeze_result(body: Model, index: int, axis: int) -> None:
    """Body Result ``index`` returns its value with a new axis ``axis`` of size 1."""
    r = body.results[index]
    r.set_argument(0, Unsqueeze([r.input_value(0), _const([axis], np.int64)]).output(0))


def _slice_parameter(body: Model, index: int, axis: int) -> None:
    """Body Parameter ``index`` becomes one that keeps the sliced axis (size 1), squeezed
    for the body's readers."""
    old = body.parameters[index]
    dims = list(old.shape) if old.shape.rank_is_static else None
    shape = PartialShape(dims[:axis] + [Dimension(1)] + dims[axis:]) if dims is not None \
        else PartialShape(None)
    new = Parameter([], shape=shape, element_type=old.element_type)
    new.friendly_name = old.friendly_name
    squeezed = Squeeze([new.output(0), _const([axis], np.int64)])
    old.output(0).replace(squeezed.output(0))
    body.replace_parameter(index, new)


def _axes(ctx, name: str, count: int, ranks: list[int | None]) -> list[int]:
    """Axes of an attribute (default 0), negative ones (opset 11+) counted from ``ranks``."""
    axes = ctx.attr(name, [0] * count)
    if len(axes) != count:
        ctx.error(f"{name} has {len(axes)} entries for {count} values")
    out = []
    for a, rank in zip(axes, ranks):
        if a < 0:
            if rank is None:
                ctx.error(f"{name}: negative axis {a} of a value of unknown rank")
            a += rank
        if rank is not None and not 0 <= a < rank:
            ctx.error(f"{name}: axis {a} is out of range for rank {rank}")
        out.append(a)
    return out


def _rank(value: Output) -> int | None:
    ps = value.partial_shape
    return len(ps) if ps.rank_is_static else None


def _scan_iterator(ctx, states: list[Output], scans: list[Output],
                   input_axes: list[int], input_reverse: list[bool]) -> TensorIterator:
    """The Scan-9 TensorIterator over ``states`` and ``scans`` (the ONNX body converted)."""
    n, m = len(states), len(scans)
    specs = [_spec(s) for s in states]
    for v, axis in zip(scans, input_axes):
        ps = v.partial_shape
        specs.append((v.element_type, PartialShape(list(ps)[:axis] + list(ps)[axis + 1:])
                      if ps.rank_is_static else ps))
    body, captured = ctx.subgraph("body", specs)
    k = len(body.results) - n
    if k < 0:
        raise ModelFormatError(f"the body has {len(body.results)} outputs, fewer than its {n} "
                               "states")
    out_ranks = [_rank(r.input_value(0)) for r in body.results[n:]]
    out_axes = _axes(ctx, "scan_output_axes", k,
                     [r + 1 if r is not None else None for r in out_ranks])
    out_reverse = [bool(d) for d in ctx.attr("scan_output_directions", [0] * k)]
    for j, axis in enumerate(input_axes):
        _slice_parameter(body, n + j, axis)
    for j, axis in enumerate(out_axes):
        _unsqueeze_result(body, n + j, axis)
    inputs = _Inputs([])
    descs: list = [MergedInput(inputs.add(s, share=False), i, i) for i, s in enumerate(states)]
    for j, (v, axis, rev) in enumerate(zip(scans, input_axes, input_reverse)):
        start, end, stride = (-1, 0, -1) if rev else (0, -1, 1)
        descs.append(SliceInput(inputs.add(v, share=False), n + j, start, stride, 1, end, axis))
    descs += [InvariantInput(inputs.add(v), n + m + j) for j, v in enumerate(captured)]
    outs: list = [BodyOutput(i, i) for i in range(n)]
    for j, (axis, rev) in enumerate(zip(out_axes, out_reverse)):
        start, end, stride = (-1, 0, -1) if rev else (0, -1, 1)
        outs.append(ConcatOutput(n + j, n + j, start, stride, 1, end, axis))
    return TensorIterator(inputs.values, bodies=[body], input_descriptions=[descs],
                          output_descriptions=[outs])


@onnx_rule("Scan", since=9)
def _import_scan(ctx) -> list[Output]:
    m = ctx.attr("num_scan_inputs", 0)
    values = list(ctx.inputs)
    n = len(values) - m
    if m < 1 or n < 0:
        ctx.error(f"num_scan_inputs={m} with {len(values)} inputs")
    states, scans = values[:n], values[n:]
    axes = _axes(ctx, "scan_input_axes", m, [_rank(v) for v in scans])
    reverse = [bool(d) for d in ctx.attr("scan_input_directions", [0] * m)]
    if len(reverse) != m:
        ctx.error(f"scan_input_directions has {len(reverse)} entries for {m} scan inputs")
    return _scan_iterator(ctx, states, scans, axes, reverse).outputs()


@onnx_rule("Scan", since=8)
def _import_scan8(ctx) -> list[Output]:
    m = ctx.attr("num_scan_inputs", 0)
    lens, values = ctx.input(0), list(ctx.inputs[1:])
    n = len(values) - m
    if m < 1 or n < 0:
        ctx.error(f"num_scan_inputs={m} with {len(values)} inputs")
    if any(_rank(v) is None for v in values):
        ctx.error("Scan-8 needs inputs of known rank (batch axis first)")
    reverse = [bool(d) for d in ctx.attr("directions", [0] * m)]
    if lens is not None:
        known = lens.node.value if isinstance(lens.node, Constant) else None
        seq = {v.partial_shape[1] for v in values[n:]}
        length = next(iter(seq)) if len(seq) == 1 else None
        if known is None or length is None or not length.is_static or \
                np.any(np.asarray(known) != length.min):
            ctx.error("sequence_lens shorter than the sequence is not supported")
    # the outer iterator's body: one batch item of every input, the Scan-9 iterator inside
    params = []
    for v in values:
        ps = v.partial_shape
        params.append(Parameter([], shape=PartialShape([Dimension(1), *list(ps)[1:]]),
                                element_type=v.element_type))
    items = [Squeeze([p.output(0), _const([0], np.int64)]).output(0) for p in params]
    inner = _scan_iterator(ctx, items[:n], items[n:], [0] * m, reverse)
    descs: list = [SliceInput(i, i, 0, 1, 1, -1, 0) for i in range(len(values))]
    # outer values the ONNX body captured reach the inner iterator through the outer one
    inputs = list(values)
    for i in range(n + m, inner.get_input_size()):
        outer = inner.input_value(i)
        p = Parameter([], shape=outer.partial_shape, element_type=outer.element_type)
        inner.set_argument(i, p.output(0))
        descs.append(InvariantInput(len(inputs), len(params)))
        params.append(p)
        inputs.append(outer)
    results = [Result([Unsqueeze([o, _const([0], np.int64)]).output(0)])
               for o in inner.outputs()]
    body = Model(results, params, "scan8_batch_item")
    outs = [ConcatOutput(i, i, 0, 1, 1, -1, 0) for i in range(len(results))]
    node = TensorIterator(inputs, bodies=[body], input_descriptions=[descs],
                          output_descriptions=[outs])
    return node.outputs()
