"""TransposeCompress: a Transpose GNA cannot run, whose order keeps runs of consecutive axes
together, becomes ``Reshape -> 2-D Transpose -> Reshape`` when that 2-D transpose is one GNA
runs (e.g. NCHW -> NHWC of ``[1, C, H, W]`` is ``[C, H*W]`` -> ``[H*W, C]``)."""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...ops.movement import Reshape, Transpose
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, make, static_shape
from .limitations import const_order, is_transpose_supported


def compress(shape: tuple[int, ...], order: list[int]) -> tuple[list[int], list[int]]:
    """Merge runs ``a, a+1, ...`` of the order into one axis: (fused input shape, fused order)."""
    groups: list[list[int]] = []
    for a in order:
        if groups and groups[-1][-1] + 1 == a:
            groups[-1].append(a)
        else:
            groups.append([a])
    by_start = sorted(groups, key=lambda g: g[0])
    fused_shape = [int(np.prod([shape[a] for a in g])) for g in by_start]
    rank_of = {g[0]: i for i, g in enumerate(by_start)}
    return fused_shape, [rank_of[g[0]] for g in groups]


def _compressible(out) -> bool:
    t = out.node
    shape, order = static_shape(t.input_value(0)), const_order(t)
    if shape is None or order is None or is_transpose_supported(shape):
        return False
    fused_shape, fused_order = compress(shape, order)
    return len(fused_order) < len(order) and is_transpose_supported(fused_shape)


class TransposeCompress(MatcherPass):
    """Unsupported Transpose -> Reshape, 2-D Transpose, Reshape."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(Transpose, predicate=_compressible)

        def callback(m: Matcher) -> bool:
            t = m.match_root
            if self.transformation_callback(t):
                return False
            shape, order = static_shape(t.input_value(0)), const_order(t)
            if shape is None or order is None:  # (ruled out by _compressible)
                return False
            fused_shape, fused_order = compress(shape, order)
            r1 = make(Reshape, [t.input_value(0), const(np.array(fused_shape, np.int32))],
                      special_zero=False)
            t2 = make(Transpose, [r1, const(np.array(fused_order, np.int8))])
            r2 = make(Reshape, [t2, const(np.array(t.output(0).shape, np.int32))],
                      special_zero=False)
            copy_runtime_info(t, [r1, t2, r2])
            return replace_output_update_name(t.output(0), r2.output(0))

        self.register_matcher(Matcher(pattern, "TransposeCompress"), callback)
