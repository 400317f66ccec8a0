"""Hopper's tensor memory accelerator from OpenCL: whether a device has it, programs built
through patched PTX (:mod:`.kernels.wgmma`), and the template tensor maps its GEMM starts from.

A tensor map (``CUtensorMap``, 128 opaque bytes) describes a 2D tensor and the box a copy
brings. OpenCL has no call that makes one, but the CUDA driver's ``cuTensorMapEncodeTiled``
(``libcuda.so.1``, beside NVIDIA's OpenCL) only encodes: the engine encodes, once per box
shape, a template with a placeholder address and extents, and each work-group of the GEMM sets
the real ones on the device (``tensormap.replace``; :mod:`.kernels.tma_gemm`)."""
from __future__ import annotations

import ctypes
import functools
import os

import numpy as np

from .kernels.wgmma import PTX, mma_call, retarget

_FLOAT32, _SWIZZLE_32B, _L2_128B, _OOB_ZEROS = 7, 1, 2, 0
MAP_BYTES = 128


BOX_ROWS = (64, 128, 192, 256)  # the GEMM's tile rows and columns (kernels.tma_gemm)


def _fn(cuda, name: str):
    return getattr(cuda, name + "_v2", None) or getattr(cuda, name)


@functools.lru_cache(maxsize=1)
def _encoded() -> dict[int, np.ndarray] | None:
    """A template map for each of BOX_ROWS (float32 rows, boxes of 8 elements x that many
    rows, 32-byte swizzled, zeros outside the tensor; placeholder address and extents, set on
    the device), or None where the CUDA driver is not there. The encoder wants a current CUDA
    context: the device's primary one, retained only while it runs."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        encode = cuda.cuTensorMapEncodeTiled
        if cuda.cuInit(0) != 0:
            return None
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        if cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0 or \
                cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) != 0:
            return None
    except (OSError, AttributeError):
        return None
    out: dict[int, np.ndarray] = {}
    pushed = False
    try:
        pushed = _fn(cuda, "cuCtxPushCurrent")(ctx) == 0
        for rows in BOX_ROWS if pushed else ():
            raw = np.zeros(MAP_BYTES + 64, np.uint8)  # (a map is 64-byte aligned)
            off = (-raw.ctypes.data) % 64
            dims = (ctypes.c_uint64 * 2)(1 << 16, 1 << 16)
            strides = (ctypes.c_uint64 * 1)(4 << 16)
            box = (ctypes.c_uint32 * 2)(8, rows)
            ones = (ctypes.c_uint32 * 2)(1, 1)
            if encode(ctypes.c_void_p(raw.ctypes.data + off), _FLOAT32, 2,
                      ctypes.c_void_p(1 << 20), dims, strides, box, ones, 0, _SWIZZLE_32B,
                      _L2_128B, _OOB_ZEROS) != 0:
                break
            out[rows] = raw[off:off + MAP_BYTES].copy()
    finally:
        if pushed:
            _fn(cuda, "cuCtxPopCurrent")(ctypes.byref(ctypes.c_void_p()))
        _fn(cuda, "cuDevicePrimaryCtxRelease")(dev)
    return out if len(out) == len(BOX_ROWS) else None


@functools.cache
def templates(kind: str, a_rows: int, b_rows: int) -> np.ndarray:
    """The GEMM's two template maps (A's boxes of ``a_rows`` rows, then B's of ``b_rows``),
    256 bytes; zeros for the emulated kernel, which reads none."""
    if kind != "ptx":
        maps = np.zeros(2 * MAP_BYTES, np.uint8)
    else:
        boxes = _encoded()
        if boxes is None:
            raise RuntimeError("cuTensorMapEncodeTiled failed on a device that passed the probe")
        maps = np.concatenate([boxes[a_rows], boxes[b_rows]])
    maps.setflags(write=False)  # (shared by every GEMM of these boxes)
    return maps


def build_retargeted(cl, context, source: str, options: list[str]):
    """The program of ``source`` built through its PTX: compiled, the ``//@@`` instructions
    uncommented and the target set to ``sm_90a``, built again from that PTX."""
    first = cl.Program(context, source).build(options=options)
    ptx = first.get_info(cl.program_info.BINARIES)[0].decode().rstrip("\0")
    return cl.Program(context, context.devices, [retarget(ptx).encode() + b"\0"]).build()


_PROBE = PTX + r"""
__kernel void probe(__global float* d, __global uchar* maps) {
  __local ulong mbar[1];
  __local float4 tms[8] __attribute__((aligned(128)));
  __local float4 stage[64] __attribute__((aligned(1024)));
  const uint bar = (uint)(size_t)mbar, tm = (uint)(size_t)tms, s = (uint)(size_t)stage;
  float c0 = d[0], c1 = d[1], c2 = d[2], c3 = d[3];
  if (get_local_id(0) == 0) { MB_INIT(bar, 1); MB_INIT_FENCE(); TM_ADDRESS(tm, (ulong)d);
    TM_DIM(tm, 0, 8); TM_STRIDE(tm, 32); }
  TM_PUBLISH((ulong)maps, tm);
  TM_ACQUIRE((ulong)maps);
  if (get_local_id(0) == 0) { MB_EXPECT(bar, 1024); TMA2D(s, (ulong)maps, 0, 0, bar); }
  mb_wait(bar, 0);
  WG_FENCE();
  """ + r"""MMA_CALL
  WG_COMMIT(); WG_WAIT0(); MB_ARRIVE(bar);
  d[get_global_id(0)] = c0 + c1 + c2 + c3;
}"""


def has_tma(device, context, mma: str) -> str:
    """``"ptx"`` where kernels may use the tensor memory accelerator and ``wgmma`` (NVIDIA's
    OpenCL on compute capability 9.0 with ``mma.sync``, the CUDA driver's encoder, and a probe
    program built through patched PTX; not run), else ``""``. ``NETPASS_TMA=0`` turns it
    off."""
    if mma != "ptx" or os.environ.get("NETPASS_TMA", "1") == "0":
        return ""
    try:
        if int(device.compute_capability_major_nv) != 9 or _encoded() is None:
            return ""
        import pyopencl as cl
        src = _PROBE.replace("MMA_CALL", mma_call(8, "c", "WG_DESC(s)", "WG_DESC(s)"))
        build_retargeted(cl, context, src, [])
    except Exception:  # (no attribute query, no driver entry point, a refused build: no TMA)
        return ""
    return "ptx"

