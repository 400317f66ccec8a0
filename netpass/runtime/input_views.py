"""Transposes a GEMM, a fused attention or a rotary embedding reads through, as strided views
(no kernel, no buffer): OpenVINO's gemm input transpose orders, and the per-head layouts of
attention.

- :func:`fold_input_permutes`: a Transpose by a constant order read only by a MatMul (or a
  fused attention's q, k or v, or a Rotary's x).
- :func:`fold_view_chains`: Transposes deeper in a chain of views that ends at such an input:
  Reshapes that only split dims and Transposes, each read once (torchvision's attention:
  ``Reshape [S, B H, Dh] -> Transpose [B H, S, Dh] -> Reshape [B, H, S, Dh]`` per head, where
  the Reshape kept the Transpose a copy). The chain is checked on its static shapes: every
  Reshape must have strides over the permuted layout (``impls.reshape_strides``), which the
  runtime's reshape of a strided tensor then finds again.
"""
from __future__ import annotations

import numpy as np

from ..ops.matmul import MatMul
from ..ops.movement import Reshape, Slice, Split, Transpose, VariadicSplit
from .impls import contiguous_strides, reshape_strides
from .kinds import FusedAttention, Rotary
from .program_node import ProgramNode, data_users


def _permute_order(t: ProgramNode) -> tuple | None:
    """The constant order of a Transpose that may be a view (read once, same dtype)."""
    if not t.is_a(Transpose) or t.is_output or t.fused or len(data_users(t)) != 1 \
            or not t.inputs[1][0].is_constant or t.in_shape_of_subgraph \
            or t.inputs[0][0].out_dtypes[t.inputs[0][1]] != t.out_dtypes[0]:
        return None
    order = tuple(int(x) for x in np.asarray(t.inputs[1][0].value).reshape(-1))
    return order if len(order) >= 2 and sorted(order) == list(range(len(order))) else None


def _readers(nodes: list) -> list:
    """(node, input index) of every MatMul operand, fused attention q, k, v and rotated
    tensor (``rotary``: per-head layouts are rotated before the attention reads them; a
    Rotary of two tensors rotates inputs 0 and 3)."""
    return [(m, j) for m in nodes if m.is_a(MatMul, FusedAttention, Rotary)
            and m.fused_into is None for j in ((0, 1) if m.is_a(MatMul) else (0, 1, 2) if
                                               m.is_a(FusedAttention) else (0, 3)[:m.num_outputs])]


def fold_input_permutes(nodes: list) -> None:
    """A Transpose by a constant order whose only user is a MatMul (or a fused attention's
    q, k or v, or a Rotary's x) becomes a strided view the kernel reads through."""
    for m, j in _readers(nodes):
        t, k = m.inputs[j]
        order = _permute_order(t)
        if order is not None:
            t.permute_view = order
            t.optimized = True
            m.permuted_inputs[j] = order


def _chain(m: ProgramNode, j: int) -> list | None:
    """The views from input ``j`` of ``m`` back to the innermost Transpose, innermost first:
    Transposes (constant orders) and Reshapes, each read once and of static shape, with a
    Reshape between two of them or after one; None where there is nothing to fold or the
    data under the innermost Transpose may itself be strided."""
    chain: list = []
    node, k = m.inputs[j]
    while k == 0 and not node.is_output and len(data_users(node)) == 1 \
            and node.out_pshapes[0].is_static and not node.fused \
            and not node.in_shape_of_subgraph:
        if node.permute_view is not None or _permute_order(node) is not None or node.is_a(Reshape):
            chain.append(node)
        else:
            break
        node, k = node.inputs[0]
    while chain and not chain[-1].is_a(Transpose):
        chain.pop()
    if not any(n.is_a(Reshape) for n in chain):
        return None
    base, k = chain[-1].inputs[0]
    shape = base.out_pshapes[k]
    while base.is_a(Reshape) and k == 0:
        base, k = base.inputs[0]
    if not shape.is_static or base.is_a(Split, VariadicSplit, Slice) \
            or base.permute_view is not None or base.strided_view:
        return None  # (a split piece or a slice may itself become a strided view)
    chain.reverse()
    return chain if _fits(chain, tuple(shape.to_shape())) else None


def _fits(chain: list, shape: tuple) -> bool:
    """Whether each Reshape of ``chain`` (innermost first) has strides over the layout the
    Transposes before it leave, from a contiguous ``shape``."""
    strides = contiguous_strides(shape)
    for n in chain:
        out = tuple(n.out_pshapes[0].to_shape())
        if n.is_a(Transpose):
            order = n.permute_view or _permute_order(n)
            if order is None:
                return False
            strides = [strides[o] for o in order]
        else:
            st = reshape_strides(shape, strides, out)
            if st is None:
                return False
            strides = st
        shape = out
    return True


def fold_view_chains(nodes: list) -> None:
    """The Transposes of every chain :func:`_chain` finds become permuted views, and the
    reader takes its input as a strided tensor."""
    for m, j in _readers(nodes):
        chain = _chain(m, j)
        if not chain:
            continue
        for n in chain:
            if n.is_a(Transpose) and n.permute_view is None:
                n.permute_view = _permute_order(n)
                n.optimized = True
        m.strided_inputs.add(j)
