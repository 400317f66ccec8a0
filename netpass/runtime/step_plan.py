"""Step plans: one symbolic binding's exec loop, flattened once per compiled model.

In symbolic mode (:mod:`netpass.runtime.symbolic`) everything ``update_shape``, the runtime
skip checks and ``update_impl`` decide for a primitive whose shape-infer inputs are
substituted is a function of the binding: the per-binding records already keep it. What still
depends on the infer request is memory (``realloc_if_needed`` with the request's predictor and
pool), the arguments last set on each kernel, and the launches. A :class:`StepPlan` keeps, for
one binding, the exec order as flat entries with the records' results, resolved source
positions and argument templates (constants' buffers filled in), so that a request replaying
it does per primitive only: store the recorded shapes, check its buffer (reallocating through
the usual path when it does not fit), fill the buffer slots of the arguments, set those that
changed, launch.

Entries:

- kernel: a primitive that launches its recorded implementation;
- view: a primitive skipped at runtime whose outputs alias its input (reshape-like, a
  permuted view, a split piece, a slice or crop, a no-op transpose, strided slice or
  broadcast) at recorded offsets and strides; views that only replayed kernels read are not
  replayed at all (those kernels' argument slots point under them);
- shape: a node of a shape_of sub-graph computed from shapes no data decides
  (``data_shaped``): its recorded shapes and host value, a function of the binding as
  everything a plan replays (kept on the device across replays once uploaded);
- general: anything else (host evaluation of what a data-dependent shape feeds, readers of
  a data-dependent op's outputs, whose shapes one binding does not decide (``data_fed``),
  data-dependent decisions such as an identity Gather, in-place concat, host fallbacks), run
  by the per-primitive path as without a plan.

A primitive whose shape-infer inputs come from shape entries (a Reshape to a target computed
from shapes) is a view or kernel entry like any other: its recorded values are that
target.

Every replayed primitive leaves the same state (shapes, values, implementation, buffers,
flags) as the per-primitive path, so either path can follow the other at any step. A plan is
built when its binding comes back (``Network._execute``) and shared by the compiled model's
requests as a template: nothing in it changes once built, and it holds nothing of the request
that built it but offsets to compare with (kernel objects are each request's own:
``PrimitiveInst.kernels_for``; reordered weights and buffers too).
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from . import impls
from .invariants import check_read, check_write
from .memory import Tensor, reusable
from .shape_predictor import ShapePredictor

if TYPE_CHECKING:  # pragma: no cover
    from .network import Network, PrimitiveInst

# argument slot sources: a program node index, or one of these markers (CHECKED - index: a
# source whose output may be a host value)
WEIGHTS, IMPL_BUFFER, CHECKED = -1, -2, -3
FIRST_FLUSH = 4    # primitives after which a replay's first kernels go to the device


class KernelEntry:
    """A primitive launching its recorded implementation."""

    __slots__ = ("index", "in_shapes", "out", "values", "impl", "launches", "need",
                 "dtypes", "keys", "skippable", "weights", "single")

    def __init__(self, inst: PrimitiveInst, valid: set) -> None:
        node = inst.node
        net = inst.net
        self.index = node.index
        self.in_shapes, self.out, self.values = inst.in_shapes, inst.out_shapes, inst.values
        self.impl = inst.impl
        n_out = node.num_outputs
        # what realloc_if_needed compares with the capacity, per output (fake-aligned for FC)
        self.need = tuple(inst._fc_alloc_elements(i) if inst.fc_related else impls.size(s)
                          for i, s in enumerate(self.out))
        self.dtypes = tuple(node.out_dtypes)
        self.keys = tuple(ShapePredictor.key(node.id, i) for i in range(n_out))
        self.skippable = node.runtime_skippable
        self.weights = inst.weights is not None
        self.single = n_out == 1
        self.launches = []
        outs = inst.outputs
        for ln in self.impl.launches:
            nb, ints, refs = ln.template()
            buffers, ints = [None] * nb, ints.copy()
            slots = []
            for b, i, kind, j, off in refs:
                if kind == "b":
                    slots.append((b, i, IMPL_BUFFER, j, 0))
                    continue
                if kind == "o":
                    slots.append((b, i, node.index, j, off))
                    ints[i] = outs[j].offset + off
                    continue
                if kind == "i" and j == 1 and inst.weights_tensor is not None:
                    slots.append((b, i, WEIGHTS, 0, off))
                    ints[i] = inst.weights_tensor.offset + off
                    continue
                src, k = inst.src_insts[j] if kind == "i" else inst.extra_insts[j]
                t = net.device_tensor(src, k)
                ints[i] = t.offset + off
                if src.node.is_constant:  # uploaded once per compiled model
                    buffers[b] = t.alloc.buffer
                else:
                    # sources that are not replayed kernels, views or inputs may hold a host
                    # value only: CHECKED makes the replay upload it
                    idx = src.node.index
                    slots.append((b, i, idx if idx in valid else CHECKED - idx, k, off))
            # the ints as they were (offsets are a function of the binding); a replay that
            # finds another offset rebuilds them
            cints = (ctypes.c_int32 * len(ints))(*ints) if ints else None
            self.launches.append((ln, buffers, ints, cints, slots))


class ViewEntry:
    """A skipped primitive whose outputs alias its input: per output, the element offset from
    the input's and the strides (None: contiguous)."""

    __slots__ = ("index", "in_shapes", "out", "values", "src", "k", "views", "skippable")

    def __init__(self, inst: PrimitiveInst) -> None:
        node = inst.node
        self.index = node.index
        self.in_shapes, self.out, self.values = inst.in_shapes, inst.out_shapes, inst.values
        src, self.k = inst.src(0)
        self.src = src.node.index
        base = src.outputs[self.k].offset
        self.views = [(t.offset - base, t.strides) for t in inst.outputs]
        self.skippable = node.runtime_skippable


class ShapeEntry:
    """A shape_of sub-graph node: its recorded shapes, values and host outputs (read-only
    arrays, shared by the requests replaying the plan); none for a node only ShapeOfs read
    (``shape_only``: its values are never made)."""

    __slots__ = ("index", "in_shapes", "out", "values", "host")

    def __init__(self, inst: PrimitiveInst) -> None:
        self.index = inst.node.index
        self.in_shapes, self.out, self.values = inst.in_shapes, inst.out_shapes, inst.values
        self.host = []
        if inst.node.shape_only:
            return
        for a in inst.host:
            a = a.copy()
            a.flags.writeable = False
            self.host.append(a)


class GeneralEntry:
    """A primitive run by the per-primitive path."""

    __slots__ = ("index",)

    def __init__(self, inst: PrimitiveInst) -> None:
        self.index = inst.node.index


def data_shaped(program) -> set[int]:
    """Indices of the nodes whose output shapes may depend on data, not only on the binding:
    data-dependent ops (NonZero), readers of such outputs, and nodes whose shape-infer
    inputs are data (not constants, not shape_of values) or shape_of values computed from such
    shapes. Everything else has, for one binding, the shapes and shape_of values of every
    other infer with it (a plan's premise)."""
    out: set[int] = set()
    for n in program.nodes:
        if n.is_parameter or n.is_constant:
            continue
        if n.row.data_dependent:
            out.add(n.index)
            continue
        deps = n.get_shape_infer_dependencies()
        for j, (src, _) in enumerate(n.inputs):
            if src.index in out \
                    or (j in deps and not src.is_constant and not src.in_shape_of_subgraph) \
                    or (src.in_shape_of_subgraph
                        and any(so.inputs[0][0].index in out for so in src.dependant_shape_ofs)):
                out.add(n.index)
            if n.index in out:
                break
    return out


def _shape_from_data(n) -> bool:
    """Whether a shape-infer input of ``n`` is data: neither a constant nor a shape_of value
    (a VariadicSplit by lengths a routing counted: a mixture of experts' tokens per expert)."""
    deps = n.get_shape_infer_dependencies()
    return any(j in deps and not src.is_constant and not src.in_shape_of_subgraph
               for j, (src, _) in enumerate(n.inputs))


def data_fed(program) -> set[int]:
    """Indices of the nodes whose input shapes may differ between two infers with one
    binding: the readers of a data-dependent op's outputs (NonZero's index count) or of an
    op shaped by data (a split by computed lengths), and their readers in turn, up to nodes
    whose output shapes the binding decides (all static or bound: ``sym_out``; a
    ScatterElements back into a tensor of the input's shape)."""
    fed: set[int] = set()
    shaped: set[int] = set()  # nodes whose output shapes data may decide
    for n in program.nodes:
        if n.is_parameter or n.is_constant:
            continue
        if any(src.index in shaped for src, _ in n.inputs):
            fed.add(n.index)
        if n.row.data_dependent or ((n.index in fed or _shape_from_data(n))
                                    and n.sym_out is None):
            shaped.add(n.index)
    return fed


def plan_sets(program) -> tuple[set[int], set[int]]:
    """(:func:`data_shaped`, :func:`data_fed`) of ``program``, computed once: every plan a
    compiled model builds asks the same of it (a whole-graph walk each, several ms for a
    12-layer decoder)."""
    sets = program.plan_sets
    if sets is None:
        sets = program.plan_sets = (data_shaped(program), data_fed(program))
    return sets


def _shape_entry(inst: PrimitiveInst, shaped_by_data: set) -> bool:
    """Whether shape_of node ``inst`` can replay its recorded outputs: evaluated in the
    recorded infer, from the shapes of tensors that no data decides (``data_shaped``): its
    value is then a function of the binding. (A causal mask built from a Range over the
    sequence is such a value: [S, S] elements evaluated with numpy once per binding, not
    per infer. A node only ShapeOfs read replays its shapes alone: the dynamo exporter's mask
    indices, whose shape gives the slice that stands for their GatherND, runtime.gather_grid.)"""
    node = inst.node
    if inst.data_dependent or inst.out_shapes is None:
        return False
    if not node.shape_only and (inst.skip or not all(inst.host_valid)
                                or any(a is None for a in inst.host)):
        return False
    return not any(so.inputs[0][0].index in shaped_by_data for so in node.dependant_shape_ofs)


def _entry(inst: PrimitiveInst, valid: set, replayed: set, shaped_by_data: set, fed: set):
    """The entry of ``inst``; ``valid`` gathers the node indices whose outputs the replay
    leaves on the device, ``replayed`` those whose state (shapes, values) it sets; ``fed``:
    :func:`data_fed` (their recorded input shapes are only those of the recorded infer)."""
    node = inst.node
    if node.in_shape_of_subgraph:
        if _shape_entry(inst, shaped_by_data):
            replayed.add(node.index)
            return ShapeEntry(inst)
        return GeneralEntry(inst)
    # (a split by lengths the data gives, e.g. tokens per expert: its pieces move between two
    # infers of one binding)
    if node.index in fed or _shape_from_data(node):
        return GeneralEntry(inst)
    # shape-infer inputs read from the device or host are the recorded values when their
    # producers are replayed
    needs_replayed = all(inst.src_insts[j][0].node.index in replayed for j in inst.sym_need)
    recordable = inst.recordable or (needs_replayed and node.state_role is None and
                                     not inst.data_dependent and not (
                                         node.is_parameter or node.is_constant or node.is_result))
    if not recordable or inst.skip or node.inplace_concat or inst.data_dependent \
            or inst.concat_user is not None or not needs_replayed:
        return GeneralEntry(inst)
    # a skip decided on input values, not on shapes (an identity Gather): never replayed
    skip = node.row.skip
    if node.runtime_skippable and skip is not None and skip.reads_values \
            and not (skip.by_shapes is not None and skip.by_shapes(inst)):
        return GeneralEntry(inst)
    if inst.can_be_optimized:
        valid.add(node.index)
        replayed.add(node.index)
        return ViewEntry(inst)
    impl = inst.impl
    # (an impl of no launches: an MLP's up projection its down projection runs, fused_mlp)
    if node.has_kernel and impl is not None and not impl.host \
            and (inst.kernels or not impl.launches) and inst.out_shapes is not None:
        entry = KernelEntry(inst, valid)
        valid.add(node.index)
        replayed.add(node.index)
        return entry
    return GeneralEntry(inst)


def _elidable(node) -> bool:
    """A view :func:`_elide_views` may leave out: never owns memory (reshape-like, permuted,
    a split piece), no model output."""
    return not node.is_output and (node.row.always_view or node.permute_view is not None
                                   or (node.strided_view and node.row.strided.applies is None))


def elided_sources(nodes: list, present: set[int], index: int) -> list[int]:
    """The views upstream of node ``index`` that a step plan's entries (indices ``present``)
    left out (:func:`_elide_views`), inputs first: a primitive that takes the per-primitive
    path in a replay reads their shapes, which only the per-primitive path keeps current."""
    out: list[int] = []
    seen: set[int] = set()
    stack = [(nodes[index], False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            out.append(node.index)
            continue
        for src, _ in [*node.inputs, *node.fused_inputs]:
            if src.index not in present and src.index not in seen and _elidable(src):
                seen.add(src.index)
                stack.append((src, True))
                stack.append((src, False))
    return out


def _elide_views(entries: list, nodes: list) -> list:
    """``entries`` without the views that only replayed kernels (or other such views) read:
    those kernels' argument slots point at the buffer under the views, at the views' offsets.
    Only views that never own memory qualify (reshape-like, permuted, split pieces); the
    per-primitive path recomputes their state whenever it runs them again."""
    by_index = {e.index: e for e in entries}
    elided: dict[int, ViewEntry] = {}
    for e in reversed(entries):
        if type(e) is not ViewEntry:
            continue
        node = nodes[e.index]
        if not _elidable(node):
            continue
        # (a user fused into a primitive is read by that primitive, as a side input)
        readers = [by_index.get((u.fused_into or u).index) for lst in node.users for u, _ in lst]
        if all(r is None or type(r) is KernelEntry or r.index in elided for r in readers):
            elided[e.index] = e
    if not elided:
        return entries
    for e in entries:
        if type(e) is not KernelEntry:
            continue
        for n, (ln, buffers, ints, cints, slots) in enumerate(e.launches):
            new = []
            for b, i, si, k, off in slots:
                src = first = CHECKED - si if si <= CHECKED else si
                while src in elided:
                    view = elided[src]
                    off += view.views[k][0]
                    src, k = view.src, view.k
                if src != first:
                    si = src if type(by_index.get(src)) in (KernelEntry, ViewEntry) \
                        or nodes[src].is_parameter else CHECKED - src
                new.append((b, i, si, k, off))
            e.launches[n] = (ln, buffers, ints, cints, new)
    return [e for e in entries if e.index not in elided]


class StepPlan:
    """The flattened exec loop of one binding (module docstring)."""

    __slots__ = ("entries", "general", "n_kernels", "n_views", "n_fused", "n_launches",
                 "layout")

    def __init__(self, entries: list, n_views: int) -> None:
        self.entries = entries
        self.layout: tuple = ()  # the variables' layouts it ran with (state.layout_key)
        self.general = [e.index for e in entries if type(e) is GeneralEntry]
        kernels = [e for e in entries if type(e) is KernelEntry]
        self.n_kernels = len(kernels)
        self.n_views = n_views
        self.n_launches = sum(len(e.launches) for e in kernels)
        self.n_fused = 0

    @classmethod
    def build(cls, net: Network, order: list) -> StepPlan:
        """From the state the per-primitive path left after a symbolic infer (before its flags
        are reset)."""
        valid = {n.index for n in net.program.inputs}
        replayed = set(valid)
        shaped_by_data, fed = plan_sets(net.program)
        entries = [_entry(inst, valid, replayed, shaped_by_data, fed) for inst in order]
        n_views = sum(type(e) is ViewEntry for e in entries)
        entries = _elide_views(entries, net.program.nodes)
        plan = cls(entries, n_views)
        plan.n_fused = sum(net.insts[e.index].n_fused for e in plan.entries
                           if type(e) is KernelEntry)
        plan.layout = net.state.layout_key()
        return plan

    def run(self, net: Network, flush_every: int) -> None:
        """Replay on ``net`` (an infer request in symbolic mode with this plan's binding). The
        queue is flushed after the first FIRST_FLUSH entries (the device starts on the first
        kernels while the host enqueues the rest: a prompt's kernels outlast their enqueues),
        then every ``flush_every``."""
        insts = net.insts
        stats = net.stats
        launcher = net.launcher
        set_args, set_packed, launch = launcher.set_args, launcher.set_packed, launcher.launch
        record = net.predictor.record
        profiling = net.profiling
        queue = net.queue
        device_tensor = net.device_tensor
        state_step = net.state.step
        reuses = changed_prims = 0
        count = 0
        epoch, debug = net.epoch, net.debug
        for e in self.entries:
            inst = insts[e.index]
            t = type(e)
            if debug:
                net.reader = inst
            if t is KernelEntry:
                inst.in_shapes = e.in_shapes
                inst.values = e.values
                if e.skippable:
                    inst.can_be_optimized = False
                impl = e.impl
                new_impl = impl is not inst.impl
                if new_impl:  # (the per-primitive path's _set_impl, without its flag)
                    inst.impl = impl
                    kernels = inst.kernels_of.get(impl.sources)
                    inst.kernels = kernels if kernels is not None else inst.kernels_for(impl)
                    if e.weights:
                        inst.update_weights()
                cur = inst.out_shapes
                out = e.out
                if new_impl or (out is not cur and out != cur) or None in inst.own:
                    inst.out_shapes = out
                    own, cap, need = inst.own, inst.capacity, e.need
                    if len(need) == 1:
                        fits = reusable(own[0], cap[0], need[0])
                    else:
                        fits = all(reusable(own[i], cap[i], n) for i, n in enumerate(need))
                    if fits:  # realloc_if_needed's reuse, for every output
                        outputs, keys, dtypes = inst.outputs, e.keys, e.dtypes
                        for i, shape in enumerate(out):
                            record(keys[i], shape)
                            outputs[i] = Tensor(own[i], 0, shape, dtypes[i])
                        reuses += len(out)
                    else:
                        inst.realloc_if_needed()
                changed = False
                bufs = None
                if debug:
                    check_write(inst)
                for h, (ln, buffers, ints, cints, slots) in zip(inst.kernels, e.launches):
                    buffers = buffers.copy()
                    now = None  # the ints, when an offset differs from the recorded one
                    for b, i, si, k, off in slots:
                        if debug and si != WEIGHTS and si != IMPL_BUFFER and si != e.index:
                            check_read(net, insts[si if si >= 0 else CHECKED - si], k)
                        if si >= 0:
                            tensor = insts[si].outputs[k]
                        elif si <= CHECKED:
                            src = insts[CHECKED - si]
                            tensor = src.outputs[k]
                            if tensor is None or not src.device_valid[k]:
                                tensor = device_tensor(src, k)
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
                                now = ints.copy()
                            now[i] = v
                    if now is None:
                        if (buffers != h.bufs or cints is not h.ints) \
                                and set_packed(h, buffers, cints):
                            changed = True
                    elif set_args(h, buffers, now):
                        changed = True
                    ev = launch(h, ln)
                    if profiling and ev is not None:
                        inst.events.append(ev)
                if changed:
                    changed_prims += 1
                if e.single:
                    inst.device_valid[0] = True
                    inst.host_valid[0] = False
                else:
                    dv, hv = inst.device_valid, inst.host_valid
                    for i in range(len(dv)):
                        dv[i] = True
                        hv[i] = False
            elif t is ShapeEntry:
                inst.in_shapes = e.in_shapes
                inst.values = e.values
                inst.out_shapes = e.out
                hv, dv, host, outs = inst.host_valid, inst.device_valid, inst.host, inst.outputs
                for i, a in enumerate(e.host):
                    # an upload of this very array in a former replay is still on the device
                    dv[i] = dv[i] and host[i] is a and outs[i] is not None \
                        and outs[i].alloc is inst.own[i]
                    host[i] = a
                    hv[i] = True
                inst.executed_once = True
            elif t is ViewEntry:
                inst.in_shapes = e.in_shapes
                inst.values = e.values
                inst.out_shapes = e.out
                if e.skippable:
                    inst.can_be_optimized = True
                src = insts[e.src]
                if debug:
                    check_read(net, src, e.k)
                tensor = src.outputs[e.k]
                if tensor is None or not src.device_valid[e.k]:
                    tensor = device_tensor(src, e.k)
                inst.set_views(tensor, e.views)
            elif inst.plain and inst.recordable:
                inst.step_recorded()
            elif inst.state_role is not None:  # (an append's shape without shape inference)
                state_step(inst)
            else:
                inst.prepare()
                inst.execute()
            inst.stamp = epoch
            count += 1
            if count % flush_every == 0 or count == FIRST_FLUSH:
                queue.flush()
        stats["primitives"] += self.n_kernels
        stats["impl_cache_hits"] += self.n_kernels
        stats["kernels_enqueued"] += self.n_launches
        stats["skipped"] += self.n_views
        stats["fused"] += self.n_fused
        stats["reuses"] += reuses
        stats["set_arguments"] += changed_prims
