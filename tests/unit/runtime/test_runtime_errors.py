"""Every error out of the runtime's public API is a NetpassError: no recursion on graph depth
(deep graphs compile and run under a small recursion limit), and failed allocations or system
errors come out as netpass.errors exceptions naming what was being done."""
from __future__ import annotations

import contextlib
import inspect
import sys

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.errors import AllocationError, FileAccessError, NetpassError, ResourceLimitError
from netpass.runtime import compile_program
from netpass.runtime.device import Engine
from netpass.testing import RUNTIME_DEVICE

DEPTH = 1500  # above Python's default recursion limit of 1000


@contextlib.contextmanager
def recursion_limit(frames: int):
    """Python's recursion limit at ``frames`` more than the caller's depth."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _reshape_chain(n: int) -> Model:
    """The issue's case: ``n`` chained Reshapes (a RecursionError in Program before)."""
    x = opset.parameter([-1, 4], np.float32, name="x")
    v = x.output(0)
    for i in range(n):
        v = opset.reshape(v, np.array([-1, 4] if i % 2 else [4, -1], np.int64), False).output(0)
    return Model([opset.result(opset.relu(v), name="y")], [x])


def _relu_chain(n: int) -> Model:
    x = opset.parameter([-1, 8], np.float32, name="x")
    v = x.output(0)
    for i in range(n):
        v = opset.relu(opset.add(v, np.float32(0.001 * (i % 7)))).output(0)
    return Model([opset.result(v, name="y")], [x])


def _split_reshape_chain(n: int) -> Model:
    """Split pieces read by a MatMul through ``n`` Reshapes keeping the leading dims (the
    strided-view readers walk that chain)."""
    x = opset.parameter([2, -1, 16], np.float32, name="x")
    a, b = opset.split(x, np.int64(-1), 2).outputs()
    for i in range(n):
        a = opset.reshape(a, np.array([0, 0, 8] if i % 2 else [0, 0, 2, 4], np.int64), True).output(0)
    a = opset.reshape(a, np.array([0, 0, 8], np.int64), True)
    return Model([opset.result(opset.matmul(a, b, False, True), name="y")], [x])


@pytest.mark.parametrize("build,shape", [(_reshape_chain, (4, 4)), (_relu_chain, (3, 8)),
                                         (_split_reshape_chain, (2, 5, 16))],
                         ids=["reshapes", "relus", "split-reshapes"])
def test_deep_graphs_compile_and_run_without_recursion(build, shape, rng):
    model = build(DEPTH)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    want = netpass.reference.infer(model, feeds)["y"]
    with recursion_limit(200):  # the runtime's own frames: not one per node
        cm = compile_program(model, RUNTIME_DEVICE)
        got = cm.create_infer_request().infer(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_deep_reshape_chain_through_compile_model(rng):
    model = _reshape_chain(DEPTH)
    feeds = {"x": rng.standard_normal((4, 4)).astype(np.float32)}
    got = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"}) \
        .create_infer_request().infer(feeds)["y"]
    np.testing.assert_allclose(got, netpass.reference.infer(model, feeds)["y"], rtol=1e-6)


def _mlp() -> Model:
    x = opset.parameter([-1, 8], np.float32, name="x")
    w = np.random.default_rng(2).standard_normal((8, 8)).astype(np.float32)
    return Model([opset.result(opset.tanh(opset.matmul(x, w, False, False)), name="y")], [x])


def test_a_device_allocation_failure_names_what_was_allocated(monkeypatch, rng):
    import pyopencl as cl
    req = compile_program(_mlp(), RUNTIME_DEVICE).create_infer_request()
    real = cl.Buffer

    def refuse(ctx, flags, size=0, hostbuf=None):
        if size >= 64 * 4 or (hostbuf is not None and hostbuf.nbytes >= 64 * 4):
            raise cl.MemoryError(cl._cl._ErrorRecord("clCreateBuffer", -4, "refused by the test"))
        return real(ctx, flags, size, hostbuf) if hostbuf is not None else real(ctx, flags, size)

    monkeypatch.setattr(cl, "Buffer", refuse)
    with pytest.raises(AllocationError) as err:
        req.infer({"x": rng.standard_normal((64, 8)).astype(np.float32)})
    assert "bytes for" in str(err.value) and isinstance(err.value, MemoryError)


def test_running_out_of_host_memory_in_a_primitive_is_an_allocation_error(monkeypatch, rng):
    """A host evaluation (here a host fallback made to fail) that runs out of memory."""
    from netpass.runtime.primitive import execute
    x = opset.parameter([-1, 4], np.int64, name="x")
    y = opset.one_hot(x, np.int64(5), np.float32(1), np.float32(0), -1)
    model = Model([opset.result(y, name="y")], [x])
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()

    def no_memory(node, arrays):
        raise MemoryError()

    monkeypatch.setattr(execute, "infer_host", no_memory)
    with pytest.raises(AllocationError, match="OneHot '.*' ran out of memory at runtime with input shapes"):
        req.infer({"x": rng.integers(0, 5, (3, 4))})


@pytest.mark.parametrize("raised,expected", [(MemoryError(), ResourceLimitError),
                                             (OSError(28, "No space left on device"), FileAccessError)])
def test_system_errors_in_a_kernel_build_are_netpass_errors(monkeypatch, raised, expected, rng):
    """A kernel build that fails with a system error (pyopencl's cache on a full disk) names
    the primitive."""
    def fail(self, source, stats=None):
        raise raised

    req = compile_program(_mlp(), RUNTIME_DEVICE).create_infer_request()
    monkeypatch.setattr(Engine, "build", fail)
    with pytest.raises(expected) as err:
        req.infer({"x": rng.standard_normal((3, 8)).astype(np.float32)})
    assert isinstance(err.value, NetpassError) and "MatMul '" in str(err.value)


def test_running_out_of_memory_while_compiling_names_it(monkeypatch):
    from netpass.runtime import Program

    def no_memory(cls, model, **options):
        raise MemoryError()

    monkeypatch.setattr(Program, "from_model", classmethod(no_memory))
    with pytest.raises(ResourceLimitError, match="compiling the runtime program"):
        compile_program(_mlp(), RUNTIME_DEVICE)


def _pairs() -> Model:
    """``relu(x)`` of ``x [d]`` reshaped to ``[d // 2, 2]`` (the target computed from ShapeOf):
    an odd ``d`` is not a reshape of its elements."""
    x = opset.parameter(["d"], np.float32, name="x")
    half = opset.divide(opset.shape_of(x, "i64"), opset.constant(np.array([2], np.int64)))
    target = opset.concat([half, opset.constant(np.array([2], np.int64))], 0)
    return Model([opset.result(opset.reshape(opset.relu(x), target, False), name="y")], [x])


@pytest.mark.parametrize("device", ["REFERENCE", RUNTIME_DEVICE])
def test_a_reshape_to_another_element_count_is_refused_and_the_request_goes_on(device):
    """(The runtime reshaped 3 elements to [1, 2] and 1 to [0, 2] without a word: its shape
    rule took the target as it came; on REFERENCE numpy's ValueError came out bare. A refused
    size in the middle of a sequence leaves the request as it was: the next sizes give the
    reference's outputs.)"""
    model = _pairs()
    req = compile_program(model, device).create_infer_request()
    for d in (4, 6, 8, 10, 3, 3, 12, 1, 5, 2):
        x = np.arange(1, d + 1, dtype=np.float32) - 2.5
        if d % 2:
            with pytest.raises(NetpassError, match=r"Reshape .*cannot reshape"):
                req.infer({"x": x})
            continue
        np.testing.assert_array_equal(req.infer({"x": x})["y"],
                                      netpass.reference.infer(model, {"x": x})["y"])
