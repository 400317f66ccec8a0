"""Data movement (``netpass/ops/movement``): reshape-likes are views; Transpose, Concat, Split and
Slice are strided copies (``split``: one launch for every output); every other pure movement op
copies through an index map, its own numpy ``evaluate`` run on indices (a strided copy where the
map is affine); Broadcast and Tile are strided copies with zero strides, without a map.

Runtime skips (the reference's rules): a dynamic Transpose moving only size-1 dims, a Slice
whose result is one contiguous piece of its input, a StridedSlice or dynamic Broadcast whose
output is its input alias it instead of running. Split pieces and Slices read only by strided
readers are strided views (``Program._mark_strided_views``).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.boundary import Constant, Parameter
from ...errors import NetpassError
from ...ops.movement import (
    Broadcast,
    Concat,
    DepthToSpace,
    Reshape,
    Reverse,
    Slice,
    SpaceToDepth,
    Split,
    Squeeze,
    StridedSlice,
    Tile,
    Transpose,
    Unsqueeze,
    VariadicSplit,
)
from ...ops.movement.slice import slice_range
from ..impls import (
    Impl,
    Launch,
    Params,
    bits_dtype,
    contiguous_strides,
    reshape_strides,
    size,
    strided_copy,
    work_1d,
)
from ..index_forms import Form, reshaped, static_one
from ..kernels.movement import concat, imap, split
from .base import OpKind, Skip, StridedView, ints, same_as, same_dim, table


# -- shape rules -----------------------------------------------------------------------------------
def _reshape_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    if 1 not in values:
        return None
    src = shapes[0]
    out = [src[i] if t == 0 and attrs.get("special_zero") else t
           for i, t in enumerate(ints(values[1]))]
    if out.count(-1) == 1:
        known = 1
        for d in out:
            if d != -1:
                known *= d
        out[out.index(-1)] = size(src) // known if known else 0
    if size(out) != size(src) or min(out, default=0) < 0:
        return None  # (the op's own inference names the mismatch)
    return [tuple(out)]


def _unsqueeze_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    if 1 not in values:
        return None
    s = shapes[0]
    rank = len(s) + len(ints(values[1]))
    axes = sorted(a % rank for a in ints(values[1]))
    out, it = [], iter(s)
    for i in range(rank):
        out.append(1 if i in axes else next(it))
    return [tuple(out)]


def _squeeze_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    s = shapes[0]
    if len(shapes) == 1:
        return [tuple(d for d in s if d != 1)]
    if 1 not in values:
        return None
    axes = {a % max(len(s), 1) for a in ints(values[1])}
    return [tuple(d for i, d in enumerate(s) if not (i in axes and d == 1))]


def _transpose_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    if 1 not in values:
        return None
    order = ints(values[1]) or list(range(len(shapes[0])))[::-1]
    return [tuple(shapes[0][o] for o in order)]


def _concat_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    axis = attrs.get("axis", 0)
    axis = axis + len(shapes[0]) if axis < 0 else axis
    first = shapes[0]
    for s in shapes[1:]:
        if len(s) != len(first) or s[:axis] != first[:axis] or s[axis + 1:] != first[axis + 1:]:
            return None  # (the op's own inference names the mismatch: no copy past the output)
    out = list(first)
    out[axis] = sum(s[axis] for s in shapes)
    return [tuple(out)]


def _split_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    if 1 not in values:
        return None
    s = shapes[0]
    axis = ints(values[1])[0] % len(s)
    n = int(attrs.get("num_splits", 1))
    if s[axis] % n:
        return None  # (the op's own inference names it)
    return [s[:axis] + (s[axis] // n,) + s[axis + 1:]] * n


def _variadic_split_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    if 1 not in values or 2 not in values:
        return None
    s = shapes[0]
    axis = ints(values[1])[0] % len(s)
    lengths = ints(values[2])
    if lengths.count(-1) == 1:
        lengths[lengths.index(-1)] = s[axis] - (sum(lengths) + 1)
    if sum(lengths) != s[axis] or min(lengths, default=0) < 0:
        return None  # (the op's own inference names the mismatch: no kernel past the input)
    return [s[:axis] + (n,) + s[axis + 1:] for n in lengths]


def _slice_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    if not all(j in values for j in range(1, len(shapes))):
        return None
    s = shapes[0]
    starts, stops, steps = ints(values[1]), ints(values[2]), ints(values[3])
    axes = ints(values[4]) if len(shapes) > 4 else list(range(len(starts)))
    out = list(s)
    for a, b, e, st in zip(axes, starts, stops, steps):
        a %= len(s)
        out[a] = len(slice_range(s[a], b, e, st))
    return [tuple(out)]


# -- strided copies --------------------------------------------------------------------------------
def transpose_impl(p: Params, key: Any) -> Impl:
    shape = p.in_shapes[0]
    order = ints(p.values[1]) if p.values.get(1) is not None and np.asarray(p.values[1]).size \
        else list(range(len(shape)))[::-1]
    # a strided input (a variable's capacity view, netpass.runtime.state) is walked as it lies
    cs = p.in_strides[0] if p.in_strides and p.in_strides[0] is not None \
        else contiguous_strides(shape)
    out_shape = p.out_shapes[0]
    return Impl(key, [strided_copy(p.in_dtypes[0], out_shape, [cs[o] for o in order], 0,
                                   contiguous_strides(out_shape), 0, 0, 0)])


# a Concat of at most this many elements, of two inputs or more, is one launch (``concat``);
# a larger one copies each input apart (``strided_copy``: 4 elements at a time where it can)
CONCAT_ONE_LAUNCH_MAX = 1 << 16


def concat_impl(p: Params, key: Any) -> Impl:
    """Each input's strided copy into its place; a small Concat of several inputs (a rotary
    table's ``cat((freqs, freqs), -1)``) in one ``concat`` launch, where the launch would
    cost more than the copies."""
    out_shape = p.out_shapes[0]
    axis = p.attrs.get("axis", 0)
    axis = axis + len(out_shape) if axis < 0 else axis
    live = [j for j, s in enumerate(p.in_shapes) if size(s)]
    n = size(out_shape)
    if len(live) > 1 and n <= CONCAT_ONE_LAUNCH_MAX:
        bounds, pos = [], 0
        for j in live[:-1]:
            pos += p.in_shapes[j][axis]
            bounds.append(pos)
        src = concat(bits_dtype(p.out_dtypes[0]), len(live))
        spec: list = [("i", j) for j in live] + [("o", 0), n, out_shape[axis],
                                                 size(out_shape[axis + 1:])] + bounds
        return Impl(key, [Launch(src, *work_1d(n), spec)])
    os_ = contiguous_strides(out_shape)
    launches, pos = [], 0
    for j, s in enumerate(p.in_shapes):
        if size(s):
            launches.append(strided_copy(p.in_dtypes[j], s, contiguous_strides(s), 0, os_,
                                         pos * os_[axis], j, 0))
        pos += s[axis]
    return Impl(key, launches)


def split_impl(p: Params, key: Any) -> Impl | None:
    """Split / VariadicSplit: one launch writing every output (kernels.split), the sizes along
    the axis as scalar arguments."""
    if p.values.get(1) is None:
        return None
    shape = p.in_shapes[0]
    axis = ints(p.values[1])[0] % len(shape)
    n = size(shape)
    if not n:
        return Impl(key, [])
    bounds, pos = [], 0
    for out in p.out_shapes[:-1]:
        pos += out[axis]
        bounds.append(pos)
    src = split(bits_dtype(p.in_dtypes[0]), len(p.out_shapes))
    spec: list = [("i", 0)] + [("o", j) for j in range(len(p.out_shapes))]
    spec += [n, shape[axis], size(shape[axis + 1:])] + bounds
    return Impl(key, [Launch(src, *work_1d(n), spec)])


def slice_view(shape: Sequence[int], strides: Sequence[int], values: dict) -> tuple[int, list[int]]:
    """(element offset, strides) of a Slice's output in its input of ``shape`` read with
    ``strides``, from the Slice's start/stop/step(/axes) ``values`` (negative steps are
    negative strides)."""
    starts, stops, steps = ints(values[1]), ints(values[2]), ints(values[3])
    axes = ints(values[4]) if 4 in values else list(range(len(starts)))
    out, off = list(strides), 0
    for a, b, e, st in zip(axes, starts, stops, steps):
        a %= len(shape)
        off += slice_range(shape[a], b, e, st).start * strides[a]
        out[a] = strides[a] * st
    return off, out


def slice_impl(p: Params, key: Any) -> Impl | None:
    """Slice (opset 8): a strided copy of the input (negative steps are negative strides)."""
    if any(p.values.get(j) is None for j in range(1, len(p.in_shapes))):
        return None
    shape = p.in_shapes[0]
    off, strides = slice_view(shape, contiguous_strides(shape), p.values)
    out = p.out_shapes[0]
    if not size(out):
        return Impl(key, [])
    return Impl(key, [strided_copy(p.in_dtypes[0], out, strides, off, contiguous_strides(out),
                                   0, 0, 0)])


# -- index maps ------------------------------------------------------------------------------------
def _index_maps(p: Params, values: list) -> list[np.ndarray] | None:
    """Source element of each output element: the op's numpy reference run on the indices of
    input 0, with ``values`` as its other inputs."""
    cls = p.node.op_class if p.node is not None else None
    if cls is None:
        return None
    shape0 = tuple(p.in_shapes[0])
    ins = [Parameter([], shape=shape0, element_type="i64")] + \
        [Constant([], value=np.asarray(v)) for v in values]
    try:
        op = cls(ins, **p.attrs)
        outs = op.evaluate([np.arange(size(shape0), dtype=np.int64).reshape(shape0)] +
                           [np.asarray(v) for v in values])
    except Exception:  # (an op whose reference cannot run on indices: the host runs it)
        return None
    res = []
    for o, want in zip(outs, p.out_shapes):
        o = np.asarray(o)
        if o.dtype.kind not in "iu" or tuple(o.shape) != tuple(want):
            return None
        res.append(o)
    return res


def _affine(idx: np.ndarray) -> tuple[int, list[int]] | None:
    """(offset, strides) when ``idx`` is an affine function of the coordinates."""
    if idx.size == 0:
        return 0, [0] * idx.ndim
    flat0 = int(idx.reshape(-1)[0])
    if flat0 < 0:
        return None
    strides = []
    for k in range(idx.ndim):
        if idx.shape[k] > 1:
            sl = [0] * idx.ndim
            sl[k] = 1
            strides.append(int(idx[tuple(sl)]) - flat0)
        else:
            strides.append(0)
    grid: np.ndarray | int = flat0
    for k, s in enumerate(strides):
        shape = [1] * idx.ndim
        shape[k] = idx.shape[k]
        grid = grid + np.arange(idx.shape[k], dtype=np.int64).reshape(shape) * s
    return (flat0, strides) if np.array_equal(np.broadcast_to(grid, idx.shape), idx) else None


def _through_strides(m: np.ndarray, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """An index map of flat indices into a contiguous ``shape`` as element offsets of the same
    elements read with ``strides`` (negative entries, Pad's padding marks, stay)."""
    coords = np.unravel_index(np.maximum(m, 0), tuple(shape))
    out = sum(c * int(st) for c, st in zip(coords, strides))
    return np.where(m < 0, m, out).astype(np.int64)


def index_map_impl(p: Params, key: Any, values: list | None = None,
                   pad: float | None = None) -> Impl | None:
    """Any pure data-movement op: per output a strided copy where its index map is affine,
    else a copy through the map (uploaded once per impl). ``values``: the other inputs the
    reference runs with (default: the shape-infer values of inputs 1...); ``pad``: what a
    negative map entry writes (Pad)."""
    if values is None:
        values = [p.values.get(j) for j in range(1, len(p.in_shapes))]
        if any(v is None for v in values):
            return None
    maps = _index_maps(p, values)
    if maps is None:
        return None
    dt = p.in_dtypes[0]
    strides = p.in_strides[0] if p.in_strides else None
    launches, buffers = [], []
    for i, m in enumerate(maps):
        if m.size == 0:
            continue
        if strides is not None:  # a strided input (netpass.runtime.state): elements as they lie
            m = _through_strides(m, p.in_shapes[0], strides)
        aff = _affine(m)
        if aff is not None:
            launches.append(strided_copy(dt, m.shape, aff[1], aff[0], contiguous_strides(m.shape),
                                         0, 0, i))
            continue
        buffers.append(m.reshape(-1).astype(np.int32))
        src = imap(bits_dtype(dt), pad)
        launches.append(Launch(src, *work_1d(m.size),
                               [("i", 0), ("o", i), ("b", len(buffers) - 1), m.size]))
    return Impl(key, launches, buffers)


def _input_strides(p: Params) -> list[int]:
    given = p.in_strides[0] if p.in_strides else None
    return list(given) if given is not None else contiguous_strides(p.in_shapes[0])


def _broadcast_strides(p: Params, st: Sequence[int]) -> list[int] | None:
    """Broadcast: the input's element stride along each output axis (0 where it repeats),
    from the shapes, the input's strides ``st`` and the axes mapping; None for a mode without
    a rule here."""
    mode = p.attrs.get("mode", "numpy")
    shape, out = list(p.in_shapes[0]), list(p.out_shapes[0])
    if mode == "explicit":
        if p.values.get(2) is None:
            return None
        axes = ints(p.values[2])
    elif mode in ("numpy", "bidirectional"):
        axes = list(range(len(out) - len(shape), len(out)))
    else:
        return None
    strides = [0] * len(out)
    for i, a in enumerate(axes):
        if shape[i] != 1:
            strides[a] = st[i]
    return strides


def broadcast_impl(p: Params, key: Any) -> Impl | None:
    """One strided copy with zero strides, without an index map (which would be as large as
    the output); a strided input is read as it lies. Other modes: an index map."""
    strides = _broadcast_strides(p, _input_strides(p))
    if strides is None:
        return index_map_impl(p, key)
    out = list(p.out_shapes[0])
    return Impl(key, [strided_copy(p.in_dtypes[0], out, strides, 0, contiguous_strides(out),
                                   0, 0, 0)] if size(out) else [])


def tile_impl(p: Params, key: Any) -> Impl | None:
    """Tile of ``s`` by ``r`` as one strided copy: the output walked as [r0, s0, r1, s1, ...]
    with input strides [0, st0, 0, st1, ...]."""
    if p.values.get(1) is None:
        return None
    reps, st = ints(p.values[1]), _input_strides(p)
    rank = max(len(reps), len(p.in_shapes[0]))
    shape = [1] * (rank - len(p.in_shapes[0])) + list(p.in_shapes[0])
    reps = [1] * (rank - len(reps)) + reps
    st = [0] * (rank - len(st)) + st
    dims = [d for r, s in zip(reps, shape) for d in (r, s)]
    in_st = [x for s in st for x in (0, s)]
    return Impl(key, [strided_copy(p.in_dtypes[0], dims, in_st, 0, contiguous_strides(dims),
                                   0, 0, 0)] if size(p.out_shapes[0]) else [])


# -- views and runtime skips -----------------------------------------------------------------------
def reshape_views(inst: Any, shape: Sequence[int],
                  strides: Sequence[int]) -> list[tuple[int, tuple]]:
    """A reshape of a strided tensor walks its strides (``impls.reshape_strides``)."""
    out = reshape_strides(shape, strides, inst.out_shapes[0])
    if out is None:  # (Program._mark_strided_views admits only reshapes that fit)
        node = inst.node
        raise NetpassError(f"{node.kind} '{node.name}': no strided view of {list(shape)} as "
                           f"{list(inst.out_shapes[0])}")
    return [(0, tuple(out))]


def _split_views(inst: Any, shape: Sequence[int],
                 strides: Sequence[int]) -> list[tuple[int, tuple]]:
    axis = ints(inst.values[1])[0] % len(shape)
    views, pos = [], 0
    for out in inst.out_shapes:
        views.append((pos * strides[axis], tuple(strides)))
        pos += out[axis]
    return views


def _slice_views(inst: Any, shape: Sequence[int],
                 strides: Sequence[int]) -> list[tuple[int, tuple]]:
    offset, out = slice_view(shape, strides, inst.values)
    return [(offset, tuple(out))]


def _positive_steps(inst: Any) -> bool:
    v = inst.values
    return all(j in v for j in (1, 2, 3)) and all(x > 0 for x in ints(v[3]))


def _copies(n: Any, same_dtype: bool) -> bool:
    """A skip may apply: not a network output, no fused ops, the input's dtype."""
    return not n.is_output and not n.fused and same_dtype


def _permute_is_noop(inst: Any) -> int | None:
    """A Transpose moving only size-1 dims (the reference's ``dest[order[i]]`` non-decreasing
    rule) aliases its input."""
    shape = inst.in_shapes[0]
    v = inst.values.get(1)
    order = ints(v) if v is not None and np.asarray(v).size else list(range(len(shape)))[::-1]
    dest = [0] * len(order)
    for i, o in enumerate(order):
        dest[o] = i
    last = -1
    for i, d in enumerate(shape):
        if d > 1:
            if dest[i] < last:
                return None
            last = dest[i]
    return 0


def _contiguous_slice_offset(inst: Any) -> int | None:
    """Element offset of a unit-step Slice whose result is one contiguous piece of its input
    (the rows ``[:s]`` of a mask, a whole tensor), else None."""
    shape, out = inst.in_shapes[0], inst.out_shapes[0]
    v = inst.values
    if any(j not in v for j in (1, 2, 3)):
        return None
    starts, ends, steps = (ints(v[j]) for j in (1, 2, 3))
    axes = ints(v[4]) if 4 in v else list(range(len(starts)))
    begin = [0] * len(shape)
    for a, b, e, st in zip(axes, starts, ends, steps):
        if st != 1:
            return None
        a %= len(shape)
        begin[a] = slice(b, e, 1).indices(shape[a])[0]
    cut = [i for i, (d, o) in enumerate(zip(shape, out)) if d != o]
    if not cut:
        return 0
    first = cut[0]
    if size(shape[:first]) != 1 or cut != [first] \
            or any(begin[i] for i in range(len(shape)) if i != first):
        return None
    return begin[first] * size(shape[first + 1:])


def _unchanged(inst: Any) -> int | None:
    """A Broadcast whose output is its input."""
    return 0 if inst.in_shapes[0] == inst.out_shapes[0] else None


def _keeps_shape(n: Any) -> int | None:
    """0 for a Broadcast provably to its input's own shape (``same_as``; a causal mask expanded
    to the shape its own And had)."""
    return 0 if same_as(n, 0) else None


def _unchanged_unit_steps(inst: Any) -> int | None:
    """A StridedSlice with unit steps whose output is its input."""
    step = inst.values.get(3)
    unit = step is None or bool(np.all(np.asarray(step) == 1))
    return 0 if unit and inst.in_shapes[0] == inst.out_shapes[0] else None


def _host_reshape(attrs: dict, arrays: list, out_shapes: list) -> list[np.ndarray]:
    return [arrays[0].reshape(out_shapes[0])]


def _host_concat(attrs: dict, arrays: list, out_shapes: list) -> list[np.ndarray]:
    return [np.concatenate(arrays, axis=attrs.get("axis", 0))]


RESHAPE_VIEW = StridedView(reshape_views)


def _broadcast_form(node: Any, forms: list) -> Form | None:
    """A numpy or bidirectional Broadcast's values: its input's at the index aligned to the
    right (leading axes slope 0). Along an axis the input may stretch (a size not proven the
    output's, not a static 1) only a proven slope 0 holds."""
    src, k = node.inputs[0]
    ps, out, f = src.out_pshapes[k], node.out_pshapes[0], forms[0]
    if f is None or str(node.attrs.get("mode", "numpy")).lower() not in ("numpy", "bidirectional") \
            or not ps.rank_is_static or not out.rank_is_static or len(ps) > len(out):
        return None
    pad = len(out) - len(ps)
    slopes: list[int | None] = [0] * pad
    for d, o, s in zip(ps, list(out)[pad:], f.slopes):
        slopes.append(0 if static_one(d) else s if s == 0 or same_dim(d, o) else None)
    return Form(f.base, tuple(slopes))


def _unsqueeze_form(node: Any, forms: list) -> Form | None:
    """Index forms through an Unsqueeze of constant axes: slope 0 along each new axis."""
    axes_src = node.inputs[1][0] if len(node.inputs) > 1 else None
    rank = len(node.out_pshapes[0]) if node.out_pshapes[0].rank.is_static else -1
    if forms[0] is None or axes_src is None or not axes_src.is_constant or rank < 0:
        return reshaped(node, forms[0])
    axes = {a % rank for a in ints(axes_src.value)}
    if len(axes) + len(forms[0].slopes) != rank:
        return None
    it = iter(forms[0].slopes)
    slopes = tuple(0 if a in axes else next(it) for a in range(rank))
    return Form(forms[0].base, slopes)


def _reshape_like(cls: type, shape: Any, affine: Any = None) -> OpKind:
    return OpKind(cls, deps=(1,), shape=shape, impl=index_map_impl, movement=True, always_view=True,
                  strided=RESHAPE_VIEW, host=_host_reshape,
                  affine=affine or (lambda node, forms: reshaped(node, forms[0])))


ROWS = table(
    _reshape_like(Reshape, _reshape_shape),
    _reshape_like(Squeeze, _squeeze_shape),
    _reshape_like(Unsqueeze, _unsqueeze_shape, _unsqueeze_form),
    OpKind(Transpose, deps=(1,), shape=_transpose_shape, impl=transpose_impl, copy_only=True,
           movement=True, uniform=True,
           skip=Skip(lambda n, same: _copies(n, same) and n.is_dynamic and not (
               len(n.users[0]) == 1 and n.users[0][0][0].is_a(Concat)), _permute_is_noop)),
    OpKind(Concat, shape=_concat_shape, impl=concat_impl, copy_only=True, host=_host_concat,
           uniform=True),
    OpKind(Split, deps=(1,), shape=_split_shape, impl=split_impl, copy_only=True, movement=True,
           strided=StridedView(_split_views)),
    OpKind(VariadicSplit, deps=(1, 2), shape=_variadic_split_shape, impl=split_impl, copy_only=True,
           movement=True, strided=StridedView(_split_views)),
    OpKind(Slice, deps=(1, 2, 3, 4), shape=_slice_shape, impl=slice_impl, copy_only=True,
           movement=True, strided=StridedView(_slice_views, _positive_steps, lambda n: True),
           skip=Skip(_copies, _contiguous_slice_offset)),
    OpKind(StridedSlice, deps=(1, 2, 3), impl=index_map_impl, movement=True,
           skip=Skip(_copies, _unchanged_unit_steps)),
    OpKind(Broadcast, deps=(1, 2), impl=broadcast_impl, movement=True, uniform=True,
           skip=Skip(lambda n, same: _copies(n, same) and n.is_dynamic, _unchanged),
           identity=_keeps_shape, affine=_broadcast_form),
    OpKind(Tile, deps=(1,), impl=tile_impl, movement=True),
    OpKind(DepthToSpace, impl=index_map_impl, movement=True),
    OpKind(SpaceToDepth, impl=index_map_impl, movement=True),
    OpKind(Reverse, deps=(1,), impl=index_map_impl, movement=True),
)
