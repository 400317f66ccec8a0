"""Interpolate (``netpass/ops/interpolate``): runs on the host; its sizes, scales and axes
inputs decide its output shape."""
from __future__ import annotations

from ...ops.interpolate import Interpolate
from .base import OpKind, table

ROWS = table(
    OpKind(Interpolate, deps=(1, 2, 3)),
)
