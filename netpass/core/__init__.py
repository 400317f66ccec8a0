"""Core IR: dimensions, partial shapes, element types, nodes, models and mutation helpers."""
from __future__ import annotations

from . import types
from .changes import ChangeLog
from .dimension import Dimension, Symbol
from .graph_util import (
                         copy_runtime_info,
                         lint,
                         lint_problems,
                         replace_node,
                         replace_node_update_name,
                         replace_output_update_name,
)
from .model import Model, topological_sort
from .node import Input, Node, Output, as_output
from .rt_info import FusedNames, NonCopyable, RuntimeAttribute
from .shape import PartialShape
from .types import Type

__all__ = [
    "Dimension", "Symbol", "PartialShape", "Type", "types", "Node", "Input", "Output",
    "as_output", "Model", "topological_sort", "replace_node", "replace_output_update_name",
    "replace_node_update_name", "copy_runtime_info", "lint", "lint_problems", "FusedNames",
    "NonCopyable", "RuntimeAttribute", "ChangeLog",
]
