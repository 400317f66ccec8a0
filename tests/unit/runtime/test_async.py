"""start_async / wait on infer requests and AsyncInferQueue (netpass.runtime.async_queue), on
both ways to a compiled model (netpass.compile_model and runtime.compile_program) and on the
OpenCL and REFERENCE devices."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.errors import InputError, NetpassError
from netpass.runtime import AsyncInferQueue, RequestBusyError, compile_program
from netpass.testing import RUNTIME_DEVICE


def _model() -> Model:
    """y = relu(x @ w + 1), x [?, 8]."""
    x = opset.parameter([-1, 8], np.float32, name="x")
    w = np.random.default_rng(3).standard_normal((8, 5)).astype(np.float32)
    y = opset.relu(opset.add(opset.matmul(x, w, False, False), np.float32(1.0)))
    return Model([opset.result(y, name="y")], [x], "mlp")


def _feeds(rng, rows: int) -> dict:
    return {"x": rng.standard_normal((rows, 8)).astype(np.float32)}


COMPILERS = {
    "compile_model": lambda m, d: netpass.compile_model(m, d),
    "runtime": lambda m, d: compile_program(m, d),
}
CASES = [(way, dev) for way in COMPILERS for dev in (RUNTIME_DEVICE, "REFERENCE")]


@pytest.fixture(params=CASES, ids=[f"{w}-{d}" for w, d in CASES])
def compiled(request):
    way, device = request.param
    return COMPILERS[way](_model(), device)


def _expected(feeds: dict) -> np.ndarray:
    return netpass.reference.infer(_model(), feeds)["y"]


def test_start_async_then_wait_gives_the_outputs(compiled, rng):
    req = compiled.create_infer_request()
    feeds = _feeds(rng, 3)
    req.start_async(feeds)
    req.wait()
    np.testing.assert_allclose(req.results["y"], _expected(feeds), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(req.get_output(0), req.results["y"])
    np.testing.assert_array_equal(req.get_output("y"), req.results["y"])
    sync = req.infer(feeds)  # and the synchronous path on the same request after it
    np.testing.assert_array_equal(sync["y"], req.results["y"])


def test_inputs_are_copied_at_start(compiled, rng):
    """The caller may reuse its arrays as soon as start_async returns."""
    req = compiled.create_infer_request()
    feeds = _feeds(rng, 4)
    want = _expected(feeds)
    req.start_async(feeds)
    feeds["x"][:] = 0.0
    req.wait()
    np.testing.assert_allclose(req.results["y"], want, rtol=1e-5, atol=1e-6)


def test_callback_gets_userdata_after_the_inference(compiled, rng):
    req = compiled.create_infer_request()
    seen: list = []
    req.set_callback(lambda ud: seen.append((ud, req.results["y"].copy(),
                                             threading.current_thread() is threading.main_thread())))
    feeds = _feeds(rng, 2)
    req.start_async(feeds, userdata="job-1")
    req.wait()
    assert [s[0] for s in seen] == ["job-1"] and not seen[0][2]  # on the request's own thread
    np.testing.assert_allclose(seen[0][1], _expected(feeds), rtol=1e-5, atol=1e-6)
    req.set_callback(lambda ud: seen.append(ud), userdata="default")
    req.start_async(feeds)
    req.wait()
    assert seen[-1] == "default"


def test_an_error_surfaces_at_wait(compiled, rng):
    req = compiled.create_infer_request()
    req.start_async({"x": np.ones((2, 7), np.float32)})  # wrong last dim
    with pytest.raises(InputError, match="x"):
        req.wait()
    req.wait()  # reported once
    feeds = _feeds(rng, 2)
    req.start_async(feeds)  # the request works again
    req.wait()
    np.testing.assert_allclose(req.results["y"], _expected(feeds), rtol=1e-5, atol=1e-6)


def test_a_callback_error_surfaces_at_wait_as_netpass_error(compiled, rng):
    req = compiled.create_infer_request()
    req.set_callback(lambda ud: 1 / 0)
    req.start_async(_feeds(rng, 2))
    with pytest.raises(NetpassError, match="callback raised: ZeroDivisionError"):
        req.wait()


def test_a_busy_request_refuses_another_inference(compiled, rng):
    req = compiled.create_infer_request()
    gate = threading.Event()
    req.set_callback(lambda ud: gate.wait(30))  # holds the request busy until released
    req.start_async(_feeds(rng, 2))
    with pytest.raises(RequestBusyError):
        req.infer(_feeds(rng, 2))
    with pytest.raises(RequestBusyError):
        req.start_async(_feeds(rng, 2))
    assert not req.wait_for(0.01)
    gate.set()
    assert req.wait_for(30)


def test_queue_runs_every_job_with_its_userdata(compiled, rng):
    queue = AsyncInferQueue(compiled, 3)
    assert len(queue) == 3 and len(list(queue)) == 3
    got: dict = {}
    lock = threading.Lock()

    def done(request, userdata):
        with lock:
            got[userdata] = request.results["y"].copy()

    queue.set_callback(done)
    jobs = {i: _feeds(rng, 1 + i % 4) for i in range(20)}
    for i, feeds in jobs.items():
        queue.start_async(feeds, userdata=i)
    queue.wait_all()
    assert sorted(got) == list(range(20))
    for i, feeds in jobs.items():
        np.testing.assert_allclose(got[i], _expected(feeds), rtol=1e-5, atol=1e-6)
    assert queue.is_ready() and 0 <= queue.get_idle_request_id() < 3
    assert set(queue.userdata) <= set(range(20))


def test_queue_reports_a_failed_job_at_wait_all(compiled, rng):
    queue = AsyncInferQueue(compiled, 2)
    done: list = []
    queue.set_callback(lambda req, ud: done.append(ud))
    queue.start_async(_feeds(rng, 2), userdata="good")
    queue.start_async({"x": np.ones((2, 3), np.float32)}, userdata="bad")
    queue.start_async(_feeds(rng, 3), userdata="also good")
    with pytest.raises(InputError):
        queue.wait_all()
    assert sorted(done) == ["also good", "good"]
    queue.wait_all()  # the error was reported once
    queue.start_async(_feeds(rng, 1), userdata="after")
    queue.wait_all()
    assert done[-1] == "after"


def test_queue_callback_error_is_a_netpass_error(compiled, rng):
    queue = AsyncInferQueue(compiled, 2)
    queue.set_callback(lambda req, ud: {}["missing"])
    queue.start_async(_feeds(rng, 2), userdata=7)
    with pytest.raises(NetpassError, match="KeyError"):
        queue.wait_all()


def test_queue_is_exported_where_users_reach_it():
    assert netpass.AsyncInferQueue is AsyncInferQueue
    from netpass.runtime import AsyncInferQueue as from_runtime
    assert from_runtime is AsyncInferQueue


# -- waiting from inside a callback (each of these hung for good) ----------------------------
def test_wait_inside_the_requests_own_callback_is_an_error(compiled, rng):
    req = compiled.create_infer_request()
    seen: list = []

    def callback(_):
        for wait in (req.wait, lambda: req.wait_for(1.0)):
            try:
                wait()
            except NetpassError as e:
                seen.append(str(e))
    req.set_callback(callback)
    req.start_async(_feeds(rng, 2))
    req.wait()
    assert len(seen) == 2 and all("inside the infer request's own callback" in s for s in seen)


def test_queue_wait_all_inside_a_callback_is_an_error(compiled, rng):
    queue = AsyncInferQueue(compiled, 2)
    queue.set_callback(lambda req, ud: queue.wait_all())
    queue.start_async(_feeds(rng, 2), userdata="job")
    with pytest.raises(NetpassError, match=r"wait_all\(\) called inside a callback"):
        queue.wait_all()


@pytest.mark.parametrize("jobs", [1, 2])
def test_queue_start_async_from_callbacks_chains_or_is_refused_when_all_wait(compiled, rng,
                                                                             jobs):
    """Each callback starts the next job: with a request idle it runs (a chain of 4), and
    once every request is busy in a callback waiting for an idle one, the last to wait gets
    a NetpassError (jobs=1: the first callback already; it hung)."""
    queue = AsyncInferQueue(compiled, jobs)
    done: list = []
    feeds = _feeds(rng, 3)

    def chain(req, userdata):
        done.append(userdata)
        if userdata < 3:
            queue.start_async(feeds, userdata + 1)
    queue.set_callback(chain)
    if jobs == 1:
        queue.start_async(feeds, 0)
        with pytest.raises(NetpassError, match=r"start_async\(\) in a callback: all 1 requests"):
            queue.wait_all()
        assert done == [0]
        return
    queue.start_async(feeds, 0)
    queue.wait_all()  # (each callback starts the next job before its request is idle)
    assert done == [0, 1, 2, 3]


@pytest.mark.parametrize("jobs", [None, "2", 2.5, -1])
def test_queue_jobs_must_be_a_count(compiled, jobs):
    with pytest.raises(NetpassError, match="jobs must be an integer >= 0"):
        AsyncInferQueue(compiled, jobs)
