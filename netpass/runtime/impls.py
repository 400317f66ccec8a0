"""Implementations: for one primitive and one set of concrete shapes, the kernels to enqueue
(source, global/local sizes, argument spec) or a host function. The op table's impl factories
(:mod:`netpass.runtime.kinds`) build them from :class:`Params`; :func:`create_device_impl`
picks the row's factory; they are kept in the program's LRU implementations cache, keyed by
the kernel parameters. Here: the launch and impl objects, the stride arithmetic every factory
uses, fused elementwise stages, and the strided copy.

Argument specs are lists whose items are ``("i", j)`` (input tensor j: buffer, offset),
``("o", j)`` (output j), ``("e", j)`` (fused post-op input j), ``("b", k)`` (impl-owned buffer
k: an index map) or an int (a scalar argument).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import RuntimeInvariantError
from .kernels.common import CTYPES, LITERAL_DTYPES, Source, Stage, ctype, literal
from .kernels.eltwise import copy4, eltwise

if TYPE_CHECKING:  # pragma: no cover
    from .device import Engine
    from .program_node import ProgramNode


# -- strides ---------------------------------------------------------------------------------------
def contiguous_strides(shape: Sequence[int]) -> list[int]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return out[::-1]


def reshape_strides(shape: Sequence[int], strides: Sequence[int],
                    new_shape: Sequence[int]) -> list[int] | None:
    """Strides under which ``new_shape`` walks the elements of a tensor of ``shape`` read
    with ``strides`` in the same row-major order (a view), or None when no strides can: the
    dims merged into one must be contiguous among themselves (numpy's no-copy reshape)."""
    if size(shape) == 0:
        return contiguous_strides(new_shape)
    old = [(d, st) for d, st in zip(shape, strides) if d != 1]
    keep = [i for i, d in enumerate(new_shape) if d != 1]
    out = [0] * len(new_shape)
    oi = ni = 0
    while ni < len(keep) and oi < len(old):
        n_prod, o_prod = new_shape[keep[ni]], old[oi][0]
        nj, oj = ni + 1, oi + 1
        while n_prod != o_prod:
            if n_prod < o_prod:
                n_prod *= new_shape[keep[nj]]
                nj += 1
            else:
                o_prod *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        st = old[oj - 1][1]
        for k in range(nj - 1, ni - 1, -1):
            out[keep[k]] = st
            st *= new_shape[keep[k]]
        ni, oi = nj, oj
    return out


def broadcast_strides(in_shape: Sequence[int], out_shape: Sequence[int],
                      strides: Sequence[int] | None = None) -> list[int]:
    """Strides of ``in_shape`` (contiguous, or read with ``strides``) read over ``out_shape``
    with numpy broadcasting (0 on broadcast)."""
    cs = contiguous_strides(in_shape) if strides is None else strides
    pad = len(out_shape) - len(in_shape)
    out = [0] * pad
    for d, s in zip(in_shape, cs):
        out.append(0 if d == 1 else s)
    return out


def collapse(dims: Sequence[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that every tensor walks contiguously."""
    keep = [k for k, d in enumerate(dims) if d != 1]
    d2 = [dims[k] for k in keep]
    s2 = [[s[k] for k in keep] for s in strides]
    if not d2:
        return [], [[] for _ in strides]
    od, os_ = [d2[0]], [[s[0]] for s in s2]
    for k in range(1, len(d2)):
        if all(s[k - 1] == s[k] * d2[k] for s in s2):
            od[-1] *= d2[k]
            for t, s in enumerate(s2):
                os_[t][-1] = s[k]
        else:
            od.append(d2[k])
            for t, s in enumerate(s2):
                os_[t].append(s[k])
    return od, os_


def size(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


WG = 64  # fixed 1-D work-group size: PoCL specialises kernels per local size, so never vary it


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


class Cover(tuple):
    """Global work sizes that cover a count in work-group multiples, of a kernel that
    bound-checks its work-items against it (``work_1d``): a decoding loop may launch more of
    them as the count grows (``length_forms.fit_work``)."""

    __slots__ = ()


def work_1d(n: int) -> tuple[Cover, tuple[int]]:
    """(global, local) sizes for ``n`` work-items (kernels bound-check ``gid < n``)."""
    return Cover(((max(n, 1) + WG - 1) // WG * WG,)), (WG,)


# -- impl objects ----------------------------------------------------------------------------------
class Launch:
    """One kernel enqueue: source, global/local sizes and the argument spec (tensor refs
    ``("i"|"o"|"e", j[, element offset])``, impl buffers ``("b", j)``, int32 scalars). The
    kernel takes the spec's buffers in order, then its ints packed in one struct (a tensor
    contributes its buffer and, among the ints, its element offset): kernels.pack_scalars."""

    __slots__ = ("source", "gws", "lws", "spec", "_plan", "cdims")

    def __init__(self, source: Source, gws: tuple, lws: tuple | None, spec: list) -> None:
        self.source, self.gws, self.lws, self.spec = source, gws, lws, spec
        self._plan: tuple | None = None
        self.cdims: tuple | None = None  # the work sizes as C arrays (launcher.DirectLauncher)

    def template(self) -> tuple[int, list, list]:
        """(buffer count, the ints with the tensor offsets left 0, the slots to fill:
        (buffer position, int position or -1, "i" | "o" | "e" | "b", index, element offset))."""
        plan = self._plan
        if plan is None:
            ints: list = []
            slots = []
            nb = 0
            for item in self.spec:
                if type(item) is tuple:
                    if item[0] == "b":
                        slots.append((nb, -1, "b", item[1], 0))
                    else:
                        slots.append((nb, len(ints), item[0], item[1],
                                      item[2] if len(item) > 2 else 0))
                        ints.append(0)
                    nb += 1
                else:
                    ints.append(int(item))
            plan = self._plan = (nb, ints, slots)
        return plan

    def args(self, ins: list, outs: list, extras: list,
             bufs: list | None = None) -> tuple[list, list]:
        """(buffers, ints) of the kernel for these tensors."""
        nb, template, slots = self.template()
        buffers = [None] * nb
        ints = template.copy()
        for b, i, kind, j, off in slots:
            if kind == "b":
                buffers[b] = (bufs or [])[j].buffer  # (impl buffers come with their slots)
                continue
            t = ins[j] if kind == "i" else outs[j] if kind == "o" else extras[j]
            buffers[b] = t.alloc.buffer
            ints[i] = t.offset + off
        return buffers, ints


class Impl:
    """Kernels for one primitive at one set of shapes (or a host function)."""

    __slots__ = ("key", "launches", "buffers", "host", "used_inputs", "sources",
                 "weights_as_given", "weights_folded", "weights_frag")

    def __init__(self, key, launches: list[Launch] | None = None, buffers: list | None = None,
                 host: bool = False) -> None:
        self.key = key
        # a FullyConnected's kernels read its weights [N, K] as they are (no reorder)
        self.weights_as_given = False
        # its kernels read the weights with its folded LayerNorm in them (norm_gemm.fold_weights)
        self.weights_folded = False
        # or in mma.sync fragment order of this panel width (kernels.mma_bfrag.swizzle; 0: no)
        self.weights_frag = 0
        self.launches = launches or []
        self.buffers = buffers or []  # np arrays uploaded once per impl (index maps), or Scratch
        self.host = host  # True: runs the op's numpy reference (host fallback)
        # inputs the kernels read (shape-only inputs are never uploaded)
        self.used_inputs = frozenset(it[1] for ln in self.launches for it in ln.spec
                                     if type(it) is tuple and it[0] == "i")
        # what picks kernel objects: impls of other shapes mostly share it
        self.sources = tuple(ln.source.text for ln in self.launches)

    @property
    def is_host(self) -> bool:
        return self.host


class Scratch:
    """An impl buffer the kernels only write and read back within one primitive (a split-K
    GEMM's partial products): never uploaded; a request hands every Scratch of a size class
    the same device buffer (its queue runs one launch after the other)."""

    __slots__ = ("nbytes",)

    def __init__(self, nbytes: int) -> None:
        self.nbytes = int(nbytes)


class FusedDesc:
    """An elementwise op folded into a producer's kernel: its row of the op table
    (:class:`~netpass.runtime.kinds.OpKind`, whose ``expr`` it applies), attributes, what each
    of its inputs reads, and its side inputs (kernel ``extra`` tensors).

    ``refs`` has one item per input of the op: an int ``s`` reads stage value ``s`` (0 is the
    producer's own value, ``t + 1`` the value after fused op ``t``), None reads the next of
    ``others``. A chain reads the previous value; a region such as tanh-GELU reads the
    producer's value several times.

    ``literals`` (per input, None or a Python number): side inputs that are constant scalars,
    written into the kernel's code as literals (their buffer is still passed, unread): a
    scalar loaded per element costs a GEMM epilogue a dependent load, and a literal lets the
    op's row specialize its expression (``OpKind.literal_expr``: GELU's cube as products)."""

    __slots__ = ("row", "attrs", "refs", "others", "out_dtype", "in_dtypes", "node", "literals")

    def __init__(self, row: Any, attrs: dict, refs: Sequence[int | None], others: list,
                 in_dtypes: list, out_dtype, node=None,
                 literals: Sequence[float | int | None] = ()) -> None:
        self.row, self.attrs, self.refs, self.others = row, attrs, tuple(refs), others
        self.in_dtypes, self.out_dtype = in_dtypes, out_dtype
        self.node = node  # the fused ProgramNode (host fallbacks evaluate it)
        self.literals = tuple(literals) or (None,) * len(self.refs)

    def key(self) -> tuple:
        return (self.row.name, tuple(sorted((k, str(v)) for k, v in self.attrs.items())), self.refs,
                tuple(None if v is None else repr(v) for v in self.literals))

    def expr(self) -> str | None:
        """The op's OpenCL expression for its dtypes (specialized on its literals where its
        row has a rule for them)."""
        known = {i: v for i, v in enumerate(self.literals) if v is not None}
        if known and self.row.literal_expr is not None \
                and all(np.dtype(d).kind == "f" for d in (*self.in_dtypes, self.out_dtype)):
            special = self.row.literal_expr(self.attrs, known)
            if special is not None:
                return special
        return self.row.expr(self.attrs, self.in_dtypes, self.out_dtype)

    def shifted(self, k: int) -> FusedDesc:
        """This op with its stage references moved ``k`` stages on (``k`` ops put before)."""
        refs = tuple(None if r is None else r + k for r in self.refs)
        return FusedDesc(self.row, self.attrs, refs, self.others, self.in_dtypes, self.out_dtype,
                         self.node, self.literals)


def scalar_literal(src: Any) -> float | int | None:
    """A fused op's input (a program node) as a kernel literal (``FusedDesc.literals``): a
    constant holding one element of a dtype :func:`~.kernels.common.literal` writes, else
    None."""
    v = src.value
    if not src.is_constant or v is None or v.size != 1 or v.dtype not in LITERAL_DTYPES:
        return None
    return v.item()


def fused_chain(ops: Sequence[Any], head: tuple) -> list[FusedDesc]:
    """``ops`` (program nodes in order, each reading ``head`` (node, output), the ops before
    it, or side inputs) as fused ops: ``head`` is stage 0, op t stage t + 1, the scalar
    constants among the side inputs kernel literals. What a fused region of a kernel's
    epilogue holds (``Program._fuse_elementwise``), and a gated MLP's activation
    (``parallel_gemms``)."""
    stage = {(id(head[0]), head[1]): 0}
    out = []
    for t, u in enumerate(ops):
        refs = [stage.get((id(src), k)) for src, k in u.inputs]
        others = [(src, k) for (src, k), r in zip(u.inputs, refs) if r is None]
        out.append(FusedDesc(u.row, u.attrs, refs, others,
                             [src.out_dtypes[k] for src, k in u.inputs], u.out_dtypes[0], u,
                             [scalar_literal(src) if r is None else None
                              for (src, _), r in zip(u.inputs, refs)]))
        stage[(id(u), 0)] = t + 1
    return out


def chained(n_inputs: int, primary: int, stage: int) -> tuple:
    """``refs`` of an op reading stage ``stage`` at input ``primary``, side inputs elsewhere."""
    return tuple(stage if pos == primary else None for pos in range(n_inputs))


def fused_stages(fused: list[FusedDesc], first_extra: int) -> list[Stage]:
    """Stages applying ``fused`` ops after a value ``x``; their side inputs are numbered from
    ``first_extra`` in the kernel's input list."""
    stages, j = [], first_extra
    for f in fused:
        ops = []
        for pos, (r, lit) in enumerate(zip(f.refs, f.literals)):
            if r is None:
                ops.append(("in", j) if lit is None else ("lit", literal(lit, f.in_dtypes[pos])))
                j += 1
            else:
                ops.append(("v", r))
        expr = f.expr()
        if expr is None:  # (the fusion takes only ops with an expression for their dtypes)
            raise RuntimeInvariantError(f"fused {f.row.name} has no OpenCL expression for "
                                        f"{[str(np.dtype(d)) for d in f.in_dtypes]}")
        stages.append(Stage(expr, ops, ctype(f.out_dtype)))
    return stages


def evaluate_fused(fused: list[FusedDesc], value, side_value: Callable, evaluate: Callable):
    """Host evaluation of fused ops after ``value``: ``side_value(src, k)`` gives a side
    input's array, ``evaluate(node, arrays)`` runs an op's reference."""
    vals = [value]
    for f in fused:
        sides = iter(f.others)
        ins = [vals[r] if r is not None else side_value(*next(sides)) for r in f.refs]
        vals.append(evaluate(f.node, ins)[0])
    return vals[-1]


class Params:
    """What an impl is built from (and keyed by): the op's row of the table, attributes,
    input/output shapes (and strides of strided inputs) and dtypes, host values of shape-infer
    inputs, fused ops and their side inputs, the program node, the engine, the primitive's
    memo of stages and sources, and the compiled model's ``precision`` ("f32" or "tf32":
    INFERENCE_PRECISION_HINT)."""

    __slots__ = ("row", "attrs", "in_shapes", "in_dtypes", "out_shapes", "out_dtypes", "values",
                 "fused", "extra_shapes", "extra_dtypes", "node", "engine", "memo", "in_strides",
                 "precision")
    row: Any  # the op's kinds.OpKind
    attrs: dict[str, Any]
    in_shapes: list[tuple[int, ...]]
    in_dtypes: list[Any]
    out_shapes: list[tuple[int, ...]]
    out_dtypes: list[Any]
    values: dict[int, np.ndarray]
    fused: list[FusedDesc]
    extra_shapes: list[tuple[int, ...]]
    extra_dtypes: list[Any]
    node: ProgramNode
    engine: Engine | None
    memo: dict[tuple, Any]
    in_strides: list[list[int] | None] | None
    precision: str

    def __init__(self, **kw: Any) -> None:
        for k in self.__slots__:
            setattr(self, k, kw.get(k))
        if self.memo is None:
            self.memo = {}

    def cached(self, key: tuple, make: Callable) -> Any:
        """``make()`` once per primitive and ``key`` (stages, sources): a new shape of the same
        primitive rebuilds only its launch arguments."""
        v = self.memo.get(key)
        if v is None:
            v = self.memo[key] = make()
        return v


def epilogue(p: Params, out_shape: Sequence[int], first_extra: int = 0):
    """(stages, extra count, extra dtypes, collapsed dims, per-extra strides) of fused ops."""
    if not p.fused:
        return [], 0, [], [], []
    stages = p.cached(("epilogue", first_extra), lambda: fused_stages(p.fused, first_extra))
    strides = [broadcast_strides(s, out_shape) for s in p.extra_shapes]
    dims, st = collapse(list(out_shape), strides)
    return stages, len(p.extra_shapes), list(p.extra_dtypes), dims, st


def epilogue_args(n_extra: int, dims: Sequence[int], strides: Sequence[Sequence[int]],
                  refs: list | None = None) -> list:
    """A kernel's fused-epilogue arguments, after its own (the launch spec's tail): the side
    inputs (``refs``, default extra tensors 0 .. ``n_extra - 1``), then, if there are any, the
    collapsed dims and each side input's strides over them (:func:`epilogue`)."""
    refs = refs if refs is not None else [("e", j) for j in range(n_extra)]
    return refs + (list(dims) + [x for s in strides for x in s] if n_extra else [])


def gemm_strides(p: Params, out_shape: Sequence[int], nb: int, M: int, N: int) -> list | None:
    """Each fused side input's strides over a GEMM's (batch, m, n) output, ``out_shape`` read
    as [nb, M, N] (a conv's [B, OC, OH OW]): what lets a GEMM's epilogue address them from its
    row and column without dividing the flat index; None when some input's strides do not
    merge within those three groups of dims."""
    shape = list(out_shape)
    groups, k = [], len(shape)
    for want in (N, M, nb):
        j, prod = k, 1
        while j > 0 and (prod * shape[j - 1] <= want or shape[j - 1] == 1) and prod != want:
            j -= 1
            prod *= shape[j]
        if prod != want:
            return None
        groups.append((j, k))
        k = j
    if any(d != 1 for d in shape[:k]):
        return None
    out = []
    for ext in p.extra_shapes:
        st = broadcast_strides(ext, shape)
        merged = []
        for lo, hi in reversed(groups):
            dims, (ss,) = collapse(shape[lo:hi], [st[lo:hi]])
            if len(dims) > 1:
                return None
            merged.append(ss[0] if ss else 0)
        out.append(merged)
    return out


_COPY_SOURCES: dict = {}


def bits_dtype(dtype) -> np.dtype:
    """The dtype a pure copy moves ``dtype`` as: float16 as its 16 bits (``ushort``), so
    copies need no ``cl_khr_fp16``."""
    dt = np.dtype(dtype)
    return np.dtype(np.uint16) if dt == np.float16 else dt


def strided_copy(dtype, shape: Sequence[int], in_strides: Sequence[int], in_off: int,
                 out_strides: Sequence[int], out_off: int, in_idx: int, out_idx: int) -> Launch:
    """Copy input ``in_idx`` (walked with ``in_strides`` from ``in_off``) into output
    ``out_idx`` (``out_strides`` from ``out_off``) over ``shape``. Where both walk their last
    dim contiguously and it is a multiple of 4 (a transpose keeping the innermost dim: heads
    of 64, features of 768), 4-byte elements move 4 at a time (``copy4``: a quarter of the
    index arithmetic, which bound these copies on the H100)."""
    dims, st = collapse(list(shape), [list(out_strides), list(in_strides)])
    dtype = bits_dtype(dtype)
    if dtype.itemsize == 4 and dims and dims[-1] % 4 == 0 and st[0][-1] == 1 and st[1][-1] == 1:
        dims = dims[:-1] + [dims[-1] // 4]
        st = [s[:-1] + [4] for s in st]
        src = _COPY_SOURCES.get((dtype, len(dims), 4))
        if src is None:
            src = _COPY_SOURCES[(dtype, len(dims), 4)] = copy4(dtype, len(dims))
        n = size(dims)
        spec = [("o", out_idx, out_off), ("i", in_idx, in_off), n] + dims
        return Launch(src, *work_1d(n), spec + [x for s in st for x in s])
    src = _COPY_SOURCES.get((dtype, len(dims)))
    if src is None:
        src = _COPY_SOURCES[(dtype, len(dims))] = eltwise(
            [dtype], dtype, [Stage("{0}", [("in", 0)], ctype(dtype))], len(dims), False)
    n = size(shape)
    return Launch(src, *work_1d(n),
                  [("o", out_idx, out_off), ("i", in_idx, in_off), n] + dims
                  + [x for s in st for x in s])


def _needs_fp16(p: Params) -> bool:
    """True when ``p``'s kernel would do float16 arithmetic on a device without cl_khr_fp16
    (copies move float16 as 16 bits)."""
    if p.engine is None or getattr(p.engine, "fp16", True):
        return False
    if p.row.copy_only or (p.row.movement and not p.fused):
        return False
    f16 = np.dtype(np.float16)
    return any(np.dtype(d) == f16
               for d in list(p.in_dtypes) + list(p.out_dtypes) + list(p.extra_dtypes or []))


def extras_fit(extra_shapes: Sequence[Sequence[int]], out_shape: Sequence[int]) -> bool:
    """Whether every fused side input broadcasts into the producer's output without growing
    it (what Program's ``may_fit`` could not decide from partial shapes)."""
    for s in extra_shapes:
        if len(s) > len(out_shape) \
                or any(d != 1 and d != o for d, o in zip(s[::-1], out_shape[::-1])):
            return False
    return True


def create_device_impl(p: Params, key) -> Impl | None:
    """A kernel impl for ``p`` from its row's factory, or None when this kind/shape/dtype has
    no kernel."""
    factory = p.row.impl
    if factory is None or _needs_fp16(p):
        return None  # the host runs it (docs/runtime.md: float16 without cl_khr_fp16)
    if any(np.dtype(d) not in CTYPES for d in list(p.in_dtypes) + list(p.out_dtypes)):
        return None  # no OpenCL type (bfloat16): the host runs it
    if p.extra_shapes and not extras_fit(p.extra_shapes, p.out_shapes[0]):
        return None  # a fused op would grow the output: the host applies it (numpy broadcasting)
    return factory(p, key)


def host_only_reason(row: Any, dtypes: Sequence[Any]) -> str | None:
    """Why a primitive of op table row ``row`` over ``dtypes`` can only run on the host (no
    kernel for the kind; an element type OpenCL has no type for), or None when a kernel may
    run it."""
    if not row.has_kernel:
        return "no kernel"
    odd = sorted({np.dtype(d).name for d in dtypes if np.dtype(d) not in CTYPES})
    return f"no OpenCL type for {', '.join(odd)}" if odd else None
