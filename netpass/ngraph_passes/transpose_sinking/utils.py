"""Helpers of the transpose sinking passes (OpenVINO's ts_utils): finding transposed inputs,
moving a Transpose from inputs to outputs (forward) or from outputs to inputs (backward), with
OpenVINO's rules for names and for inputs of lower rank (unsqueezed to the order's rank)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ...core.boundary import Constant, Result
from ...core.graph_util import copy_runtime_info
from ...core.node import Node, Output
from ...core.shape import PartialShape
from ...core.types import Type
from ...ops.base import BinaryElementwiseArithmetic, UnaryElementwiseArithmetic
from ...ops.elementwise import Clamp, Convert, Elu, LogicalNot, PRelu, SoftPlus
from ...ops.movement import Concat, Split, Transpose, Unsqueeze
from ..utils import (
    const,
    const_value,
    in_graph,
    make,
    reverse_order,
    static_rank,
    static_shape,
)
from .attr import NO_SINKING, mark_as_no_sinking

# Consumers that do not make forward sinking mark a Transpose (OpenVINO 2023's
# CanPropagateForwardThrough, the transformations the GNA plugin was built with): a Transpose
# whose consumers are not all of these is marked so that the backward stage leaves it.
FORWARD_PROPAGATABLE: tuple[type[Node], ...] = (
    Clamp, Elu, SoftPlus, LogicalNot, Convert, Concat, Split, Transpose, PRelu,
    UnaryElementwiseArithmetic, BinaryElementwiseArithmetic)


@dataclass
class TransposeInput:
    """A Transpose feeding input ``index`` of a node, with its constant order. ``cancel``: a
    TSFuse that cancels every pair runs next in the same traversal (``update_input_transposes``
    then cancels the pairs itself)."""

    transpose: Node
    order: list[int]
    order_type: Type
    index: int
    cancel: bool = False

    @property
    def order_value(self) -> Output:
        """The Transpose's order Constant (shared by the Transposes a forward step inserts)."""
        return self.transpose.input_value(1)


def transpose_order(node: Node) -> list[int] | None:
    """The order of a Transpose with a constant order, else None."""
    if not isinstance(node, Transpose):
        return None
    v = const_value(node._inputs[1])
    if v is None:
        return None
    flat = v.reshape(-1).tolist()  # Python ints already for an integer order
    return flat if v.dtype.kind in "iu" else [int(a) for a in flat]


def is_const_transpose(node: Node) -> bool:
    """A Transpose whose order is a Constant (what ``transpose_order`` accepts)."""
    return isinstance(node, Transpose) and isinstance(node._inputs[1].node, Constant)


def first_transpose_input(node: Node,
                          indices: Iterable[int] | None = None) -> TransposeInput | None:
    """The input of ``indices`` fed by a Transpose with a constant order that a forward step
    sinks: the first, unless another input's Transpose has another order. Then the one whose
    step leaves the fewest Transposes of real axes on the other inputs (``_left_behind``):
    taking the first, ``Unsqueeze(ReduceMean(x)) + T(x)`` with the reduction's Transpose in an
    order of its own (or an identity) put the inverse of that order on ``T(x)``, which stayed
    above the op while the other one walked to the output."""
    ins = node._inputs
    positions = range(len(ins)) if indices is None else indices
    first: TransposeInput | None = None
    orders: dict[tuple[int, ...], TransposeInput] = {}
    for i in positions:
        src = ins[i].node
        if not is_const_transpose(src):
            continue
        if first is None:
            first = TransposeInput(src, transpose_order(src), src._inputs[1].element_type, i)
            orders[tuple(first.order)] = first
        elif src._inputs[1].node is not first.transpose._inputs[1].node:  # (shared: same order)
            order = transpose_order(src)
            if tuple(order) not in orders:
                orders[tuple(order)] = TransposeInput(src, order, src._inputs[1].element_type, i)
    if len(orders) < 2:
        return first
    rank = max_input_rank(node, positions)
    if rank is None:
        return first
    return min(orders.values(), key=lambda info: (
        _left_behind(node, info.order, rank, positions), _is_identity(info.order), info.index))


def _is_identity(order: Sequence[int]) -> bool:
    return all(a == k for k, a in enumerate(order))


def _moves_real_axes(shape: Sequence[int] | None, order: Sequence[int]) -> bool:
    """``Transpose(order)`` of a value of ``shape`` (None: dynamic) is no reshape: it changes
    the relative order of two axes larger than 1."""
    if shape is None:
        return True
    real = [a for a in order if shape[a] != 1]
    return any(x > y for x, y in zip(real, real[1:]))


def _left_behind(node: Node, order: list[int], rank: int, positions: Iterable[int]) -> int:
    """How many inputs of ``positions`` that are not Constants a forward step of ``order``
    leaves transposed in a way that moves real axes (what a Transpose already there composes
    with the inverse the step puts on top of it, on values unsqueezed to ``rank``)."""
    rev = reverse_order(align_order(order, rank))
    count = 0
    for i in positions:
        src = node._inputs[i]
        if isinstance(src.node, Constant):
            continue
        below = transpose_order(src.node)
        value = src.node._inputs[0] if below is not None else src
        dims = static_shape(value)
        shape = None if dims is None else [1] * (rank - len(dims)) + list(dims)
        composed = rev if below is None else [align_order(below, rank)[r] for r in rev]
        count += _moves_real_axes(shape, composed)
    return count


def has_transpose_input(indices: Sequence[int] | None = None):
    """Pattern predicate: the node has a Transpose with a constant order on one of ``indices``
    (checked without building the TransposeInput: it runs on every candidate node)."""
    def check(out: Output) -> bool:
        ins = out.node._inputs
        for i in (range(len(ins)) if indices is None else indices):
            if is_const_transpose(ins[i].node):
                return True
        return False
    return check


def update_forward_sinking_ability(transpose: Node) -> None:
    """Mark ``transpose`` when a consumer is an op forward sinking cannot pass."""
    # (the consumer table read directly: this runs for every Transpose a forward step makes)
    for ref in transpose._outs[0].cons.values():
        c = ref()
        if c is not None and not isinstance(c, FORWARD_PROPAGATABLE) and in_graph(c):
            mark_as_no_sinking(transpose)
            return


def align_order(order: Sequence[int], rank: int) -> list[int]:
    """``order`` for a tensor of a higher ``rank`` (leading axes stay in place; OpenVINO's
    AlignTransposeOrder)."""
    d = rank - len(order)
    return list(order) if d <= 0 else list(range(d)) + [o + d for o in order]


def max_input_rank(main: Node, indices: Iterable[int] | None = None) -> int | None:
    """The largest static rank of ``main``'s inputs (None when one is dynamic)."""
    ins = main._inputs
    top = 0
    for i in (range(len(ins)) if indices is None else indices):
        src = ins[i]
        dims = src.node._outs[src.index].ps._dims
        if dims is None:
            return None
        top = max(top, len(dims))
    return top


def _unsqueeze_axes(rank: int, want: int, per_channel: bool) -> list[int]:
    """Axes that make a rank-``rank`` value rank ``want``: leading ones (numpy broadcasting), or
    for a per-channel 1-D PRelu slope every axis but 1."""
    n = want - rank
    return [0] + list(range(2, n + 1)) if per_channel else list(range(n))


class MatchedOrder(list):
    """The order of the Transposes a backward step removes, with the order Constant of the
    matched one (``value``): the Transposes the step puts on the inputs reuse it, as a forward
    step's output Transposes reuse the input's (a new Constant per step was ~5% of a step).
    An order computed from it (reversed, reduced) is a plain list and gets its own Constant."""

    __slots__ = ("value",)

    def __init__(self, order: list[int], value: Output) -> None:
        super().__init__(order)
        self.value = value


class _SharedOrder:
    """One order Constant for the Transposes a step puts on several inputs, made on first
    use (a step on a Concat of eight inputs made eight equal Constants)."""

    __slots__ = ("order", "order_type", "value")

    def __init__(self, order: list[int], order_type: Type) -> None:
        self.order, self.order_type = order, order_type
        self.value: Output | None = None
        if type(order) is MatchedOrder and order.value.element_type is order_type:
            self.value = order.value

    def get(self) -> Output:
        if self.value is None:
            self.value = const(np.array(self.order), self.order_type)
        return self.value


def _transposed(value: Output, order: list[int], order_type: Type, rt_source: Node,
                rank: int | None = None, per_channel: bool = False,
                shared: _SharedOrder | None = None) -> Output:
    """``Transpose(value, order)`` after unsqueezing ``value`` to ``rank`` (default: the order's
    length); a Constant is transposed at once. New nodes take ``rt_source``'s rt_info; the
    order Constant is ``shared``'s when given."""
    want = len(order) if rank is None else rank
    have = static_rank(value)
    axes = _unsqueeze_axes(have, want, per_channel) if have < want else []
    v = const_value(value)
    if v is not None:
        return const(np.transpose(np.expand_dims(v, axes) if axes else v, order),
                     value.element_type)
    new: list[Node] = []
    if axes:
        new.append(make(Unsqueeze, [value, const(np.array(axes, np.int64))]))
        value = new[-1].output(0)
    order_value = shared.get() if shared is not None else const(np.array(order), order_type)
    new.append(Transpose.of(value, order_value, order))
    copy_runtime_info(rt_source, new)
    return new[-1].output(0)


def update_input_transposes(main: Node, info: TransposeInput,
                            indices: Iterable[int] | None = None) -> list[Node]:
    """Forward: bypass the transposed input and put ``Transpose(reverse(order))`` on the other
    inputs, unsqueezed to the largest input rank (the order aligned to it); returns the new
    Transposes (to be registered)."""
    indices = list(range(main.get_input_size()) if indices is None else indices)
    rank = max_input_rank(main)
    rev = reverse_order(align_order(info.order, rank))
    shared = _SharedOrder(rev, info.order_type)
    new: list[Node] = []
    for i in indices:
        src = main.input_value(i)
        if i == info.index:
            main.input(i).replace_source_output(src.node.input_value(0))
            continue
        if info.cancel and _cancels(src, rev, main, indices):
            # What TSFuse does to Transpose(src, rev) next: the pair is the identity, so
            # ``main`` reads src's input, which takes the new Transpose's rt_info (``main``'s).
            x = src.node.input_value(0)
            main.input(i).replace_source_output(x)
            copy_runtime_info([x.node, main], x.node)
            continue
        t = _transposed(src, rev, info.order_type, main, rank, shared=shared)
        main.input(i).replace_source_output(t)
        if isinstance(t.node, Transpose):
            new.append(t.node)
    return new


def _cancels(value: Output, rev: list[int], main: Node, indices: list[int]) -> bool:
    """``Transpose(value, rev)`` on an input of ``main`` would be the second of a Transpose pair
    that TSFuse removes: ``value`` is a Transpose whose order ``rev`` undoes, feeding only
    inputs ``indices`` of ``main`` (so that TSFuse finds nothing but such pairs after it)."""
    node = value.node
    order = transpose_order(node)
    if order is None or len(order) != len(rev) or any(order[r] != k for k, r in enumerate(rev)):
        return False
    # (the consumer table read directly: graph_consumers built a list of Inputs per input)
    for (_, index), ref in node._outs[0].cons.items():
        c = ref()
        if c is None or (c is main and index in indices):
            continue
        if in_graph(c):
            return False
    return True


def _used(table: dict) -> bool:
    """Whether a consumer table lists a consumer in the graph (read directly, in a plain loop:
    graph_consumers built a list, and a generator cost as much, per output of every step)."""
    for ref in table.values():
        c = ref()
        if c is not None and in_graph(c):
            return True
    return False


def insert_output_transposes(main: Node, order: list[int], order_type: Type,
                             order_value: Output | None = None,
                             below: list[PartialShape] | None = None) -> list[Node]:
    """Forward: ``Transpose(order)`` (aligned to each output's rank) after every used output of
    ``main`` (order Constant ``order_value`` when given and of the right length); the Transpose
    takes the output's tensor names and (single output) ``main``'s friendly name, else
    ``<main>.<i>``. ``below``: the output shapes ``main`` had before the step permuted them by
    ``order``'s inverse, which the Transposes restore (their shapes, taken as they are)."""
    new: list[Node] = []
    outs = main._outs
    multi = len(outs) > 1
    for index, port in enumerate(outs):
        if not _used(port.cons):
            continue
        out = Output(main, index)
        dims = port.ps._dims
        aligned = align_order(order, len(dims)) if dims is not None else list(order)
        value = order_value if order_value is not None and len(aligned) == len(order) else \
            const(np.array(aligned), order_type)
        t = Transpose.of(out, value, aligned, below[index] if below is not None else None)
        out.replace(t.output(0))
        names = main._outs[out.index].names
        if names:
            names.clear()
        if multi:
            t.friendly_name = f"{main.friendly_name}.{out.index}"
        else:
            main_name = main.friendly_name
            main.friendly_name = t.name
            t.friendly_name = main_name
        copy_runtime_info(main, t)
        update_forward_sinking_ability(t)
        new.append(t)
    return new


def sink_forward(main: Node, info: TransposeInput, out_order: list[int] | None = None,
                 indices: Iterable[int] | None = None, permutes: bool = False) -> list[Node]:
    """The usual forward step: bypass/transposes on inputs, re-infer ``main``, Transposes on its
    outputs (``out_order``, default the input order). ``permutes``: ``main``'s inference
    commutes with permuting the axes of all its inputs (elementwise ops, a Concat or Split
    whose axis the step renumbered, a Pad whose pads it permuted), so its new output shapes are
    its old ones permuted."""
    order_value = info.order_value if out_order is None else None
    new = update_input_transposes(main, info, indices)
    below = None
    if permutes and out_order is None:
        below = [port.ps for port in main._outs]
        if not _permute_outputs(main, info.order):
            below = None
    if below is None:
        main.validate_and_infer_types()
    return new + insert_output_transposes(main, info.order if out_order is None else out_order,
                                          info.order_type, order_value, below)


def _permute_outputs(main: Node, order: list[int]) -> bool:
    """Re-infer ``main`` after a forward step moved ``Transpose(order)`` from its inputs to its
    outputs, by permuting its output dims (what the Transposes put below undo). False (nothing
    done) for an output of dynamic rank, of a rank below the order's, or with known elements
    (inference computes those). Inference of the moved op was ~15% of forward sinking."""
    outs = main._outs
    shapes = []
    rev: list[int] = []
    for port in outs:
        dims = port.ps._dims
        if dims is None or len(dims) < len(order) or port.val is not None \
                or port.pval is not None:
            return False
        if len(rev) != len(dims):  # (the outputs of a Split share one rank)
            rev = reverse_order(align_order(order, len(dims)))
        shapes.append(PartialShape.of_dims(tuple([dims[r] for r in rev])))
    main.set_inferred_shapes(shapes)
    return True


# -- backward ---------------------------------------------------------------------------------
def _common_consumer_order(node: Node, unmarked: bool) -> list[int] | None:
    """The common constant order of the consumers of every output of ``node`` when each is a
    Transpose on its data input (and, with ``unmarked``, carries no NO_SINKING mark), else
    None. One pass over the consumer tables, as ``graph_consumers`` filters them: TSFuse's
    pattern and the backward sinking passes ask this of every Transpose they visit."""
    order = None
    for port in node._outs:
        for (_, index), ref in port.cons.items():
            c = ref()
            if c is None or not in_graph(c):
                continue
            o = transpose_order(c)
            if o is None or index != 0 or (order is not None and o != order) \
                    or unmarked and NO_SINKING in (c._rt or ()):
                return None
            order = o
    return order


def same_order_transpose_consumers(node: Node) -> list[int] | None:
    """The common order when every consumer of every output of ``node`` is a Transpose (on its
    data input) with the same constant order, else None (OpenVINO's
    HasSameOutputTransposeNodes)."""
    return _common_consumer_order(node, False)


def consumer_transposes_order(node: Node) -> list[int] | None:
    """The common order when every consumer of every output is an unmarked Transpose with the
    same constant order (OpenVINO's CheckTransposeConsumers), else None."""
    return _common_consumer_order(node, True)


def insert_transposes_before(main: Node, order: list[int], order_type: Type,
                             indices: Iterable[int] | None = None,
                             per_channel: bool = False) -> list[Node]:
    """Backward: ``Transpose(order)`` on the given inputs of ``main``, each unsqueezed to the
    largest rank among them (``per_channel``: a PRelu slope, unsqueezed around axis 1)."""
    indices = list(range(main.get_input_size()) if indices is None else indices)
    rank = max_input_rank(main, indices)
    shared = _SharedOrder(order, order_type)
    new: list[Node] = []
    for i in indices:
        t = _transposed(main.input_value(i), order, order_type, main, rank, per_channel, shared)
        main.input(i).replace_source_output(t)
        if isinstance(t.node, Transpose):
            new.append(t.node)
    return new


def remove_transpose_consumers(main: Node) -> None:
    """Backward: bypass every consumer Transpose of ``main``, which takes the friendly name of
    the one feeding a Result (else of the first one of output 0)."""
    name = None
    feeding_result = None
    for index, port in enumerate(main._outs):
        # (the consumer tables read directly: this runs once per backward step)
        transposes = [t for t in (ref() for ref in port.cons.values())
                      if t is not None and in_graph(t)]
        if not transposes:
            continue
        out = Output(main, index)
        for t in transposes:
            t_out = Output(t, 0)
            if any(isinstance(ref(), Result) for ref in t._outs[0].cons.values()):
                feeding_result = t.friendly_name
            elif name is None and index == 0:
                name = t.friendly_name
            t_out.replace(out)
    name = feeding_result or name
    if name is not None:
        main.friendly_name = name


def sink_backward(main: Node, order: list[int], order_type: Type,
                  indices: Iterable[int] | None = None, per_channel: bool = False) -> list[Node]:
    new = insert_transposes_before(main, order, order_type, indices, per_channel)
    main.validate_and_infer_types()
    remove_transpose_consumers(main)
    return new


def order_after_reduction(axes: Sequence[int], order: Sequence[int]) -> list[int]:
    """The order of a tensor whose ``axes`` (positions of the transposed tensor) are removed:
    the kept positions, renumbered (OpenVINO's GetOrderAfterReduction)."""
    gone = sorted(order[a] for a in axes)
    return [order[i] - sum(1 for g in gone if g < order[i])
            for i in range(len(order)) if i not in set(axes)]


def order_before_reduction(axes: Sequence[int], order: Sequence[int]) -> list[int]:
    """The order for a tensor with ``axes`` inserted (OpenVINO's GetOrderBeforeReduction): the
    inserted axes stay in place and the others map as ``order`` does."""
    size = len(order) + len(axes)
    kept = [i for i in range(size) if i not in set(axes)]
    it = iter(order)
    return [i if i in set(axes) else kept[next(it)] for i in range(size)]
