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

from typing import TYPE_CHECKING, Any

from .length_plan import LinKernel, LinView, general_step, kernel_step, view_step
from .step_plan import CHECKED, IMPL_BUFFER, WEIGHTS, GeneralEntry, KernelEntry, ViewEntry

if TYPE_CHECKING:  # pragma: no cover
    from .length_plan import LengthFamily
    from .network import Network

FIXED, MOVING, VIEW, MOVING_VIEW, STATE, GENERAL, GROUP = range(7)
FIRST_FLUSH = 4    # primitives after which a step's first kernels go to the device
FLUSH_EVERY = 16   # then the queue is flushed every so many primitives


def _init_only(net: "Network") -> set[int]:
    """Indices of the nodes that only feed the init inputs of ReadValues whose variables are
    set (their values are not read while the variable holds a state)."""
    state = net.state
    skip: set[int] = set()
    for n in reversed(net.program.exec_order):
        users = [u for lst in n.users for u, _ in lst]
        if not users or n.is_output or not n.in_shape_of_subgraph:
            continue
        if all(u.index in skip or (u.kind == "ReadValue"
                                   and state.vars[u.state_var].shape is not None)
               for u in users):
            skip.add(n.index)
    return skip


class Tape:
    """One request's record of one family's replay (module docstring)."""

    __slots__ = ("family", "items", "counts", "general")

    def __init__(self, net: "Network", family: "LengthFamily") -> None:
        self.family = family
        skip = _init_only(net)
        self.items: list = []
        for e in family.entries:
            if e.index in skip:
                continue
            inst = net.insts[e.index]
            te = type(e)
            if te is KernelEntry:
                self.items.append(self._fixed(net, inst, e))
            elif te is LinKernel:
                self.items.append([MOVING, inst, e])
            elif te is ViewEntry:
                self.items.append([VIEW, inst, e, net.insts[e.src].outputs[e.k]])
            elif te is LinView:
                self.items.append([MOVING_VIEW, inst, e])
            elif inst.state_role is not None:
                self.items.append([STATE, inst, e])
            else:
                self.items.append([GENERAL, inst, e])
        self.counts = [0, 0]
        self._group(net, family)
        # the primitives that take the per-primitive path (their flags are reset after)
        self.general = [item[1].node.index for item in self.items if item[0] in (STATE, GENERAL)]

    def _group(self, net: "Network", family: "LengthFamily") -> None:
        """Runs of fixed kernel items that read only what kernels, views, variables and
        inputs leave on the device (never a host value) become GROUP items: launched as they
        are while no buffer of the request changed (``Network.mem_epoch``)."""
        device = {e.index for e in family.entries if type(e) is not GeneralEntry}
        device.update(n.index for n in net.program.nodes if n.kind in ("Parameter", "Constant"))
        device.update(i.node.index for i in net.insts if i.state_role is not None)
        items: list = []
        run: list = []
        for item in self.items:
            if item[0] == FIXED and all(src.node.index in device for src, _, _, _ in item[4]):
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
        clears = [(m[1].host_valid, [False] * len(m[1].host_valid)) for m in members]
        return [GROUP, members[0][1], members, None, -1, clears]

    @staticmethod
    def _fixed(net: "Network", inst: Any, e: KernelEntry) -> list:
        """A kernel primitive that does not move: what its launches set and read."""
        insts = net.insts
        launches = [(h, ln[0], h.bufs, h.ints) for h, ln in zip(inst.kernels, e.launches)]
        checks = []
        for _, _, _, _, slots in e.launches:
            for _, _, si, k, _ in slots:
                if si == WEIGHTS or si == IMPL_BUFFER or si == e.index:
                    continue
                src = insts[si if si >= 0 else CHECKED - si]
                t = src.outputs[k]
                if t is not None:
                    checks.append((src, k, t.alloc, t.offset))
        owns = tuple(inst.own)
        return [FIXED, inst, e, launches, tuple(checks), owns]

    def _fixed_step(self, net: "Network", item: list, t: int) -> None:
        """A fixed item: launched as recorded when its kernels hold the arguments it set, its
        sources are the buffers and offsets it read and its own buffers are still its own;
        else its entry is replayed and recorded again."""
        launch = net.launcher.launch
        _, inst, e, launches, checks, owns = item
        ok = inst.impl is e.impl
        if ok:
            for h, _, bufs, ints in launches:
                if h.bufs is not bufs or h.ints is not ints:
                    ok = False
                    break
        if ok:
            for src, k, alloc, offset in checks:
                tensor = src.outputs[k]
                if tensor is None or tensor.alloc is not alloc or tensor.offset != offset \
                        or not src.device_valid[k]:
                    ok = False
                    break
        if ok and tuple(inst.own) == owns:
            for h, lw, _, _ in launches:
                launch(h, lw)
            hv = inst.host_valid  # (the outputs read last step are stale now)
            for i in range(len(hv)):
                hv[i] = False
        else:
            kernel_step(net, inst, e, t, self.counts)
            item[:] = self._fixed(net, inst, e)
        inst.stamp = net.epoch

    def run(self, net: "Network", t: int) -> None:
        """One step at ``t``. The queue is flushed after the first FIRST_FLUSH primitives and
        then every FLUSH_EVERY: a decode step is a few dozen short kernels, and the device
        should start on them while the host enqueues the rest."""
        launch = net.launcher.launch
        flush = net.queue.flush
        state_step = net.state.step
        counts = self.counts
        counts[0] = counts[1] = 0
        epoch = net.epoch
        count = 0
        flush_at = FIRST_FLUSH
        for item in self.items:
            kind = item[0]
            inst = item[1]
            if kind == GROUP:
                if item[4] == net.mem_epoch:
                    for h, lw in item[3]:
                        launch(h, lw)
                    for hv, cleared in item[5]:  # (outputs read last step are stale now)
                        hv[:] = cleared
                else:
                    members = item[2]
                    for member in members:
                        self._fixed_step(net, member, t)
                    item[3] = [(h, lw) for m in members for h, lw, _, _ in m[3]]
                    item[4] = net.mem_epoch
                count += len(item[2])
                if count >= flush_at:
                    flush_at = count + FLUSH_EVERY
                    flush()
                continue
            if kind == FIXED:
                self._fixed_step(net, item, t)
            elif kind == MOVING:
                kernel_step(net, inst, item[2], t, counts)
            elif kind == VIEW:
                e = item[2]
                src = net.insts[e.src]
                tensor = src.outputs[e.k]
                if tensor is not item[3] or not src.device_valid[e.k] \
                        or inst.out_shapes is not e.out:
                    view_step(net, inst, e, t)
                    item[3] = src.outputs[e.k]
            elif kind == MOVING_VIEW:
                view_step(net, inst, item[2], t)
            elif kind == STATE:
                state_step(inst)
            else:
                general_step(inst)
            inst.stamp = epoch
            count += 1
            if count >= flush_at:
                flush_at = count + FLUSH_EVERY
                flush()
        self.family.count(net.stats, counts)
