"""Per-request execution: a :class:`Network` of :class:`PrimitiveInst` over a shared
:class:`~netpass.runtime.program.Program`.

Each primitive, in exec order, runs the reference's sequence: runtime in-place concat (for its
concat user), ``update_shape``, zero-size / shape_of skips, runtime skip checks,
``update_impl`` (program-level LRU cache), ``update_weights``, ``realloc_if_needed``, setting
the kernel arguments that changed, then enqueue on the in-order queue (flushed every
FLUSH_EVERY primitives). A symbolic binding met again replays that sequence's outcome from its
:class:`~netpass.runtime.step_plan.StepPlan`. The host waits only to read a device value that a
shape needs, for a host fallback's inputs, and for the outputs.
"""
from __future__ import annotations

import gc
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..core.feeds import is_device_array
from ..core.gc_pause import promote_to_old_generation
from ..errors import AllocationError, NetpassError
from . import outputs
from .impls import Impl, Scratch, size
from .invariants import check_read
from .launcher import make_launcher
from .length_plan import FAMILIES, LengthFamily
from .length_steady import Steady
from .length_tape import Tape
from .memory import MemoryPool, Tensor
from .pending import Deferred
from .persistent import PersistentSteps
from .primitive import PrimitiveInst, primitive_error
from .primitive.update_shape import SYMBOLIC_RECORDS
from .program import Program
from .program_node import ProgramNode
from .shape_predictor import ShapePredictor
from .staging import PinnedStaging, enqueue_reads, new_host_array
from .state import VariableStore
from .step_plan import StepPlan
from .symbolic import SymbolicShapes

FLUSH_EVERY = 64  # (NVIDIA H200, GPT loop: every 16 costs 7% more host time than 64)
SYMBOLIC_CHECKS = 2  # distinct input-shape bindings checked against full shape inference
SEEN = object()  # Network step plans: a binding met once, no plan built yet
STAT_KEYS = ("allocations", "allocated_bytes", "reuses", "pool_hits", "reclaims",
             "impl_cache_hits", "impl_cache_misses", "kernel_builds", "weight_reorders",
             "skipped", "fused", "shape_updates", "host_waits", "host_fallbacks",
             "kernels_enqueued", "set_arguments", "primitives", "infers", "symbolic_infers",
             "state_allocations", "state_appends", "length_replays", "steady_steps",
             "persistent_launches", "persistent_phases")


class Network:
    """One infer request's primitives, memory pool, predictor, kernel objects, command queue
    and counters."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        self.program: Program = compiled.program
        self.engine = compiled.engine
        self.queue = self.engine.new_queue()
        self.launcher = make_launcher(self.engine, self.queue)
        # large reads go through pinned memory where the device's memory is not the host's
        self.staging = None if self.engine.host_memory else PinnedStaging(self.engine, self.queue)
        self.kernel_objects: dict = {}  # (node index, launch slot, source) -> KernelHandle
        self.profiling = compiled.profiling
        self.stats: dict[str, Any] = dict.fromkeys(STAT_KEYS, 0)
        self.stats["host_fallback_kinds"] = {}
        self.stats["host_wait_s"] = 0.0
        if self.profiling:
            self.stats["primitive_times_us"] = {}
        eng = self.engine
        self.predictor: ShapePredictor = compiled.make_predictor(
            max_global_mem_size=eng.max_global_mem_size, max_alloc_mem_size=eng.max_alloc_mem_size,
            used_device_memory=lambda: eng.used_device_memory)
        self.pool = MemoryPool(self._pool_alloc)
        self.weights_cache_capacity = compiled.weights_cache_capacity
        self.max_output_bytes = compiled.max_output_bytes
        self.zero_copy_min_bytes = max(outputs.ZERO_COPY_MIN_BYTES, 1)
        self.insts = [PrimitiveInst(self, n) for n in self.program.nodes]
        for inst in self.insts:
            node = inst.node
            if node.fused_into is not None:  # the chain predecessor whose output it is
                src = next(s for s, _ in node.inputs
                           if s is node.fused_into or s.fused_into is node.fused_into)
                inst.fused_src = self.insts[src.index]
        for inst in self.insts:
            node = inst.node
            # fused primitives never run: their users read the producer's output directly
            inst.src_insts = [self.resolve(self.insts[s.index], k) for s, k in node.inputs]
            inst.extra_insts = [self.resolve(self.insts[s.index], k) for s, k in node.fused_inputs]
            inst.computed_extras = [r for r, (s, _) in zip(inst.extra_insts, node.fused_inputs)
                                    if not s.is_constant]
            inst.shape_of_insts = [self.insts[so.index] for so in node.dependant_shape_ofs]
        # constants, inputs (set from the user's arrays) and results (read from their source)
        # have nothing to do per primitive
        for r in self.program.outputs:  # which primitive holds each network output
            holder, k = self.resolve(self.insts[r.inputs[0][0].index], r.inputs[0][1])
            holder.result_names.setdefault(k, r.name)
            # written in place where device memory is host memory: a buffer of its own (not
            # a view, not an FC's fake-aligned one, not an input's or a constant's)
            holder.zero_copy[k] = self.engine.host_memory and holder.node.has_kernel \
                and not holder.fc_related and not holder.node.row.always_view \
                and not holder.node.runtime_skippable and holder.node.permute_view is None \
                and not holder.node.in_shape_of_subgraph and not holder.node.strided_view
        # which primitive output holds each network output (read by every infer)
        self.output_refs = [self.resolve(self.insts[r.inputs[0][0].index], r.inputs[0][1])
                            for r in self.program.outputs]
        self.order = [self.insts[n.index] for n in self.program.exec_order
                      if not (n.is_constant or n.is_parameter or n.is_result)
                      and n.fused_into is None]
        sym = self.program.symbolic
        live = {id(n) for n in sym.order}
        self.sym_order = [i for i in self.order if id(i.node) in live]
        for inst in self.insts:
            n = inst.node
            for j in n.sym_deps:
                s, k = n.inputs[j]
                if id(s) not in live:
                    src = self.insts[s.index]
                    src.node_static_shapes = SymbolicShapes.static_shapes(s)
                    if j in n.data_inputs():  # (a reader of the value only has it already)
                        inst.sym_feeds[j] = (src, k)
        self.binding: dict | None = None        # symbol values of this infer (symbolic mode)
        self.check_binding: dict | None = None  # full path, checked against substitution
        self.was_symbolic = False
        self.active_order = self.order  # the primitives the last infer went through
        self.debug = compiled.debug_checks  # invariants.check_read on every read
        # a decode step's launches gathered into persistent kernels (made at the first tape
        # step)
        self.persistent: PersistentSteps | None = None
        self.epoch = 0  # infers begun; PrimitiveInst.stamp says which produced an output
        self.reader: PrimitiveInst | None = None  # (debug mode) the primitive running now
        # id(impl) -> (impl, its uploaded buffers): the impl is kept so that its id is not
        # reused by another impl while the entry stands (an impl the cache evicted is freed)
        self._impl_bufs: dict[int, tuple[Impl, list]] = {}
        self._scratch: dict[tuple, object] = {}  # (size class, slot) -> allocation (scratch)
        self.state: VariableStore = VariableStore(self)  # this request's variables
        self.last_named: tuple | None = None  # the last symbolic binding's named values
        self.layout: tuple = ()  # the variables' layouts at this inference (state.layout_key)
        self.binding_values: tuple = ()  # the input dims' binding (records are keyed by it)
        self.tapes: dict = {}  # id(length family) -> this request's length_tape.Tape of it
        # advanced whenever a primitive's buffers may have changed (allocations, releases, a
        # pool record handed out) or an inference ran outside a tape: length_tape's groups
        self.mem_epoch = 0
        # this inference continues a sequence its variables hold (a decoding loop's step): no
        # buffer is reclaimed, the prompt's stay for the next prompt
        self.decoding = False
        self.length_key: tuple | None = None  # this inference's length family key
        # the steady step the last inference left (length_steady), tried before anything else
        self.steady: Steady | None = None
        self.later: Deferred | None = None  # an enqueued inference's end (pending.Deferred)

    @staticmethod
    def resolve(inst: PrimitiveInst, k: int) -> tuple[PrimitiveInst, int]:
        """The instance that really holds output ``k`` of ``inst`` (a fused op's producer)."""
        while inst.fused_src is not None:
            inst, k = inst.fused_src, 0
        return inst, k

    def close(self) -> None:
        """Drop the links back to this network (primitives, pool), so that reference counting
        frees it and its device buffers as soon as its request is gone."""
        for inst in self.insts:
            inst.net = None
        self.pool = None
        self.state = None
        self.steady = None
        self.compiled.give_back_kernels(self.kernel_objects)
        self.kernel_objects = {}

    # -- memory -----------------------------------------------------------------------------------
    def count_alloc(self, alloc) -> None:
        self.mem_epoch += 1
        self.stats["allocations"] += 1
        self.stats["allocated_bytes"] += alloc.nbytes

    def _pool_alloc(self, nbytes: int):
        alloc = self.engine.allocate(nbytes)
        self.count_alloc(alloc)
        return alloc

    def allocate_output(self, node: ProgramNode, nbytes: int):
        """Outputs of the network and nodes that must not share come straight from the engine;
        everything else from the pool (restricted by overlapping lifetimes)."""
        self.mem_epoch += 1
        if node.is_output or node.in_shape_of_subgraph:
            alloc = self.engine.allocate(nbytes, what=f"{node.kind} '{node.name}'")
            self.count_alloc(alloc)
            return alloc
        before = self.pool.hits
        alloc, _ = self.pool.get_memory(nbytes, id(node), node.restrictions, node.is_dynamic)
        if self.pool.hits != before:
            self.stats["pool_hits"] += 1
        return alloc

    def impl_buffers(self, impl: Impl) -> list:
        entry = self._impl_bufs.get(id(impl))
        bufs = entry[1] if entry is not None and entry[0] is impl else None
        if bufs is None:
            bufs = []
            for slot, arr in enumerate(impl.buffers):
                if isinstance(arr, Scratch):
                    bufs.append(self.scratch(arr.nbytes, slot))
                    continue
                alloc = self.engine.upload(arr, queue=self.queue)
                self.count_alloc(alloc)
                bufs.append(alloc)
            if len(self._impl_bufs) > 256:
                self._impl_bufs.clear()
            self._impl_bufs[id(impl)] = (impl, bufs)
        return bufs

    def scratch(self, nbytes: int, slot: int = 0):
        """A device buffer of at least ``nbytes`` that no tensor owns (impls.Scratch), one per
        power-of-two size class and impl buffer position, shared by every primitive of this
        request."""
        size = 1 << max(int(nbytes) - 1, 0).bit_length()
        alloc = self._scratch.get((size, slot))
        if alloc is None:
            alloc = self._scratch[(size, slot)] = self.engine.allocate(size, what="GEMM scratch")
            self.count_alloc(alloc)
        return alloc

    def device_tensor(self, inst: PrimitiveInst, k: int) -> Tensor | None:
        """The device tensor of ``inst`` output ``k``, uploading a host value when needed."""
        if self.debug:
            check_read(self, inst, k)
        if inst.device_valid[k] and inst.outputs[k] is not None:
            return inst.outputs[k]
        node = inst.node
        if node.is_constant:
            t = self.compiled.constant_tensor(node)
            inst.outputs[k] = t
            inst.device_valid[k] = True
            return t
        if inst.host_valid[k]:
            return self.upload(inst, k)
        if inst.outputs[k] is not None:
            return inst.outputs[k]
        raise NetpassError(f"{node.kind} '{node.name}': output {k} has no value yet")

    def upload(self, inst: PrimitiveInst, k: int, into: Tensor | None = None) -> Tensor:
        a = inst.host[k]
        if into is None:
            need = max(a.size, 1)
            key = inst.node.id + "_upload"
            if inst.own[k] is not None and inst.capacity[k] >= need:
                # (predict_preallocation_shape of a reusable buffer: the shape recorded)
                self.predictor.record(ShapePredictor.key(key, k), a.shape)
            else:
                ok, pshape = self.predictor.predict_preallocation_shape(
                    key, a.shape, a.dtype.itemsize * 8, False, k)
                if ok and self.predictor.can_preallocate(size(pshape) * a.dtype.itemsize):
                    need = max(need, size(pshape))
                inst._release_own(k)
                alloc = self.engine.allocate(need * a.dtype.itemsize)
                self.count_alloc(alloc)
                inst.own[k] = alloc
                inst.capacity[k] = alloc.nbytes // a.dtype.itemsize
            into = Tensor(inst.own[k], 0, tuple(a.shape), a.dtype)
        if a.size:  # (inst.host keeps ``a`` alive until the copy has run)
            self.launcher.write(into.alloc.buffer, into.offset * a.dtype.itemsize, a)
        inst.outputs[k] = into
        inst.device_valid[k] = True
        return into

    def host_values(self, refs: list[tuple[PrimitiveInst, int]]) -> list[np.ndarray]:
        """Host arrays of the given outputs; device values are read back with one wait (large
        ones through the request's pinned region: :mod:`~netpass.runtime.staging`). The wait
        is timed from the first read: a read enqueue may itself block until the queue has run
        (PoCL does), so timing ``finish`` alone would count device time as host time."""
        if self.debug:
            for inst, k in refs:
                check_read(self, inst, k)
        pending = []  # (inst, k, array, byte offset in the buffer)
        for inst, k in refs:
            if not inst.host_valid[k]:
                t = inst.outputs[k]
                if t is None:
                    raise NetpassError(f"{inst.node.kind} '{inst.node.name}': no value for "
                                       f"output {k}")
                arr = t.alloc.host
                if arr is not None and t.offset == 0 and t.strides is None and arr.shape == t.shape:
                    # the buffer's memory is the array: a read onto itself (in-order queue)
                    pending.append((inst, k, arr, 0))
                else:
                    pending.append((inst, k, new_host_array(t, inst, k),
                                    t.offset * t.dtype.itemsize))
        if not pending:
            return [inst.host[k] for inst, k in refs]
        t0 = time.perf_counter()
        reads = [(a, inst.outputs[k].alloc.buffer, off) for inst, k, a, off in pending]
        staged = enqueue_reads(self.launcher, self.staging, reads)
        self.launcher.finish()
        self.stats["host_wait_s"] += time.perf_counter() - t0
        self.stats["host_waits"] += 1
        for arr, into in staged:
            arr.reshape(-1).view(np.uint8)[:] = into
        for inst, k, arr, _ in pending:
            t = inst.outputs[k]
            if t.strides is not None:  # a permuted view: gather it from the region read
                it = arr.itemsize
                arr = np.lib.stride_tricks.as_strided(
                    arr, t.shape, tuple(s * it for s in t.strides)).copy()
            inst.host[k] = arr
            inst.host_valid[k] = True
        return [inst.host[k] for inst, k in refs]

    # -- a whole inference ------------------------------------------------------------------------
    def set_input(self, inst: PrimitiveInst, arr: Any) -> None:
        """Input ``inst`` takes ``arr``: a host array, or a DeviceTensor copied on the device
        (one of another context is read back first)."""
        node = inst.node
        on_device = is_device_array(arr)
        if on_device and arr.engine is not self.engine:
            arr, on_device = np.asarray(arr), False
        shape = tuple(arr.shape)
        inst.shape_changed = shape != (inst.out_shapes[0] if inst.out_shapes else None)
        inst.out_shapes = [shape]
        inst.stamp = self.epoch
        inst.host[0] = None if on_device else arr
        inst.host_valid[0] = not on_device
        need = max(arr.size, 1)
        can_reuse = inst.own[0] is not None and need <= inst.capacity[0]
        if not can_reuse:
            ok, pshape = self.predictor.predict_preallocation_shape(node.id, shape,
                                                                    arr.dtype.itemsize * 8, False)
            elements = need
            if ok and self.predictor.can_preallocate(size(pshape) * arr.dtype.itemsize):
                elements = max(elements, size(pshape))
            inst._release_own(0)
            alloc = self.engine.allocate(elements * arr.dtype.itemsize)
            self.count_alloc(alloc)
            inst.own[0] = alloc
            inst.capacity[0] = elements
        else:  # (predict_preallocation_shape with a reusable buffer: the shape recorded)
            self.predictor.record(node.id, shape)
        inst.outputs[0] = Tensor(inst.own[0], 0, shape, arr.dtype)
        if on_device:
            if arr.size:
                self.launcher.copy(inst.own[0].buffer, arr.alloc.buffer, arr.nbytes)
        elif arr.size:  # (inst.host keeps ``arr`` alive until the copy has run)
            self.launcher.write(inst.own[0].buffer, 0, arr)
        inst.device_valid[0] = True

    def _choose_mode(self, feeds: Mapping[str, np.ndarray]) -> list[PrimitiveInst]:
        """Symbolic mode when the inputs bind the program's symbols consistently and the
        compiled model's substitution has been checked on enough distinct bindings, or on
        this very binding (until then the full path runs and checks it: a model always fed
        one shape takes the symbolic path from its second infer); the exec order of the
        chosen mode."""
        sym, compiled = self.program.symbolic, self.compiled
        binding = None
        if sym.active and compiled.symbolic_ok:
            shapes = [feeds[name].shape for name in compiled.inputs]
            binding = sym.bind(shapes + self.state.read_shapes(shapes))
        self.binding = self.check_binding = None
        if binding is not None:
            if len(compiled.symbolic_checked) < SYMBOLIC_CHECKS and \
                    tuple(binding.values()) not in compiled.symbolic_checked:
                self.check_binding = binding
            else:
                self.binding = binding
        symbolic = self.binding is not None
        # (the variables' layouts too: their readers' implementations depend on the strides;
        # _length_family reads them again)
        self.layout = self.state.layout_key() if symbolic else ()
        self.binding_values = tuple(self.binding.values()) if symbolic else ()
        self.binding_key = self.binding_values + self.layout if symbolic else None
        if not symbolic:
            self.last_named = None
        if symbolic != self.was_symbolic:  # (nodes that did not run in the other mode)
            for inst in self.insts:
                inst.forget_shapes(symbolic)
            self.was_symbolic = symbolic
        return self.sym_order if symbolic else self.order

    def execute(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One inference. The cyclic garbage collector is paused meanwhile (``gc_paused``,
        written out: its context manager costs about 2 us per infer): an infer makes no
        reference cycles, and collections triggered inside it would rescan the whole model
        and program (a quarter of a first pass over new shapes went there)."""
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._execute(feeds)
        except BaseException:
            self._forget_failed_inference()
            raise
        finally:
            if was_enabled:
                promote_to_old_generation()
                gc.enable()

    def _forget_failed_inference(self) -> None:
        """An inference stopped part way (a shape an op refuses, out of memory): the primitives
        before the failure remember the new shapes and values, those after it the old ones,
        and none had its flags reset. Left so, the next inference skips what looks unchanged
        and reads stale shape values (the lengths of a split computed from the failed size),
        so everything remembered is forgotten and the next one recomputes it."""
        for inst in self.insts:
            inst.forget_shapes(self.was_symbolic)
            inst.reset_flags()

    def _execute(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.epoch += 1
        steady, self.steady = self.steady, None
        if steady is not None and steady.run(self, feeds):
            results = self._finish()
            steady.seal(self)
            self.steady = steady
            return results
        self.decoding = self.state.begin()
        for p in self.program.inputs:
            self.set_input(self.insts[p.index], feeds[p.name])
        order = self.active_order = self._choose_mode(feeds)
        symbolic = self.binding is not None
        plans = self.compiled.step_plans
        use_plans = symbolic and self.compiled.use_step_plans
        plan = plans.get(self.binding_key) if use_plans else None
        if use_plans and not self.decoding and (plan is None or plan is SEEN):
            plan = self._new_request_plan(plans) or plan  # (a new request's holds no state)
        if type(plan) is StepPlan and None in self.layout \
                and not self.state.take_layout(plan.layout):
            plan = None  # (this request's caches cannot have the strides the plan reads)
        family, t = self._length_family() if use_plans else (None, 0)
        replay = plan if plan is not None and plan is not SEEN else \
            family if family is not None and family.ready else None
        if replay is not family:
            self.mem_epoch += 1  # (the per-primitive path may set other kernel arguments)
        if replay is not None:
            try:
                if replay is family and family is not None:
                    ran = self._replay_length(family, t)
                else:
                    plan.run(self, FLUSH_EVERY)
                    ran = plan.general
            except NetpassError:
                raise
            except MemoryError as e:
                raise AllocationError(f"replaying the step plan of binding {self.binding_key}: "
                                      f"out of memory ({e})") from e
            except Exception as e:
                raise NetpassError(f"replaying the step plan of binding {self.binding_key} failed: "
                                   f"{type(e).__name__}: {e}") from e
            insts = self.insts
            for i in ran:  # (the primitives that ran the per-primitive path)
                insts[i].reset_flags()
        else:
            self._run_order(order, symbolic)
            # (a plan or a sample is kept under the variables' layouts before the inference)
            if use_plans and not self.state.layout_moved(self.layout):
                # a plan is built when a binding comes back (a decoder with past keys and
                # values meets each length once: its steps sample a length family instead),
                # also when it was met under other layouts of the variables (a prompt after
                # reset_state in a request whose caches grew past a new request's), and at a
                # new request's first prompt: its next prompt meets the buffers this one
                # sized, a key never seen, and replays this plan (_new_request_plan)
                met = self.compiled.plan_bindings
                again = plan is SEEN or plan is None and (
                    self.binding_values in met or self._new_buffers())
                built = StepPlan.build(self, order) if again or family is not None else None
                self.compiled.store(plans, self.binding_key, built if again else SEEN,
                                    SYMBOLIC_RECORDS)
                self.compiled.store(met, self.binding_values, True, SYMBOLIC_RECORDS)
                if family is not None:
                    with self.compiled.lock:
                        family.add_sample(self, t, built)
            for inst in order:  # (inputs' flags are set again by set_input)
                inst.reset_flags()
        results = self._finish()
        if self.steady is not None:
            self.steady.seal(self)
        return results

    def _new_request_plan(self, plans: dict) -> StepPlan | None:
        """The plan new requests (no buffers for their variables yet) built for this binding,
        where the buffers they got have this request's layout (a prompt after ``reset_state``
        in a request whose caches a new request's prompt sized: the plan's kernels use the
        same strides); None otherwise."""
        layout = self.layout
        if not layout or all(v is None for v in layout):
            return None
        plan = plans.get(self.binding_values + (None,) * len(layout))
        return plan if type(plan) is StepPlan and plan.layout == layout else None

    def _new_buffers(self) -> bool:
        """Whether this inference gave the variables their first buffers (a new request's
        first sequence)."""
        layout = self.layout
        return bool(layout) and all(v is None for v in layout) and \
            any(v is not None for v in self.state.layout_key())

    def _replay_length(self, family: LengthFamily, t: int) -> list[int]:
        """A length family's step: through this request's tape of it, else entry by entry,
        recording the tape (not while checking invariants or profiling: the tape leaves out
        the stamps and events of what it does not run). The node indices that ran the
        per-primitive path (their flags to reset)."""
        self.stats["length_replays"] += 1
        tape = self.tapes.get(id(family))
        if tape is not None and tape.family is family and not self.debug and not self.profiling:
            tape.run(self, t)
            self.steady = Steady.build(self, tape, family, t)
            return tape.general
        family.run(self, t, FLUSH_EVERY)
        if not self.debug and not self.profiling:
            self.tapes[id(family)] = Tape(self, family)
        return family.general

    def persistent_for_tape(self) -> PersistentSteps | None:
        """The request's persistent launches (config PERSISTENT_STEPS), made when first
        asked for; None when off."""
        if self.persistent is None and self.compiled.persistent_steps:
            self.persistent = PersistentSteps(self)
        return self.persistent

    def _length_family(self) -> tuple[LengthFamily | None, int]:
        """The length family of this inference's binding (length_plan), and its ``t``."""
        lp = self.compiled.length_plans
        key, self.last_named, t = lp.key(self.binding, self.last_named, self.layout)
        self.length_key = key
        if key is None or not self.state.room_for(self.binding):
            return None, t
        # (families of one key over the ranges of t their host values hold in turn)
        span = 0
        family = lp.families.get((key, span))
        while family is not None and not family.holds(t):
            span += 1
            family = lp.families.get((key, span))
        if family is None:
            family = LengthFamily()
            self.compiled.store(lp.families, (key, span), family, FAMILIES)
        return family, t

    def _run_order(self, order: list[PrimitiveInst], symbolic: bool) -> None:
        """The per-primitive path over ``order``."""
        epoch, debug = self.epoch, self.debug
        for count, inst in enumerate(order, 1):
            if debug:
                self.reader = inst
            try:
                if symbolic and inst.plain and inst.recordable:
                    inst.step_recorded()
                else:
                    inst.prepare()
                    inst.execute()
            except NetpassError:
                raise
            except Exception as e:
                raise primitive_error(inst, e) from e
            inst.stamp = epoch
            if count % FLUSH_EVERY == 0:
                self.queue.flush()

    def _finish(self) -> dict[str, np.ndarray]:
        """Commit the variables, read the outputs (one host wait; an enqueued inference's
        without one: ``later``, before the commit: its errors leave the variables as they
        were), collect profiling times, count the infer."""
        self.reader = None
        results: dict[str, np.ndarray] = {}
        if self.later is not None:
            self.later.enqueue_end(self)
            self.state.commit()
        else:
            self.state.commit()
            results = self._read_outputs()
        if self.profiling:
            for inst in self.order:
                inst.add_event_times(self.stats["primitive_times_us"])
        self.stats["infers"] += 1
        if self.binding is not None:
            self.stats["symbolic_infers"] += 1
        elif self.check_binding is not None and self.compiled.symbolic_ok:
            self.compiled.symbolic_check_passed(tuple(self.check_binding.values()))
        return results

    def _read_outputs(self) -> dict[str, np.ndarray]:
        """The outputs, read with one wait. Arrays the request keeps (constants, shape_of
        values it reuses), the caller's (an input returned as an output) or returned twice
        are copied; an array written in place is handed over (its primitive gets a new one
        next time)."""
        results = {}
        persistent = self.persistent
        if persistent is not None:
            persistent.before_wait()
        arrays = self.host_values(self.output_refs)
        if persistent is not None:
            persistent.after_wait()
        given: set[int] = set()
        for r, (inst, k), a in zip(self.program.outputs, self.output_refs, arrays):
            if id(a) in given or inst.keeps_host_arrays:
                a = a.copy()
            else:
                inst.hand_over(k, a)
            given.add(id(a))
            results[r.name] = a
        return results
