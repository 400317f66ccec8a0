"""Kernel launches: setting arguments and enqueueing, the runtime's innermost step.

A kernel takes buffers, then one struct of int32s (``kernels.pack_scalars``); where the
engine has an address book (:mod:`~netpass.runtime.addresses`), one struct holding the
buffers' device addresses and the ints (``kernels.address_buffers``, :func:`kernel_handle`).
Kernel objects hold their arguments as state (``clSetKernelArg`` on one kernel from two
threads is a race), so each infer request makes its own from the shared built programs; a
:class:`KernelHandle` wraps one with the arguments last set on it, so that a launch sets only
what changed. A launcher works on one command queue: the request's.

Two launchers with the same interface:

- :class:`Launcher`: pyopencl's ``Kernel.set_args`` and ``enqueue_nd_range_kernel`` (which
  returns an event: used when profiling).
- :class:`DirectLauncher`: ``clEnqueueNDRangeKernel`` called through ctypes on the OpenCL
  library pyopencl loaded, with pyopencl's own handles: the work sizes are converted to C
  arrays once per launch shape and no event is asked for. On the H200, NVIDIA's driver takes
  5-9 us per enqueue (by machine) and pyopencl's wrapper up to 1.5 us more
  (``benchmarks/bench_launch.py``); a decoder step launches dozens of small kernels. Changed
  buffers and the int struct are set with ``clSetKernelArg`` the same way, host copies go
  through ``clEnqueueWriteBuffer`` / ``clEnqueueReadBuffer`` (pyopencl's ``enqueue_copy`` costs
  42 us per small copy on PoCL, these 4 us), and device copies (a step's token handed on to
  the next: out of the step into a device tensor, from it into the next step's input) through
  ``clEnqueueCopyBuffer`` (GPT-2's device-token loop on PoCL, launches stubbed: 0.330-0.337 ->
  0.320-0.324 ms of host CPU a token).

:func:`make_launcher` picks the direct one unless profiling is on, no OpenCL library can be
found, or ``NETPASS_DIRECT_LAUNCH=0``.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from typing import Any, Literal

import numpy as np

from ..errors import DeviceError
from .kernels import address_buffers

_LIB: ctypes.CDLL | Literal[False] | None = None  # False: looked for and not found
RETIRED_MAX = 256  # replaced buffer lists a launcher keeps before it waits for its queue


def _opencl_library() -> ctypes.CDLL | None:
    """The OpenCL ICD loader pyopencl's extension is linked against (already mapped into this
    process), else the system's."""
    global _LIB
    if _LIB is None:
        import pyopencl._cl  # noqa: F401  (maps its libOpenCL)
        path = None
        try:
            with open("/proc/self/maps") as f:
                for line in f:
                    if "libOpenCL" in line and "/" in line:
                        path = line[line.index("/"):].strip()
                        break
        except OSError:
            path = None
        path = path or ctypes.util.find_library("OpenCL")
        try:
            _LIB = ctypes.CDLL(path) if path else False
        except OSError:
            _LIB = False
    return _LIB or None


class RawKernel:
    """A kernel object made with ``clCreateKernel`` through ctypes: what the runtime needs of
    pyopencl's ``Kernel`` (its handle and name, setting arguments, work-group info) without
    the Python invoker pyopencl generates for every ``Kernel`` object (about 0.45 ms each on
    PoCL, against 3 us for the call itself; every new infer request makes one per kernel of
    its program). ``as_pyopencl()`` wraps it for pyopencl's own launch path, once."""

    __slots__ = ("int_ptr", "function_name", "program", "_lib", "_cl", "_pyopencl")

    def __init__(self, lib: ctypes.CDLL, cl: Any, program: Any, name: str,
                 ptr: int | None = None) -> None:
        """Kernel ``name`` of ``program``: a new kernel object, or the one at ``ptr`` whose
        reference the caller hands over."""
        if ptr is None:
            err = ctypes.c_int32()
            ptr = lib.clCreateKernel(ctypes.c_void_p(program.int_ptr), name.encode(),
                                     ctypes.byref(err))
            if err.value or not ptr:
                raise DeviceError(f"clCreateKernel({name}) failed with error {err.value}")
        self.int_ptr, self.function_name, self.program = int(ptr), name, program
        self._lib, self._cl, self._pyopencl = lib, cl, None

    def set_arg(self, index: int, value: Any) -> None:
        """Argument ``index``: a buffer (anything with ``int_ptr``) or the bytes of a numpy
        array or scalar."""
        ref: Any
        if hasattr(value, "int_ptr"):
            mem = ctypes.c_void_p(value.int_ptr)
            size, ref = ctypes.sizeof(mem), ctypes.byref(mem)
        else:
            arr = np.ascontiguousarray(value)
            size, ref = arr.nbytes, arr.ctypes.data_as(ctypes.c_void_p)
        err = self._lib.clSetKernelArg(ctypes.c_void_p(self.int_ptr), ctypes.c_uint32(index),
                                       ctypes.c_size_t(size), ref)
        if err:
            raise DeviceError(f"clSetKernelArg({self.function_name}, {index}) failed with error "
                              f"{err}")

    def get_work_group_info(self, param: Any, device: Any) -> Any:
        return self.as_pyopencl().get_work_group_info(param, device)

    def as_pyopencl(self) -> Any:
        """pyopencl's ``Kernel`` over this kernel object (made at the first call)."""
        if self._pyopencl is None:
            self._pyopencl = self._cl.Kernel.from_int_ptr(self.int_ptr, retain=True)
        return self._pyopencl

    def handed_on(self) -> RawKernel | None:
        """A new RawKernel holding this one's reference to the kernel object, this one left
        holding none; None where this one has released it already. A finalizer that passes
        kernels on to live owners must move them this way: inside a cyclic garbage collection
        the collector runs the finalizers of everything it found unreachable, this one's
        (which releases the kernel) included, even of objects a finalizer then brings back."""
        ptr, self.int_ptr = self.int_ptr, 0
        if not ptr:
            return None
        return RawKernel(self._lib, self._cl, self.program, self.function_name, ptr)

    def __del__(self) -> None:
        ptr, self.int_ptr = self.int_ptr, 0
        if ptr:
            with contextlib.suppress(Exception):  # (interpreter shutdown: the library may be gone)
                self._lib.clReleaseKernel(ctypes.c_void_p(ptr))


def make_kernel(cl: Any, program: Any, name: str) -> Any:
    """Kernel ``name`` of the built ``program``: a :class:`RawKernel` where the OpenCL
    library can be called directly, else pyopencl's ``Kernel``."""
    lib = _opencl_library()
    if lib is None:
        return cl.Kernel(program, name)
    if lib.clCreateKernel.restype is not ctypes.c_void_p:
        lib.clCreateKernel.restype = ctypes.c_void_p
        lib.clSetKernelArg.restype = ctypes.c_int32
    return RawKernel(lib, cl, program, name)


def _pyopencl_kernel(kernel: Any) -> Any:
    return kernel.as_pyopencl() if type(kernel) is RawKernel else kernel


class AddressedArgs:
    """The one struct argument of a kernel built by ``kernels.address_buffers``: the buffers'
    device addresses, then the ints, laid out as OpenCL C lays the struct out (8-byte
    aligned)."""

    __slots__ = ("raw", "addresses", "ints", "ints_at", "ints_bytes")

    def __init__(self, n_buffers: int, n_ints: int) -> None:
        self.raw = (ctypes.c_uint64 * ((8 * n_buffers + 4 * n_ints + 7) // 8))()
        self.addresses = (ctypes.c_uint64 * n_buffers).from_buffer(self.raw)
        self.ints = (ctypes.c_int32 * n_ints).from_buffer(self.raw, 8 * n_buffers)
        self.ints_at, self.ints_bytes = ctypes.addressof(self.ints), 4 * n_ints


class KernelHandle:
    """A pyopencl kernel, its raw ``cl_kernel``, the Source it was built from (when known: a
    persistent launch rewrites it as a phase) and the buffers and ints last set on it (a
    list, or the C array a step plan passed). ``args``: the struct of a kernel that takes its
    buffers as addresses (:func:`kernel_handle`), else None."""

    __slots__ = ("kernel", "ptr", "source", "bufs", "ints", "cints", "args")

    def __init__(self, kernel, source=None, args: AddressedArgs | None = None) -> None:
        self.kernel = kernel
        self.source = source
        self.ptr = ctypes.c_void_p(kernel.int_ptr)
        self.bufs: list | None = None
        self.ints: list | None = None
        # the ints as a C array (DirectLauncher)
        self.cints: ctypes.Array[ctypes.c_int32] | None = None
        self.args = args

    def handed_on(self) -> KernelHandle | None:
        """A new handle of this one's kernel, no argument known set, for another request
        (``RawKernel.handed_on``: this handle is left without its kernel); None where the
        kernel has been released."""
        kernel = self.kernel.handed_on() if type(self.kernel) is RawKernel else self.kernel
        if kernel is None:
            return None
        args = self.args
        return KernelHandle(kernel, self.source,
                            None if args is None else AddressedArgs(len(args.addresses),
                                                                    len(args.ints)))


def built_source(engine, source):
    """What the engine builds for ``source`` (a packed ``kernels.Source``): its form taking
    its buffers as addresses where the engine has an address book
    (:mod:`~netpass.runtime.addresses`), the kernel allows it and the struct fits the
    device's kernel parameter size, else ``source``."""
    if engine.addresses is None:
        return source
    addressed = address_buffers(source)
    if addressed is None or 8 * addressed.n_buffers + 4 * addressed.n_ints + 8 \
            > engine.max_parameter_size:
        return source
    return addressed


def kernel_handle(engine, source, stats: dict | None = None) -> KernelHandle:
    """A new kernel object running ``source`` (a packed ``kernels.Source``) for one request,
    built as :func:`built_source` says."""
    built = built_source(engine, source)
    kernel = make_kernel(engine.cl, engine.build(built.text, stats), built.name)
    return KernelHandle(kernel, source, None if built is source
                        else AddressedArgs(built.n_buffers, built.n_ints))


class Launcher:
    """pyopencl's calls on one queue (``queue``, else the engine's own). ``keep``: None, or
    a list every array given to ``write`` is appended to (an inference that returns before
    the device has run its copies holds them: :mod:`~netpass.runtime.pending`)."""

    def __init__(self, engine, queue=None) -> None:
        self.queue = queue if queue is not None else engine.queue
        self.keep: list | None = None
        self._cl = engine.cl
        self._enqueue = engine.cl.enqueue_nd_range_kernel
        self._book = engine.addresses
        self.retired: list = []  # buffers replaced on addressed kernels: kept till the queue ran

    def set_args(self, h: KernelHandle, buffers: list, ints: list) -> bool:
        """Set what differs from the arguments last set on ``h``; whether anything did."""
        if h.args is not None:
            return self._set_addressed(h, buffers, ints, None)
        changed = False
        if buffers != h.bufs:
            self._set_buffers(h, buffers)
            changed = True
        if ints != h.ints:
            if ints:
                self._set_ints(h, len(buffers), ints)
            h.ints = ints
            changed = True
        return changed

    def set_packed(self, h: KernelHandle, buffers: list, cints) -> bool:
        """``set_args`` with the ints already a C array (step plans keep one per launch and
        binding: the same object means the same ints)."""
        if h.args is not None:
            return self._set_addressed(h, buffers, None, cints)
        changed = False
        if buffers != h.bufs:
            self._set_buffers(h, buffers)
            changed = True
        if h.ints is not cints:
            self._set_struct(h, len(buffers), cints)
            h.ints = cints
            changed = True
        return changed

    def _set_addressed(self, h: KernelHandle, buffers: list, ints: list | None, cints) -> bool:
        """``set_args`` / ``set_packed`` of a kernel taking one struct: the buffers' addresses
        and the ints (``h.args``), set as one argument when anything in it changed."""
        args = h.args
        assert args is not None and self._book is not None
        changed = False
        if buffers != h.bufs:
            if h.bufs is not None:
                self.retire(h.bufs)
            args.addresses[:] = self._book.of(buffers)
            h.bufs = buffers
            changed = True
        if cints is not None:
            if h.ints is not cints:
                ctypes.memmove(args.ints_at, cints, args.ints_bytes)
                h.ints = cints
                changed = True
        elif ints is not None and ints != h.ints:
            args.ints[:] = ints
            h.ints = ints
            changed = True
        if changed:
            self._set_struct(h, 0, args.raw)
        return changed

    def set_int_view(self, h: KernelHandle, cints) -> None:
        """Set ``h``'s ints from the C array ``cints``, its buffers as last set (the fast
        paths of moving kernels: only their ints move)."""
        args = h.args
        if args is None:
            assert h.bufs is not None
            self._set_struct(h, len(h.bufs), cints)
        else:
            ctypes.memmove(args.ints_at, cints, args.ints_bytes)
            self._set_struct(h, 0, args.raw)
        h.ints = cints

    def retire(self, buffers: list) -> None:
        """Keep ``buffers`` (no longer set on a kernel that took their addresses) until the
        queue has run what was enqueued before: the driver does not know a launch reads them.
        Past RETIRED_MAX of them the queue is waited for at once."""
        self.retired.append(buffers)
        if len(self.retired) > RETIRED_MAX:
            self.finish()

    def finish(self) -> None:
        """Wait until the queue has run everything enqueued so far; retired buffers may go."""
        self.queue.finish()
        self.retired.clear()

    def _set_buffers(self, h: KernelHandle, buffers: list) -> None:
        """Set the buffer arguments that differ from the last ones set on ``h``."""
        last = h.bufs
        for i, b in enumerate(buffers):
            if last is None or last[i] is not b:
                h.kernel.set_arg(i, b)
        h.bufs = buffers

    def _set_ints(self, h: KernelHandle, pos: int, ints: list) -> None:
        """Set the int struct (argument ``pos``) from a list."""
        h.kernel.set_arg(pos, np.asarray(ints, dtype=np.int32))

    def _set_struct(self, h: KernelHandle, pos: int, cints) -> None:
        """Set the struct (argument ``pos``) from a C array."""
        h.kernel.set_arg(pos, np.ctypeslib.as_array(cints))

    def launch(self, h: KernelHandle, ln):
        """Enqueue launch ``ln`` (an ``impls.Launch``) of ``h``; the event, or None."""
        return self._enqueue(self.queue, _pyopencl_kernel(h.kernel), ln.gws, ln.lws)

    def launch_ordered(self, h: KernelHandle, ln, after):
        """Enqueue launch ``ln`` of ``h`` after event ``after`` (of any queue of the context;
        None: no wait); the launch's event."""
        return self._enqueue(self.queue, _pyopencl_kernel(h.kernel), ln.gws, ln.lws,
                             wait_for=[after] if after is not None else None)

    def write(self, buffer, offset: int, array: np.ndarray) -> None:
        """Enqueue a copy of ``array`` (C-contiguous) to ``buffer`` at byte ``offset`` without
        waiting; the caller keeps ``array`` alive and unchanged until the queue has run it."""
        if self.keep is not None:
            self.keep.append(array)
        self._cl.enqueue_copy(self.queue, buffer, array, dst_offset=offset, is_blocking=False)

    def copy(self, dst, src, nbytes: int, src_offset: int = 0) -> None:
        """Enqueue a device-to-device copy of ``nbytes`` from buffer ``src`` (from byte
        ``src_offset``) to ``dst``."""
        self._cl.enqueue_copy(self.queue, dst, src, byte_count=nbytes, src_offset=src_offset)

    def read(self, array: np.ndarray, buffer, offset: int) -> None:
        """Enqueue a copy from ``buffer`` at byte ``offset`` into ``array`` without waiting (the
        caller finishes the queue before reading ``array``)."""
        self._cl.enqueue_copy(self.queue, array, buffer, src_offset=offset, is_blocking=False)


class DirectLauncher(Launcher):
    """The OpenCL C calls through ctypes (module docstring)."""

    def __init__(self, engine, queue=None) -> None:
        super().__init__(engine, queue)
        lib = _opencl_library()
        if lib is None:
            raise DeviceError("no OpenCL library found for direct launches")
        self._cl_enqueue = lib.clEnqueueNDRangeKernel
        self._cl_enqueue.restype = ctypes.c_int32
        self._set_arg = lib.clSetKernelArg
        self._set_arg.restype = ctypes.c_int32
        self._write = lib.clEnqueueWriteBuffer
        self._write.restype = ctypes.c_int32
        self._read = lib.clEnqueueReadBuffer
        self._read.restype = ctypes.c_int32
        self._copy = lib.clEnqueueCopyBuffer
        self._copy.restype = ctypes.c_int32
        self._queue = ctypes.c_void_p(self.queue.int_ptr)
        self._mem_size = ctypes.c_size_t(ctypes.sizeof(ctypes.c_void_p))

    def _set_buffers(self, h: KernelHandle, buffers: list) -> None:
        last = h.bufs
        for i, b in enumerate(buffers):
            if last is None or last[i] is not b:
                mem = ctypes.c_void_p(b.int_ptr)  # (its own: the call runs without the GIL)
                self._check(self._set_arg(h.ptr, i, self._mem_size, ctypes.byref(mem)), h, i)
        h.bufs = buffers

    def _set_ints(self, h: KernelHandle, pos: int, ints: list) -> None:
        c = h.cints
        if c is None:
            c = h.cints = (ctypes.c_int32 * len(ints))()
        c[:] = ints
        self._set_struct(h, pos, c)

    def _set_struct(self, h: KernelHandle, pos: int, cints) -> None:
        self._check(self._set_arg(h.ptr, pos, ctypes.sizeof(cints), cints), h, pos)

    @staticmethod
    def _check(err: int, h: KernelHandle, i: int) -> None:
        if err:
            raise DeviceError(f"clSetKernelArg({h.kernel.function_name}, {i}) failed with error "
                              f"{err}")

    def write(self, buffer, offset: int, array: np.ndarray) -> None:
        if self.keep is not None:
            self.keep.append(array)
        err = self._write(self._queue, ctypes.c_void_p(buffer.int_ptr), 0, ctypes.c_size_t(offset),
                          ctypes.c_size_t(array.nbytes), ctypes.c_void_p(_address(array)), 0,
                          None, None)
        if err:
            raise DeviceError(f"clEnqueueWriteBuffer of {array.nbytes} bytes failed with error "
                              f"{err}")

    def read(self, array: np.ndarray, buffer, offset: int) -> None:
        err = self._read(self._queue, ctypes.c_void_p(buffer.int_ptr), 0, ctypes.c_size_t(offset),
                         ctypes.c_size_t(array.nbytes), ctypes.c_void_p(_address(array)), 0,
                         None, None)
        if err:
            raise DeviceError(f"clEnqueueReadBuffer of {array.nbytes} bytes failed with error "
                              f"{err}")

    def copy(self, dst, src, nbytes: int, src_offset: int = 0) -> None:
        err = self._copy(self._queue, ctypes.c_void_p(src.int_ptr), ctypes.c_void_p(dst.int_ptr),
                         ctypes.c_size_t(src_offset), ctypes.c_size_t(0),
                         ctypes.c_size_t(nbytes), 0, None, None)
        if err:
            raise DeviceError(f"clEnqueueCopyBuffer of {nbytes} bytes failed with error {err}")

    def launch(self, h: KernelHandle, ln) -> None:
        dims = ln.cdims
        if dims is None:
            dims = ln.cdims = c_work_sizes(ln.gws, ln.lws)
        err = self._cl_enqueue(self._queue, h.ptr, dims[0], None, dims[1], dims[2], 0, None, None)
        if err:
            raise DeviceError(f"clEnqueueNDRangeKernel({h.kernel.function_name}) failed with "
                              f"error {err}")
        return None

    def launch_ordered(self, h: KernelHandle, ln, after):
        dims = ln.cdims
        if dims is None:
            dims = ln.cdims = c_work_sizes(ln.gws, ln.lws)
        event = ctypes.c_void_p()
        waits = (ctypes.c_void_p * 1)(after.int_ptr) if after is not None else None
        err = self._cl_enqueue(self._queue, h.ptr, dims[0], None, dims[1], dims[2],
                               1 if after is not None else 0, waits, ctypes.byref(event))
        if err:
            raise DeviceError(f"clEnqueueNDRangeKernel({h.kernel.function_name}) failed with "
                              f"error {err}")
        return self._cl.Event.from_int_ptr(event.value, retain=False)


def _address(array: np.ndarray) -> int:
    """The address of ``array``'s first byte. Through the buffer protocol where the array is
    writable and contiguous: ``array.ctypes.data`` builds a numpy helper object (2.8 us
    against 1.1 on PoCL's host; a decode step makes six host copies)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array.data))
    except (TypeError, ValueError):  # (read-only, or not a plain buffer)
        return array.ctypes.data


def c_work_sizes(gws: tuple, lws: tuple | None) -> tuple:
    """(work_dim, global sizes, local sizes or None) as the C arguments of the enqueue."""
    n = len(gws)
    g = (ctypes.c_size_t * n)(*gws)
    loc = (ctypes.c_size_t * n)(*lws) if lws is not None else None
    return ctypes.c_uint32(n), g, loc


def make_launcher(engine, queue=None) -> Launcher:
    """The direct launcher on ``queue`` (else the engine's own) where it can run, else
    pyopencl's (module docstring)."""
    if engine.profiling or os.environ.get("NETPASS_DIRECT_LAUNCH", "1") == "0" \
            or _opencl_library() is None:
        return Launcher(engine, queue)
    return DirectLauncher(engine, queue)
