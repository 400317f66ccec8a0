"""Whether NVIDIA's OpenCL launches a kernel in thread-block clusters (Hopper: work-groups of
a cluster reach each other's local memory, and a tensor-memory-accelerator copy can be
multicast to all of them, which would let two GEMM tiles share one operand's copies).

OpenCL has no word for clusters, so the probe writes them into the PTX (as
``netpass.runtime.kernels.wgmma.retarget`` does for its instructions): the kernel reads
``%cluster_nctarank`` / ``%cluster_ctarank`` and, where it finds a partner, the partner's
local memory (``mapa`` + ``ld.shared::cluster``); its entry header gets
``.reqnctapercluster 2, 1, 1``, with and without ``.explicitcluster``. Each variant prints
what every work-group saw, (cluster size, rank, partner's value), or the error.
(H200, 2026-12-02: cluster size 1 with the first, OUT_OF_RESOURCES with the second:
``results/s23/probe_clusters.txt``.)

``python benchmarks/probe_clusters.py``"""
from __future__ import annotations

import re

import numpy as np
import pyopencl as cl

from netpass.runtime.device import Engine, select_device
from netpass.runtime.kernels.wgmma import retarget

SOURCE = r"""
#define CLUSTER_SYNC() asm volatile("//@@ barrier.cluster.arrive.release;\n" \
  "//@@ barrier.cluster.wait.acquire;" ::: "memory")
__kernel __attribute__((reqd_work_group_size(32, 1, 1))) void probe_cluster(__global uint* out)
{
  __local uint v[1];
  uint n = 0, r = 0, other = 0;
  asm volatile("//@@ mov.u32 %0, %%cluster_nctarank;" : "+r"(n));
  asm volatile("//@@ mov.u32 %0, %%cluster_ctarank;" : "+r"(r));
  if (get_local_id(0) == 0) v[0] = get_group_id(0) + 100;
  CLUSTER_SYNC();
  if (n == 2 && get_local_id(0) == 0)
    asm volatile("{\n.reg .b32 ra;\n//@@ mapa.shared::cluster.u32 ra, %1, %2;\n"
                 "//@@ ld.shared::cluster.u32 %0, [ra];\n}"
                 : "+r"(other) : "r"((uint)(size_t)v), "r"(r ^ 1) : "memory");
  CLUSTER_SYNC();
  if (get_local_id(0) == 0) vstore3((uint3)(n, r, other), get_group_id(0), out);
}"""

VARIANTS = {
    "reqnctapercluster": ".reqnctapercluster 2, 1, 1\n",
    "explicitcluster": ".explicitcluster\n.reqnctapercluster 2, 1, 1\n",
}


def main() -> None:
    eng = Engine.get(select_device("GPU"))
    print(eng.describe())
    first = cl.Program(eng.context, SOURCE).build()
    ptx = retarget(first.get_info(cl.program_info.BINARIES)[0].decode().rstrip("\0"))
    print("want (size, rank, partner's value):",
          [[2, g & 1, (g ^ 1) + 100] for g in range(4)])
    for name, directive in VARIANTS.items():
        text = re.sub(r"(\.entry\s+\w+\s*\([^)]*\)[^{]*)\{",
                      lambda m, d=directive: m.group(1) + d + "{", ptx)
        try:
            prg = cl.Program(eng.context, eng.context.devices, [text.encode() + b"\0"]).build()
            out = np.zeros(12, np.uint32)
            buf = cl.Buffer(eng.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                            hostbuf=out)
            prg.probe_cluster(eng.queue, (128,), (32,), buf)
            cl.enqueue_copy(eng.queue, out, buf)
            eng.queue.finish()
            print(name, "->", out.reshape(4, 3).tolist())
        except Exception as exc:  # (a refused build or launch is the finding)
            print(name, "-> error:", type(exc).__name__, str(exc)[:300])


if __name__ == "__main__":
    main()
