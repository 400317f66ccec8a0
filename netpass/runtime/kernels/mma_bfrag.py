"""The "bfrag" main loop of the tensor-core GEMM (:func:`netpass.runtime.kernels.mma.gemm_mma`
with ``MmaConfig.loop`` "bfrag", issue 18): B is constant weights stored ahead of time in
``mma.sync`` fragment order (:func:`swizzle`), so each warp loads its B fragments straight from
global memory into registers with coalesced 16-byte loads (the L1 / L2 keep the panel every
work-group of a tile column reads), prefetched ``MmaConfig.bdist`` 8-wide steps ahead; no
local memory and no barrier serve B. A alone goes through the local-memory ring of
:mod:`.mma_pipe` (its layout, cp.async fills and fragment reads), so the 48 KB of a work-group
hold twice the stages (128 x 16 A blocks: 6 stages, or 3 of K 32).

Fragment layout (``swizzle``): B [K, N] is cut into panels of ``WN`` columns (a warp tile's
width) and 8-wide k steps; panel ``c``'s step ``s`` is ``WN * 8`` contiguous floats, ``WN / 16``
chunks of 32 lanes x 4 floats. Lane ``(g, t)`` of chunk ``p`` holds, as one float4, the m16n8k8
B fragments of n8 tiles ``2p`` and ``2p + 1``: ``(B[8s + 2t][n], B[8s + 2t + 1][n], B[8s + 2t]
[n + 8], B[8s + 2t + 1][n + 8])`` with ``n = 16p + g`` in the panel, k paired as mma_pipe pairs
A's (slots t and t + 4 take k = 2t and 2t + 1 of the step). K is padded with zeros to whole
32-wide blocks (``KSP`` steps: any K block of 8, 16 or 32 ends inside them) and N to whole
panels; a warp past the last panel reads the last one (its columns are not stored).

Registers per lane (the budget that keeps 128 threads within 255 without spills): the 128
accumulators of a 64 x 64 warp tile; A's fragments, 16 floats a step, in two sets when
``a_early`` (read one step ahead from local memory, as mma_pipe does) else one; B's, 16
floats a step, in ``bdist + 1`` sets (the step being multiplied and ``bdist`` in flight):
``128 + 32 + 32 = 192`` at ``bdist`` 1, 208 at 2, 224 at 3, plus a few offsets. The loop is
unrolled over ``lcm(BK / 8, bdist + 1, 2)`` steps so every set has a fixed name.
"""
from __future__ import annotations

from math import lcm
from typing import TYPE_CHECKING

import numpy as np

from .mma_pipe import fill_a, load_a, mma_step, offsets_a

if TYPE_CHECKING:
    from .mma import MmaConfig

LOOPS = ("bfrag",)
PAD_K = 32  # the layout's K is padded to whole blocks of this (the largest BK taken)


def check(cfg: MmaConfig) -> bool:
    """Whether the bfrag loop takes ``cfg``: K blocks of 8, 16 or 32 (whole blocks end inside
    the padded layout), warp tiles of whole n16 pairs, A's stage pieces spread evenly."""
    return (cfg.bk in (8, 16, 32) and cfg.wn % 16 == 0 and cfg.stages >= 2 and cfg.bdist >= 1
            and (cfg.bm * cfg.bk // 4) % cfg.threads == 0)


def padded_k(k: int) -> int:
    """K of the fragment layout: whole PAD_K blocks."""
    return -(-k // PAD_K) * PAD_K


def swizzled_size(k: int, n: int, wn: int) -> int:
    """Floats of one [K, N] matrix in the fragment layout of panel width ``wn``."""
    return padded_k(k) * -(-n // wn) * wn


def swizzle(b: np.ndarray, wn: int) -> np.ndarray:
    """B ``[..., K, N]`` (any float) in the fragment layout of panel width ``wn`` (module
    docstring): float32 ``[..., swizzled_size(K, N, wn)]``, zeros in the padding."""
    *batch, k, n = b.shape
    kp, panels = padded_k(k), -(-n // wn)
    pad = np.zeros((*batch, kp, panels * wn), np.float32)
    pad[..., :k, :n] = b
    # [.., step, t, kk, panel, p, jj, g] -> [.., panel, step, p, g, t, jj, kk]
    v = pad.reshape(*batch, kp // 8, 4, 2, panels, wn // 16, 2, 8)
    nb = len(batch)
    order = [*range(nb)] + [nb + x for x in (3, 0, 4, 6, 1, 5, 2)]
    return np.ascontiguousarray(v.transpose(order)).reshape(*batch, kp * panels * wn)


def offsets(cfg: MmaConfig) -> str:
    """A's fragment offsets (mma_pipe) and the warp's B pointer: its panel (the last one for
    a warp past N), its lane's float4 of chunk 0, step 0; ``KSP`` steps a panel."""
    return f"""{offsets_a(cfg)}
  const int KSP = ((K + {PAD_K - 1}) / {PAD_K}) * {PAD_K // 8};
  const int bpanel_ = min((n0 + wn0) / {cfg.wn}, (N - 1) / {cfg.wn});
  __global const float4* const bq_ = (__global const float4*)B
      + (size_t)bpanel_ * KSP * {2 * cfg.wn} + lane;"""


def _load_b(cfg: MmaConfig, r: int) -> list[str]:
    """B register set ``r`` (float4 ``B{r}_{p}``) loaded for step ``bs_`` (clamped to the
    layout: steps past it are never multiplied), then ``bs_`` steps on."""
    q = f"bq_ + min(bs_, KSP - 1) * {2 * cfg.wn}"
    return [f"{{ __global const float4* q_ = {q};"] + \
        [f"B{r}_{p} = q_[{32 * p}];" for p in range(cfg.wn // 16)] + ["++bs_; }"]


def _mma(cfg: MmaConfig, split: int, hi_round: str, fa: int, rb: int) -> list[str]:
    """The mma calls of one step from A set ``fa`` and B set ``rb`` (n8 tiles 2p and 2p + 1
    in float4 ``B{rb}_{p}``)."""
    return mma_step(cfg, split, hi_round, fa,
                    lambda j, r: f"B{rb}_{j >> 1}.{'xyzw'[2 * (j & 1) + r]}")


def _fill(cfg: MmaConfig, stage: str, kt: str, how: str) -> str:
    """Statements filling stage ``stage`` with A's K block ``kt``."""
    lines = [f"{{ const int kb_ = kbeg + ({kt}) * BK;",
             f"  __local float* fa_ = As + ({stage}) * {cfg.bm * cfg.bk};"]
    return "\n    ".join(lines + fill_a(cfg, how) + ["}"])


def ring(cfg: MmaConfig, split: int, hi_round: str, nt: str, how: str, async_: bool) -> str:
    """The loop over ``nt`` K blocks: A's ring as mma_pipe's (a stage refilled with the block
    STAGES ahead once every warp has its block's last A fragments: after the mma calls of
    the last-but-one step with ``a_early``, of the last step without), B's fragments loaded
    ``bdist`` steps ahead of their mma calls."""
    P, S, D = cfg.bk // 8, cfg.stages, cfg.bdist
    sets_a = 2 if cfg.a_early else 1
    steps = lcm(P, D + 1, sets_a)  # per loop pass: every register set has a fixed name
    commit = " CP_COMMIT();" if async_ else ""

    def sync_and_refill(kx: str) -> list[str]:
        refill = _fill(cfg, "cs", kx + " + STAGES", how)
        return [(f"CP_WAIT_N({S - 2}); " if async_ else "") + "barrier(CLK_LOCAL_MEM_FENCE);",
                f"if ({kx} + STAGES < {nt}) {refill}{commit}",
                "cs = cs + 1 == STAGES ? 0 : cs + 1;"]

    body: list[str] = []
    for u in range(steps):
        b, p = divmod(u, P)
        kx = f"kt + {b}"
        if p == 0 and b:
            body.append(f"if ({kx} >= {nt}) break;")
        body += _load_b(cfg, (u + D) % (D + 1))
        if not cfg.a_early:
            body += load_a(cfg, 0, p)
            body += _mma(cfg, split, hi_round, 0, u % (D + 1))
            if p == P - 1:
                body += sync_and_refill(kx)
            continue
        cur, nxt = u % 2, (u + 1) % 2
        if P == 1:
            body += _mma(cfg, split, hi_round, cur, u % (D + 1))
            body += sync_and_refill(kx)
            body += load_a(cfg, nxt, 0)
            continue
        body += load_a(cfg, nxt, (p + 1) % P)
        body += _mma(cfg, split, hi_round, cur, u % (D + 1))
        if p == P - 2:
            body += sync_and_refill(kx)
    MI = cfg.wm // 16
    decl_a = " ".join("float2 " + ", ".join(f"A{f}_{i}{h}" for i in range(MI) for h in "lh") + ";"
                      for f in range(sets_a))
    decl_b = "float4 " + ", ".join(f"B{r}_{p}" for r in range(D + 1)
                                   for p in range(cfg.wn // 16)) + ";"
    first_b = "\n  ".join(line for r in range(D) for line in _load_b(cfg, r))
    first_a = "\n  ".join(load_a(cfg, 0, 0)) if cfg.a_early else ""
    text = "\n    ".join(body)
    return f"""{{ {decl_a} {decl_b}
  int bs_ = 0;
  for (int s = 0; s < STAGES; ++s) {{
    if (s < {nt}) {_fill(cfg, "s", "s", how)}{commit}
  }}
  {first_b}
  {f"CP_WAIT_N({S - 1});" if async_ else ""}
  barrier(CLK_LOCAL_MEM_FENCE);
  int cs = 0;
  {first_a}
  #pragma unroll 1
  for (int kt = 0; kt < {nt}; kt += {steps // P}) {{
    {text}
  }}
  }}"""
