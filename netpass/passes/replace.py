"""Replacing a value or a node while keeping the model's output names, always.

OpenVINO's ``replace_node_update_name`` / ``replace_output_update_name`` (in
:mod:`netpass.core.graph_util`) refuse some replacements next to a Result; these helpers carry
out the rewrite anyway and keep the names, inserting a same-type Convert where no node of the
rewrite can take the name.
"""
from __future__ import annotations

from ..core.boundary import Parameter
from ..core.graph_util import copy_runtime_info, replace_output_update_name
from ..core.node import Node, Output, as_output
from ..errors import NetpassError
from ..ops.elementwise import Convert


def replace_output_keep_names(output: Output, replacement: Output | Node) -> Output:
    """Replace ``output`` by ``replacement`` and keep the model's output names; always succeeds.

    Where ``output`` feeds a Result, the value the Result reads must be produced by a node
    named like ``output``'s producer (OpenVINO's naming of model outputs). The replacement's
    node takes that name when it can (as :func:`replace_output_update_name` does); when it
    cannot (a Parameter, a node with several outputs, a node already feeding a Result), a
    Convert to the same element type is inserted after the replacement to carry the name.
    rt_info moves as in :func:`replace_output_update_name`. Returns the output that the
    consumers read now (the replacement, or the inserted Convert).
    """
    replacement = as_output(replacement)
    if replace_output_update_name(output, replacement):
        return replacement
    keeper = Convert([replacement], destination_type=replacement.element_type)
    keeper.friendly_name = output.node.friendly_name
    copy_runtime_info(output.node, keeper)
    output.replace(keeper.output(0))
    return keeper.output(0)


def replace_node_keep_names(target: Node, replacement: Node) -> Node:
    """``replace_node`` that always succeeds and keeps names: each output of ``target`` is
    replaced with :func:`replace_output_keep_names`, and the replacement takes the target's
    friendly name and rt_info (unless it is a Parameter). Use it where
    :func:`replace_node_update_name` refuses and the rewrite must happen anyway."""
    n = target.get_output_size()
    if replacement.get_output_size() != n:
        raise NetpassError(
            f"replace_node_keep_names: {target.type_name} '{target.friendly_name}' has {n} "
            f"outputs, replacement {replacement.type_name} has {replacement.get_output_size()}")
    for i in range(n):
        replace_output_keep_names(target.output(i), replacement.output(i))
    if not isinstance(replacement, Parameter):
        replacement.friendly_name = target.friendly_name
        copy_runtime_info(target, replacement)
    return replacement


__all__ = ["replace_output_keep_names", "replace_node_keep_names"]
