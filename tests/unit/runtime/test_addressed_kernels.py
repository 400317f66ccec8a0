"""Kernels taking their buffers as device addresses in their one struct argument
(``kernels.address_buffers``, ``runtime.addresses``, ``launcher.kernel_handle``)."""
from __future__ import annotations

import gc

import numpy as np
import pytest

from netpass import Model, opset
from netpass.runtime import compile_program, kernels
from netpass.runtime.addresses import AddressBook
from netpass.runtime.device import Engine, select_device
from netpass.runtime.impls import Launch
from netpass.runtime.launcher import (
    RETIRED_MAX,
    DirectLauncher,
    Launcher,
    built_source,
    kernel_handle,
)
from netpass.testing import RUNTIME_DEVICE

SOURCE = """
__kernel void axpb(__global float* restrict y, int yo, __global const float* x, int xo, int n,
                   int b) {
    int i = get_global_id(0);
    if (i < n) y[yo + i] = 2.0f * x[xo + i] + (float)b;
}
"""


@pytest.fixture(scope="module")
def engine():
    eng = Engine.get(select_device(RUNTIME_DEVICE))
    if eng.addresses is None:
        pytest.skip("this device takes no buffer addresses")
    return eng


def _packed(text: str = SOURCE, name: str = "axpb") -> kernels.Source:
    return kernels.pack_scalars(kernels.Source(text, name))


def _launch(gws: tuple, lws: tuple) -> Launch:
    return Launch(_packed(), gws, lws, [])


def test_the_buffers_become_the_structs_first_fields():
    src = kernels.address_buffers(_packed())
    assert src is not None and (src.n_buffers, src.n_ints) == (2, 4)
    assert "void axpb(const Args_axpb kargs)" in src.text
    assert ("typedef struct { ulong kaddr0; ulong kaddr1; int yo; int xo; int n; int b; } "
            "Args_axpb;") in src.text
    assert "__global float* restrict y = (__global float*)kargs.kaddr0;" in src.text
    assert "__global const float* x = (__global const float*)kargs.kaddr1;" in src.text


def test_a_kernel_without_ints_gets_a_struct_of_addresses():
    src = kernels.address_buffers(_packed(
        "__kernel void cp(__global float* y, __global const float* x) "
        "{ y[get_global_id(0)] = x[get_global_id(0)]; }", "cp"))
    assert src is not None
    assert "typedef struct { ulong kaddr0; ulong kaddr1; } Args_cp;" in src.text
    assert "void cp(const Args_cp kargs)" in src.text


@pytest.mark.parametrize("param", ["__local float* t", "__constant float* t"])
def test_a_buffer_outside_global_memory_keeps_buffer_arguments(param):
    text = f"__kernel void k(__global float* y, {param}, int n) {{ y[0] = t[n]; }}"
    assert kernels.address_buffers(_packed(text, "k")) is None


def test_a_kernel_without_buffers_is_left_as_it_is():
    assert kernels.address_buffers(_packed("__kernel void k(int n) { }", "k")) is None


@pytest.mark.parametrize("cls", [Launcher, DirectLauncher])
def test_an_addressed_kernel_computes_and_sets_only_what_changed(engine, cls, rng):
    cl = engine.cl
    x = rng.standard_normal(100).astype(np.float32)
    xs = engine.allocate(x.nbytes)
    cl.enqueue_copy(engine.queue, xs.buffer, x)
    ys = [engine.allocate(x.nbytes) for _ in range(2)]
    launcher, h = cls(engine), kernel_handle(engine, _packed())
    assert h.args is not None
    ln = _launch((128,), (64,))
    for y, b, n in ((ys[0], 3, 100), (ys[1], -1, 40), (ys[1], 5, 60)):
        assert launcher.set_args(h, [y.buffer, xs.buffer], [0, 0, n, b])
        assert not launcher.set_args(h, [y.buffer, xs.buffer], [0, 0, n, b])
        launcher.launch(h, ln)
        out = np.empty(100, np.float32)
        cl.enqueue_copy(launcher.queue, out, y.buffer)
        np.testing.assert_allclose(out[:n], 2 * x[:n] + b, rtol=1e-6)


def test_moving_ints_from_a_c_array_keep_the_addresses(engine, rng):
    cl = engine.cl
    x = rng.standard_normal(64).astype(np.float32)
    xs, ys = engine.allocate(x.nbytes), engine.allocate(x.nbytes)
    cl.enqueue_copy(engine.queue, xs.buffer, x)
    launcher, h = DirectLauncher(engine), kernel_handle(engine, _packed())
    launcher.set_args(h, [ys.buffer, xs.buffer], [0, 0, 64, 0])
    view = (np.ctypeslib.ctypes.c_int32 * 4)(0, 0, 64, 7)
    launcher.set_int_view(h, view)
    assert h.ints is view
    launcher.launch(h, _launch((64,), (64,)))
    out = np.empty(64, np.float32)
    cl.enqueue_copy(launcher.queue, out, ys.buffer)
    np.testing.assert_allclose(out, 2 * x + 7, rtol=1e-6)


def test_an_address_is_kept_while_its_allocation_lives(engine):
    book = engine.addresses
    alloc = engine.allocate(256)
    key = alloc.buffer.int_ptr
    (address,) = book.of([alloc.buffer])
    assert book._known[key] == address and address != 0
    del alloc
    gc.collect()
    assert key not in book._known and key not in book._live


def test_a_struct_past_the_devices_parameter_size_keeps_buffer_arguments(engine, monkeypatch):
    src = _packed()
    assert built_source(engine, src) is not src
    monkeypatch.setattr(engine, "max_parameter_size", 8 * 2 + 4 * 4)
    assert built_source(engine, src) is src
    assert kernel_handle(engine, src).args is None


def test_a_miss_reads_every_live_allocation_at_once(engine):
    book = engine.addresses
    allocs = [engine.allocate(64 * (i + 1)) for i in range(20)]
    book.of([allocs[0].buffer])
    assert all(a.buffer.int_ptr in book._known for a in allocs)
    addresses = book.of([a.buffer for a in allocs])
    assert len(set(addresses)) == 20


def test_replaced_buffers_are_kept_until_the_queue_ran(engine):
    launcher, h = DirectLauncher(engine), kernel_handle(engine, _packed())
    a, b = engine.allocate(256), engine.allocate(256)
    launcher.set_args(h, [a.buffer, a.buffer], [0, 0, 0, 0])
    launcher.set_args(h, [b.buffer, b.buffer], [0, 0, 0, 0])
    assert launcher.retired == [[a.buffer, a.buffer]]
    launcher.finish()
    assert launcher.retired == []
    for i in range(RETIRED_MAX + 1):  # past the bound: the queue is waited for, the list let go
        launcher.set_args(h, [(a, b)[i % 2].buffer] * 2, [0, 0, 0, 0])
    assert len(launcher.retired) <= 1


def test_address_arguments_can_be_turned_off(engine, monkeypatch):
    monkeypatch.setenv("NETPASS_ADDRESS_ARGS", "0")
    assert AddressBook.make(engine) is None


def test_a_request_dropped_with_work_queued_lets_it_run_first(engine, rng):
    """Its buffers are freed as it goes, and the driver does not know the queued launches
    read them: the request's queue is run out before."""
    x = opset.parameter([-1, 768], np.float32, name="x")
    y = x
    for _ in range(4):
        w = rng.standard_normal((768, 768)).astype(np.float32) / 28
        y = opset.relu(opset.matmul(y, w, False, False))
    req = compile_program(Model([opset.result(y, name="y")], [x]), RUNTIME_DEVICE) \
        .create_infer_request()
    feeds = {"x": rng.standard_normal((512, 768)).astype(np.float32)}
    expected = req.infer(feeds)["y"]
    pending = req.enqueue(feeds)
    del req
    gc.collect()
    assert pending.done()
    np.testing.assert_allclose(pending.result()["y"], expected, rtol=1e-5, atol=1e-6)
