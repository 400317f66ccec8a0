"""What every kernel generator shares: C types of numpy dtypes, float literals, NaN-keeping
max/min/clamp expressions, the extension header, elementwise :class:`Stage` code, the
:class:`Source` of a kernel with its int arguments packed into one struct
(:func:`pack_scalars`), and :func:`memoized`, which makes generators return one Source per
arguments."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LS = 64  # work-items of a row kernel's work-group (rowop, attention)
CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float16): "half",
          np.dtype(np.float64): "double", np.dtype(np.int64): "long", np.dtype(np.int32): "int",
          np.dtype(np.int16): "short",
          np.dtype(np.int8): "char", np.dtype(np.uint8): "uchar", np.dtype(np.bool_): "uchar",
          np.dtype(np.uint16): "ushort", np.dtype(np.uint32): "uint", np.dtype(np.uint64): "ulong"}


def ctype(dtype) -> str:
    return CTYPES[np.dtype(dtype)]


def is_float(dtype) -> bool:
    return np.dtype(dtype).kind == "f"


def flit(v: float) -> str:
    """A float literal for OpenCL C."""
    v = float(v)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    return f"{v!r}f"


def literal(value: float | int, dtype) -> str:
    """``value`` as an OpenCL C literal of ``dtype`` (float32 or a 32/64-bit integer)."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return flit(value)
    return f"{int(value)}L" if dtype.itemsize == 8 else f"{int(value)}"


LITERAL_DTYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))


def nan_max(a: str, b: str) -> str:
    """C expression of the IEEE maximum of float expressions ``a`` and ``b`` (scalars or
    vectors), NaN when either is NaN, as numpy's and the reference's: OpenCL's ``fmax``
    returns the other operand when one is NaN. The operands may be format placeholders."""
    return f"((isnan({a}) || isnan({b})) ? ({a}) + ({b}) : fmax({a}, {b}))"


# NVIDIA's warp shuffle (``shfl_xor``, ``SHFL_XOR``) and ``fmaxn``, the IEEE maximum, NaN when
# either operand is (as nan_max); one instruction with PTX, where nan_max's branches were about
# a fifth of the flash loop's instructions (H200 PTX). One line each: a kernel with them keeps
# its phase form (kernels.phase renames one-line helpers per phase)
SHUFFLE_PTX = (
    "\ninline float shfl_xor(float v, int m) { float r; "
    'asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" '
    ': "=f"(r) : "f"(v), "r"(m)); return r; }\n'
    "#define SHFL_XOR(dst, v, m) dst = shfl_xor(v, m);\n"
    "inline float fmaxn(float a, float b) { float r; "
    'asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }\n')


def nan_min(a: str, b: str) -> str:
    """The minimum counterpart of :func:`nan_max`."""
    return f"((isnan({a}) || isnan({b})) ? ({a}) + ({b}) : fmin({a}, {b}))"


def nan_clamp(v: str, lo: str, hi: str) -> str:
    """``v`` clamped to [lo, hi] (constant bounds), NaN staying NaN."""
    return f"(isnan({v}) ? ({v}) : fmin(fmax({v}, {lo}), {hi}))"


def header(dtypes) -> str:
    lines = []
    if any(np.dtype(d) == np.float16 for d in dtypes):
        lines.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
    if any(np.dtype(d) == np.float64 for d in dtypes):
        lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    return "\n".join(lines) + "\n"


@dataclass
class Stage:
    """One elementwise op of a kernel: ``expr`` formats with operand strings; ``operands``
    gives, per operand, ``("x", None)`` for the previous stage's value, ``("v", s)`` for stage
    ``s``'s value (stage ``s`` assigns ``x<s>``), ``("in", j)`` for kernel input ``j`` or
    ``("lit", text)`` for a C literal;
    ``ctype`` is the C type of the result."""

    expr: str
    operands: list
    ctype: str


# A source holding this line builds with -cl-opt-disable (Engine.build): the emulated
# tensor-core GEMMs, which exist only to be checked on PoCL, whose optimizing backend spent
# minutes on each (machine-level passes over the long unrolled steps).
UNOPTIMIZED = "// netpass: build without optimization"


@dataclass
class Source:
    """OpenCL C text and the kernel's name. The kernel takes its buffers (in the order of its
    launch spec's tensors), then, when it has int arguments, one struct holding them all in
    order (:func:`pack_scalars`); ``n_buffers``, ``n_ints`` count them."""

    text: str
    name: str
    n_buffers: int = 0
    n_ints: int = 0


def pack_scalars(src: Source) -> Source:
    """``src`` with its int parameters moved into one struct passed by value.

    The body keeps its names (locals are initialised from the struct). Why: NVIDIA's OpenCL
    charges every enqueue per kernel argument, and setting a few dozen ints one by one costs
    more than one struct (``benchmarks/bench_launch.py``); a launch then sets at most its
    changed buffers and one block of ints."""
    text, name = src.text, src.name
    head, end, params = _params(text, name)
    buffers = [p for p in params if "*" in p]
    ints = [p for p in params if "*" not in p]
    for p in ints:
        if not p.startswith("int "):
            raise ValueError(f"kernel {name}: scalar parameter '{p}' is not an int")
    if not ints:
        return Source(text, name, len(buffers), 0)
    fields = [p.split()[-1] for p in ints]
    struct = f"Args_{name}"
    typedef = f"typedef struct {{ {' '.join(f'int {f};' for f in fields)} }} {struct};\n"
    body = text.index("{", end)
    locals_ = "".join(f"\n  int {f} = kargs.{f};" for f in fields)
    start = text.rfind("__kernel", 0, head)
    text = (text[:start] + typedef + text[start:head]
            + ", ".join(buffers + [f"const {struct} kargs"]) + text[end - 1:body + 1] + locals_
            + text[body + 1:])
    return Source(text, name, len(buffers), len(fields))


def _params(text: str, name: str) -> tuple[int, int, list[str]]:
    """Where kernel ``name``'s parameter list starts and ends in ``text``, and its parameters."""
    head = text.index(f"void {name}(") + len(f"void {name}(")
    depth, end = 1, head
    while depth:
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    return head, end, [p.strip() for p in text[head:end - 1].split(",")]


ADDRESS_FIELD = "kaddr{}"  # the struct's fields holding the buffers' addresses


_ADDRESSED: dict[str, Source | None] = {}  # address_buffers by packed text


def address_buffers(src: Source) -> Source | None:
    """``src`` (packed) taking its buffers as device addresses in its struct, ahead of the
    ints: a kernel of one argument. The body keeps its names (a local pointer per buffer, cast
    from the address). Why: NVIDIA's driver charges each enqueue about 0.3 us a buffer
    argument and nothing for the struct's size (H200: 8 buffers and a struct 6.6 us, one
    struct of 8 addresses 4.1; ``benchmarks/probe_enqueue_cost.py``). None where a buffer is
    not ``__global`` (the address space a cast from an integer may reach)."""
    if src.text not in _ADDRESSED:
        _ADDRESSED[src.text] = _addressed(src) if src.n_buffers else None
    return _ADDRESSED[src.text]


def _addressed(src: Source) -> Source | None:
    text, name = src.text, src.name
    head, end, params = _params(text, name)
    buffers = params[:src.n_buffers]
    if any("__global" not in p or "__local" in p or "__constant" in p for p in buffers):
        return None
    struct = f"Args_{name}"
    fields = "".join(f"ulong {ADDRESS_FIELD.format(i)}; " for i in range(len(buffers)))
    if src.n_ints:  # (pack_scalars' typedef: its fields follow the addresses)
        opening = "typedef struct { "
        at = text.rindex(opening, 0, text.index(f"}} {struct};")) + len(opening)
        text = text[:at] + fields + text[at:]
    else:
        start = text.rfind("__kernel", 0, head)
        text = text[:start] + f"typedef struct {{ {fields}}} {struct};\n" + text[start:]
    head, end, params = _params(text, name)
    body = text.index("{", end)
    locals_ = ""
    for i, p in enumerate(buffers):
        pname = p.split()[-1].lstrip("*")
        cast = " ".join(w for w in p[:p.rindex(pname)].split() if w != "restrict")
        locals_ += f"\n  {p} = ({cast})kargs.{ADDRESS_FIELD.format(i)};"
    text = (text[:head] + f"const {struct} kargs" + text[end - 1:body + 1] + locals_
            + text[body + 1:])
    return Source(text, name, src.n_buffers, src.n_ints)


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, Stage):
        return ("Stage", v.expr, _freeze(v.operands), v.ctype)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


def memoized(fn):
    """Generators return the same Source object for the same arguments, so that the program
    cache and the per-inst kernel objects are found by identity, without hashing text; their
    int parameters are packed (:func:`pack_scalars`)."""
    memo: dict = {}

    def wrapper(*args):
        key = _freeze(args)
        src = memo.get(key)
        if src is None:
            src = memo[key] = pack_scalars(fn(*args))
        return src
    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    wrapper.__wrapped__ = fn  # (a probe re-memoizes it)
    return wrapper


def offsets(rank: int, tensors: list[str], flat: str = "gid", dims: str = "d") -> str:
    """C code decomposing ``flat`` over dims ``<dims>0..<dims>{rank-1}``, accumulating
    per-tensor offsets ``o_<t>`` from strides ``s_<t>_<k>`` (initialised from ``off_<t>``)."""
    lines = [f"int o_{t} = off_{t};" for t in tensors]
    if rank == 0:
        return "\n  ".join(lines)
    lines.append(f"int rem = {flat};")
    for k in range(rank - 1, -1, -1):
        if k > 0:
            lines.append(f"{{ int c = rem % {dims}{k}; rem /= {dims}{k};")
        else:
            lines.append("{ int c = rem;")
        lines.append("  " + " ".join(f"o_{t} += c * s_{t}_{k};" for t in tensors) + " }")
    return "\n  ".join(lines)


def side_params(dtypes, erank: int, name: str = "in", dims: str = "d") -> list[str]:
    """The parameters of a fused epilogue's side inputs ``<name><j>`` (``dtypes``), after a
    kernel's own: each input and its offset, then, if there are any, the ``erank`` dims
    ``<dims><k>`` they are indexed over and each input's strides (``impls.epilogue_args``
    passes them; another ``name`` and ``dims`` for a kernel with a second epilogue)."""
    args: list[str] = []
    for j, dt in enumerate(dtypes):
        args += [f"__global const {ctype(dt)}* {name}{j}", f"int off_{name}{j}"]
    if len(dtypes):
        args += [f"int {dims}{k}" for k in range(erank)]
        for j in range(len(dtypes)):
            args += [f"int s_{name}{j}_{k}" for k in range(erank)]
    return args


def stage_code(stages: list[Stage], loads: dict[int, str]) -> str:
    code = []
    prev = None
    for i, st in enumerate(stages):
        ops = [prev if kind == "x" else f"x{j}" if kind == "v" else j if kind == "lit"
               else loads[j] for kind, j in st.operands]
        code.append(f"{st.ctype} x{i} = ({st.ctype})({st.expr.format(*ops)});")
        prev = f"x{i}"
    return "\n  ".join(code)
