"""GEMM kernels (MatMul, FullyConnected): ``gemm`` (register-tiled, local memory, generic
strides, batch broadcast), ``gemm_skinny`` (few output tiles: small M), ``gemm_aligned`` (GPU,
128x128 float4 tiles) and ``gemm_pipelined`` (the same tiles filled through a cp.async ring on
NVIDIA). All take the same arguments (:func:`gemm_args`), a fused elementwise epilogue and an
optional normalized-A prologue (:func:`norm_prologue`: a LayerNorm folded into the GEMM)."""
from __future__ import annotations

from dataclasses import dataclass

from .common import (
    Source,
    Stage,
    ctype,
    flit,
    header,
    memoized,
    nan_max,
    offsets,
    side_params,
    stage_code,
)


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


def gemm_args(t: str, n_extra: int, extra_dtypes: list, erank: int,
              norm: tuple | None = None) -> list[str]:
    """The argument list every GEMM kernel shares (one launch spec fits them all); with
    ``norm``, the gamma and beta vectors of the normalized-A prologue follow C."""
    args = [f"__global const {t}* A", "int aoff", f"__global const {t}* B", "int boff",
            f"__global {t}* C", "int coff"]
    if norm is not None:
        args += ["__global const float* G", "int goff"] if norm[3] else []
        args += ["__global const float* Bt", "int btoff"] if norm[4] else []
    args += ["int M", "int N", "int K", "int B1",
             "int sa0", "int sa1", "int sam", "int sak", "int sb0", "int sb1", "int sbk", "int sbn"]
    args += side_params(extra_dtypes[:n_extra], erank)
    return args


NORM_RUNS = 8  # float4 runs of a row an item of norm_prologue's float4 loop has in flight


def norm_prologue(norm: tuple | None, rows: int, threads: int, tid: str = "tid",
                  vector: str = "") -> str:
    """C code computing, for the work-group's ``rows`` rows of A from ``m0`` (clamped to
    M - 1; ``rows`` divides ``threads``), their mean and inverse standard deviation over K into
    ``nmu[]`` / ``nrs[]`` (norm_gemm: MVN folded into the GEMM; an RMSNorm's, ``norm[5]``: 0
    and the inverse root mean square). Each row's ``threads / rows`` items sum the row's
    elements shifted by its first one (unshifted for RMSNorm), and their squares (the shift
    keeps the variance's precision when the mean is large); empty with ``norm`` None.
    ``vector``: a C condition under which A's rows are float4 runs (contiguous, 16-byte
    aligned, K % 4 == 0); the items then read NORM_RUNS runs at a time, all in flight (a
    decode GEMV's prologue is a chain of load latencies otherwise)."""
    if norm is None:
        return ""
    rms = norm[5]
    rs = norm_scale(norm, "var", "q")
    tpr = threads // rows
    return f"""__local float nmu[{rows}], nrs[{rows}], nsum[{threads}], nsq[{threads}];
  {{
    const int r = {tid} / {tpr}, lane = {tid} - r * {tpr};
    __global const float* xr = A + min(m0 + r, M - 1) * sam;
    const float sh = {"0.0f" if rms else "xr[0]"};
    float s = 0.0f, q = 0.0f;
    {_norm_runs(vector, tpr)}for (int k = lane; k < K; k += {tpr}) {{
      const float d = xr[k * sak] - sh; s += d; q = mad(d, d, q);
    }}
    nsum[{tid}] = s; nsq[{tid}] = q;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0) {{
      for (int i = 1; i < {tpr}; ++i) {{ s += nsum[{tid} + i]; q += nsq[{tid} + i]; }}
      const float mean = s / (float)K;
      const float var = {nan_max("q / (float)K - mean * mean", "0.0f")};
      nmu[r] = {"0.0f" if rms else "sh + mean"};
      nrs[r] = {rs};
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}"""


def norm_scale(norm: tuple, var: str, sq: str) -> str:
    """C expression of a normalized row's scale (``norm`` as :func:`norm_prologue`'s) from
    its variance ``var``, or for RMSNorm (``norm[5]``: the root of the mean square, no mean
    taken off) from its sum of squares ``sq`` over K."""
    eps, inside, variance, rms = flit(norm[0]), norm[1], norm[2], norm[5]
    if rms:
        return f"rsqrt({sq} / (float)K + {eps})"
    if not variance:
        return "1.0f"
    return f"rsqrt({var} + {eps})" if inside else f"1.0f / (sqrt({var}) + {eps})"


def _norm_runs(vector: str, tpr: int) -> str:
    """norm_prologue's float4 loop (under ``vector``; the scalar loop after it as its else),
    NORM_RUNS loads per item issued before the sums use them; a run past K reads as the
    shift (adds nothing)."""
    if not vector:
        return ""
    loads = "".join(f"\n        const float4 x{u} = k4 + {u * tpr} < K4 ?"
                    f" vload4(k4 + {u * tpr}, xr) : (float4)(sh);" for u in range(NORM_RUNS))
    sums = "".join(f"\n        {{ const float4 d = x{u} - sh; s += (d.x + d.y) + (d.z + d.w);"
                   f" q += dot(d, d); }}" for u in range(NORM_RUNS))
    return f"""if ({vector}) {{
      const int K4 = K >> 2;
      for (int k4 = lane; k4 < K4; k4 += {NORM_RUNS * tpr}) {{{loads}{sums}
      }}
    }} else """


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
    args = gemm_args(t, n_extra, extra_dtypes, erank, norm)
    code = stage_code([Stage("acc[wm][wn]", [], "float")] + epilogue,
                       {j: f"in{j}[o_in{j}]" for j in range(n_extra)})
    offs = offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
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
      As[kk][mm] = (m < M && k < K)
          ? {norm_value(norm, "A[m * sam + k * sak]", "mm", "k")} : ({t})0;
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
    per step (eight B loads in flight), no barrier in the K loop. B is read coalesced: lanes
    run along n when B is K-major (sbn == 1, reordered FC weights), along k otherwise
    (transposed B). A values are the same for the lanes of a slice (broadcast loads), one float4
    per row and quad when A rows are contiguous and 16-byte aligned (float32). Rows and columns
    past M, N are clamped to valid addresses (their sums are never stored), so the loop has no
    bounds checks. The slices are summed in local memory, then the fused epilogue runs. Batch b
    is get_group_id(2) = b0 * B1 + b1 as in :func:`gemm`."""
    t = ctype(dtype)
    args = gemm_args(t, n_extra, extra_dtypes, erank, norm)
    code = stage_code([Stage("v", [], "float")] + epilogue,
                       {j: f"in{j}[o_in{j}]" for j in range(n_extra)})
    offs = offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""

    def step(a_row: str, a_vals: list[str], n: int) -> str:
        """Quads q, q + S, ... (n of them): their B loads first (4 n in flight), then per row
        ``a_row`` declares A values {j} (quad j) and the FMAs."""
        lines = []
        for j in range(n):
            k = f"((q + {j} * S) << 2)" if j else "(q << 2)"
            lines.append(f"const int k{j} = {k};")
            lines.append(" ".join(f"const float w{j}{u} = (float)bp[(k{j} + {u}) * sbk];"
                                  for u in range(4)))
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
                   [norm_value(norm, f"(float)ap{{j}}[{u} * sak]", "r", f"k{{j}} + {u}")
                    for u in range(4)])
    if t == "float":
        vector = quads("const float4 a{j} = "
                       + norm_value(norm, "*(__global const float4*)(A + ar[r] + k{j})", "r",
                                    "k{j}", True) + ";",
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
    for (int r = 0; r < RM; ++r)
      acc[r] = mad({norm_value(norm, "(float)A[ar[r] + k * sak]", "r", "k")}, w0, acc[r]);
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
    code = stage_code([Stage("v[q]", [], "float")] + epilogue,
                       {j: f"in{j}[o_in{j}]" for j in range(n_extra)})
    offs = offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
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
    args = gemm_args("float", n_extra, extra_dtypes, erank, norm)
    # the next tile's A loads, rows ar and ar + 64
    a_next = [norm_value(norm, f"vload4(0, A + (m0 + {r}) * sam + k0 + 16 + ac)", r,
                         "k0 + 16 + ac", True) for r in ("ar", "ar + 64")]
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
    As[buf][ac][ar] = a0.x; As[buf][ac + 1][ar] = a0.y; \\
    As[buf][ac + 2][ar] = a0.z; As[buf][ac + 3][ar] = a0.w; \\
    As[buf][ac][ar + 64] = a1.x; As[buf][ac + 1][ar + 64] = a1.y; \\
    As[buf][ac + 2][ar + 64] = a1.z; As[buf][ac + 3][ar + 64] = a1.w; \\
    vstore4(b0v, 0, &Bs[buf][br][bc]); vstore4(b1v, 0, &Bs[buf][br + 8][bc]);
  STORE_TILE(0)
  barrier(CLK_LOCAL_MEM_FENCE);
  int cur = 0;
  for (int k0 = 0; k0 < K; k0 += 16) {{
    const int more = k0 + 16 < K;
    if (more) {{
      a0 = {a_next[0]};
      a1 = {a_next[1]};
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
    40 TFLOP/s (43 without the plain-copy ring below). A is kept row-major in local memory
    (the copies cannot transpose); the math reads it as float4 along k. cp.async needs 16-byte
    aligned addresses: a work-group whose A or B start is not aligned (a view at an odd offset)
    fills the stages with ordinary loads instead. Without ``cp_async`` only that plain-copy ring
    is generated (it runs anywhere: the PoCL tests check the ring and the epilogue with it).
    Same arguments as :func:`gemm`."""
    args = gemm_args("float", n_extra, extra_dtypes, erank)

    def fmas(u: int) -> str:
        """k = kk + u: B row kk + u times component u of the A quads."""
        c = "xyzw"[u]
        return f"""{{
        const float4 y0 = vload4(0, &Bs[cs][kk + {u}][tn * 4]);
        const float4 y1 = vload4(0, &Bs[cs][kk + {u}][64 + tn * 4]);
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
            f"const float4 a{i} = "
            f"vload4(0, &As[cs][{'64 + ' if i >= 4 else ''}tm * 4 + {i % 4}][kk]);"
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
        macros = f"""#define CP_ASYNC(dst, src) \\
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" \\
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
