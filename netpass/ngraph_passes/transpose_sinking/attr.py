"""The ``no_transpose_sinking`` mark: a non-copyable rt_info attribute on a Transpose that the
backward sinking must leave where it is (forward sinking brought it there, or a target
callback refused to move it further)."""
from __future__ import annotations

from ...core.node import Node
from ...core.rt_info import NonCopyable

NO_SINKING = "no_transpose_sinking"


def mark_as_no_sinking(node: Node) -> None:
    node.rt_info[NO_SINKING] = NonCopyable(NO_SINKING)


def is_sinking_disabled(node: Node) -> bool:
    return NO_SINKING in node.rt_info


def reset_no_sinking(node: Node) -> None:
    node.rt_info.pop(NO_SINKING, None)
