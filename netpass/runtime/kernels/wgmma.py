"""Hopper's own instructions from OpenCL C: ``wgmma`` (warpgroup tensor-core products), the
tensor memory accelerator (``cp.async.bulk.tensor``), ``mbarrier`` and ``tensormap.replace``.

NVIDIA's OpenCL compiles to PTX for ``sm_90``, where ``wgmma`` and ``tensormap.replace`` do
not exist (they are ``sm_90a``): a kernel writes such instructions as PTX comments (``//@@``
and the instruction; the compiler substitutes the operands as in any inline assembly);
:func:`retarget` uncomments them in the PTX the compiler returned and sets its target to
``sm_90a``, and the engine builds the program again from that PTX
(``clCreateProgramWithBinary``; ``Engine.build``). ``benchmarks/probe_wgmma.py`` measured the
path on an H200: ``wgmma`` m64nNk8 TF32 at 480 TFLOP/s from local memory (``mma.sync``: 320).

Local-memory operands are read through 64-bit matrix descriptors; the GEMM
(:mod:`.tma_gemm`) lays each operand out as the tensor memory accelerator writes a box of 8
TF32 (32 bytes) a row with its 32-byte swizzle: row r at ``32 r``, its two 16-byte halves
exchanged where bit 2 of r is set (:data:`SWIZZLE32`), read by ``wgmma`` in the same swizzle
mode (descriptor stride 256 bytes between groups of 8 rows)."""
from __future__ import annotations

import re

MARK = "//@@"


def retarget(ptx: str, target: str = "sm_90a", version: str = "8.3") -> str:
    """``ptx`` with its ``//@@`` lines uncommented, ``.target`` set to ``target`` (its other
    target options kept) and ``.version`` raised to at least ``version``."""
    ptx = ptx.replace(MARK, "")
    ptx = re.sub(r"\.target\s+sm_\w+", f".target {target}", ptx, count=1)
    want = tuple(int(x) for x in version.split("."))

    def bump(m: re.Match[str]) -> str:
        have = tuple(int(x) for x in m.group(1).split("."))
        major, minor = max(have, want)
        return f".version {major}.{minor}"

    return re.sub(r"\.version\s+(\d+\.\d+)", bump, ptx, count=1)


# a 32-byte-swizzled row of 8 floats: the byte offset of element k of row r
SWIZZLE32 = "((r) * 32 + ((((k) >> 2) ^ (((r) >> 2) & 1)) << 4) + ((k) & 3) * 4)"

PTX = r"""
/* descriptor of a 32-byte-swizzled K-major operand: 256 bytes between groups of 8 rows */
#define WG_DESC(addr) ((((ulong)1) << 16) | (((ulong)16) << 32) | (((ulong)3) << 62) \
  | (ulong)(((addr) & 0x3FFFFu) >> 4))
#define WG_FENCE() asm volatile("//@@ wgmma.fence.sync.aligned;" ::: "memory")
#define WG_COMMIT() asm volatile("//@@ wgmma.commit_group.sync.aligned;" ::: "memory")
#define WG_WAIT0() asm volatile("//@@ wgmma.wait_group.sync.aligned 0;" ::: "memory")
#define TMA2D(dst, map, x, y, bar) asm volatile( \
  "//@@ cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes " \
  "[%0], [%1, {%2, %3}], [%4];" :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory")
#define MB_INIT(bar, n) asm volatile("//@@ mbarrier.init.shared::cta.b64 [%0], %1;" \
  :: "r"(bar), "r"(n) : "memory")
#define MB_INIT_FENCE() asm volatile("//@@ fence.mbarrier_init.release.cluster;" ::: "memory")
#define MB_EXPECT(bar, bytes) asm volatile( \
  "//@@ mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) \
  : "memory")
#define MB_ARRIVE(bar) asm volatile("//@@ mbarrier.arrive.shared::cta.b64 _, [%0];" \
  :: "r"(bar) : "memory")
/* local-memory stores made visible to the async proxy (wgmma's operand reads, the copies) */
#define FENCE_ASYNC() asm volatile("//@@ fence.proxy.async.shared::cta;" ::: "memory")
#define WARP_SYNC() asm volatile("bar.warp.sync -1;" ::: "memory")
#define NAMED_BARRIER(id, n) asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(n) : "memory")
#define TM_ADDRESS(tm, v) asm volatile( \
  "//@@ tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;" \
  :: "r"(tm), "l"(v) : "memory")
#define TM_DIM(tm, d, v) asm volatile( \
  "//@@ tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], " #d ", %1;" \
  :: "r"(tm), "r"(v) : "memory")
#define TM_STRIDE(tm, v) asm volatile( \
  "//@@ tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %1;" \
  :: "r"(tm), "l"(v) : "memory")
#define TM_PUBLISH(dst, src) asm volatile( \
  "//@@ tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned" \
  " [%0], [%1], 128;" :: "l"(dst), "r"(src) : "memory")
#define TM_ACQUIRE(map) asm volatile( \
  "//@@ fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(map) : "memory")
/* a phase of an mbarrier: bounded, so that a wrong phase ends as wrong numbers, not a hang */
inline void mb_wait(uint bar, uint parity) {
  uint ok = 0;
  for (int spin = 0; spin < (1 << 20) && !ok; ++spin)
    asm volatile("{\n.reg .pred P;\n//@@ mbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, P;\n}\n" : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
}
"""


def mma_call(n: int, acc: str, da: str, db: str) -> str:
    """One ``wgmma.mma_async`` m64n{n}k8 TF32 accumulating into the float variables
    ``acc``0 .. ``acc``{n/2 - 1} from the local-memory descriptors ``da`` and ``db``."""
    regs = n // 2
    outs = ", ".join(f'"+f"({acc}{i})' for i in range(regs))
    dlist = ", ".join(f"%{i}" for i in range(regs))
    return (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + 2}, 0;\\n'
            f'//@@ wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32 '
            f'{{{dlist}}}, %{regs}, %{regs + 1}, p, 1, 1;\\n}}\\n" : {outs} : '
            f'"l"({da}), "l"({db}), "r"(1));')
