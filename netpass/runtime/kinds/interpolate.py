"""Interpolate (``netpass/ops/interpolate``), all its versions: run on the host; their sizes,
scales and axes inputs decide the output shape."""
from __future__ import annotations

from ...ops.interpolate import Interpolate, Interpolate1, Interpolate4
from .base import OpKind, table

ROWS = table(
    OpKind(Interpolate, deps=(1, 2, 3)),
    OpKind(Interpolate4, deps=(1, 2, 3)),
    OpKind(Interpolate1, deps=(1,)),
)
