"""Parallel GEMMs as one: FullyConnected nodes that read the same input, each with constant
weights ``[N_i, K]`` and bias, become one FullyConnected over the weights stacked along N, and
a VariadicSplit of its output along the last axis hands each reader its own columns (strided
views: no copy). OpenVINO's GPU plugin does the same (``FullyConnectedHorizontalFusion``).

Why: LLaMA-style exports (LLaMA, Mistral, Qwen; transformers' BERT) project q, k and v in
Linears of their own over one normalized input. A decode step then launches three GEMVs where
one would do (13 launches per LLaMA layer against 5.5 for GPT-2, whose export holds one QKV
projection, when the norm in front folded into none of them), and each GEMM that folds the
norm (``norm_gemm``) takes the rows' statistics again. Merged, the norm folds into the one
merged GEMM; a prompt's GEMM gets an N wide enough to fill the device. The merged weights are
new constants: the program uploads them instead of the separate ones.

The norm's output is often read by a ShapeOf as well (the q/k/v Reshapes' target shape).
:func:`read_shapes_upstream` moves such ShapeOfs onto the input of the shape-preserving ops
in front of them, so that the norm's one remaining reader is the GEMM.

Conditions (:func:`merge_parallel_gemms`): two or more FullyConnected nodes of float32 reading
the same output as input 0, each with constant 2-D float32 weights of one K and a constant
bias of N_i values, not yet fused with anything, and read only by Reshapes (the heads' split
of q, k, v), RmsNorms (OLMo2 and OLMoE normalize the whole q and k projections before the
heads' split: ``q_norm(q_proj(x))``) and ShapeOfs. The split's pieces stay views only for
readers that take strided tensors (GEMMs, attention, rotary, through Reshapes and Transposes;
an RmsNorm reads its rows one stride apart: ``Program._mark_strided_views``), so the merge
costs no copy; merged, the q and k rotations find their common origin through the norms and
run as one launch too (``rotary.merge_rotary_pairs``).

A gated MLP's ``act(gate(x)) * up(x)`` (LLaMA, Mistral, Qwen: SiLU; Gemma: tanh-GELU; any
elementwise activation the graph writes out, as ops or as one) has elementwise readers
instead: :func:`merge_gated_mlps` stacks its two projections into one FullyConnected and reads
the two halves of each row with one GatedActivation kernel, the activation's ops its fused ops
(the norm in front folds into the one GEMM, its rows' statistics taken once); Phi-3's one
projection to both, chunked, gets the GatedActivation of its output. :func:`fold_gated_inputs`
then lets the down projection read that GEMM's output itself (``GatedDesc``): a decode
step's GEMV takes ``act(g) * u`` as it reads its rows (one launch fewer per layer), a prompt's
GEMM a GatedActivation's rows made in its own impl.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..core.boundary import Constant
from ..core.shape import PartialShape
from ..errors import ShapeInferenceError
from ..ops.elementwise import Add, Multiply
from ..ops.legacy import FullyConnected
from ..ops.movement import Reshape, Slice, Split, VariadicSplit
from ..ops.movement.slice import slice_bounds
from ..ops.normalization import MVN
from ..ops.shape_ops import ShapeOf
from .impls import FusedDesc, fused_chain, scalar_literal
from .kinds.fused_elementwise import GatedActivation, GatedActivationDesc
from .kinds.normalization import RmsNorm
from .program_node import ProgramNode, fuse_matches, node_users, read_once, splice
from .shape_infer import infer_host

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
    only by Reshapes, RmsNorms and ShapeOfs, it is no model output."""
    if not n.is_a(FullyConnected) or len(n.inputs) != 3 or n.inputs[1][0].value is None \
            or np.ndim(n.inputs[1][0].value) != 2 \
            or not _stackable(n, n.inputs[0], n.inputs[1][0].value.shape[1]):
        return False
    readers = users.get(id(n), ())
    return bool(readers) and all(u.is_a(Reshape, RmsNorm) and j == 0 or not u.reads_data
                                 for u, j in readers)


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


def _stacked(group: list) -> list:
    """The stacked weights and bias of ``group`` and the FullyConnected over them (last)."""
    first = group[0]
    weights = np.concatenate([m.inputs[1][0].value for m in group], axis=0)
    bias = np.concatenate([np.asarray(m.inputs[2][0].value, F32).reshape(-1) for m in group])
    ps = first.out_pshapes[0]
    out_ps = PartialShape(list(ps)[:-1] + [len(bias)]) if ps.rank_is_static \
        else PartialShape(None)
    name = "+".join(m.id for m in group)
    consts = [ProgramNode(f"{name}/{what}", Constant.type_name, value=v)
              for what, v in (("weights", weights), ("bias", bias))]
    fc = ProgramNode(name, first.kind, {**first.attrs, "out_size": len(bias)},
                     [first.inputs[0], (consts[0], 0), (consts[1], 0)], out_dtypes=[F32],
                     out_pshapes=[out_ps])
    return consts + [fc]


def _merged(group: list) -> list:
    """The nodes standing for ``group``: the stacked weights and bias, the merged
    FullyConnected, the split's axis and lengths, the VariadicSplit (last)."""
    stacked = _stacked(group)
    fc = stacked[-1]
    lengths = [m.inputs[1][0].value.shape[0] for m in group]
    ps = group[0].out_pshapes[0]
    rank = len(ps) if ps.rank_is_static else None
    consts = [ProgramNode(f"{fc.id}/{what}", Constant.type_name, value=v)
              for what, v in (("axis", np.array(rank - 1 if rank else -1, np.int64)),
                              ("lengths", np.array(lengths, np.int64)))]
    split = ProgramNode(f"{fc.id}/split", VariadicSplit.type_name, {},
                        [(fc, 0), (consts[0], 0), (consts[1], 0)],
                        out_dtypes=[F32] * len(group),
                        out_pshapes=[m.out_pshapes[0] for m in group])
    return stacked + consts + [split]


def _stackable(n, src: tuple, k: int) -> bool:
    """Whether ``n`` is a FullyConnected :func:`_stacked` may stack with others reading
    ``src`` as input 0 over weights of ``k`` columns (constant float32 weights and bias)."""
    if not n.is_a(FullyConnected) or len(n.inputs) != 3 or n.subgraph is not None \
            or n.out_dtypes[0] != F32 or n.inputs[0] != src:
        return False
    (w, _), (b, _) = n.inputs[1], n.inputs[2]
    return w.is_constant and b.is_constant and w.value is not None and b.value is not None \
        and w.value.ndim == 2 and w.value.dtype == F32 and w.value.shape[1] == k \
        and np.size(b.value) == w.value.shape[0]


ACTIVATION_LIMIT = 32  # ops a gate's activation may hold (tanh-GELU written out: 8 or 9)


def _elementwise(n) -> bool:
    """Whether ``n`` may be an op of a gate's activation: a float32 elementwise op of float32
    inputs whose row has an expression for them (what a fused region takes)."""
    if not n.row.fusable or n.row.expr is None or n.is_constant or n.num_outputs != 1 \
            or n.out_dtypes[0] != F32 or any(s.out_dtypes[k] != F32 for s, k in n.inputs):
        return False
    return n.row.expr(n.attrs, [F32] * len(n.inputs), F32) is not None


def _activation(top: tuple, m, users: dict, order: dict) -> tuple | None:
    """(x as (node, output), the activation's ops in order) when output ``top`` is an
    elementwise function of one tensor x, read only by product ``m``: ops (:func:`_elementwise`)
    of x and of each other, their other inputs scalar constants (kernel literals), none read
    outside them but ``top`` by ``m``, each of x's rank; one op at least (tanh-GELU, erf-GELU,
    SiLU as a Swish op or ``g * sigmoid(g)``, ReLU...: whatever the graph holds)."""
    ops: dict[int, ProgramNode] = {}
    leaves: dict[tuple, tuple] = {}
    stack = [top]
    while stack:
        n, k = stack.pop()
        if id(n) in ops:
            continue
        if not _elementwise(n):
            leaves[(id(n), k)] = (n, k)
            continue
        ops[id(n)] = n
        if len(ops) > ACTIVATION_LIMIT:
            return None
        for src, sk in n.inputs:
            if not src.is_constant:
                stack.append((src, sk))
            elif scalar_literal(src) is None:
                return None
    if not ops or len(leaves) != 1:
        return None
    (x, xk), = leaves.values()
    rank = len(x.out_pshapes[xk]) if x.out_pshapes[xk].rank_is_static else None
    if rank is None or any(not n.out_pshapes[0].rank_is_static or len(n.out_pshapes[0]) != rank
                           for n in ops.values()):  # (a scalar of more dims grows the rank)
        return None
    inside = set(ops) | {id(m)}
    if any(n.is_output or any(id(u) not in inside for u, _ in users.get(id(n), ()))
           for n in ops.values()):
        return None
    if [u for u, _ in users.get(id(top[0]), ())] != [m]:
        return None
    return (x, xk), sorted(ops.values(), key=lambda n: order[id(n)])


def _gated_product(m, users: dict, order: dict) -> tuple | None:
    """(gate as (node, output), up as (node, output), the activation's ops, the product's
    GatedActivationDesc) when float32 Multiply ``m`` is ``act(gate) * up`` (either order;
    :func:`_activation`)."""
    if not m.is_a(Multiply) or len(m.inputs) != 2 or m.out_dtypes[0] != F32:
        return None
    for pos, (top, other) in enumerate(((m.inputs[0], m.inputs[1]),
                                        (m.inputs[1], m.inputs[0]))):
        found = _activation(top, m, users, order)
        if found is None:
            continue
        x, ops = found
        act = fused_chain(ops, x)
        refs = (len(act), None) if pos == 0 else (None, len(act))
        product = FusedDesc(m.row, m.attrs, refs, [other], [F32, F32], F32, m)
        return x, other, ops, GatedActivationDesc(act, product, [*ops, m])
    return None


def _gated(m, users: dict, order: dict) -> tuple | None:
    """(gate, up, absorbed nodes, desc) when Multiply ``m`` is ``act(gate(x)) * up(x)``
    (either order) of two FullyConnected nodes over one input that only the product reads
    (the gate only by its activation's ops)."""
    found = _gated_product(m, users, order)
    if found is None:
        return None
    (gate, _), (up, _), ops, desc = found
    if not gate.is_a(FullyConnected) or len(gate.inputs) != 3 or gate.inputs[1][0].value is None:
        return None
    k = gate.inputs[1][0].value.shape[-1]
    readers = {id(u) for u, _ in users.get(id(gate), ())}
    if not (_stackable(gate, gate.inputs[0], k) and _stackable(up, gate.inputs[0], k)
            and read_once(up, users) and gate is not up and not gate.is_output
            and readers <= {id(n) for n in ops}
            and gate.out_pshapes[0] == up.out_pshapes[0]):
        return None
    return gate, up, [gate, up, *ops], desc


def _half_of(n, k: int) -> tuple | None:
    """(source (node, output), 0 or 1) when output ``k`` of ``n`` is the first or the second
    half of its source's last axis (static, even): a Slice (step 1), or a Split in two or a
    VariadicSplit in two equal lengths (a chunk in two: TorchScript exports Slices, dynamo a
    Split)."""
    if not n.is_a(Slice, Split, VariadicSplit) or not n.inputs \
            or not all(s.is_constant and s.value is not None for s, _ in n.inputs[1:]):
        return None
    src = n.inputs[0]
    ps = src[0].out_pshapes[src[1]]
    if not ps.rank_is_static or not len(ps):
        return None
    last, rank = ps[len(ps) - 1], len(ps)
    if last.min != last.max or last.min % 2:
        return None
    h = last.min // 2
    consts = [np.asarray(s.value).reshape(-1) for s, _ in n.inputs[1:]]
    if not n.is_a(Slice):  # (axis, lengths)
        lengths = [int(v) for v in consts[1]] if n.is_a(VariadicSplit) \
            else [h] * int(n.attrs.get("num_splits", 0))
        return (src, k) if len(consts[0]) == 1 and int(consts[0][0]) % rank == rank - 1 \
            and len(lengths) == 2 and set(lengths) <= {h, -1} else None
    if len(consts) not in (3, 4):
        return None
    start, stop, step, *axes = consts
    if len(start) != 1 or int(step[0]) != 1 \
            or (int(axes[0][0]) % rank if axes else 0) != rank - 1:
        return None
    begin, end, _ = slice_bounds(2 * h, int(start[0]), int(stop[0]), 1)
    return (src, 0) if (begin, end) == (0, h) else (src, 1) if (begin, end) == (h, 2 * h) \
        else None


def _gated_halves(m, users: dict, order: dict) -> tuple | None:
    """(source, absorbed nodes, desc) when Multiply ``m`` is ``act(x[..., :h]) * x[..., h:]``
    (either order) of one tensor's halves along its last axis (Phi-3's gate and up projection
    in one Linear, chunked), the pieces read only by the product and the activation's ops."""
    found = _gated_product(m, users, order)
    if found is None:
        return None
    (gate, gk), (up, uk), ops, desc = found
    g, u = _half_of(gate, gk), _half_of(up, uk)
    if g is None or u is None or g[0] != u[0] or (g[1], u[1]) != (0, 1):
        return None
    pieces = [gate] if gate is up else [gate, up]
    inside = {id(n) for n in [*ops, m]}
    if any(p.is_output or any(id(r) not in inside for r, _ in users.get(id(p), ()))
           for p in pieces):
        return None
    return g[0], [*pieces, *ops], desc


def merge_gated_mlps(nodes: list) -> list:
    """``nodes`` (topological) with each gated MLP's ``act(gate(x)) * up(x)`` (LLaMA, Mistral,
    Qwen: SiLU; Gemma: tanh-GELU; two FullyConnected nodes over one normalized input) as one
    FullyConnected over the stacked weights and a GatedActivation of its two halves, at the
    product's place: one GEMM for two, and the norm in front folds into that one GEMM
    (``norm_gemm``). Where one tensor's halves are the gate and the up projection already
    (Phi-3), a GatedActivation of that tensor."""
    users = node_users(nodes)
    order = {id(n): i for i, n in enumerate(nodes)}
    replace: dict[int, list] = {}
    dropped: set[int] = set()
    for m in nodes:
        found = _gated(m, users, order)
        if found is not None:
            gate, up, absorbed, desc = found
            made = _stacked([gate, up])
            src = (made[-1], 0)
        else:  # (the two projections already one: their output's halves)
            halves = _gated_halves(m, users, order)
            if halves is None:
                continue
            (src, absorbed, desc), made = halves, []
        if any(id(n) in dropped for n in absorbed):
            continue
        act = ProgramNode(m.id, GatedActivation.type_name, {}, [src], out_dtypes=[F32],
                          out_pshapes=[m.out_pshapes[0]], name=m.name)
        act.subgraph = desc
        replace[id(m)] = made + [act]
        dropped.update(id(n) for n in absorbed)
    return splice(nodes, replace, dropped)


class GatedDesc:
    """What a FullyConnected over a gated MLP's activation computes (:func:`fold_gated_inputs`):
    input 0 holds the gate's and the up projection's columns side by side ``[..., 2K]``, the
    GEMM reads ``act(g) * u`` (the GatedActivation's, ``gate``: its desc) against weights
    ``[N, K]``. Keeps the absorbed GatedActivation and the FullyConnected for the host
    reference."""

    gated = True

    def __init__(self, act, fc) -> None:
        self.act, self.fc = act, fc
        self.gate: GatedActivationDesc = act.subgraph

    def key(self) -> tuple:
        return ("gated", self.gate.key())

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        x, w = shapes[0], shapes[1]
        if len(w) != 2 or not x or x[-1] != 2 * w[1]:
            raise ShapeInferenceError(f"FullyConnected '{self.fc.id}': gated input {list(x)} "
                                      f"does not fit weights {list(w)}")
        return [tuple(x[:-1]) + (w[0],)]

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The GatedActivation's reference, then the FullyConnected's."""
        x = self.gate.evaluate([arrays[0]])[0]
        return infer_host(self.fc, [x, *arrays[1:]])


def fold_gated_inputs(nodes: list) -> list:
    """``nodes`` (topological) with each FullyConnected whose input is a GatedActivation's
    (read by nothing else) reading the GatedActivation's input instead, the GatedActivation
    folded in (``GatedDesc``): the down projection of a gated MLP."""
    return fuse_matches(nodes, _gated_gemm)


def _gated_gemm(m, users: dict) -> tuple | None:
    if not m.is_a(FullyConnected) or m.subgraph is not None or len(m.inputs) != 3 \
            or m.out_dtypes[0] != F32 or not m.inputs[1][0].is_constant:
        return None
    act, k = m.inputs[0]
    if not act.is_a(GatedActivation) or k != 0 or not read_once(act, users):
        return None
    node = ProgramNode(m.id, m.kind, m.attrs, [act.inputs[0], *m.inputs[1:]],
                       out_dtypes=m.out_dtypes, out_pshapes=m.out_pshapes, name=m.name)
    node.out_pvalues = m.out_pvalues
    node.subgraph = GatedDesc(act, m)
    return [node], [act]
