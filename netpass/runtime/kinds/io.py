"""The graph boundary (``netpass/ops/io.py``; the classes are ``netpass.core.boundary``'s): a
Result is a view of the output it names. Parameters are set from the user's arrays and
Constants uploaded once per compiled model (``Network``), so they need no row."""
from __future__ import annotations

from ...core.boundary import Result
from .base import OpKind, same_shape, table
from .movement import RESHAPE_VIEW

ROWS = table(
    OpKind(Result, shape=same_shape, always_view=True, strided=RESHAPE_VIEW),
)
