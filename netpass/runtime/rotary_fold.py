"""A decode step's rotary embedding inside its attention kernel.

LLaMA, Mistral, Qwen, Phi-3, GPT-NeoX, GPT-J and the other rotary decoders rotate a layer's
queries and new keys (one :class:`~netpass.runtime.kinds.elementwise.Rotary` launch for both:
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

Conditions: the attention appends its new keys and values to the caches (``kv_append``), has
no batch views and takes q as it is (not transposed); its q and its new keys are the two
outputs of one Rotary, read by nothing else but the keys' cache append (which copies nothing
at those rows: ``append_by``) and ShapeOf; q is 4-D ``[batch, heads, rows, head]``; ``cos``
and ``sin`` the same for every head (their head axis 1 or absent), their last axis the
rotated width.
"""
from __future__ import annotations

import numpy as np

from .kernels.decode import DECODE_ROWS
from .kinds.attention import MAX_HEAD, FusedAttention
from .kinds.elementwise import Rotary
from .program_node import ProgramNode

F32 = np.dtype(np.float32)


class RotaryFold:
    """A Rotary folded into the decode attention that reads it: the rotated width and
    partners (``width``, ``interleaved``: kernels.decode's ``rot``), and the attention's
    inputs that hold the queries and new keys before the rotation, ``cos`` and ``sin``
    (``q``, ``k``, ``cos``, ``sin``: indices, the last four)."""

    def __init__(self, rotary: ProgramNode, width: int, interleaved: bool, first: int) -> None:
        self.rotary, self.width, self.interleaved = rotary, width, interleaved
        self.q, self.k, self.cos, self.sin = first, first + 1, first + 2, first + 3
        self.inputs = 4

    def key(self) -> tuple:
        return ("rotary_fold", self.width, self.interleaved)

    @staticmethod
    def applies(q_shape: tuple) -> bool:
        """Whether a step whose queries have ``q_shape`` runs the decode kernel (which
        rotates): up to DECODE_ROWS rows."""
        return len(q_shape) >= 2 and q_shape[-2] <= DECODE_ROWS


def _static(ps, i: int) -> int | None:
    d = ps[i]
    return d.min if d.min == d.max else None


def _per_position(src: tuple, width: int) -> bool:
    """``cos`` or ``sin`` the same for every head: rank 2 to 4, the head axis (-3) 1 where
    there is one, the last axis ``width``."""
    ps = src[0].out_pshapes[src[1]]
    return src[0].out_dtypes[src[1]] == F32 and ps.rank_is_static and 2 <= len(ps) <= 4 \
        and _static(ps, -1) == width and (len(ps) < 3 or _static(ps, -3) == 1)


def _foldable(a: ProgramNode) -> RotaryFold | None:
    """The fold of the Rotary attention ``a`` reads its queries and new keys from (module
    docstring), or None."""
    desc = a.subgraph
    if not a.is_a(FusedAttention) or desc.appends != 2 or desc.deps or desc.ta \
            or desc.source is not None or getattr(desc, "rotary", None) is not None:
        return None
    first = len(a.inputs) - 2
    (r, kq), (r2, kk) = a.inputs[0], a.inputs[first]
    if r is not r2 or not r.is_a(Rotary) or r.num_outputs != 2 or {kq, kk} != {0, 1} \
            or r.is_output or r.fused or r.fused_into is not None or r.rotary_fold is not None \
            or any(dt != F32 for dt in r.out_dtypes):
        return None
    for k, slot in ((kq, 0), (kk, first)):
        for u, j in r.users[k]:
            if (u, j) != (a, slot) and u.reads_data and u.append_by is not a:
                return None
    ps = r.out_pshapes[kq]
    d = _static(ps, -1) if ps.rank_is_static and len(ps) == 4 else None
    width = r.subgraph.rotated or d
    if d is None or d > MAX_HEAD or not width or width % 2 \
            or not all(_per_position(r.inputs[i], width) for i in (1, 2)):
        return None
    return RotaryFold(r, width, r.subgraph.interleaved, len(a.inputs))


def fold_decode_rotaries(nodes: list) -> None:
    """Fold the Rotary of each decode attention of ``nodes`` (linked, its cache appends
    attached) into it (module docstring)."""
    for a in nodes:
        fold = _foldable(a)
        if fold is None:
            continue
        r = fold.rotary
        (_, kq), (_, kk) = a.inputs[0], a.inputs[-2]
        taken = [0 if kq == 0 else 3, 0 if kk == 0 else 3, 1, 2]  # (the Rotary's inputs)
        added = [r.inputs[i] for i in taken]
        for j, i, (src, k) in zip(range(len(a.inputs), len(a.inputs) + 4), taken, added):
            src.users[k].append((a, j))
            if i in r.permuted_inputs:  # (views the Rotary reads through: the kernel too)
                a.permuted_inputs[j] = r.permuted_inputs[i]
            if i in r.strided_inputs:
                a.strided_inputs.add(j)
        a.inputs = a.inputs + added
        a.subgraph.rotary = fold
        r.rotary_fold = fold
