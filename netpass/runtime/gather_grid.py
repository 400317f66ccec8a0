"""GatherND over a grid of aranges as a Slice and a Reshape (views of its data).

The dynamo exporter writes a decoder's padding mask as ``GatherND(mask [B, N], indices)``
whose indices stack ``arange(B)`` along the output's first axis and ``arange(L)`` along its
last (``[B, 1, 1, L, 2]``): the mask's first L columns seen as ``[B, 1, 1, L]``. Run as
written, the host makes the grid of index pairs every step (a value growing with the length
in no form the length tape fits: every decode step left its fast path) and a kernel gathers
it. The index forms (``index_forms``) prove what it is: :func:`slice_grid_gathers` replaces
the GatherND by ``Reshape(Slice(data, 0, ends), shape)``, the ends and the shape read off the
indices' shape (their values are then never made).

A GatherND of constant indices holding one index tuple (Falcon's dynamo export picks each of
its queries, keys and values out of the fused projection so) is a Slice of one element along
each axis the tuple indexes, and a Squeeze where the indices' leading dims are fewer.

Conditions: ``batch_dims`` 0; the indices a Concat along their last axis of one piece per
data axis (a gather of elements), each with a last dim of 1 and the form ``i[a_c]`` (base 0,
slope 1 along one output axis ``a_c``, 0 along the others, or unknown along a static 1), the
``a_c`` increasing (the data's order), every other output axis a static 1. Where an index
would pass the data's end (a model outside the exporter's contract) the Reshape raises
instead of the kernel reading zeros.
"""
from __future__ import annotations

import numpy as np

from ..core.boundary import Constant
from ..core.dimension import Dimension
from ..core.shape import PartialShape
from ..ops.indexing import Gather, GatherND
from ..ops.movement import Concat, Reshape, Slice, Squeeze
from ..ops.shape_ops import ShapeOf
from .index_forms import form_of, static_one
from .program_node import ProgramNode, splice

I64 = np.dtype(np.int64)


def _grid_axes(g: ProgramNode) -> list[int] | None:
    """The output axis each index component of GatherND ``g`` runs along (module docstring),
    or None where the indices are not such a grid."""
    if g.attrs.get("batch_dims", 0) or len(g.inputs) != 2:
        return None
    (data, dk), (idx, ik) = g.inputs
    dps, ips = data.out_pshapes[dk], idx.out_pshapes[ik]
    if not dps.rank_is_static or not ips.rank_is_static or not idx.is_a(Concat) \
            or len(idx.inputs) != len(dps) \
            or int(idx.attrs.get("axis", 0)) % len(ips) != len(ips) - 1:
        return None
    rank = len(ips) - 1
    axes = []
    for piece, k in idx.inputs:
        ps, form = piece.out_pshapes[k], form_of(piece, k)
        if form is None or form.base != 0 or not ps.rank_is_static or len(ps) != rank + 1 \
                or not static_one(ps[rank]):
            return None
        ones = [a for a in range(rank) if form.slopes[a] == 1]
        rest = [a for a in range(rank) if a not in ones]
        if len(ones) != 1 or not all(form.slopes[a] == 0 or static_one(ps[a]) for a in rest):
            return None
        axes.append(ones[0])
    others = [a for a in range(rank) if a not in axes]
    if axes != sorted(set(axes)) or not all(static_one(ips[a]) for a in others):
        return None
    return axes


def _constant(name: str, value) -> ProgramNode:
    return ProgramNode(name, Constant.type_name, value=np.array(value, I64))


def _as_slice(g: ProgramNode, axes: list[int]) -> list:
    """The nodes standing for GatherND ``g``: the indices' shape, the slice's ends and the
    output's shape picked from it, the Slice of the data, the Reshape (last)."""
    (data, dk), (idx, ik) = g.inputs
    rank, n = len(idx.out_pshapes[ik]) - 1, len(axes)
    shape = ProgramNode(f"{g.id}/grid_shape", ShapeOf.type_name, {}, [(idx, ik)],
                        out_dtypes=[I64], out_pshapes=[PartialShape([Dimension(rank + 1)])])
    consts = [_constant(f"{g.id}/{what}", v) for what, v in (
        ("axes", axes), ("axis", 0), ("zeros", [0] * n), ("ones", [1] * n),
        ("data_axes", list(range(n))), ("first", [0]), ("last", [rank]), ("step", [1]))]
    picked, axis, zeros, ones, data_axes, first, last, step = [(c, 0) for c in consts]
    ends = ProgramNode(f"{g.id}/grid_ends", Gather.type_name, {}, [(shape, 0), picked, axis],
                       out_dtypes=[I64], out_pshapes=[PartialShape([Dimension(n)])])
    out_shape = ProgramNode(f"{g.id}/grid_out", Slice.type_name, {},
                            [(shape, 0), first, last, step], out_dtypes=[I64],
                            out_pshapes=[PartialShape([Dimension(rank)])])
    out_ps = g.out_pshapes[0]
    sliced = ProgramNode(f"{g.id}/columns", Slice.type_name, {},
                         [(data, dk), zeros, (ends, 0), ones, data_axes],
                         out_dtypes=[data.out_dtypes[dk]],
                         out_pshapes=[PartialShape([out_ps[a] for a in axes])
                                      if out_ps.rank_is_static else PartialShape(None)])
    view = ProgramNode(g.id, Reshape.type_name, {"special_zero": False},
                       [(sliced, 0), (out_shape, 0)], out_dtypes=g.out_dtypes,
                       out_pshapes=g.out_pshapes, name=g.name)
    return consts + [shape, ends, out_shape, sliced, view]


def _one_tuple(g: ProgramNode) -> list[int] | None:
    """The index tuple of GatherND ``g`` whose constant indices hold one (Falcon's dynamo
    export picks its queries, keys and values out of the fused projection so: ``x[-2]``),
    where each component is in range of a static dim and the indices' leading dims are no
    more than its components; else None."""
    (data, dk), (idx, _) = g.inputs
    v, ps = idx.value, data.out_pshapes[dk]
    if g.attrs.get("batch_dims", 0) or v is None or not idx.is_constant or not v.ndim \
            or v.size != v.shape[-1] or not ps.rank_is_static or v.shape[-1] > len(ps) \
            or v.ndim - 1 > v.shape[-1]:
        return None
    comps = [int(c) for c in v.reshape(-1)]
    if not all(ps[a].is_static and -ps[a].min <= c < ps[a].min for a, c in enumerate(comps)):
        return None
    return comps


def _as_row_slice(g: ProgramNode, comps: list[int]) -> list:
    """The nodes standing for GatherND ``g`` of the one index tuple ``comps``: a Slice of the
    data's first ``len(comps)`` axes to one element each, then (where the indices' leading
    dims are fewer) a Squeeze of the extra ones (last)."""
    (data, dk), (idx, _) = g.inputs
    m, lead = len(comps), len(idx.out_pshapes[0]) - 1
    stops = [c + 1 if c != -1 else np.iinfo(np.int64).max for c in comps]
    consts = [_constant(f"{g.id}/{what}", v) for what, v in (
        ("starts", comps), ("stops", stops), ("steps", [1] * m), ("axes", list(range(m))))]
    ps = data.out_pshapes[dk]
    sliced_ps = PartialShape([Dimension(1)] * m + list(ps)[m:])
    sliced = ProgramNode(f"{g.id}/row" if m != lead else g.id, Slice.type_name, {},
                         [(data, dk)] + [(c, 0) for c in consts], out_dtypes=g.out_dtypes,
                         out_pshapes=[sliced_ps if m != lead else g.out_pshapes[0]],
                         name=None if m != lead else g.name)
    if m == lead:
        return consts + [sliced]
    axes = _constant(f"{g.id}/squeezed", list(range(m - lead)))
    squeezed = ProgramNode(g.id, Squeeze.type_name, {}, [(sliced, 0), (axes, 0)],
                           out_dtypes=g.out_dtypes, out_pshapes=g.out_pshapes, name=g.name)
    return consts + [sliced, axes, squeezed]


def slice_grid_gathers(nodes: list) -> list:
    """``nodes`` (topological) with each GatherND over a grid of aranges (module docstring)
    replaced by a Slice of its data and a Reshape, and each of one constant index tuple by a
    Slice (views)."""
    replace = {}
    for g in nodes:
        if not g.is_a(GatherND) or len(g.inputs) != 2:
            continue
        comps = _one_tuple(g)
        made = _as_row_slice(g, comps) if comps is not None else None
        if made is None:
            axes = _grid_axes(g)
            made = _as_slice(g, axes) if axes is not None else None
        if made is not None:
            replace[id(g)] = made
    return splice(nodes, replace, set())
