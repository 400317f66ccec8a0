"""A decode step's rotary embedding inside its attention kernel.

LLaMA, Mistral, Qwen, Phi-3, GPT-NeoX, GPT-J and the other rotary decoders rotate a layer's
queries and new keys (one :class:`~netpass.runtime.kinds.fused_elementwise.Rotary` launch for both:
``rotary.merge_rotary_pairs``), and the decode attention kernel then reads the rotated
queries and appends the rotated keys to the cache (``kv_append``). At a few rows the rotation
is a launch of its own for a few hundred elements: an NVIDIA enqueue (~8 us of host) and a
launch gap on the device per layer. :func:`fold_decode_rotaries` gives the attention the
rotation's inputs (the queries and keys before it, ``cos`` and ``sin``) as inputs of its own,
after its others, and marks the Rotary (``ProgramNode.rotary_fold``): where the decode kernel
runs (``RotaryFold.applies``: up to ``kernels.decode.DECODE_ROWS`` query rows) the Rotary
launches nothing and the attention kernel rotates each query and new key element as it loads
it (``kernels.decode.attention_decode``'s ``rot``); longer steps (prompts) run the Rotary as
before.

Per-head norms (Qwen3, Gemma 3: an RMSNorm of each head's queries and keys right before the
rotation, :class:`~netpass.runtime.kinds.normalization.RmsNorm` over the head axis, its scale
fused as one Multiply): where both the rotated queries and keys are such norms' outputs, the
attention takes the norms' inputs instead (and their scales, ``gamma``, as two more inputs),
the norms are marked too and launch nothing where the Rotary does not, and the kernel
normalizes each row as the norm would (``x * (1 / sqrt(mean(x^2) + eps)) * gamma``) before it
rotates it.

Views: the attention may read the rotated tensors through a Transpose (GPT-J and CodeGen
rotate ``[batch, rows, heads, head]`` before the heads' transpose), and the Rotary may read a
norm's output through one (Qwen3 normalizes before the transpose): permuted views read by
nothing else. The kernel then reads the tensors before the rotation through the composed
order of those Transposes, and ``cos`` and ``sin`` through the outer one
(:meth:`RotaryFold.read_strides`, :meth:`RotaryFold.table_strides`).

Conditions: the attention appends its new keys and values to the caches (``kv_append``), has
no batch views and takes q as it is (not transposed); its q and its new keys are the two
outputs of one Rotary (or permuted views of them, the same order for both), read by nothing
else but the keys' cache append (which copies nothing at those rows: ``append_by``) and
ShapeOf; q is 4-D ``[batch, heads, rows, head]``, the head axis last all along; ``cos`` and
``sin`` the same for every head (their head axis 1 or absent), their last axis the rotated
width.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ops.elementwise import Multiply
from .impls import broadcast_strides, contiguous_strides
from .kernels.decode import DECODE_ROWS
from .kinds.attention import MAX_HEAD, FusedAttention
from .kinds.base import static_dim
from .kinds.fused_elementwise import Rotary
from .kinds.normalization import RmsNorm
from .program_node import ProgramNode, data_users

F32 = np.dtype(np.float32)


class NormFold:
    """An RmsNorm of a head's queries or keys folded in with the Rotary that reads it: the
    node, its ``eps``, its scale's constant (``gamma``: None where it has none) and that
    scale's stride along the head (1, or 0 for one value)."""

    def __init__(self, node: ProgramNode, gamma: tuple | None, stride: int) -> None:
        self.node, self.eps, self.gamma, self.stride = node, node.subgraph.eps, gamma, stride

    def key(self) -> tuple:
        return (self.eps, self.gamma is not None)


class RotaryFold:
    """A Rotary folded into the decode attention that reads it: the rotated width and
    partners (``width``, ``interleaved``: kernels.decode's ``rot``), and the attention's
    inputs that hold the queries and new keys before the rotation (and a norm), ``cos`` and
    ``sin`` (``q``, ``k``, ``cos``, ``sin``: indices, after the attention's others), then the
    norms' scales where there are (``gq``, ``gk``). ``orders``: the orders the kernel reads
    the queries' and keys' tensors through into ``[batch, heads, rows, head]`` (None: as
    they are), ``outer`` the one of ``cos`` and ``sin`` (the Rotary's layout into the
    attention's); ``norms``: the two :class:`NormFold` (queries', keys') or None; ``rows``:
    the axis of the rows in the output of each node that launches nothing (node id)."""

    def __init__(self, rotary: ProgramNode, width: int, interleaved: bool, first: int,
                 orders: tuple, outer: tuple | None, norms: tuple | None) -> None:
        self.rotary, self.width, self.interleaved = rotary, width, interleaved
        self.q, self.k, self.cos, self.sin = first, first + 1, first + 2, first + 3
        self.orders, self.outer, self.norms = orders, outer, norms
        self.gq = self.gk = None
        at = first + 4
        for side, nf in zip(("gq", "gk"), norms or ()):
            if nf.gamma is not None:
                setattr(self, side, at)
                at += 1
        self.inputs = at - first
        self.rows = {rotary.id: outer[2] if outer else 2}
        for nf, order in zip(norms or (), orders):
            self.rows[nf.node.id] = order[2] if order else 2

    def key(self) -> tuple:
        return ("rotary_fold", self.width, self.interleaved, self.orders, self.outer,
                self.kernel())

    def kernel(self) -> tuple:
        """kernels.decode.attention_decode's ``rot``: (width, interleaved, norms)."""
        norms = tuple(nf.key() for nf in self.norms) if self.norms else None
        return (self.width, self.interleaved, norms)

    @staticmethod
    def applies(q_shape: tuple) -> bool:
        """Whether a step whose queries have ``q_shape`` runs the decode kernel (which
        rotates): up to DECODE_ROWS rows."""
        return len(q_shape) >= 2 and q_shape[-2] <= DECODE_ROWS

    def skips(self, node: ProgramNode, shape: tuple) -> bool:
        """Whether ``node`` (the Rotary or a norm) launches nothing for an output of
        ``shape``: the attention's decode kernel does its work."""
        axis = self.rows[node.id]
        return len(shape) > axis and shape[axis] <= DECODE_ROWS

    def read_strides(self, shapes: Sequence[tuple], strides: Sequence) -> list[list[int]]:
        """The strides over ``[batch, heads, rows, head]`` of the queries' and keys' tensors
        before the rotation (the attention's inputs ``q`` and ``k`` of ``shapes`` and
        ``strides``, None: dense), through ``orders``."""
        out = []
        for i, order in zip((self.q, self.k), self.orders):
            st = list(strides[i]) if strides[i] is not None else contiguous_strides(shapes[i])
            out.append([st[o] for o in order] if order else st)
        return out

    def table_strides(self, i: int, shapes: Sequence[tuple], strides: Sequence,
                      target: tuple) -> list[int]:
        """The strides of ``cos`` or ``sin`` (input ``i``) broadcast over ``target``
        (``[batch, heads, rows, width]``), through ``outer``."""
        shape = tuple(shapes[i])
        st = list(strides[i]) if strides[i] is not None else contiguous_strides(shape)
        pad = 4 - len(shape)
        shape, st = (1,) * pad + shape, [0] * pad + st
        if self.outer:
            shape, st = tuple(shape[o] for o in self.outer), [st[o] for o in self.outer]
        return broadcast_strides(shape, target, st)

    def host_nodes(self) -> list[ProgramNode]:
        """The nodes that launch nothing, in their order (a host fallback runs them)."""
        return [nf.node for nf in self.norms or ()] + [self.rotary]


def _per_position(src: tuple, width: int, head: int) -> bool:
    """``cos`` or ``sin`` the same for every head: rank 2 to 4, the head axis (``head`` of
    the Rotary's 4-D layout) 1 where there is one, the last axis ``width``."""
    ps = src[0].out_pshapes[src[1]]
    at = head - 4
    return src[0].out_dtypes[src[1]] == F32 and ps.rank_is_static and 2 <= len(ps) <= 4 \
        and static_dim(ps, -1) == width and (len(ps) < -at or static_dim(ps, at) == 1)


def _read_only_by(node: ProgramNode, k: int, reader: tuple, a: ProgramNode) -> bool:
    """Whether output ``k`` of ``node`` is read for its data by ``reader`` (node, input)
    alone, or by cache appends ``a`` does the work of."""
    return not node.is_output and all(
        (u, j) == reader or u.append_by is a for u, j in data_users(node, k=k))


def _view(a: ProgramNode, slot: int) -> tuple:
    """(producer, output, order, reader) of the tensor input ``slot`` of ``a`` reads: through
    a permuted view (a Transpose read by nothing else: its order, itself as the reader), or
    as it is (None, ``(a, slot)``)."""
    t, k = a.inputs[slot]
    if t.permute_view is not None and t.fused_into is None and _read_only_by(t, 0, (a, slot), a) \
            and len(t.permute_view) == 4 and t.permute_view[-1] == 3:
        return (*t.inputs[0], tuple(t.permute_view), (t, 0))
    return t, k, None, (a, slot)


def _compose(outer: tuple | None, inner: tuple | None) -> tuple | None:
    """The order of reading through ``inner`` then ``outer`` (None: as it is)."""
    if outer is None or inner is None:
        return outer or inner
    return tuple(inner[o] for o in outer)


def _gamma(n: ProgramNode, d: int) -> tuple | None:
    """(scale, stride) of RmsNorm ``n``'s fused ops: none ((None, 0)) or one Multiply of its
    value by a float32 constant of ``d`` or 1 values along the last axis; else None."""
    if not n.fused:
        return None, 0
    f = n.fused[0]
    if len(n.fused) != 1 or f.node is None or not f.node.is_a(Multiply) or len(f.others) != 1 \
            or len(f.refs) != 2 or set(f.refs) != {0, None} or f.out_dtype != F32:
        return None
    src, k = f.others[0]
    v = np.asarray(src.value) if src.is_constant and src.value is not None else None
    if v is None or v.dtype != F32 or v.ndim > 4 or v.size not in (1, d) \
            or (v.ndim and v.shape[-1] != v.size):
        return None
    return (src, k), 1 if v.size == d and d > 1 else 0


def _ends_in(n: ProgramNode, v: ProgramNode) -> bool:
    """Whether ``v`` is the value of ``n`` after its fused ops (``n`` itself without), the
    ones before read by nothing but the next."""
    if not n.fused:
        return v is n
    chain = [n] + [f.node for f in n.fused[:-1]]
    return n.fused[-1].node is v and all(u.fused_into is n for c in chain
                                         for u, _ in data_users(c))


def _norm(r: ProgramNode, i: int, a: ProgramNode, d: int) -> tuple | None:
    """(NormFold, inner order) of the RmsNorm input ``i`` of Rotary ``r`` reads (through a
    permuted view or not; its value or its fused scale's), read by nothing else; else
    None."""
    v, k = r.inputs[i]
    order = None
    if v.permute_view is not None and r.permuted_inputs.get(i) == v.permute_view \
            and v.fused_into is None and _read_only_by(v, 0, (r, i), a) \
            and v.permute_view[-1] == 3:
        order, reader = tuple(v.permute_view), (v, 0)
        v, k = v.inputs[0]
    else:
        reader = (r, i)
    n = v.fused_into if v.fused_into is not None else v
    if not n.is_a(RmsNorm) or k or n.num_outputs != 1 or n.out_dtypes[0] != F32 \
            or n.rotary_fold is not None or n.fused_into is not None \
            or not _read_only_by(v, 0, reader, a) or not _ends_in(n, v):
        return None
    gamma = _gamma(n, d)
    return None if gamma is None else (NormFold(n, *gamma), order)


def _foldable(a: ProgramNode) -> RotaryFold | None:
    """The fold of the Rotary attention ``a`` reads its queries and new keys from (module
    docstring), or None."""
    desc = a.subgraph
    if not a.is_a(FusedAttention) or desc.appends != 2 or desc.deps or desc.ta \
            or desc.source is not None or getattr(desc, "rotary", None) is not None:
        return None
    first = len(a.inputs) - 2
    r, kq, outer, q_reader = _view(a, 0)
    r2, kk, outer2, k_reader = _view(a, first)
    if r is not r2 or outer != outer2 or not r.is_a(Rotary) or r.num_outputs != 2 \
            or {kq, kk} != {0, 1} or r.is_output or r.fused or r.fused_into is not None \
            or r.rotary_fold is not None or any(dt != F32 for dt in r.out_dtypes) \
            or not _read_only_by(r, kq, q_reader, a) or not _read_only_by(r, kk, k_reader, a):
        return None
    ps = r.out_pshapes[kq]
    d = static_dim(ps, -1) if ps.rank_is_static and len(ps) == 4 else None
    width = r.subgraph.rotated or d
    head = outer[1] if outer else 1
    if d is None or d > MAX_HEAD or not width or width % 2 \
            or not all(_per_position(r.inputs[i], width, head) for i in (1, 2)):
        return None
    taken = [0 if kq == 0 else 3, 0 if kk == 0 else 3]  # (the Rotary's inputs of q and k)
    norms = [_norm(r, i, a, d) for i in taken]
    if all(nf is not None for nf in norms):
        folded = tuple(nf[0] for nf in norms if nf is not None)
        orders = tuple(_compose(outer, nf[1]) for nf in norms if nf is not None)
    else:
        folded, orders = None, (outer, outer)
    return RotaryFold(r, width, r.subgraph.interleaved, len(a.inputs), orders, outer, folded)


def _add_input(a: ProgramNode, src: tuple, reader: ProgramNode | None = None,
               i: int = 0) -> None:
    """``src`` a new input of ``a``, read as ``reader`` reads its input ``i`` (a permuted or
    strided view: the kernel too)."""
    j = len(a.inputs)
    src[0].users[src[1]].append((a, j))
    if reader is not None and i in reader.permuted_inputs:
        a.permuted_inputs[j] = reader.permuted_inputs[i]
    if reader is not None and i in reader.strided_inputs:
        a.strided_inputs.add(j)
    a.inputs = a.inputs + [src]


def fold_decode_rotaries(nodes: list) -> None:
    """Fold the Rotary (and the per-head norms before it) of each decode attention of
    ``nodes`` (linked, its cache appends attached) into it (module docstring)."""
    for a in nodes:
        fold = _foldable(a)
        if fold is None:
            continue
        r = fold.rotary
        _, kq, _, _ = _view(a, 0)
        taken = [0 if kq == 0 else 3, 3 if kq == 0 else 0]  # (the Rotary's inputs of q and k)
        for t, i in enumerate(taken):
            if fold.norms:
                n = fold.norms[t].node
                _add_input(a, n.inputs[0], n, 0)
            else:
                _add_input(a, r.inputs[i], r, i)
        for i in (1, 2):
            _add_input(a, r.inputs[i], r, i)
        for nf in fold.norms or ():
            if nf.gamma is not None:
                _add_input(a, nf.gamma)
            nf.node.rotary_fold = fold
        a.subgraph.rotary = fold
        r.rotary_fold = fold
