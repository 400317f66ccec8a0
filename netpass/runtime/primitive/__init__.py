"""Primitives of an infer request: :class:`PrimitiveInst` and its steps (one module each)."""
from __future__ import annotations

from .inst import PrimitiveInst, primitive_error

__all__ = ["PrimitiveInst", "primitive_error"]
