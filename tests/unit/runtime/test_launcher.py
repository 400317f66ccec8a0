"""Kernel launchers (netpass.runtime.launcher): the direct ctypes enqueue and pyopencl's."""
from __future__ import annotations

import numpy as np
import pytest

from netpass.errors import DeviceError
from netpass.runtime import kernels
from netpass.runtime.device import Engine, select_device
from netpass.runtime.launcher import DirectLauncher, KernelHandle, Launcher, make_launcher
from netpass.testing import RUNTIME_DEVICE

SOURCE = """
__kernel void axpb(__global float* y, int yo, __global const float* x, int xo, int n, int b) {
    int i = get_global_id(0);
    if (i < n) y[yo + i] = 2.0f * x[xo + i] + (float)b;
}
"""


class _Launch:
    def __init__(self, gws, lws):
        self.gws, self.lws, self.cdims = gws, lws, None


@pytest.fixture(scope="module")
def engine():
    return Engine.get(select_device(RUNTIME_DEVICE))


def _kernel(engine):
    src = kernels.pack_scalars(kernels.Source(SOURCE, "axpb"))
    assert (src.n_buffers, src.n_ints) == (2, 4)
    return KernelHandle(engine.cl.Kernel(engine.build(src.text), "axpb"))


@pytest.mark.parametrize("cls", [Launcher, DirectLauncher])
def test_launch_computes_and_resets_changed_arguments(engine, cls, rng):
    cl = engine.cl
    x = rng.standard_normal(100).astype(np.float32)
    xb = cl.Buffer(engine.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
    yb = cl.Buffer(engine.context, cl.mem_flags.READ_WRITE, 4 * 100)
    launcher, h = cls(engine), _kernel(engine)
    ln = _Launch((128,), (64,))
    for b, n in ((3, 100), (-1, 40)):
        assert launcher.set_args(h, [yb, xb], [0, 0, n, b])
        assert not launcher.set_args(h, [yb, xb], [0, 0, n, b])  # nothing changed
        launcher.launch(h, ln)
        y = np.empty(100, np.float32)
        cl.enqueue_copy(engine.queue, y, yb)
        np.testing.assert_allclose(y[:n], 2 * x[:n] + b, rtol=1e-6)


def test_direct_launch_failure_names_the_kernel(engine):
    launcher, h = DirectLauncher(engine), _kernel(engine)
    cl = engine.cl
    buf = cl.Buffer(engine.context, cl.mem_flags.READ_WRITE, 64)
    launcher.set_args(h, [buf, buf], [0, 0, 1, 0])
    with pytest.raises(DeviceError, match="axpb"):
        launcher.launch(h, _Launch((100,), (64,)))  # global size not a multiple of local


def test_packed_kernel_keeps_its_body_and_names():
    src = kernels.pack_scalars(kernels.Source(SOURCE, "axpb"))
    assert "typedef struct { int yo; int xo; int n; int b; } Args_axpb;" in src.text
    assert "void axpb(__global float* y, __global const float* x, const Args_axpb kargs)" in src.text
    assert "int n = kargs.n;" in src.text and "if (i < n) y[yo + i]" in src.text


def test_make_launcher_takes_pyopencl_when_asked_or_profiling(engine, monkeypatch):
    monkeypatch.setenv("NETPASS_DIRECT_LAUNCH", "0")
    assert type(make_launcher(engine)) is Launcher
    monkeypatch.delenv("NETPASS_DIRECT_LAUNCH")
    assert type(make_launcher(engine)) is DirectLauncher
    profiling = Engine.get(select_device(RUNTIME_DEVICE), profiling=True)
    assert type(profiling.launcher) is Launcher


def test_kernel_without_ints_keeps_its_parameters():
    src = kernels.pack_scalars(kernels.Source("__kernel void f(__global float* y) { y[0] = 1.0f; }", "f"))
    assert (src.n_buffers, src.n_ints) == (1, 0) and "typedef" not in src.text


def test_non_int_scalar_parameter_is_refused():
    with pytest.raises(ValueError, match="float s"):
        kernels.pack_scalars(kernels.Source("__kernel void f(__global float* y, float s) { y[0] = s; }", "f"))


def test_launch_spec_maps_to_buffers_then_ints():
    """Tensors give their buffer and, among the ints, their offset (plus the spec's own);
    impl buffers give a buffer only; ints keep their order."""
    from netpass.runtime.impls import Launch
    from netpass.runtime.memory import Allocation, Tensor
    src = kernels.Source("", "k", 3, 4)
    ln = Launch(src, (64,), (64,), [("o", 0), 7, ("i", 1, 5), ("b", 0), 9])
    a, b, c = Allocation("A", 64), Allocation("B", 64), Allocation("C", 64)
    outs = [Tensor(a, 3, (4,), np.float32)]
    ins = [None, Tensor(b, 11, (4,), np.float32)]
    buffers, ints = ln.args(ins, outs, [], [c])
    assert buffers == ["A", "B", "C"]
    assert ints == [3, 7, 16, 9]


@pytest.mark.parametrize("cls", [Launcher, DirectLauncher])
def test_write_and_read_at_offsets(engine, cls, rng):
    launcher = cls(engine)
    buf = engine.cl.Buffer(engine.context, engine.cl.mem_flags.READ_WRITE, 4 * 64)
    x = rng.standard_normal(16).astype(np.float32)
    launcher.write(buf, 4 * 8, x)
    back = np.empty(16, np.float32)
    launcher.read(back, buf, 4 * 8)
    engine.queue.finish()
    np.testing.assert_array_equal(back, x)
