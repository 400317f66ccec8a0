"""OpenCL devices and the engine that owns a context, device allocations and the
compiled-program cache; each infer request makes its own in-order queue (``Engine.new_queue``).

Device names: ``AUTO`` (best GPU, else the OpenCL CPU device), ``GPU`` (a GPU or a
:class:`~netpass.errors.DeviceError`), ``CPU`` (the OpenCL CPU device, PoCL), ``REFERENCE``
(numpy, no OpenCL). ``NETPASS_DEVICE`` overrides the default (``AUTO``), not a device the
caller names.
"""
from __future__ import annotations

import os
import threading
import weakref
from typing import Any

import numpy as np

from ..errors import AllocationError, DeviceError
from .addresses import AddressBook
from .kernels.common import UNOPTIMIZED
from .kernels.wgmma import MARK
from .launcher import make_launcher
from .memory import Allocation
from .tensor_maps import build_retargeted, has_tma

DEVICE_NAMES = ("AUTO", "GPU", "CPU", "REFERENCE")
# OpenCL errors that mean "not enough memory": MEM_OBJECT_ALLOCATION_FAILURE,
# OUT_OF_RESOURCES, OUT_OF_HOST_MEMORY, INVALID_BUFFER_SIZE (over the max allocation)
_NO_MEMORY = {-4, -5, -6, -61}


def _cl():
    try:
        import pyopencl as cl
    except ImportError as e:  # pragma: no cover - pyopencl is a dependency
        raise DeviceError(f"pyopencl is not importable: {e}") from e
    return cl


def _all_devices() -> list:
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except Exception:
        return []
    out = []
    for p in platforms:
        try:
            out.extend(p.get_devices())
        except Exception:
            continue
    return out


def devices() -> list[dict[str, Any]]:
    """Every OpenCL device: platform, name, type, global memory, max allocation, compute units."""
    cl = _cl()
    rows = []
    for d in _all_devices():
        rows.append({
            "platform": d.platform.name.strip(),
            "name": d.name.strip(),
            "type": cl.device_type.to_string(d.type),
            "global_mem_size": int(d.global_mem_size),
            "max_mem_alloc_size": int(d.max_mem_alloc_size),
            "compute_units": int(d.max_compute_units),
            "fp16": "cl_khr_fp16" in d.extensions,
        })
    return rows


def _is_gpu(d) -> bool:
    return bool(d.type & _cl().device_type.GPU)


def resolve_device_name(device: str | None) -> str:
    """``device`` (any case; None or empty: AUTO, which ``NETPASS_DEVICE`` overrides) as one of
    DEVICE_NAMES; a DeviceError for anything else."""
    if device is not None and not isinstance(device, str):
        raise DeviceError(f"the device must be a name, one of {', '.join(DEVICE_NAMES)}; got "
                          f"{device!r}")
    name = (device or "AUTO").upper()
    if name == "AUTO":
        name = (os.environ.get("NETPASS_DEVICE") or "AUTO").upper()
    if name not in DEVICE_NAMES:
        raise DeviceError(f"unknown device '{name}'; expected one of {', '.join(DEVICE_NAMES)}")
    return name


_BUILD_PROBE = "__kernel void probe(__global float* a) { a[get_global_id(0)] = 1.0f; }"
_builds: dict[int, str] = {}


def build_failure(device) -> str:
    """Why ``device`` cannot compile a trivial kernel ('' when it can), probed once per device.
    A PoCL whose LLVM does not know the host CPU (pyopencl's bundled PoCL on AMD Zen 5) lists a
    CPU device whose every build fails with "unknown target CPU 'generic'"."""
    key = device.int_ptr
    if key not in _builds:
        cl = _cl()
        try:
            cl.Program(cl.Context([device]), _BUILD_PROBE).build()
            _builds[key] = ""
        except cl.Error as e:
            log = " ".join(str(e).split())
            _builds[key] = log[log.find("error:"):][:200] if "error:" in log else log[:200]
    return _builds[key]


def _usable_cpus(cpus: list) -> list:
    """The CPU devices that compile kernels; a clear error when some exist and none does."""
    usable = [d for d in cpus if not build_failure(d)]
    if cpus and not usable:
        why = "; ".join(f"{d.name.strip()} ({d.platform.name.strip()}): {build_failure(d)}"
                        for d in cpus)
        raise DeviceError(f"no OpenCL CPU device can compile kernels ({why}); on CPUs newer than "
                          "the LLVM of pyopencl's bundled PoCL, install the system PoCL "
                          "(Debian/Ubuntu: apt-get install pocl-opencl-icd) or use device "
                          "'REFERENCE'")
    return usable


def select_device(name: str):
    """The OpenCL device for ``name`` (AUTO, GPU or CPU); CPU devices that cannot compile a
    kernel are passed over."""
    devs = _all_devices()
    gpus = [d for d in devs if _is_gpu(d)]
    cpus = [d for d in devs if not _is_gpu(d)]
    if name == "CPU" or not gpus:
        cpus = _usable_cpus(cpus)
    # discrete GPUs (no unified memory) first, then by memory
    gpus.sort(key=lambda d: (not d.host_unified_memory, d.global_mem_size), reverse=True)
    if name == "GPU":
        if not gpus:
            found = ", ".join(f"{d.name.strip()} ({d.platform.name.strip()})"
                              for d in devs) or "none"
            raise DeviceError("device 'GPU' requested but no OpenCL GPU was found "
                              f"(devices: {found})")
        return gpus[0]
    if name == "CPU":
        if not cpus:
            raise DeviceError("device 'CPU' requested but no OpenCL CPU device (PoCL) was found")
        return cpus[0]
    if gpus:
        return gpus[0]
    if cpus:
        return cpus[0]
    raise DeviceError("no OpenCL device found (AUTO); install PoCL or use device 'REFERENCE'")


_CP_ASYNC_PROBE = """__kernel void probe(__global const float* g) {
  __local float s[4] __attribute__((aligned(16)));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;"
               :: "r"((uint)(size_t)s), "l"(g) : "memory");
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_group 0;" ::: "memory");
}"""


def _has_cp_async(device, context) -> bool:
    """True where kernels may issue PTX ``cp.async`` (asynchronous global-to-local copies):
    NVIDIA's OpenCL on compute capability 8.0 and later whose compiler takes the inline PTX
    (a probe is built, not run). ``NETPASS_CP_ASYNC=0`` turns it off."""
    if os.environ.get("NETPASS_CP_ASYNC", "1") == "0" or "NVIDIA" not in device.platform.name:
        return False
    cl = _cl()
    try:
        if int(device.compute_capability_major_nv) < 8:
            return False
        cl.Program(context, _CP_ASYNC_PROBE).build()
    except (AttributeError, cl.Error):  # no cl_nv_device_attribute_query, or no such PTX
        return False
    return True


_MMA_PROBE = """__kernel void probe(__global const float* a, __global float* d) {
  const uint x = as_uint(a[0]); float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
    : "=f"(c0), "=f"(c1), "=f"(c2), "=f"(c3) : "r"(x), "r"(x), "r"(x), "r"(x), "r"(x), "r"(x),
      "f"(c0), "f"(c1), "f"(c2), "f"(c3));
  d[get_global_id(0)] = c0 + c1 + c2 + c3;
}"""


def _has_mma(device, context, cp_async: bool) -> str:
    """``"ptx"`` where kernels may issue the TF32 tensor-core ``mma.sync`` (m16n8k8) as
    inline PTX (NVIDIA's OpenCL, compute capability 8.0+, with cp.async:
    the probe is built, not run), else ``""``. ``NETPASS_MMA=0`` turns it off."""
    if not cp_async or os.environ.get("NETPASS_MMA", "1") == "0":
        return ""
    cl = _cl()
    try:
        cl.Program(context, _MMA_PROBE).build()
    except cl.Error:
        return ""
    return "ptx"


class Engine:
    """Context on one device; tracks device memory and caches built programs. Shared by every
    compiled model on the device and used from any thread: the program cache and the memory
    counter are guarded by a lock. ``queue`` (and ``launcher`` on it) is the engine's own
    in-order queue, for uploads of what compiled models share (constants) and for tools;
    infer requests run on queues of their own (``new_queue``)."""

    _engines: dict[tuple, Engine] = {}
    _engines_lock = threading.Lock()

    @classmethod
    def get(cls, device, profiling: bool = False) -> Engine:
        key = (device.int_ptr, profiling)
        with cls._engines_lock:
            eng = cls._engines.get(key)
            if eng is None:
                eng = cls._engines[key] = cls(device, profiling)
        return eng

    def __init__(self, device, profiling: bool = False) -> None:
        cl = _cl()
        self.cl = cl
        self.device = device
        self.context = cl.Context([device])
        self._queue_props = cl.command_queue_properties.PROFILING_ENABLE if profiling else 0
        self.queue = self.new_queue()
        self.profiling = profiling
        self.is_gpu = _is_gpu(device)
        self.integrated = bool(device.host_unified_memory) and self.is_gpu
        # the device's memory is the host's (PoCL): outputs can be written in place
        self.host_memory = bool(device.host_unified_memory) and not self.is_gpu
        self.max_global_mem_size = int(device.global_mem_size)
        self.max_alloc_mem_size = int(device.max_mem_alloc_size)
        self.max_work_group_size = int(device.max_work_group_size)
        self.max_parameter_size = int(device.max_parameter_size)  # (bytes of a kernel's args)
        self.fp16 = "cl_khr_fp16" in device.extensions
        self.cp_async = _has_cp_async(device, self.context)
        # "ptx": tensor-core GEMMs (kernels.mma); tests set "emulated" to run them on PoCL
        self.mma = _has_mma(device, self.context, self.cp_async)
        # "ptx": Hopper's tensor memory accelerator and wgmma (kernels.tma_gemm, built through
        # patched PTX); tests set "emulated"
        self.tma = has_tma(device, self.context, self.mma)
        self.used_device_memory = 0
        self._lock = threading.Lock()  # the program cache and the memory counter
        self._programs: dict[Any, Any] = {}
        self._mf = cl.mem_flags
        # buffers passed to kernels as addresses (runtime.addresses), where the device can
        self.addresses = AddressBook.make(self)
        self.launcher = make_launcher(self)
        # persistent launches of all requests go to the device in order (runtime.persistent)
        self.persistent_lock = threading.Lock()
        self.persistent_last: tuple | None = None  # (queue, event) of the last one

    def new_queue(self):
        """A new in-order command queue on the device (profiling when the engine profiles)."""
        return self.cl.CommandQueue(self.context, self.device, properties=self._queue_props)

    # -- memory ---------------------------------------------------------------------------
    def _failed(self, e: Exception, size: int, what: str) -> Exception:
        """The NetpassError for a failed allocation of ``size`` bytes for ``what``."""
        msg = f"allocating {size} bytes for {what} on {self.device.name.strip()} failed: {e}"
        no_memory = isinstance(e, MemoryError) or getattr(e, "code", None) in _NO_MEMORY
        return AllocationError(msg) if no_memory else DeviceError(msg)

    def allocate(self, nbytes: int, pooled: bool = False, what: str = "a buffer") -> Allocation:
        """A new device buffer; its bytes count as used until the allocation is dropped."""
        size = max(int(nbytes), 64)
        try:
            buf = self.cl.Buffer(self.context, self._mf.READ_WRITE, size)
        except (self.cl.Error, MemoryError) as e:
            raise self._failed(e, size, what) from e
        alloc = Allocation(buf, size, pooled)
        with self._lock:
            self.used_device_memory += size
        book = self.addresses
        weakref.finalize(alloc, self._free, size,
                         book.register(alloc) if book is not None else None)
        return alloc

    def _free(self, size: int, key: int | None) -> None:
        with self._lock:
            self.used_device_memory -= size
        book = self.addresses
        if key is not None and book is not None:
            book.forget(key)

    def allocate_host(self, shape: tuple, dtype, what: str = "an output") -> Allocation:
        """A buffer whose memory is a new numpy array of ``shape`` (``CL_MEM_USE_HOST_PTR``,
        kept as ``Allocation.host``): on a device whose memory is the host's
        (``host_memory``), kernels write that array in place. Not counted as device memory:
        the array is handed to the caller."""
        try:
            arr = np.empty(shape, dtype)
            buf = self.cl.Buffer(self.context, self._mf.READ_WRITE | self._mf.USE_HOST_PTR,
                                 hostbuf=arr)
        except (self.cl.Error, MemoryError) as e:
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            raise self._failed(e, nbytes, what) from e
        alloc = Allocation(buf, arr.nbytes)
        alloc.host = arr
        book = self.addresses
        if book is not None:
            weakref.finalize(alloc, book.forget, book.register(alloc))
        return alloc

    def upload(self, array, pooled: bool = False, queue=None) -> Allocation:
        """A new buffer holding ``array``, copied before returning (on ``queue``, else the
        engine's own)."""
        alloc = self.allocate(array.nbytes, pooled)
        if array.nbytes:
            self.cl.enqueue_copy(queue or self.queue, alloc.buffer, array, is_blocking=True)
        return alloc

    # -- programs -------------------------------------------------------------------------
    def build(self, source: str, stats: dict | None = None, options: tuple[str, ...] = ()):
        """The compiled program for ``source`` (in-memory cache, then pyopencl's disk cache),
        with extra compiler ``options``. Sources come memoized from the generators, so the dict
        lookup hashes a string whose hash Python has already cached. A source marked
        ``kernels.common.UNOPTIMIZED`` builds without optimization."""
        key = (source, options) if options else source
        prg = self._programs.get(key)
        if prg is None:
            with self._lock:  # (one build per source, whichever request asks first)
                prg = self._programs.get(key)
                if prg is None:
                    flags = ["-cl-mad-enable", *options]
                    if UNOPTIMIZED in source:
                        flags.append("-cl-opt-disable")
                    try:
                        if MARK in source and self.tma == "ptx":
                            prg = build_retargeted(self.cl, self.context, source, flags)
                        else:
                            prg = self.cl.Program(self.context, source).build(options=flags)
                    except self.cl.Error as e:
                        raise DeviceError(f"OpenCL build failed on {self.device.name.strip()}: "
                                          f"{e}") from e
                    self._programs[key] = prg
                    if stats is not None:
                        stats["kernel_builds"] = stats.get("kernel_builds", 0) + 1
        return prg

    def describe(self) -> str:
        return f"{self.device.name.strip()} ({self.device.platform.name.strip()})"
