"""The moving entries of a length family (:mod:`~netpass.runtime.length_plan`) and how any
entry runs at a length ``t``: a kernel whose shapes and arguments move (:class:`LinKernel`), a
view that moves (:class:`LinView`), a host value set from its form (:class:`LinHost`), and
the step functions that replay each kind of entry (shared by the family's entry-by-entry
replay and a request's tape, :mod:`~netpass.runtime.length_tape`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .invariants import check_read, check_write
from .length_forms import Form, GrowForm, Work, fit_work, work_at
from .memory import Tensor, reusable
from .step_plan import CHECKED, IMPL_BUFFER, WEIGHTS, KernelEntry, ShapeEntry, ViewEntry

if TYPE_CHECKING:  # pragma: no cover
    from .impls import Impl
    from .network import Network


class LinKernel:
    """A kernel primitive whose shapes and arguments move with ``t`` (:meth:`fit`)."""

    __slots__ = ("index", "out", "need", "keys", "dtypes", "skippable", "weights", "single",
                 "impl", "launches", "feeds", "values", "works")

    def __init__(self, a: KernelEntry, impl: Impl, forms: tuple[Form, Form, Form],
                 launches: list) -> None:
        self.index = a.index
        self.impl = impl  # (the later sample's: any impl of these sources has the same kernels)
        self.keys, self.dtypes, self.skippable = a.keys, a.dtypes, a.skippable
        self.weights, self.single = a.weights, a.single
        self.out, self.need, self.values = forms
        self.launches = launches  # (launch, buffers, ints form, slots with offset forms, work)
        self.feeds = False
        self.works: dict = {}  # work sizes met -> their Work (C arrays made once)

    @staticmethod
    def fit(a: KernelEntry, b: KernelEntry, ta: int, tb: int) -> LinKernel | None:
        """The entry through ``a`` at ``ta`` and ``b`` at ``tb``, or None where a field does
        not move affinely."""
        out = Form.fit(a.out, b.out, ta, tb)
        need = Form.fit(a.need, b.need, ta, tb)
        values = Form.fit(a.values, b.values, ta, tb)
        if out is None or need is None or values is None or b.impl is None:
            return None
        launches = []
        for (la, bufs_a, ints_a, _, slots_a), (lb, _, ints_b, _, slots_b) in \
                zip(a.launches, b.launches):
            ints = Form.fit(ints_a, ints_b, ta, tb)
            slot_forms = []
            for sa, sb in zip(slots_a, slots_b):
                off = Form.fit(sa[4], sb[4], ta, tb) if sa[:4] == sb[:4] else None
                if off is None:
                    return None
                slot_forms.append((sa[0], sa[1], sa[2], sa[3], off))
            work = fit_work([la, lb], [ints_a, ints_b], ta, tb)
            if ints is None or work is None:
                return None
            launches.append((la, bufs_a, ints, slot_forms, work))
        return LinKernel(a, b.impl, (out, need, values), launches)

    def agrees(self, c: KernelEntry, tc: int) -> bool:
        if c.impl is None or c.impl.sources != self.impl.sources \
                or len(c.launches) != len(self.launches) or not self.out.agrees(c.out, tc) \
                or not self.need.agrees(c.need, tc) or not self.values.agrees(c.values, tc):
            return False
        for (ln, _, ints, slots, work), (lc, _, ints_c, _, slots_c) in \
                zip(self.launches, c.launches):
            if not ints.agrees(ints_c, tc) or len(slots) != len(slots_c):
                return False
            if any(s[:4] != sc[:4] or not s[4].agrees(sc[4], tc) for s, sc in zip(slots, slots_c)):
                return False
            if work_at(work, ints_c, tc) != tuple(lc.gws) or lc.lws != ln.lws:
                return False
        return True


class LinView:
    """A skipped primitive whose view (shapes, offsets, strides) moves with ``t``."""

    __slots__ = ("index", "src", "k", "out", "views", "skippable")

    def __init__(self, a: ViewEntry, out: Form, views: Form) -> None:
        self.index, self.src, self.k, self.skippable = a.index, a.src, a.k, a.skippable
        self.out, self.views = out, views

    @staticmethod
    def fit(a: ViewEntry, b: ViewEntry, ta: int, tb: int) -> LinView | None:
        """The view through ``a`` at ``ta`` and ``b`` at ``tb`` (of the same source), or None."""
        if (a.src, a.k) != (b.src, b.k):
            return None
        out = Form.fit(a.out, b.out, ta, tb)
        views = Form.fit(a.views, b.views, ta, tb)
        return LinView(a, out, views) if out is not None and views is not None else None

    def agrees(self, c: ViewEntry, tc: int) -> bool:
        return (c.src, c.k) == (self.src, self.k) and self.out.agrees(c.out, tc) \
            and self.views.agrees(c.views, tc)


class LinHost:
    """A host-evaluated shape sub-graph node (a value of the binding alone: positions, mask
    pieces) whose output shapes and values are int or bool arrays affine in ``t`` (``Form``:
    fixed sizes; ``GrowForm``: growing along one axis): set from its form, not evaluated."""

    __slots__ = ("index", "form")

    def __init__(self, index: int, form: Form | GrowForm) -> None:
        self.index, self.form = index, form


def general_step(inst: Any) -> None:
    """A primitive through the per-primitive path."""
    if inst.plain and inst.recordable:
        inst.step_recorded()
    else:
        inst.prepare()
        inst.execute()


def shape_step(inst: Any, e: ShapeEntry) -> None:
    """A ShapeEntry that does not move: its recorded shapes, values and host arrays (an
    upload of the same array is still valid: step_plan's replay)."""
    inst.in_shapes, inst.values, inst.out_shapes = e.in_shapes, e.values, e.out
    hv, dv, host, outs = inst.host_valid, inst.device_valid, inst.host, inst.outputs
    for i, a in enumerate(e.host):
        dv[i] = dv[i] and host[i] is a and outs[i] is not None and outs[i].alloc is inst.own[i]
        host[i] = a
        hv[i] = True
    inst.executed_once = True


def host_step(inst: Any, e: LinHost, t: int) -> None:
    """A LinHost: the node's output shapes and host values at ``t``."""
    shapes, arrays = e.form.at(t)
    inst.out_shapes = list(shapes)
    host, hv, dv = inst.host, inst.host_valid, inst.device_valid
    for k, a in enumerate(arrays):
        host[k] = a
        hv[k] = True
        dv[k] = False
    inst.executed_once = True


def host_stepper(inst: Any, e: LinHost) -> Callable[[int], None]:
    """:func:`host_step` of ``inst`` as a function of its own (a length tape calls it on
    every decode step): a one-output node's value set without the loop, from the form's
    generated function where it has one."""
    form = e.form
    if len(inst.host) != 1 or inst.node.shape_only:  # (shapes alone: no values made)
        return lambda t: host_step(inst, e, t)
    at = form.fn if type(form) is Form and form.fn is not None else form.at

    def step(t: int) -> None:
        shapes, arrays = at(t)
        inst.out_shapes = list(shapes)
        inst.host[0] = arrays[0]
        inst.host_valid[0] = True
        inst.device_valid[0] = False
        inst.executed_once = True
    return step


def view_step(net: Network, inst: Any, e: Any, t: int) -> None:
    """A ViewEntry / LinView: the outputs as views of the input at their offsets."""
    if type(e) is LinView:
        inst.in_shapes, inst.values = None, {}
        inst.out_shapes = e.out.at(t)
        views = e.views.at(t)
    else:
        inst.in_shapes, inst.values, inst.out_shapes = e.in_shapes, e.values, e.out
        views = e.views
    if e.skippable:
        inst.can_be_optimized = True
    src = net.insts[e.src]
    if net.debug:
        check_read(net, src, e.k)
    tensor = src.outputs[e.k]
    if tensor is None or not src.device_valid[e.k]:
        tensor = net.device_tensor(src, e.k)
    inst.set_views(tensor, views)


def kernel_step(net: Network, inst: Any, e: Any, t: int, counts: list) -> None:
    """A KernelEntry / LinKernel: store the shapes, check the buffers (reallocating through
    the per-primitive path when they do not fit), set what changed of the arguments, launch.
    ``counts``: reuses and primitives whose arguments changed, advanced."""
    insts = net.insts
    launcher = net.launcher
    debug = net.debug
    lin = type(e) is LinKernel
    if lin:
        out = e.out.at(t)
        need = e.need.at(t)
        if e.feeds:
            inst._feed_dead_producers(e.values.at(t))
            for src, k in inst.sym_feeds.values():
                src.device_valid[k] = False
        # the per-primitive path rebuilds what a later step may ask of it
        inst.in_shapes, inst.values = None, {}
    else:
        out, need = e.out, e.need
        inst.in_shapes, inst.values = e.in_shapes, e.values
    if e.skippable:
        inst.can_be_optimized = False
    impl = e.impl
    new_impl = impl is not inst.impl
    if new_impl:
        kernels = inst.kernels_of.get(impl.sources)
        inst.kernels = kernels if kernels is not None else inst.kernels_for(impl)
        inst.impl = None if lin else impl
        if e.weights and not lin:
            inst.update_weights()
    cur = inst.out_shapes
    if new_impl or (out is not cur and out != cur) or None in inst.own:
        inst.out_shapes = out
        own, cap = inst.own, inst.capacity
        if all(reusable(own[i], cap[i], n) for i, n in enumerate(need)):
            outputs, keys, dtypes = inst.outputs, e.keys, e.dtypes
            record = net.predictor.record
            for i, shape in enumerate(out):
                record(keys[i], shape)
                outputs[i] = Tensor(own[i], 0, shape, dtypes[i])
            counts[0] += len(out)
        else:
            inst.realloc_if_needed()
    changed = False
    bufs = None
    if debug:
        check_write(inst)
    for h, ln in zip(inst.kernels, e.launches):
        if lin:
            lw, buffers, iform, slots, work = ln
            ints = list(iform.at(t))
            cints = None
        else:
            lw, buffers, ints, cints, slots = ln
        buffers = buffers.copy()
        now = None
        for b, i, si, k, off in slots:
            if lin:
                off = off.at(t)
            if debug and si != WEIGHTS and si != IMPL_BUFFER and si != e.index:
                check_read(net, insts[si if si >= 0 else CHECKED - si], k)
            if si >= 0:
                tensor = insts[si].outputs[k]
            elif si <= CHECKED:
                src = insts[CHECKED - si]
                tensor = src.outputs[k]
                if tensor is None or not src.device_valid[k]:
                    tensor = net.device_tensor(src, k)
            elif si == WEIGHTS:
                tensor = inst.weights_tensor
            else:
                if bufs is None:
                    bufs = net.impl_buffers(impl)
                buffers[b] = bufs[k].buffer
                continue
            buffers[b] = tensor.alloc.buffer
            v = tensor.offset + off
            if v != ints[i]:
                if now is None:
                    now = ints if lin else ints.copy()
                now[i] = v
        if lin:
            if launcher.set_args(h, buffers, ints):
                changed = True
            gws = work_at(work, ints, t)
            w = lw if gws == lw.gws else e.works.get(gws)
            if w is None:
                w = e.works[gws] = Work(gws, lw.lws)
        else:
            if now is None:
                if (buffers != h.bufs or cints is not h.ints) \
                        and launcher.set_packed(h, buffers, cints):
                    changed = True
            elif launcher.set_args(h, buffers, now):
                changed = True
            w = lw
        ev = launcher.launch(h, w)
        if net.profiling and ev is not None:
            inst.events.append(ev)
    if changed:
        counts[1] += 1
    dv, hv = inst.device_valid, inst.host_valid
    for i in range(len(dv)):
        dv[i] = True
        hv[i] = False
