"""Runtime kernels as phases of one persistent launch.

A decode step launches dozens of short kernels; NVIDIA's OpenCL takes the host 8-12 us per
launch and leaves the device a gap of several more between dependent ones. :func:`persistent`
writes one kernel that runs a sequence of launches ("phases") in order: a grid of resident
work-groups (one per compute unit) walks each phase's work-groups, and a grid-wide barrier
(an arrival counter and a generation word in global memory, with release/acquire fences)
stands between phases where a later one reads or writes what an earlier one wrote.

:func:`phase_of` turns a runtime kernel (a :class:`Source` holding one ``__kernel``, its
``#define`` lines and its packed int struct) into a function of its virtual work-group:
the work-item functions become parameters, and its ``__local`` arrays point into the
persistent kernel's local memory. Two modes:

- ``group``: the kernel uses its work-group (ids, local memory, barriers); the phase's
  local size must be the persistent work-group's (:data:`PL` items), and each resident
  work-group runs whole virtual work-groups;
- ``item``: the kernel uses only its global id (no barrier, no local memory); any 1-D
  launch runs as items spread over the resident work-groups.

One-line ``inline`` helper functions ahead of the kernel are renamed with it. A kernel
written otherwise (several kernels, longer helper functions, other work-item functions,
local memory declared elsewhere than at the top of its body) has no phase form and is
launched on its own; so is one whose text holds :data:`NO_PHASE` (a kernel that is correct as
a phase on PoCL but stopped the H200's persistent steps, the cause not traced).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .common import Source

PL = 256  # work-items of a persistent work-group
NO_PHASE = "/* no phase form */"
SPIN_LIMIT = 1 << 26  # barrier polls (about a minute on a GPU) before a work-group gives up

_WORK_ITEM = re.compile(r"get_(group_id|num_groups|global_id|global_size|local_id|local_size)"
                        r"\s*\(\s*([012])\s*\)")
_OTHER_WORK_ITEM = re.compile(r"get_(work_dim|global_offset|enqueued_local_size|global_linear_id"
                              r"|local_linear_id)\b")
_LOCAL_DECL = re.compile(r"__local\s+((?:unsigned\s+)?[A-Za-z_]\w*)\s+([^;{}]+);")
_DECLARATOR = re.compile(r"\s*([A-Za-z_]\w*)\s*((?:\[[^\]]+\])+)"
                         r"(?:\s*__attribute__\s*\(\([^)]*\)\))?\s*$")
_DEFINE = re.compile(r"^\s*#define\s+([A-Za-z_]\w*)", re.M)
_HELPER = re.compile(r"inline\s+[A-Za-z_]\w*\s+([A-Za-z_]\w*)\s*\(")
_FUNCTION = re.compile(r"__kernel\s*(?:__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)\s*)?"
                       r"void\s+([A-Za-z_]\w*)\s*\(")
_REPLACEMENT = {
    "group_id": "_g{d}", "num_groups": "_n{d}", "local_id": "_l{d}", "local_size": "_L{d}",
    "global_id": "(_g{d} * _L{d} + _l{d})", "global_size": "(_n{d} * _L{d})",
}
PHASE_PARAMS = ("__local uchar* _sp, const int _g0, const int _g1, const int _g2, const int _n0, "
                "const int _n1, const int _n2, const int _l0, const int _l1, const int _l2, "
                "const int _L0, const int _L1, const int _L2")


@dataclass(frozen=True)
class PhaseForm:
    """A kernel as a phase function (module docstring). ``buffers``: its buffer parameters'
    declarations in order; ``writes``: per buffer, whether the kernel may write it (not
    declared ``const``); ``n_ints``: ints of its packed struct; ``mode``: ``"group"`` or
    ``"item"``; ``local_arrays``: the ``__local`` arrays carved out of the shared block;
    ``helpers``: the one-line ``inline`` functions of its prelude."""

    name: str
    pragmas: tuple[str, ...]
    prelude: str          # its #define and typedef lines
    defines: tuple[str, ...]
    buffers: tuple[str, ...]
    writes: tuple[bool, ...]
    n_ints: int
    body: str
    mode: str
    local_arrays: int
    helpers: tuple[str, ...] = ()

    def render(self, suffix: str) -> str:
        """The phase function ``<name>_<suffix>`` (its struct type and one-line helper
        functions renamed alike), with its macros defined before it and undefined after."""
        struct = f"Args_{self.name}"
        prelude = self.prelude.replace(struct, f"{struct}_{suffix}")
        body = self.body
        for h in self.helpers:
            rename = re.compile(rf"\b{h}\b")
            prelude, body = rename.sub(f"{h}_{suffix}", prelude), rename.sub(f"{h}_{suffix}", body)
        params = list(self.buffers)
        if self.n_ints:
            params.append(f"const {struct}_{suffix} kargs")
        params.append(PHASE_PARAMS)
        undefs = "".join(f"#undef {d}\n" for d in self.defines)
        return (f"{prelude}\nvoid {self.name}_{suffix}({', '.join(params)})\n{{{body}}}\n"
                f"{undefs}")


def _matching(text: str, start: int, open_: str, close: str) -> int:
    """Index just past the bracket that closes the one at ``start``."""
    depth, i = 0, start
    while True:
        c = text[i]
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1


def _carve(body: str) -> tuple[str, int] | None:
    """``body`` with its top-level ``__local`` arrays as pointers into ``_sp`` (each 16-byte
    aligned, in order), and their count; None when local memory appears in another form."""
    count = 0
    out, last = [], 0
    for m in _LOCAL_DECL.finditer(body):
        if body.count("{", 0, m.start()) != body.count("}", 0, m.start()):
            return None  # (OpenCL allows them at kernel function scope only)
        ctype = m.group(1)
        decls = []
        for d in m.group(2).split(","):
            dm = _DECLARATOR.match(d)
            if dm is None:
                return None
            name, sizes = dm.group(1), re.findall(r"\[([^\]]+)\]", dm.group(2))
            inner = "".join(f"[{x}]" for x in sizes[1:])
            total = " * ".join(f"({x})" for x in sizes)
            ptr, cast = (f"(*{name}){inner}", f"(__local {ctype} (*){inner})") if inner else \
                (f"*{name}", f"(__local {ctype}*)")
            decls.append(f"__local {ctype} {ptr} = {cast}_sp; "
                         f"_sp += (sizeof({ctype}) * {total} + 15) & ~15;")
            count += 1
        out.append(body[last:m.start()])
        out.append(" ".join(decls))
        last = m.end()
    out.append(body[last:])
    if body.count("__local") != len(_LOCAL_DECL.findall(body)):
        return None  # (a local pointer, or a declaration of another form)
    return "".join(out), count


@functools.cache
def _phase_of_text(text: str, name: str) -> PhaseForm | None:
    if NO_PHASE in text:
        return None
    heads = list(_FUNCTION.finditer(text))
    if len(heads) != 1 or heads[0].group(1) != name or _OTHER_WORK_ITEM.search(text):
        return None
    head = heads[0]
    params_end = _matching(text, head.end() - 1, "(", ")")
    brace = text.index("{", params_end)
    body_end = _matching(text, brace, "{", "}")
    if text[body_end:].strip() or text[params_end:brace].strip():
        return None
    prelude_lines, pragmas = [], []
    helpers = []
    for line in text[:head.start()].splitlines():
        s = line.strip()
        if s.startswith("#pragma"):
            pragmas.append(s)
        elif s.startswith(("#define", "typedef struct")) or not s:
            prelude_lines.append(line)
        elif (m := _HELPER.match(s)) is not None and s.endswith("}") and \
                not _WORK_ITEM.search(s):
            helpers.append(m.group(1))
            prelude_lines.append(line)
        else:
            return None  # (a multi-line helper function or another declaration)
    params = [p.strip() for p in text[head.end():params_end - 1].split(",")]
    buffers = [p for p in params if "*" in p]
    ints = [p for p in params if "*" not in p]
    if ints and ints != [f"const Args_{name} kargs"] or \
            not all(b.startswith("__global ") for b in buffers):
        return None
    body = text[brace + 1:body_end - 1]
    carved = _carve(body)
    if carved is None:
        return None
    body, n_local = carved
    used = {m.group(1) for m in _WORK_ITEM.finditer(body)}
    mode = "group" if (n_local or "barrier" in body or used - {"global_id", "global_size"}) \
        else "item"
    body = _WORK_ITEM.sub(lambda m: _REPLACEMENT[m.group(1)].format(d=m.group(2)), body)
    n_ints = 0
    if ints:
        struct = next(line for line in prelude_lines if f"Args_{name};" in line)
        n_ints = struct.count("int ")
    writes = tuple(not re.search(r"\bconst\b", p.split("*")[0]) for p in buffers)
    defines = tuple(_DEFINE.findall("\n".join(prelude_lines)))
    return PhaseForm(name, tuple(pragmas), "\n".join(prelude_lines), defines, tuple(buffers),
                     writes, n_ints, body, mode, n_local, tuple(helpers))


def phase_of(source: Source) -> PhaseForm | None:
    """The phase form of ``source`` (module docstring), or None."""
    return _phase_of_text(source.text, source.name)


@dataclass(frozen=True)
class PhaseCall:
    """One phase of a persistent kernel: its form (rendered once per distinct form as
    ``suffix``), its local size, the persistent kernel's buffer argument per buffer
    parameter, where its ints and work sizes sit in the parameter block (``P[at:]``: the
    struct's ints, then the global work size per dim), and whether a grid barrier comes
    before it."""

    form: PhaseForm
    suffix: str
    lws: tuple[int, ...]
    args: tuple[int, ...]
    at: int
    sync: bool


def _grid_sync(ptx: bool) -> str:
    fence = 'asm volatile("fence.acq_rel.gpu;" ::: "memory")' if ptx else \
        "mem_fence(CLK_GLOBAL_MEM_FENCE)"
    return f"""#define GRID_FENCE() {fence}
/* all resident work-groups meet: bar[0] counts arrivals, bar[1] is the generation the last
   arrival advances (it resets the count first), bar[2] is set by a work-group that waited
   SPIN_LIMIT polls (not all work-groups resident): every work-group then stops. */
int grid_sync(volatile __global int* bar, const int groups, __local int* stop) {{
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  if (get_local_id(0) == 0) {{
    const int gen = atomic_add(&bar[1], 0);
    GRID_FENCE();
    if (atomic_inc(&bar[0]) == groups - 1) {{
      atomic_xchg(&bar[0], 0);
      GRID_FENCE();
      atomic_inc(&bar[1]);
    }} else {{
      int spins = 0;
      while (atomic_add(&bar[1], 0) == gen) {{
        if (++spins == {SPIN_LIMIT} || atomic_add(&bar[2], 0)) {{
          atomic_xchg(&bar[2], 1);
          break;
        }}
      }}
    }}
    GRID_FENCE();
    *stop = atomic_add(&bar[2], 0);
  }}
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  return *stop;
}}
"""


def _call(c: PhaseCall) -> str:
    """The loop of one phase over its virtual work-groups (or items)."""
    f = c.form
    args = [f"({_ptr_type(p)})b{a}" for p, a in zip(f.buffers, c.args)]
    if f.n_ints:
        args.append(f"*(__global const Args_{f.name}_{c.suffix}*)(P + {c.at})")
    dims = len(c.lws)
    grid = [f"P[{c.at + f.n_ints + d}]" for d in range(dims)]
    if f.mode == "group":
        L = list(c.lws) + [1] * (3 - dims)
        n = [f"({grid[d]} / {L[d]})" if d < dims else "1" for d in range(3)]
        call = ", ".join(args + [
            "(__local uchar*)smem", "g0", "g1", "g2", "n0", "n1", "n2",
            f"lid % {L[0]}", f"(lid / {L[0]}) % {L[1]}", f"lid / {L[0] * L[1]}",
            str(L[0]), str(L[1]), str(L[2])])
        return f"""  {{
    const int n0 = {n[0]}, n1 = {n[1]}, n2 = {n[2]};
    const int count = n0 * n1 * n2;
    for (int vg = group; vg < count; vg += groups) {{
      const int g0 = vg % n0, g1 = (vg / n0) % n1, g2 = vg / (n0 * n1);
      {f.name}_{c.suffix}({call});
      barrier(CLK_LOCAL_MEM_FENCE);
    }}
  }}"""
    L0 = c.lws[0] if c.lws else 1
    call = ", ".join(args + ["(__local uchar*)smem", f"it / {L0}", "0", "0",
                             f"({grid[0]} + {L0 - 1}) / {L0}", "1", "1", f"it % {L0}", "0", "0",
                             str(L0), "1", "1"])
    return f"""  {{
    const int items = {grid[0]};
    for (int it = group * {PL} + lid; it < items; it += groups * {PL})
      {f.name}_{c.suffix}({call});
  }}"""


def _ptr_type(param: str) -> str:
    """The pointer type of a buffer parameter's declaration (``__global const float* Q`` ->
    ``__global const float*``)."""
    return param[:param.rindex("*") + 1]


def persistent(calls: list[PhaseCall], n_buffers: int, local_bytes: int, ptx: bool) -> Source:
    """The persistent kernel running ``calls`` in order (module docstring). Arguments: the
    parameter block ``P`` (ints), the barrier words ``bar`` (three ints, zero before the
    first launch; a launch leaves them so), then ``n_buffers`` buffers as bytes, cast per
    phase. Launched as ``groups * PL`` items in work-groups of ``PL``."""
    pragmas: list[str] = []
    rendered: dict[str, str] = {}
    for c in calls:
        for p in c.form.pragmas:
            if p not in pragmas:
                pragmas.append(p)
        if c.suffix not in rendered:
            rendered[c.suffix] = c.form.render(c.suffix)
    bufs = "".join(f", __global uchar* b{i}" for i in range(n_buffers))
    body = []
    for i, c in enumerate(calls):
        if c.sync and i:
            body.append("  if (grid_sync(bar, groups, &stop)) return;")
        body.append(_call(c))
    smem = max(16, (local_bytes + 15) // 16 * 16)
    text = "\n".join(pragmas) + "\n" + _grid_sync(ptx) + "".join(rendered.values()) + f"""
__kernel __attribute__((reqd_work_group_size({PL}, 1, 1)))
void persistent(__global const int* P, volatile __global int* bar{bufs})
{{
  __local float4 smem[{smem // 16}];
  __local int stop;
  const int lid = get_local_id(0), group = get_group_id(0), groups = get_num_groups(0);
{chr(10).join(body)}
}}
"""
    return Source(text, "persistent", n_buffers + 2, 0)
