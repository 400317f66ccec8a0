"""Operator fuzz families over indexing and data movement: Slice, Gather*, Scatter*, Pad,
Where / Expand / Tile / Concat / Split, Trilu, Range, OneHot, CumSum, TopK, ArgMax / ArgMin
(strategies returning :class:`op_fuzz_harness.Case`)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from op_fuzz_draw import Draw, per_step

BIG = 2**63 - 1


def _data(d: Draw, rank: int, lo: int = 1, hi: int = 5, name: str = "x", dtype=np.float32,
          zero: bool = False):
    """An input of ``rank`` dims whose sizes may change per step (``zero``: sometimes 0);
    returns (name, per-axis sizes, per-step shapes)."""
    dims = [d.size(lo, hi, zero) for _ in range(rank)]
    shapes = per_step(d, dims)
    d.input(name, shapes, dtype)
    return name, dims, shapes


def _ints(d: Draw, name: str, arrays, as_input: bool) -> str:
    """Integer operands (one array per step) as an input, or, when they are the same every
    step, maybe as an initializer."""
    same = all(np.array_equal(a, arrays[0]) for a in arrays)
    if same and not as_input:
        return d.const(name, arrays[0])
    return d.input(name, [a.shape for a in arrays], arrays[0].dtype, arrays=arrays)


@st.composite
def slice_(draw):
    """Slice with negative, zero and out-of-range starts / ends, negative steps, axes given
    (negative too) or omitted, operands as initializers or per-step inputs."""
    d = Draw(draw)
    rank = d.draw(st.integers(1, 4))
    x, dims, shapes = _data(d, rank, 1, 6, zero=True)
    n = d.draw(st.integers(1, rank))
    axes = d.draw(st.permutations(range(rank)))[:n] if d.flag() else list(range(n))
    bound = st.one_of(st.integers(-8, 8), st.sampled_from([BIG, -BIG - 1, 1000, -1000]))
    starts = [d.draw(bound) for _ in axes]
    steps = [d.draw(st.sampled_from([1, 1, 2, 3, -1, -1, -2, -3])) for _ in axes]
    # onnxruntime takes end INT64_MAX with a negative step for "to the front" where the spec
    # clamps it to dim - 1: not drawn
    ends = [d.draw(bound.filter(lambda e, s=s: s > 0 or e != BIG)) for s in steps]
    vary = d.flag()
    ins = [x, _ints(d, "starts", [np.array(starts, np.int64)] * d.k, vary),
           _ints(d, "ends", [np.array(ends, np.int64)] * d.k, vary)]
    if d.flag() or axes != list(range(n)) or any(s != 1 for s in steps):
        sign = [a - rank if d.flag() else a for a in axes]
        ins.append(_ints(d, "axes", [np.array(sign, np.int64)] * d.k, False))
        if d.flag() or any(s != 1 for s in steps):
            ins.append(_ints(d, "steps", [np.array(steps, np.int64)] * d.k, vary))
    d.node("Slice", ins, ["y"])
    return d.case(["y"])


def _index_values(d: Draw, shape, bound: int, negative: bool, dtype=np.int64) -> np.ndarray:
    lo = -bound if negative else 0
    return d.rng.integers(lo, bound, shape).astype(dtype)


@st.composite
def gather(draw):
    """Gather / GatherElements / GatherND (batch_dims), negative indices, int32 or int64,
    indices as initializer (valid for every step) or per-step input."""
    d = Draw(draw)
    op = d.pick(("Gather", "Gather", "GatherElements", "GatherND"))
    rank = d.draw(st.integers(1, 4))
    x, dims, shapes = _data(d, rank, 1, 5)
    neg = d.flag()
    itype = d.pick((np.int64, np.int32))
    as_input = d.flag()
    attrs: dict = {}
    if op == "Gather":
        axis = d.draw(st.integers(-rank, rank - 1))
        attrs["axis"] = axis
        ishape = [d.draw(st.integers(1, 3)) for _ in range(d.draw(st.integers(0, 2)))]
        bound = [s[axis] for s in shapes]
        arrays = [_index_values(d, ishape, b if as_input else min(bound), neg, itype)
                  for b in bound]
    elif op == "GatherElements":
        axis = d.draw(st.integers(-rank, rank - 1))
        attrs["axis"] = axis
        n_ax = d.draw(st.integers(1, 4))
        if d.flag():  # indices as long as the data off the axis, at every step
            ishapes = [tuple(n_ax if a == axis % rank else s[a] for a in range(rank))
                       for s in shapes]
            as_input = as_input or len(set(ishapes)) > 1
        else:  # static indices shorter than the data there (torch.gather's exports)
            small = [min(s[a] for s in shapes) for a in range(rank)]
            ishapes = [tuple(n_ax if a == axis % rank else d.draw(st.integers(1, small[a]))
                             for a in range(rank))] * d.k
            as_input = False
            # (the import cuts the data to them where its rank is known: not of dynamic rank)
            if d.inputs[0][2] is None:
                d.inputs[0] = ("x", d.inputs[0][1], [f"x_{a}" for a in range(rank)])
        bound = [s[axis] if as_input else min(t[axis] for t in shapes) for s in shapes]
        arrays = [_index_values(d, ish, b, neg, itype) for ish, b in zip(ishapes, bound)]
        if not as_input:  # one initializer for every step
            arrays = [arrays[0]] * d.k
    else:
        b = d.draw(st.integers(0, rank - 1)) if d.flag() else 0
        if b:
            attrs["batch_dims"] = b
            # batch dims of indices equal data's: they must not change unless input
            for a in range(b):
                if len(set(dims[a])) > 1:
                    as_input = True
        m = d.draw(st.integers(1, rank - b))
        mid = [d.draw(st.integers(1, 3)) for _ in range(d.draw(st.integers(0, 2)))]
        arrays = []
        for s in shapes:
            ishape = [*s[:b], *mid, m]
            cols = [_index_values(d, [*s[:b], *mid, 1],
                                  s[b + j] if as_input else min(t[b + j] for t in shapes), neg,
                                  itype) for j in range(m)]
            arrays.append(np.concatenate(cols, axis=-1).reshape(ishape))
        if not as_input and len({a.shape for a in arrays}) > 1:
            as_input = True
    if op == "GatherND":
        itype = np.int64
        arrays = [a.astype(np.int64) for a in arrays]
    idx = _ints(d, "i", arrays, as_input)
    d.node(op, [x, idx], ["y"], **attrs)
    return d.case(["y"])


@st.composite
def scatter(draw):
    """ScatterND / ScatterElements with every reduction of the opset, negative indices,
    indices unique where the reduction is none."""
    d = Draw(draw, min_opset=13)
    op = d.pick(("ScatterND", "ScatterElements"))
    reds = ["none"] + (["add", "mul"] if d.opset >= 16 else []) + \
        (["max", "min"] if d.opset >= 18 else [])
    red = d.pick(reds)
    rank = d.draw(st.integers(1, 3))
    x, dims, shapes = _data(d, rank, 1, 4)
    neg = d.flag()
    attrs: dict = {} if red == "none" else {"reduction": red}
    idx_arrays, upd_shapes = [], []
    if op == "ScatterND":
        m = d.draw(st.integers(1, rank))
        for s in shapes:
            cells = int(np.prod(s[:m]))
            count = d.draw(st.integers(1, cells)) if red == "none" else d.draw(st.integers(1, 4))
            flat = (d.rng.permutation(cells)[:count] if red == "none"
                    else d.rng.integers(0, cells, count))
            idx = np.stack(np.unravel_index(flat, s[:m]), axis=-1).astype(np.int64)
            if neg:
                idx = np.where(d.rng.random(idx.shape) < 0.5, idx - np.array(s[:m]), idx)
            idx_arrays.append(idx)
            upd_shapes.append((count, *s[m:]))
    else:
        axis = d.draw(st.integers(-rank, rank - 1))
        attrs["axis"] = axis
        for s in shapes:
            ishape = [d.draw(st.integers(1, s[a])) for a in range(rank)]
            n_ax = s[axis]
            if red == "none":  # distinct positions along the axis for each other position
                keys = d.rng.random((*ishape[:axis % rank], n_ax, *ishape[axis % rank + 1:]))
                idx = np.argsort(keys, axis=axis)
                idx = np.take(idx, np.arange(ishape[axis]), axis=axis)
            else:
                idx = d.rng.integers(0, n_ax, ishape)
            if neg:
                idx = np.where(d.rng.random(idx.shape) < 0.5, idx - n_ax, idx)
            idx_arrays.append(idx.astype(np.int64))
            upd_shapes.append(tuple(ishape))
    i = d.input("i", [a.shape for a in idx_arrays], np.int64, arrays=idx_arrays)
    u = d.input("u", upd_shapes)
    d.node(op, [x, i, u], ["y"], **attrs)
    return d.case(["y"])


@st.composite
def pad(draw):
    """Pad: constant (with or without a value) / reflect / edge / wrap, negative pads, pads
    as initializer or input, axes (opset 18+)."""
    d = Draw(draw)
    modes = ["constant", "reflect", "edge"] + (["wrap"] if d.opset >= 19 else [])
    mode = d.pick(modes)
    rank = d.draw(st.integers(1, 4))
    x, dims, shapes = _data(d, rank, 2, 6)
    axes = list(range(rank))
    if d.opset >= 18 and d.flag():
        axes = sorted(d.draw(st.permutations(range(rank)))[:d.draw(st.integers(1, rank))])
    small = [min(s[a] for s in shapes) for a in axes]
    hi = [(sm - 1) if mode in ("reflect", "wrap") else 3 for sm in small]
    pads = [d.draw(st.integers(-1 if d.flag() else 0, h)) for h in hi + hi]
    ins = [x, _ints(d, "pads", [np.array(pads, np.int64)] * d.k, d.flag())]
    if mode == "constant" and d.flag():
        ins.append(d.const("v", np.float32(d.pick((0.5, -2.0, 0.0)))))
    if axes != list(range(rank)):
        if len(ins) == 2:
            ins.append("")
        ins.append(d.const("axes", [a - rank if d.flag() else a for a in axes], np.int64))
    d.node("Pad", ins, ["y"], mode=mode)
    return d.case(["y"])


def _broadcast_shapes(d: Draw, n: int, rank: int):
    """``n`` per-axis size lists that broadcast together (some axes 1, some missing)."""
    full = [d.size(1, 4) for _ in range(rank)]
    out = []
    for _ in range(n):
        r = d.draw(st.integers(0, rank))
        dims = [1 if d.draw(st.integers(0, 3)) == 0 else full[rank - r + a] for a in range(r)]
        out.append(dims)
    return out


@st.composite
def movement(draw):
    """Where, Expand, Tile, Concat, Split (split sizes or num_outputs, uneven), Trilu."""
    d = Draw(draw)
    op = d.pick(("Where", "Expand", "Tile", "Concat", "Split", "Trilu"))
    if op == "Where":
        c, a, b = _broadcast_shapes(d, 3, d.draw(st.integers(1, 4)))
        d.input("c", per_step(d, c), np.bool_)
        d.input("a", per_step(d, a))
        d.input("b", per_step(d, b))
        d.node("Where", ["c", "a", "b"], ["y"])
    elif op == "Expand":
        x, shape = _broadcast_shapes(d, 2, d.draw(st.integers(1, 4)))
        d.input("x", per_step(d, x))
        arrays = [np.array(s, np.int64) for s in per_step(d, shape)]
        if arrays and d.flag():  # a 1 in the shape keeps x's size
            arrays = [np.where(d.rng.random(a.shape) < 0.3, 1, a) for a in arrays]
        d.node("Expand", ["x", _ints(d, "s", arrays, d.flag())], ["y"])
    elif op == "Tile":
        rank = d.draw(st.integers(1, 4))
        _data(d, rank, 1, 4, zero=True)
        reps = [np.array([d.draw(st.integers(1, 3)) for _ in range(rank)], np.int64)] * d.k
        d.node("Tile", ["x", _ints(d, "r", reps, d.flag())], ["y"])
    elif op == "Concat":
        rank = d.draw(st.integers(1, 4))
        axis = d.draw(st.integers(-rank, rank - 1))
        dims = [d.size(1, 4) for _ in range(rank)]
        names = []
        for j in range(d.draw(st.integers(1, 3))):
            mine = list(dims)
            mine[axis] = d.size(0 if d.flag() else 1, 4)
            names.append(d.input(f"x{j}", per_step(d, mine)))
        d.node("Concat", names, ["y"], axis=axis)
    elif op == "Split":
        rank = d.draw(st.integers(1, 3))
        axis = d.draw(st.integers(-rank, rank - 1))
        dims = [d.size(1, 4) for _ in range(rank)]
        parts = d.draw(st.integers(1, 3))
        if d.opset >= 18 and d.flag():
            dims[axis] = d.size(parts, 8)
            _ = d.input("x", per_step(d, dims))
            outs = [f"y{j}" for j in range(parts)]
            d.node("Split", ["x"], outs, axis=axis, num_outputs=parts)
        else:
            sizes = [d.draw(st.integers(0, 3)) for _ in range(parts)]
            dims[axis] = sum(sizes)
            d.input("x", per_step(d, dims))
            outs = [f"y{j}" for j in range(parts)]
            d.node("Split", ["x", d.const("split", sizes, np.int64)], outs, axis=axis)
        return d.case(outs)
    else:
        rank = d.draw(st.integers(2, 4))
        _data(d, rank, 1, 5)
        ins = ["x"]
        if d.flag():
            ins.append(_ints(d, "k", [np.array(d.draw(st.integers(-6, 6)), np.int64)] * d.k,
                             d.flag()))
        d.node("Trilu", ins, ["y"], upper=int(d.flag()))
    return d.case(["y"])
FAMILIES = ["slice_", "gather", "scatter", "pad", "movement"]
