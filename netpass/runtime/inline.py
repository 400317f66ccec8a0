"""Producer inlining (a node-list pass): an elementwise primitive whose output is read only as a
side input of fused attentions' score ops (or as an input an elementwise kernel can compute on
its way in) is computed by its readers, from its own inputs, at each read, and never launched.

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
  more than INLINE_STAGES stages or read more than INLINE_SIDES side inputs;
- an op of one input read only by one elementwise kernel whose other inputs are constants is
  that kernel's input computed on its way in (``ProgramNode.pre``: the kernel reads the op's
  input; ``infer_host`` applies it for the host), where this saves a launch: the op's input
  is no kernel whose region could have taken it in, and its reader could not have joined its
  region (read through moves, or grown by a constant: LLaMA's ``Convert`` of the positions,
  then ``Multiply`` by the inverse frequencies, [B, L, 1] to [B, L, 16]).

The producers left unread are then dropped (``drop_unread``; a ShapeOf reader keeps one as a
shape-only node, which never runs).
"""
from __future__ import annotations

import numpy as np

from ..ops.shape_ops import ShapeOf
from .impls import FusedDesc
from .kernels.common import CTYPES
from .kinds import FusedAttention
from .program_node import ProgramNode, drop_unread, node_users

INLINE_STAGES = 8  # stages a consumer's score ops may grow by
INLINE_SIDES = 12  # side inputs a consumer's score ops may read in all
PRE_LIMIT = 4  # ops an elementwise kernel may apply to one input on its way in
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


def _side(u: ProgramNode, j: int) -> bool:
    """Whether input ``j`` of ``u`` is a side input of an attention's score ops."""
    return u.is_a(FusedAttention) and u.subgraph.source is None \
        and 3 <= j < 3 + u.subgraph.sides


def _head_input(u: ProgramNode, j: int) -> bool:
    """Whether ``u`` is an elementwise kernel (float result, every other input a constant: no
    region could take it in) that may compute its input ``j`` on its way in."""
    return u.row.fusable and u.row.expr is not None and u.row.uniform and u.num_outputs == 1 \
        and np.dtype(u.out_dtypes[0]).kind == "f" and len(u.pre.get(j, ())) < PRE_LIMIT \
        and all(s.is_constant for i, (s, _) in enumerate(u.inputs) if i != j)


def _grows(u: ProgramNode, node: ProgramNode) -> bool:
    """Whether a constant input of ``u`` broadcasts ``node``'s output to a larger shape (a
    dim over a static 1): ``u`` could not join a region ``node`` heads."""
    ps = node.out_pshapes[0]
    if not ps.rank_is_static:
        return False
    for s, _ in u.inputs:
        shape = s.value.shape if s.is_constant and s.value is not None else ()
        pad = len(shape) - len(ps)
        if any(d != 1 for d in shape[:max(pad, 0)]) or any(
                d != 1 and od.min == od.max == 1
                for d, od in zip(shape[max(pad, 0):], list(ps)[max(-pad, 0):])):
            return True
    return False


def _readers_take(node: ProgramNode, users: dict, unary: bool) -> bool:
    """Whether every data reader of ``node`` (there is one) reads it as a side input of an
    attention's score ops or, where ``node`` is an op of one input and the reader its only
    one (nothing computed twice), as an input an elementwise kernel may compute on its way
    in."""
    readers = _data_readers(node, users)
    return bool(readers) and not node.is_output and \
        all(_side(u, j) or (unary and len(readers) == 1 and _head_input(u, j))
            for u, j in readers)


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


def _producer(src: ProgramNode, users: dict) -> tuple | None:
    """(stage, new nodes, producer, the moves it was read through) computing ``src`` from its
    producer's inputs, or None where it cannot be inlined (module docstring). An input an
    elementwise kernel computes on its way in is an op of one input that no region could have
    taken in (its input is no kernel with an epilogue: inlined, it would keep that region from
    taking in its reader), and whose reader could not have joined its own region either (read
    through moves, or broadcast larger by a constant): otherwise nothing is saved."""
    if src.num_outputs != 1 or src.is_constant or not _readers_take(src, users, True):
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
    unary = len(node.inputs) == 1 and not node.is_a(ShapeOf)
    heads = unary and not (node.inputs[0][0].row.epilogue and node.inputs[0][0].has_kernel) \
        and (bool(moves) or all(_grows(u, node) for u, _ in _data_readers(src, users)
                                if not u.is_a(FusedAttention)))
    if (moves and not unary) or not _readers_take(src, users, heads):
        return None
    copies = _moved_copy(moves, node.inputs[0]) if moves else []
    stage = _stage(node, [(copies[-1], 0)] if moves else list(node.inputs))
    return None if stage is None else (stage, copies, node, moves)


def _fits(a: ProgramNode, stage: FusedDesc, added: dict) -> bool:
    """Whether attention ``a`` may take ``stage`` (the budgets; each new side input of at most
    the scores' rank); an elementwise kernel may (``_head_input``)."""
    if not a.is_a(FusedAttention):
        return True
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


def _unlink(n: ProgramNode, users: dict) -> None:
    for s, _ in n.inputs:
        users[id(s)] = [(u, j) for u, j in users.get(id(s), ()) if u is not n]


def _link(n: ProgramNode, users: dict) -> None:
    for j, (s, _) in enumerate(n.inputs):
        users.setdefault(id(s), []).append((n, j))


def inline_producers(nodes: list) -> list:
    """``nodes`` with the producers read only as attentions' side inputs (or as inputs an
    elementwise kernel computes on its way in) computed by their readers (module docstring):
    each node is looked at in program order, and again where an inlined producer's inputs
    take its readers; the copies of moves they read through are put before their first
    reader."""
    nodes = drop_unread(nodes)  # (what the fusions absorbed reads nothing any more)
    users = node_users(nodes)
    order = {id(n): i for i, n in enumerate(nodes)}
    added: dict[int, int] = {}
    before: dict[int, list] = {}  # id(first reader) -> the copies to put before it
    work = nodes[::-1]
    while work:
        src = work.pop()
        got = _producer(src, users)
        readers = _data_readers(src, users) if got is not None else []
        if got is None or not all(_fits(u, got[0], added) for u, _ in readers):
            continue
        stage, copies, producer, moves = got
        for c in copies:
            _link(c, users)
        for u in {id(u): u for u, _ in readers}.values():
            _unlink(u, users)
            if u.is_a(FusedAttention):
                while True:
                    slot = next(((t, pos) for t, pos, j in _side_slots(u)
                                 if u.inputs[j] == (src, 0)), None)
                    if slot is None:
                        break
                    _inline_at(u, *slot, stage)
                    added[id(u)] = added.get(id(u), 0) + 1
            else:  # (an elementwise kernel's input, computed on its way in)
                j = next(j for j, (s, _) in enumerate(u.inputs) if s is src)
                u.inputs[j] = stage.others[0]
                u.pre[j] = [stage] + u.pre.get(j, [])
            _link(u, users)
        if len(producer.inputs) == 1:  # (its shape is its input's: what a ShapeOf reads)
            for u, _ in list(users.get(id(producer), ())):
                if u.is_a(ShapeOf):
                    _unlink(u, users)
                    u.inputs = [producer.inputs[0] if s is producer else (s, i)
                                for s, i in u.inputs]
                    _link(u, users)
        for g in {id(g): g for g in [producer, *moves, src]}.values():
            if not _data_readers(g, users):
                _unlink(g, users)
        if copies:
            first = min((u for u, _ in readers), key=lambda u: order[id(u)])
            before.setdefault(id(first), []).extend(copies)
        work.extend(s for s, _ in stage.others[::-1])
    if before:
        nodes = [m for n in nodes for m in (*before.get(id(n), ()), n)]
    return drop_unread(nodes)
