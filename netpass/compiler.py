"""``compile_model``: the whole flow from a model to something that runs.

read -> GNA pipeline (or CommonOptimizations) -> pre/post split -> legacy network and passes
-> graph compiler -> runtime program on the chosen device. The user's model is not changed.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .core.containers import api_value, is_container
from .core.feeds import Outputs
from .core.gc_pause import gc_paused
from .core.graph_util import check_unique_names
from .core.model import Model
from .core.shape import PartialShape
from .core.state_lengths import check_state_lengths
from .core.types import Type, convert_values
from .errors import (
    SYSTEM_ERRORS,
    DeviceError,
    NetpassError,
    system_error_as_netpass,
    system_errors_as_netpass,
)
from .frontend import read_model
from .ops.state import variable_order
from .reference import (
    check_inputs,
    in_variable_order,
    input_specs,
    output_aliases,
    state_length_rules,
)
from .runtime.async_queue import AsyncInferRequest, RequestBusyError
from .runtime.pending import PendingInference

TRANSFORMATIONS = ("GNA", "COMMON", "NONE")


@dataclass(frozen=True)
class Port:
    """A compiled model's input or output: its name, partial shape and element type."""

    name: str
    partial_shape: PartialShape
    element_type: Type

    def get_any_name(self) -> str:
        return self.name


def apply_transformations(model: Model, which: str) -> None:
    """Run the ngraph pipeline ``which`` (GNA, COMMON or NONE, any case) on ``model`` in place
    and re-infer its shapes."""
    from .passes import Manager
    which = which.upper()
    manager = Manager()
    if which == "GNA":
        from .ngraph_passes.gna import GnaTransformationsPipeline
        manager.register_pass(GnaTransformationsPipeline())
    elif which == "COMMON":
        from .ngraph_passes.common import CommonOptimizations
        manager.register_pass(CommonOptimizations())
    manager.run_passes(model)
    model.validate_nodes_and_infer_types()


class CompiledModel:
    """The result of :func:`compile_model`; create infer requests from it."""

    def __init__(self, original: Model, transformed: Model, prepost: Any, network: Any,
                 executable: Model, runtime: Any, device: str, legacy_log: list[str],
                 input_types: Mapping[str, Type] | None = None) -> None:
        self.original = original
        self.transformed = transformed
        self.prepost = prepost
        self.network = network
        self.executable = executable
        self.runtime = runtime
        self.device = device
        self.legacy_log = legacy_log
        self.inputs = [Port(n, p.output(0).partial_shape, p.output(0).element_type)
                       for n, p in zip(original.input_names, original.parameters)]
        self.input_specs = input_specs(original)  # (checked on every infer)
        self.state_lengths = state_length_rules(original, executable)  # (checked on every infer)
        self.variable_order = variable_order(original)  # (query_state's, whatever the device)
        self.outputs = [Port(n, r.input_value(0).partial_shape, r.input_value(0).element_type)
                        for n, r in zip(original.output_names, original.results)]
        self.output_aliases = output_aliases(original)  # (an output's other tensor names)
        # Inputs whose element type a transformation changed (the GNA pipeline's
        # RemoveInputConvert takes a float Convert into the Parameter): converted on the host.
        self.feed_types = {n: t.dtype for n, t in (input_types or {}).items()
                           if t.dtype is not None and
                           t is not original.parameters[original.input_names.index(n)]
                           .output(0).element_type}

    def create_infer_request(self) -> InferRequest:
        return InferRequest(self)

    def create_device_tensor(self, array: Any) -> Any:
        """A copy of ``array`` in the device's memory (``netpass.runtime.DeviceTensor``), fed
        to this model's requests without a host-to-device copy per inference; an input with
        host pre-processing reads it back first."""
        if self.runtime is None:
            raise DeviceError(f"{self.device} has no device memory for a device tensor")
        return self.runtime.create_device_tensor(array)

    def dump(self, directory: str | Path) -> list[Path]:
        """Write the graph at each stage (svg where graphviz is present, and IR xml)."""
        from .legacy_passes import dump_network
        from .passes import Serialize, VisualizeTree
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        stages = [("0_original", self.original), ("1_transformed", self.transformed),
                  ("3_executable", self.executable)]
        stages += [(f"2_prepost_{i}", m) for i, m in enumerate(self.prepost.values())]
        for stem, model in stages:
            Serialize(str(d / f"{stem}.xml"), str(d / f"{stem}.bin")).run_on_model(model)
            written.append(d / f"{stem}.xml")
            try:
                VisualizeTree(str(d / f"{stem}.svg")).run_on_model(model)
                written.append(d / f"{stem}.svg")
            except NetpassError:
                VisualizeTree(str(d / f"{stem}.dot")).run_on_model(model)
                written.append(d / f"{stem}.dot")
        dump_network(self.network, d / "2_legacy")
        written += [d / "2_legacy.dot", d / "2_legacy.xml"]
        return written


class InferRequest(AsyncInferRequest):
    """One inference context: pre-processing on the host, the device graph, post-processing.
    ``infer(inputs)``, or ``start_async(inputs)`` then ``wait()`` and ``results``
    (:mod:`netpass.runtime.async_queue`); requests of one compiled model run concurrently.
    The variables of a stateful model belong to the request (``reset_state``,
    ``query_state``)."""

    def __init__(self, compiled: CompiledModel) -> None:
        from .reference import ReferenceInferRequest
        self.compiled = compiled
        self._runtime_request = compiled.runtime.create_infer_request() \
            if compiled.runtime is not None else None
        self._reference_request = ReferenceInferRequest(compiled.executable) \
            if compiled.runtime is None else None
        self._host = {"host_preprocess_s": 0.0, "host_postprocess_s": 0.0, "infers": 0}
        self._init_async()

    def _infer(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return self._run(inputs, None)

    def enqueue(self, inputs: Mapping[str, Any], read: Collection[str] | None = None,
                device_outputs: Mapping[str, Any] | None = None) -> Any:
        """Enqueue one inference and return a ``PendingInference`` without waiting for the
        device (:mod:`netpass.runtime.pending`: ``result()`` holds the outputs named in
        ``read``, default all; ``device_outputs`` are copied into device tensors on the
        device); the reference device runs it at once. While it is pending, the request's
        other calls run after it (nothing waits)."""
        if not self._busy.acquire(blocking=False):
            raise RequestBusyError("an inference refused: the infer request is busy with "
                                   "an inference")
        try:
            hosted = [n for n in device_outputs or {} if n in self.compiled.prepost.outputs]
            if hosted:
                raise NetpassError(f"enqueue: outputs {hosted} are post-processed on the host: "
                                   "they cannot stay on the device (device_outputs)")
            return self._run(inputs, (read, device_outputs))
        finally:
            self._busy.release()

    def _run(self, inputs: Mapping[str, Any], enqueue: tuple | None) -> Any:
        """One inference (``enqueue``: None, or the (read, device_outputs) of a pending one,
        returned as a PendingInference whose result is post-processed when taken)."""
        cm = self.compiled
        try:  # (as system_errors_as_netpass, without a context manager per infer)
            feeds = check_inputs(cm.original, inputs, cm.input_specs)
            if cm.state_lengths:
                check_state_lengths(cm.state_lengths, feeds, self._state_length)
            for name, dtype in cm.feed_types.items():
                feeds[name] = np.asarray(feeds[name]).astype(dtype)
            t0 = time.perf_counter()
            feeds = cm.prepost.preprocess(feeds)
            t1 = time.perf_counter()
            self._host["host_preprocess_s"] += t1 - t0
            if enqueue is not None:
                if self._runtime_request is not None:
                    pending = self._runtime_request.enqueue(feeds, *enqueue)
                else:
                    assert self._reference_request is not None  # (__init__ makes one)
                    if enqueue[1]:
                        raise DeviceError(f"{cm.device} has no device memory for "
                                          "device_outputs")
                    outs = self._reference_request.infer(feeds)
                    pending = PendingInference.completed(
                        {k: v for k, v in outs.items() if enqueue[0] is None or k in enqueue[0]})
                self._host["infers"] += 1
                return pending.then(self._post)
            if self._reference_request is not None:
                outs = self._reference_request.infer(feeds)
            elif self._runtime_request is not None:  # (__init__ makes exactly one of the two)
                outs = self._runtime_request.infer(feeds)
        except NetpassError:
            raise
        except SYSTEM_ERRORS as e:
            raise system_error_as_netpass(e, f"inferring on {cm.device}") from e
        self._host["infers"] += 1
        return self._post(outs)

    def _post(self, outs: Mapping[str, Any]) -> Outputs:
        """The device's outputs post-processed on the host. An output keeps the original
        model's element type where a transformation dropped a final Convert
        (RemoveOutputConvert) or the device computes in another precision."""
        cm = self.compiled
        t0 = time.perf_counter()
        outs = cm.prepost.postprocess(outs)
        self._host["host_postprocess_s"] += time.perf_counter() - t0
        return Outputs({port.name: _as_dtype(outs[port.name], port.element_type)
                        for port in cm.outputs if port.name in outs}, cm.output_aliases)

    def _state_length(self, variable_id: str, axis: int) -> int | None:
        """A variable's length along ``axis`` (None: never set), as the request holding it
        knows it on the host (called during an inference, so not through _state_owner)."""
        owner = self._reference_request if self._reference_request is not None \
            else self._runtime_request
        return owner.state_length(variable_id, axis) if owner is not None else None

    def reset_state(self) -> None:
        """Every variable of the model back to its initial value."""
        with self._exclusive("reset_state"):
            self._state_owner().reset_state()

    def query_state(self) -> list:
        """One ``VariableState`` (``.name``, ``.state``, ``.reset()``) per variable, in the order
        of the compiled model's ReadValues on every device; each read, write or reset holds
        the request (RequestBusyError while an inference of it runs)."""
        self._exclusive_check("query_state")
        states = in_variable_order(self._state_owner().query_state(),
                                   self.compiled.variable_order)

        def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
            return self._guarded(fn, "a variable's read or write")
        return [s.guarded(guard) for s in states]

    def _state_owner(self) -> Any:
        """The request holding the variables (the reference evaluator's, or the runtime's in
        device memory)."""
        return self._reference_request if self._reference_request is not None \
            else self._runtime_request

    @property
    def stats(self) -> dict[str, Any]:
        base = dict(self._runtime_request.stats) if self._runtime_request is not None else {}
        base.update(self._host)
        return base


def _as_dtype(value: Any, et: Type) -> Any:
    if is_container(et):  # a box in the runtime; a list, None or a value for the caller
        return api_value(value, et)
    if et.dtype is None or not isinstance(value, np.ndarray) or value.dtype == et.dtype:
        return value
    return convert_values(value, et)


COMPILE_STAGES = ("reading", "transformations", "pre/post-processing split", "legacy conversion",
                  "legacy passes", "legacy to model", "runtime program")

Progress = Callable[[str, int, int], None] | logging.Logger | None


def _progress_reporter(progress: Progress) -> Callable[[str], None]:
    """``report(stage)``: tells ``progress`` that ``stage`` (one of COMPILE_STAGES, or "done")
    starts: a callable gets ``(stage, step, total)`` (step 1..total, "done" with total), a
    logger an INFO line."""
    total = len(COMPILE_STAGES)

    def report(stage: str) -> None:
        step = total if stage == "done" else COMPILE_STAGES.index(stage) + 1
        if isinstance(progress, logging.Logger):
            progress.info("compile_model: %s (%d/%d)", stage, step, total)
        elif progress is not None:
            progress(stage, step, total)
    return report


def compile_model(model: Any, device: str = "AUTO", config: Mapping[str, Any] | None = None,
                  progress: Progress = None) -> CompiledModel:
    """Compile ``model`` (a Model or anything ``read_model`` reads) for ``device``.

    ``config``: ``TRANSFORMATIONS`` = ``"GNA"`` (default: the GNA layout pipeline),
    ``"COMMON"`` (CommonOptimizations only) or ``"NONE"``; other keys go to the runtime
    (e.g. ``PROFILING``); ``LEGACY_DUMP_DIR`` dumps the legacy network after each legacy pass.
    ``progress``: told as each stage of COMPILE_STAGES starts and when all are done, for a
    progress line on long compiles: a callable ``progress(stage, step, total)`` or a
    ``logging.Logger`` (INFO lines).
    """
    from .legacy_passes import convert_to_legacy, run_legacy_passes
    from .prepost import split_pre_post_processing
    from .runtime.device import resolve_device_name
    from .runtime.graph_compiler import legacy_to_model
    report = _progress_reporter(progress)
    cfg = dict(config or {})
    which = str(cfg.pop("TRANSFORMATIONS", "GNA")).upper()
    if which not in TRANSFORMATIONS:
        raise NetpassError(f"unknown TRANSFORMATIONS '{which}'; use one of {TRANSFORMATIONS}")
    dump_dir = cfg.pop("LEGACY_DUMP_DIR", None)
    device = resolve_device_name(device)  # (before the work: a bad name fails at once)
    report("reading")
    original = read_model(model) if not isinstance(model, Model) else model
    check_unique_names(original)  # (the user's names: found by name, a clash loses one)
    # (the collector paused: it would rescan the growing graphs, see core.gc_pause)
    with system_errors_as_netpass(f"compiling model '{original.friendly_name}'"), gc_paused():
        report("transformations")
        transformed = original.clone()
        # (an output's name, where the user's model does not set it, follows its producer:
        # pinned here, or a pass replacing the producer renames the output the user asks for)
        for result, name in zip(transformed.results, original.output_names):
            result.friendly_name = name
        apply_transformations(transformed, which)
        input_types = {n: p.output(0).element_type
                       for n, p in zip(transformed.input_names, transformed.parameters)}
        report("pre/post-processing split")
        prepost = split_pre_post_processing(transformed)
        report("legacy conversion")
        network = convert_to_legacy(transformed)
        report("legacy passes")
        legacy_log = run_legacy_passes(network, dump_dir=dump_dir)
        report("legacy to model")
        executable = legacy_to_model(network)
    runtime = None
    report("runtime program")
    if device != "REFERENCE":
        from .runtime import compile_program
        runtime = compile_program(executable, device=device, config=cfg)
    report("done")
    return CompiledModel(original, transformed, prepost, network, executable, runtime, device,
                         legacy_log, input_types)
