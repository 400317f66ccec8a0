"""Compiled models and infer requests: the public face of the runtime."""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Collection, Hashable, Mapping
from typing import Any

import numpy as np

from ..core.feeds import FeedSpec, check_feeds, owned_outputs
from ..core.gc_pause import gc_paused
from ..core.state_lengths import StateLength, check_rules, check_state_lengths, read_state_lengths
from ..core.types import Type
from ..errors import (
    SYSTEM_ERRORS,
    DeviceError,
    HostFallbackError,
    NetpassError,
    RuntimeInvariantError,
    system_error_as_netpass,
    system_errors_as_netpass,
)
from ..ops.state import Assign, ReadValue, VariableInfo, variable_order
from ..reference import VariableState, in_variable_order
from . import impls
from .async_queue import AsyncInferRequest, RequestBusyError
from .device import Engine, resolve_device_name, select_device
from .device_tensor import DeviceTensor
from .invariants import debug_checks
from .kernels import mma_bfrag
from .launcher import kernel_handle
from .length_plan import LengthPlans
from .lru import LruCache
from .memory import Tensor
from .network import STAT_KEYS, Network
from .outputs import max_output_bytes
from .pending import Deferred, PendingInference
from .persistent import persistent_steps
from .program import Program
from .program_node import ProgramNode
from .shape_infer import infer_host
from .shape_predictor import ShapePredictor, parse_options

DEFAULT_IMPLS_CACHE_CAPACITY = 300
FREE_KERNELS_PER_KEY = 4  # kernel objects of closed requests kept per (node, launch, source)

PRECISIONS = ("f32", "tf32")
MLP_FUSIONS = ("gated", "all", "none")


def inference_precision(cfg: Mapping[str, Any]) -> str:
    """Config ``INFERENCE_PRECISION_HINT``: ``"f32"`` (default) or ``"tf32"`` (float32 matrix
    products on TF32 tensor cores where the device has them, as torch's ``allow_tf32``; the
    Hopper GEMM's fused ``tanh`` at the hardware's approximation, of TF32's order)."""
    value = str(cfg.get("INFERENCE_PRECISION_HINT", "f32")).lower()
    if value not in PRECISIONS:
        raise NetpassError(f"config INFERENCE_PRECISION_HINT '{cfg['INFERENCE_PRECISION_HINT']}': "
                           f"expected one of {', '.join(PRECISIONS)}")
    return value


def mlp_fusion(cfg: Mapping[str, Any]) -> str:
    """Config ``DECODE_MLP_FUSION``: the MLPs whose two projections a single-row step runs in
    one launch (:mod:`~netpass.runtime.fused_mlp`): ``"gated"`` (default: LLaMA-style gated
    MLPs), ``"all"`` (GPT-2-style ones too: one launch fewer a layer, but on the H200 a GPT-2
    step took 3% more device time than with the two GEMVs), or ``"none"``."""
    value = str(cfg.get("DECODE_MLP_FUSION", "gated")).lower()
    if value not in MLP_FUSIONS:
        raise NetpassError(f"config DECODE_MLP_FUSION '{cfg['DECODE_MLP_FUSION']}': expected one "
                           f"of {', '.join(MLP_FUSIONS)}")
    return value


def projection_fusion(cfg: Mapping[str, Any]) -> bool:
    """Config ``DECODE_PROJECTION_FUSION``: whether a decode step's attention runs inside its
    output projection's launch (:mod:`~netpass.runtime.attention_proj`: one launch fewer a
    layer). Off by default: on the H200 the folded kernel's projection, one work-group per
    head reading its columns of the weights, made GPT-2 and LLaMA steps slower than two
    launches (BENCHMARKS.md, stateful decoding, thirty-fourth round). Never with
    ``PERSISTENT_STEPS`` (the folded kernel has no phase form)."""
    return bool(cfg.get("DECODE_PROJECTION_FUSION", False)) and not persistent_steps(dict(cfg))


class RuntimeCompiledModel:
    """A program on one device. ``inputs``/``outputs`` are the model's input and output
    names; ``create_infer_request()`` makes an independent request.

    Requests share only what does not change once made, or what a lock guards: the program,
    the built OpenCL programs (on the engine), the implementations cache (``Impl`` objects
    are not changed after creation), the uploaded constants, descriptor ids, step plans (as
    templates: :mod:`~netpass.runtime.step_plan`) and per-binding records (``sym_records``:
    shapes, values, implementation). Everything a request changes is its own: memory, pool,
    predictor, kernel objects and the arguments set on them, its command queue, counters.
    So any number of requests run in any order, from any threads, each giving the outputs it
    would give alone."""

    def __init__(self, program: Program, engine: Engine | None,
                 config: Mapping[str, Any] | None = None, model: Any = None) -> None:
        cfg = dict(config or {})
        self.program = program
        self.engine = engine
        self.model = model
        # query_state()'s order: the model's variables (variable_order), else the program's
        self.variable_order = variable_order(model) if model is not None else \
            list(dict.fromkeys(r.state_var for r in program.reads if r.state_var is not None))
        self.profiling = bool(cfg.get("PROFILING", False))
        self.precision = inference_precision(cfg)
        # HOST_FALLBACK False: ops without a device kernel refuse to compile (or to run, where
        # only the shapes met at run time decide) instead of running on the host
        self.host_fallback = bool(cfg.get("HOST_FALLBACK", True))
        if not self.host_fallback and engine is not None:
            host_only = program.host_fallbacks()
            if host_only:
                raise HostFallbackError(host_only)
        # guards what the requests share and change: the implementations cache, descriptor
        # ids, constants, step plans, per-binding records and the symbolic checks
        self.lock = threading.Lock()
        self.impl_cache = LruCache(int(cfg.get("IMPLS_CACHE_CAPACITY",
                                               DEFAULT_IMPLS_CACHE_CAPACITY)))
        self.predictor_options = cfg.get("MEM_PREALLOCATION_OPTIONS")
        self.weights_cache_capacity = self._weights_cache_capacity()
        self._constants: dict[int, Tensor] = {}
        self._reordered: dict[tuple, Tensor] = {}  # (weights node, layout) -> reordered copy
        self.desc_ids: dict = {}  # (kind, attrs, fused, dtypes) -> small int used in impl keys
        self.step_plans: dict = {}  # binding -> step_plan.StepPlan, or network.SEEN (met once)
        # the input bindings of step_plans' keys, without the variables' layouts
        self.plan_bindings: dict = {}
        self._free_kernels: dict = {}  # kernel key -> KernelHandles closed requests left
        self.use_step_plans = bool(cfg.get("STEP_PLANS", True))
        self.persistent_steps = persistent_steps(cfg) and engine is not None
        self.length_plans = LengthPlans(program)  # families of decoding steps (length_plan)
        self.debug_checks = debug_checks(cfg)
        self.max_output_bytes = max_output_bytes(cfg)
        # symbolic shapes (netpass.runtime.symbolic): off for good after one mismatch with
        # full shape inference; on once SYMBOLIC_CHECKS distinct bindings have agreed
        self.symbolic_ok = bool(cfg.get("SYMBOLIC_SHAPES", True))
        self.symbolic_checked: set = set()
        self.inputs = [n.name for n in program.inputs]
        # what each input accepts (the program's inputs never change): checked every infer
        self.feed_specs = [FeedSpec(n.name, n.out_dtypes[0], n.out_pshapes[0])
                           for n in program.inputs]
        self.outputs = [n.name for n in program.outputs]
        self.device = engine.describe() if engine is not None else "REFERENCE (numpy)"
        self.state_lengths = self._state_lengths(model)

    def _state_lengths(self, model: Any) -> tuple[StateLength, ...]:
        """The rules of a stateful ``model``'s rt_info (:mod:`netpass.core.state_lengths`),
        checked against the program's inputs and variables; a Program carries none (so
        ``compile_model``'s runtime, which the compiled model's requests check, has none)."""
        rules = read_state_lengths(model.rt_info) if model is not None else ()
        if rules:
            check_rules(rules, {n.name: n.out_pshapes[0] for n in self.program.inputs},
                        {r.state_var: r.out_pshapes[0] for r in self.program.reads
                         if r.is_a(ReadValue) and r.state_var is not None})
        return rules

    def _weights_cache_capacity(self) -> int:
        """min(device memory / constant bytes, 3), at least 1 (the reference's rule)."""
        if self.engine is None:
            return 1
        need = sum(n.value.nbytes for n in self.program.nodes
                   if n.is_constant and n.value is not None)
        if need and self.engine.max_global_mem_size // need > 1:
            return int(min(self.engine.max_global_mem_size // need, 3))
        return 1

    def make_predictor(self, **limits: Any) -> ShapePredictor:
        opts = self.predictor_options
        if opts is None:
            return ShapePredictor.from_env(**limits)
        if isinstance(opts, str):
            opts = parse_options(opts)
        return ShapePredictor(*opts, **limits)

    def constant_tensor(self, node: ProgramNode) -> Tensor:
        """Constants are uploaded once per compiled model, on first use by a kernel (a
        blocking copy: every request's queue may read them at once)."""
        t = self._constants.get(node.index)
        if t is None:
            with self.lock:
                t = self.constant_tensor_unlocked(node)
        return t

    def constant_tensor_unlocked(self, node: ProgramNode) -> Tensor:
        """:meth:`constant_tensor` with ``lock`` held by the caller."""
        t = self._constants.get(node.index)
        if t is None:
            if self.engine is None:  # (kernels, hence constants' uploads, need one)
                raise RuntimeInvariantError(f"constant '{node.name}' uploaded without a device")
            arr = np.asarray(node.value, order="C")
            alloc = self.engine.upload(arr)
            t = Tensor(alloc, 0, tuple(arr.shape), arr.dtype)
            self._constants[node.index] = t
        return t

    def reordered_weights(self, node: ProgramNode, layout: tuple,
                          folded_into: ProgramNode | None = None,
                          frag: int = 0) -> tuple[Tensor, bool]:
        """A FullyConnected's constant weights ``node`` (``[N, K]``) reordered to ``[K, N]``,
        once per compiled model and layout, on the engine's queue with a wait (every request
        reads them, from any queue, as the constants); with ``folded_into`` (the normalized
        FullyConnected reading them) the LayerNorm's vectors folded in on the host instead
        (``NormDesc.folded_weights``); with ``frag`` ``[K, N]`` in mma.sync fragment order of
        that panel width, on the host (``kernels.mma_bfrag.swizzle``). (the tensor, whether
        this call made it)."""
        key = (node.index, layout, folded_into.index if folded_into is not None else None)
        t = self._reordered.get(key)
        if t is not None:
            return t, False
        with self.lock:
            t = self._reordered.get(key)
            if t is not None:
                return t, False
            eng, w = self.engine, node.value
            if eng is None or w is None:  # (kernels, hence reorders, need one; a constant)
                raise RuntimeInvariantError(f"weights '{node.name}' reordered without a device "
                                            "or a value")
            if frag:  # (on the host, uploaded as the constants are)
                frags = mma_bfrag.swizzle(np.asarray(w).reshape(w.shape[0], -1).T, frag)
                t = Tensor(eng.upload(frags), 0, frags.shape, frags.dtype)
                self._reordered[key] = t
                return t, True
            if folded_into is not None:  # (uploaded as the constants are)
                folded = folded_into.subgraph.folded_weights(folded_into)
                t = Tensor(eng.upload(folded), 0, folded.shape, folded.dtype)
                self._reordered[key] = t
                return t, True
            n_, k_ = w.shape[0], impls.size(w.shape[1:])
            src = self.constant_tensor_unlocked(node)
            t = Tensor(eng.allocate(w.nbytes, what=f"the reordered weights of '{node.name}'"),
                       0, (k_, n_), w.dtype)
            ln = impls.strided_copy(w.dtype, (k_, n_), [1, k_], 0, [n_, 1], 0, 0, 0)
            h = kernel_handle(eng, ln.source)
            eng.launcher.set_args(h, *ln.args([src], [t], []))
            eng.launcher.launch(h, ln)
            eng.queue.finish()
            self._reordered[key] = t
        return t, True

    def desc_id(self, desc: Hashable) -> int:
        """A small int standing for an implementation descriptor in impl keys."""
        with self.lock:
            return self.desc_ids.setdefault(desc, len(self.desc_ids))

    def cached_impl(self, key: Hashable) -> Any:
        with self.lock:
            return self.impl_cache.get(key)

    def cache_impl(self, key: Hashable, impl: Any) -> None:
        with self.lock:
            self.impl_cache.add(key, impl)

    def store(self, table: dict, key: Hashable, value: Any, limit: int) -> None:
        """``table[key] = value`` for a table the requests share (step plans, a node's
        records), emptied first when it holds ``limit`` entries. Readers use ``dict.get``
        without the lock: the values are not changed once stored."""
        with self.lock:
            if len(table) >= limit:
                table.clear()
            table[key] = value

    def take_kernel(self, key: Hashable) -> Any:
        """A kernel object (``launcher.KernelHandle``) for ``key`` that a closed request left,
        now the caller's alone; None when there is none."""
        with self.lock:
            free = self._free_kernels.get(key)
            return free.pop() if free else None

    def give_back_kernels(self, kernels: Mapping[Hashable, Any]) -> None:
        """A closing request's kernel objects, for the next requests (at most
        FREE_KERNELS_PER_KEY kept per key), in new handles: their arguments are forgotten (the
        buffers they name belong to the request that is going). Never the request's own
        handles: a request in a reference cycle closes inside a cyclic garbage collection,
        which may have run its kernels' finalizers already (``KernelHandle.handed_on``)."""
        with self.lock:
            for key, h in kernels.items():
                free = self._free_kernels.setdefault(key, [])
                if len(free) < FREE_KERNELS_PER_KEY:
                    handed = h.handed_on()
                    if handed is not None:
                        free.append(handed)

    def symbolic_check_passed(self, binding_key: tuple) -> None:
        with self.lock:
            self.symbolic_checked.add(binding_key)

    def create_device_tensor(self, array: Any) -> DeviceTensor:
        """A copy of ``array`` in this model's device memory, to feed its requests without a
        host-to-device copy per inference (:mod:`~netpass.runtime.device_tensor`)."""
        if self.engine is None:
            raise DeviceError(f"{self.device} has no device memory for a device tensor")
        return DeviceTensor.from_array(self.engine, array)

    def create_infer_request(self) -> RuntimeInferRequest:
        return RuntimeInferRequest(self)

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return self.create_infer_request().infer(inputs)

    def __repr__(self) -> str:
        return f"<RuntimeCompiledModel on {self.device}: {self.inputs} -> {self.outputs}>"


class RuntimeInferRequest(AsyncInferRequest):
    """A request of a :class:`RuntimeCompiledModel`: ``infer({name: array}) -> {output name:
    array}``, or ``start_async`` then ``wait`` and ``results``
    (:mod:`~netpass.runtime.async_queue`); ``stats`` counts since creation. The variables of a
    stateful model are the request's, in device memory (:mod:`~netpass.runtime.state`):
    ``query_state()``, ``reset_state()``. ``compile_model``'s requests
    (:class:`netpass.compiler.InferRequest`) each wrap one, with the pre/post-processing."""

    def __init__(self, compiled: RuntimeCompiledModel) -> None:
        self.compiled = compiled
        self.network = Network(compiled) if compiled.engine is not None else None
        self._ref_stats = dict.fromkeys(STAT_KEYS, 0)
        self._ref_vars: dict[str, np.ndarray] = {}  # REFERENCE: the variables' values
        self._init_async()

    def __del__(self) -> None:
        # the network's primitives and pool point back at it: without this its device
        # buffers would live until a cyclic garbage collection
        network = getattr(self, "network", None)
        if network is not None:
            if network.engine.addresses is not None:  # (queued launches read buffers the
                with contextlib.suppress(Exception):   # driver does not know they use)
                    network.launcher.finish()
            network.close()

    @property
    def stats(self) -> dict[str, Any]:
        return self.network.stats if self.network is not None else self._ref_stats

    def _infer(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        try:  # (as system_errors_as_netpass, without a context manager per infer)
            feeds = check_feeds(inputs, self.compiled.feed_specs, contiguous=True)
            if self.compiled.state_lengths:
                check_state_lengths(self.compiled.state_lengths, feeds, self.state_length)
            if self.network is None:
                return self._infer_reference({k: np.asarray(v) for k, v in feeds.items()})
            return self.network.execute(feeds)
        except NetpassError:
            raise
        except SYSTEM_ERRORS as e:
            raise system_error_as_netpass(e, f"inferring on {self.compiled.device}") from e

    def enqueue(self, inputs: Mapping[str, Any], read: Collection[str] | None = None,
                device_outputs: Mapping[str, DeviceTensor] | None = None) -> PendingInference:
        """Enqueue one inference on ``inputs`` and return without waiting for the device
        (:mod:`~netpass.runtime.pending`): its ``result()`` holds the outputs named in
        ``read`` (default: all); ``device_outputs`` (``{output name: DeviceTensor}``) are
        copied into those tensors on the device, in order with the request's later
        inferences (one of which may take a tensor as an input). Errors found while
        enqueueing are raised here (the request stays usable), the device's at ``result()``.
        On the reference device it runs at once (no ``device_outputs`` there)."""
        if not self._busy.acquire(blocking=False):
            raise RequestBusyError("an inference refused: the infer request is busy with "
                                   "an inference")
        try:
            Deferred.check(self.compiled.outputs, read, device_outputs)
            if self.network is None:
                if device_outputs:
                    raise DeviceError(f"{self.compiled.device} has no device memory for "
                                      "device_outputs")
                outs = self._infer(inputs)
                return PendingInference.completed(
                    {k: v for k, v in outs.items() if read is None or k in read})
            net = self.network
            kept: list = [inputs]
            later = Deferred(read, device_outputs or {}, kept)
            net.later, net.launcher.keep = later, kept
            try:
                self._infer(inputs)
            finally:
                net.later = net.launcher.keep = None
                if later.pending is None:  # (failed: the device may still read ``kept``)
                    net.queue.finish()
            assert later.pending is not None  # (Network._finish made it)
            return later.pending
        finally:
            self._busy.release()

    def _infer_reference(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        values: dict[int, list[np.ndarray]] = {}
        prog = self.compiled.program
        written: dict[str, np.ndarray] = {}
        for n in prog.nodes:
            if n.is_parameter:
                values[n.index] = [feeds[n.name]]
            elif n.is_constant and n.value is not None:
                values[n.index] = [n.value]
            elif n.is_a(ReadValue) and n.state_var in self._ref_vars:
                values[n.index] = [self._ref_vars[n.state_var]]
            else:
                args = [values[s.index][k] for s, k in n.inputs]
                try:
                    values[n.index] = infer_host(n, args)
                except (NetpassError, *SYSTEM_ERRORS):
                    raise  # (_infer names a system error)
                except Exception as e:  # (an op's numpy evaluate refusing its inputs)
                    raise NetpassError(f"{n.kind} '{n.name}' failed with input shapes "
                                       f"{[list(a.shape) for a in args]}: "
                                       f"{type(e).__name__}: {e}") from e
                if n.is_a(Assign) and n.state_var is not None:
                    written[n.state_var] = np.array(values[n.index][0], copy=True)
        kept = [*feeds.values(), *self._ref_vars.values(),
                *(n.value for n in prog.nodes if n.is_constant and n.value is not None)]
        self._ref_vars.update(written)
        self._ref_stats["infers"] += 1
        return owned_outputs({r.name: values[r.index][0] for r in prog.outputs}, kept)

    # -- state ------------------------------------------------------------------------------------
    def state_length(self, variable_id: str, axis: int) -> int | None:
        """The length of a variable's state along ``axis`` (None: never set), from its shape
        on the host: no device read."""
        if self.network is None:
            value = self._ref_vars.get(variable_id)
            return None if value is None else value.shape[axis]
        shape = self.network.state.vars[variable_id].shape
        return None if shape is None else shape[axis]

    def reset_state(self) -> None:
        """Every variable back to its initial value (device buffers are kept for reuse)."""
        with self._exclusive("reset_state"):
            if self.network is None:
                self._ref_vars.clear()
            else:
                self.network.state.reset()

    def query_state(self) -> list[VariableState]:
        """One ``VariableState`` per variable (``.name``, ``.state`` read from the device,
        assignable, ``.reset()``), in the order of the model's ReadValues (of the program's
        when compiled from a Program). Each read, write
        or reset holds the request: RequestBusyError while an inference of it runs."""
        self._exclusive_check("query_state")
        if self.network is None:
            ref = self._ref_vars
            get, put, reset = (lambda v: ref[v].copy() if v in ref else None,
                               ref.__setitem__, lambda v: ref.pop(v, None))
        else:
            store = self.network.state
            get, put, reset = store.get, store.set, store.reset

        def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
            return self._guarded(fn, "a variable's read or write")

        def state(vid: str, info: VariableInfo) -> VariableState:
            return VariableState(info, lambda: get(vid), lambda arr: put(vid, arr),
                                 lambda: reset(vid)).guarded(guard)
        states: list[VariableState] = []
        seen: set[str] = set()
        for r in self.compiled.program.reads:
            vid = r.state_var
            if vid is not None and vid not in seen:  # (a ReadValue names its variable)
                seen.add(vid)
                states.append(state(vid, VariableInfo(vid, Type.of(r.out_dtypes[0]),
                                                      r.out_pshapes[0])))
        return in_variable_order(states, self.compiled.variable_order)

    def get_profiling_info(self) -> dict[str, float]:
        """Microseconds per primitive id (cumulative), when compiled with PROFILING."""
        return dict(self.stats.get("primitive_times_us", {}))


def compile_program(model_or_program: Any, device: str = "AUTO",
                    config: Mapping[str, Any] | None = None) -> RuntimeCompiledModel:
    """Compile a Model (lowered with :meth:`Program.from_model`) or a :class:`Program` for
    ``device`` (AUTO | GPU | CPU | REFERENCE; ``NETPASS_DEVICE`` overrides AUTO).

    Config keys: ``PROFILING`` (bool), ``IMPLS_CACHE_CAPACITY`` (int, default 300),
    ``MEM_PREALLOCATION_OPTIONS`` ("iters max_size max_dim_diff ratio" or a 4-tuple),
    ``FUSION`` (bool, default True), ``SYMBOLIC_SHAPES`` (bool, default True: shapes and
    shape values from the model's symbolic dims instead of running ShapeOf sub-graphs),
    ``STEP_PLANS`` (bool, default True: replay a symbolic binding's exec loop from its
    :class:`~netpass.runtime.step_plan.StepPlan`), ``DEBUG_CHECKS`` (bool, default: the
    ``NETPASS_DEBUG`` environment variable: check that every value a primitive reads was
    produced in the current infer, :mod:`netpass.runtime.invariants`), ``MAX_OUTPUT_BYTES``
    (int, default half the host's physical memory: an output over it raises
    OutputTooLargeError before it is allocated, :mod:`netpass.runtime.outputs`),
    ``HOST_FALLBACK`` (bool, default True: ops without a device kernel run on the host from
    their reference; False makes them a HostFallbackError naming the ops),
    ``INFERENCE_PRECISION_HINT`` (``"f32"``, default, or ``"tf32"``: float32 GEMMs and attention
    on TF32 tensor cores where the device has them, :mod:`netpass.runtime.kernels.mma`),
    ``PERSISTENT_STEPS`` (bool, default False: a decode step's kernels gathered into persistent
    kernels, :mod:`netpass.runtime.persistent`), ``DECODE_MLP_FUSION`` (``"gated"``, default,
    ``"all"`` or ``"none"``: :func:`mlp_fusion`), ``DECODE_PROJECTION_FUSION`` (bool, default
    False: :func:`projection_fusion`)."""
    cfg = dict(config or {})
    inference_precision(cfg)
    mlps = mlp_fusion(cfg)
    name = resolve_device_name(device)
    model = None
    if not isinstance(model_or_program, Program) \
            and not hasattr(model_or_program, "get_ordered_ops"):
        raise NetpassError(f"compile_program expects a Model or a Program, got "
                           f"{type(model_or_program).__name__}")
    # (the collector paused: each collection would rescan the growing program, which makes
    # building a large one super-linear; see core.gc_pause)
    with system_errors_as_netpass(f"compiling the runtime program for {name}"), gc_paused():
        if isinstance(model_or_program, Program):
            program = model_or_program
        else:
            model = model_or_program
            program = Program.from_model(model, fuse=bool(cfg.get("FUSION", True)), mlps=mlps,
                                         projections=projection_fusion(cfg))
        if name == "REFERENCE":
            return RuntimeCompiledModel(program, None, cfg, model)
        dev = select_device(name)
        engine = Engine.get(dev, profiling=bool(cfg.get("PROFILING", False)))
        return RuntimeCompiledModel(program, engine, cfg, model)
