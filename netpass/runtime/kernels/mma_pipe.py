"""The pipelined main loop of the tensor-core GEMM (:func:`netpass.runtime.kernels.mma.gemm_mma`
with ``MmaConfig.loop`` "pipe"), software-pipelined as CUTLASS's multistage loop:

- every stage of the ring holds a K block (STAGES blocks are in flight from the start), and a
  block's stage is refilled with the block STAGES ahead as soon as every warp has its last
  fragments in registers;
- the fragments of the next 8-wide mma step are read (into a second register set) before the
  current step's ``mma.sync`` calls, so local-memory latency hides behind tensor work; the
  wait for the next block and the barrier sit after the mma calls of a block's last-but-one
  step, whose successor's fragments are already in registers, so the warps meet at the barrier
  with tensor work queued;
- every local address is a per-thread offset fixed before the loop plus a constant (the
  stage's base aside), so the live registers beyond the 128 accumulators of a 64x64 warp tile
  are the two fragment sets and a few offsets (the "slab" loop keeps pointers and bounds per
  piece, and spilled where fragments were prefetched: BENCHMARKS.md, issue 18, round 4).

K order inside a step: lane (g, t) takes k = 8s + 2t and 8s + 2t + 1 as its slots t and t + 4
(any pairing works if A and B agree), so an A row gives a float2. Local layouts, free of bank
conflicts for the 16-byte stage writes and the fragment reads:

- A: ``[STAGES][BM][BK]``, the 16-byte chunk index of row r XOR-ed with
  :func:`_row_key` (BK = 8: none; 16: ``((r >> 1) & 1) << 1``; 32 or more: ``(r & 3) << 1``), so
  the rows g = 0..3 a half-warp reads lie on other banks;
- B stored k-major (``[K, N]``): ``[STAGES][BK][BN]``, the chunk index of row k XOR-ed with
  ``((k >> 1) & 3) << 1`` (rows 2t, 2t + 1 of lane t land on other banks), read one float per
  fragment register (float4s over four n8 tiles, with the tiles' columns permuted, ran 5%
  slower on the H200: the permuted accumulators scatter the stores);
- B stored n-major (``[N, K]``, a transposed operand): ``[STAGES][BN][BK]`` as A.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .mma_parts import copy_piece, gather_piece, mma_calls, split_operand

if TYPE_CHECKING:
    from .mma import MmaConfig

LOOPS = ("pipe",)


def check(cfg: MmaConfig) -> bool:
    """Whether the pipelined loop takes ``cfg``: steps of 8, warp tiles a multiple of 32
    columns (the B offsets of :func:`offsets`), the stage pieces spread evenly."""
    return (cfg.bk % 8 == 0 and cfg.wn % 32 == 0 and cfg.stages >= 2
            and (cfg.bm * cfg.bk // 4) % cfg.threads == 0
            and (cfg.bn * cfg.bk // 4) % cfg.threads == 0)


def _row_key(bk: int, row: str) -> str:
    """XOR key of the 16-byte chunk index in row ``row`` of a k-contiguous stage."""
    if bk == 8:
        return "0"
    if bk == 16:
        return f"((({row}) >> 1) & 1) << 1"
    return f"((({row}) & 3) << 1)"


def _split_index(total: int, nt: int, u: int) -> tuple[str, str]:
    """(row, chunk) of piece ``tid + u * nt`` in rows of ``total`` 16-byte chunks, in shifts
    and constants where the work-group spans whole rows."""
    if nt % total == 0 and total & (total - 1) == 0:
        return (f"(tid >> {total.bit_length() - 1}) + {u * nt // total}", f"(tid & {total - 1})")
    return f"((tid + {u * nt}) / {total})", f"((tid + {u * nt}) % {total})"


def fill_a(cfg: MmaConfig, how: str) -> list[str]:
    """Statements copying A's rows of K block ``kb_`` into the stage at ``fa_`` (``how`` as
    in ``mma_parts.copy_piece``)."""
    NT, BM, BK = cfg.threads, cfg.bm, cfg.bk
    lines = []
    cpr = BK // 4
    for u in range(BM * cpr // NT):
        r, q = _split_index(cpr, NT, u)
        lines.append(f"{{ const int r = {r}, q = {q}, m = m0 + r, k = kb_ + q * 4;")
        lines.append(f"  __local float* d = fa_ + r * BK + ((q ^ ({_row_key(BK, 'r')})) * 4);")
        lines.append(copy_piece(how, "A", "min(m, M - 1) * sam", "k", "KE", "sak", "m < M") + " }")
    return lines


def fill(cfg: MmaConfig, b_kmajor: bool, conv: bool, stage: str, kt: str, how: str) -> str:
    """Statements filling stage ``stage`` with K block ``kt`` (``how`` as in
    ``mma_parts.copy_piece``; with ``conv`` B is gathered from the image)."""
    NT, BM, BN, BK = cfg.threads, cfg.bm, cfg.bn, cfg.bk
    lines = [f"{{ const int kb_ = kbeg + ({kt}) * BK;",
             f"  __local float* fa_ = As + ({stage}) * {BM * BK};",
             f"  __local float* fb_ = Bs + ({stage}) * {BN * BK};"]
    cpr = BK // 4
    lines += fill_a(cfg, how)
    if b_kmajor:
        cpr_b = BN // 4
        for u in range(BK * cpr_b // NT):
            kk, cq = _split_index(cpr_b, NT, u)
            lines.append(f"{{ const int kk = {kk}, cq = {cq}, k = kb_ + kk, n = n0 + cq * 4;")
            lines.append("  __local float* d = fb_ + kk * BN + "
                         "((cq ^ (((kk >> 1) & 3) << 1)) * 4);")
            lines.append((gather_piece() if conv else copy_piece(
                how, "B", "min(k, KE - 1) * sbk", "n", "N", "sbn", "k < KE")) + " }")
    else:
        for u in range(BN * cpr // NT):
            r, q = _split_index(cpr, NT, u)
            lines.append(f"{{ const int r = {r}, q = {q}, n = n0 + r, k = kb_ + q * 4;")
            lines.append(f"  __local float* d = fb_ + r * BK + ((q ^ ({_row_key(BK, 'r')})) * 4);")
            lines.append(copy_piece(how, "B", "min(n, N - 1) * sbn", "k", "KE", "sbk", "n < N")
                         + " }")
    lines.append("}")
    return "\n    ".join(lines)


def _in_row(bk: int, step: int) -> str:
    """Offset of lane (g, t)'s float2 of step ``step`` inside its A (or n-major B) row g."""
    return f"((({2 * step}) ^ ({_row_key(bk, 'g')})) + (t >> 1)) * 4 + 2 * (t & 1)"


def offsets_a(cfg: MmaConfig) -> str:
    """The per-thread offsets ``fa{s}`` of :func:`offsets` alone (A's fragment reads)."""
    return "\n  ".join(f"const int fa{s} = (wm0 + g) * BK + {_in_row(cfg.bk, s)};"
                       for s in range(cfg.bk // 8))


def load_a(cfg: MmaConfig, f: int, step: int, stage: str = "cs") -> list[str]:
    """A's fragments of register set ``f`` (float2 ``A{f}_{i}{h}``: rows g and g + 8 of each
    m16 tile) read from stage ``stage`` for its 8-wide step ``step``."""
    lines = [f"{{ __local const float* sa_ = As + ({stage}) * {cfg.bm * cfg.bk};"]
    for i in range(cfg.wm // 16):
        for h, off in (("l", 0), ("h", 8)):
            lines.append(f"A{f}_{i}{h} = vload2(0, sa_ + fa{step} + {(16 * i + off) * cfg.bk});")
    return lines + ["}"]


def offsets(cfg: MmaConfig, b_kmajor: bool) -> str:
    """The per-thread offsets of the fragment reads inside a stage, fixed for the loop:
    ``fa{s}`` (A, step s), ``fbs{q}`` (B k-major, tiles j with j % 4 = q: the XOR with the
    lane's rows touches the tile index), ``fbn{s}`` (B n-major)."""
    BK, BN = cfg.bk, cfg.bn
    lines = []
    for s in range(BK // 8):
        inrow = _in_row(BK, s)
        lines.append(f"const int fa{s} = (wm0 + g) * BK + {inrow};")
        if not b_kmajor:
            lines.append(f"const int fbn{s} = (wn0 + g) * BK + {inrow};")
    if b_kmajor:
        for q in range(4):
            lines.append(f"const int fbs{q} = 2 * t * {BN} + wn0 + "
                         f"((({2 * q} + (g >> 2)) ^ (2 * t)) * 4) + (g & 3);")
    return "\n  ".join(lines)


def _decl(cfg: MmaConfig, b_kmajor: bool, f: int) -> str:
    """Register set ``f``: one step's A rows (float2: rows g and g + 8 of each m16 tile) and
    B columns."""
    MI, NI = cfg.wm // 16, cfg.wn // 8
    a = "float2 " + ", ".join(f"A{f}_{i}{h}" for i in range(MI) for h in "lh") + ";"
    if b_kmajor:
        b = "float " + ", ".join(f"B{f}_{j}_{e}" for j in range(NI) for e in range(2))
    else:
        b = "float2 " + ", ".join(f"B{f}_{j}" for j in range(NI))
    return f"{a} {b};"


def _load(cfg: MmaConfig, b_kmajor: bool, f: int, step: int) -> list[str]:
    """Register set ``f`` read from stage ``cs`` for its 8-wide step ``step``."""
    NI, BK, BN = cfg.wn // 8, cfg.bk, cfg.bn
    lines = load_a(cfg, f, step) + [f"{{ __local const float* sb_ = Bs + cs * {BN * BK};"]
    if b_kmajor:
        for j in range(NI):
            for e in range(2):
                off = (8 * step + e) * BN + 32 * (j >> 2)
                lines.append(f"B{f}_{j}_{e} = sb_[fbs{j & 3} + {off}];")
    else:
        for j in range(NI):
            lines.append(f"B{f}_{j} = vload2(0, sb_ + fbn{step} + {8 * j * BK});")
    return lines + ["}"]


def mma_step(cfg: MmaConfig, split: int, hi_round: str, fa: int,
             b_src: Callable[[int, int], str]) -> list[str]:
    """The mma calls of one step from A register set ``fa``, B fragment register ``r`` of n8
    tile ``j`` read from ``b_src(j, r)`` (this loop's register sets, or mma_bfrag's)."""
    MI, NI = cfg.wm // 16, cfg.wn // 8
    lines = ["{"]
    for i in range(MI):
        for r, (h, c) in enumerate((("l", "x"), ("h", "x"), ("l", "y"), ("h", "y"))):
            lines += split_operand(f"a{i}_{r}", f"A{fa}_{i}{h}.{c}", split, hi_round)
    for j in range(NI):
        for r in range(2):
            lines += split_operand(f"b{j}_{r}_", b_src(j, r), split, hi_round)
    return lines + mma_calls(MI, NI, split) + ["}"]


def _mma(cfg: MmaConfig, b_kmajor: bool, split: int, hi_round: str, f: int) -> list[str]:
    """The mma calls of one step from register set ``f``."""
    return mma_step(cfg, split, hi_round, f, lambda j, r: f"B{f}_{j}_{r}" if b_kmajor
                    else f"B{f}_{j}.{'xy'[r]}")


def ring(cfg: MmaConfig, b_kmajor: bool, split: int, hi_round: str, conv: bool, nt: str,
         how: str, async_: bool) -> str:
    """The loop over ``nt`` K blocks (module docstring), its stages filled per ``how``; with
    ``async_`` the copies are cp.async groups, one committed per block (empty ones past the
    end keep the count)."""
    P, S = cfg.bk // 8, cfg.stages
    blocks = 1 if P % 2 == 0 else 2  # per loop pass, so that the register sets alternate
    commit = " CP_COMMIT();" if async_ else ""

    def sync_and_refill(kx: str) -> list[str]:
        # block kx + 1 is in and every warp has block kx's last fragments: refill its stage
        refill = fill(cfg, b_kmajor, conv, "cs", kx + " + STAGES", how)
        return [(f"CP_WAIT_N({S - 2}); " if async_ else "") + "barrier(CLK_LOCAL_MEM_FENCE);",
                f"if ({kx} + STAGES < {nt}) {refill}{commit}",
                "cs = cs + 1 == STAGES ? 0 : cs + 1;"]

    body: list[str] = []
    for b in range(blocks):
        kx = f"kt + {b}"
        if b:
            body.append(f"if ({kx} >= {nt}) break;")
        for p in range(P):
            cur, nxt = (b * P + p) % 2, (b * P + p + 1) % 2
            if P == 1:
                body += _mma(cfg, b_kmajor, split, hi_round, cur)
                body += sync_and_refill(kx)
                body += _load(cfg, b_kmajor, nxt, 0)
                continue
            body += _load(cfg, b_kmajor, nxt, (p + 1) % P)
            body += _mma(cfg, b_kmajor, split, hi_round, cur)
            if p == P - 2:
                body += sync_and_refill(kx)
    prologue_fill = fill(cfg, b_kmajor, conv, "s", "s", how)
    text = "\n    ".join(body)
    first = "\n  ".join(_load(cfg, b_kmajor, 0, 0))
    return f"""{{ {_decl(cfg, b_kmajor, 0)} {_decl(cfg, b_kmajor, 1)}
  for (int s = 0; s < STAGES; ++s) {{
    if (s < {nt}) {prologue_fill}{commit}
  }}
  {f"CP_WAIT_N({S - 1});" if async_ else ""}
  barrier(CLK_LOCAL_MEM_FENCE);
  int cs = 0;
  {first}
  #pragma unroll 1
  for (int kt = 0; kt < {nt}; kt += {blocks}) {{
    {text}
  }}
  }}"""
