"""Parallel GEMMs as one: FullyConnected nodes that read the same input, each with constant
weights ``[N_i, K]`` and bias, become one FullyConnected over the weights stacked along N, and
a VariadicSplit of its output along the last axis hands each reader its own columns (strided
views: no copy). OpenVINO's GPU plugin does the same (``FullyConnectedHorizontalFusion``).

Why: LLaMA-style exports (LLaMA, Mistral, Qwen; transformers' BERT) project q, k and v in
Linears of their own over one normalized input. A decode step then launches three GEMVs where
one would do, and the norm in front of them, having several readers, folds into none of them
(``norm_gemm``): 13 launches per LLaMA layer against 5.5 for GPT-2, whose export holds one QKV
projection. Merged, the norm has one reader again and folds into the merged GEMM; a prompt's
GEMM gets an N wide enough to fill the device. The merged weights are new constants: the
program uploads them instead of the separate ones.

The norm's output is often read by a ShapeOf as well (the q/k/v Reshapes' target shape).
:func:`read_shapes_upstream` moves such ShapeOfs onto the input of the shape-preserving ops
in front of them, so that the norm's one remaining reader is the GEMM.

Conditions (:func:`merge_parallel_gemms`): two or more FullyConnected nodes of float32 reading
the same output as input 0, each with constant 2-D float32 weights of one K and a constant
bias of N_i values, not yet fused with anything, and read only by Reshapes (the heads' split
of q, k, v) and ShapeOfs. The split's pieces stay views only for readers that take strided
tensors (GEMMs, attention, rotary, through Reshapes and Transposes:
``Program._mark_strided_views``); an elementwise reader, as a gated MLP's ``SiLU(gate) * up``,
would need its piece copied, one launch for the two saved, and the epilogues the separate
GEMMs had (the SiLU, the product) lost.
"""
from __future__ import annotations

import numpy as np

from ..core.boundary import Constant
from ..core.shape import PartialShape
from ..ops.elementwise import Add, Multiply
from ..ops.legacy import FullyConnected
from ..ops.movement import Reshape, VariadicSplit
from ..ops.normalization import MVN
from ..ops.shape_ops import ShapeOf
from .kinds.normalization import RmsNorm
from .program_node import ProgramNode, node_users, splice

F32 = np.dtype(np.float32)


def _keeps_shape(n) -> tuple | None:
    """The input (node, output) whose shape ``n`` gives its output unchanged: an RmsNorm or
    MVN's data, or the other input of a Multiply or Add by a constant that broadcasts into it
    without growing it; else None."""
    if n.is_a(RmsNorm, MVN):
        return n.inputs[0]
    if not n.is_a(Multiply, Add) or len(n.inputs) != 2:
        return None
    for (x, k), (c, _) in (n.inputs, n.inputs[::-1]):
        if x.is_constant or not c.is_constant or c.value is None:
            continue
        ps = x.out_pshapes[k]
        cshape = np.shape(c.value)
        if not ps.rank_is_static or len(cshape) > len(ps):
            return None
        dims = list(ps)[len(ps) - len(cshape):]
        if all(cd == 1 or (d.min == d.max == cd) for cd, d in zip(cshape, dims)):
            return x, k
        return None
    return None


def read_shapes_upstream(nodes: list) -> list:
    """``nodes`` with each ShapeOf of a shape-preserving op (:func:`_keeps_shape`) reading
    that op's input instead, through chains of them (the shape is the same)."""
    for n in nodes:
        if not n.is_a(ShapeOf):
            continue
        src = n.inputs[0]
        while (up := _keeps_shape(src[0])) is not None:
            src = up
        n.inputs[0] = src
    return nodes


def _mergeable(n, users: dict) -> bool:
    """A FullyConnected :func:`merge_parallel_gemms` may merge (module docstring); read
    only by Reshapes and ShapeOfs, it is no model output."""
    if not n.is_a(FullyConnected) or len(n.inputs) != 3 or n.subgraph is not None \
            or n.out_dtypes[0] != F32:
        return False
    (w, _), (b, _) = n.inputs[1], n.inputs[2]
    if not (w.is_constant and b.is_constant) or w.value is None or b.value is None:
        return False
    if w.value.ndim != 2 or w.value.dtype != F32 or np.size(b.value) != w.value.shape[0]:
        return False
    readers = users.get(id(n), ())
    return bool(readers) and all(u.is_a(Reshape) and j == 0 or u.is_a(ShapeOf) for u, j in readers)


def merge_parallel_gemms(nodes: list) -> list:
    """``nodes`` (topological) with each group of parallel FullyConnected nodes (module
    docstring) replaced, at its first member's place, by one FullyConnected over the stacked
    weights and a VariadicSplit whose outputs its members' readers read."""
    users = node_users(nodes)
    groups: dict[tuple, list] = {}
    for n in nodes:
        if _mergeable(n, users):
            src, k = n.inputs[0]
            groups.setdefault((id(src), k, n.inputs[1][0].value.shape[1]), []).append(n)
    groups = {key: g for key, g in groups.items() if len(g) > 1}
    if not groups:
        return nodes
    at: dict[int, list] = {}
    piece: dict[int, tuple] = {}  # id(member) -> (split node, output index)
    for g in groups.values():
        merged = _merged(g)
        at[id(g[0])] = merged
        for i, m in enumerate(g):
            piece[id(m)] = (merged[-1], i)
    return splice(nodes, at, set(piece), piece)


def _merged(group: list) -> list:
    """The nodes standing for ``group``: the stacked weights and bias, the merged
    FullyConnected, the split's axis and lengths, the VariadicSplit (last)."""
    first = group[0]
    weights = np.concatenate([m.inputs[1][0].value for m in group], axis=0)
    bias = np.concatenate([np.asarray(m.inputs[2][0].value, F32).reshape(-1) for m in group])
    lengths = [m.inputs[1][0].value.shape[0] for m in group]
    ps = first.out_pshapes[0]
    rank = len(ps) if ps.rank_is_static else None
    out_ps = PartialShape(list(ps)[:-1] + [sum(lengths)]) if rank else PartialShape(None)
    name = "+".join(m.id for m in group)
    consts = [ProgramNode(f"{name}/{what}", Constant.type_name, value=v)
              for what, v in (("weights", weights), ("bias", bias),
                              ("axis", np.array(rank - 1 if rank else -1, np.int64)),
                              ("lengths", np.array(lengths, np.int64)))]
    fc = ProgramNode(name, first.kind, {**first.attrs, "out_size": sum(lengths)},
                     [first.inputs[0], (consts[0], 0), (consts[1], 0)], out_dtypes=[F32],
                     out_pshapes=[out_ps])
    split = ProgramNode(f"{name}/split", VariadicSplit.type_name, {},
                        [(fc, 0), (consts[2], 0), (consts[3], 0)],
                        out_dtypes=[F32] * len(group),
                        out_pshapes=[m.out_pshapes[0] for m in group])
    return consts[:2] + [fc] + consts[2:] + [split]
