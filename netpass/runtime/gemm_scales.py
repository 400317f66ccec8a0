"""A projection's output scaled by a constant as one FullyConnected over scaled weights.

BART-style attention (OPT, XGLM, BART, Marian, Whisper's decoder) scales the queries right
after their projection: ``q_proj(x) * head_dim ** -0.5``. The Multiply reads the
FullyConnected, so :func:`~netpass.runtime.parallel_gemms.merge_parallel_gemms`, which takes
projections read only by the heads' Reshapes, leaves q apart from k and v: a decode step then
runs two GEMVs instead of one, and the keys' and values' pieces of their merged GEMM, read by
copies, lose their views. ``(x @ W^T + b) * s`` is ``x @ (s W)^T + s b`` (a scale per output
column where ``s`` is a vector along the last axis): :func:`fold_gemm_scales` makes the
Multiply that FullyConnected, over new constants.

Conditions: a float32 Multiply whose one input is a FullyConnected with constant 2-D float32
weights ``[N, K]`` and a constant bias of N values, read only by the Multiply, and whose other
input is a constant of size 1 or of N values along the last axis that does not grow the
product's rank.
"""
from __future__ import annotations

import numpy as np

from ..core.boundary import Constant
from ..ops.elementwise import Multiply
from ..ops.legacy import FullyConnected
from .program_node import ProgramNode, fuse_matches, read_once

F32 = np.dtype(np.float32)


def _column_scale(c, n: int, rank: int) -> np.ndarray | None:
    """Constant ``c`` as N column factors, when it is one value or N along the last axis (of
    at most ``rank`` dims, so that it does not grow the product)."""
    if not c.is_constant or c.value is None or np.asarray(c.value).dtype != F32:
        return None
    v = np.asarray(c.value)
    if v.ndim > rank or any(d != 1 for d in v.shape[:-1]) or v.size not in (1, n):
        return None
    return np.broadcast_to(v.reshape(-1), (n,)).astype(F32)


def _scaled_gemm(m, users: dict) -> tuple | None:
    if not m.is_a(Multiply) or len(m.inputs) != 2 or m.out_dtypes[0] != F32 or m.is_output:
        return None
    for (fc, k), (c, _) in (m.inputs, m.inputs[::-1]):
        if not fc.is_a(FullyConnected) or k or len(fc.inputs) != 3 or fc.subgraph is not None \
                or fc.is_output or not read_once(fc, users):
            continue
        (w, _), (b, _) = fc.inputs[1], fc.inputs[2]
        ps = fc.out_pshapes[0]
        if not (w.is_constant and b.is_constant and w.value is not None and b.value is not None
                and w.value.ndim == 2 and w.value.dtype == F32 and ps.rank_is_static
                and np.size(b.value) == w.value.shape[0]):
            continue
        n = w.value.shape[0]
        scale = _column_scale(c, n, len(ps))
        if scale is None:
            continue
        consts = [ProgramNode(f"{m.id}/{what}", Constant.type_name, value=v) for what, v in
                  (("weights", w.value * scale[:, None]),
                   ("bias", np.asarray(b.value, F32).reshape(-1) * scale))]
        node = ProgramNode(m.id, fc.kind, fc.attrs, [fc.inputs[0], (consts[0], 0), (consts[1], 0)],
                           out_dtypes=m.out_dtypes, out_pshapes=m.out_pshapes, name=m.name)
        return consts + [node], [fc]
    return None


def fold_gemm_scales(nodes: list) -> list:
    """``nodes`` (topological) with each constant scale of a FullyConnected's output folded
    into its weights and bias (module docstring)."""
    return fuse_matches(nodes, _scaled_gemm)
