"""A request's tape of a length family: the family's replay with what did not change since the
request's previous step of it left out.

A decode step of a length family (:mod:`~netpass.runtime.length_plan`) moves only a few
primitives (attention over the grown cache, the mask, the variables' views); the rest launch
the same kernels with the same arguments on the same buffers as at the step before. The
family's entry-by-entry replay still checks every buffer, fills every argument slot and
compares them with what the kernel holds: several microseconds of Python per launch, more
than NVIDIA's enqueue itself.

The tape is recorded after such a replay. Per kernel primitive that did not move it keeps
the kernel handles with the argument lists it set, the buffers and offsets its argument slots
read, and its own buffers; a step re-launches it as is when all of those are still the same
objects (identity checks: nothing else set other arguments on its kernels, no source was
reallocated, moved or left invalid on the device), else replays that one entry and records it
again. Views of unchanged tensors are left in place. Primitives that move run the family's
entry code; the variables' reads, appends and assigns take the state's own short steps
(:meth:`~netpass.runtime.state.VariableStore.step`); a variable's init sub-graph, which a set
variable never reads, is not run at all. The counters advance as the replay's would.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..ops.state import ReadValue
from .length_forms import Work, work_at, work_fn
from .length_steps import (
    LinHost,
    LinKernel,
    LinView,
    general_step,
    host_stepper,
    kernel_step,
    shape_step,
    view_step,
)
from .memory import Tensor, reusable
from .step_plan import (
    CHECKED,
    FIRST_FLUSH,
    IMPL_BUFFER,
    WEIGHTS,
    GeneralEntry,
    KernelEntry,
    ShapeEntry,
    ViewEntry,
)

if TYPE_CHECKING:  # pragma: no cover
    from .launcher import Launcher
    from .length_plan import LengthFamily
    from .network import Network

FIXED, MOVING, VIEW, MOVING_VIEW, STATE, GENERAL, GROUP, HOST, SHAPE = range(9)
FLUSH_EVERY = 16   # then the queue is flushed every so many primitives


def _init_only(net: Network) -> set[int]:
    """Indices of the nodes that only feed the init inputs of ReadValues whose variables are
    set (their values are not read while the variable holds a state)."""
    state = net.state
    skip: set[int] = set()
    for n in reversed(net.program.exec_order):
        users = [u for lst in n.users for u, _ in lst]
        if not users or n.is_output or not n.in_shape_of_subgraph:
            continue
        if all(u.index in skip or (u.is_a(ReadValue) and u.state_var is not None
                                   and state.vars[u.state_var].shape is not None)
               for u in users):
            skip.add(n.index)
    return skip


class Tape:
    """One request's record of one family's replay (module docstring)."""

    __slots__ = ("family", "items", "counts", "general", "device", "work_fns", "views")

    def __init__(self, net: Network, family: LengthFamily) -> None:
        self.family = family
        skip = _init_only(net)
        entries = family.entries or []
        # the nodes whose outputs a step leaves on the device (never a host value to upload)
        self.device = {e.index for e in entries
                       if type(e) not in (GeneralEntry, LinHost, ShapeEntry)}
        self.device.update(n.index for n in net.program.nodes
                           if n.is_parameter or n.is_constant)
        self.device.update(i.node.index for i in net.insts if i.state_role is not None)
        self.views = {e.index: e for e in entries if type(e) in (ViewEntry, LinView)}
        self.items: list = []
        for e in entries:
            if e.index in skip:
                continue
            inst = net.insts[e.index]
            te = type(e)
            if te is KernelEntry:
                self.items.append(self._fixed(net, inst, e))
            elif te is LinKernel:
                self.items.append([MOVING, inst, e, self._moving(net, e), None])
            elif te is ViewEntry:
                src = net.insts[e.src]
                self.items.append([VIEW, inst, e, src.outputs[e.k], src])
            elif te is LinView:
                self.items.append([MOVING_VIEW, inst, e])
            elif te is LinHost:
                self.items.append([HOST, inst, e, host_stepper(inst, e)])
            elif te is ShapeEntry:
                self.items.append([SHAPE, inst, e])
            elif inst.state_role is not None:
                self.items.append([STATE, inst, e, net.state.stepper(inst)])
            else:
                pre = [net.insts[i] for i in family.pre.get(e.index, ())]
                self.items.append([GENERAL, inst, e, pre])
        self.counts = [0, 0]
        self.work_fns: dict = {}  # (work forms, base, slope) -> the moving kernels' work_fn
        self._group(net, family)
        # the primitives that may take the per-primitive path (their flags are reset after;
        # host_step sets none: an inference leaves every flag reset)
        self.general = [item[1].node.index for item in self.items
                        if item[0] in (STATE, GENERAL)]

    def _group(self, net: Network, family: LengthFamily) -> None:
        """Runs of fixed kernel items that read only what kernels, views, variables and
        inputs leave on the device (never a host value) become GROUP items: launched as they
        are while no buffer of the request changed (``Network.mem_epoch``). Fixed views of
        such kernels' outputs (or of such views) join the runs: while no buffer changed,
        their tensors stand as they are."""
        device = self.device
        steady: set[int] = set()  # grouped kernels and the views of their outputs
        items: list = []
        run: list = []
        for item in self.items:
            if item[0] == FIXED and all(src.node.index in device for src, _, _, _ in item[4]):
                steady.add(item[1].node.index)
                run.append(item)
                continue
            if item[0] == VIEW and item[4].node.index in steady:
                steady.add(item[1].node.index)
                run.append(item)
                continue
            if run:
                items.append(self._group_item(run))
                run = []
            items.append(item)
        if run:
            items.append(self._group_item(run))
        self.items = items

    @staticmethod
    def _group_item(members: list) -> list:
        kernels = [m for m in members if m[0] == FIXED]
        # (the views too: a host op of the per-primitive path may have read one last step)
        clears = [(m[1].host_valid, [False] * len(m[1].host_valid)) for m in members]
        return [GROUP, members[0][1], members, None, -1, clears, len(kernels)]

    @staticmethod
    def _view_item(net: Network, item: list, t: int) -> None:
        """A fixed view: its entry replayed where its source's tensor changed or left the
        device (or the per-primitive path gave it other shapes)."""
        inst = item[1]
        if not Tape._view_holds(item):
            e, src = item[2], item[4]
            view_step(net, inst, e, t)
            item[3] = src.outputs[e.k]
        else:  # (its source wrote this step's values: a host copy read last step is stale)
            hv = inst.host_valid
            for i in range(len(hv)):
                hv[i] = False

    @staticmethod
    def _view_holds(item: list) -> bool:
        """A fixed view's source still holds the tensor it viewed, on the device, and the
        per-primitive path gave it no other shapes."""
        inst, e, src = item[1], item[2], item[4]
        return src.outputs[e.k] is item[3] and src.device_valid[e.k] and inst.out_shapes is e.out

    @staticmethod
    def _fixed(net: Network, inst: Any, e: KernelEntry) -> list:
        """A kernel primitive that does not move: what its launches set and read."""
        insts = net.insts
        launches = [(h, ln[0], h.bufs, h.ints) for h, ln in zip(inst.kernels, e.launches)]
        checks = []
        for _, _, _, _, slots in e.launches:
            for _, _, si, k, _ in slots:
                if si in (WEIGHTS, IMPL_BUFFER) or si == e.index:
                    continue
                src = insts[si if si >= 0 else CHECKED - si]
                t = src.outputs[k]
                if t is not None:
                    checks.append((src, k, t.alloc, t.offset))
        owns = tuple(inst.own)
        return [FIXED, inst, e, launches, tuple(checks), owns]

    @staticmethod
    def _moving(net: Network, e: LinKernel) -> list | None:
        """A moving kernel's launches with their argument slots resolved to the source
        primitives (and the offsets' forms as (base, slope)), its impl buffers (the
        request's, alike over the steps: length_plan) and its weights (an attention's output
        projection: attention_proj) in place; None where the entry needs the general replay
        (fed values, weights at offsets that move)."""
        if e.feeds:
            return None
        insts = net.insts
        launches = []
        for lw, buffers, iform, slots, work in e.launches:
            resolved = []
            for b, i, si, k, off in slots:
                if si == IMPL_BUFFER:
                    buffers = buffers.copy()
                    buffers[b] = net.impl_buffers(e.impl)[k].buffer
                    continue
                weights = insts[e.index].weights_tensor if si == WEIGHTS else None
                if weights is not None and off.const is not None:  # (its offset: in iform)
                    buffers = buffers.copy()
                    buffers[b] = weights.alloc.buffer
                    continue
                if si == WEIGHTS or off.const is None and off.fn is None:
                    return None
                src = insts[si if si >= 0 else CHECKED - si]
                ob, os = (off.const, 0) if off.const is not None else (off.base[0], off.slope[0])
                resolved.append((b, i, src, k, ob, os))
            launches.append((lw, buffers, iform, resolved, work))
        return launches

    @staticmethod
    def _moving_step(net: Network, inst: Any, e: LinKernel, launches: list, t: int) -> None:
        """A moving kernel at ``t`` (length_steps.kernel_step's replay of a LinKernel, lean):
        its outputs' shapes and buffers, its arguments, work sizes and launches."""
        impl = e.impl
        kernels = inst.kernels_of.get(impl.sources)
        inst.kernels = kernels if kernels is not None else inst.kernels_for(impl)
        inst.impl = None  # (the per-primitive path rebuilds it when it runs this again)
        inst.in_shapes, inst.values = None, {}
        if e.skippable:
            inst.can_be_optimized = False
        if e.out.const is None or inst.out_shapes is not e.out.const or None in inst.own:
            out = e.out.at(t)
            inst.out_shapes = out
            need = e.need.at(t)
            own, cap = inst.own, inst.capacity
            if all(reusable(own[i], cap[i], n) for i, n in enumerate(need)):
                record, outputs, keys, dtypes = net.predictor.record, inst.outputs, e.keys, e.dtypes
                for i, shape in enumerate(out):
                    record(keys[i], shape)
                    outputs[i] = Tensor(own[i], 0, shape, dtypes[i])
            else:
                inst.realloc_if_needed()
        launcher = net.launcher
        for h, (lw, buffers, iform, slots, work) in zip(inst.kernels, launches):
            ints = list(iform.at(t))
            buffers = buffers.copy()
            for b, i, src, k, ob, os in slots:
                tensor = src.outputs[k]
                if tensor is None or not src.device_valid[k]:
                    tensor = net.device_tensor(src, k)
                buffers[b] = tensor.alloc.buffer
                ints[i] = tensor.offset + ob + os * t
            launcher.set_args(h, buffers, ints)
            gws = work_at(work, ints, t)
            w = lw if gws == lw.gws else e.works.get(gws)
            if w is None:
                w = e.works[gws] = Work(gws, lw.lws)
            launcher.launch(h, w)
        dv, hv = inst.device_valid, inst.host_valid
        for i in range(len(dv)):
            dv[i] = True
            hv[i] = False

    def _offset_slope(self, index: int, k: int) -> int:
        """How far the offset of output ``k`` of node ``index`` moves per unit of ``t``: the
        moving views under it (a slice of a table's last ``t`` columns: ALiBi's bias), 0 for
        a tensor in its own buffer."""
        slope = 0
        e = self.views.get(index)
        while e is not None:
            if type(e) is LinView:
                slope += e.views.at(1)[k][0] - e.views.at(0)[k][0]
            k = e.k
            e = self.views.get(e.src)
        return slope

    def _fast(self, net: Network, inst: Any, e: LinKernel, launches: list,
              t: int) -> tuple | None:
        """After a moving kernel's step: its arguments as ``base + slope * t`` with its
        sources' offsets folded in, valid while no buffer of the request changes and its
        outputs fit their buffers (up to ``tmax``): (the request's mem_epoch, tmax, per
        launch (handle, work sizes, buffers set, the moving ints as (position, base, slope),
        int32 buffer holding the others' values, its C view, its work sizes as a function of
        t, their Work where they do not move), the sources holding a host value a step
        uploads, as (source, output, the allocation and offset the upload must land at
        again)). None where it does not hold (a shrinking output, no reusable buffer). A
        step writes only the moving ints (Python ints into the C view: a numpy operation on
        a few ints costs more than the writes)."""
        read: dict = {}  # (source, output) -> (source, output, allocation, offset) read
        for _, _, _, slots, _ in launches:
            for _, _, src, k, _, _ in slots:
                read[(src.node.index, k)] = (src, k, src.outputs[k].alloc, src.outputs[k].offset)
        uploads = tuple(r for key, r in read.items() if key[0] not in self.device)
        sources = tuple(r for key, r in read.items() if key[0] in self.device)
        tmax = 1 << 62
        if e.need.const is None:
            for i, (nb, ns) in enumerate(zip(e.need.base, e.need.slope)):
                if ns < 0 or inst.own[i] is None:
                    return None
                if ns:
                    tmax = min(tmax, (inst.capacity[i] - nb) // ns)
        fast = []
        for h, (lw, _, iform, slots, work) in zip(inst.kernels, launches):
            if iform.const is not None:
                base, slope = list(iform.const), [0] * len(iform.const)
            else:
                base, slope = list(iform.base), list(iform.slope)
            for _, i, src, k, ob, os in slots:
                moves = self._offset_slope(src.node.index, k)
                base[i], slope[i] = src.outputs[k].offset + ob - moves * t, os + moves
            buf = np.array(base, np.int32)
            moving = tuple((i, b, sl) for i, (b, sl) in enumerate(zip(base, slope)) if sl)
            view = (ctypes.c_int32 * len(base)).from_address(buf.ctypes.data)  # (buf kept below)
            w = None  # (work sizes that do not move: their Work once)
            if all(d[0] in ("c", "k") for d in work):
                gws = tuple(d[1] for d in work)
                w = lw if gws == lw.gws else Work(gws, lw.lws)
            key = (id(work), tuple(base), tuple(slope))  # (the family holds ``work``)
            gws_at = self.work_fns.get(key)
            if gws_at is None:  # (generated once: a fast path is made again after a change)
                gws_at = self.work_fns[key] = work_fn(work, base, slope)
            fast.append((h, lw, h.bufs, moving, buf, view, gws_at, w))
        held = (inst.kernels, tuple(inst.own), tuple(inst.capacity), tuple(inst.outputs), sources)
        return (net.mem_epoch, tmax, fast, uploads, held)

    @staticmethod
    def _holds(inst: Any, e: LinKernel, held: tuple) -> bool:
        """After a buffer change elsewhere in the request (``mem_epoch`` moved: an input, an
        upload or another primitive's output grew, every few steps of a decoding loop):
        whether a moving kernel's fast path still stands: the primitive as its last step
        left it (its kernels, its own buffers and output tensors, nothing of the
        per-primitive path since) and its device sources the buffers and offsets its
        arguments were folded from. Then only the epoch is renewed, instead of a full step
        and a new fast path."""
        kernels, owns, capacity, outputs, sources = held
        if inst.kernels is not kernels or inst.impl is not None or inst.in_shapes is not None \
                or (e.skippable and inst.can_be_optimized is not False) \
                or (e.out.const is not None and inst.out_shapes is not e.out.const):
            return False
        for a, b in zip(inst.own, owns):
            if a is not b:
                return False
        for a, b in zip(inst.outputs, outputs):
            if a is not b:
                return False
        return tuple(inst.capacity) == capacity and Tape._read_as_recorded(sources)

    @staticmethod
    def _read_as_recorded(sources: tuple) -> bool:
        """Each (source, output, allocation, offset) still holds a valid device tensor at the
        allocation and offset a recorded launch reads."""
        for src, k, alloc, offset in sources:
            tensor = src.outputs[k]
            if tensor is None or tensor.alloc is not alloc or tensor.offset != offset \
                    or not src.device_valid[k]:
                return False
        return True

    @staticmethod
    def _uploaded(net: Network, uploads: tuple) -> bool:
        """The host values a fast moving kernel reads uploaded for this step; whether each
        landed where its arguments say (else the kernel takes its full step)."""
        for src, k, alloc, offset in uploads:
            tensor = src.outputs[k]
            if tensor is None or not src.device_valid[k]:
                tensor = net.device_tensor(src, k)
            if tensor is None or tensor.alloc is not alloc or tensor.offset != offset:
                return False
        return True

    def _fixed_step(self, net: Network, item: list, t: int, launch: Any) -> None:
        """A fixed item: launched (through ``launch``) as recorded when its kernels hold the
        arguments it set, its sources are the buffers and offsets it read and its own buffers
        are still its own; else its entry is replayed and recorded again."""
        if self._fixed_holds(item):
            for h, lw, _, _ in item[3]:
                launch(h, lw)
            hv = item[1].host_valid  # (the outputs read last step are stale now)
            for i in range(len(hv)):
                hv[i] = False
        else:
            inst, e = item[1], item[2]
            kernel_step(net, inst, e, t, self.counts)
            item[:] = self._fixed(net, inst, e)

    @staticmethod
    def _fixed_holds(item: list) -> bool:
        """A fixed item's kernels hold the arguments it set, its sources are the buffers and
        offsets it read and its own buffers are still its own."""
        _, inst, e, launches, checks, owns = item
        if inst.impl is not e.impl:
            return False
        for h, _, bufs, ints in launches:
            if h.bufs is not bufs or h.ints is not ints:
                return False
        return Tape._read_as_recorded(checks) and tuple(inst.own) == owns

    def current(self, net: Network) -> bool:
        """Whether every grouped run and moving kernel's fast path stands on the request's
        buffers as they are now. A step that changed a buffer midway (an output outgrew its
        buffer) leaves those it met before the change on the older ``mem_epoch``: they are
        checked again as the next step would check them, and renewed where they hold."""
        epoch = net.mem_epoch
        for item in self.items:
            kind = item[0]
            if kind == GROUP and item[4] != epoch:
                members = item[2]
                for m in members:
                    if not (self._fixed_holds(m) if m[0] == FIXED else self._view_holds(m)):
                        return False
                item[3] = [(h, lw) for m in members if m[0] == FIXED for h, lw, _, _ in m[3]]
                item[4] = epoch
            elif kind == MOVING:
                fast = item[4]
                if fast is None:
                    return False
                if fast[0] != epoch:
                    for f in fast[2]:
                        if f[0].bufs is not f[2]:
                            return False
                    if not self._holds(item[1], item[2], fast[4]):
                        return False
                    item[4] = (epoch, *fast[1:])
        return True

    def run(self, net: Network, t: int) -> None:
        """One step at ``t``. The queue is flushed after the first FIRST_FLUSH primitives and
        then every FLUSH_EVERY: a decode step is a few dozen short kernels, and the device
        should start on them while the host enqueues the rest. With persistent steps
        (:mod:`~netpass.runtime.persistent`) the kernels of the fast paths are gathered
        between those points and go out as persistent kernels there."""
        persistent = net.persistent_for_tape()
        launcher = net.launcher
        launch: Callable[..., Any]
        if persistent is not None:  # (gathered into persistent kernels: runtime.persistent)
            launch, drain = persistent.add, persistent.drain
            flush = drain
            # every other use of the queue sends what was gathered first
            net.launcher = cast("Launcher", persistent.draining(launcher))
        else:
            launch, drain = launcher.launch, None
            flush = net.queue.flush
        counts = self.counts
        counts[0] = counts[1] = 0
        try:
            self._run(net, t, launch, drain is not None, flush, launcher.set_int_view)
            if drain is not None:
                drain()
        finally:
            net.launcher = launcher
            if persistent is not None:
                persistent.pending.clear()
        self.family.count(net.stats, counts)

    def _run(self, net: Network, t: int, launch: Any, gathered: bool, flush: Any,
             set_ints: Any) -> None:
        """The items of one step (:meth:`run`); ``launch`` takes the fast paths' launches
        (``gathered``: it takes the int struct too, whose array the next step rewrites)."""
        counts = self.counts
        epoch = net.epoch  # (stamps: for the general path's own checks)
        count = 0
        flush_at = FIRST_FLUSH
        for item in self.items:
            kind = item[0]
            inst = item[1]
            if kind == VIEW:  # (the kinds by how often a decode step meets them)
                self._view_item(net, item, t)
                continue
            if kind == STATE:
                item[3]()
                continue
            if kind == HOST:
                item[3](t)
                continue
            if kind == SHAPE:
                shape_step(inst, item[2])
                continue
            if kind == GROUP:
                if item[4] == net.mem_epoch:
                    for h, lw in item[3]:
                        launch(h, lw)
                    for hv, cleared in item[5]:  # (outputs read last step are stale now)
                        hv[:] = cleared
                else:
                    members = item[2]
                    for member in members:
                        if member[0] == FIXED:
                            self._fixed_step(net, member, t, launch)
                        else:
                            self._view_item(net, member, t)
                    item[3] = [(h, lw) for m in members if m[0] == FIXED for h, lw, _, _ in m[3]]
                    item[4] = net.mem_epoch
                count += item[6]
            elif kind == MOVING:
                e = item[2]
                fast = item[4]
                ok = fast is not None and t <= fast[1]
                if ok:
                    for f in fast[2]:
                        if f[0].bufs is not f[2]:
                            ok = False
                            break
                if ok and fast[3]:
                    ok = self._uploaded(net, fast[3])
                if ok and fast[0] != net.mem_epoch:  # (after the uploads: one may allocate)
                    ok = self._holds(inst, e, fast[4])
                    if ok:
                        fast = item[4] = (net.mem_epoch, *fast[1:])
                if ok:
                    # (nothing moved but t: the moving ints as base + slope * t, one struct)
                    for h, lw, _, moving, buf, view, gws_at, w in fast[2]:
                        for i, b, sl in moving:
                            view[i] = b + sl * t
                        set_ints(h, view)
                        if w is None:
                            gws = gws_at(t)
                            w = lw if gws == lw.gws else e.works.get(gws)
                            if w is None:
                                w = e.works[gws] = Work(gws, lw.lws)
                        if gathered:
                            launch(h, w, buf)
                        else:
                            launch(h, w)
                    if e.out.const is None:  # (the same buffers: their views' shapes)
                        out = inst.out_shapes = e.out.at(t)
                        for tensor, shape in zip(inst.outputs, out):
                            tensor.shape = shape
                    hv = inst.host_valid
                    for i in range(len(hv)):
                        hv[i] = False
                elif item[3] is not None:
                    self._moving_step(net, inst, e, item[3], t)
                    item[4] = self._fast(net, inst, e, item[3], t)
                else:
                    kernel_step(net, inst, e, t, counts)
                count += 1
            elif kind == FIXED:
                self._fixed_step(net, item, t, launch)
                count += 1
            elif kind == MOVING_VIEW:
                view_step(net, inst, item[2], t)
                continue
            else:
                if kind == GENERAL:
                    for view in item[3]:  # (elided views it reads: length_plan)
                        general_step(view)
                        view.stamp = epoch
                general_step(inst)
                inst.stamp = epoch
            if count >= flush_at:  # (counting kernel primitives)
                flush_at = count + FLUSH_EVERY
                flush()
