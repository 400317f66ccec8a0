"""The program pass that decides how each variable of ``ReadValue`` / ``Assign`` is updated
(:func:`mark_state`): appended in place along a capacity layout, where every reader of the
variable's views reads through strides, or copied (the two ways of :mod:`~netpass.runtime.state`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..ops.matmul import MatMul
from ..ops.movement import Broadcast, Concat, Reshape, Squeeze, Tile, Transpose, Unsqueeze
from ..ops.state import Assign, ReadValue
from .kinds import FusedAttention
from .kinds.base import same_dim
from .program_node import data_users

if TYPE_CHECKING:  # pragma: no cover
    from .program import Program, ProgramNode

READ, APPEND, ASSIGN = "read", "append", "assign"
RESHAPES = (Reshape, Squeeze, Unsqueeze)
# Copies whose kernels walk their input through any strides (kinds.movement: transpose_impl,
# broadcast_impl, tile_impl): the repeat of grouped-query attention's keys is a Broadcast.
COPY_READERS = (Transpose, Broadcast, Tile)


def _keeps_strided_dims(src: Any, out: Any, axis: int) -> int | None:
    """Where dim ``axis`` (the one a capacity layout strides) of a reshape's input of partial
    shape ``src`` lands in its output of partial shape ``out``, when the reshape is a view of a
    capacity layout, else None: either it leaves dims ``0..axis`` alone apart from size-1 dims
    inserted or removed and only reshapes the contiguous dims after them, or it keeps dim
    ``axis`` and regroups only the dims before it among themselves (as ``[batch, heads, past,
    d] -> [batch * heads, past, d]``: in a capacity layout they are contiguous among
    themselves) and the static dims after it."""
    if not src.rank_is_static or not out.rank_is_static:
        return None
    def strip(dims: list, upto: int) -> list:
        return [d for d in dims[:upto] if not d.min == d.max == 1]
    a = strip(list(src), axis + 1)
    # the out dims that stand for src dims 0..axis: as many non-1 dims as src has
    kept: list = []
    rest = list(out)
    while rest and len(kept) < len(a):
        d = rest.pop(0)
        if not d.min == d.max == 1:
            kept.append(d)
    if len(kept) == len(a) and all(same_dim(x, y) for x, y in zip(a, kept)):
        return axis + len(out) - len(src)
    return _merged_before_axis(list(src), list(out), axis)


def _static_size(dims: list) -> int | None:
    sizes = [d.min for d in dims if d.min == d.max]
    return int(np.prod(sizes)) if len(sizes) == len(dims) else None


def _merged_before_axis(src: list, out: list, axis: int) -> int | None:
    """The out position of dim ``axis`` when ``out`` keeps it and the static dims after it
    hold as many elements as ``src``'s after it (so the dims before it hold as many too: a
    regrouping of those alone), else None."""
    after = _static_size(src[axis + 1:])
    if after is None:
        return None
    for p, d in enumerate(out):
        if same_dim(src[axis], d) and _static_size(out[p + 1:]) == after:
            return p
    return None


def _stride_readers(node: ProgramNode, k: int, axis: int, allowed: set[int],
                    found: list) -> bool:
    """Whether every reader of output ``k`` of ``node`` can take a capacity-strided view:
    ``allowed`` nodes (the append and its Assign), ShapeOf, a GEMM or fused-attention input,
    a permuted view read by one, a copy that walks any strides (COPY_READERS), a reshape-like
    that keeps the strided dims (recursively). The stride-reading inputs are appended to
    ``found`` as (node, input index)."""
    if node.is_output:
        return False
    for u, j in node.users[k]:
        if id(u) in allowed or not u.reads_data:
            continue
        if u.fused_into is not None:
            return False
        if (u.is_a(MatMul) and j < 2) or u.is_a(FusedAttention) or \
                (u.is_a(*COPY_READERS) and j == 0 and u.permute_view is None and not u.fused):
            found.append((u, j))
        elif u.is_output:  # (a view of the variable's buffer cannot be an output)
            return False
        elif u.permute_view is not None:
            found.append(data_users(u)[0])  # (a permuted view has one reader)
        elif u.is_a(*RESHAPES) and j == 0:
            src, out = node.out_pshapes[k], u.out_pshapes[0]
            # (Squeeze / Unsqueeze only remove / insert size-1 dims: any strides stay valid)
            inner = _keeps_strided_dims(src, out, axis) if u.is_a(Reshape) else \
                axis + len(out) - len(src)
            if inner is None or inner < 0 or not _stride_readers(u, 0, inner, set(), found):
                return False
        else:
            return False
    return True


def _append_axis(assign: ProgramNode) -> int | None:
    """The concat axis when ``assign`` writes ``Concat(ReadValue(v), x)`` of its own variable
    ``v`` and that can grow in place (see the module docstring), else None."""
    c, k = assign.inputs[0]
    vid = assign.attrs.get("variable_id")
    if not c.is_a(Concat) or k != 0 or len(c.inputs) != 2 or c.fused or c.fused_into is not None \
            or c.is_output or c.in_shape_of_subgraph or c.inplace_concat:
        return None
    read, rk = c.inputs[0]
    if not read.is_a(ReadValue) or read.attrs.get("variable_id") != vid or rk != 0:
        return None
    ps = c.out_pshapes[0]
    dts = {c.out_dtypes[0], read.out_dtypes[0], c.inputs[1][0].out_dtypes[c.inputs[1][1]]}
    if not ps.rank_is_static or len(dts) != 1:
        return None
    axis = int(c.attrs.get("axis", 0))
    axis = axis + len(ps) if axis < 0 else axis
    found: list = []
    if not (_stride_readers(c, 0, axis, {id(assign)}, found)
            and _stride_readers(read, 0, axis, {id(c)}, found)):
        return None
    for u, j in found:
        u.strided_inputs.add(j)
    return axis


def mark_state(program: Program) -> None:
    """Give ReadValue, Assign and in-place append Concat nodes their ``state_role`` (READ,
    ASSIGN, APPEND), ``state_var`` (the variable id) and ``state_axis`` (the append axis of
    the variable's capacity layout, None for copied variables); list them in
    ``program.reads`` / ``program.sinks``. A ReadValue aliases its init input, so the memory
    pool treats it as an aliasing user (``optimized``)."""
    program.reads = [n for n in program.nodes if n.is_a(ReadValue)]
    program.sinks = [n for n in program.nodes if n.is_a(Assign)]
    reads_of: dict[str, int] = {}
    for n in program.reads:
        n.state_role, n.state_var = READ, n.attrs["variable_id"]
        n.optimized = True
        reads_of[n.state_var] = reads_of.get(n.state_var, 0) + 1
    for a in program.sinks:
        a.state_role, a.state_var = ASSIGN, a.attrs["variable_id"]
        # one ReadValue only: every view of the buffer is then checked for stride readers
        axis = _append_axis(a) if reads_of.get(a.state_var) == 1 else None
        if axis is None:
            continue
        c = a.inputs[0][0]
        c.state_role, c.state_var, c.state_axis = APPEND, a.state_var, axis
        a.state_axis = c.inputs[0][0].state_axis = axis
