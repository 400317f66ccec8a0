"""Asynchronous inference, as OpenVINO's Python API has it: ``start_async`` / ``wait`` on an
infer request, and :class:`AsyncInferQueue`, a pool of requests of one compiled model.

Requests of one compiled model share nothing they change (``RuntimeCompiledModel``), so
several run at once, each on a thread of its own (one worker per request, made at its first
``start_async``) and an OpenCL command queue of its own. A request runs one inference at a
time: ``infer`` or ``start_async`` on a busy request raises :class:`RequestBusyError`, and so
do ``reset_state``, ``query_state`` and a ``VariableState``'s read, write or reset (on any
thread) while an inference of the request runs.
Errors of an asynchronous inference (and of its callback) surface at ``wait`` as a
:class:`~netpass.errors.NetpassError`.
"""
from __future__ import annotations

import operator
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..core.feeds import is_device_array
from ..errors import NetpassError


class RequestBusyError(NetpassError):
    """An infer request was asked to infer while an inference of it is running."""

    hint = "wait() for the request first, or use one request per thread (AsyncInferQueue)"


def _as_netpass_error(e: BaseException, what: str) -> NetpassError:
    if isinstance(e, NetpassError):
        return e
    err = NetpassError(f"{what}: {type(e).__name__}: {e}")
    err.__cause__ = e
    return err


def _copied(inputs: Any) -> Any:
    """A copy of each host array of ``inputs``, so that the caller may reuse its arrays;
    what cannot be copied (not a mapping, a ragged list, a view too large to copy) is kept
    as given, for the inference's input check to refuse by name at ``wait()``."""
    if not isinstance(inputs, Mapping):
        return inputs
    feeds = {}
    for k, v in inputs.items():
        try:
            feeds[k] = v if is_device_array(v) else np.array(v)
        except (ValueError, TypeError, MemoryError):
            feeds[k] = v
    return feeds


class AsyncInferRequest:
    """``infer``, ``start_async``, ``wait``, ``wait_for``, ``set_callback``, ``results`` and
    ``get_output`` over a subclass's ``_infer(inputs) -> {name: array}``."""

    def _init_async(self) -> None:
        self._busy = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._future: Future | None = None
        self._callback: Callable[[Any], None] | None = None
        self._callback_userdata: Any = None
        self._results: dict[str, np.ndarray] | None = None
        self._running = False  # an asynchronous inference has started and not returned yet
        self._worker: int | None = None  # the worker thread's ident while it runs a job

    def _infer(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:  # pragma: no cover
        raise NotImplementedError

    @contextmanager
    def _exclusive(self, what: str) -> Iterator[None]:
        """Hold the request for ``what`` (a read or write of its variables) until the block
        ends: RequestBusyError while an inference holds it. Holding it, not only checking
        that it is free, is what keeps a variable from being replaced under a running
        inference on another thread (that corrupted the request's buffers for good)."""
        if not self._busy.acquire(blocking=False):
            raise RequestBusyError(f"{what} refused: the infer request is busy with an "
                                   f"inference (its variables are in use by it)")
        try:
            yield
        finally:
            self._busy.release()

    def _exclusive_check(self, what: str) -> None:
        """RequestBusyError when an inference holds the request (for a call that only
        reads what the inference does not change)."""
        with self._exclusive(what):
            pass

    def _guarded(self, fn: Callable[..., Any], what: str) -> Callable[..., Any]:
        """``fn`` run while holding the request (:meth:`_exclusive`)."""
        def call(*args: Any) -> Any:
            with self._exclusive(what):
                return fn(*args)
        return call

    def infer(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run one inference and return ``{output name: array}`` (also kept in ``results``)."""
        if not self._busy.acquire(blocking=False):
            raise RequestBusyError("an inference refused: the infer request is busy with "
                                   "an inference")
        try:
            self._results = self._infer(inputs)
            return self._results
        finally:
            self._busy.release()

    def start_async(self, inputs: Mapping[str, Any], userdata: Any = None) -> None:
        """Start an inference on ``inputs`` (arrays are copied: the caller may reuse them at
        once; a DeviceTensor is read where it is, so it is not written until ``wait()``)
        and return; ``wait()`` for it. The callback set with ``set_callback`` runs when it
        is done, on the request's worker thread, with ``userdata`` (else the callback's
        own)."""
        if not self._busy.acquire(blocking=False):
            raise RequestBusyError("an inference refused: the infer request is busy with "
                                   "an inference")
        try:
            feeds = _copied(inputs)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="netpass-request")
            self._running = True
            self._future = self._executor.submit(self._job, feeds, userdata)
        except BaseException:
            self._running = False
            self._busy.release()
            raise

    def _job(self, feeds: dict, userdata: Any) -> None:
        self._worker = threading.get_ident()
        try:
            try:
                self._results = self._infer(feeds)
            finally:
                self._running = False
            callback = self._callback
            if callback is not None:
                try:
                    callback(self._callback_userdata if userdata is None else userdata)
                except Exception as e:
                    raise _as_netpass_error(e, "the infer request's callback raised") from e
        finally:
            self._worker = None
            self._busy.release()

    def _refuse_waiting_on_itself(self, what: str) -> None:
        """A NetpassError for ``what`` (``wait``) called by the request's own callback: the
        job it waits for ends only when that callback returns (it hung for good)."""
        if self._worker == threading.get_ident():
            raise NetpassError(f"{what}() called inside the infer request's own callback: it "
                               f"would wait for the callback itself")

    def wait(self) -> None:
        """Block until the asynchronous inference (and its callback) is done; its error, if
        any, is raised here as a NetpassError."""
        self._refuse_waiting_on_itself("wait")
        future, self._future = self._future, None
        if future is None:
            return
        e = future.exception()
        if e is not None:
            raise _as_netpass_error(e, "asynchronous inference failed") from e

    def wait_for(self, timeout: float) -> bool:
        """``wait()`` for at most ``timeout`` seconds; whether the inference is done."""
        self._refuse_waiting_on_itself("wait_for")
        future = self._future
        if future is None:
            return True
        try:
            future.exception(timeout=timeout)
        except TimeoutError:
            return False
        self.wait()
        return True

    def set_callback(self, callback: Callable[[Any], None] | None, userdata: Any = None) -> None:
        """``callback(userdata)`` after each asynchronous inference (None: no callback)."""
        self._callback, self._callback_userdata = callback, userdata

    @property
    def results(self) -> dict[str, np.ndarray]:
        """The outputs of the last inference (in a callback: of the one that just ended)."""
        if self._running:
            raise RequestBusyError("the infer request is still running: wait() first")
        if self._results is None:
            raise NetpassError("the infer request has not run an inference yet")
        return self._results

    def get_output(self, key: str | int = 0) -> np.ndarray:
        """One output of the last inference, by name or position."""
        res = self.results
        if isinstance(key, int):
            names = list(res)
            if not -len(names) <= key < len(names):
                raise NetpassError(f"output index {key} out of range: the model has "
                                   f"{len(names)} outputs")
            key = names[key]
        if key not in res:
            raise NetpassError(f"no output named '{key}'; outputs are {list(res)}")
        return res[key]


def default_jobs() -> int:
    """The pool size when none is given: the host's cores, at most 4."""
    return max(1, min(4, os.cpu_count() or 1))


class AsyncInferQueue:
    """A pool of ``jobs`` infer requests of ``compiled_model`` (OpenVINO's ``AsyncInferQueue``):
    ``start_async(inputs, userdata)`` runs on the next idle request (blocking while all are
    busy), ``set_callback(fn)`` calls ``fn(request, userdata)`` after each inference,
    ``wait_all()`` waits for all and raises the first error among them."""

    def __init__(self, compiled_model: Any, jobs: int = 0) -> None:
        try:
            n = operator.index(jobs)  # (an integer of any kind; not a float or a string)
        except TypeError:
            n = -1
        if n < 0:
            raise NetpassError(f"AsyncInferQueue: jobs must be an integer >= 0, got {jobs!r}")
        n = n or default_jobs()
        self._requests = [compiled_model.create_infer_request() for _ in range(n)]
        self._userdata: list[Any] = [None] * n
        self._idle = list(range(n))
        self._cond = threading.Condition()
        self._errors: list[NetpassError] = []
        self._callback: Callable[[Any, Any], None] | None = None
        self._in_callback: dict[int, int] = {}  # thread ident -> request whose callback it runs
        self._blocked: set[int] = set()  # requests whose callbacks wait in start_async
        for i, req in enumerate(self._requests):
            req.set_callback(self._make_callback(i))

    def _make_callback(self, i: int) -> Callable[[Any], None]:
        def call(userdata: Any) -> None:
            if self._callback is not None:
                me = threading.get_ident()
                self._in_callback[me] = i
                try:
                    self._callback(self._requests[i], userdata)
                finally:
                    del self._in_callback[me]
        return call

    def __len__(self) -> int:
        return len(self._requests)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._requests)

    def __getitem__(self, i: int) -> Any:
        return self._requests[i]

    @property
    def userdata(self) -> list[Any]:
        """The userdata of each request's last job."""
        return list(self._userdata)

    def set_callback(self, callback: Callable[[Any, Any], None] | None) -> None:
        """``callback(request, userdata)`` after each job, on the request's worker thread."""
        self._callback = callback

    def is_ready(self) -> bool:
        """Whether a request is idle (``start_async`` would not block)."""
        with self._cond:
            return bool(self._idle)

    def get_idle_request_id(self) -> int:
        """The id of an idle request, waiting for one."""
        with self._cond:
            self._wait_idle("get_idle_request_id")
            return self._idle[0]

    def _wait_idle(self, what: str) -> None:
        """Wait (holding ``_cond``) until a request is idle. From a callback too, unless every
        request is busy in a callback that waits here: none could become idle (a NetpassError
        naming ``what``, where it hung for good)."""
        me = self._in_callback.get(threading.get_ident())
        if me is not None:
            self._blocked.add(me)
            self._cond.notify_all()  # (the others re-check whether all are stuck)
        try:
            self._cond.wait_for(lambda: bool(self._idle)
                                or len(self._blocked) == len(self._requests))
        finally:
            if me is not None:
                self._blocked.discard(me)
        if not self._idle:
            raise NetpassError(f"AsyncInferQueue.{what}() in a callback: all "
                               f"{len(self._requests)} requests are busy in callbacks that "
                               f"wait for an idle one")

    def start_async(self, inputs: Mapping[str, Any], userdata: Any = None) -> None:
        """Run ``inputs`` on the next idle request (waiting for one; from a callback, see
        :meth:`_wait_idle`)."""
        with self._cond:
            self._wait_idle("start_async")
            i = self._idle.pop(0)
        self._userdata[i] = userdata
        req = self._requests[i]
        try:
            req.start_async(inputs, userdata)
        except BaseException:
            self._release(i, None)
            raise
        req._future.add_done_callback(lambda f, i=i: self._release(i, f))

    def _release(self, i: int, future: Future | None) -> None:
        with self._cond:
            if future is not None:
                self._requests[i]._future = None  # (its outcome is the queue's to report)
                e = future.exception()
                if e is not None:
                    self._errors.append(_as_netpass_error(
                        e, f"job with userdata {self._userdata[i]!r} failed"))
            self._idle.append(i)
            self._cond.notify_all()

    def wait_all(self) -> None:
        """Wait until every job is done; the first error of the jobs since the last
        ``wait_all`` is raised (as a NetpassError), the others are dropped. Not from a
        callback: its own request is busy until it returns (a NetpassError)."""
        if threading.get_ident() in self._in_callback:
            raise NetpassError("AsyncInferQueue.wait_all() called inside a callback: it would "
                               "wait for the callback's own request")
        with self._cond:
            self._cond.wait_for(lambda: len(self._idle) == len(self._requests))
            errors, self._errors = self._errors, []
        if errors:
            raise errors[0]
