"""Pass framework: ModelPass, MatcherPass, GraphRewrite, Manager and PassConfig.

``Serialize`` and ``VisualizeTree`` are importable from here too; they load on first use.
See docs/passes.md.
"""
from __future__ import annotations

from typing import Any

from .base import ModelPass, PassBase
from .graph_rewrite import BackwardGraphRewrite, GraphRewrite, MatcherPass
from .manager import Manager, Validate
from .pass_config import PassConfig

_LAZY = {"Serialize": ".serialize", "VisualizeTree": ".visualize"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Manager", "PassConfig", "PassBase", "ModelPass", "MatcherPass", "GraphRewrite",
           "BackwardGraphRewrite", "Validate", "Serialize", "VisualizeTree"]
