"""Outputs as the request hands them back (netpass.runtime.outputs): the MAX_OUTPUT_BYTES limit
checked before allocating, arrays written in place on a host-memory device, returned arrays
never touched again, and Broadcast / Tile without output-sized index maps."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.errors import NetpassError, OutputTooLargeError
from netpass.runtime import compile_program, staging
from netpass.runtime import network as network_module
from netpass.runtime.device import Engine
from netpass.runtime.outputs import default_max_output_bytes
from netpass.testing import RUNTIME_DEVICE


def _expand_model() -> Model:
    """y = Broadcast(x [1, 4], target from the input ``shape``): an output sized at run time."""
    x = opset.parameter([1, 4], np.float32, name="x")
    shape = opset.parameter([2], np.int64, name="shape")
    return Model([opset.result(opset.broadcast(x, shape), name="y")], [x, shape])


def _mlp() -> Model:
    x = opset.parameter([-1, 8], np.float32, name="x")
    w = np.random.default_rng(5).standard_normal((8, 6)).astype(np.float32)
    y = opset.relu(opset.add(opset.matmul(x, w, False, False), np.float32(0.5)))
    return Model([opset.result(y, name="y"), opset.result(opset.sigmoid(x), name="s")], [x])


def test_an_output_over_the_limit_is_refused_before_it_is_allocated(monkeypatch):
    sizes: list[int] = []
    alloc, alloc_host = Engine.allocate, Engine.allocate_host
    monkeypatch.setattr(Engine, "allocate", lambda self, n, *a, **k: sizes.append(n) or alloc(self, n, *a, **k))
    monkeypatch.setattr(Engine, "allocate_host", lambda self, shape, dt, *a, **k:
                        sizes.append(int(np.prod(shape)) * np.dtype(dt).itemsize)
                        or alloc_host(self, shape, dt, *a, **k))
    req = compile_program(_expand_model(), RUNTIME_DEVICE, {"MAX_OUTPUT_BYTES": 1 << 20}) \
        .create_infer_request()
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    small = req.infer({"x": x, "shape": np.array([64, 4], np.int64)})["y"]
    np.testing.assert_array_equal(small, np.broadcast_to(x, (64, 4)))
    with pytest.raises(OutputTooLargeError) as err:
        req.infer({"x": x, "shape": np.array([1 << 17, 4], np.int64)})  # 2 MiB
    e = err.value
    assert e.output == "y" and e.shape == (1 << 17, 4) and e.nbytes == 2 << 20 and e.limit == 1 << 20
    assert "output 'y'" in str(e) and "[131072, 4]" in str(e) and "MAX_OUTPUT_BYTES" in str(e)
    assert max(sizes) < 1 << 20
    again = req.infer({"x": x, "shape": np.array([3, 4], np.int64)})["y"]  # the request still works
    np.testing.assert_array_equal(again, np.broadcast_to(x, (3, 4)))


def test_the_limit_goes_through_compile_model():
    cm = netpass.compile_model(_expand_model(), RUNTIME_DEVICE, {"MAX_OUTPUT_BYTES": 1000})
    with pytest.raises(OutputTooLargeError, match="output 'y'"):
        cm.create_infer_request().infer({"x": np.ones((1, 4), np.float32),
                                         "shape": np.array([100, 4], np.int64)})


@pytest.mark.parametrize("bad", [0, -5, "lots", True])
def test_a_bad_limit_is_a_clear_error(bad):
    with pytest.raises(NetpassError, match="MAX_OUTPUT_BYTES"):
        compile_program(_mlp(), "REFERENCE", {"MAX_OUTPUT_BYTES": bad})


def test_the_default_limit_is_half_the_host_memory():
    import os
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert default_max_output_bytes() == total // 2
    assert compile_program(_mlp(), "REFERENCE").max_output_bytes == total // 2


@pytest.mark.parametrize("zero_copy_from", [0, 1 << 20])
def test_returned_arrays_are_never_written_again(zero_copy_from, rng, monkeypatch):
    """Whatever the path (first shapes, symbolic records, step-plan replays; written in place
    or copied), an array handed back keeps its values while the request goes on."""
    from netpass.runtime import outputs
    monkeypatch.setattr(outputs, "ZERO_COPY_MIN_BYTES", zero_copy_from)
    model = _mlp()
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    kept = []
    for rows in (2, 3, 2, 3, 2, 3, 4, 2):
        feeds = {"x": rng.standard_normal((rows, 8)).astype(np.float32)}
        out = req.infer(feeds)
        kept.append((out, netpass.reference.infer(model, feeds)))
    for out, ref in kept:
        for name in ref:
            np.testing.assert_allclose(out[name], ref[name], rtol=1e-5, atol=1e-6)


def test_outputs_are_written_in_place_on_a_host_memory_device(rng, monkeypatch):
    """PoCL: the kernels write the arrays the request returns; nothing is read into a new
    array (the copy path is made to fail). (Outputs from ZERO_COPY_MIN_BYTES on: here all.)"""
    from netpass.runtime import outputs
    monkeypatch.setattr(outputs, "ZERO_COPY_MIN_BYTES", 0)
    req = compile_program(_mlp(), RUNTIME_DEVICE).create_infer_request()
    if not req.network.engine.host_memory:
        pytest.skip("the device's memory is not the host's")

    def no_copy(*args):
        raise AssertionError("an output was copied")

    monkeypatch.setattr(network_module, "new_host_array", no_copy)
    for rows in (1, 5, 5, 2):
        feeds = {"x": rng.standard_normal((rows, 8)).astype(np.float32)}
        out = req.infer(feeds)
        ref = netpass.reference.infer(_mlp(), feeds)
        np.testing.assert_allclose(out["y"], ref["y"], rtol=1e-5, atol=1e-6)
        assert out["y"].flags.owndata and out["y"].flags.writeable


def _pinned_request(monkeypatch, model):
    """A request of ``model`` with a pinned staging region as a GPU's (PoCL's memory is the
    host's: forced), in-place outputs off."""
    from netpass.runtime import outputs
    monkeypatch.setattr(outputs, "ZERO_COPY_MIN_BYTES", 1 << 40)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    net = req.network
    net.staging = staging.PinnedStaging(net.engine, net.queue)
    return req, net


def test_large_outputs_are_read_through_the_pinned_region(rng, monkeypatch):
    """A request whose device memory is not the host's reads its large outputs into its own
    pinned region, then copies them into new arrays: each returned array is the caller's (the
    next infer reuses the region), the region grows to the largest wait and no further. Forced
    on PoCL (in-place outputs off, every read large)."""
    monkeypatch.setattr(staging, "PINNED_MIN_BYTES", 0)
    model = _mlp()
    req, net = _pinned_request(monkeypatch, model)
    kept, sizes = [], []
    for rows in (2, 70, 3, 70, 1):
        feeds = {"x": rng.standard_normal((rows, 8)).astype(np.float32)}
        out = req.infer(feeds)
        assert all(a.flags.owndata for a in out.values())
        sizes.append(net.staging.region.nbytes)
        kept.append((out, netpass.reference.infer(model, feeds)))
    for out, ref in kept:
        for name in ref:
            np.testing.assert_allclose(out[name], ref[name], rtol=1e-5, atol=1e-6)
    # y and s in 256-byte spans: 2 rows 256 + 256 bytes, 70 rows 1792 + 2304
    assert sizes == [512, 4096, 4096, 4096, 4096]


def test_reads_past_the_pinned_limit_go_straight_to_their_arrays(rng, monkeypatch):
    """Outputs from PINNED_MAX_BYTES on are read into their arrays directly: the region stays
    as the small reads left it (forced on PoCL, as above)."""
    from netpass.runtime import outputs
    monkeypatch.setattr(outputs, "ZERO_COPY_MIN_BYTES", 1 << 40)
    monkeypatch.setattr(staging, "PINNED_MIN_BYTES", 0)
    monkeypatch.setattr(staging, "PINNED_MAX_BYTES", 1000)
    model = _mlp()
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    net = req.network
    net.staging = staging.PinnedStaging(net.engine, net.queue)
    for rows in (2, 70):  # (70 rows: 1680 and 2240 bytes)
        feeds = {"x": rng.standard_normal((rows, 8)).astype(np.float32)}
        out, ref = req.infer(feeds), netpass.reference.infer(model, feeds)
        for name in ref:
            np.testing.assert_allclose(out[name], ref[name], rtol=1e-5, atol=1e-6)
        assert net.staging.region.nbytes == 512


@pytest.mark.parametrize("enqueued", [False, True], ids=["infer", "enqueue"])
@pytest.mark.parametrize("rows", [3, 1024])  # (1024 x 512 floats: written in place on PoCL)
def test_an_output_returned_twice_is_two_arrays(rng, rows, enqueued):
    x = opset.parameter([-1, 512], np.float32, name="x")
    r = opset.relu(x)
    model = Model([opset.result(r, name="a"), opset.result(r, name="b")], [x])
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    feeds = {"x": rng.standard_normal((rows, 512)).astype(np.float32)}
    out = req.enqueue(feeds).result() if enqueued else req.infer(feeds)
    assert out["a"] is not out["b"]
    np.testing.assert_array_equal(out["a"], np.maximum(feeds["x"], 0))
    np.testing.assert_array_equal(out["b"], np.maximum(feeds["x"], 0))


def test_a_constant_output_is_a_copy():
    x = opset.parameter([2], np.float32, name="x")
    model = Model([opset.result(opset.constant(np.arange(6, dtype=np.float32)), name="c"),
                   opset.result(opset.relu(x), name="y")], [x])
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    first = req.infer({"x": np.ones(2, np.float32)})["c"]
    first[:] = -1
    np.testing.assert_array_equal(req.infer({"x": np.ones(2, np.float32)})["c"], np.arange(6))


@pytest.mark.parametrize("mode,x_shape,target,mapping", [
    ("numpy", (1, 4), (6, 4), None),
    ("numpy", (3, 1, 5), (2, 3, 4, 5), None),
    ("bidirectional", (3, 1), (1, 5), None),
    ("explicit", (3,), (2, 3, 4), (1,)),
])
def test_broadcast_is_a_strided_copy(mode, x_shape, target, mapping, rng):
    x = opset.parameter(list(x_shape), np.float32, name="x")
    y = opset.broadcast(x, np.array(target, np.int64), None if mapping is None else np.array(mapping, np.int64),
                        mode=mode)
    model = Model([opset.result(y, name="y")], [x])
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    np.testing.assert_array_equal(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"])
    impl = next(i.impl for i in req.network.insts if i.node.kind == "Broadcast")
    assert impl is not None and not impl.buffers  # no index map


@pytest.mark.parametrize("x_shape,reps", [((2, 3), (3, 2)), ((4,), (2, 1, 3)), ((2, 1, 3), (2,))])
def test_tile_is_a_strided_copy(x_shape, reps, rng):
    x = opset.parameter(list(x_shape), np.float32, name="x")
    model = Model([opset.result(opset.tile(x, np.array(reps, np.int64)), name="y")], [x])
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    np.testing.assert_array_equal(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"])
    impl = next(i.impl for i in req.network.insts if i.node.kind == "Tile")
    assert impl is not None and not impl.buffers


def test_enqueued_small_outputs_are_read_into_pinned_slots(rng, monkeypatch):
    """An inference not waited for (``enqueue``) reads its small outputs into the request's
    pinned slots (a read into pageable memory makes NVIDIA's driver wait at the enqueue) and
    copies them out at ``result()``; each slot is given back when its result is taken or
    dropped, and with every slot held a read goes to pageable memory, still right. Forced on
    PoCL (in-place outputs off, a pinned staging on a host-memory device)."""
    monkeypatch.setattr(staging, "SLOTS", 3)
    model = _mlp()
    req, net = _pinned_request(monkeypatch, model)
    feeds = [{"x": rng.standard_normal((rows, 8)).astype(np.float32)} for rows in (2, 1, 3, 2)]
    pending = [req.enqueue(f) for f in feeds]  # 8 small reads, 3 slots: 5 go to pageable memory
    assert len(net.staging._free) == 0
    for p, f in zip(reversed(pending), reversed(feeds)):
        got, want = p.result(), netpass.reference.infer(model, f)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
            assert got[name].flags.owndata
    assert sorted(net.staging._free) == [0, 1, 2]
    dropped = req.enqueue(feeds[0])
    assert len(net.staging._free) == 1
    del dropped
    assert sorted(net.staging._free) == [0, 1, 2]
