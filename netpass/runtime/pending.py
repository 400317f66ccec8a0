"""Inferences that return without waiting for the device: ``enqueue`` on an infer request.

``infer`` enqueues an inference's kernels, then waits for the device to run them all and
reads its outputs back: the device idles while the host reads, uses the outputs and enqueues
the next inference, and the host idles while the device runs. A decoding loop whose next
token is chosen on the device (``netpass.generation.with_next_token``) has nothing to read
before the next step but that token, so the host can enqueue step t+1 while the device runs
step t (on NVIDIA's driver a step's ~60 enqueues cost about as much host time as the device
takes to run them).

``request.enqueue(feeds, read=None, device_outputs=None) -> PendingInference`` enqueues one
whole inference and returns: the outputs named in ``read`` (default: all) are read with
non-blocking reads, small ones (a token) into pinned slots of the request
(:class:`~netpass.runtime.staging.PinnedStaging`; a read into pageable memory would make
NVIDIA's driver wait for the device at the enqueue) copied out at ``result()``, others straight
into new host arrays (none through the request's pinned region, which the next inference
reuses), ``device_outputs`` (``{output name: DeviceTensor}``) are
copied on the device into tensors that a later inference may take as inputs, and a marker
event closes it. ``PendingInference.result()`` waits for that event (one host wait) and
returns the outputs; ``done()`` says whether it would return at once.

The request's command queue is in order: several inferences may be pending, each result
holds once its own event has completed, whatever order they are taken in; ``infer``,
``reset_state``, ``query_state`` and a variable's read or write while some are pending run
after them on the device, as if the pending ones had been taken first (nothing waits for
them; a pending result is not changed by what comes after it). What the device still reads
from the host (the feeds, the host values a step uploads) is held by the pending inference
until its result is taken or it is dropped after its event. An inference that needs a device
value on the host midway (a data-dependent shape, a host fallback) waits there as ``infer``
does; one with ``PROFILING`` or persistent steps' checks waits at its end (their records are
read then): both still return a PendingInference. The thread rules are ``infer``'s
(:mod:`~netpass.runtime.async_queue`): one enqueue at a time on a request (RequestBusyError
while another inference of it runs); ``result`` from any thread.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.feeds import is_device_array
from ..errors import DeviceError, NetpassError
from .staging import new_host_array

if TYPE_CHECKING:  # pragma: no cover
    from .network import Network


class PendingInference:
    """An enqueued inference (module docstring): ``result()`` (waits once), ``done()``."""

    __slots__ = ("_event", "_arrays", "_kept", "_stats", "_then", "_results", "_slots",
                 "_staging")

    def __init__(self, event: Any, arrays: list, kept: list, stats: dict | None,
                 slots: list | None = None, staging: Any = None) -> None:
        self._event = event      # the marker after its reads (None: nothing to wait for)
        self._arrays = arrays    # (output name, array read into, the tensor's strides or None)
        self._kept = kept        # host arrays the device may still read
        self._stats = stats      # the request's counters (host waits)
        self._then: list[Callable[[dict], dict]] = []  # applied to the outputs, in order
        self._results: dict[str, np.ndarray] | None = None
        # (array, pinned slot view, slot index) of the reads into staging's slots
        self._slots: list = slots or []
        self._staging = staging

    def __del__(self) -> None:
        self._give_slots()

    def _give_slots(self) -> None:
        """The pinned slots back to the request (a later read into one runs after this
        inference's on the in-order queue, so a dropped result gives them back too)."""
        slots, self._slots = self._slots, []
        for _, _, index in slots:
            self._staging.give_slot(index)

    @classmethod
    def completed(cls, results: dict[str, np.ndarray]) -> PendingInference:
        """One whose outputs are already on the host (the reference device)."""
        pending = cls(None, [(name, a, None) for name, a in results.items()], [], None)
        return pending

    def then(self, fn: Callable[[dict], dict]) -> PendingInference:
        """Apply ``fn`` to the outputs when they are taken (a compiled model's
        post-processing); returns self."""
        self._then.append(fn)
        return self

    def done(self) -> bool:
        """Whether ``result()`` would return without waiting for the device."""
        if self._results is not None or self._event is None:
            return True
        try:
            return self._event.command_execution_status <= 0  # (CL_COMPLETE, or an error)
        except Exception as e:
            raise DeviceError(f"querying an enqueued inference's status failed: "
                              f"{type(e).__name__}: {e}") from e

    def result(self) -> dict[str, np.ndarray]:
        """The outputs named at enqueue (``{name: array}``), waiting for the device once;
        a device failure is a DeviceError, raised again by a later call."""
        if self._results is not None:
            return self._results
        event = self._event
        if event is not None:
            t0 = time.perf_counter()
            try:
                event.wait()
                failed = event.command_execution_status < 0
            except Exception as e:
                raise DeviceError(f"waiting for an enqueued inference failed: "
                                  f"{type(e).__name__}: {e}") from e
            if failed:
                raise DeviceError("an enqueued inference failed on the device (its commands "
                                  "ended with an error status)")
            if self._stats is not None:
                self._stats["host_wait_s"] += time.perf_counter() - t0
                self._stats["host_waits"] += 1
        for arr, view, _ in self._slots:
            arr.reshape(-1).view(np.uint8)[:] = view
        self._give_slots()
        results = {}
        for name, arr, strides in self._arrays:
            if strides is not None:  # a permuted view: gather it from the region read
                shape, it = strides
                arr = np.lib.stride_tricks.as_strided(
                    arr, shape, tuple(s * arr.itemsize for s in it)).copy()
            results[name] = arr
        for fn in self._then:
            results = fn(results)
        self._results, self._event, self._arrays, self._kept = results, None, [], []
        return results

    def __repr__(self) -> str:
        state = "taken" if self._results is not None else "pending"
        return f"<PendingInference {state}: {[a[0] for a in self._arrays]}>"


class Deferred:
    """What ``enqueue`` asks of an inference's end instead of ``Network``'s blocking read:
    ``read`` (output names, None: all), ``into`` (``{output name: DeviceTensor}``) and the
    host arrays to hold (``kept``: the feeds, then whatever the launcher writes)."""

    def __init__(self, read: Collection[str] | None, into: Mapping[str, Any],
                 kept: list) -> None:
        self.read = read
        self.into = dict(into)
        self.kept = kept
        self.pending: PendingInference | None = None

    @staticmethod
    def check(outputs: list[str], read: Collection[str] | None,
              into: Mapping[str, Any] | None) -> None:
        """NetpassError for an output name ``read`` or ``into`` gives that the model lacks,
        or an ``into`` value that is not a device tensor."""
        for what, names in (("read", read or ()), ("device_outputs", into or {})):
            if isinstance(names, str):
                raise NetpassError(f"enqueue: {what} must be a collection of output names, "
                                   f"got the string '{names}'")
            unknown = [n for n in names if n not in outputs]
            if unknown:
                raise NetpassError(f"enqueue: {what} names {unknown}, which are not outputs "
                                   f"of the model: {outputs}")
        for name, t in (into or {}).items():
            if not is_device_array(t):
                raise NetpassError(f"enqueue: device_outputs['{name}'] must be a device tensor "
                                   f"(compiled_model.create_device_tensor), got "
                                   f"{type(t).__name__}")

    def enqueue_end(self, net: Network) -> None:
        """The device copies into ``into``, the reads of ``read``, the marker event: the
        PendingInference (``self.pending``). The outputs handed out are as ``infer``'s (an
        array the request keeps is copied; one written in place is handed over). With
        profiling or persistent steps' stop flag to check, the queue is waited for here, as
        ``infer`` waits (their records are read at once)."""
        persistent = net.persistent if net.persistent is not None and net.persistent.checking \
            else None
        if persistent is not None:
            persistent.before_wait()
        for r, (inst, k) in zip(net.program.outputs, net.output_refs):
            tensor = self.into.get(r.name)
            if tensor is not None:
                self._copy_into(net, inst, k, r.name, tensor)
        arrays: list = []
        slots: list = []
        given: set[int] = set()
        launcher = net.launcher
        staging = net.staging
        for r, (inst, k) in zip(net.program.outputs, net.output_refs):
            if self.read is not None and r.name not in self.read:
                continue
            strides = None
            host = inst.host[k]
            if inst.host_valid[k] and host is not None:
                arr = host
                if id(arr) in given or inst.keeps_host_arrays:
                    arr = arr.copy()
            else:
                t = inst.outputs[k]
                if t is None:
                    raise NetpassError(f"{inst.node.kind} '{inst.node.name}': no value for "
                                       f"output {k}")
                mem = t.alloc.host
                if mem is not None and t.offset == 0 and t.strides is None \
                        and mem.shape == t.shape and id(mem) not in given:
                    # (its memory: a read onto itself; a second name reads a copy)
                    arr = mem
                    inst.hand_over(k, arr)
                else:
                    arr = new_host_array(t, inst, k)
                    if t.strides is not None:
                        strides = (t.shape, t.strides)
                slot = staging.take_slot(arr.nbytes) if staging is not None and arr.size \
                    and arr is not mem else None
                if slot is not None:
                    launcher.read(slot[1], t.alloc.buffer, t.offset * t.dtype.itemsize)
                    slots.append((arr, slot[1], slot[0]))
                elif arr.size:
                    launcher.read(arr, t.alloc.buffer, t.offset * t.dtype.itemsize)
                inst.host_valid[k] = False  # (filled once the event completes)
            given.add(id(arr))
            arrays.append((r.name, arr, strides))
        event = net.engine.cl.enqueue_marker(net.queue)
        net.queue.flush()
        self.pending = PendingInference(event, arrays, self.kept, net.stats, slots, staging)
        if persistent is not None or net.profiling:
            self.pending.result()
            if persistent is not None:
                persistent.after_wait()

    @staticmethod
    def _copy_into(net: Network, inst: Any, k: int, name: str, tensor: Any) -> None:
        """Output ``name`` (``inst``'s output ``k``) copied on the device into ``tensor``."""
        shape = tuple(inst.out_shapes[k]) if inst.out_shapes else None
        dtype = np.dtype(inst.node.out_dtypes[k])
        if tensor.engine is not net.engine or shape != tensor.shape or dtype != tensor.dtype:
            raise NetpassError(f"enqueue: output '{name}' ({dtype} {list(shape or ())}) cannot "
                               f"go into {tensor!r}: it needs the same element type, shape and "
                               f"device")
        if not tensor.nbytes:
            return
        if inst.host_valid[k] and not inst.device_valid[k]:
            arr = np.ascontiguousarray(inst.host[k])
            net.launcher.write(tensor.alloc.buffer, 0, arr)  # (kept: the launcher's keep)
            return
        t = net.device_tensor(inst, k)
        if t is None:
            raise NetpassError(f"enqueue: output '{name}' has no value on the device")
        if t.strides is not None:
            raise NetpassError(f"enqueue: output '{name}' is a strided view on the device; "
                               f"device_outputs takes contiguous outputs only")
        net.launcher.copy(tensor.alloc.buffer, t.alloc.buffer, tensor.nbytes,
                          t.offset * t.dtype.itemsize)


__all__ = ["Deferred", "PendingInference"]
