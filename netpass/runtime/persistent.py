"""Persistent launches: a request's decode-step kernels gathered into few launches.

A decode step of a length family (:mod:`~netpass.runtime.length_tape`) relaunches dozens of
short kernels whose arguments the tape already holds. With persistent steps on (config
``PERSISTENT_STEPS``, off by default), the tape hands those launches to
:class:`PersistentSteps` instead of the queue; at the tape's flush points, and before anything
else touches the device, the gathered run of launches goes out as one persistent kernel
(:func:`netpass.runtime.kernels.phase.persistent`): resident work-groups walk each launch's
work-groups in order, with a grid barrier where a launch depends on an earlier one (it reads
or writes a buffer the other wrote, or writes one it read). A launch whose kernel has no
phase form (:func:`~netpass.runtime.kernels.phase.phase_of`) goes out on its own between two
runs.

Why off by default: on the H200 a GPT-2 small decode step of 69 launches becomes 5 persistent
ones, which saves the host about 0.1-0.4 ms per step, but the kernels run slower inside the
persistent one (each resident work-group runs its share of a launch's work-groups one after
the other, with fewer loads in flight than the separate launch had; BENCHMARKS.md, "Stateful
decoding"): 1.59 ms per token against 1.21 ms in the same run.

What one launch takes: its ints and work sizes go into a parameter block (one host write per
launch of the persistent kernel), its buffers become the persistent kernel's arguments (the
same buffer once). The persistent kernel is built per sequence of kernels and pattern of
shared buffers, so the steps of a family build it once; its kernel object, parameter buffer
and barrier words are the request's own.

All work-groups of a persistent kernel must be resident at once (they wait for each other):
on NVIDIA's OpenCL NV_GROUPS_PER_CU per compute unit with the registers capped so that they
fit, one per compute unit of another GPU, one in all on a CPU device (its OpenCL may run
work-groups one after another); and persistent kernels of different requests (queues) of one
engine are ordered on the device (each waits for the last one's event), so two never wait for
each other's work-groups. A work-group that waits too long sets a flag and every work-group
stops; the request reads the flag with its outputs and raises
:class:`~netpass.errors.DeviceError` instead of returning what the step left.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DeviceError
from .kernels.phase import PL, PhaseCall, PhaseForm, persistent, phase_of
from .launcher import KernelHandle, make_kernel
from .length_forms import Work

if TYPE_CHECKING:  # pragma: no cover
    from .network import Network

MIN_PHASES = 2  # fewer gathered launches go out as they are
# launches per persistent kernel on a CPU device: PoCL compiles a kernel's work-group function
# when it first runs it, in time that grows fast with the barriers inside (a tiny GPT-2's
# steps: ten phases did not finish in minutes, four took 100 s, two a few seconds)
CPU_MAX_PHASES = 2
NV_GROUPS_PER_CU = 2   # resident work-groups per NVIDIA multiprocessor (4 were not, on the H200)
NV_REGISTERS = 65536   # 32-bit registers of an NVIDIA multiprocessor (compute capability 5+)
# a launch of more work-items than this many rounds of the resident work-groups goes out on its
# own: the hardware keeps more of its work-groups in flight than the resident ones can (GPT-2's
# LM head, 12 rounds: 90-97 us as a phase, 47 us alone on the H200)
SOLO_ROUNDS = 4


def persistent_steps(config: dict) -> bool:
    """Config ``PERSISTENT_STEPS`` (bool, default False: module docstring)."""
    return bool(config.get("PERSISTENT_STEPS", False))


class _Segment:
    """One built persistent kernel: its calls, kernel handle, parameter block (its ints on the
    host, its device buffer), work sizes, the buffers set on it and, per call, the buffer
    list, int struct and work sizes of the launch last written into the block (the same
    objects: nothing to write again; a moving kernel's struct is rewritten in place, so it is
    always copied). ``waits``: the request's host waits when it last went out (the queue may
    still read the block until the next wait)."""

    __slots__ = ("handle", "calls", "block", "params", "work", "bufs", "phase_bufs",
                 "phase_ints", "phase_work", "waits")

    def __init__(self, handle: Any, calls: list[PhaseCall], size: int, params: Any,
                 work: Work) -> None:
        self.handle, self.calls, self.params, self.work = handle, calls, params, work
        self.block = np.zeros(max(size, 1), np.int32)
        self.bufs: list = []
        self.phase_bufs: list = []
        self.phase_ints: list = [None] * len(calls)
        self.phase_work: list = [None] * len(calls)
        self.waits = -1


class _Draining:
    """A launcher whose enqueues first send the gathered launches (PersistentSteps.draining);
    everything else is the launcher's own."""

    def __init__(self, launcher: Any, drain: Any) -> None:
        self._launcher, self._drain = launcher, drain

    def __getattr__(self, name: str) -> Any:
        return getattr(self._launcher, name)

    def launch(self, h: Any, ln: Any) -> Any:
        self._drain()
        return self._launcher.launch(h, ln)

    def launch_ordered(self, h: Any, ln: Any, after: Any) -> Any:
        self._drain()
        return self._launcher.launch_ordered(h, ln, after)

    def write(self, buffer: Any, offset: int, array: np.ndarray) -> None:
        self._drain()
        self._launcher.write(buffer, offset, array)

    def read(self, array: np.ndarray, buffer: Any, offset: int) -> None:
        self._drain()
        self._launcher.read(array, buffer, offset)


class PersistentSteps:
    """A request's gathering of launches into persistent kernels (module docstring)."""

    def __init__(self, net: Network) -> None:
        self.net = net
        self.launcher = net.launcher  # (the request's own, not a tape step's proxy)
        eng = net.engine
        self.engine = eng
        # resident work-groups (module docstring): on NVIDIA's OpenCL, NV_GROUPS_PER_CU per
        # compute unit with the registers capped so that they fit; one per compute unit on
        # another GPU; one on a CPU device, whose OpenCL may run a launch's work-groups one
        # after the other (PoCL does: they would wait for each other forever)
        self.options: tuple[str, ...] = ()
        cus = max(1, int(eng.device.max_compute_units))
        if not eng.is_gpu:
            self.groups = 1
        elif "cl_nv_compiler_options" in eng.device.extensions:
            self.groups = cus * NV_GROUPS_PER_CU
            self.options = (f"-cl-nv-maxrregcount={NV_REGISTERS // (PL * NV_GROUPS_PER_CU)}",)
        else:
            self.groups = cus
        self.max_phases = 1 << 30 if eng.is_gpu else CPU_MAX_PHASES
        self.solo_items = SOLO_ROUNDS * self.groups * PL if eng.is_gpu else 1 << 62
        self.pending: list = []   # (handle, its buffers, its int struct, work, moving)
        self.segments: dict = {}  # handles -> the segment they last went out as
        self.built: dict = {}     # (handles, buffer pattern, local sizes) -> _Segment
        self.forms: dict = {}     # id(handle) -> (handle, local size, PhaseForm or None)
        self.bar = eng.allocate(16, what="persistent barrier words")
        net.count_alloc(self.bar)
        self._zero_bar()
        self.flag = np.zeros(1, np.int32)
        self.checking = False

    def _zero_bar(self) -> None:
        self.engine.cl.enqueue_copy(self.net.queue, self.bar.buffer, np.zeros(4, np.int32),
                                    is_blocking=True)

    # -- gathering --------------------------------------------------------------------------
    def _form(self, h: Any, work: Any) -> PhaseForm | None:
        """The phase form of ``h``'s kernel for ``work``'s sizes, or None (remembered per
        handle and local size)."""
        entry = self.forms.get(id(h))
        if entry is not None and entry[0] is h and entry[1] == work.lws:
            return entry[2]
        form = phase_of(h.source) if h.source is not None else None
        if form is not None and (
                len(work.gws) != 1 if form.mode == "item" else
                work.lws is None or int(np.prod(work.lws)) != PL):
            form = None
        self.forms[id(h)] = (h, work.lws, form)
        return form

    def add(self, h: Any, work: Any, ints: Any = None) -> None:
        """Gather launch ``work`` of ``h`` with the arguments set on it (``ints``: the int
        struct it set, an array the caller rewrites in place at its next step), or launch it
        now when its kernel has no phase form or it is large (SOLO_ROUNDS). What is gathered
        goes out within the step, so the objects it names still hold its values then."""
        items = 1
        for g in work.gws:
            items *= g
        if items > self.solo_items or self._form(h, work) is None:
            self.drain()
            self.launcher.launch(h, work)
            return
        if len(self.pending) >= self.max_phases:
            self.drain()
        self.pending.append((h, h.bufs, h.ints if ints is None else ints, work, ints is not None))

    def drain(self) -> None:
        """Send what was gathered: as one persistent kernel, or as it is when short (its
        kernels hold the arguments it was gathered with)."""
        pending = self.pending
        if not pending:
            return
        self.pending = []
        if len(pending) < MIN_PHASES:
            launch = self.launcher.launch
            for h, _, _, work, _ in pending:
                launch(h, work)
            return
        self._launch(self._segment(pending), pending)

    def draining(self, launcher: Any) -> _Draining:
        """``launcher`` seen through a proxy that sends what was gathered before each launch,
        write or read of its own (a tape step's other uses of the queue)."""
        return _Draining(launcher, self.drain)

    # -- building -----------------------------------------------------------------------------
    def _segment(self, pending: list) -> _Segment:
        """The segment for ``pending``: the one these kernels went out as last time when their
        buffer lists are the same, else the one for their pattern of shared buffers (built
        when new), its buffer arguments set."""
        handles = tuple([p[0] for p in pending])
        seg = self.segments.get(handles)
        if seg is not None and all(p[1] is b for p, b in zip(pending, seg.phase_bufs)):
            return seg
        unique: list = []
        index: dict[int, int] = {}
        rows = []
        for _, bufs, _, _, _ in pending:
            row = []
            for b in bufs:
                k = index.get(id(b))
                if k is None:
                    k = index[id(b)] = len(unique)
                    unique.append(b)
                row.append(k)
            rows.append(tuple(row))
        key = (handles, tuple(rows), tuple(p[3].lws for p in pending))
        seg = self.built.get(key)
        if seg is None:
            seg = self.built[key] = self._build(pending, rows, len(unique))
        self.segments[handles] = seg
        seg.phase_bufs = [p[1] for p in pending]
        kernel = seg.handle.kernel
        for i, b in enumerate(unique):
            if i >= len(seg.bufs) or seg.bufs[i] is not b:
                kernel.set_arg(2 + i, b)
        seg.bufs = unique
        return seg

    def _build(self, pending: list, rows: list, n_buffers: int) -> _Segment:
        """A persistent kernel for ``pending`` (module docstring): a grid barrier before a
        launch that writes what the launches since the last barrier read or wrote, or reads
        what they wrote."""
        eng = self.engine
        calls: list[PhaseCall] = []
        suffixes: dict[int, str] = {}
        written: set[int] = set()
        read: set[int] = set()
        at = local = 0
        for (h, _, _, work, _), row in zip(pending, rows):
            form = self._form(h, work)
            assert form is not None
            suffix = suffixes.setdefault(id(form), f"s{len(suffixes)}")
            writes = {a for a, w in zip(row, form.writes) if w}
            reads = set(row) - writes
            sync = bool(writes & (written | read) or reads & written)
            if sync:
                written, read = set(), set()
            written |= writes
            read |= reads
            calls.append(PhaseCall(form, suffix, tuple(work.lws or (1,)), row, at, sync))
            at += form.n_ints + len(work.gws)
            if form.mode == "group":
                need = h.kernel.get_work_group_info(
                    eng.cl.kernel_work_group_info.LOCAL_MEM_SIZE, eng.device)
                local = max(local, int(need) + 16 * form.local_arrays)
        src = persistent(calls, n_buffers, local, eng.mma == "ptx")
        program = eng.build(src.text, self.net.stats, self.options)
        handle = KernelHandle(make_kernel(eng.cl, program, src.name), src)
        params = eng.allocate(4 * max(at, 1), what="a persistent parameter block")
        self.net.count_alloc(params)
        handle.kernel.set_arg(0, params.buffer)
        handle.kernel.set_arg(1, self.bar.buffer)
        return _Segment(handle, calls, at, params, Work((self.groups * PL,), (PL,)))

    # -- launching ----------------------------------------------------------------------------
    def _launch(self, seg: _Segment, pending: list) -> None:
        """The parameter block brought up to date and written, the persistent kernel enqueued
        after the engine's last one when that came from another queue."""
        net = self.net
        waits = net.stats["host_waits"]
        if seg.waits == waits:  # (its last write may not have run yet: a block of its own)
            seg.block = seg.block.copy()
        block, last_ints, last_work = seg.block, seg.phase_ints, seg.phase_work
        for i, (c, (_, _, ints, work, moving)) in enumerate(zip(seg.calls, pending)):
            n = c.form.n_ints
            if n and (moving or ints is not last_ints[i]):
                block[c.at:c.at + n] = ints
                last_ints[i] = ints
            if work is not last_work[i]:
                block[c.at + n:c.at + n + len(work.gws)] = work.gws
                last_work[i] = work
        seg.waits = waits
        launcher = self.launcher
        launcher.write(seg.params.buffer, 0, block)
        eng = self.engine
        with eng.persistent_lock:
            last = eng.persistent_last
            after = last[1] if last is not None and last[0] is not net.queue else None
            eng.persistent_last = (net.queue,
                                   launcher.launch_ordered(seg.handle, seg.work, after))
        stats = net.stats
        stats["kernels_enqueued"] += 1 - len(pending)  # (the tape counts each as enqueued)
        stats["persistent_launches"] += 1
        stats["persistent_phases"] += len(pending)
        self.checking = True

    # -- the stop flag ------------------------------------------------------------------------
    def before_wait(self) -> None:
        """Before the request waits for its outputs: the stop flag is read with them."""
        if self.checking:
            self.net.launcher.read(self.flag, self.bar.buffer, 8)

    def after_wait(self) -> None:
        """After the wait: raise where a persistent kernel stopped (the step's results are
        not whole); the barrier words are zeroed for the next one."""
        if not self.checking:
            return
        self.checking = False
        self.net.queue.finish()
        if self.flag[0]:
            self.flag[0] = 0
            self._zero_bar()
            raise DeviceError(
                "a persistent decode step stopped: its work-groups were not all resident on "
                f"{self.engine.describe()} (another program holding the device?), so its "
                "outputs are incomplete; compile with config PERSISTENT_STEPS False to launch "
                "its kernels one by one")
