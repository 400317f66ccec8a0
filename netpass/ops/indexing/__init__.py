"""Indexing: Gather, GatherElements, GatherND (:mod:`.gather`), ScatterUpdate,
ScatterElementsUpdate, ScatterNDUpdate (:mod:`.scatter`) and OneHot (:mod:`.one_hot`).

Gather also carries shape math (``Gather(ShapeOf(x), [0])`` picks the batch dim), so it
propagates partial values: picked dims keep their symbols.
"""
from __future__ import annotations

# Classes and factories; ``__all__`` lists the factories (``netpass.opset`` takes them).
from .gather import (  # noqa: F401
    Gather,
    Gather7,
    GatherElements,
    GatherND,
    GatherND5,
    gather,
    gather_elements,
    gather_nd,
)
from .one_hot import OneHot, OneHot16, one_hot  # noqa: F401
from .scatter import (  # noqa: F401
    ScatterElementsUpdate,
    ScatterNDUpdate,
    ScatterNDUpdate15,
    ScatterUpdate,
    scatter_elements_update,
    scatter_nd_update,
    scatter_update,
)
from .tensor_scatter import TensorScatter, tensor_scatter  # noqa: F401

__all__ = ["gather", "gather_elements", "gather_nd", "scatter_update", "scatter_elements_update",
           "scatter_nd_update", "one_hot", "tensor_scatter"]
