"""What GNA hardware accepts, and the PassConfig callbacks that keep transpose sinking from
creating Concat/Split axes it does not (``gna_limitations.cpp``).

GNA concatenates and splits flat memory, so a Concat or Split is supported only along the
first dimension that is not 1 (``first_valuable``).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import compress, repeat
from math import prod

from ...core.boundary import Constant, Parameter, Result
from ...core.node import Node, Output
from ...ops.indexing import Gather
from ...ops.movement import Reshape, Squeeze, Transpose, Unsqueeze
from ...passes import PassConfig
from ..transpose_sinking import attr
from ..transpose_sinking import concat_split as ts
from ..transpose_sinking.utils import consumer_transposes_order, first_transpose_input
from ..utils import (
    const_value,
    first_valuable,
    graph_consumers,
    reverse_order,
    static_shape,
    transpose_shape,
)

NO_OF_INPUTS_DIVISOR = 8
TRANSPOSE_MAX_SIZE = 65528


def is_transpose_supported(shape: Sequence[int]) -> bool:
    """GNA runs a Transpose that, with all 1s squeezed out, is a 2-D transpose with one side
    <= 8 and the other a multiple of 8 up to 65528 (or moves at most one real dimension)."""
    sq = [int(d) for d in shape if d != 1]
    if len(sq) <= 1:
        return True
    return (len(sq) == 2 and min(sq) <= NO_OF_INPUTS_DIVISOR
            and max(sq) % NO_OF_INPUTS_DIVISOR == 0 and max(sq) <= TRANSPOSE_MAX_SIZE)


def is_transpose_node_supported(node: Node) -> bool:
    shape = static_shape(node.input_value(0))
    return shape is not None and is_transpose_supported(shape)


def _norm(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _worsens(current_shape, current_axis, new_shape, new_axis) -> bool:
    """GNA concatenates/splits flat memory: only along the first non-1 dim. A rewrite is
    refused when it turns a supported Concat/Split into an unsupported one (one that is
    unsupported either way does not get worse, and the Transposes may still move on)."""
    return first_valuable(current_shape) == current_axis and first_valuable(new_shape) != new_axis


def concat_forward_refused(concat: Node) -> bool:
    info = first_transpose_input(concat)
    out = static_shape(concat.output(0))
    if info is None or out is None:
        return False
    axis = _norm(concat.axis, len(out))
    if not _worsens(out, axis, transpose_shape(out, reverse_order(info.order)), info.order[axis]):
        return False
    for v in concat.input_values():  # these stay: keep backward sinking from undoing them
        if isinstance(v.node, Transpose):
            attr.mark_as_no_sinking(v.node)
    return True


def concat_backward_refused(concat: Node) -> bool:
    """(OpenVINO compares the new axis with ``order[axis]``; netpass checks the axis the rewrite
    actually creates, ``reverse(order)[axis]``.)"""
    order = consumer_transposes_order(concat)
    out = static_shape(concat.output(0))
    if order is None or out is None:
        return False
    axis = _norm(concat.axis, len(out))
    return _worsens(out, axis, transpose_shape(out, order), reverse_order(order)[axis])


def _split_axis(split: Node) -> int | None:
    return ts._split_axis(split)


def split_forward_refused(split: Node) -> bool:
    info = first_transpose_input(split, [0])
    shape, axis = static_shape(split.input_value(0)), _split_axis(split)
    if info is None or shape is None or axis is None:
        return False
    if not _worsens(shape, axis, transpose_shape(shape, reverse_order(info.order)),
                    info.order[axis]):
        return False
    attr.mark_as_no_sinking(info.transpose)
    return True


def split_backward_refused(split: Node) -> bool:
    order = consumer_transposes_order(split)
    shape, axis = static_shape(split.input_value(0)), _split_axis(split)
    if order is None or shape is None or axis is None:
        return False
    return _worsens(shape, axis, transpose_shape(shape, order), reverse_order(order)[axis])


GNA_CALLBACKS: dict[type, Callable[[Node], bool]] = {
    ts.TSConcatForward: concat_forward_refused,
    ts.TSConcatBackward: concat_backward_refused,
    ts.TSSplitForward: split_forward_refused,
    ts.TSSplitBackward: split_backward_refused,
}


def either(first: Callable[[Node], bool], second: Callable[[Node], bool]) -> Callable[[Node], bool]:
    """A callback refusing what ``first`` refuses, else what ``second`` refuses (``second``
    is not asked when ``first`` refuses)."""
    def callback(node: Node) -> bool:
        return bool(first(node)) or bool(second(node))
    return callback


def install_gna_callbacks(pass_config: PassConfig) -> None:
    """Add the GNA axis rules to the callbacks of the common TS Concat/Split passes in
    ``pass_config``: the callback already there (a per-pass one, else the global one) is asked
    first, and the GNA rule only when it lets the rewrite happen."""
    for pass_type, rule in GNA_CALLBACKS.items():
        pass_config.set_callback(either(pass_config.get_callback(pass_type), rule), pass_type)


def gna_pass_config(user: PassConfig) -> PassConfig:
    """A new PassConfig for the GNA pipeline's passes: ``user``'s disabled passes and callbacks,
    with the GNA axis rules after the user's callbacks. ``user`` is not changed."""
    config = user.copy()
    install_gna_callbacks(config)
    return config


def const_order(node: Node) -> list[int] | None:
    v = const_value(node.input_value(1)) if isinstance(node, Transpose) else None
    return None if v is None else [int(a) for a in v.reshape(-1)]


_RESHAPES = (Reshape, Squeeze, Unsqueeze)


def cut_at_edge(node: Node) -> bool:
    """A layout op ``split_pre_post_processing`` cuts out of a model edge: a Gather of constant
    indices and axis, or a Transpose of a constant order GNA cannot run, with static shapes and
    as many elements out as in."""
    if not isinstance(node, (Transpose, Gather)):
        return False
    src, out = static_shape(node.input_value(0)), static_shape(node.output(0))
    if src is None or out is None or prod(src) != prod(out):
        return False
    if isinstance(node, Transpose):
        return isinstance(node.input_value(1).node, Constant) and not is_transpose_supported(src)
    return all(isinstance(node.input_value(i).node, Constant) for i in (1, 2))


def _edge_chain(node: Node) -> bool:
    # (the cut takes edge ops one after another: an op behind another one it cuts is at the
    # edge too)
    return isinstance(node, _RESHAPES) or cut_at_edge(node)


def _reshaped_parameter(value: Output) -> bool:
    while isinstance(value.node, _RESHAPES):
        value = value.node.input_value(0)
    return isinstance(value.node, Parameter)


def reads_parameter(node: Node) -> bool:
    """The node's input 0 is a Parameter, possibly behind Reshapes and, between those and the
    node, single-consumer Reshapes and layout ops the cut takes too (what
    ``split_pre_post_processing`` can cut: from an input read by other ops too, into an input
    of the main model of its own)."""
    src = node.input_value(0)
    # (graph_consumers: a node a rewrite replaced may still be listed among the readers)
    while not _reshaped_parameter(src):
        if len(graph_consumers(src)) != 1 or not _edge_chain(src.node):
            return False
        src = src.node.input_value(0)
    return True


def _reaches_result(node: Node) -> bool:
    # (graph_consumers: a replaced node kept alive is no reader keeping ``node`` inside; the
    # readers may branch to several outputs, each cut into a post-processing model of its own)
    cons = graph_consumers(node.output(0))
    return bool(cons) and all(isinstance(c.node, Result) or _edge_chain(c.node)
                              and _reaches_result(c.node) for c in cons)


def at_model_edge(node: Node) -> bool:
    """The node reads a Parameter, possibly through single-consumer Reshape/Squeeze/Unsqueeze
    nodes and layout ops the cut takes too, or feeds only Results through such ops, branching
    to several outputs too (so pre/post-processing can cut it out)."""
    return reads_parameter(node) or _reaches_result(node)


def interior_layout_ops(model) -> list[Node]:
    """Transposes GNA cannot run and Gathers that are not at the model's edges."""
    ops = model.cached_order()
    bad: list[Node] = []
    # (the Transposes and Gathers picked out at C level: this looks at every node of the model)
    for n in compress(ops, map(isinstance, ops, repeat((Transpose, Gather)))):
        if isinstance(n, Transpose) and is_transpose_node_supported(n):
            continue
        if not at_model_edge(n):
            bad.append(n)
    return bad
