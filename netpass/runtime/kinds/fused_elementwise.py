"""Elementwise kinds the runtime makes itself, never ops of a model: ``Rotary`` (rotary position
embeddings, ``netpass.runtime.rotary``), ``GatedActivation`` (a gated MLP's ``act(gate) * up``,
``netpass.runtime.parallel_gemms``) and ``Unaries`` (several unary chains of one input in one
launch, ``netpass.runtime.unaries``): each a kind, its node's description and its row.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ...errors import ShapeInferenceError
from ..impls import (
    FusedDesc,
    Impl,
    Launch,
    Params,
    broadcast_strides,
    collapse,
    evaluate_fused,
    fused_stages,
    size,
    work_1d,
)
from ..kernels.common import Stage
from ..kernels.eltwise import gated_activation, rotary, unaries
from ..shape_infer import infer_host
from .base import OpKind, table

F32 = np.dtype(np.float32)


class Rotary:
    """The kind of ``x * cos + rotate(x) * sin`` over the last axis (rotary position
    embeddings), made by ``netpass.runtime.rotary``, never an op of a model; inputs ``x``,
    ``cos``, ``sin`` (the latter two broadcast into ``x``), and optionally a second tensor
    rotated alike as input 3, its result output 1 (a layer's queries and keys in one launch);
    its node's ``subgraph`` is a :class:`RotaryDesc`."""

    type_name: ClassVar[str] = "Rotary"


class RotaryDesc:
    """What a Rotary computes, and the nodes it replaced (for messages). ``rotated``: the
    width of the last axis's leading part it rotates, the rest passing as it is (partial
    rotary: GPT-NeoX, Phi, StableLM), or None for the whole axis. ``interleaved``: an
    element's partner is its neighbour (GPT-J's ``rotate_every_two``: ``-x[j + 1]`` at even
    ``j``, ``x[j - 1]`` at odd), else half the rotated part away (``rotate_half``)."""

    def __init__(self, nodes: list, rotated: int | None = None,
                 interleaved: bool = False) -> None:
        self.nodes, self.rotated, self.interleaved = nodes, rotated, interleaved

    def key(self) -> tuple:
        return ("rotary", self.rotated, self.interleaved)

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        # (the kernel reads cos and sin through broadcast strides: one that does not broadcast
        # into a rotated part would be read past its buffer; position_ids of another length)
        for x in [shapes[0], *shapes[3:]]:
            part = tuple(x[:-1]) + (self.rotated or (x[-1] if x else 0),)
            for j in (1, 2):
                if len(shapes[j]) > len(part) or any(
                        c not in (1, p) for c, p in zip(shapes[j][::-1], part[::-1])):
                    names = ", ".join(f"'{n.name}'" for n in self.nodes[-2:])
                    raise ShapeInferenceError(
                        f"rotary embedding (the nodes {names}): cos and sin of shapes "
                        f"{list(shapes[1])} and {list(shapes[2])} do not broadcast into the "
                        f"rotated part {list(part)} of {list(x)}")
        return rotary_shapes({}, list(shapes), {})

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        cos, sin = np.asarray(arrays[1]), np.asarray(arrays[2])
        out = []
        for x in [np.asarray(arrays[0])] + [np.asarray(a) for a in arrays[3:]]:
            w = self.rotated or x.shape[-1]
            part, h = x[..., :w], w // 2
            if self.interleaved:
                rot = np.stack([-part[..., 1::2], part[..., ::2]], axis=-1).reshape(part.shape)
            else:
                rot = np.concatenate([-part[..., h:], part[..., :h]], axis=-1)
            y = np.array(x, copy=True)
            y[..., :w] = part * cos + rot * sin
            out.append(y.astype(x.dtype))
        return out


def rotary_shapes(attrs: dict, shapes: list, values: dict) -> list[tuple]:
    """A Rotary's outputs: the shapes of its rotated inputs (0, and 3 where there is one)."""
    return [tuple(shapes[0])] + [tuple(s) for s in shapes[3:]]


def _rotary_args(p: Params, j: int, out: tuple, k: int,
                 rotated: int | None) -> tuple[list, int] | None:
    """(spec, rank) of rotated input ``j`` into output ``k`` (module docstring of
    kernels.eltwise.rotary): ``x`` through its strides where it is a view, ``cos`` and
    ``sin`` broadcast into the rotated part (``rotated`` wide, or the whole last axis); the
    last axis kept apart (an element's partner is half the rotated part away)."""
    w = rotated or (out[-1] if out else 0)
    if not out or w % 2 or w > out[-1]:
        return None
    x_st = p.in_strides[j] if p.in_strides else None
    part = tuple(out[:-1]) + (w,)
    strides = [broadcast_strides(p.in_shapes[j], out, x_st)] + \
        [broadcast_strides(p.in_shapes[i], part) for i in (1, 2)]
    dims, lead = collapse(list(out[:-1]), [st[:-1] for st in strides])
    dims = dims + [out[-1]]
    strides = [ls + [st[-1]] for ls, st in zip(lead, strides)]
    spec: list = [("i", j), ("i", 1), ("i", 2), ("o", k), size(out), w // 2] + dims
    return spec + [s for st in strides for s in st], len(dims)


def rotary_impl(p: Params, key: Any) -> Impl | None:
    """One ``rotary`` launch over the output(s) (:func:`_rotary_args` per rotated tensor)."""
    if any(np.dtype(d) != F32 for d in p.in_dtypes):
        return None
    fold, desc = p.node.rotary_fold, getattr(p.node, "subgraph", None)
    if fold is not None and fold.skips(p.node, p.out_shapes[0]):
        return Impl(key, [])  # (its attention's decode kernel rotates: rotary_fold)
    parts, rotated = [], getattr(desc, "rotated", None)
    for k, (j, out) in enumerate(zip([0, 3], p.out_shapes)):
        part = _rotary_args(p, j, tuple(out), k, rotated)
        if part is None:
            return None
        parts.append(part)
    n = sum(size(out) for out in p.out_shapes)
    if not n:
        return Impl(key, [])
    spec = [x for part in parts for x in part[0]]
    interleaved = getattr(desc, "interleaved", False)
    ranks = [part[1] for part in parts] + [None] * (2 - len(parts))
    src = rotary(*ranks, interleaved)
    return Impl(key, [Launch(src, *work_1d(n), spec)])


class GatedActivation:
    """The kind of ``act(x[..., :h]) * x[..., h:]`` over the last axis of 2h (a gated MLP's
    activation of its gate times its up projection, the two projections' columns side by side
    in one GEMM; ``act`` any elementwise function of one tensor: SiLU, GELU, ReLU...), made by
    ``netpass.runtime.parallel_gemms.merge_gated_mlps`` (and folded into a FullyConnected that
    reads it: ``fold_gated_inputs``), never an op of a model; its node's ``subgraph`` is a
    :class:`GatedActivationDesc`."""

    type_name: ClassVar[str] = "GatedActivation"


class GatedActivationDesc:
    """What a GatedActivation computes: ``act``, the activation's ops as the graph holds them
    (fused ops over the gate's value, stage 0, their other inputs literals), and ``product``,
    the Multiply of its value by the up projection's (its one side input); ``nodes``: the
    nodes it replaced (for messages). ``stages``: the kernels' code of both over loads 0 (the
    gate's value) and 1 (the up projection's), the product last (each op's expression its
    row's, as a fused region's)."""

    def __init__(self, act: Sequence[FusedDesc], product: FusedDesc, nodes: list) -> None:
        self.act, self.product, self.nodes = tuple(act), product, nodes
        self.stages = [Stage("{0}", [("in", 0)], "float")] + fused_stages(list(self.act), 2) \
            + fused_stages([product], 1)

    def key(self) -> tuple:
        return ("gated_activation", tuple(f.key() for f in self.act), self.product.key())

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        return gated_activation_shapes({}, list(shapes), {})

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The replaced ops' references: the activation's of the gate's half, then the
        product's with the up projection's half."""
        x = np.asarray(arrays[0])
        h = x.shape[-1] // 2
        a = evaluate_fused(list(self.act), x[..., :h], lambda src, k: src.value, infer_host)
        ins = [a if r is not None else x[..., h:] for r in self.product.refs]
        return [np.asarray(infer_host(self.product.node, ins)[0]).astype(x.dtype)]


def gated_activation_shapes(attrs: dict, shapes: list, values: dict) -> list[tuple]:
    """A GatedActivation's output: its input with the last axis halved."""
    return [tuple(shapes[0][:-1]) + (shapes[0][-1] // 2,)]


def gated_activation_impl(p: Params, key: Any) -> Impl | None:
    """One ``gated_activation`` launch over the output (float32, contiguous rows of 2h)."""
    out = tuple(p.out_shapes[0])
    if np.dtype(p.in_dtypes[0]) != F32 or not out or (p.in_strides and p.in_strides[0]):
        return None
    n = size(out)
    if not n:
        return Impl(key, [])
    src = gated_activation(p.node.subgraph.stages)
    return Impl(key, [Launch(src, *work_1d(n), [("i", 0), ("o", 0), n, out[-1]])])


class Unaries:
    """The kind of several one-input elementwise ops of one tensor, one output each, made by
    ``netpass.runtime.unaries``, never an op of a model (a rotary table's Cos and Sin: one
    launch instead of two); its node's ``subgraph`` is a :class:`UnariesDesc`."""

    type_name: ClassVar[str] = "Unaries"


class UnariesDesc:
    """The ops a Unaries computes (in output order) and their float32 expressions."""

    def __init__(self, nodes: list) -> None:
        self.nodes = nodes
        self.exprs = tuple(n.row.expr(n.attrs, [F32], F32) for n in nodes)

    def key(self) -> tuple:
        return ("unaries",) + self.exprs

    def infer_shapes(self, shapes: Sequence[tuple],
                     values: Mapping[int, np.ndarray]) -> list[tuple]:
        return unaries_shapes({"outputs": len(self.nodes)}, list(shapes), {})

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [infer_host(n, arrays)[0] for n in self.nodes]


def unaries_shapes(attrs: dict, shapes: list, values: dict) -> list[tuple]:
    """A Unaries' outputs (``attrs["outputs"]`` of them): its input's shape each."""
    return [tuple(shapes[0])] * attrs["outputs"]


def unaries_impl(p: Params, key: Any) -> Impl | None:
    """One ``unaries`` launch over a contiguous float32 input."""
    exprs = p.node.subgraph.exprs
    if np.dtype(p.in_dtypes[0]) != F32 or (p.in_strides and p.in_strides[0]) \
            or any(e is None for e in exprs):
        return None
    n = size(p.out_shapes[0])
    if not n:
        return Impl(key, [])
    spec: list = [("i", 0)] + [("o", k) for k in range(len(exprs))] + [n]
    return Impl(key, [Launch(unaries(exprs), *work_1d(n), spec)])


ROWS = table(
    OpKind(Rotary, shape=rotary_shapes, impl=rotary_impl),
    OpKind(GatedActivation, shape=gated_activation_shapes, impl=gated_activation_impl),
    OpKind(Unaries, shape=unaries_shapes, impl=unaries_impl),
)
