"""Steady decode steps: a request's tape step replayed as a flat list of launches where
nothing but the length moved.

In a decoding loop most steps of a length family (:mod:`~netpass.runtime.length_tape`) find
every item of the tape on its fast path: the grouped kernels launch as they are, the moving
kernels write their moving ints, and the rest of the step is bookkeeping (the variables'
reads and appends, host values nobody uploads, views, output shapes): most of the tape's
Python. A :class:`Steady` is taken from the tape right after such a step; the request's next
step, when it continues the sequence with nothing else changed, is:

- its checks: the request's previous inference was this step's (``Network.epoch``), no
  buffer of the request changed since (``Network.mem_epoch``: every allocation, release,
  pool hand-out, inference outside a tape and variable reset advances it), the inputs have
  the shapes the family gives at ``t`` (the pivot variable's length) and fit their buffers,
  and ``t`` is within what the buffers hold (moving kernels' outputs, variables, uploaded
  host values);
- the inputs written to their buffers, the host values the moving kernels read computed from
  their forms and uploaded (or, where they only grow, written ahead once), every launch in
  the tape's order with the moving ints written (flushed, or sent as persistent kernels,
  where the tape's step is), the variables' new lengths committed, the counters advanced as
  the tape's step advances them, the outputs read.

Everything else keeps what the tape's step left: those primitives' shapes and host values
stay a consistent record of an earlier length (their buffers are the same objects, the
contents current). A tape step sets every one of them again from ``t``; the per-primitive
path and the other replays take shapes and values from the binding (symbolic records) and
rebuild what the moving kernels dropped; so either may follow at any step. Where a check
fails the usual path runs, and its tape step takes a new Steady.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.feeds import is_device_array
from .length_forms import GrowForm, Work
from .length_tape import (
    FIRST_FLUSH,
    FLUSH_EVERY,
    GROUP,
    HOST,
    MOVING,
    MOVING_VIEW,
    SHAPE,
    STATE,
    VIEW,
)
from .memory import Tensor
from .state_marks import APPEND

if TYPE_CHECKING:  # pragma: no cover
    from .length_plan import LengthFamily
    from .length_tape import Tape
    from .network import Network

DRAIN = object()  # an op: send what persistent steps gathered (where the tape's upload did)


class Steady:
    """A request's steady step of one family (module docstring): ``chunks`` of launch ops,
    each chunk flushed after it but the last; an op is (the fixed launches before it as
    (handle, Work), then None, DRAIN or a moving launch: its handle, Work (None where its
    work sizes move), moving ints (position, base, slope), the C view and int32 array they
    are written into, its work sizes as a function of ``t``, the family entry's Work table,
    the launch's own Work and the handle's buffer count)."""

    __slots__ = ("family", "t0", "tmax", "epoch", "mem_epoch", "pivot", "inputs", "uploads",
                 "chunks", "variables", "appends", "outputs", "moving", "offsets", "ahead")

    def __init__(self, family: LengthFamily, t0: int, key: tuple, chunks: list, tmax: int,
                 appends: int) -> None:
        self.family, self.t0, self.chunks, self.tmax, self.appends = \
            family, t0, chunks, tmax, appends
        self.moving, self.offsets = key[0], key[1]
        self.epoch = self.mem_epoch = -1
        self.pivot: tuple = ()
        # (primitive, name, shape at t0, slopes, dtype, predictor key, array type: _take_inputs)
        self.inputs: list = []
        self.uploads: list = []    # (primitive, its host stepper, its buffer, predictor key)
        # host values written ahead: (predictor key, shape at t0, axis, slope, (their buffer,
        # the values written))
        self.ahead: list = []
        self.variables: list = []  # (shape at t0, axis, rows appended per step, variables)
        self.outputs: list = []    # (host_valid list, output) of the network outputs' holders

    @staticmethod
    def build(net: Network, tape: Tape, family: LengthFamily, t: int) -> Steady | None:
        """The steady step after ``tape``'s step at ``t``, or None where a part of that step
        has no fast path or is not one a steady step repeats (kernels outside groups, the
        per-primitive path, copied variables, outputs that move)."""
        key = net.length_key
        if key is None or not tape.current(net):
            return None
        hosts: dict = {}      # node index -> its HOST item
        shapes: set = set()   # SHAPE items' node indices
        fixed: set = set()    # grouped primitives, moving kernels of fixed output shapes
        uploads: dict = {}    # (source index, output) -> what a moving kernel's upload reads
        gathered = net.persistent is not None
        chunks: list = []
        ops: list = []  # (fixed launches, then a moving launch, DRAIN or None)
        run: list = []  # fixed launches (handle, Work) since the last op
        tmax, appends, count, flush_at = family.hi, 0, 0, FIRST_FLUSH
        for item in tape.items:
            kind = item[0]
            if kind == GROUP:
                run.extend(item[3])
                fixed.update(m[1].node.index for m in item[2])
                count += item[6]
            elif kind == MOVING:
                fast, e = item[4], item[2]
                tmax = min(tmax, fast[1])
                if gathered and any(s.node.index in hosts and (s.node.index, k) not in uploads
                                    for s, k, _, _ in fast[3]):
                    ops.append((run, DRAIN))
                    run = []
                for src, k, alloc, offset in fast[3]:
                    uploads[(src.node.index, k)] = (src, k, alloc, offset)
                if e.out.const is not None:
                    fixed.add(item[1].node.index)
                for h, lw, _, moving, buf, view, gws_at, w in fast[2]:
                    ops.append((run, (h, w, moving, view, buf, gws_at, e.works, lw)))
                    run = []
                count += 1
            elif kind == HOST:
                hosts[item[1].node.index] = item
                continue
            elif kind == SHAPE:
                shapes.add(item[1].node.index)
                continue
            elif kind == STATE:
                node = item[1].node
                if node.state_role == APPEND:
                    if node.append_by is None:  # (an append that launches its own copy)
                        return None
                    appends += 1
                continue
            elif kind not in (VIEW, MOVING_VIEW):  # (kernels outside groups, general steps)
                return None
            else:
                continue
            if count >= flush_at:  # (the tape's flush points)
                flush_at = count + FLUSH_EVERY
                chunks.append(ops + [(run, None)] if run else ops)
                ops, run = [], []
        chunks.append(ops + [(run, None)] if run else ops)
        s = Steady(family, t, key, chunks, tmax, appends)
        for inst, k in net.output_refs:
            own = inst.own[k]
            # (an output written in place over a new host array per step, not one below
            # zero copy's size: a token)
            if inst.node.index not in fixed or own is not None and own.host is not None:
                return None
            s.outputs.append((inst.host_valid, k))
        if not s._take_state(net, t) or not s._take_inputs(net):
            return None
        for src, k, alloc, offset in uploads.values():
            i = src.node.index
            if i in shapes and src.device_valid[k]:
                continue  # (a value of the binding that does not move: uploaded once)
            if i not in hosts or k or offset or alloc is not src.own[0] or len(src.host) != 1:
                return None
            if not s._ahead(net, src, hosts[i][2].form, t):
                s.uploads.append((src, hosts[i][3], alloc, src.node.id + "_upload"))
        for _, _, _, _, (alloc, values) in s.ahead:  # (the Steady keeps ``values`` alive)
            net.launcher.write(alloc.buffer, 0, values)
        return s

    def _ahead(self, net: Network, inst: Any, form: Any, t: int) -> bool:
        """An uploaded host value that grows along one axis and keeps what it held (a
        GrowForm with ``b`` 0: the causal mask's pieces) is written once for every length its
        buffer holds; a step then only records its shape for the predictor, as an upload
        would. Whether ``inst``'s is such a value."""
        if type(form) is not GrowForm or form.b:
            return False
        (s0,), (s1,) = form.shapes.at(t), form.shapes.at(t + 1)
        moved = [a for a, (n0, n1) in enumerate(zip(s0, s1)) if n0 != n1]
        if len(moved) != 1 or s1[moved[0]] <= s0[moved[0]]:
            return False
        axis, cap = moved[0], inst.capacity[0]
        slope = s1[axis] - s0[axis]
        self.tmax = min(self.tmax, t + (cap - s0[axis]) // slope)
        self.ahead.append((inst.node.id + "_upload", s0, axis, slope,
                           (inst.own[0], form.flat(t, cap))))
        return True

    def _take_state(self, net: Network, t: int) -> bool:
        """The variables (all appended in place by their readers) and the pivot, the variable
        whose length is ``t``; the bound on ``t`` their buffers give."""
        sym = net.program.symbolic
        n_inputs = len(net.program.inputs)
        lp = net.compiled.length_plans
        pivot = lp.named[lp.pivot]
        groups: dict = {}
        for v in net.state.vars.values():
            if v.axis is None or v.pending is None or v.pending[0] is not v.alloc \
                    or v.shape is None or v.capacity is None:
                return False
            rows = v.pending[2][v.axis] - v.shape[v.axis]
            self.tmax = min(self.tmax, v.capacity[v.axis] - rows - (v.shape[v.axis] - t))
            groups.setdefault((v.shape, v.axis, rows), []).append(v)
        self.variables = [(shape, axis, rows, vs) for (shape, axis, rows), vs in groups.items()]
        for s, pos, axis in sym.bindings:
            var = net.program.reads[pos - n_inputs].state_var if pos >= n_inputs else None
            if s is pivot and var is not None:
                v = net.state.vars[var]
                if v.shape is not None and v.shape[axis] == t:
                    self.pivot = (v, axis)
                    return True
        return False

    def _take_inputs(self, net: Network) -> bool:
        """Per input: its primitive, name, shape and dtype at ``t0``, per axis whether it
        moves with ``t`` (binds a moving symbol), its predictor key and the type of array it
        was fed (None: a device tensor, copied on the device: a token a decoding loop feeds
        back, :mod:`~netpass.runtime.pending`)."""
        named = net.compiled.length_plans.named
        moving_axes: set = set()
        for s, pos, axis in net.program.symbolic.bindings:
            if s in named and self.moving[named.index(s)]:
                moving_axes.add((pos, axis))
        for pos, p in enumerate(net.program.inputs):
            inst = net.insts[p.index]
            arr, t = inst.host[0], inst.outputs[0]
            if inst.own[0] is None or inst.out_shapes is None or t is None or \
                    t.alloc is not inst.own[0] or arr is None and not inst.device_valid[0]:
                return False
            shape = inst.out_shapes[0]
            slopes = tuple(int((pos, a) in moving_axes) for a in range(len(shape)))
            kind = type(arr) if arr is not None else None
            self.inputs.append((inst, p.name, shape, slopes, t.dtype, p.id, kind))
        return True

    def seal(self, net: Network) -> None:
        """The request's epochs as the inference that took or ran this step left them."""
        self.epoch, self.mem_epoch = net.epoch, net.mem_epoch

    def run(self, net: Network, feeds: Any) -> bool:
        """One steady step (module docstring); False, having set nothing the usual path does
        not set again, where a check fails."""
        if net.epoch != self.epoch + 1 or net.mem_epoch != self.mem_epoch:
            return False
        v, axis = self.pivot
        if v.shape is None:
            return False
        t = v.shape[axis]
        if t > self.tmax:
            return False
        dt = t - self.t0
        arrays = []
        for inst, name, base, slopes, dtype, _, kind in self.inputs:
            arr = feeds[name]
            shape = arr.shape
            if len(shape) != len(base) or arr.dtype != dtype or arr.size > inst.capacity[0] \
                    or (type(arr) is not kind if kind is not None else
                        not is_device_array(arr) or arr.engine is not net.engine):
                return False
            for n, b, slope in zip(shape, base, slopes):
                if n != b + slope * dt:
                    return False
            arrays.append(arr)
        for inst, step, alloc, _ in self.uploads:
            step(t)
            if inst.own[0] is not alloc or inst.host[0].size > inst.capacity[0]:
                return False
        self._write(net, dt, arrays)
        self._launch(net, t)
        for hv, k in self.outputs:  # (read last step: stale now)
            hv[k] = False
        stats = net.stats
        self.family.count(stats, [0, 0])
        stats["length_replays"] += 1
        stats["steady_steps"] += 1
        stats["state_appends"] += self.appends
        net.decoding = True
        net.last_named = tuple([o + t if m else o for o, m in zip(self.offsets, self.moving)])
        return True

    def _write(self, net: Network, dt: int, arrays: list) -> None:
        """The inputs and the uploaded host values into their buffers (as ``set_input`` and
        ``upload`` leave them where the buffers hold them), the variables' new lengths."""
        epoch = net.epoch
        record = net.predictor.record
        write = net.launcher.write
        for (inst, _, _, _, _, key, kind), arr in zip(self.inputs, arrays):
            shape = arr.shape
            inst.shape_changed = shape != inst.out_shapes[0]
            inst.out_shapes = [shape]
            inst.stamp = epoch
            record(key, shape)
            own = inst.own[0]
            inst.outputs[0] = Tensor(own, 0, shape, arr.dtype)
            if kind is None:  # (a device tensor: as set_input copies it)
                inst.host[0] = None
                inst.host_valid[0] = False
                if arr.size:
                    net.launcher.copy(own.buffer, arr.alloc.buffer, arr.nbytes)
            else:
                inst.host[0] = arr  # (kept alive until the copy has run)
                inst.host_valid[0] = True
                if arr.size:
                    write(own.buffer, 0, arr)
            inst.device_valid[0] = True
        for inst, _, alloc, key in self.uploads:
            a = inst.host[0]
            record(key, a.shape)
            inst.outputs[0] = Tensor(alloc, 0, a.shape, a.dtype)
            if a.size:
                write(alloc.buffer, 0, a)
            inst.device_valid[0] = True
        for key, shape, axis, slope, _ in self.ahead:
            record(key, shape[:axis] + (shape[axis] + slope * dt,) + shape[axis + 1:])
        for shape, axis, rows, vs in self.variables:
            out = shape[:axis] + (shape[axis] + dt + rows,) + shape[axis + 1:]
            for v in vs:
                v.pending = (v.alloc, v.capacity, out)

    def _launch(self, net: Network, t: int) -> None:
        """Every launch of the step in order, the moving ints written, flushed where the
        tape flushes (gathered into persistent kernels where the request gathers them)."""
        persistent = net.persistent_for_tape()
        launcher = net.launcher
        set_ints = launcher.set_int_view
        launch: Any = launcher.launch
        flush: Any = net.queue.flush
        gathered = persistent is not None
        if persistent is not None:
            launch, flush = persistent.add, persistent.drain
        last = len(self.chunks) - 1
        try:
            for c, ops in enumerate(self.chunks):
                for run, mv in ops:
                    for h, w in run:
                        launch(h, w)
                    if mv is None:
                        continue
                    if mv is DRAIN:
                        flush()
                        continue
                    h, w, moving, view, buf, gws_at, works, lw = mv
                    for i, b, slope in moving:
                        view[i] = b + slope * t
                    set_ints(h, view)
                    if w is None:
                        size = gws_at(t)
                        w = lw if size == lw.gws else works.get(size)
                        if w is None:
                            w = works[size] = Work(size, lw.lws)
                    if gathered:
                        launch(h, w, buf)
                    else:
                        launch(h, w)
                if c != last or gathered:
                    flush()
        finally:
            if persistent is not None:
                persistent.pending.clear()
