"""OpenCL C templates. Every kernel of the runtime comes from one of these generators:

- ``eltwise``: n-ary elementwise over a collapsed iteration space with per-tensor strides
  (numpy broadcasting, transposes and strided writes are all just strides), fused post-op
  stages, and a float4 path for flat contiguous float tensors;
- ``gemm``: register-tiled batched GEMM with generic strides (MatMul, FullyConnected) and a
  fused elementwise epilogue; ``gemm_skinny`` (same arguments) for few output tiles (small M);
  ``gemm_aligned`` and ``gemm_pipelined`` (cp.async on NVIDIA) for aligned shapes on GPUs;
- ``rowop``: one work-group per row for reductions, softmax/log-softmax and MVN;
- ``imap``: copy through an index map (any pure data-movement op, index map from its numpy
  reference), ``split`` (every output of a Split in one launch), ``gather``, ``conv``
  (direct), ``pool``;
- ``attention``: scores, score ops, online softmax and the value product in one launch.

Sources depend only on dtypes, ranks, op expressions and tile sizes, never on runtime dims
(dims are arguments), so a growing sequence compiles each kernel once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float16): "half", np.dtype(np.float64): "double",
          np.dtype(np.int64): "long", np.dtype(np.int32): "int", np.dtype(np.int16): "short",
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


def nan_max(a: str, b: str) -> str:
    """C expression of the IEEE maximum of float expressions ``a`` and ``b`` (scalars or
    vectors), NaN when either is NaN, as numpy's and the reference's: OpenCL's ``fmax``
    returns the other operand when one is NaN. The operands may be format placeholders."""
    return f"((isnan({a}) || isnan({b})) ? ({a}) + ({b}) : fmax({a}, {b}))"


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
    ``s``'s value (stage ``s`` assigns ``x<s>``) or ``("in", j)`` for kernel input ``j``;
    ``ctype`` is the C type of the result."""

    expr: str
    operands: list
    ctype: str


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
    head = text.index(f"void {name}(") + len(f"void {name}(")
    depth, end = 1, head
    while depth:
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    params = [p.strip() for p in text[head:end - 1].split(",")]
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
    text = (text[:start] + typedef + text[start:head] + ", ".join(buffers + [f"const {struct} kargs"])
            + text[end - 1:body + 1] + locals_ + text[body + 1:])
    return Source(text, name, len(buffers), len(fields))


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
    return wrapper


def _offsets(rank: int, tensors: list[str], flat: str = "gid") -> str:
    """C code decomposing ``flat`` over dims d0..d{rank-1}, accumulating per-tensor offsets
    ``o_<t>`` from strides ``s_<t>_<k>`` (initialised from ``off_<t>``)."""
    lines = [f"int o_{t} = off_{t};" for t in tensors]
    if rank == 0:
        return "\n  ".join(lines)
    lines.append(f"int rem = {flat};")
    for k in range(rank - 1, -1, -1):
        if k > 0:
            lines.append(f"{{ int c = rem % d{k}; rem /= d{k};")
        else:
            lines.append("{ int c = rem;")
        lines.append("  " + " ".join(f"o_{t} += c * s_{t}_{k};" for t in tensors) + " }")
    return "\n  ".join(lines)


def _stage_code(stages: list[Stage], loads: dict[int, str]) -> str:
    code = []
    prev = None
    for i, st in enumerate(stages):
        ops = [prev if kind == "x" else f"x{j}" if kind == "v" else loads[j] for kind, j in st.operands]
        code.append(f"{st.ctype} x{i} = ({st.ctype})({st.expr.format(*ops)});")
        prev = f"x{i}"
    return "\n  ".join(code)


@memoized
def eltwise(in_dtypes: list, out_dtype, stages: list[Stage], rank: int, flat: bool) -> Source:
    """Elementwise kernel. ``flat``: every tensor is contiguous with the iteration space (or a
    scalar broadcast) and no strides are needed."""
    n_in = len(in_dtypes)
    oct_ = ctype(out_dtype)
    args = [f"__global {oct_}* out", "int off_out"]
    for j, dt in enumerate(in_dtypes):
        args += [f"__global const {ctype(dt)}* in{j}", f"int off_in{j}"]
    args.append("int n")
    if flat:
        args += [f"int sc{j}" for j in range(n_in)]  # 1: scalar input
        loads = {j: f"in{j}[off_in{j} + (sc{j} ? 0 : gid)]" for j in range(n_in)}
        body = f"""  int gid = get_global_id(0);
  if (gid >= n) return;
  {_stage_code(stages, loads)}
  out[off_out + gid] = ({oct_})(x{len(stages) - 1});"""
    else:
        args += [f"int d{k}" for k in range(rank)]
        tensors = ["out"] + [f"in{j}" for j in range(n_in)]
        for t in tensors:
            args += [f"int s_{t}_{k}" for k in range(rank)]
        loads = {j: f"in{j}[o_in{j}]" for j in range(n_in)}
        body = f"""  int gid = get_global_id(0);
  if (gid >= n) return;
  {_offsets(rank, tensors)}
  {_stage_code(stages, loads)}
  out[o_out] = ({oct_})(x{len(stages) - 1});"""
    text = header(list(in_dtypes) + [out_dtype]) + \
        f"__kernel void ew({', '.join(args)})\n{{\n{body}\n}}\n"
    return Source(text, "ew")


@memoized
def eltwise_vec4(n_in: int, stages: list[Stage]) -> Source:
    """float32, all inputs contiguous and same size: 4 elements per work-item."""
    args = ["__global float* out", "int off_out"]
    for j in range(n_in):
        args += [f"__global const float* in{j}", f"int off_in{j}"]
    args.append("int n")
    vstages = [Stage(s.expr, s.operands, "float4") for s in stages]
    loads = {j: f"vload4(0, in{j} + off_in{j} + i)" for j in range(n_in)}
    sloads = {j: f"in{j}[off_in{j} + i]" for j in range(n_in)}
    body = f"""  int i = get_global_id(0) * 4;
  if (i + 3 < n) {{
  {_stage_code(vstages, loads)}
  vstore4(x{len(stages) - 1}, 0, out + off_out + i);
  }} else {{
  for (; i < n; ++i) {{
  {_stage_code(stages, sloads)}
  out[off_out + i] = x{len(stages) - 1};
  }} }}"""
    text = f"__kernel void ew4({', '.join(args)})\n{{\n{body}\n}}\n"
    return Source(text, "ew4")


# -- GEMM --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GemmConfig:
    tsm: int
    tsn: int
    tsk: int
    wptm: int
    wptn: int

    @property
    def local(self) -> tuple[int, int]:
        return self.tsn // self.wptn, self.tsm // self.wptm


GEMM_SMALL = GemmConfig(32, 32, 16, 2, 2)
GEMM_LARGE = GemmConfig(128, 128, 16, 8, 8)
GEMM_MEDIUM = GemmConfig(64, 64, 16, 4, 4)


SKINNY_RM = 8     # rows of C per work-group of the skinny GEMM
SKINNY_WG = 256   # work-items per skinny work-group: TN columns x (256 / TN) K-slices


def _gemm_args(t: str, n_extra: int, extra_dtypes: list, erank: int, norm: tuple | None = None) -> list[str]:
    """The argument list every GEMM kernel shares (one launch spec fits them all); with
    ``norm``, the gamma and beta vectors of the normalized-A prologue follow C."""
    args = [f"__global const {t}* A", "int aoff", f"__global const {t}* B", "int boff",
            f"__global {t}* C", "int coff"]
    if norm is not None:
        args += ["__global const float* G", "int goff"] if norm[3] else []
        args += ["__global const float* Bt", "int btoff"] if norm[4] else []
    args += ["int M", "int N", "int K", "int B1",
             "int sa0", "int sa1", "int sam", "int sak", "int sb0", "int sb1", "int sbk", "int sbn"]
    for j in range(n_extra):
        args += [f"__global const {ctype(extra_dtypes[j])}* in{j}", f"int off_in{j}"]
    if n_extra:
        args += [f"int d{k}" for k in range(erank)]
        for j in range(n_extra):
            args += [f"int s_in{j}_{k}" for k in range(erank)]
    return args


def norm_prologue(norm: tuple | None, rows: int, threads: int, tid: str = "tid") -> str:
    """C code computing, for the work-group's ``rows`` rows of A from ``m0`` (clamped to
    M - 1; ``rows`` divides ``threads``), their mean and inverse standard deviation over K into
    ``nmu[]`` / ``nrs[]`` (norm_gemm: MVN folded into the GEMM). Each row's ``threads / rows``
    items sum the row's elements shifted by its first one, and its square (the shift keeps
    the variance's precision when the mean is large); empty with ``norm`` None."""
    if norm is None:
        return ""
    eps, inside, variance = flit(norm[0]), norm[1], norm[2]
    rs = "1.0f" if not variance else (f"rsqrt(var + {eps})" if inside else f"1.0f / (sqrt(var) + {eps})")
    tpr = threads // rows
    return f"""__local float nmu[{rows}], nrs[{rows}], nsum[{threads}], nsq[{threads}];
  {{
    const int r = {tid} / {tpr}, lane = {tid} - r * {tpr};
    __global const float* xr = A + min(m0 + r, M - 1) * sam;
    const float sh = xr[0];
    float s = 0.0f, q = 0.0f;
    for (int k = lane; k < K; k += {tpr}) {{ const float d = xr[k * sak] - sh; s += d; q = mad(d, d, q); }}
    nsum[{tid}] = s; nsq[{tid}] = q;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0) {{
      for (int i = 1; i < {tpr}; ++i) {{ s += nsum[{tid} + i]; q += nsq[{tid} + i]; }}
      const float mean = s / (float)K;
      const float var = {nan_max("q / (float)K - mean * mean", "0.0f")};
      nmu[r] = sh + mean;
      nrs[r] = {rs};
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}"""


def norm_value(norm: tuple | None, value: str, row: str, k: str, vector: bool = False) -> str:
    """``value`` (A at local row ``row``, column ``k``; with ``vector`` a float4 of columns
    k..k+3) normalized: (a - mean) * rstd, times gamma[k], plus beta[k] (see norm_prologue);
    ``value`` itself with ``norm`` None."""
    if norm is None:
        return value
    out = f"(({value}) - nmu[{row}]) * nrs[{row}]"
    for present, ref, op in ((norm[3], "G + goff", "*"), (norm[4], "Bt + btoff", "+")):
        if present:
            item = f"vload4(0, {ref} + {k})" if vector else f"({ref})[{k}]"
            out = f"({out}) {op} {item}"
    return f"({out})"


@memoized
def gemm(dtype, cfg: GemmConfig, epilogue: list[Stage], n_extra: int, extra_dtypes: list,
         erank: int, norm: tuple | None = None) -> Source:
    """C[b] = A[b] @ B[b] (+ epilogue). A(m,k) at a + m*sam + k*sak, B(k,n) likewise; batch
    b = b0*B1 + b1 with strides per batch dim (0 broadcasts). ``norm``: A's rows normalized as
    they are loaded (norm_prologue); the same for the other GEMM kernels."""
    t = ctype(dtype)
    lx, ly = cfg.local
    nthreads = lx * ly
    args = _gemm_args(t, n_extra, extra_dtypes, erank, norm)
    code = _stage_code([Stage("acc[wm][wn]", [], "float")] + epilogue,
                       {j: f"in{j}[o_in{j}]" for j in range(n_extra)})
    offs = _offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
    last = f"x{len(epilogue)}"
    text = header([dtype] + list(extra_dtypes)) + f"""
#define TSM {cfg.tsm}
#define TSN {cfg.tsn}
#define TSK {cfg.tsk}
#define WPTM {cfg.wptm}
#define WPTN {cfg.wptn}
#define RTSM {ly}
#define RTSN {lx}
#define NT {nthreads}
__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))
void gemm({', '.join(args)})
{{
  const int tn = get_local_id(0), tm = get_local_id(1);
  const int tid = tm * RTSN + tn;
  const int n0 = get_group_id(0) * TSN, m0 = get_group_id(1) * TSM;
  const int b = get_global_id(2);
  const int b0 = b / B1, b1 = b - (b / B1) * B1;
  A += aoff + b0 * sa0 + b1 * sa1;
  B += boff + b0 * sb0 + b1 * sb1;
  __local {t} As[TSK][TSM + 1];
  __local {t} Bs[TSK][TSN + 1];
  {norm_prologue(norm, cfg.tsm, nthreads)}
  float acc[WPTM][WPTN];
  for (int i = 0; i < WPTM; ++i) for (int j = 0; j < WPTN; ++j) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TSK) {{
    for (int i = tid; i < TSM * TSK; i += NT) {{
      int mm = (sak == 1) ? i / TSK : i % TSM;
      int kk = (sak == 1) ? i % TSK : i / TSM;
      int m = m0 + mm, k = k0 + kk;
      As[kk][mm] = (m < M && k < K) ? {norm_value(norm, "A[m * sam + k * sak]", "mm", "k")} : ({t})0;
    }}
    for (int i = tid; i < TSN * TSK; i += NT) {{
      int nn = (sbn == 1) ? i % TSN : i / TSK;
      int kk = (sbn == 1) ? i / TSN : i % TSK;
      int n = n0 + nn, k = k0 + kk;
      Bs[kk][nn] = (n < N && k < K) ? B[k * sbk + n * sbn] : ({t})0;
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < TSK; ++kk) {{
      float ra[WPTM], rb[WPTN];
      for (int wm = 0; wm < WPTM; ++wm) ra[wm] = As[kk][tm + wm * RTSM];
      for (int wn = 0; wn < WPTN; ++wn) rb[wn] = Bs[kk][tn + wn * RTSN];
      for (int wm = 0; wm < WPTM; ++wm)
        for (int wn = 0; wn < WPTN; ++wn) acc[wm][wn] = mad(ra[wm], rb[wn], acc[wm][wn]);
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  for (int wm = 0; wm < WPTM; ++wm) {{
    int m = m0 + tm + wm * RTSM;
    if (m >= M) continue;
    for (int wn = 0; wn < WPTN; ++wn) {{
      int n = n0 + tn + wn * RTSN;
      if (n >= N) continue;
      int flat = (b * M + m) * N + n;
      {offs}
      {code}
      C[coff + flat] = ({t})({last});
    }}
  }}
}}
"""
    return Source(text, "gemm")


@memoized
def gemm_skinny(dtype, epilogue: list[Stage], n_extra: int, extra_dtypes: list, erank: int,
                norm: tuple | None = None) -> Source:
    """GEMM for few output tiles (small M: decoders, GEMV): same arguments as :func:`gemm`.

    A work-group owns ``SKINNY_RM`` rows of C and TN = get_local_size(0) columns (8..64,
    chosen per launch by impls.skinny_width); its S = get_local_size(1) K-slices take the
    quads of k (k = 4q..4q+3) q = slice, slice + S, ... with direct global loads, two quads
    per step (eight B loads in flight), no barrier in the K loop. B is read coalesced: lanes run along n
    when B is K-major (sbn == 1, reordered FC weights), along k otherwise (transposed B). A
    values are the same for the lanes of a slice (broadcast loads), one float4 per row and
    quad when A rows are contiguous and 16-byte aligned (float32). Rows and columns past M, N
    are clamped to valid addresses (their sums are never stored), so the loop has no bounds
    checks. The slices are summed in local memory, then the fused epilogue runs. Batch b is
    get_group_id(2) = b0 * B1 + b1 as in :func:`gemm`."""
    t = ctype(dtype)
    args = _gemm_args(t, n_extra, extra_dtypes, erank, norm)
    code = _stage_code([Stage("v", [], "float")] + epilogue,
                       {j: f"in{j}[o_in{j}]" for j in range(n_extra)})
    offs = _offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""

    def step(a_row: str, a_vals: list[str], n: int) -> str:
        """Quads q, q + S, ... (n of them): their B loads first (4 n in flight), then per row
        ``a_row`` declares A values {j} (quad j) and the FMAs."""
        lines = []
        for j in range(n):
            k = f"((q + {j} * S) << 2)" if j else "(q << 2)"
            lines.append(f"const int k{j} = {k};")
            lines.append(" ".join(f"const float w{j}{u} = (float)bp[(k{j} + {u}) * sbk];" for u in range(4)))
        rows = []
        for j in range(n):
            rows.append(a_row.format(j=j))
            rows.append(" ".join(f"acc[r] = mad({a.format(j=j)}, w{j}{u}, acc[r]);"
                                 for u, a in enumerate(a_vals)))
        body = "\n      ".join(lines)
        fmas = "\n        ".join(rows)
        return f"""{body}
      #pragma unroll
      for (int r = 0; r < RM; ++r) {{
        {fmas}
      }}"""

    def quads(a_row: str, a_vals: list[str]) -> str:
        """This slice's quads, two per iteration so that eight B loads are in flight."""
        return f"""int q = ks;
    for (; q + S < nq; q += 2 * S) {{
      {step(a_row, a_vals, 2)}
    }}
    if (q < nq) {{
      {step(a_row, a_vals, 1)}
    }}"""
    scalar = quads(f"__global const {t}* ap{{j}} = A + ar[r] + k{{j}} * sak;",
                   [norm_value(norm, f"(float)ap{{j}}[{u} * sak]", "r", f"k{{j}} + {u}") for u in range(4)])
    if t == "float":
        vector = quads("const float4 a{j} = "
                       + norm_value(norm, "*(__global const float4*)(A + ar[r] + k{j})", "r", "k{j}", True) + ";",
                       ["a{j}.x", "a{j}.y", "a{j}.z", "a{j}.w"])
        loop = f"""/* float4 A loads: rows contiguous along k and 16-byte aligned */
  if (sak == 1 && (sam & 3) == 0 && ((aoff + b0 * sa0 + b1 * sa1) & 3) == 0) {{
    {vector}
  }} else {{
    {scalar}
  }}"""
    else:
        loop = scalar
    text = header([dtype] + list(extra_dtypes)) + f"""
#define RM {SKINNY_RM}
__kernel void gemm_skinny({', '.join(args)})
{{
  const int TN = get_local_size(0), S = get_local_size(1);
  const int lt = get_local_id(1) * TN + get_local_id(0);
  int col, ks;
  if (sbn == 1) {{ col = get_local_id(0); ks = get_local_id(1); }}
  else {{ col = lt / S; ks = lt - col * S; }}  /* transposed B: neighbour lanes read neighbour k */
  const int n0 = get_group_id(0) * TN, m0 = get_group_id(1) * RM;
  const int b = get_group_id(2);
  const int b0 = b / B1, b1 = b - b0 * B1;
  A += aoff + b0 * sa0 + b1 * sa1;
  B += boff + b0 * sb0 + b1 * sb1;
  __global const {t}* bp = B + min(n0 + col, N - 1) * sbn;
  int ar[RM];
  float acc[RM];
  #pragma unroll
  for (int r = 0; r < RM; ++r) {{ ar[r] = min(m0 + r, M - 1) * sam; acc[r] = 0.0f; }}
  {norm_prologue(norm, SKINNY_RM, SKINNY_WG, "lt")}
  const int nq = K >> 2;
  {loop}
  for (int k = (nq << 2) + ks; k < K; k += S) {{  /* the last K % 4 */
    const float w0 = (float)bp[k * sbk];
    #pragma unroll
    for (int r = 0; r < RM; ++r) acc[r] = mad({norm_value(norm, "(float)A[ar[r] + k * sak]", "r", "k")}, w0, acc[r]);
  }}
  /* row r's partial sums at red[r * rs + slice * TN + col]: the TN pad puts the lanes of
     the summing loop below (consecutive r * TN + col) in distinct banks */
  __local float red[RM * ({SKINNY_WG} + 64)];
  const int rs = TN * S + TN;
  #pragma unroll
  for (int r = 0; r < RM; ++r) red[r * rs + ks * TN + col] = acc[r];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int o = lt; o < RM * TN; o += TN * S) {{
    const int r = o / TN, cc = o - r * TN;
    const int m = m0 + r, n = n0 + cc;
    if (m >= M || n >= N) continue;
    float v = 0.0f;
    for (int q = 0; q < S; ++q) v += red[r * rs + q * TN + cc];
    int flat = (b * M + m) * N + n;
    {offs}
    {code}
    C[coff + flat] = ({t})(x{len(epilogue)});
  }}
}}
"""
    return Source(text, "gemm_skinny")


def _tile_head(args: list[str]) -> str:
    """Signature and opening of a 128x128-tile GEMM on 16x16 work-items: work-item (tn, tm),
    its flat id, the tile's origin (m0, n0), batch b and A, B moved to that batch."""
    return f"""__kernel __attribute__((reqd_work_group_size(16, 16, 1)))
void gemm({', '.join(args)})
{{
  const int tn = get_local_id(0), tm = get_local_id(1);
  const int tid = tm * 16 + tn;
  const int n0 = get_group_id(0) * 128, m0 = get_group_id(1) * 128;
  const int b = get_global_id(2);
  const int b0 = b / B1, b1 = b - (b / B1) * B1;
  A += aoff + b0 * sa0 + b1 * sa1;
  B += boff + b0 * sb0 + b1 * sb1;"""


def _tile_store(epilogue: list[Stage], n_extra: int, erank: int) -> str:
    """Stores a 128x128 tile's ``acc[8][8]`` (rows tm*4+i and 64+tm*4+i, columns tn*4 and
    64+tn*4 of work-item (tn, tm)) through the fused epilogue, four columns per store."""
    code = _stage_code([Stage("v[q]", [], "float")] + epilogue,
                       {j: f"in{j}[o_in{j}]" for j in range(n_extra)})
    offs = _offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
    post = f"""for (int q = 0; q < 4; ++q) {{
          int flat = (b * M + m) * N + n + q;
          {offs}
          {code}
          v[q] = x{len(epilogue)};
        }}""" if epilogue else ""
    return f"""  C += coff + b * M * N;
  for (int i = 0; i < 8; ++i) {{
    const int m = m0 + (i < 4 ? tm * 4 + i : 64 + tm * 4 + i - 4);
    for (int h = 0; h < 2; ++h) {{
      const int n = n0 + h * 64 + tn * 4;
      float v[4] = {{acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]}};
      {post}
      vstore4((float4)(v[0], v[1], v[2], v[3]), 0, C + m * N + n);
    }}
  }}"""


@memoized
def gemm_aligned(epilogue: list[Stage], n_extra: int, extra_dtypes: list, erank: int,
                 norm: tuple | None = None) -> Source:
    """float32 C = A @ B for row-major A [M, K] and B [K, N] with M, N multiples of 128 and K
    of 16: 128x128 tiles, 16x16 work-items of 8x8 outputs each, float4 global and local
    accesses, the next tile's global loads issued before this one's math and stored to the
    other of two local buffers (one barrier per tile), no bounds checks. Same arguments as
    :func:`gemm`. (On the H200, ``benchmarks/bench_gemm_large.py``: tiles of 128x64, tile
    orders in strips, an A tile stored with XOR-swizzled rows, fma, register prefetch of the
    local reads, global pointers stepped instead of recomputed, the two local buffers indexed
    by constants in a loop unrolled twice, and other build options all measured the same or
    slower.)"""
    args = _gemm_args("float", n_extra, extra_dtypes, erank, norm)
    text = f"""{_tile_head(args)}
  __local float As[2][16][128 + 4];
  __local float Bs[2][16][128];
  float acc[8][8];
  for (int i = 0; i < 8; ++i) for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
  const int ar = tid >> 2, ac = (tid & 3) * 4;  /* A tile: rows ar, ar + 64; cols ac..ac+3 */
  const int br = tid >> 5, bc = (tid & 31) * 4;  /* B tile: rows br, br + 8; cols bc..bc+3 */
  {norm_prologue(norm, 128, 256)}
  float4 a0 = {norm_value(norm, "vload4(0, A + (m0 + ar) * sam + ac)", "ar", "ac", True)};
  float4 a1 = {norm_value(norm, "vload4(0, A + (m0 + ar + 64) * sam + ac)", "ar + 64", "ac", True)};
  float4 b0v = vload4(0, B + br * sbk + n0 + bc);
  float4 b1v = vload4(0, B + (br + 8) * sbk + n0 + bc);
#define STORE_TILE(buf) \\
    As[buf][ac][ar] = a0.x; As[buf][ac + 1][ar] = a0.y; As[buf][ac + 2][ar] = a0.z; As[buf][ac + 3][ar] = a0.w; \\
    As[buf][ac][ar + 64] = a1.x; As[buf][ac + 1][ar + 64] = a1.y; As[buf][ac + 2][ar + 64] = a1.z; \\
    As[buf][ac + 3][ar + 64] = a1.w; \\
    vstore4(b0v, 0, &Bs[buf][br][bc]); vstore4(b1v, 0, &Bs[buf][br + 8][bc]);
  STORE_TILE(0)
  barrier(CLK_LOCAL_MEM_FENCE);
  int cur = 0;
  for (int k0 = 0; k0 < K; k0 += 16) {{
    const int more = k0 + 16 < K;
    if (more) {{
      a0 = {norm_value(norm, "vload4(0, A + (m0 + ar) * sam + k0 + 16 + ac)", "ar", "k0 + 16 + ac", True)};
      a1 = {norm_value(norm, "vload4(0, A + (m0 + ar + 64) * sam + k0 + 16 + ac)", "ar + 64", "k0 + 16 + ac", True)};
      b0v = vload4(0, B + (k0 + 16 + br) * sbk + n0 + bc);
      b1v = vload4(0, B + (k0 + 16 + br + 8) * sbk + n0 + bc);
    }}
    #pragma unroll
    for (int kk = 0; kk < 16; ++kk) {{
      float4 x0 = vload4(0, &As[cur][kk][tm * 4]);
      float4 x1 = vload4(0, &As[cur][kk][64 + tm * 4]);
      float4 y0 = vload4(0, &Bs[cur][kk][tn * 4]);
      float4 y1 = vload4(0, &Bs[cur][kk][64 + tn * 4]);
      float ra[8] = {{x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w}};
      float rb[8] = {{y0.x, y0.y, y0.z, y0.w, y1.x, y1.y, y1.z, y1.w}};
      #pragma unroll
      for (int i = 0; i < 8; ++i)
        #pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = mad(ra[i], rb[j], acc[i][j]);
    }}
    if (more) {{
      STORE_TILE(cur ^ 1)
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
    cur ^= 1;
  }}
{_tile_store(epilogue, n_extra, erank)}
}}
"""
    return Source(text, "gemm")


PIPE_BK, PIPE_STAGES = 8, 4  # K per stage and stages in flight of gemm_pipelined


@memoized
def gemm_pipelined(epilogue: list[Stage], n_extra: int, extra_dtypes: list, erank: int,
                   cp_async: bool) -> Source:
    """float32 C = A @ B for the shapes of :func:`gemm_aligned` (K a multiple of 8): the same
    128x128 tiles and 8x8 outputs per work-item, with a ring of ``PIPE_STAGES`` local stages
    of K = ``PIPE_BK`` filled ``PIPE_STAGES - 1`` tiles ahead of the math (one barrier per
    stage). With ``cp_async`` (NVIDIA OpenCL on compute capability 8.0 and later) the stages
    are filled by PTX ``cp.async`` copies that bypass registers, so global latency hides
    behind the math without staging registers: on the H200 this lifts fp32 GEMM from 30 to
    40 TFLOP/s (43 without the plain-copy ring below). A is kept row-major in local memory (the copies cannot transpose);
    the math reads it as float4 along k. cp.async needs 16-byte aligned addresses: a
    work-group whose A or B start is not aligned (a view at an odd offset) fills the stages
    with ordinary loads instead. Without ``cp_async`` only that plain-copy ring is generated
    (it runs anywhere: the PoCL tests check the ring and the epilogue with it). Same arguments
    as :func:`gemm`."""
    args = _gemm_args("float", n_extra, extra_dtypes, erank)

    def fmas(u: int) -> str:
        """k = kk + u: B row kk + u times component u of the A quads."""
        c = "xyzw"[u]
        return f"""{{
        const float4 y0 = vload4(0, &Bs[cs][kk + {u}][tn * 4]), y1 = vload4(0, &Bs[cs][kk + {u}][64 + tn * 4]);
        const float rb[8] = {{y0.x, y0.y, y0.z, y0.w, y1.x, y1.y, y1.z, y1.w}};
        const float ra[8] = {{{", ".join(f"a{i}.{c}" for i in range(8))}}};
        #pragma unroll
        for (int i = 0; i < 8; ++i)
          #pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][j] = mad(ra[i], rb[j], acc[i][j]);
      }}"""

    def pipeline(nt: str, copy: str, commit: str = "", wait: str = "") -> str:
        """The stage ring over ``nt`` stages filled by ``copy``; ``commit`` closes a stage's
        group of async copies and ``wait`` waits for the oldest one (nothing for plain
        copies)."""
        fill = f"{copy}(&As[s][ar][ac], pa + k); {copy}(&Bs[s][br][bc], pb + k * sbk);"
        quads = "\n      ".join(
            f"const float4 a{i} = vload4(0, &As[cs][{'64 + ' if i >= 4 else ''}tm * 4 + {i % 4}][kk]);"
            for i in range(8))
        # every iteration commits a group, empty past the last stage, so that the wait's
        # count of groups still in flight holds at the end of K too
        return f"""for (int t = 0; t < STAGES - 1; ++t) {{
      if (t < {nt}) {{ const int s = t, k = t * BK; {fill} }}{commit}
    }}
    for (int t = 0; t < {nt}; ++t) {{{wait}
      barrier(CLK_LOCAL_MEM_FENCE);  /* stage t is in; stage t - 1 is no longer read */
      if (t + STAGES - 1 < {nt}) {{
        const int s = (t + STAGES - 1) % STAGES, k = (t + STAGES - 1) * BK;
        {fill}
      }}{commit}
      const int cs = t % STAGES;
      #pragma unroll
      for (int kk = 0; kk < BK; kk += 4) {{
      {quads}
      {"".join(fmas(u) for u in range(4))}
      }}
    }}"""
    if cp_async:
        # one of the two rings runs: a branch around them instead costs 15% on the H200
        ring = pipeline("nta", "CP_ASYNC", " CP_COMMIT();", "\n      CP_WAIT();")
        body = f"""const int nta = ((((size_t)pa) | ((size_t)pb)) & 15) == 0 ? nt : 0;
  {ring}
  {pipeline("nt - nta", "COPY")}"""
        macros = f"""#define CP_ASYNC(dst, src) asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" \\
    :: "r"((uint)(size_t)(dst)), "l"(src) : "memory")
#define CP_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define CP_WAIT() asm volatile("cp.async.wait_group {PIPE_STAGES - 2};" ::: "memory")
"""
    else:
        body, macros = pipeline("nt", "COPY"), ""
    text = f"""#define BK {PIPE_BK}
#define STAGES {PIPE_STAGES}
#define COPY(dst, src) (*(__local float4*)(dst) = vload4(0, (src)))
{macros}{_tile_head(args)}
  __local float As[STAGES][128][BK] __attribute__((aligned(16)));
  __local float Bs[STAGES][BK][128] __attribute__((aligned(16)));
  float acc[8][8];
  for (int i = 0; i < 8; ++i) for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
  const int ar = tid / (BK / 4), ac = (tid % (BK / 4)) * 4;  /* A stage: row ar, cols ac..ac+3 */
  const int br = tid >> 5, bc = (tid & 31) * 4;  /* B stage: row br, cols bc..bc+3 */
  __global const float* pa = A + (m0 + ar) * sam + ac;
  __global const float* pb = B + br * sbk + n0 + bc;
  const int nt = K / BK;
  {body}
{_tile_store(epilogue, n_extra, erank)}
}}
"""
    return Source(text, "gemm")


# -- row operations (reductions, softmax, MVN) -------------------------------------------------
LS = 64
_REDUCE = {  # kind -> (init, accumulate(acc, v), combine(a, b), finish(acc, R))
    "sum": ("0.0f", "{a} + {v}", "{a} + {b}", "{a}"),
    "mean": ("0.0f", "{a} + {v}", "{a} + {b}", "{a} / (float)R"),
    "max": ("-INFINITY", nan_max("{a}", "{v}"), nan_max("{a}", "{b}"), "{a}"),
    "min": ("INFINITY", nan_min("{a}", "{v}"), nan_min("{a}", "{b}"), "{a}"),
    "prod": ("1.0f", "{a} * {v}", "{a} * {b}", "{a}"),
    "l1": ("0.0f", "{a} + fabs({v})", "{a} + {b}", "{a}"),
    "l2": ("0.0f", "{a} + {v} * {v}", "{a} + {b}", "sqrt({a})"),
    "sumsquare": ("0.0f", "{a} + {v} * {v}", "{a} + {b}", "{a}"),
    "logsum": ("0.0f", "{a} + {v}", "{a} + {b}", "log({a})"),
    "logsumexp": ("0.0f", "{a} + exp({v})", "{a} + {b}", "log({a})"),
    "and": ("1.0f", "(({a} != 0) && ({v} != 0)) ? 1.0f : 0.0f", "({a} != 0 && {b} != 0) ? 1.0f : 0.0f", "{a}"),
    "or": ("0.0f", "(({a} != 0) || ({v} != 0)) ? 1.0f : 0.0f", "({a} != 0 || {b} != 0) ? 1.0f : 0.0f", "{a}"),
}


def _local_reduce(var: str, combine: str) -> str:
    return f"""  sh[lid] = {var};
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = LS / 2; s > 0; s >>= 1) {{
    if (lid < s) sh[lid] = {combine.format(a='sh[lid]', b='sh[lid + s]')};
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  {var} = sh[0];
  barrier(CLK_LOCAL_MEM_FENCE);"""


@memoized
def rowop(kind: str, in_dtype, out_dtype, params: dict, epilogue: list[Stage] = (),
          extra_dtypes: list = (), erank: int = 0) -> Source:
    """One work-group of ``LS`` items per row; row r = (o, i) covers x[o*R*inner + j*inner + i].
    Softmax / log-softmax / MVN outputs go through the fused ``epilogue`` stages (their extra
    inputs indexed by the output's flat position)."""
    it, ot = ctype(in_dtype), ctype(out_dtype)
    n_extra = len(extra_dtypes)
    extra_args = "".join(f", __global const {ctype(d)}* in{j}, int off_in{j}"
                         for j, d in enumerate(extra_dtypes))
    if n_extra:
        extra_args += "".join(f", int d{k}" for k in range(erank))
        extra_args += "".join(f", int s_in{j}_{k}" for j in range(n_extra) for k in range(erank))

    def store(value: str) -> str:
        """C statement writing ``value`` to y[j * inner], through the epilogue if any."""
        if not epilogue:
            return f"y[j * inner] = ({ot})({value});"
        code = _stage_code([Stage("{0}", [("in", -1)], "float")] + list(epilogue),
                           {-1: "ev", **{j: f"in{j}[o_in{j}]" for j in range(n_extra)}})
        offs = _offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
        return (f"{{ float ev = (float)({value}); int flat = (o * R + j) * inner + i;\n  {offs}\n"
                f"  {code}\n  y[j * inner] = ({ot})(x{len(epilogue)}); }}")

    head = f"""#define LS {LS}
__kernel __attribute__((reqd_work_group_size(LS, 1, 1)))
void rowop(__global const {it}* X, int xoff, __global {ot}* Y, int yoff, int R, int inner{extra_args})
{{
  const int row = get_group_id(0), lid = get_local_id(0);
  const int o = row / inner, i = row - (row / inner) * inner;
  __global const {it}* x = X + xoff + o * R * inner + i;
  __global {ot}* y = Y + yoff + o * R * inner + i;
  __local float sh[LS];
"""
    if kind in _REDUCE:
        init, acc, comb, fin = _REDUCE[kind]
        body = f"""  float a = {init};
  for (int j = lid; j < R; j += LS) {{ float v = (float)x[j * inner]; a = {acc.format(a='a', v='v')}; }}
{_local_reduce('a', comb)}
  if (lid == 0) Y[yoff + row] = ({ot})({fin.format(a='a')});
"""
    elif kind in ("softmax", "logsoftmax"):
        mx, sm = _REDUCE["max"], _REDUCE["sum"]
        final = "exp((float)x[j * inner] - m) / s" if kind == "softmax" else \
            "(float)x[j * inner] - m - log(s)"
        body = f"""  float m = -INFINITY;
  for (int j = lid; j < R; j += LS) {{ float v = (float)x[j * inner]; m = {nan_max("m", "v")}; }}
{_local_reduce('m', mx[2])}
  float s = 0.0f;
  for (int j = lid; j < R; j += LS) s += exp((float)x[j * inner] - m);
{_local_reduce('s', sm[2])}
  for (int j = lid; j < R; j += LS) {store(final)}
"""
    elif kind == "mvn":
        eps = flit(params["eps"])
        if params["normalize_variance"]:
            denom = f"sqrt(var + {eps})" if params["inside_sqrt"] else f"(sqrt(var) + {eps})"
            norm = f"/ {denom}"
        else:
            norm = ""
        body = f"""  float s = 0.0f;
  for (int j = lid; j < R; j += LS) s += (float)x[j * inner];
{_local_reduce('s', '{a} + {b}')}
  float mean = s / (float)R;
  float q = 0.0f;
  for (int j = lid; j < R; j += LS) {{ float d = (float)x[j * inner] - mean; q += d * d; }}
{_local_reduce('q', '{a} + {b}')}
  float var = q / (float)R;
  for (int j = lid; j < R; j += LS) {store(f"((float)x[j * inner] - mean) {norm}")}
"""
    else:
        raise KeyError(kind)
    text = header([in_dtype, out_dtype] + list(extra_dtypes)) + head + body + "}\n"
    return Source(text, "rowop")


@memoized
def attention(score_ops: list[Stage], side_dtypes: list, erank: int, jt: int, dmax: int,
              nan_to_zero: bool = False) -> Source:
    """Fused attention (netpass.runtime.attention): work-group (query row m, batch b) of LS
    items; out[b, m, :] = softmax_n(ops(q[b, m, :] . k[b, n, :])) @ v[b, n, :].

    Keys go in blocks of LS, one per item: its score, the ``score_ops`` (side input j read at
    the flat scores index through d<k>/s_in<j>_<k>), the block's max and sum in local memory,
    the running max/sum rescaled (online softmax), and the block's probabilities times the
    value rows accumulated per output column (item owns columns lid + t * LS, t < ``jt``). q's
    row sits in local memory (``dmax`` >= D floats). All operands are read through strides;
    batch b = b0 * B1 + b1 as in the GEMM kernels. ``nan_to_zero``: a row whose probabilities
    are NaN (every key masked by -inf) gives zeros, as ``Where(IsNaN(p), 0, p)`` does."""
    n_side = len(side_dtypes)
    args = ["__global const float* Q", "int qoff", "__global const float* Kt", "int koff",
            "__global const float* V", "int voff", "__global float* O", "int ooff",
            "int M", "int N", "int D", "int DV", "int B1",
            "int sq0", "int sq1", "int sqm", "int sqd", "int sk0", "int sk1", "int skn", "int skd",
            "int sv0", "int sv1", "int svn", "int svj", "int so0", "int so1", "int som", "int soj"]
    for j, dt in enumerate(side_dtypes):
        args += [f"__global const {ctype(dt)}* in{j}", f"int off_in{j}"]
    if n_side:
        args += [f"int d{k}" for k in range(erank)]
        for j in range(n_side):
            args += [f"int s_in{j}_{k}" for k in range(erank)]
    code = _stage_code([Stage("dot", [], "float")] + list(score_ops),
                       {j: f"in{j}[o_in{j}]" for j in range(n_side)})
    offs = _offsets(erank, [f"in{j}" for j in range(n_side)], "flat") if n_side else ""
    text = header([np.float32] + list(side_dtypes)) + f"""#define LS {LS}
#define JT {jt}
__kernel __attribute__((reqd_work_group_size(LS, 1, 1)))
void attention({', '.join(args)})
{{
  const int lid = get_local_id(0), m = get_group_id(1), b = get_group_id(2);
  const int b0 = b / B1, b1 = b - b0 * B1;
  Q += qoff + b0 * sq0 + b1 * sq1 + m * sqm;
  Kt += koff + b0 * sk0 + b1 * sk1;
  V += voff + b0 * sv0 + b1 * sv1;
  __local float qs[{dmax}];
  __local float red[LS];
  __local float ps[LS];
  for (int d = lid; d < D; d += LS) qs[d] = Q[d * sqd];
  float acc[JT];
  for (int t = 0; t < JT; ++t) acc[t] = 0.0f;
  float mx = -INFINITY, sum = 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int n0 = 0; n0 < N; n0 += LS) {{
    const int n = n0 + lid;
    float sc = -INFINITY;
    if (n < N) {{
      __global const float* kr = Kt + n * skn;
      float dot = 0.0f;
      for (int d = 0; d < D; ++d) dot = mad(qs[d], kr[d * skd], dot);
      int flat = (b * M + m) * N + n;
      {offs}
      {code}
      sc = x{len(score_ops)};
    }}
    red[lid] = sc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = LS / 2; s > 0; s >>= 1) {{
      if (lid < s) red[lid] = {nan_max("red[lid]", "red[lid + s]")};
      barrier(CLK_LOCAL_MEM_FENCE);
    }}
    const float nm = {nan_max("mx", "red[0]")};
    barrier(CLK_LOCAL_MEM_FENCE);
    float pr = 0.0f, scale = 1.0f;
    if (nm != -INFINITY) {{  /* (nothing but -inf yet: keep the sums empty) */
      pr = (n < N) ? exp(sc - nm) : 0.0f;
      scale = exp(mx - nm);
    }}
    ps[lid] = pr;
    red[lid] = pr;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = LS / 2; s > 0; s >>= 1) {{
      if (lid < s) red[lid] += red[lid + s];
      barrier(CLK_LOCAL_MEM_FENCE);
    }}
    sum = sum * scale + red[0];
    mx = nm;
    const int cnt = min(LS, N - n0);
    __global const float* vr = V + n0 * svn;
    for (int t = 0; t < JT; ++t) {{
      const int j = lid + t * LS;
      float a = acc[t] * scale;
      if (j < DV)
        for (int i = 0; i < cnt; ++i) a = mad(ps[i], vr[i * svn + j * svj], a);
      acc[t] = a;
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  O += ooff + b0 * so0 + b1 * so1 + m * som;
  for (int t = 0; t < JT; ++t) {{
    const int j = lid + t * LS;
    if (j < DV) {{ const float o = acc[t] / sum; O[j * soj] = {"isnan(o) ? 0.0f : o" if nan_to_zero else "o"}; }}
  }}
}}
"""
    return Source(text, "attention")


RNN_LS = 128
_RNN_ACT = {"sigmoid": "(1.0f / (1.0f + exp(-({0}))))", "tanh": "tanh({0})",
            "relu": "(isnan({0}) ? ({0}) : fmax({0}, 0.0f))"}


@memoized
def recurrent(cell: str, hs: int, acts: tuple, clip: float, linear_before_reset: bool,
              is_cell: bool, lens_ctype: str = "int") -> Source:
    """LSTM / GRU / RNN over a whole sequence in one launch: one work-group per (batch row,
    direction) keeps h (and c) in local memory and loops over time; gate rows are spread over
    the work-items. OpenVINO gate orders (LSTM f,i,c,o; GRU z,r,h) and layouts (X [B, T, I],
    states [B, ND, HS], Y [B, ND, T, HS]); a cell is a sequence of length 1 without Y."""
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    act = [lambda v, a=a: _RNN_ACT[a].format(v) for a in acts]
    cl = (lambda v: nan_clamp(v, flit(-clip), flit(clip))) if clip > 0 else (lambda v: v)
    two = cell == "lstm"
    args = ["__global const float* X", "int xoff", "__global const float* H0", "int h0off"]
    if two:
        args += ["__global const float* C0", "int c0off"]
    if not is_cell:
        args += [f"__global const {lens_ctype}* L", "int loff"]
    args += ["__global const float* W", "int woff", "__global const float* Rw", "int roff",
             "__global const float* Bb", "int boff"]
    if not is_cell:
        args += ["__global float* Y", "int yoff"]
    args += ["__global float* HO", "int hooff"]
    if two:
        args += ["__global float* CO", "int cooff"]
    args += ["int T", "int I", "int ND", "int rev_all", "int use_len"]
    nb = 4 if (cell == "gru" and linear_before_reset) else gates

    def dots(g: str) -> str:
        return (f"float acc = 0.0f; for (int k = 0; k < I; ++k) acc = mad(x[k], W[({g}) * I + k], acc); "
                f"float acc2 = 0.0f; for (int k = 0; k < HS; ++k) acc2 = mad(h[k], Rw[({g}) * HS + k], acc2);")

    if cell == "lstm":
        gate_phase = f"""for (int g = lid; g < 4 * HS; g += LS) {{ {dots('g')} gt[g] = {cl('acc + acc2 + Bb[g]')}; }}"""
        update = f"""float f = {act[0]('gt[j]')}, ig = {act[0]('gt[HS + j]')};
        float cc = {act[1]('gt[2 * HS + j]')}, og = {act[0]('gt[3 * HS + j]')};
        float cn = f * c[j] + ig * cc;
        nh = og * {act[2]('cn')}; nc = cn;"""
    elif cell == "rnn":
        gate_phase = f"""for (int g = lid; g < HS; g += LS) {{ {dots('g')} gt[g] = {act[0](cl('acc + acc2 + Bb[g]'))}; }}"""
        update = "nh = gt[j];"
    else:
        if linear_before_reset:
            hpart = f"""for (int g = lid; g < 3 * HS; g += LS) {{ {dots('g')}
          if (g < 2 * HS) gt[g] = {act[0](cl('acc + acc2 + Bb[g]'))};
          else {{ gt[g] = acc + Bb[g]; rh[g - 2 * HS] = acc2 + Bb[g + HS]; }} }}"""
            update = f"nh = (1.0f - gt[j]) * {act[1](cl('gt[2 * HS + j] + gt[HS + j] * rh[j]'))} + gt[j] * h[j];"
            gate_phase = hpart
        else:
            gate_phase = f"""for (int g = lid; g < 2 * HS; g += LS) {{ {dots('g')} gt[g] = {act[0](cl('acc + acc2 + Bb[g]'))}; }}
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int j = lid; j < HS; j += LS) rh[j] = gt[HS + j] * h[j];
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int g = 2 * HS + lid; g < 3 * HS; g += LS) {{
        float acc = 0.0f; for (int k = 0; k < I; ++k) acc = mad(x[k], W[g * I + k], acc);
        float acc2 = 0.0f; for (int k = 0; k < HS; ++k) acc2 = mad(rh[k], Rw[g * HS + k], acc2);
        gt[g] = acc + acc2 + Bb[g]; }}"""
            update = f"nh = (1.0f - gt[j]) * {act[1](cl('gt[2 * HS + j]'))} + gt[j] * h[j];"
    ystore = "" if is_cell else "Y[yoff + ((b * ND + d) * T + t) * HS + j] = valid ? h[j] : 0.0f;"
    text = f"""#define HS {hs}
#define LS {RNN_LS}
__kernel __attribute__((reqd_work_group_size(LS, 1, 1)))
void rnn({', '.join(args)})
{{
  const int grp = get_group_id(0), lid = get_local_id(0);
  const int b = grp / ND, d = grp - (grp / ND) * ND;
  const int reverse = rev_all || d == 1;
  __local float h[HS], c[HS], gt[{gates} * HS], rh[HS];
  for (int j = lid; j < HS; j += LS) {{
    h[j] = H0[h0off + (b * ND + d) * HS + j];
    {"c[j] = C0[c0off + (b * ND + d) * HS + j];" if two else ""}
  }}
  const int len = {"use_len ? (int)L[loff + b] : T" if not is_cell else "T"};
  W += woff + d * {gates} * HS * I;
  Rw += roff + d * {gates} * HS * HS;
  Bb += boff + d * {nb} * HS;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = 0; step < T; ++step) {{
    const int t = reverse ? T - 1 - step : step;
    const int valid = t < len;
    __global const float* x = X + xoff + (b * T + t) * I;
    {gate_phase}
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int j = lid; j < HS; j += LS) {{
      float nh = 0.0f, nc = 0.0f;
      {update}
      if (valid) {{ h[j] = nh; {"c[j] = nc;" if two else ""} }}
      {ystore}
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  for (int j = lid; j < HS; j += LS) {{
    HO[hooff + (b * ND + d) * HS + j] = h[j];
    {"CO[cooff + (b * ND + d) * HS + j] = c[j];" if two else ""}
  }}
}}
"""
    return Source(text, "rnn")


# -- data movement -------------------------------------------------------------------------------
@memoized
def imap(dtype, pad_value: float | None) -> Source:
    """y[i] = idx[i] < 0 ? pad : x[idx[i]]: any op whose outputs copy input elements."""
    t = ctype(dtype)
    pad = flit(pad_value) if (pad_value is not None and is_float(dtype)) else \
        str(int(pad_value or 0))
    text = header([dtype]) + f"""__kernel void imap(__global const {t}* X, int xoff, __global {t}* Y, int yoff,
                   __global const int* idx, int n)
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int k = idx[gid];
  Y[yoff + gid] = k < 0 ? ({t})({pad}) : X[xoff + k];
}}
"""
    return Source(text, "imap")


@memoized
def split(dtype, n_out: int) -> Source:
    """Split along one axis in one launch: the input seen as [outer, A, inner]; element
    (o, a, i) goes to output j with c_j <= a < c_{j+1} (c_0 = 0, c_{n_out} = A) at
    (o, a - c_j, i). One work-item per input element, reads contiguous."""
    t = ctype(dtype)
    outs = "".join(f", __global {t}* Y{j}, int y{j}off" for j in range(n_out))
    bounds = "".join(f", int c{j}" for j in range(1, n_out))
    lo = ["0"] + [f"c{j}" for j in range(1, n_out)]
    hi = lo[1:] + ["A"]
    stores = []
    for j in range(n_out):
        row = f"o * {hi[j]} + a" if j == 0 else f"o * ({hi[j]} - {lo[j]}) + a - {lo[j]}"
        store = f"Y{j}[y{j}off + ({row}) * inner + i] = v;"
        stores.append(store if j == n_out - 1 else f"if (a < {hi[j]}) {store}")
    chain = "\n  else ".join(stores)
    text = header([dtype]) + f"""__kernel void split(__global const {t}* X, int xoff{outs}, int n, int A, int inner{bounds})
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int i = gid % inner; int q = gid / inner;
  int a = q % A; int o = q / A;
  {t} v = X[xoff + gid];
  {chain}
}}
"""
    return Source(text, "split")


@memoized
def gather(dtype, idx_dtype) -> Source:
    t, it = ctype(dtype), ctype(idx_dtype)
    text = header([dtype]) + f"""__kernel void gather(__global const {t}* X, int xoff, __global const {it}* I, int ioff,
                     __global {t}* Y, int yoff, int n, int nidx, int D, int inner)
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int in_i = gid % inner;
  int q = gid / inner;
  int j = q % nidx;
  int o = q / nidx;
  long k = (long)I[ioff + j];
  if (k < 0) k += D;
  Y[yoff + gid] = (k >= 0 && k < D) ? X[xoff + ((long)o * D + k) * inner + in_i] : ({t})0;
}}
"""
    return Source(text, "gather")


# -- convolution and pooling ---------------------------------------------------------------------
@memoized
def conv(dtype, epilogue: list[Stage], n_extra: int, extra_dtypes: list, erank: int) -> Source:
    """Direct 2-D convolution, one output element per work-item; generic tensor strides make
    NCHW and NHWC (and OIHW / OHWI filters) the same kernel."""
    t = ctype(dtype)
    args = [f"__global const {t}* X", "int xoff", f"__global const {t}* W", "int woff",
            f"__global {t}* Y", "int yoff", "int n",
            "int Cg", "int H", "int Wd", "int Og", "int OH", "int OW", "int KH", "int KW",
            "int sh", "int sw", "int dh", "int dw", "int ph", "int pw",
            "int xsn", "int xsc", "int xsh", "int xsw", "int ysn", "int ysc", "int ysh", "int ysw", "int O",
            "int wso", "int wsc", "int wsh", "int wsw"]
    for j in range(n_extra):
        args += [f"__global const {ctype(extra_dtypes[j])}* in{j}", f"int off_in{j}"]
    if n_extra:
        args += [f"int d{k}" for k in range(erank)]
        for j in range(n_extra):
            args += [f"int s_in{j}_{k}" for k in range(erank)]
    code = _stage_code([Stage("acc", [], "float")] + epilogue, {j: f"in{j}[o_in{j}]" for j in range(n_extra)})
    offs = _offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
    text = header([dtype] + list(extra_dtypes)) + f"""__kernel void conv({', '.join(args)})
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int ow = gid % OW; int q = gid / OW;
  int oh = q % OH; q /= OH;
  int oc = q % O; int b = q / O;
  int g = oc / Og;
  float acc = 0.0f;
  __global const {t}* w = W + woff + (long)oc * wso;
  __global const {t}* x = X + xoff + (long)b * xsn + (long)g * Cg * xsc;
  for (int c = 0; c < Cg; ++c) {{
    for (int kh = 0; kh < KH; ++kh) {{
      int ih = oh * sh - ph + kh * dh;
      if (ih < 0 || ih >= H) continue;
      for (int kw = 0; kw < KW; ++kw) {{
        int iw = ow * sw - pw + kw * dw;
        if (iw < 0 || iw >= Wd) continue;
        acc = mad((float)x[c * xsc + ih * xsh + iw * xsw], (float)w[c * wsc + kh * wsh + kw * wsw], acc);
      }}
    }}
  }}
  int flat = b * ysn + oc * ysc + oh * ysh + ow * ysw;
  {offs}
  {code}
  Y[yoff + flat] = ({t})(x{len(epilogue)});
}}
"""
    return Source(text, "conv")


@memoized
def pool(dtype, kind: str, exclude_pad: bool) -> Source:
    """Max / average 2-D pooling over strided tensors (NCHW or NHWC)."""
    t = ctype(dtype)
    init = "-INFINITY" if kind == "max" else "0.0f"
    upd = f"acc = {nan_max('acc', 'v')};" if kind == "max" else "acc += v;"
    fin = "acc" if kind == "max" else ("acc / (float)cnt" if exclude_pad else "acc / (float)full")
    text = header([dtype]) + f"""__kernel void pool(__global const {t}* X, int xoff, __global {t}* Y, int yoff, int n,
                   int C, int H, int Wd, int OH, int OW, int KH, int KW, int sh, int sw,
                   int dh, int dw, int ph, int pw, int peh, int pew,
                   int xsn, int xsc, int xsh, int xsw, int ysn, int ysc, int ysh, int ysw)
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int ow = gid % OW; int q = gid / OW;
  int oh = q % OH; q /= OH;
  int c = q % C; int b = q / C;
  float acc = {init};
  int cnt = 0, full = 0;
  __global const {t}* x = X + xoff + (long)b * xsn + (long)c * xsc;
  for (int kh = 0; kh < KH; ++kh) {{
    int ih = oh * sh - ph + kh * dh;
    for (int kw = 0; kw < KW; ++kw) {{
      int iw = ow * sw - pw + kw * dw;
      if (ih >= -ph && ih < H + peh && iw >= -pw && iw < Wd + pew) full++;
      if (ih < 0 || ih >= H || iw < 0 || iw >= Wd) continue;
      float v = (float)x[ih * xsh + iw * xsw];
      cnt++;
      {upd}
    }}
  }}
  Y[yoff + b * ysn + c * ysc + oh * ysh + ow * ysw] = ({t})({fin});
}}
"""
    return Source(text, "pool")
