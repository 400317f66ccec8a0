"""Producer inlining (a node-list pass): an elementwise primitive whose output is read only as a
side input of fused attentions' score ops is computed by each of them, from its own inputs, at
each read, and never launched.

A transformers mask is ``Select(And(causal, Convert(padding mask)), 0, -inf)`` (a Convert to
bool, then a region of two ops: two launches per step) that every layer's attention reads as a
side input of its score ops. Inlined, each attention computes the mask's few stages per score
from the Convert's input (read through the views the mask was read through) and the causal
pattern; nothing launches for it.

Rules (:func:`inline_producers`):

- a producer is an op with an elementwise expression for its dtypes (``OpKind.fusable``), one
  output, not a model output, numpy (or no) broadcasting, whose every reader takes it as a
  score op's side input of a FusedAttention (or reads only its shape: ShapeOf); it is inlined
  into all of them or none;
- its inputs become side inputs of the consumer at the same stage of its score ops: each
  broadcasts into the producer's output, which broadcasts into the scores, so each broadcasts
  into the scores as the producer's output did (numpy broadcasting composes), and the kernels
  address them by their own broadcast strides; each must have at most the scores' rank;
- a side input read through ops that only move elements of their input 0 (``OpKind.moves``: a
  reshape, a gather) from a producer of one input is that producer applied to its input read
  through the same moves (a copy of the moves over the producer's input): an elementwise op of
  one input commutes with them; the moves must have no other reader;
- the stages are typed per stage (``FusedDesc``'s dtypes), and no consumer's score ops grow by
  more than INLINE_STAGES stages or read more than INLINE_SIDES side inputs.

The producers left unread are then dropped (``drop_unread``; a ShapeOf reader keeps one as a
shape-only node, which never runs).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ops.shape_ops import ShapeOf
from .impls import FusedDesc
from .kernels.common import CTYPES
from .kinds import FusedAttention
from .program_node import ProgramNode, drop_unread, node_users

INLINE_STAGES = 8  # stages a consumer's score ops may grow by
INLINE_SIDES = 12  # side inputs a consumer's score ops may read in all
F16 = np.dtype(np.float16)


def _typed(dts: list) -> bool:
    """Whether every dtype has an OpenCL type that needs no extension."""
    return all(np.dtype(d) in CTYPES and np.dtype(d) != F16 and np.dtype(d).itemsize <= 8
               and np.dtype(d) != np.float64 for d in dts)


def _stage(node: ProgramNode, inputs: list) -> FusedDesc | None:
    """``node`` as a score stage reading ``inputs`` (its own, or moved copies of them) as side
    inputs, or None where it is no elementwise op the kernels can compute for its dtypes."""
    row = node.row
    if not row.fusable or row.expr is None or node.num_outputs != 1 or node.is_output \
            or node.attrs.get("auto_broadcast", "numpy") not in ("numpy", "none"):
        return None
    in_dts = [s.out_dtypes[k] for s, k in inputs]
    if not _typed(in_dts + node.out_dtypes) \
            or row.expr(node.attrs, in_dts, node.out_dtypes[0]) is None:
        return None
    return FusedDesc(row, node.attrs, [None] * len(inputs), list(inputs), in_dts,
                     node.out_dtypes[0], node)


def _data_readers(node: ProgramNode, users: dict) -> list:
    return [(u, j) for u, j in users.get(id(node), ()) if not u.is_a(ShapeOf)]


def _side_slots(a: ProgramNode) -> list:
    """(chain position, reference position, input index) of each side input of attention
    ``a``'s score ops, in input order."""
    slots, j = [], 3
    for t, f in enumerate(a.subgraph.chain):
        for pos, r in enumerate(f.refs):
            if r is None:
                slots.append((t, pos, j))
                j += 1
    return slots


def _only_sides(node: ProgramNode, users: dict) -> bool:
    """Whether every data reader of ``node`` reads it as a side input of an attention's score
    ops (and there is one)."""
    readers = _data_readers(node, users)
    for u, j in readers:
        if not u.is_a(FusedAttention) or u.subgraph.source is not None \
                or not 3 <= j < 3 + u.subgraph.sides:
            return False
    return bool(readers) and not node.is_output


def _moved_copy(moves: list, src: tuple) -> list:
    """Copies of ``moves`` (ops moving elements of their input 0, first to last) over ``src``
    instead of their first one's input; the last copy reads as the last move did."""
    out: list = []
    for m in moves:
        dt = src[0].out_dtypes[src[1]]
        c = ProgramNode(f"{m.id}/inlined", m.kind, m.attrs, [src] + list(m.inputs[1:]),
                        op=m.op, out_dtypes=[dt], out_pshapes=m.out_pshapes,
                        name=f"{m.name}/inlined")
        out.append(c)
        src = (c, 0)
    return out


def _producer(src: ProgramNode, k: int, users: dict) -> tuple | None:
    """(stage, new nodes, producer) computing side input ``(src, k)`` from its producer's
    inputs, or None where it cannot be inlined (module docstring)."""
    if k != 0 or not _only_sides(src, users):
        return None
    moves: list = []
    node = src
    while node.row.moves and node.num_outputs == 1 and not node.is_output \
            and node.inputs and node.inputs[0][1] == 0 \
            and node.inputs[0][0].out_dtypes[0] == node.out_dtypes[0]:
        if moves and len(users.get(id(node), ())) != 1:
            return None  # (a ShapeOf reading a move would keep the moves and the producer)
        moves.insert(0, node)
        node = node.inputs[0][0]
        if len(_data_readers(node, users)) != 1 or node.is_output:
            return None
    if moves and len(_data_readers(src, users)) != len(users.get(id(src), ())):
        return None
    if not moves:
        stage = _stage(node, list(node.inputs))
        return None if stage is None else (stage, [], node)
    if len(node.inputs) != 1 or node.is_a(ShapeOf):
        return None
    copies = _moved_copy(moves, node.inputs[0])
    stage = _stage(node, [(copies[-1], 0)])
    return None if stage is None else (stage, copies, node)


def _fits(a: ProgramNode, stage: FusedDesc, added: dict) -> bool:
    """Whether attention ``a`` may take ``stage`` (the budgets; each new side input of at most
    the scores' rank)."""
    scores = a.subgraph.m1.out_pshapes[0]
    if added.get(id(a), 0) + 1 > INLINE_STAGES or a.subgraph.sides + len(stage.others) - 1 \
            > INLINE_SIDES:
        return False
    return all(s.out_pshapes[k].rank_is_static and len(s.out_pshapes[k]) <= len(scores)
               for s, k in stage.others)


def _inline_at(a: ProgramNode, t: int, pos: int, stage: FusedDesc) -> None:
    """Put ``stage`` into attention ``a``'s score ops before op ``t``, whose reference
    ``pos`` (a side input) then reads it; later stage references, batch views and the node's
    inputs move accordingly."""
    desc = a.subgraph
    chain: list[FusedDesc] = desc.chain

    def moved(f: FusedDesc, fill: int | None = None) -> FusedDesc:
        refs = [r + 1 if r is not None and r > t else r for r in f.refs]
        others = list(f.others)
        if fill is not None:
            nth = sum(r is None for r in f.refs[:fill])
            del others[nth]
            refs[fill] = t + 1
        return FusedDesc(f.row, f.attrs, refs, others, f.in_dtypes, f.out_dtype, f.node)

    new = chain[:t] + [stage, moved(chain[t], pos)] + [moved(f) for f in chain[t + 1:]]
    old_sides = desc.sides
    desc.chain = new
    desc.views = tuple((i + 1 if i > t else i, r) for i, r in desc.views)
    desc.sides = sum(len(f.others) for f in new)
    desc.deps = tuple(d - old_sides + desc.sides for d in desc.deps)
    a.inputs = a.inputs[:3] + [o for f in new for o in f.others] + a.inputs[3 + old_sides:]


def inline_producers(nodes: list) -> list:
    """``nodes`` with the producers read only as attentions' side inputs computed by those
    attentions (module docstring), one producer at a time until none is left; the copies of
    moves they read through are put before the first attention that reads them."""
    if not any(n.is_a(FusedAttention) for n in nodes):
        return nodes
    nodes = drop_unread(nodes)  # (what the fusions absorbed reads nothing any more)
    added: dict[int, int] = {}
    while True:
        users = node_users(nodes)
        found: Any = None
        for a in nodes:
            if not a.is_a(FusedAttention) or a.subgraph.source is not None:
                continue
            for *_, j in _side_slots(a):
                src, k = a.inputs[j]
                got = _producer(src, k, users)
                if got is not None and all(_fits(u, got[0], added)
                                           for u, _ in _data_readers(src, users)):
                    found = (src, k, got)
                    break
            if found is not None:
                break
        if found is None:
            return nodes
        src, k, (stage, copies, producer) = found
        readers = {id(u): u for u, _ in _data_readers(src, users)}
        for a in readers.values():
            while True:
                slot = next(((t, pos) for t, pos, j in _side_slots(a) if a.inputs[j] == (src, k)),
                            None)
                if slot is None:
                    break
                _inline_at(a, *slot, stage)
                added[id(a)] = added.get(id(a), 0) + 1
        if len(producer.inputs) == 1:  # (its shape is its input's: what a ShapeOf reads)
            for u, _ in users.get(id(producer), ()):
                if u.is_a(ShapeOf):
                    u.inputs = [producer.inputs[0] if s is producer else (s, i)
                                for s, i in u.inputs]
        if copies:  # (before the first reader)
            at = next(i for i, n in enumerate(nodes) if id(n) in readers)
            nodes = nodes[:at] + copies + nodes[at:]
        nodes = drop_unread(nodes)
