"""Normalized GEMMs: ``MVN(x) [* gamma] [+ beta] -> MatMul`` (or FullyConnected) as one GEMM
node whose kernel normalizes the rows of ``x`` as it loads them; an RMSNorm
(``runtime.rms_norm``'s RmsNorm node) and its scale the same way.

Pre-norm transformers put a LayerNorm in front of every projection (exported as MVN over the
last axis, then a Multiply and an Add by constant vectors). Run apart that is one more launch
per projection and a normalized copy of the activations written and read back. Folded into the
GEMM, each work-group first computes the mean and inverse standard deviation of its own rows
(shifted sums over K, as the MVN kernel would), then every A element it loads becomes
``(a - mean) * rstd * gamma[k] + beta[k]`` (``kernels.norm_prologue``). A shape or dtype the
kernels do not take runs the absorbed ops' own references on the host
(:class:`NormDesc`).

Conditions (:func:`fuse_norm_gemms`): an MVN over the last axis (a constant ``axes`` input),
float32, its last dim static; an optional Multiply and then an optional Add by constants that
vary only along that axis; each but the last read (for its data) once; the last, no model
output, read only by GEMMs that each take it (below) and by ShapeOfs, which read its shape
alone: the absorbed nodes they read stay, never run (``program_node.droppable``). All
of its readers fold it or none does (a norm also read by an elementwise op stays a launch).
Each GEMM reads it as a MatMul's first input without ``transpose_a``, or a FullyConnected's
(whose bias stays input 2: gamma and beta follow it), directly or through row views of its
own: a Reshape keeping the last dim, then a Slice of leading axes (``slice_before_lm_head``'s
last row before the LM head). Both pick whole rows and the normalization is per row, so they
move in front of it and read the raw rows.

Several readers: parallel-residual decoders (GPT-J, CodeGen, Phi, Cohere, Falcon) feed one
normalized tensor to the attention's projection and to the MLP's up projection, which
``parallel_gemms`` cannot merge (the MLP's is read by its activation). Each GEMM then gets its
normalized node of its own (its own gamma and beta constants, or folded weights) and takes
the rows' statistics itself: each extra reader reads the rows once more for them, where the
norm's own launch wrote a normalized copy that every reader read back. (A MatMul's norm on
the tensor-core path runs as a row kernel ahead of it, ``kinds.matmul.gemm_launch``: there one
per reader; a FullyConnected's folds into its weights.)
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..core.boundary import Constant
from ..errors import ShapeInferenceError
from ..ops.elementwise import Add, Multiply
from ..ops.legacy import FullyConnected
from ..ops.matmul import MatMul
from ..ops.movement import Reshape, Slice
from ..ops.normalization import MVN
from .kinds.matmul import matmul_shape
from .kinds.normalization import RmsNorm
from .program_node import ProgramNode, data_users, droppable, node_users, read_once, splice
from .shape_infer import infer_host

F32 = np.dtype(np.float32)


class NormDesc:
    """What a normalized GEMM computes: MVN (``eps``, ``inside_sqrt``,
    ``normalize_variance``) of input 0 over its last axis, times input ``first`` (``gamma``,
    when there is one), plus the next input (``beta``), then the GEMM (``matmul``: a MatMul
    with input 1, or a FullyConnected with inputs 1 and 2). Keeps the absorbed nodes for the
    host reference."""

    gated = False  # (A as given, normalized: not a gated MLP's halves, parallel_gemms.GatedDesc)

    def __init__(self, mvn, ops: list, matmul, gamma: bool, beta: bool) -> None:
        self.mvn, self.ops, self.matmul = mvn, ops, matmul
        self.rms = mvn.is_a(RmsNorm)  # (the root mean square, no mean taken off)
        self.eps = float(mvn.subgraph.eps if self.rms else mvn.attrs.get("eps", 1e-9))
        self.inside_sqrt = str(mvn.attrs.get("eps_mode", "inside_sqrt")).lower() == "inside_sqrt"
        self.normalize_variance = bool(mvn.attrs.get("normalize_variance", True))
        self.gamma, self.beta = gamma, beta
        self.first = 3 if matmul.is_a(FullyConnected) else 2  # input index of gamma/beta

    def key(self) -> tuple:
        return ("norm", self.eps, self.inside_sqrt, self.normalize_variance, self.gamma, self.beta,
                self.rms)

    def foldable(self, node) -> bool:
        """Whether ``node`` (this GEMM) has constant weights and vectors, which
        :func:`fold_weights` can fold into one array."""
        return node.inputs[1][0].is_constant and all(s.is_constant
                                                     for s, _ in node.inputs[self.first:])

    def folded_weights(self, node) -> np.ndarray:
        """:func:`fold_weights` of ``node``'s (a FullyConnected's) constants."""
        w = np.asarray(node.inputs[1][0].value)
        vectors = [np.asarray(s.value) for s, _ in node.inputs[self.first:]]
        gamma = vectors.pop(0) if self.gamma else None
        beta = vectors.pop(0) if self.beta else None
        return fold_weights(w.reshape(w.shape[0], -1), gamma, beta)

    def kernel_params(self) -> tuple:
        """What the GEMM kernels' prologue is generated from (kernels.norm_prologue)."""
        return (self.eps, self.inside_sqrt, self.normalize_variance, self.gamma, self.beta,
                self.rms)

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        if self.first == 3:
            w = shapes[1]
            if len(w) != 2 or not shapes[0] or shapes[0][-1] != w[1]:
                raise ShapeInferenceError(f"FullyConnected '{self.matmul.id}': input "
                                          f"{list(shapes[0])} does not fit weights {list(w)}")
            return [tuple(shapes[0][:-1]) + (w[0],)]
        out = matmul_shape(self.matmul.attrs, [shapes[0], shapes[1]], {})
        if out is None:
            raise ShapeInferenceError(f"MatMul '{self.matmul.id}': input shapes "
                                      f"{[list(s) for s in shapes[:2]]} do not multiply")
        return out

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The absorbed nodes' own references, in turn."""
        x = infer_host(self.mvn, [arrays[0]] + [s.value for s, _ in self.mvn.inputs[1:]])[0]
        for op in self.ops:
            const = next(s.value for s, _ in op.inputs if s.is_constant)
            ins = [x if not s.is_constant else const for s, _ in op.inputs]
            x = infer_host(op, ins)[0]
        return infer_host(self.matmul, [x, *arrays[1:self.first]])


def fold_weights(w: np.ndarray, gamma: np.ndarray | None,
                 beta: np.ndarray | None) -> np.ndarray:
    """A FullyConnected's weights ``w`` [N, K] with its LayerNorm's ``gamma`` and ``beta``
    folded in, as the tensor-core kernel's normalized product reads them
    (``kernels.mma_parts.norm_out_parts``): [K + 2, N], the rows ``gamma[k] * w[:, k]``, then
    their column sums, then ``w @ beta`` (summed in float64). The product of raw rows with
    them leaves the mean to cancel in ``a @ B - mean * sums``: kept for the 3xTF32 kernels,
    whose float32-like rounding keeps that within tolerance for rows whose mean is many
    deviations."""
    wk = w.astype(np.float64).T
    scaled = wk * gamma.astype(np.float64)[:, None] if gamma is not None else wk
    shift = beta.astype(np.float64) @ wk if beta is not None else np.zeros(wk.shape[1])
    return np.ascontiguousarray(np.concatenate([scaled, scaled.sum(axis=0)[None], shift[None]]),
                                dtype=F32)


def _last_axis_vector(node, k_dim: int) -> np.ndarray | None:
    """The other (constant) input of a Multiply/Add as a [K] vector, when it varies along the
    last axis only."""
    consts = [s for s, _ in node.inputs if s.is_constant]
    if len(consts) != 1 or len(node.inputs) != 2:
        return None
    v = np.asarray(consts[0].value)
    if v.dtype != F32 or (v.ndim and any(d != 1 for d in v.shape[:-1])) or \
            (v.ndim and v.shape[-1] not in (1, k_dim)):
        return None
    return np.ascontiguousarray(np.broadcast_to(v.reshape(-1), (k_dim,)), dtype=F32)


def _last_dim(n) -> int | None:
    ps = n.out_pshapes[0]
    if not ps.rank_is_static or not len(ps):
        return None
    d = ps[len(ps) - 1]
    return d.min if d.min == d.max else None


def _row_views(m, users: dict) -> list:
    """The single-user row views between GEMM ``m`` and what feeds them: an optional Reshape
    that keeps a static last dim, then an optional Slice of leading axes (constant axes), as
    [Reshape?, Slice?] in program order."""
    views: list = []
    src = m.inputs[0][0]
    ps = src.out_pshapes[0]
    if src.is_a(Slice) and ps.rank_is_static and src.inputs[1][0].is_constant \
            and (len(src.inputs) == 4 or src.inputs[4][0].is_constant):
        n = np.asarray(src.inputs[1][0].value).size
        axes = range(n) if len(src.inputs) == 4 else \
            np.asarray(src.inputs[4][0].value).reshape(-1)
        if all(int(a) % len(ps) != len(ps) - 1 for a in axes):
            views.insert(0, src)
            src = src.inputs[0][0]
    if src.is_a(Reshape) and src.inputs[0][1] == 0:
        k = _last_dim(src)
        if k is not None and k == _last_dim(src.inputs[0][0]):
            views.insert(0, src)
    if not all(read_once(v, users) for v in views):
        return []
    return views


def _match(m, users: dict):
    """(mvn, [ops], gamma or None, beta or None, [row views]) when ``m``'s first input is a
    LayerNorm (through row views: :func:`_row_views`). The chain's last node may have other
    readers: :func:`_readers` asks that each of them fold it too."""
    if not m.is_a(MatMul, FullyConnected) or m.attrs.get("transpose_a") \
            or m.out_dtypes[0] != F32 or m.subgraph is not None:
        return None
    chain: list = []
    views = _row_views(m, users)
    src = (views[0] if views else m).inputs[0][0]
    while src.is_a(Multiply, Add) and len(chain) < 2:
        chain.insert(0, src)
        src = next((s for s, _ in src.inputs if not s.is_constant), None)
        if src is None:
            return None
    mvn = src
    nodes = [mvn] + chain
    rms = mvn.is_a(RmsNorm)  # (over the last axis by construction: rms_norm)
    if not rms and (not mvn.is_a(MVN) or len(mvn.inputs) != 2
                    or not mvn.inputs[1][0].is_constant):
        return None
    if any(n.is_output or n.num_outputs != 1 or n.out_dtypes[0] != F32 for n in nodes) \
            or any(len(data_users(n, users)) != 1 for n in nodes[:-1]):
        return None
    ps = mvn.out_pshapes[0]
    x, k = mvn.inputs[0]
    if not ps.rank_is_static or not len(ps) or x.out_dtypes[k] != F32:
        return None
    axes = [len(ps) - 1] if rms else \
        [int(a) % len(ps) for a in np.asarray(mvn.inputs[1][0].value).reshape(-1)]
    last = ps[len(ps) - 1]
    if axes != [len(ps) - 1] or last.min != last.max:
        return None
    classes = [n.row.cls for n in chain]
    if classes not in ([], [Multiply], [Add], [Multiply, Add]):
        return None
    vectors = {}
    for n in chain:
        v = _last_axis_vector(n, last.min)
        if v is None:
            return None
        vectors[n.row.cls] = v
    return mvn, chain, vectors.get(Multiply), vectors.get(Add), views


def _gemm_of(u, j: int, users: dict):
    """The GEMM that reader ``u`` (input ``j``) of a norm leads to: ``u`` itself, or the one
    its row views (a Reshape, a Slice, each read once) end in; None where it reads anything
    but input 0 on the way. :func:`_match` then checks that those views are row views."""
    for _ in range(2):
        if j or not u.is_a(Reshape, Slice):
            break
        if not read_once(u, users):
            return None
        u, j = users[id(u)][0]
    return u if j == 0 else None


def _readers(last, users: dict) -> list | None:
    """[(GEMM, its :func:`_match`)] for every data reader of ``last`` when each is a GEMM
    whose normalization chain ends in ``last`` (``last`` the chain's last node: the MVN or
    RmsNorm, its Multiply, or its Add); None where any other reads it."""
    if not last.is_a(MVN, RmsNorm, Multiply, Add):
        return None
    found = []
    for u, j in data_users(last, users):
        m = _gemm_of(u, j, users)
        match = _match(m, users) if m is not None else None
        if match is None or (match[1] or [match[0]])[-1] is not last:
            return None
        found.append((m, match))
    return found or None


def fuse_norm_gemms(nodes: list) -> list:
    """``nodes`` (topological) with every LayerNorm (or RMSNorm) read only by GEMMs (and
    ShapeOfs) folded into each of those GEMMs, each replaced by a normalized one: inputs
    ``[x, weights, (FullyConnected: bias), gamma?, beta?]`` (the vectors as new Constant
    nodes, each GEMM its own). The norm's nodes are dropped, but for those a ShapeOf reads
    (and what they read of the chain), which stay as ``shape_only`` nodes."""
    users = node_users(nodes)
    replace: dict[int, list] = {}
    dropped: set[int] = set()
    for n in nodes:
        found = _readers(n, users)
        if found is None:
            continue
        mvn, chain = found[0][1][:2]
        for m, match in found:
            replace[id(m)] = _normalized_gemm(m, match)
        dropped.update(id(c) for c in droppable([mvn] + chain, None, users))
    return splice(nodes, replace, dropped)


def _normalized_gemm(m, found: tuple) -> list:
    """The nodes standing for GEMM ``m`` with ``found`` (its :func:`_match`) folded in: the
    gamma and beta constants, then the normalized GEMM (``m``'s id, reading the raw rows)."""
    mvn, chain, gamma, beta, views = found
    consts = [ProgramNode(f"{m.id}/{name}", Constant.type_name, value=v)
              for name, v in (("gamma", gamma), ("beta", beta)) if v is not None]
    if views:  # (the views now read the raw rows; the GEMM reads the last view)
        views[0].inputs[0] = mvn.inputs[0]
    a = (views[-1], 0) if views else mvn.inputs[0]
    node = ProgramNode(m.id, m.kind, m.attrs, [a, *m.inputs[1:]] + [(c, 0) for c in consts],
                       out_dtypes=m.out_dtypes, out_pshapes=m.out_pshapes, name=m.name)
    node.out_pvalues = m.out_pvalues
    node.subgraph = NormDesc(mvn, chain, m, gamma is not None, beta is not None)
    return consts + [node]
