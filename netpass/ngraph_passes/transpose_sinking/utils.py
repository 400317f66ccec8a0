"""Helpers of the transpose sinking passes (OpenVINO's ts_utils): finding transposed inputs,
moving a Transpose from inputs to outputs (forward) or from outputs to inputs (backward), with
OpenVINO's rules for names and for inputs of lower rank (unsqueezed to the order's rank)."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from ...core.graph_util import copy_runtime_info
from ...core.node import Node, Output
from ...core.types import Type
from ..utils import const, const_value, make, op_types, reverse_order, static_rank
from .attr import is_sinking_disabled, mark_as_no_sinking

# Ops a Transpose can be sunk forward through; a Transpose whose consumers are not all of
# these is marked so that the backward stage does not move it back up.
FORWARD_PROPAGATABLE = (
    "Convert", "Clamp", "Elu", "SoftPlus", "LogicalNot", "IsInf", "IsNaN", "IsFinite", "PRelu",
    "Pad", "BatchToSpace", "SpaceToBatch", "ReverseSequence", "Gather", "Interpolate", "Slice",
    "Split", "VariadicSplit", "Squeeze", "Unsqueeze", "Transpose", "FakeQuantize",
    "Concat")
FORWARD_FAMILIES = ("UnaryElementwiseArithmetic", "BinaryElementwiseArithmetic",
                    "BinaryElementwiseComparison", "BinaryElementwiseLogical",
                    "ArithmeticReductionKeepDims", "LogicalReductionKeepDims")


@dataclass
class TransposeInput:
    """A Transpose feeding input ``index`` of a node, with its constant order."""

    transpose: Node
    order: list[int]
    order_type: Type
    index: int

    @property
    def order_value(self) -> Output:
        """The Transpose's order Constant (shared by the Transposes a forward step inserts)."""
        return self.transpose.input_value(1)


def transpose_order(node: Node) -> list[int] | None:
    """The order of a Transpose with a constant order, else None."""
    if node.type_name != "Transpose":
        return None
    v = const_value(node._inputs[1])
    return None if v is None else [int(a) for a in v.reshape(-1).tolist()]


def is_const_transpose(node: Node) -> bool:
    """A Transpose whose order is a Constant (what ``transpose_order`` accepts)."""
    return node.type_name == "Transpose" and node._inputs[1].node.type_name == "Constant"


def first_transpose_input(node: Node, indices: Iterable[int] | None = None) -> TransposeInput | None:
    ins = node._inputs
    for i in (range(len(ins)) if indices is None else indices):
        src = ins[i].node
        if is_const_transpose(src):
            order_value = src._inputs[1]
            return TransposeInput(src, transpose_order(src), order_value.element_type, i)
    return None


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


@functools.lru_cache(maxsize=None)
def _forward_families() -> tuple[type, ...]:
    return op_types(*FORWARD_FAMILIES)


def _is_forward_propagatable(node: Node) -> bool:
    return node.type_name in FORWARD_PROPAGATABLE or isinstance(node, _forward_families())


def update_forward_sinking_ability(transpose: Node) -> None:
    """Mark ``transpose`` when a consumer is an op forward sinking cannot pass."""
    if not all(_is_forward_propagatable(c.node) for c in transpose.output(0).consumers()):
        mark_as_no_sinking(transpose)


def _transposed(value: Output, order: list[int], order_type: Type, rt_source: Node) -> Output:
    """``Transpose(value, order)`` after unsqueezing ``value`` to the order's rank; a Constant is
    transposed at once. New nodes take ``rt_source``'s rt_info."""
    rank, want = static_rank(value), len(order)
    v = const_value(value)
    if v is not None:
        return const(np.transpose(v.reshape((1,) * (want - v.ndim) + v.shape), order), value.element_type)
    new = []
    if rank < want:
        new.append(make("Unsqueeze", [value, const(np.arange(want - rank, dtype=np.int64))]))
        value = new[-1].output(0)
    new.append(make("Transpose", [value, const(np.array(order), order_type)]))
    copy_runtime_info(rt_source, new)
    return new[-1].output(0)


def update_input_transposes(main: Node, info: TransposeInput, indices: Iterable[int] | None = None) -> list[Node]:
    """Forward: bypass the transposed input(s) and put ``Transpose(reverse(order))`` on the
    other inputs; returns the new Transposes (to be registered)."""
    rev = reverse_order(info.order)
    new = []
    for i in (range(main.get_input_size()) if indices is None else indices):
        src = main.input_value(i)
        if src.node is info.transpose or transpose_order(src.node) == info.order:
            # The same order on another input: bypass it too (what inverse + fuse would give).
            main.input(i).replace_source_output(src.node.input_value(0))
            continue
        t = _transposed(src, rev, info.order_type, main)
        main.input(i).replace_source_output(t)
        if t.node.type_name == "Transpose":
            new.append(t.node)
    return new


def insert_output_transposes(main: Node, order: list[int], order_type: Type,
                             order_value: Output | None = None) -> list[Node]:
    """Forward: ``Transpose(order)`` after every used output of ``main`` (order Constant
    ``order_value`` when given); the Transpose takes the output's tensor names and (single
    output) ``main``'s friendly name, else ``<main>.<i>``."""
    new = []
    multi = main.get_output_size() > 1
    order_value = order_value if order_value is not None else const(np.array(order), order_type)
    for out in main.outputs():
        if not out.consumers():
            continue
        t = make("Transpose", [out, order_value])
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
                 indices: Iterable[int] | None = None) -> list[Node]:
    """The usual forward step: bypass/transposes on inputs, re-infer ``main``, Transposes on its
    outputs (``out_order``, default the input order)."""
    order_value = info.order_value if out_order is None else None
    new = update_input_transposes(main, info, indices)
    main.validate_and_infer_types()
    return new + insert_output_transposes(main, info.order if out_order is None else out_order,
                                          info.order_type, order_value)


# -- backward ---------------------------------------------------------------------------------
def consumer_transposes_order(node: Node) -> list[int] | None:
    """The common order when every consumer of every output is an unmarked Transpose with the
    same constant order (OpenVINO's CheckTransposeConsumers), else None."""
    order = None
    for out in node.outputs():
        cons = out.consumers()
        if not cons:
            return None
        for c in cons:
            o = transpose_order(c.node)
            if o is None or c.index != 0 or is_sinking_disabled(c.node) or (order is not None and o != order):
                return None
            order = o
    return order


def consumers_are_sinkable(out: Output) -> bool:
    return consumer_transposes_order(out.node) is not None


def insert_transposes_before(main: Node, order: list[int], order_type: Type,
                             indices: Iterable[int] | None = None) -> list[Node]:
    """Backward: ``Transpose(order)`` on the given inputs of ``main`` (unsqueezed to rank)."""
    new = []
    for i in (range(main.get_input_size()) if indices is None else indices):
        t = _transposed(main.input_value(i), order, order_type, main)
        main.input(i).replace_source_output(t)
        if t.node.type_name == "Transpose":
            new.append(t.node)
    return new


def remove_transpose_consumers(main: Node) -> None:
    """Backward: bypass every consumer Transpose of ``main``; ``main`` takes the friendly name of
    the one feeding a Result (else of the first) when it has a single output."""
    name = None
    for out in main.outputs():
        for c in out.consumers():
            t = c.node
            feeds_result = any(x.node.type_name == "Result" for x in t.output(0).consumers())
            if name is None or feeds_result:
                name = t.friendly_name
            t.output(0).replace(out)
    if name is not None and main.get_output_size() == 1:
        main.friendly_name = name


def sink_backward(main: Node, order: list[int], order_type: Type,
                  indices: Iterable[int] | None = None) -> list[Node]:
    new = insert_transposes_before(main, order, order_type, indices)
    main.validate_and_infer_types()
    remove_transpose_consumers(main)
    return new


def order_type_of_consumers(main: Node) -> Type:
    return main.output(0).consumers()[0].node.input_value(1).element_type


def axes_after_reduction(axes: Sequence[int], order: Sequence[int]) -> list[int]:
    """Forward, keep_dims false: the order of the reduced tensor (reduced positions dropped)."""
    gone = {order[a] for a in axes}
    kept = [order[i] for i in range(len(order)) if i not in set(axes)]
    return [k - sum(1 for g in gone if g < k) for k in kept]


def order_before_reduction(axes: Sequence[int], order: Sequence[int], rank: int) -> list[int]:
    """Backward, keep_dims false: the order for the input (rank ``rank``) such that reducing the
    last ``len(axes)`` axes of the transposed input equals transposing the reduced tensor."""
    kept = [i for i in range(rank) if i not in set(axes)]
    return [kept[o] for o in order] + sorted(axes)
