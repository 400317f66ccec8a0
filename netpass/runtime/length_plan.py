"""Length plans: one step plan for every step of a decoding loop.

A decoder with its key/value cache in variables meets a new symbolic binding at every token
(``past`` grows by one), so a :class:`~netpass.runtime.step_plan.StepPlan`, which replays one
binding, never comes back. Along such a loop the bindings lie on a line: some named symbols
move together with the variables' length ``t`` (``past``, the attention mask's ``total``,
their sums) and the others stay put (``batch``, ``seq``). Everything a step decides is then a
function of ``t``, and for the kernels of a decoder it is an affine one: shapes, shape-infer
values, buffer sizes, a launch's integer arguments (sizes, strides, offsets) and work sizes
(the same, or a count rounded up to the work-group size).

A :class:`LengthFamily` holds that loop's exec order as step-plan entries whose varying fields
are :class:`Form` s (``base + slope * t`` over the structure of the field): fitted on the
step plans of two steps, checked against the step plan of a third (an entry whose prediction
differs, or whose implementation changes its kernels, runs the per-primitive path from then
on), then replayed for any ``t``. Entries that do not vary are the step plan's own.

Family of a binding (:meth:`LengthPlans.key`): the *pivot* is the first symbol bound by a
variable's shape; comparing a request's binding with its previous one, the symbols that moved
by the pivot's step are *moving*, the others must not have moved. The key holds which symbols
move, the moving ones' offsets from the pivot, the others' values and the variables' buffer
layouts; ``t`` is the pivot's value. A prompt of any length then decodes in the same family.

The forms are in :mod:`~netpass.runtime.length_forms`, the moving entries and the replay of
each entry at ``t`` in :mod:`~netpass.runtime.length_steps`, a request's record of a family's
replay in :mod:`~netpass.runtime.length_tape`.

Only the ops whose implementations keep their kernels and argument structure for every size
of a dim above 1 vary (their op table row's ``uniform``); the checked third step guards the
rest.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .impls import Scratch
from .length_forms import Form, GrowForm
from .length_guards import valid_range, work_range
from .length_steps import (
    LinHost,
    LinKernel,
    LinView,
    general_step,
    host_step,
    kernel_step,
    shape_step,
    view_step,
)
from .step_plan import (
    GeneralEntry,
    KernelEntry,
    ShapeEntry,
    StepPlan,
    ViewEntry,
    elided_sources,
)

if TYPE_CHECKING:  # pragma: no cover
    from .network import Network

SAMPLES = 3        # steps of a family run the per-primitive path: two to fit, one to check
FAMILIES = 16      # per compiled model


def _host_values(net: Network, plan: StepPlan) -> dict[int, tuple]:
    """Per general entry of a host-evaluated shape sub-graph node: (output shapes, output
    arrays) as the step left them."""
    out = {}
    for e in plan.entries:
        if type(e) is not GeneralEntry:
            continue
        inst = net.insts[e.index]
        node = inst.node
        if not node.in_shape_of_subgraph or node.state_role is not None \
                or inst.out_shapes is None or not all(inst.host_valid):
            continue
        out[e.index] = (tuple(tuple(s) for s in inst.out_shapes),
                        tuple(np.array(a, copy=True) for a in inst.host))
    return out


def _shape_value(e: ShapeEntry) -> tuple:
    """A shape entry's (output shapes, host arrays), as LinHost's forms take them."""
    return tuple(tuple(o) for o in e.out or ()), tuple(e.host)


def _same_shape_value(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and len(a[1]) == len(b[1]) and \
        all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a[1], b[1]))


def _general(index: int) -> GeneralEntry:
    """A general entry for the node at ``index`` (the per-primitive path runs it)."""
    e = GeneralEntry.__new__(GeneralEntry)
    e.index = index
    return e


def _same_kernel(a: KernelEntry, b: KernelEntry) -> bool:
    """The two steps launched the same thing the same way (a fixed entry)."""
    if a.impl is not b.impl or a.out != b.out or a.need != b.need \
            or len(a.launches) != len(b.launches):
        return False
    for (la, _, ia, _, sa), (lb, _, ib, _, sb) in zip(a.launches, b.launches):
        if la is not lb or ia != ib or sa != sb:
            return False
    return True


def _same_impl_buffers(a: list, b: list) -> bool:
    """Two steps' impl buffers alike (scratch of one size, equal arrays: a decode attention's
    key-split partials and arrival counts), so that a moving kernel keeps its last step's."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, Scratch) or isinstance(y, Scratch):
            if not (isinstance(x, Scratch) and isinstance(y, Scratch) and x.nbytes == y.nbytes):
                return False
        elif not (x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)):
            return False
    return True


def _same_view(a: ViewEntry, b: ViewEntry) -> bool:
    return (a.src, a.k, a.out, a.views) == (b.src, b.k, b.out, b.views)


def _combine(net: Network, a, b, ta: int, tb: int):
    """The family entry for one primitive from its entries at two steps: the entry itself
    when nothing moved, a LinKernel / LinView when it moves affinely, else a GeneralEntry."""
    if type(a) is not type(b) or a.index != b.index:
        return None
    if type(a) is GeneralEntry:
        return a
    if type(a) is ShapeEntry:  # (a shape_of value of the binding: fixed, affine, or general)
        ha, hb = _shape_value(a), _shape_value(b)
        if _same_shape_value(ha, hb):
            return b
        form = Form.fit(ha, hb, ta, tb) or GrowForm.fit(ha, hb, ta, tb)
        return LinHost(a.index, form) if form is not None else _general(a.index)
    if type(a) is KernelEntry:
        if _same_kernel(a, b):
            return b
        node = net.program.nodes[a.index]
        # (an attention's output projection runs the attention's kernel: attention_proj; its
        # weights read as given, the same tensor every step)
        uniform = node.row.uniform or getattr(node.subgraph, "uniform", False)
        if uniform and a.impl is not None and b.impl is not None \
                and a.impl.sources == b.impl.sources \
                and (not a.weights or a.impl.weights_as_given and b.impl.weights_as_given) \
                and _same_impl_buffers(a.impl.buffers, b.impl.buffers):
            lin = LinKernel.fit(a, b, ta, tb)
            if lin is not None:
                lin.feeds = bool(net.insts[a.index].sym_feeds)
                return lin
        return _general(a.index)
    if _same_view(a, b):
        return b
    view = LinView.fit(a, b, ta, tb)
    return view if view is not None else _general(a.index)


def _checked(e: Any, ec: Any, hc: dict, tc: int) -> bool:
    """Whether family entry ``e`` predicts ``ec``, its primitive's entry in the step plan of
    the third sample (at ``tc``; ``hc``: that step's host values)."""
    te = type(e)
    if te is LinHost:
        value = _shape_value(ec) if type(ec) is ShapeEntry else hc.get(e.index)
        return value is not None and e.form.agrees(value, tc)
    if te is ShapeEntry:
        return type(ec) is ShapeEntry and _same_shape_value(_shape_value(e), _shape_value(ec))
    if te in (LinKernel, LinView):
        sampled = KernelEntry if te is LinKernel else ViewEntry
        return type(ec) is sampled and e.index == ec.index and e.agrees(ec, tc)
    if te is KernelEntry:
        return type(ec) is KernelEntry and _same_kernel(e, ec)
    if te is ViewEntry:
        return type(ec) is ViewEntry and _same_view(e, ec)
    return True


class LengthFamily:
    """The exec loop of one family of bindings (module docstring)."""

    __slots__ = ("entries", "general", "pre", "samples", "ready", "n_kernels", "n_launches",
                 "n_views", "n_fused", "lo", "hi")

    def __init__(self) -> None:
        self.entries: list | None = None
        self.general: list[int] = []
        self.pre: dict[int, list[int]] = {}
        self.samples: list[tuple[int, StepPlan, dict]] = []
        self.ready = False
        self.n_kernels = self.n_launches = self.n_views = self.n_fused = 0
        self.lo, self.hi = 0, 1 << 62  # the lengths it replays (length_guards)

    def add_sample(self, net: Network, t: int, plan: StepPlan) -> None:
        """A step run by the per-primitive path: fit on the second, check on the third."""
        if any(t == s for s, _, _ in self.samples):
            return
        self.samples.append((t, plan, _host_values(net, plan)))
        if len(self.samples) == 2:
            (ta, a, ha), (tb, b, hb) = self.samples
            if len(a.entries) != len(b.entries):
                self.samples.pop(0)
                return
            entries = [_combine(net, x, y, ta, tb) for x, y in zip(a.entries, b.entries)]
            if any(e is None for e in entries):
                self.samples.pop(0)
                return
            for i, e in enumerate(entries):  # host values affine in t: set, not evaluated
                if type(e) is GeneralEntry and e.index in ha and e.index in hb:
                    form = Form.fit(ha[e.index], hb[e.index], ta, tb) or \
                        GrowForm.fit(ha[e.index], hb[e.index], ta, tb)
                    if form is not None:
                        entries[i] = LinHost(e.index, form)
            self.entries = entries
        elif len(self.samples) == SAMPLES and self.entries is not None:
            tc, c, hc = self.samples[-1]
            if len(c.entries) != len(self.entries):
                self.samples = self.samples[-1:]
                self.entries = None
                return
            checked = [e if _checked(e, ec, hc, tc) else _general(e.index)
                       for e, ec in zip(self.entries, c.entries)]
            self._finish(net, checked)

    def _finish(self, net: Network, entries: list) -> None:
        self.entries = entries
        self.general = [e.index for e in entries if type(e) in (GeneralEntry, LinHost)]
        # the elided views a primitive of the per-primitive path reads, brought up first
        present = {e.index for e in entries}
        nodes = net.program.nodes
        self.pre = {e.index: elided_sources(nodes, present, e.index)
                    for e in entries if type(e) is GeneralEntry}
        kernels = [e for e in entries if type(e) in (KernelEntry, LinKernel)]
        self.n_kernels = len(kernels)
        self.n_launches = sum(len(e.launches) for e in kernels)
        # (the step plans' count: views elided from the entries are skipped primitives too)
        demoted = sum(type(e) is GeneralEntry and type(c) is ViewEntry
                      for e, c in zip(entries, self.samples[-1][1].entries))
        # (host values set from their forms: as the per-primitive path leaves them)
        self.n_views = self.samples[-1][1].n_views - demoted
        self.n_fused = sum(net.insts[e.index].n_fused for e in kernels)
        t0 = self.samples[-1][0]
        self.lo, self.hi = work_range(entries, t0, *valid_range(nodes, entries, t0))
        self.samples = []
        self.ready = True

    def holds(self, t: int) -> bool:
        """Whether a step at ``t`` may take this family: one still sampling, or a length
        within the range its host values hold (length_guards)."""
        return not self.ready or self.lo <= t <= self.hi

    def run(self, net: Network, t: int, flush_every: int) -> None:
        """Replay at ``t`` on ``net`` entry by entry: the step plan's replay, with the moving
        fields of the Lin entries evaluated at ``t`` (a request's later steps take its tape of
        this family, length_tape)."""
        insts = net.insts
        stats = net.stats
        epoch, debug = net.epoch, net.debug
        counts = [0, 0]  # reuses, primitives whose arguments changed
        for count, e in enumerate(self.entries or (), 1):
            inst = insts[e.index]
            te = type(e)
            if debug:
                net.reader = inst
            if te is KernelEntry or te is LinKernel:
                kernel_step(net, inst, e, t, counts)
            elif te is ViewEntry or te is LinView:
                view_step(net, inst, e, t)
            elif te is LinHost:
                host_step(inst, e, t)
            elif te is ShapeEntry:
                shape_step(inst, e)
            else:
                for i in self.pre.get(e.index, ()):
                    general_step(insts[i])
                    insts[i].stamp = epoch
                general_step(inst)
            inst.stamp = epoch
            if count % flush_every == 0:
                net.queue.flush()
        self.count(stats, counts)

    def count(self, stats: dict, counts: list) -> None:
        """The counters a replay advances (as the per-primitive path would)."""
        stats["primitives"] += self.n_kernels
        stats["impl_cache_hits"] += self.n_kernels
        stats["kernels_enqueued"] += self.n_launches
        stats["skipped"] += self.n_views
        stats["fused"] += self.n_fused
        stats["reuses"] += counts[0]
        stats["set_arguments"] += counts[1]


class LengthPlans:
    """A compiled model's families (shared by its requests) and how a binding finds its own."""

    def __init__(self, program: Any) -> None:
        sym = program.symbolic
        self.named = list(dict.fromkeys(s for s, _, _ in sym.bindings))
        n_inputs = len(program.inputs)
        reads = program.reads
        # a variable's growing dim: its append axis, else a dim no input binds
        by_inputs = {s for s, pos, _ in sym.bindings if pos < n_inputs}
        pivots = [s for s, pos, axis in sym.bindings if pos >= n_inputs and (
            reads[pos - n_inputs].state_axis == axis if reads[pos - n_inputs].state_axis is not None
            else s not in by_inputs)]
        self.pivot = self.named.index(pivots[0]) if pivots else None
        self.families: dict = {}

    def key(self, binding: dict, last: tuple | None,
            layout: tuple) -> tuple[tuple | None, tuple, int]:
        """(family key or None, the named symbols' values, t) of ``binding`` after a binding
        whose named values were ``last``."""
        values = tuple(binding[s] for s in self.named)
        if self.pivot is None or last is None:
            return None, values, 0
        t = values[self.pivot]
        step = t - last[self.pivot]
        if step == 0:
            return None, values, t
        moving = []
        for v, old in zip(values, last):
            if v - old == step:
                moving.append(True)
            elif v == old:
                moving.append(False)
            else:
                return None, values, t
        offsets = tuple(v - t if m else v for v, m in zip(values, moving))
        return (tuple(moving), offsets, layout), values, t

