"""The more architectures of ``tools/zoo_archs.py`` (tiny random-weight configs, both
exporters) through ``compile_model`` on ``RUNTIME_DEVICE``, against onnxruntime:

- per ``TRANSFORMATIONS`` setting (NONE, COMMON, GNA), one infer request over a sequence of
  input shapes within the spec's axes: the export sizes, the smallest, a mix, the largest,
  back to the smallest, a batch-only change and the mix again, every step within 1e-4
  relative L2 of onnxruntime;
- two threads, each with its own request of one compiled model, over that sequence in
  opposite orders, twice.

``DEFAULT`` runs in CI (an encoder with relative attention, a vision model with reduced
attention, a full speech encoder-decoder); the others are ``slow``, and the slow
shape-sequence fuzzing of ``test_shape_fuzz.py`` draws on all of them.
"""
from __future__ import annotations

import threading

import export_zoo
import numpy as np
import pytest
from zoo_cases import ARCH_PAIRS, SPECS, assert_close, case_id

import netpass
from netpass.testing import RUNTIME_DEVICE

DEFAULT = {("deberta_v2", "torchscript"), ("segformer", "dynamo"), ("whisper", "dynamo")}


def _params():
    return [pytest.param(pair, id=case_id(*pair),
                         marks=[] if pair in DEFAULT else [pytest.mark.slow])
            for pair in ARCH_PAIRS]


def shape_sequence(spec: export_zoo.ZooSpec) -> list[dict[str, int]]:
    """Seven steps, five different shapes, two of them met again after others."""
    export = spec.export_sizes()
    low = {a.name: a.lo for a in spec.axes}
    high = {a.name: a.hi for a in spec.axes}
    mixed = {a.name: a.sizes()[-1 if i % 2 else len(a.sizes()) // 2]
             for i, a in enumerate(spec.axes)}
    batch = spec.axes[0]
    other_batch = export | {batch.name: batch.hi if export[batch.name] != batch.hi else batch.lo}
    return [export, low, mixed, high, low, other_batch, mixed]


def _feeds(name: str) -> list[dict[str, np.ndarray]]:
    spec = SPECS[name]
    rng = np.random.default_rng(1)
    return [export_zoo.feeds(spec.domain, sizes, rng) for sizes in shape_sequence(spec)]


@pytest.mark.parametrize("transformations", ["NONE", "COMMON", "GNA"])
@pytest.mark.parametrize("zoo_case", _params(), indirect=True)
def test_one_request_follows_onnxruntime(zoo, zoo_case, transformations):
    name, exporter = zoo_case
    compiled = netpass.compile_model(zoo.model(name, exporter), device=RUNTIME_DEVICE,
                                     config={"TRANSFORMATIONS": transformations})
    req = compiled.create_infer_request()
    for step, feeds in enumerate(_feeds(name)):
        assert_close(req.infer(feeds), zoo.expected(name, exporter, feeds),
                     f"step {step} {shape_sequence(SPECS[name])[step]}")


@pytest.mark.parametrize("zoo_case", _params(), indirect=True)
def test_two_threads_follow_onnxruntime(zoo, zoo_case):
    name, exporter = zoo_case
    compiled = netpass.compile_model(zoo.model(name, exporter), device=RUNTIME_DEVICE,
                                     config={"TRANSFORMATIONS": "NONE"})
    steps = _feeds(name)
    want = [zoo.expected(name, exporter, feeds) for feeds in steps]
    orders = [list(range(len(steps))) * 2, list(reversed(range(len(steps)))) * 2]
    errors: list[str] = []

    def run(thread: int) -> None:
        req = compiled.create_infer_request()
        try:
            for step in orders[thread]:
                assert_close(req.infer(steps[step]), want[step], f"thread {thread} step {step}")
        except Exception as e:  # (reported by the main thread)
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
