"""A mixture-of-experts' routed GEMMs read the routed experts' weights where they lie:
``MatMul(Gather(W, idx, axis 0), X)`` as one
:class:`~netpass.runtime.kinds.matmul.ExpertMatMul` node, one launch, no gathered copy.

transformers' ``batched_mm`` experts (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE as
``tools/export_decoder.py`` exports them) gather each (token, expert) pair's weight matrices
from the stacked expert weights ``[E, N, K]`` by the router's TopK indices (TorchScript: a
Gather along axis 0 of indices [B]; dynamo: a GatherND of indices [B, 1]), then multiply them
batch-wise: every step copied the routed experts' whole matrices (at Mixtral's sizes,
gigabytes a token) before reading them once. The ExpertMatMul's kernel reads batch b's matrix
at ``W + idx[b] * N * K`` (``kernels/expert``).

Conditions (:func:`fuse_expert_gemms`): a float32 MatMul one of whose operands (the first
such) is a Gather (batch dims 0, constant axis 0) of indices of rank 1, or a GatherND (batch
dims 0) of indices [B, 1], of a constant float32 [E, R, C] tensor by computed indices, that
Gather's data read by the MatMul alone (ShapeOfs aside: the Gather then stays for them, never
run) and not a model output; the other operand of rank 2 or 3. Anything else (the gathered
weights read elsewhere too, a Gather along another axis) stays as it is.
"""
from __future__ import annotations

import numpy as np

from ..ops.indexing import Gather, GatherND
from ..ops.matmul import MatMul
from .kinds.matmul import ExpertMatMul, ExpertMatMulDesc
from .program_node import data_users, fuse_matches, standing_for

F32 = np.dtype(np.float32)


def _expert_gather(g, users: dict) -> bool | None:
    """Whether ``g`` gathers whole matrices of constant float32 weights [E, R, C] along axis
    0 by computed indices, its data read by one node: False for a Gather, True for a
    GatherND (``nd``); None where it does not."""
    if not g.is_a(Gather, GatherND) or len(g.inputs) < 2 or g.is_output or g.num_outputs != 1 \
            or len(data_users(g, users)) != 1 \
            or g.attrs.get("batch_dims", 0) or g.out_dtypes[0] != F32:
        return None
    (w, _), (idx, k) = g.inputs[0], g.inputs[1]
    if not w.is_constant or w.value is None or w.value.ndim != 3 or w.value.dtype != F32 \
            or idx.is_constant or np.dtype(idx.out_dtypes[k]).kind not in "iu":
        return None
    ips = idx.out_pshapes[k]
    if not ips.rank_is_static:
        return None
    if g.is_a(Gather) and len(g.inputs) == 3 and len(ips) == 1:
        axis = g.inputs[2][0]
        if axis.is_constant and np.asarray(axis.value).size == 1 \
                and int(np.asarray(axis.value).reshape(-1)[0]) % 3 == 0:
            return False
    if g.is_a(GatherND) and len(g.inputs) == 2 and len(ips) == 2 \
            and ips[1].min == ips[1].max == 1:
        return True
    return None


def _rewrite(m, users: dict) -> tuple | None:
    """([the ExpertMatMul standing for MatMul ``m``], [the Gather, where nothing else (a
    ShapeOf) reads it]), or None."""
    if not m.is_a(MatMul) or m.subgraph is not None or m.out_dtypes[0] != F32 \
            or len(m.inputs) != 2:
        return None
    for side in (0, 1):
        g, k = m.inputs[side]
        x, xk = m.inputs[1 - side]
        xps = x.out_pshapes[xk]
        if k or x.out_dtypes[xk] != F32 or not xps.rank_is_static or len(xps) not in (2, 3):
            continue
        nd = _expert_gather(g, users)
        if nd is None:
            continue
        ins = [g.inputs[0], g.inputs[1], (x, xk)]
        node = standing_for(m, ExpertMatMul.type_name, ins, ExpertMatMulDesc(g, m, side, nd))
        return [node], [g] if len(users[id(g)]) == 1 else []
    return None


def fuse_expert_gemms(nodes: list) -> list:
    """``nodes`` (topological) with every MatMul of gathered expert weights replaced by an
    ExpertMatMul node (inputs ``[W, indices, X]``); the Gather is dropped where nothing else
    (a ShapeOf) reads it."""
    return fuse_matches(nodes, _rewrite)
