"""A decode step's MLP in one launch: the down projection reads what the up projection reads.

A transformer's MLP is two FullyConnected nodes: the up projection (its norm folded in:
norm_gemm; its activation fused after it: GPT-2's GELU, or a gated MLP's stacked gate and up
projection whose gated product the down projection reads: parallel_gemms.GatedDesc) and the
down projection (the residual Add fused after it). A decode step runs them as two GEMVs; at
one row :func:`kernels.decode_mlp.decode_mlp` runs both in one launch (one NVIDIA enqueue
fewer a layer, and the two projections' weights in flight together).

:func:`fold_decode_mlps` gives the down projection the up projection's inputs as inputs of its
own (x, the weights, the bias, the norm's vectors: after its three) and an :class:`MlpDesc`;
the up projection keeps its place and its kernels and is marked (``ProgramNode.mlp_fold``).
Both impls ask :meth:`MlpFold.chunk` the same question for the step's rows: where the fused
kernel runs, the up projection launches nothing and the down projection computes both; a
prompt's rows run the two as before (tensor cores, folded norms). Which MLPs fold is the
config's ``DECODE_MLP_FUSION`` (compiled.mlp_fusion): gated ones by default.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..ops.legacy import FullyConnected
from .kernels.decode_mlp import mlp_chunk
from .program_node import ProgramNode
from .shape_infer import fully_connected_shapes, infer_host

F32 = np.dtype(np.float32)


class MlpFold:
    """What both projections of a folded MLP share: the up projection ``up`` and the widths
    ``k`` -> ``h`` -> ``n`` (``gated``: the up projection's output holds the gate's and the up
    projection's ``h`` columns side by side)."""

    def __init__(self, up: ProgramNode, k: int, h: int, n: int, gated: bool) -> None:
        self.up, self.k, self.h, self.n, self.gated = up, k, h, n, gated

    def chunk(self, engine, rows: int) -> int:
        """Hidden units per work-group where the fused kernel runs a step of ``rows`` rows on
        ``engine`` (one row), else 0 (the two projections run apart)."""
        if rows != 1 or engine is None:
            return 0
        return mlp_chunk(self.k, self.h, self.n, self.gated,
                         int(engine.device.max_compute_units))


class MlpDesc:
    """The down projection's description once folded: its own (``inner``: a GatedDesc, or None
    for a plain FullyConnected, ``plain``) over inputs 0-2, the fold's inputs after them."""

    def __init__(self, fold: MlpFold, inner, plain: ProgramNode) -> None:
        self.fold, self.inner, self.plain = fold, inner, plain
        self.gated = fold.gated

    def key(self) -> tuple:
        up = self.fold.up
        return ("mlp", self.inner.key() if self.inner is not None else None,
                up.subgraph.key() if up.subgraph is not None else None,
                tuple(f.key() for f in up.fused))

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        if self.inner is not None:
            return self.inner.infer_shapes(shapes[:3], values)
        return fully_connected_shapes(self.plain.id, shapes)

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The projection's own reference over its own inputs."""
        if self.inner is not None:
            return self.inner.evaluate(arrays[:3])
        return infer_host(self.plain, arrays[:3])


def _constant_matrix(src: tuple) -> np.ndarray | None:
    node = src[0]
    v = node.value if node.is_constant else None
    return v if v is not None and v.ndim == 2 and v.dtype == F32 else None


def _literal_only(up: ProgramNode) -> bool:
    """Whether every side input of the ops fused after ``up`` is a literal (an activation's
    constants: the fused kernel reads no side tensor for the hidden units)."""
    return all(lit is not None for f in up.fused for r, lit in zip(f.refs, f.literals)
               if r is None) and all(np.dtype(f.out_dtype) == F32 for f in up.fused)


def _foldable(d: ProgramNode, gated_only: bool) -> MlpFold | None:
    """The fold of down projection ``d`` (module docstring), or None (``gated_only``: None
    but for a gated MLP's)."""
    if not d.is_a(FullyConnected) or len(d.inputs) != 3 or d.num_outputs != 1 \
            or d.out_dtypes[0] != F32 or d.op_dtype is not None or d.grown_by \
            or not (d.subgraph is None and not gated_only
                    or getattr(d.subgraph, "gated", False)):
        return None
    w2 = _constant_matrix(d.inputs[1])
    last, k = d.inputs[0]  # (the up projection, or the last op fused after it)
    up = last.fused_into if last.fused_into is not None else last
    if up is not last and up.fused[-1].node is not last:
        return None
    if w2 is None or k != 0 or not up.is_a(FullyConnected) or up.is_output or last.is_output \
            or last.users[0] != [(d, 0)] or up.num_outputs != 1 or up.out_dtypes[0] != F32 \
            or up.op_dtype is not None or up.grown_by or up.mlp_fold is not None \
            or not (up.subgraph is None or hasattr(up.subgraph, "kernel_params")) \
            or getattr(up.subgraph, "gated", False) or 0 in up.permuted_inputs \
            or 0 in up.strided_inputs or not all(s.is_constant for s, _ in up.inputs[1:]):
        return None
    w1 = _constant_matrix(up.inputs[1])
    x, xk = up.inputs[0]
    gated = d.subgraph is not None
    n, h = w2.shape
    bias = up.inputs[2][0].value
    if w1 is None or x.out_dtypes[xk] != F32 or bias is None or np.size(bias) != w1.shape[0] \
            or w1.shape[0] != (2 * h if gated else h) or (gated and up.fused) \
            or not _literal_only(up):
        return None
    return MlpFold(up, w1.shape[1], h, n, gated)


def fold_decode_mlps(nodes: list, which: str = "gated") -> None:
    """Fold the MLPs of ``nodes`` (linked, their elementwise ops fused) into their down
    projections (module docstring): ``which`` "gated" (gated MLPs: LLaMA's), "all" (GPT-2's
    too) or "none" (compiled.mlp_fusion). Gated only by default: on the H200 a LLaMA step
    took 3% less device time folded, a GPT-2 step 3% more (BENCHMARKS.md, stateful decoding,
    thirtieth round)."""
    if which == "none":
        return
    for d in nodes:
        fold = _foldable(d, which == "gated")
        if fold is None:
            continue
        plain = ProgramNode(d.id, d.kind, d.attrs, d.inputs, op=d.op, out_dtypes=d.out_dtypes,
                            out_pshapes=d.out_pshapes, name=d.name)
        for j, (src, k) in enumerate(fold.up.inputs, start=len(d.inputs)):
            src.users[k].append((d, j))
        d.inputs = d.inputs + list(fold.up.inputs)
        d.subgraph = MlpDesc(fold, d.subgraph, plain)
        fold.up.mlp_fold = fold
