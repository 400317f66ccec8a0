"""A decode step's attention output projection inside the attention kernel.

Every decoder layer projects its attention's output (the heads side by side: ``[b, s, h,
dv]`` viewed as ``[b, s, h * dv]``) with a FullyConnected, the residual Add fused after it. At
a few rows that projection is a GEMV launch of its own (GPT-2 small: 2.4 MB of weights, ~6 us,
plus an NVIDIA enqueue of ~8 us of host and a launch gap on the device), waiting on the whole
attention. :func:`fold_decode_projections` gives the projection the attention's inputs as
inputs of its own (after its three) and a :class:`ProjDesc`, and marks the attention
(``ProgramNode.proj_fold``): on a step the decode attention kernel runs (up to
``kernels.decode.DECODE_ROWS`` query rows) the attention launches nothing, and the
projection's impl launches the decode attention kernel with the projection folded in
(``kernels.decode.attention_decode``'s ``proj``): each head's output row, once merged, is
multiplied by its ``dv`` columns of the weights into a slot of its own, and the last head of a
row to arrive sums the slots in head order and runs the epilogue (bias, residual). Longer
steps (prompts) run the two apart.

Conditions: the projection is a FullyConnected of constant float32 weights ``[N, h * dv]``
(no norm, no gated input) reading a Reshape view of the attention's output, read by nothing
else (nor the attention's output but by ShapeOf); the attention's output is ``[b, s, h, dv]``
(its heads transposed back: ``out_perm`` (0, 2, 1, 3)), ``h`` and ``dv`` static, ``dv`` a
multiple of 4 up to 4 * ``kernels.decode.DLS``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..ops.legacy import FullyConnected
from ..ops.movement import Reshape
from .kernels.decode import DECODE_ROWS, DLS
from .kinds.attention import FusedAttention
from .kinds.base import static_dim
from .program_node import ProgramNode, data_users
from .shape_infer import fully_connected_shapes, infer_host

F32 = np.dtype(np.float32)


class ProjFold:
    """An attention whose output projection's kernel computes it at decode rows."""

    def __init__(self, attention: ProgramNode, first: int) -> None:
        self.attention, self.first = attention, first

    @staticmethod
    def applies(q_shape: Sequence[int]) -> bool:
        """Whether a step whose queries have ``q_shape`` runs the decode kernel (which
        projects): up to DECODE_ROWS rows."""
        return len(q_shape) >= 2 and q_shape[-2] <= DECODE_ROWS


class ProjDesc:
    """The projection's description once folded: ``fold``, and its own shape rule and
    reference (``plain``: the FullyConnected as it was) over inputs 0-2. ``uniform``: at
    decode rows its kernel is the attention's, whose arguments move affinely with the
    sequence's length (a length family replays it from forms: kinds.base's ``uniform``)."""

    uniform = True

    def __init__(self, fold: ProjFold, plain: ProgramNode) -> None:
        self.fold, self.plain = fold, plain

    def key(self) -> tuple:
        return ("attention_proj", self.fold.attention.subgraph.key())

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        return fully_connected_shapes(self.plain.id, shapes)

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        return infer_host(self.plain, arrays[:3])


def _foldable(d: ProgramNode) -> ProjFold | None:
    """The fold of projection ``d``'s attention (module docstring), or None."""
    if not d.is_a(FullyConnected) or len(d.inputs) != 3 or d.num_outputs != 1 \
            or d.out_dtypes[0] != F32 or d.subgraph is not None or d.op_dtype is not None \
            or d.grown_by or d.mlp_fold is not None or 0 in d.permuted_inputs \
            or 0 in d.strided_inputs or not all(s.is_constant for s, _ in d.inputs[1:]):
        return None
    w = d.inputs[1][0].value
    r, k = d.inputs[0]
    if w is None or w.ndim != 2 or w.dtype != F32 or k != 0 or not r.is_a(Reshape) \
            or r.is_output or data_users(r) != [(d, 0)]:
        return None
    a, ka = r.inputs[0]
    if ka != 0 or not a.is_a(FusedAttention) or a.is_output or a.proj_fold is not None \
            or a.fused or a.fused_into is not None or data_users(a) != [(r, 0)] \
            or a.out_dtypes[0] != F32 or a.subgraph.out_perm != (0, 2, 1, 3) \
            or a.subgraph.source is not None:
        return None
    ps = a.out_pshapes[0]
    h, dv = (static_dim(ps, -2), static_dim(ps, -1)) if ps.rank_is_static and len(ps) == 4 \
        else (None, None)
    if h is None or dv is None or dv % 4 or dv // 4 > DLS or h * dv != w.shape[1]:
        return None
    return ProjFold(a, len(d.inputs))


def fold_decode_projections(nodes: list) -> None:
    """Fold each decode attention of ``nodes`` (linked, appends and rotary folds attached)
    into the output projection that reads it (module docstring)."""
    for d in nodes:
        fold = _foldable(d)
        if fold is None:
            continue
        a = fold.attention
        for j, (src, k) in enumerate(a.inputs, start=len(d.inputs)):
            src.users[k].append((d, j))
        for i, order in a.permuted_inputs.items():  # (views the attention reads through)
            d.permuted_inputs[fold.first + i] = order
        d.strided_inputs |= {fold.first + i for i in a.strided_inputs}
        plain = ProgramNode(d.id, d.kind, d.attrs, d.inputs, op=d.op, out_dtypes=d.out_dtypes,
                            out_pshapes=d.out_pshapes, name=d.name)
        d.inputs = d.inputs + list(a.inputs)
        d.subgraph = ProjDesc(fold, plain)
        a.proj_fold = fold
