"""Shape ops (``netpass/ops/shape_ops.py``): ShapeOf and Range, computed on the host (ShapeOf
sub-graphs: ``Program._mark_shape_of_subgraphs``)."""
from __future__ import annotations

import numpy as np

from ...ops.shape_ops import Range, ShapeOf
from ..index_forms import Form
from .base import OpKind, table


def _shape_of_shape(attrs: dict, shapes: list, values: dict) -> list[tuple]:
    return [(len(shapes[0]),)]


def _range_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    if not all(j in values for j in range(3)):
        return None
    a, b, st = (np.asarray(values[j]).reshape(-1)[0].item() for j in range(3))
    return [(max(int(np.ceil((b - a) / st)), 0),)]


def _range_form(node: object, forms: list) -> Form | None:
    """``start + delta * i`` (index forms: a Range of integers)."""
    start, _, delta = forms
    if start is None or delta is None or start.slopes or delta.slopes:
        return None
    return Form(start.base, (delta.base,))


ROWS = table(
    OpKind(ShapeOf, shape=_shape_of_shape),
    OpKind(Range, deps=(0, 1, 2), shape=_range_shape, affine=_range_form),
)
