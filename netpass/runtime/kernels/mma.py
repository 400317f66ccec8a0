"""Tensor-core GEMM (``gemm_mma``): float32 C = A @ B through NVIDIA's ``mma.sync`` m16n8k8
TF32 instruction, reached from OpenCL C as inline PTX, with the operand tiles filled by PTX
``cp.async`` through a ring of local-memory stages.

Same arguments as every GEMM kernel of :mod:`netpass.runtime.kernels` (batch strides, the
fused elementwise epilogue, the optional normalized-A prologue), so the runtime launches it
with the same argument spec.

Precision (``split``): 1 multiplies TF32 operands (the tensor cores read float32 bits with
the low 13 mantissa bits dropped) and accumulates in float32, as torch's ``allow_tf32``; 3 is
"3xTF32": each operand is split into a TF32 head and its remainder, and the product is the
sum of the three larger partial products (head x head, head x tail, tail x head), accurate
to about float32 rounding at three times the tensor-core work (:func:`split_operand`).

Work decomposition: a work-group of ``NT = 32 * warps`` items owns a BM x BN tile of C; each
warp a WM x WN piece of it, MI x NI m16n8 accumulator fragments (4 floats per lane each). K
goes in blocks of BK (a multiple of 16) held in ``STAGES`` local-memory stages filled
``STAGES - 1`` blocks ahead of the math.

This module's main loop ("slab", ``MmaConfig.loop``) is described below; the pipelined one
("pipe": fragments of the next step prefetched, CUTLASS-style) is in :mod:`.mma_pipe`, with
its own local layouts; "bfrag" (B constant weights stored in fragment order, loaded from
global memory into registers, A through mma_pipe's ring) in :mod:`.mma_bfrag`. Fragments
come straight from local memory (no ``ldmatrix``). The k index inside an m16n8k8 step only has
to be paired the same way in A and B, so lane (g, t) (``g = lane / 4``, ``t = lane % 4``)
takes k = 4t .. 4t+3 of a 16-wide slab as one float4:
mma step 0 uses (4t, 4t+1) as its k slots (t, t+4), step 1 uses (4t+2, 4t+3). Layouts, free
of bank conflicts for those reads and for the 16-byte stage writes:

- A: ``[slab][BM][16]`` (k-contiguous rows of 64 bytes; the 8 lanes of a quarter-warp read two
  consecutive rows);
- B stored k-major in global memory (``[K, N]``, n contiguous): ``[BK][BN]`` with the 16-byte
  chunk index of row k XOR-ed with ``((k >> 2) & 3) << 1``, so that the lanes reading k = 4t + u
  of eight consecutive columns hit 32 different banks;
- B stored n-major (``[N, K]``, k contiguous, a transposed MatMul operand): ``[slab][BN][16]``
  as A.

Portability: the two PTX pieces sit behind macros (``MMA``, ``CP_ASYNC``). Without PTX
(``ptx=False``, e.g. PoCL) ``MMA`` is emulated by a warp exchange through local memory (each
lane stores its fragments, a barrier, each lane computes its four outputs of the 16x8x8
product from the stored tile, a barrier) with operands cut to TF32 the same way, and the
stages are filled by plain copies, so the tests check indexing, tiling, the ring, the tails
and the epilogue on any OpenCL device.

Tails: rows, columns and k past M, N, K are filled with zeros (``cp.async`` with a source
size of 0..12 bytes zero-fills the rest of its 16 bytes), so any M, N, K run; ``cp.async``
needs 16-byte aligned sources, so ``copy == "cp_async"`` is generated only for unit inner
strides with row strides and batch strides multiple of 4 floats, and a work-group whose A or
B start (the tensor offset) is not 16-byte aligned fills its stages with plain copies
(``align`` below).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import mma_bfrag, mma_pipe
from .common import (
    UNOPTIMIZED,
    Source,
    Stage,
    ctype,
    header,
    memoized,
    offsets,
    side_params,
    stage_code,
)
from .gemm import gemm_args, norm_prologue, norm_value
from .mma_parts import (
    CONV_ARGS,
    copy_piece,
    emulation_scratch,
    gather_piece,
    macros,
    mma_calls,
    mma_slots,
    norm_out_fits,
    norm_out_parts,
    split_operand,
)

F32 = np.dtype(np.float32)
# iterations of a warp's epilogue row loop unrolled (H200, GPT-2's 1024-token prefill: 2 took
# 3-7 us off each biased or GELU projection against 1 and 4; fully unrolled was 2-3x slower)
EPILOGUE_UNROLL = 2
# side-input elements a lane loads ahead of its epilogue stores (slice_stores): loaded one
# store at a time, a compute unit's few warps waited on one L2 round trip after another (H200:
# a residual add cost a [1024, 768] x [768, 768] TMA projection 9 us of its 33; 16 ahead: 25)
EP_PREFETCH = 16
UNROLLED_SLICES = 8  # K slices whose partials a split-K tail loads at once (more: one by one)


@dataclass(frozen=True)
class MmaConfig:
    """Tile shape of :func:`gemm_mma`: work-group tile BM x BN, warp tile WM x WN, BK of K per
    stage, STAGES stages, and the main loop: "slab" (this module), the pipelined "pipe"
    (:mod:`.mma_pipe`) or "bfrag" (:mod:`.mma_bfrag`, B in fragment order), whose B
    fragments are loaded ``bdist`` steps ahead and its A fragments one step ahead with
    ``a_early``."""

    bm: int
    bn: int
    wm: int
    wn: int
    bk: int = 16
    stages: int = 3
    loop: str = "slab"
    bdist: int = 1
    a_early: bool = True

    @property
    def warps(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn)

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def local_bytes(self) -> int:
        """Bytes of the stages (B's too, but with "bfrag")."""
        b = 0 if self.loop in mma_bfrag.LOOPS else self.bn
        return 4 * self.stages * self.bk * (self.bm + b)

    def check(self) -> None:
        ok = (self.bm % self.wm == 0 and self.bn % self.wn == 0 and self.wm % 16 == 0
              and self.wn % 8 == 0 and self.bn % 32 == 0 and self.stages >= 2
              and (self.bm * self.bk // 4) % self.threads == 0
              and (self.loop in mma_bfrag.LOOPS or (self.bn * self.bk // 4) % self.threads == 0))
        if self.loop in mma_pipe.LOOPS:
            ok = ok and mma_pipe.check(self)
        elif self.loop in mma_bfrag.LOOPS:
            ok = ok and mma_bfrag.check(self)
        else:
            ok = ok and self.loop == "slab" and self.bk % 16 == 0
        if not ok:
            raise ValueError(f"bad mma tile configuration {self}")


@memoized
def gemm_mma(cfg: MmaConfig, b_kmajor: bool, split: int, ptx: bool, copy: str, align: str,
             epilogue: list[Stage], n_extra: int, extra_dtypes: list, erank: int,
             norm: tuple | None = None, hi_round: str = "rn", conv: bool = False,
             splitk: str = "", bmn: bool = False, norm_out: tuple | None = None,
             norm_ahead: bool = False) -> Source:
    """The tensor-core GEMM kernel (module docstring). ``b_kmajor``: B is read along n (its
    n stride 1 when ``copy == "cp_async"``), else along k. ``split``: 1 (TF32) or 3
    (3xTF32). ``ptx``: real ``mma.sync`` / ``cp.async`` (NVIDIA), else emulated.
    ``copy``: ``"cp_async"`` (unit inner strides, row and batch strides multiples of 4
    floats; without ``ptx`` the same ring filled by plain 16-byte copies) or ``"plain"`` (any
    strides, element loads). ``align`` (with cp.async): ``"rings"`` runs a cp.async ring
    when the work-group's A and B starts are 16-byte aligned and a plain-copy ring otherwise
    (one of them has no blocks), ``"branch"`` picks per copy, ``"none"`` assumes alignment
    (only for benchmarks). ``norm``: A's rows normalized as in kernels.norm_prologue, applied
    to each A fragment as it is read (needs K a multiple of BK and BM <= NT). ``conv``: B is
    the implicit im2col matrix of an NCHW convolution (``conv_gemm``): element (k, n) of image
    b is X[b, c, oh * sh - ph + kh * dh, ow * sw - pw + kw * dw] for k = (c, kh, kw) and
    n = (oh, ow), zero outside the image, gathered with element loads (the ``cv_*``
    arguments, after the GEMM's own). ``splitk`` (else ""): work-groups along dim 2 are
    (batch, K slice) pairs, ``sk_n`` slices of ``sk_len`` (a multiple of BK) each (arguments
    ``sk_len``, ``sk_n`` last), reduced in the same launch with "tail" (:func:`_split_k_tail`;
    then ``P``, ``sk_count``) or, with "apart", each slice's partial product stored without
    epilogue to C + s * (batches * M * N) for :func:`splitk_reduce`.
    ``bmn``: the epilogue's side inputs are addressed by (batch, m, n) strides (dims and
    strides of rank 3). ``norm_out`` (the parameters ``norm`` would take): the normalization
    is applied to the product instead (:func:`norm_out_parts`): B holds the folded weights;
    ``norm_ahead``: the rows' statistics come from ``mma_parts.row_moments`` (argument ``NS``,
    last). With the "bfrag" loop B is :func:`mma_bfrag.swizzle`'s layout (16-byte aligned,
    batch strides in floats; ``b_kmajor`` True, its strides unread), with no normalized A or
    product, no convolution and no K slices."""
    cfg.check()
    bfrag = cfg.loop in mma_bfrag.LOOPS
    if bfrag and (norm is not None or norm_out is not None or conv or splitk or not b_kmajor):
        raise ValueError("the bfrag loop takes B in fragment order alone: no normalization, "
                         "convolution or K slices")
    if norm_out is not None and (norm is not None or splitk == "apart" or cfg.loop != "slab"
                                 or not b_kmajor or not norm_out_fits(cfg)):
        raise ValueError("a normalized product takes the slab loop, B k-major, K slices "
                         "reduced in the tail and no normalized A")
    nstats = norm_out_parts(cfg, norm_out, bool(splitk), norm_ahead) if norm_out is not None else \
        ("",) * 5
    NT, BM, BN, BK, S = cfg.threads, cfg.bm, cfg.bn, cfg.bk, cfg.stages
    MI, NI = cfg.wm // 16, cfg.wn // 8
    slabs = BK // 16
    args = gemm_args("float", n_extra, extra_dtypes, erank, norm)
    if conv:
        if not b_kmajor:
            raise ValueError("the implicit convolution GEMM reads B along n")
        args += [f"int cv_{x}" for x in CONV_ARGS]
    if splitk == "apart" and (epilogue or n_extra):
        raise ValueError("a split-K slice apart writes a partial product: the reduction "
                         "applies the epilogue")
    if splitk:
        args += ["int sk_len", "int sk_n"]
    if splitk == "tail":
        args += ["__global float* P", "__global int* sk_count"]
    if norm_out is not None and norm_ahead:
        args += ["__global const float* NS"]

    # -- stage fills ---------------------------------------------------------------------------
    def fill(stage: str, kt: str, how: str) -> str:
        """Statements filling stage ``stage`` with K block ``kt``: ``how`` is "cp" (cp.async),
        "plain" (16-byte copies, unit inner strides) or "strided" (element loads)."""
        lines = [f"{{ const int kb_ = kbeg + ({kt}) * BK;"]
        for u in range(BM * BK // 4 // NT):
            lines.append(f"{{ const int i = tid + {u * NT}; "
                         "const int sl = i / (BM * 4), r = (i >> 2) % BM, q = i & 3;")
            lines.append("  const int m = m0 + r, k = kb_ + sl * 16 + q * 4;")
            lines.append(f"  __local float* d = &As[{stage}][sl][r][q * 4];")
            lines.append(copy_piece(how, "A", "min(m, M - 1) * sam", "k", "KE", "sak", "m < M"))
            lines.append("}")
        for u in range(BN * BK // 4 // NT):
            if b_kmajor:
                lines.append(f"{{ const int i = tid + {u * NT}; "
                             "const int kk = i / (BN / 4), cq = i % (BN / 4);")
                lines.append("  const int k = kb_ + kk, n = n0 + cq * 4;")
                lines.append(f"  __local float* d = "
                             f"&Bs[{stage}][kk][(cq ^ (((kk >> 2) & 3) << 1)) * 4];")
                lines.append(gather_piece() if conv else copy_piece(
                    how, "B", "min(k, KE - 1) * sbk", "n", "N", "sbn", "k < KE"))
            else:
                lines.append(f"{{ const int i = tid + {u * NT}; "
                             "const int sl = i / (BN * 4), r = (i >> 2) % BN, q = i & 3;")
                lines.append("  const int n = n0 + r, k = kb_ + sl * 16 + q * 4;")
                lines.append(f"  __local float* d = &Bs[{stage}][sl][r][q * 4];")
                lines.append(copy_piece(how, "B", "min(n, N - 1) * sbn", "k", "KE", "sbk", "n < N"))
            lines.append("}")
        lines.append("}")
        return "\n    ".join(lines)

    # -- the math on one stage -----------------------------------------------------------------
    def compute(stage: str) -> str:
        lines = []
        for sl in range(slabs):
            lines.append("{")
            for i in range(MI):
                for h, off in (("l", 0), ("h", 8)):
                    row = f"wm0 + {i * 16 + off} + g"
                    v = f"vload4(0, &As[{stage}][{sl}][{row}][4 * t])"
                    if norm is not None:
                        v = norm_value(norm, v, row, f"kb + {sl * 16} + 4 * t", True)
                    lines.append(f"const float4 a{i}{h} = {v};")
            for j in range(NI):
                col = f"wn0 + {j * 8} + g"
                if b_kmajor:
                    for u in range(4):
                        lines.append(f"const float b{j}_{u} = Bs[{stage}][{sl * 16} + 4 * t + {u}]"
                                     f"[((({col}) >> 2) ^ (t << 1)) * 4 + (g & 3)];")
                else:
                    lines.append(f"const float4 b{j} = "
                                 f"vload4(0, &Bs[{stage}][{sl}][{col}][4 * t]);")
            for step, (c0, c1) in enumerate((("x", "y"), ("z", "w"))):
                lines.append("{")
                for i in range(MI):
                    for r, (h, c) in enumerate((("l", c0), ("h", c0), ("l", c1), ("h", c1))):
                        lines += split_operand(f"a{i}_{r}", f"a{i}{h}.{c}", split, hi_round)
                for j in range(NI):
                    for r in range(2):
                        src = f"b{j}_{2 * step + r}" if b_kmajor else f"b{j}.{(c0, c1)[r]}"
                        lines += split_operand(f"b{j}_{r}_", src, split, hi_round)
                lines += mma_calls(MI, NI, split)
                lines.append("}")
            lines.append("}")
        return "\n      ".join(lines)

    def slab_ring(nt: str, how: str, async_: bool) -> str:
        commit = " CP_COMMIT();" if async_ else ""
        wait = "CP_WAIT();" if async_ else ""
        return f"""for (int s = 0; s < STAGES - 1; ++s) {{
    if (s < {nt}) {fill("s", "s", how)}{commit}
  }}
  for (int kt = 0; kt < {nt}; ++kt) {{
    {wait}
    barrier(CLK_LOCAL_MEM_FENCE);  /* block kt is in; block kt - 1 is no longer read */
    {{ const int kn = kt + STAGES - 1;
      if (kn < {nt}) {{ const int sn = kn % STAGES; {fill("sn", "kn", how)} }}{commit} }}
    const int cs = kt % STAGES, kb = kbeg + kt * BK;
    {nstats[1]}
    {{
      {compute("cs")}
    }}
  }}"""

    def pipe_ring(nt: str, how: str, async_: bool) -> str:
        return mma_pipe.ring(cfg, b_kmajor, split, hi_round, conv, nt, how, async_)

    def bfrag_ring(nt: str, how: str, async_: bool) -> str:
        return mma_bfrag.ring(cfg, split, hi_round, nt, how, async_)

    pipe = cfg.loop in mma_pipe.LOOPS
    if pipe and norm is not None:
        raise ValueError("the pipelined loop takes no normalized A (a slab loop does)")
    ring = pipe_ring if pipe else bfrag_ring if bfrag else slab_ring

    if copy == "cp_async":
        aligned = "((((size_t)A) | ((size_t)B)) & 15) == 0"
        if align == "rings":
            body = f"""const int nta = {aligned} ? nt : 0;
  {ring("nta", "cp", True)}
  {ring("nt - nta", "plain", False)}"""
        elif align == "branch":
            body = f"const int al16 = {aligned};\n  {ring('nt', 'branch', True)}"
        elif align == "none":
            body = ring("nt", "cp", True)
        else:
            raise ValueError(align)
    elif copy == "plain":
        body = ring("nt", "strided", False)
    else:
        raise ValueError(copy)
    if pipe:
        body = mma_pipe.offsets(cfg, b_kmajor) + "\n  " + body
    elif bfrag:
        body = mma_bfrag.offsets(cfg) + "\n  " + body

    if splitk:  # (batch, slice) along dim 2
        split_head = ("const int b = get_group_id(2) / sk_n, ks_ = get_group_id(2) - b * sk_n;\n"
                      "  const int kbeg = ks_ * sk_len, KE = min(K, kbeg + sk_len);")
    else:
        split_head = "const int b = get_group_id(2), kbeg = 0, KE = K;"
    acc_decl = "\n  ".join(f"float {', '.join(f'c{i}_{j}_{q} = 0.0f' for q in range(4))};"
                           for i in range(MI) for j in range(NI))
    if pipe:  # one array, so that the epilogue may pass its slices through all of it
        stages_decl = ("__local float Ls[STAGES * (BM + BN) * BK] __attribute__((aligned(16)));\n"
                       "  __local float* const As = Ls;\n"
                       "  __local float* const Bs = Ls + STAGES * BM * BK;")
        room = S * BK * (BM + BN)
    elif bfrag:
        stages_decl = ("__local float As[STAGES * BM * BK] __attribute__((aligned(16)));")
        room = S * BK * BM
    else:
        b_local = "[STAGES][BK][BN]" if b_kmajor else "[STAGES][BK / 16][BN][16]"
        stages_decl = ("__local float As[STAGES][BK / 16][BM][16] __attribute__((aligned(16)));\n"
                       f"  __local float Bs{b_local} __attribute__((aligned(16)));")
        room = S * BK * BM
    if splitk:  # the slice's partial product (then the tile's reduction: _split_k_tail)
        poff = "  const int poff_ = ks_ * (get_num_groups(2) / sk_n) * M * N;"
        store = "\n".join([poff, _store(cfg, [], 0, 0, False, room, "PSTORE",
                                        "P[poff_ + flat]" if splitk == "tail" else
                                        "C[coff + poff_ + flat]")])
        if splitk == "tail":
            wrap = "NORM_OUT" if norm_out is not None else ""
            store += "\n" + store_macro("STORE", epilogue, n_extra, erank, bmn, wrap=wrap) + \
                "\n" + _split_k_tail(UNROLLED_SLICES, nstats[3])
    else:
        store = _store(cfg, epilogue, n_extra, erank, bmn, room,
                       wrap="NORM_OUT" if norm_out is not None else "", dtypes=extra_dtypes)
    store = nstats[2] + store
    emu = emulation_scratch(ptx, cfg.warps, *mma_slots(MI, NI, split))
    marks = "" if ptx else UNOPTIMIZED + "\n"  # (checked on PoCL only: built unoptimized)
    text = marks + header([np.float32] + list(extra_dtypes)) + f"""#define BM {BM}
#define BN {BN}
#define BK {BK}
#define STAGES {S}
#define NT {NT}
{macros(ptx, S - 2)}{arrival_defs(ptx) if splitk == "tail" else ""}{nstats[4]}
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void gemm_mma({', '.join(args)})
{{
  const int tid = get_local_id(0), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wm0 = (warp / {BN // cfg.wn}) * {cfg.wm}, wn0 = (warp % {BN // cfg.wn}) * {cfg.wn};
  const int n0 = get_group_id(0) * BN, m0 = get_group_id(1) * BM;
  {split_head}
  const int b0 = b / B1, b1 = b - b0 * B1;
  A += aoff + b0 * sa0 + b1 * sa1;
  B += boff + b0 * sb0 + b1 * sb1;
  {stages_decl}
  {emu}
  {norm_prologue(norm, BM, NT)}{nstats[0]}
  {acc_decl}
  const int nt = (KE - kbeg + BK - 1) / BK;
  {body}
{store}
}}
"""
    return Source(text, "gemm_mma")


@memoized
def splitk_reduce(epilogue: list[Stage], n_extra: int, extra_dtypes: list, erank: int) -> Source:
    """C = epilogue(sum of the ``ns`` partial products of a split-K GEMM whose slices ran
    "apart"): ``W`` holds them one after the other, ``total`` floats each (batches * M * N,
    C's layout); one work-item per element, the epilogue's side inputs read through ``d*`` /
    ``s_in*_*`` as in every GEMM."""
    args = ["__global const float* W", "__global float* C", "int coff", "int total", "int ns"]
    args += side_params(extra_dtypes[:n_extra], erank)
    code = stage_code([Stage("v", [], "float")] + epilogue,
                      {j: f"in{j}[o_in{j}]" for j in range(n_extra)})
    offs = offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
    head = header([np.float32] + list(extra_dtypes))
    text = head + f"""__kernel void splitk_reduce({', '.join(args)})
{{
  const int flat = get_global_id(0);
  if (flat >= total) return;
  float v = W[flat];
  for (int s = 1; s < ns; ++s) v += W[s * total + flat];
  {offs}
  {code}
  C[coff + flat] = x{len(epilogue)};
}}
"""
    return Source(text, "splitk_reduce")


def arrival_defs(ptx: bool) -> str:
    """What a last-to-arrive reduction (:func:`_split_k_tail`, the flash kernel's key splits)
    uses, ahead of the kernel: ``SK_FENCE`` (a device-scope fence), ``sk_load4`` and
    ``sk_load`` (16 and 4 bytes, bypassing L1, which other work-groups' stores do not
    update)."""
    if not ptx:
        return ("#define SK_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)\n"
                "inline float4 sk_load4(__global const float* p) { return vload4(0, p); }\n"
                "inline float sk_load(__global const float* p) { return *p; }\n")
    return ('#define SK_FENCE() asm volatile("fence.acq_rel.gpu;" ::: "memory")\n'
            "inline float4 sk_load4(__global const float* p) { float a, b, c, d; "
            'asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" '
            ': "=f"(a), "=f"(b), "=f"(c), "=f"(d) : "l"(p)); return (float4)(a, b, c, d); }\n'
            "inline float sk_load(__global const float* p) { float a; "
            'asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(a) : "l"(p)); return a; }\n')


def last_to_arrive(flag: str, counter: str, arrivals: str, returns: bool = True,
                   joins: str = "", item: str = "tid") -> str:
    """C statements (at the kernel's top level: they declare the ``__local int[1]`` ``flag``,
    an array so that a phase form can carve it: kernels.phase)
    after a work-group stored its share of a result: it counts its arrival on ``counter`` (an
    int in global memory), which the last of ``arrivals`` work-groups to arrive sets back to 0
    for the next launch; every other work-group returns, and the last one goes on to read the
    others' shares. The fences (:func:`arrival_defs`) order the shares' stores before the
    count and the count before the loads. The last one resets the counter after the flag's
    barrier: reset where the flag is set, PoCL read the flag back as 0 in a phase function.

    ``returns`` False: no work-group returns and ``flag[0]`` marks the last one, the flag
    declared by the caller at the kernel's top (barriers after an early return, or inside a
    branch, PoCL's work-group functions took wrong); ``joins``: a condition a work-group
    counts under (else it only meets the barriers); ``item``: the work-item id's name."""
    if not returns:
        counts = f"{joins} && " if joins else ""
        return f"""SK_FENCE();
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  if ({item} == 0) {flag}[0] = {counts}atomic_inc(&{counter}) == {arrivals} - 1;
  barrier(CLK_LOCAL_MEM_FENCE);
  if ({flag}[0] && {item} == 0) atomic_xchg(&{counter}, 0);
  SK_FENCE();"""
    return f"""SK_FENCE();
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  __local int {flag}[1];
  if (tid == 0) {flag}[0] = atomic_inc(&{counter}) == {arrivals} - 1;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!{flag}[0]) return;
  if (tid == 0) atomic_xchg(&{counter}, 0);
  SK_FENCE();"""


def _split_k_tail(max_slices: int, before: str = "") -> str:
    """After a K slice stored its partial product (``PSTORE`` into ``P``, slice s at s *
    (batches M N)): the last of the tile's ``sk_n`` slices to arrive, counted on the tile's
    word of ``sk_count`` (which it sets back to 0 for the next launch), sums the partials in
    slice order and stores the sum through the epilogue (``STORE``). One launch instead of a
    GEMM and a reduction, with the same sums in the same order. The fences order each item's
    partial stores before the count (release) and the count before the last slice's loads.
    Each item takes four columns at a time (N a multiple of 4; else one) and issues the
    loads of every slice before it adds (the first ``max_slices``): one work-group per tile
    does this, so it has to keep loads in flight (one at a time, the H200's split GEMMs ran
    up to 2.4x slower than with a separate reduction). ``before``: what the last slice does
    first (a normalized product's statistics: mma_parts.norm_out_parts)."""
    loads = "\n".join(f"      if ({s} < sk_n) p{s}_ = sk_load4(P + {s} * total_ + pf_);"
                       for s in range(1, max_slices))
    adds = " ".join(f"if ({s} < sk_n) v_ += p{s}_;" for s in range(1, max_slices))
    decl = ", ".join(f"p{s}_ = 0.0f" for s in range(1, max_slices))
    return f"""  const int tile_ = (b * get_num_groups(1) + get_group_id(1)) * get_num_groups(0)
                    + get_group_id(0);
  {last_to_arrive("sk_last", "sk_count[tile_]", "sk_n")}
{before}  const int total_ = (get_num_groups(2) / sk_n) * M * N, wide_ = (N & 3) == 0;
  const int step_ = wide_ ? 4 : 1;
  #pragma unroll 2
  for (int e_ = tid * step_; e_ < BM * BN; e_ += NT * step_) {{
    const int mm_ = m0 + e_ / BN, nn_ = n0 + e_ % BN;
    if (mm_ >= M || nn_ >= N) continue;
    const int pf_ = (b * M + mm_) * N + nn_;
    if (wide_) {{
      float4 v_ = sk_load4(P + pf_), {decl};
{loads}
      {adds}
      for (int s_ = {max_slices}; s_ < sk_n; ++s_) v_ += sk_load4(P + s_ * total_ + pf_);
      STORE(mm_, nn_, v_.x) STORE(mm_, nn_ + 1, v_.y) STORE(mm_, nn_ + 2, v_.z)
      STORE(mm_, nn_ + 3, v_.w)
    }} else {{
      float v_ = sk_load(P + pf_);
      for (int s_ = 1; s_ < sk_n; ++s_) v_ += sk_load(P + s_ * total_ + pf_);
      STORE(mm_, nn_, v_)
    }}
  }}"""


def side_inputs(epilogue: list[Stage]) -> list[int]:
    """The side inputs an epilogue reads (not those folded into it as literals)."""
    return sorted({j for st in epilogue for kind, j in st.operands
                   if kind not in ("x", "v", "lit")})


def side_at(j: int, m: str, n: str) -> str:
    """Side input ``j``'s offset at row ``m``, column ``n``, batch ``b`` (strides over b, m, n)."""
    return f"off_in{j} + b * s_in{j}_0 + {m} * s_in{j}_1 + {n} * s_in{j}_2"


def store_macro(name: str, epilogue: list[Stage], n_extra: int, erank: int, bmn: bool,
                dest: str = "C[coff + flat]", wrap: str = "",
                ahead: list[int] | None = None) -> str:
    """``#define name(mm, nn, val)``: element (mm, nn) of batch ``b`` through the epilogue
    into ``dest`` (an expression of ``flat``), bounds-checked; ``bmn`` as in :func:`_store`;
    ``wrap``: a macro ``wrap(mm, nn, val)`` the value goes through first. ``ahead``: the side
    inputs loaded ahead (:func:`slice_stores`): ``name(mm, nn, val, i)`` takes input j's value
    from ``pv<j>_[i]``."""
    loads = {j: f"pv{j}_[i]" for j in ahead} if ahead is not None else \
        {j: f"in{j}[o_in{j}]" for j in range(n_extra)}
    code = stage_code([Stage("v", [], "float")] + epilogue, loads)
    if bmn and erank != 3:
        raise ValueError("(batch, m, n) strides need an epilogue rank of 3")
    params = "mm, nn, val, i" if ahead is not None else "mm, nn, val"
    if ahead is not None:
        offs = ""
    elif bmn:
        offs = " ".join(f"const int o_in{j} = {side_at(j, '(mm)', '(nn)')};"
                        for j in range(n_extra))
    else:
        offs = offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
    val = f"{wrap}(mm, nn, val)" if wrap else "(val)"
    return f"""#define {name}({params}) if ((mm) < M && (nn) < N) {{ \\
    const float v = {val}; const int flat = (b * M + (mm)) * N + (nn); \\
    {offs.replace(chr(10), ' ')} \\
    {code.replace(chr(10), ' ')} \\
    {dest} = x{len(epilogue)}; }}"""


def slice_stores(macro: str, count: int, row: str, col: str, value: str,
                 ahead: list[int] | None, dtypes: list, unroll: int) -> list[str]:
    """Lines storing a warp's slice of ``count`` elements (a multiple of 32): element ``e_``
    (lane, lane + 32, ...) at ``row`` and ``col`` with ``value`` (expressions of ``e_``)
    through ``macro``, one at a time (loop unrolled ``unroll`` times); or, ``ahead`` (the side
    inputs read, strides over (batch, m, n)), first each side input's next elements of the
    lane loaded (EP_PREFETCH, or the largest divisor below it of the lane's count), then
    stored through ``macro``'s four-argument form (:func:`store_macro`)."""
    if ahead is None:
        return [f"  #pragma unroll {unroll}", f"  for (int e_ = lane; e_ < {count}; e_ += 32)",
                f"    {macro}({row}, {col}, {value})"]
    per_lane = count // 32
    p = max(d for d in range(1, min(EP_PREFETCH, per_lane) + 1) if per_lane % d == 0)
    lines = [f"  for (int h_ = lane; h_ < {count}; h_ += {32 * p}) {{"]
    lines += [f"    {ctype(dtypes[j])} pv{j}_[{p}];" for j in ahead]
    lines += ["    #pragma unroll", f"    for (int i_ = 0; i_ < {p}; ++i_) {{",
              f"      const int e_ = h_ + 32 * i_, mm_ = {row}, nn_ = {col};",
              "      const bool ok_ = mm_ < M && nn_ < N;"]
    lines += [f"      pv{j}_[i_] = ok_ ? in{j}[{side_at(j, 'mm_', 'nn_')}] : 0;" for j in ahead]
    lines += ["    }", "    #pragma unroll", f"    for (int i_ = 0; i_ < {p}; ++i_) {{",
              "      const int e_ = h_ + 32 * i_;", f"      {macro}({row}, {col}, {value}, i_)",
              "    }", "  }"]
    return lines


def _store(cfg: MmaConfig, epilogue: list[Stage], n_extra: int, erank: int, bmn: bool,
           room: int, macro: str = "STORE", dest: str = "C[coff + flat]", wrap: str = "",
           dtypes: list | None = None) -> str:
    """C fragments (rows g, g + 8 and columns 2t, 2t + 1 of each m16n8 piece) through the
    epilogue, bounds-checked. With an epilogue, each warp passes its 16-row slices through
    local memory (the stages, ``room`` floats from ``As``, free after the loop) and stores
    them row by row in a loop:
    one copy of the epilogue's code instead of one per accumulator (GPT-2's bias + tanh-GELU,
    unrolled 128 times, made its GEMM 2-3x slower on the H100), and coalesced stores.
    ``bmn``: the side inputs' strides are given over (batch, m, n) (``impls.gemm_strides``),
    so their offsets need no division of the flat index, and the slices load them ahead of
    their stores (:func:`slice_stores`; ``dtypes``: the side inputs' element types)."""
    MI, NI = cfg.wm // 16, cfg.wn // 8
    ld = cfg.wn + 4  # row stride of a warp's slice: lanes of rows g and g + 8 on other banks
    sliced = bool(epilogue or n_extra) and cfg.warps * 16 * ld <= room
    ahead = side_inputs(epilogue) if sliced and bmn and n_extra else None
    lines = [store_macro(macro, epilogue, n_extra, erank, bmn, dest, wrap, ahead)]
    if sliced:
        lines.append("  barrier(CLK_LOCAL_MEM_FENCE);  /* the stages are free */")
        lines.append(f"  __local float* ep_ = (__local float*)As + warp * {16 * ld};")
        for i in range(MI):
            for j in range(NI):
                for q, (r, c) in enumerate((("g", 0), ("g", 1), ("g + 8", 0), ("g + 8", 1))):
                    lines.append(f"  ep_[({r}) * {ld} + {j * 8 + c} + 2 * t] = c{i}_{j}_{q};")
            lines.append("  barrier(CLK_LOCAL_MEM_FENCE);")
            lines += slice_stores(macro, 16 * cfg.wn, f"m0 + wm0 + {i * 16} + e_ / {cfg.wn}",
                                  f"n0 + wn0 + e_ % {cfg.wn}",
                                  f"ep_[(e_ / {cfg.wn}) * {ld} + e_ % {cfg.wn}]", ahead,
                                  dtypes or [], EPILOGUE_UNROLL)
            lines.append("  barrier(CLK_LOCAL_MEM_FENCE);")
        return "\n".join(lines)
    for i in range(MI):
        for j in range(NI):
            m = f"m0 + wm0 + {i * 16} + g"
            n = f"n0 + wn0 + {j * 8} + 2 * t"
            lines.append(f"  {macro}({m}, {n}, c{i}_{j}_0) {macro}({m}, {n} + 1, c{i}_{j}_1) "
                         f"{macro}({m} + 8, {n}, c{i}_{j}_2) {macro}({m} + 8, {n} + 1, c{i}_{j}_3)")
    return "\n".join(lines)
