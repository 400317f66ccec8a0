"""Pieces of the tensor-core kernels (:mod:`netpass.runtime.kernels.mma`, ``flash``) shared by
their main loops: the PTX macros (``mma.sync``, ``cp.async``) or their emulation through local
memory, the TF32 operand split, and the stage fills: one 16-byte piece of a local-memory stage
copied from a tensor (``cp.async``, a plain 16-byte copy, or element loads for other strides)
or gathered from an NCHW image as an implicit im2col column block (the convolution GEMM);
and a GEMM's normalized product (``norm_out_parts``: a LayerNorm folded into the weights)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .common import LS, Source, header, memoized, nan_max
from .gemm import norm_scale

if TYPE_CHECKING:  # pragma: no cover
    from .mma import MmaConfig

# (emulated) PTX pieces ---------------------------------------------------------------------------
_PTX_MACROS = r"""
#define MMA(c0, c1, c2, c3, a0, a1, a2, a3, b0, b1) \
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 " \
    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};" \
    : "=f"(c0), "=f"(c1), "=f"(c2), "=f"(c3) \
    : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c0), "f"(c1), "f"(c2), "f"(c3))
#define CP_ASYNC(dst, src, bytes) asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" \
    :: "r"((uint)(size_t)(dst)), "l"(src), "r"(bytes) : "memory")
#define CP_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define CP_WAIT_N(n) asm volatile("cp.async.wait_group " #n ";" ::: "memory")
#define MMA_PUT_A(s, a0, a1, a2, a3)
#define MMA_PUT_B(s, b0, b1)
#define MMA_SYNC()
#define MMA_FROM(c0, c1, c2, c3, a0, a1, a2, a3, b0, b1, sa, sb) \
  MMA(c0, c1, c2, c3, a0, a1, a2, a3, b0, b1)
"""

# the m16n8k8 product through local memory: fragments in (their low 13 bits dropped, as the
# tensor cores read float32 bits as TF32), barrier, 4 outputs per lane out, split into
# MMA_PUT_A/B, MMA_SYNC and MMA_FROM so that a step's products share two barriers (mma_group):
# PoCL compiles a kernel in time that grows with its barriers (a 3xTF32 64 x 48 warp tile made
# 288 a K block with a barrier pair a product, and one such kernel compiled for over ten
# minutes). With PTX, MMA_FROM is MMA.
_EMULATED_MACROS = r"""
#define TF32T(u) as_float((u) & 0xffffe000u)
#define MMA_PUT_A(s, a0, a1, a2, a3) { \
  __local float* sa_ = mma_sa + (warp * MMA_A_SLOTS + (s)) * 128; \
  sa_[g * 8 + t] = TF32T(a0); sa_[(g + 8) * 8 + t] = TF32T(a1); \
  sa_[g * 8 + t + 4] = TF32T(a2); sa_[(g + 8) * 8 + t + 4] = TF32T(a3); }
#define MMA_PUT_B(s, b0, b1) { \
  __local float* sb_ = mma_sb + (warp * MMA_B_SLOTS + (s)) * 64; \
  sb_[t * 8 + g] = TF32T(b0); sb_[(t + 4) * 8 + g] = TF32T(b1); }
#define MMA_SYNC() barrier(CLK_LOCAL_MEM_FENCE);
#define MMA_FROM(c0, c1, c2, c3, a0, a1, a2, a3, b0, b1, sa, sb) { \
  __local const float* sa_ = mma_sa + (warp * MMA_A_SLOTS + (sa)) * 128; \
  __local const float* sb_ = mma_sb + (warp * MMA_B_SLOTS + (sb)) * 64; \
  for (int kk_ = 0; kk_ < 8; ++kk_) { \
    const float x0_ = sa_[g * 8 + kk_], x1_ = sa_[(g + 8) * 8 + kk_]; \
    const float y0_ = sb_[kk_ * 8 + 2 * t], y1_ = sb_[kk_ * 8 + 2 * t + 1]; \
    c0 = fma(x0_, y0_, c0); c1 = fma(x0_, y1_, c1); \
    c2 = fma(x1_, y0_, c2); c3 = fma(x1_, y1_, c3); \
  } }
#define CP_ASYNC(dst, src, bytes) FILL_PLAIN(dst, src, bytes)
#define CP_COMMIT()
#define CP_WAIT()
#define CP_WAIT_N(n)
"""

# TF32 head of a float32 by round to nearest on its bits (infinities and NaN truncated: the
# canonical NaN 0x7fffffff would carry into the sign)
_TF32_RN = r"""
inline uint tf32_rn(float x) {
  const uint u = as_uint(x);
  return ((u & 0x7f800000u) == 0x7f800000u ? u : u + 0x1000u) & 0xffffe000u;
}
"""

# plain 16-byte stage fill: ``bytes`` (0..16) valid bytes from ``src``, zeros after them
_PLAIN_FILL = r"""
#define FILL_PLAIN(dst, src, bytes) do { \
  const int nb_ = (bytes) >> 2; float4 v_ = (float4)(0.0f); \
  if (nb_ >= 4) v_ = vload4(0, (src)); \
  else { \
    if (nb_ > 0) v_.x = (src)[0]; if (nb_ > 1) v_.y = (src)[1]; if (nb_ > 2) v_.z = (src)[2]; \
  } \
  *(__local float4*)(dst) = v_; } while (0)
"""


def macros(ptx: bool, in_flight: int) -> str:
    """The PTX pieces (or their emulation): ``tf32_rn()``, ``CP_ASYNC``, ``CP_COMMIT``,
    ``CP_WAIT`` (waits until at most ``in_flight`` groups of copies are pending), ``CP_WAIT_N(n)``
    (at most ``n``) and
    ``FILL_PLAIN``; the products of :func:`mma_group` (``MMA_PUT_A``, ``MMA_PUT_B``,
    ``MMA_SYNC``, ``MMA_FROM``), whose emulation reads ``warp``, ``g``, ``t`` and local arrays
    ``mma_sa`` / ``mma_sb`` (:func:`emulation_scratch`)."""
    if not ptx:
        return _PLAIN_FILL + _TF32_RN + _EMULATED_MACROS
    wait = f'#define CP_WAIT() asm volatile("cp.async.wait_group {in_flight};" ::: "memory")\n'
    return _PLAIN_FILL + _TF32_RN + _PTX_MACROS + wait


def emulation_scratch(ptx: bool, warps: int, a_slots: int, b_slots: int) -> str:
    """Local arrays the emulated products exchange fragments through, ``a_slots`` A and
    ``b_slots`` B fragments a warp (the most one :func:`mma_group` puts; nothing with PTX)."""
    if ptx:
        return ""
    return (f"__local float mma_sa[{warps * a_slots} * 128], mma_sb[{warps * b_slots} * 64];\n"
            f"#define MMA_A_SLOTS {a_slots}\n#define MMA_B_SLOTS {b_slots}\n")


def tf32_parts(split: int) -> list[str]:
    """The TF32 parts of an operand (:func:`split_operand`): its head "h", and for 3xTF32 its
    remainder "l"."""
    return ["h"] if split == 1 else ["h", "l"]


def mma_slots(mi: int, ni: int, split: int) -> tuple[int, int]:
    """The A and B fragment slots a warp's :func:`mma_group` of ``mi`` A and ``ni`` B operands
    uses (``emulation_scratch``)."""
    parts = len(tf32_parts(split))
    return mi * parts, ni * parts


HI_ROUND = "rn"  # how 3xTF32 takes an operand's TF32 head: "rn" (to nearest) or "trunc"


def split_operand(name: str, value: str, split: int, hi_round: str = "rn") -> list[str]:
    """Declarations of the TF32 operand(s) of float ``value``: ``name``h and, for 3xTF32,
    ``name``l. No conversion instruction (``cvt.rna.tf32`` issues at a quarter of the FMA
    rate and bounded the first kernels): the tensor cores read a float32's bits as TF32,
    dropping the low 13 bits, so TF32 passes the bits as they are (truncation), and 3xTF32
    takes the head by integer rounding (``hi_round`` "rn") or masking ("trunc") and the
    remainder ``value - head`` (exact in float32; 0 for infinities, whose remainder would
    be NaN) as bits too."""
    if split == 1:
        return [f"const uint {name}h = as_uint({value});"]
    head = f"tf32_rn({value})" if hi_round == "rn" else f"(as_uint({value}) & 0xffffe000u)"
    return [f"const uint {name}h = {head};",
            f"const uint {name}l = isinf({value}) ? 0u : as_uint({value} - as_float({name}h));"]


def mma_group(a_ops: list[str], b_ops: list[str], products: list[tuple[str, int, int]],
              split: int) -> list[str]:
    """The mma calls of ``products`` (accumulators, index into ``a_ops``, index into
    ``b_ops``): A operands (four registers) and B operands (two), each a template with
    ``{p}`` for the TF32 part (:func:`split_operand`: "h", and "l" for 3xTF32, which adds the
    small products first). Emulated, every operand goes to its slot of local memory first
    (part p of operand n in slot ``n * parts + p``) and the products read them there after one
    barrier (``MMA_PUT_A``, ``MMA_SYNC``, ``MMA_FROM``); with PTX the puts and barriers are
    empty and the products run in the order given."""
    pairs = [("h", "h")] if split == 1 else [("l", "h"), ("h", "l"), ("h", "h")]
    parts = tf32_parts(split)

    def slot(n: int, p: str) -> int:
        return n * len(parts) + parts.index(p)

    lines = [f"MMA_PUT_A({slot(i, p)}, {a.format(p=p)})" for i, a in enumerate(a_ops)
             for p in parts]
    lines += [f"MMA_PUT_B({slot(j, p)}, {b.format(p=p)})" for j, b in enumerate(b_ops)
              for p in parts]
    lines.append("MMA_SYNC()")
    for acc, i, j in products:
        lines += [f"MMA_FROM({acc}, {a_ops[i].format(p=pa)}, {b_ops[j].format(p=pb)}, "
                  f"{slot(i, pa)}, {slot(j, pb)});" for pa, pb in pairs]
    lines.append("MMA_SYNC()")
    return lines


def mma_calls(mi: int, ni: int, split: int) -> list[str]:
    """The mma calls of one 8-wide step of an MI x NI grid of m16n8 fragments: accumulators
    c{i}_{j}_{q} from operands a{i}_{r}{h,l} and b{j}_{r}_{h,l} (:func:`split_operand`), as
    one :func:`mma_group`."""
    a_ops = [", ".join(f"a{i}_{r}{{p}}" for r in range(4)) for i in range(mi)]
    b_ops = [", ".join(f"b{j}_{r}_{{p}}" for r in range(2)) for j in range(ni)]
    products = [(", ".join(f"c{i}_{j}_{q}" for q in range(4)), i, j)
                for i in range(mi) for j in range(ni)]
    return mma_group(a_ops, b_ops, products, split)


def copy_piece(how: str, buf: str, row: str, idx: str, lim: str, inner: str, row_ok: str) -> str:
    """One 16-byte piece of a stage (destination ``d``): elements ``idx`` .. ``idx + 3`` along
    the axis of stride ``inner`` (1 unless ``how`` is "strided") of row offset ``row`` of
    ``buf``, those below ``lim`` while ``row_ok``; zeros elsewhere. The source address stays
    inside the tensor when nothing is read (cp.async with 0 bytes)."""
    bytes_ = f"(({row_ok}) ? clamp({lim} - {idx}, 0, 4) * 4 : 0)"
    src = f"{buf} + {row} + ({idx} < {lim} ? {idx} : 0)"
    if how == "cp":
        return f"  CP_ASYNC(d, {src}, {bytes_});"
    if how == "plain":
        return f"  FILL_PLAIN(d, {src}, {bytes_});"
    if how == "branch":
        return f"  if (al16) CP_ASYNC(d, {src}, {bytes_}); else FILL_PLAIN(d, {src}, {bytes_});"
    return (f"  {{ const int nb_ = {bytes_} >> 2; float4 v_ = (float4)(0.0f);\n"
            f"    __global const float* p_ = {buf} + {row} + {idx} * {inner};\n"
            f"    if (nb_ > 0) v_.x = p_[0]; if (nb_ > 1) v_.y = p_[{inner}];\n"
            f"    if (nb_ > 2) v_.z = p_[2 * {inner}]; if (nb_ > 3) v_.w = p_[3 * {inner}];\n"
            f"    *(__local float4*)d = v_; }}")


CONV_ARGS = ("khw", "kw", "ow", "sh", "sw", "ph", "pw", "dh", "dw", "h", "w", "xsc", "xsh", "xsw")


def gather_piece() -> str:
    """A 16-byte piece of an implicit im2col B stage (destination ``d``): k = (c, kh, kw),
    columns n .. n + 3 = output pixels (oh, ow), zeros outside the image and past K, N. Four
    pixels of one output row that a unit-stride convolution reads inside one image row are
    consecutive floats: one vector load (most pieces of a 3x3 convolution); the others
    element by element, the output row and column stepped on instead of divided again."""
    taps = []
    for e, comp in enumerate("xyzw"):
        step = "" if e == 0 else ("if (++ow == cv_ow) { ow = 0; ih += cv_sh; iw = iw0 - cv_sw; } "
                                  "iw += cv_sw;\n        ")
        taps.append(f"{step}if (n + {e} < N && ih >= 0 && ih < cv_h && iw >= 0 && iw < cv_w) "
                    f"v_.{comp} = xc[ih * cv_xsh + iw * cv_xsw];")
    return f"""  {{ float4 v_ = (float4)(0.0f);
    if (k < KE) {{
      const int c = k / cv_khw, r = k - c * cv_khw, kh = r / cv_kw, kw = r - kh * cv_kw;
      const int ih0 = kh * cv_dh - cv_ph, iw0 = kw * cv_dw - cv_pw;
      __global const float* xc = B + c * cv_xsc;
      const int oh = n / cv_ow;
      int ow = n - oh * cv_ow, ih = ih0 + oh * cv_sh, iw = iw0 + ow * cv_sw;
      const int row4 = cv_sw == 1 && cv_xsw == 1 && ow + 3 < cv_ow && n + 3 < N;
      if (row4 && ih >= 0 && ih < cv_h && iw >= 0 && iw + 3 < cv_w) {{
        v_ = vload4(0, xc + ih * cv_xsh + iw);
      }} else {{
        {(chr(10) + "        ").join(taps)}
      }}
    }}
    *(__local float4*)d = v_; }}"""


def _norm_out_room(cfg: MmaConfig) -> tuple[int, int]:
    """(floats of ``As`` the slab loop's stages hold, where norm_out's statistics start in
    them: after the epilogue's row slices, ``2 * BM`` means and inverse deviations, then
    ``2 * NT`` partial sums)."""
    room = cfg.stages * cfg.bk * cfg.bm
    return room, room - 2 * cfg.bm - 2 * cfg.threads


def norm_out_fits(cfg: MmaConfig) -> bool:
    """Whether :func:`gemm_mma` can take ``norm_out`` on this tile: every row's items divide
    a 16-wide slab's four float4s, and the statistics fit in the stages after the loop."""
    room, start = _norm_out_room(cfg)
    tpr = cfg.threads // cfg.bm if cfg.bm <= cfg.threads else 0
    return cfg.loop == "slab" and tpr in (1, 2, 4) and cfg.threads % cfg.bm == 0 \
        and start >= cfg.warps * 16 * (cfg.wn + 4)


def norm_out_parts(cfg: MmaConfig, norm: tuple, split: bool = False,
                   ahead: bool = False) -> tuple[str, ...]:
    """C pieces of a GEMM whose A rows are normalized (LayerNorm / RMSNorm, ``norm`` as
    kernels.norm_prologue's) with the normalization applied to the product: with B the
    folded weights (``norm_gemm.fold_weights``: rows ``gamma[k] * W[k, :]``, then their
    column sums ``c``, then ``beta @ W``), ``(a - mean) * rstd * gamma @ W + beta @ W`` is
    ``rstd * (a @ B - mean * c) + d``. The main loop is the plain GEMM's; each row's sums
    and sums of squares, shifted by its first element, are taken from the A stages as they
    pass (``TPR`` items a row, a float4 each of a slab's four per item and step, rotated by
    row so that the items of a quarter-warp read other banks), combined after the loop in
    the free stages, and applied by ``NORM_OUT(mm, nn, v)`` in the store. ``split`` (K
    slices reduced in the launch's tail): each slice stores its rows' sums after the partial
    products (``P`` from ``batches * slices * M * N``, ``2 * M`` per slice) and the last
    slice of a tile adds them up before its store. ``ahead``: :func:`row_moments` took the
    rows' means and scales (argument ``NS``): the tile reads its rows' from there before its
    store, and the stages carry nothing more. (declarations, per stage, after the loop, in
    the tail, defines)."""
    rms = norm[5]
    BM, NT = cfg.bm, cfg.threads
    defines = (f"\n#define NORM_OUT(mm, nn, val) (nst_[{BM} + (mm) - m0] * ((val) - nst_[(mm) - m0]"
               " * B[(size_t)K * sbk + (nn) * sbn]) + B[(size_t)(K + 1) * sbk + (nn) * sbn])\n")
    if ahead:
        start = _norm_out_room(cfg)[1]
        read = f"""  if (tid < {BM}) {{  /* the rows' statistics (row_moments) */
    const int r_ = min(m0 + tid, M - 1);
    nst_[tid] = NS[r_]; nst_[{BM} + tid] = NS[M + r_];
  }}
  barrier(CLK_LOCAL_MEM_FENCE);
"""
        after = f"""  barrier(CLK_LOCAL_MEM_FENCE);  /* the stages are free */
  __local float* const nst_ = (__local float*)As + {start};
"""
        return "", "", after + ("" if split else read), read if split else "", defines
    tpr = NT // BM
    per = 4 // tpr
    start = _norm_out_room(cfg)[1]  # (gemm_mma checked norm_out_fits)
    shift = "0.0f" if rms else "A[min(m0 + nr_, M - 1) * sam]"
    decl = f"""
  const int nr_ = tid / {tpr}, nl_ = tid % {tpr};
  const float nsh_ = {shift};
  float ns_ = 0.0f, nq_ = 0.0f;"""
    loads = "".join(
        f"\n      {{ const float4 x_ = vload4(0, &As[cs][sl_][nr_][4 * ((nl_ * {per} + {u} + "
        f"(nr_ >> 1)) & 3)]) - nsh_; ns_ += (x_.x + x_.y) + (x_.z + x_.w); nq_ += dot(x_, x_); }}"
        for u in range(per))
    stage = f"""#pragma unroll
    for (int sl_ = 0; sl_ < BK / 16; ++sl_) {{{loads}
    }}"""
    def finish(row: str, sh: str) -> str:  # (row ``row``'s mean and scale from s_, q_)
        moments, mean, rs = _moments(norm, sh)
        return f"{moments}nst_[{row}] = {mean}; nst_[{BM} + {row}] = {rs};"

    after = f"""  barrier(CLK_LOCAL_MEM_FENCE);  /* the stages are free: the rows' statistics */
  __local float* const nst_ = (__local float*)As + {start};
  nst_[{2 * BM} + tid] = ns_; nst_[{2 * BM + NT} + tid] = nq_;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (nl_ == 0) {{
    float s_ = 0.0f, q_ = 0.0f;
    for (int i_ = 0; i_ < {tpr}; ++i_) {{
      s_ += nst_[{2 * BM} + tid + i_]; q_ += nst_[{2 * BM + NT} + tid + i_];
    }}
"""
    stats = "P + (size_t)get_num_groups(2) * M * N"  # (one batch: norm_out_plan)
    if split:
        after += f"""    if (m0 + nr_ < M) {{
      __global float* const st_ = {stats} + ks_ * 2 * M + m0 + nr_;
      st_[0] = s_; st_[M] = q_;
    }}
  }}
"""
        tail = f"""  if (tid < {BM}) {{  /* the rows' statistics: the slices' sums */
    const int r_ = min(m0 + tid, M - 1);
    float s_ = 0.0f, q_ = 0.0f;
    for (int s_i = 0; s_i < sk_n; ++s_i) {{
      s_ += sk_load({stats} + s_i * 2 * M + r_); q_ += sk_load({stats} + s_i * 2 * M + M + r_);
    }}
    {finish("tid", "0.0f" if rms else "A[r_ * sam]")}
  }}
  barrier(CLK_LOCAL_MEM_FENCE);
"""
    else:
        after += f"""    {finish("nr_", "nsh_")}
  }}
  barrier(CLK_LOCAL_MEM_FENCE);
"""
        tail = ""
    return decl, stage, after, tail, defines


def _moments(norm: tuple, sh: str) -> tuple[str, str, str]:
    """(C statements, the mean, the scale) of a row from its sums ``s_`` and squares ``q_``
    over ``K`` elements shifted by ``sh`` (``norm`` as norm_out_parts'; RMSNorm: no mean)."""
    variance, rms = norm[2], norm[5]
    if rms:
        return "", "0.0f", norm_scale(norm, "var_", "q_")
    var = f"const float var_ = {nan_max('q_ / (float)K - mu_ * mu_', '0.0f')};\n    " \
        if variance else ""
    return ("const float mu_ = s_ / (float)K;\n    " + var, f"{sh} + mu_",
            norm_scale(norm, "var_", "q_"))


def _row_sums(rms: bool) -> str:
    """C statements leaving the sums ``s_`` and squares ``q_`` of row ``x_`` (``K``
    contiguous floats) in every item of the work-group, shifted by the row's first element
    (``sh_``; 0 for RMSNorm), 16-byte loads where the row allows."""
    return f"""const float sh_ = {"0.0f" if rms else "x_[0]"};
  float s_ = 0.0f, q_ = 0.0f;
  if ((K & 3) == 0 && (((size_t)x_) & 15) == 0) {{
    for (int k4 = lid; k4 < K / 4; k4 += LS) {{
      const float4 d_ = vload4(k4, x_) - sh_;
      s_ += (d_.x + d_.y) + (d_.z + d_.w); q_ += dot(d_, d_);
    }}
  }} else {{
    for (int k = lid; k < K; k += LS) {{ const float d_ = x_[k] - sh_; s_ += d_; q_ += d_ * d_; }}
  }}
  __local float ss_[LS], qs_[LS];
  ss_[lid] = s_; qs_[lid] = q_;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = LS / 2; h > 0; h >>= 1) {{
    if (lid < h) {{ ss_[lid] += ss_[lid + h]; qs_[lid] += qs_[lid + h]; }}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  s_ = ss_[0]; q_ = qs_[0];"""


@memoized
def row_moments(norm: tuple) -> Source:
    """Each row's mean and normalization scale (``norm`` as norm_out_parts') for a GEMM whose
    product is normalized (``norm_out_parts``' ``ahead``): one work-group of ``LS`` items per
    row of ``K`` contiguous floats, sums shifted by the row's first element as the GEMM's own
    would take them; ``NS[row]`` the mean (0 for RMSNorm), ``NS[rows + row]`` the scale."""
    moments, mean, scale = _moments(norm, "sh_")
    text = header([]) + f"""#define LS {LS}
__kernel __attribute__((reqd_work_group_size(LS, 1, 1)))
void row_moments(__global const float* A, int aoff, int K, __global float* NS)
{{
  const int row = get_group_id(0), lid = get_local_id(0), rows = get_num_groups(0);
  __global const float* const x_ = A + aoff + (size_t)row * K;
  {_row_sums(norm[5])}
  if (lid == 0) {{
    {moments}NS[row] = {mean}; NS[rows + row] = {scale};
  }}
}}
"""
    return Source(text, "row_moments")


@memoized
def normalize_rows(norm: tuple) -> Source:
    """Each row of ``K`` contiguous floats normalized (``norm`` as norm_out_parts': MVN or
    RMSNorm), times gamma and plus beta where ``norm`` has them (``K`` contiguous floats
    each), into ``Y``: a LayerNorm ahead of a tensor-core GEMM that reads its rows
    normalized. One work-group of ``LS`` items per row: one pass for the row's sums (as
    :func:`row_moments`), one for the output, 16-byte loads and stores where K allows (the
    generic row kernel, ``kernels.rowop``, takes three passes, a reduction each for the mean
    and the variance, and indexes gamma and beta through the output's shape)."""
    gamma, beta = norm[3], norm[4]
    moments, mean, scale = _moments(norm, "sh_")
    vectors = "".join(f", __global const float* {v}, int {v}off"
                      for v, on in (("G", gamma), ("Bt", beta)) if on)
    v4 = "v_" + (" * vload4(k4, G + Goff)" if gamma else "") \
        + (" + vload4(k4, Bt + Btoff)" if beta else "")
    v1 = "v_" + (" * G[Goff + k]" if gamma else "") + (" + Bt[Btoff + k]" if beta else "")
    text = header([]) + f"""#define LS {LS}
__kernel __attribute__((reqd_work_group_size(LS, 1, 1)))
void normalize_rows(__global const float* A, int aoff, int K, __global float* Y{vectors})
{{
  const int row = get_group_id(0), lid = get_local_id(0);
  __global const float* const x_ = A + aoff + (size_t)row * K;
  __global float* const y_ = Y + (size_t)row * K;
  {_row_sums(norm[5])}
  {moments}const float mean_ = {mean}, scale_ = {scale};
  if ((K & 3) == 0) {{
    for (int k4 = lid; k4 < K / 4; k4 += LS) {{
      const float4 v_ = (vload4(k4, x_) - mean_) * scale_;
      vstore4({v4}, k4, y_);
    }}
  }} else {{
    for (int k = lid; k < K; k += LS) {{ const float v_ = (x_[k] - mean_) * scale_; y_[k] = {v1}; }}
  }}
}}
"""
    return Source(text, "normalize_rows")
