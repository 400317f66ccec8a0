"""Many infer requests on one compiled model (issue 12): each gives the outputs it would give
alone, whatever the other requests did before or do at the same time, in any order and from
any thread. Outputs are compared with onnxruntime on the same file (relative L2 <= 1e-4)."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import netpass
from netpass.runtime import compile_program
from netpass.testing import RUNTIME_DEVICE

ort = pytest.importorskip("onnxruntime")

TOL = 1e-4
TRANSFORMER = "examples/transformer_block.onnx"  # x [batch, seq, 64] -> y
LSTM = "examples/lstm_speech.onnx"  # features [1, time, 40] -> logits


def _rel_l2(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12))


class Oracle:
    """onnxruntime's outputs for a model, per input shape (inputs drawn once per shape)."""

    def __init__(self, path: str) -> None:
        self.sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.input = self.sess.get_inputs()[0]
        self._cases: dict = {}

    def case(self, batch: int, length: int) -> tuple[dict, np.ndarray]:
        key = (batch, length)
        if key not in self._cases:
            rng = np.random.default_rng(batch * 1000 + length)
            shape = [batch if d == "batch" else length if isinstance(d, str) else d
                     for d in self.input.shape]
            feeds = {self.input.name: rng.standard_normal(shape).astype(np.float32)}
            self._cases[key] = (feeds, self.sess.run(None, feeds)[0])
        return self._cases[key]

    def check(self, out: dict, batch: int, length: int, where: str) -> None:
        ref = self.case(batch, length)[1]
        got = next(iter(out.values()))
        assert got.shape == ref.shape, (where, got.shape, ref.shape)
        assert _rel_l2(got, ref) <= TOL, (where, _rel_l2(got, ref))


@pytest.fixture(scope="module")
def oracles():
    return {TRANSFORMER: Oracle(TRANSFORMER), LSTM: Oracle(LSTM)}


@pytest.mark.parametrize("config", [{}, {"STEP_PLANS": False}])
@pytest.mark.parametrize("through", ["compile_model", "runtime"])
def test_a_new_request_after_another_one_grew(oracles, config, through):
    """The issue's repro: request 1 infers lengths 1, 2, 3, 4, 5, 4, then a new request on
    the same compiled model infers 4 (it used to replay request 1's step plan with request
    1's state: a missing weights cache, then wrong outputs)."""
    oracle = oracles[TRANSFORMER]
    if through == "compile_model":
        cm = netpass.compile_model(TRANSFORMER, RUNTIME_DEVICE, dict(config))
    else:
        cm = compile_program(netpass.read_model(TRANSFORMER), RUNTIME_DEVICE, dict(config))
    first = cm.create_infer_request()
    for n in (1, 2, 3, 4, 5, 4):
        oracle.check(first.infer(oracle.case(1, n)[0]), 1, n, f"request 1, length {n}")
    second = cm.create_infer_request()
    oracle.check(second.infer(oracle.case(1, 4)[0]), 1, 4, "request 2, length 4")
    oracle.check(first.infer(oracle.case(1, 3)[0]), 1, 3, "request 1 again, length 3")


@st.composite
def schedules(draw, batches: tuple[int, ...]):
    """(number of requests, [(request, batch, length), ...]): lengths with repeats, so that
    records and step plans are built by one request and met by another."""
    n = draw(st.integers(1, 4))
    lengths = draw(st.lists(st.integers(1, 9), min_size=2, max_size=5, unique=True))
    steps = draw(st.lists(st.tuples(st.integers(0, n - 1), st.sampled_from(batches),
                                    st.sampled_from(lengths)), min_size=6, max_size=16))
    return n, steps


def _interleaved(oracle: Oracle, cm, schedule) -> None:
    n, steps = schedule
    requests = [cm.create_infer_request() for _ in range(n)]
    for t, (r, batch, length) in enumerate(steps):
        out = requests[r].infer(oracle.case(batch, length)[0])
        oracle.check(out, batch, length, f"step {t}: request {r}, shape ({batch}, {length})")


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(schedule=schedules((1, 2)))
def test_interleaved_requests_transformer_block(oracles, schedule):
    _interleaved(oracles[TRANSFORMER], netpass.compile_model(TRANSFORMER, RUNTIME_DEVICE), schedule)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(schedule=schedules((1,)))
def test_interleaved_requests_lstm_speech(oracles, schedule):
    _interleaved(oracles[LSTM], netpass.compile_model(LSTM, RUNTIME_DEVICE), schedule)


@pytest.mark.parametrize("threads", [2, 4])
def test_threads_each_with_its_own_request(oracles, threads):
    """Every thread infers 500 times on its own request of one compiled model, random
    lengths; every output is checked."""
    oracle = oracles[TRANSFORMER]
    cm = netpass.compile_model(TRANSFORMER, RUNTIME_DEVICE)
    shapes = [(1, n) for n in (1, 2, 3, 5, 8, 13)] + [(2, 4)]
    for b, n in shapes:
        oracle.case(b, n)  # (onnxruntime runs before the threads start)
    failures: list = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        req = cm.create_infer_request()
        try:
            for i in range(500):
                b, n = shapes[rng.integers(len(shapes))]
                oracle.check(req.infer(oracle.case(b, n)[0]), b, n, f"thread {seed}, infer {i}")
        except Exception as e:  # reported by the main thread
            failures.append(e)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not failures, failures[0]
